"""Ctrl-C and exit statuses of the command line: a SIGINT at a random moment of ``attnstruct sweep`` or ``train``
(each over ``ATTNSTRUCT_SIGNAL_REPEATS`` seeds: 8 in ``make test``, 20 in ``make signals``, in a process of its own as a
user runs it) stops it with one line, exit status 130, nothing
half-written, and the same command then resumes; a sweep that scored nothing exits 1, and ``--strict`` any failure.
"""

import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest
import xarray as xr

from attnstruct import cli, interrupts
from attnstruct.checkpoints import sweep

SEEDS = range(int(os.environ.get("ATTNSTRUCT_SIGNAL_REPEATS", "8")))  # `make signals`: 20
N_MODELS = 24
SLOW_S = 0.03  # each hub answer this late: a sweep of N_MODELS takes a few seconds, so that Ctrl-C lands inside it
TINY_TRAIN = dict(
    objective="masked", source="synthetic-digits", steps=400, batch_size=8, lr=3e-3, warmup=5, log_every=10,
    eval_every=20, checkpoint_every=40, d_model=16, n_layers=1, n_heads=2, n_images=100,
)  # fmt: skip
TRAIN_ARGS = ["--task", "vision", *(f"--{k.replace('_', '-')}={v}" for k, v in TINY_TRAIN.items())]


def _start(*argv: str) -> subprocess.Popen:
    """``python -m attnstruct ARGV`` in a process of its own (one torch thread), stdout and stderr piped."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "attnstruct", *argv], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _interrupt(process: subprocess.Popen, ready, delay: float) -> tuple[int, str]:
    """Wait until ``ready()``, ``delay`` seconds more, then send SIGINT; the exit status and stderr."""
    deadline = time.monotonic() + 120
    while not ready() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(delay)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)
    return process.returncode, err


def _rerun(argv) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-m", "attnstruct", *argv], capture_output=True, text=True, timeout=120, env=env
    )


def _one_interrupted_line(status: int, err: str, prog: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert status == interrupts.EXIT_STATUS, f"exit status {status}, not 130; stderr:\n{err[-3000:]}"
    assert len(lines) == 1, f"{len(lines)} lines on stderr, not one:\n{err[-3000:]}"
    assert lines[0].startswith(f"{prog}: interrupted"), lines[0]
    assert "run the same command" in lines[0] and "Traceback" not in err
    return lines[0]


def _temporary_files(folder) -> list:
    return [p for p in folder.rglob("*") if ".tmp" in p.name]


@pytest.fixture
def slow_models(hub, repos, tmp_path):
    """A list of N_MODELS hub ids, each a tiny BERT, served slowly."""
    models = [f"slow/m{i:02d}" for i in range(N_MODELS)]
    for model in models:
        hub.add_folder(model, repos["tiny/bert"])
    hub.slow_down(SLOW_S)
    listing = tmp_path / "models.txt"
    listing.write_text("\n".join(models) + "\n")
    return listing, models


@pytest.mark.signals
@pytest.mark.parametrize("seed", SEEDS)
def test_ctrl_c_stops_a_sweep_in_one_line_with_130_and_the_same_command_resumes(slow_models, hub, tmp_path, seed):
    listing, models = slow_models
    out = tmp_path / "out"
    argv = ("sweep", str(listing), "--out", str(out), "--workers", "2")
    delay = random.Random(seed).uniform(0.0, 1.5)
    status, err = _interrupt(_start(*argv), lambda: (out / "models").is_dir(), delay)
    line = _one_interrupted_line(status, err, "attnstruct sweep")
    assert f"of {N_MODELS} models" in line
    assert not _temporary_files(out) and not (out / "sweep.nc").exists()
    written = sorted((out / "models").glob("*.nc"))
    for path in written:  # each file whole: it opens and holds its model
        with xr.open_dataset(path, engine="h5netcdf") as ds:
            assert sweep.file_stem(str(ds["model"].values[0])) == path.stem
    hub.slow_down(0)  # the resumed sweep served at full speed: only where Ctrl-C lands needs it slow
    again = _rerun(argv)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"{N_MODELS - len(written)} scored, {len(written)} done before, 0 failed" in again.stderr


@pytest.fixture(scope="module")
def uninterrupted_run(tmp_path_factory):
    """The dataset of the tiny run trained without a stop."""
    run_dir = tmp_path_factory.mktemp("uninterrupted") / "run"
    done = _rerun(("train", "--run-dir", str(run_dir), *TRAIN_ARGS))
    assert done.returncode == 0, done.stderr[-3000:]
    with xr.open_dataset(run_dir / "run.nc", engine="h5netcdf") as ds:
        return ds.load()


@pytest.mark.signals
@pytest.mark.training
@pytest.mark.parametrize("seed", SEEDS)
def test_ctrl_c_stops_training_in_one_line_with_130_and_the_same_command_resumes(uninterrupted_run, tmp_path, seed):
    run_dir = tmp_path / "run"
    argv = ("train", "--run-dir", str(run_dir), *TRAIN_ARGS)
    delay = random.Random(seed).uniform(0.0, 1.0)
    status, err = _interrupt(_start(*argv), run_dir.is_dir, delay)
    line = _one_interrupted_line(status, err, "attnstruct train")
    assert f"of {TINY_TRAIN['steps']}" in line
    assert not _temporary_files(run_dir) and not (run_dir / "run.nc").exists()
    resumed_at = int(line.rsplit(" ", 1)[1]) if "checkpoint at step" in line else 0
    assert (run_dir / "checkpoint.pt").is_file() == (resumed_at > 0)
    again = _rerun(argv)
    assert again.returncode == 0, again.stderr[-3000:]
    with xr.open_dataset(run_dir / "run.nc", engine="h5netcdf") as ds:
        assert ds.symmetry.values.tolist() == uninterrupted_run.symmetry.values.tolist()


@pytest.fixture
def half_missing(hub, repos, tmp_path):
    """A list of two models the hub has and two it has not."""
    listing = tmp_path / "models.txt"
    listing.write_text("tiny/bert\nnobody/missing-1\ntiny/gpt2\nnobody/missing-2\n")
    return listing


def test_a_sweep_in_which_every_model_failed_exits_1_in_one_line(hub, tmp_path, capsys):
    listing = tmp_path / "models.txt"
    listing.write_text("nobody/missing-1\nnobody/missing-2\n")
    assert cli.main(["sweep", str(listing), "--out", str(tmp_path / "out")]) == 1
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and "no model scored" in lines[0] and "failures.csv" in lines[0], lines


def test_a_sweep_with_some_failures_exits_0_and_with_strict_exits_1(hub, half_missing, tmp_path, capsys):
    assert cli.main(["sweep", str(half_missing), "--out", str(tmp_path / "out")]) == 0
    assert "2 scored, 0 done before, 2 failed" in capsys.readouterr().err
    assert cli.main(["sweep", str(half_missing), "--out", str(tmp_path / "out"), "--strict"]) == 1
    assert capsys.readouterr().err.splitlines()[-1] == "attnstruct: error: 2 models failed (--strict)"


def test_a_sweep_whose_models_were_all_done_before_exits_0(hub, tmp_path):
    listing = tmp_path / "models.txt"
    listing.write_text("tiny/bert\n")
    assert cli.main(["sweep", str(listing), "--out", str(tmp_path / "out")]) == 0
    assert cli.main(["sweep", str(listing), "--out", str(tmp_path / "out"), "--strict"]) == 0


def test_a_worker_that_sees_ctrl_c_is_no_failure_of_its_model(hub, tmp_path, monkeypatch):
    """The flag set while a model is scored: the sweep stops with Interrupted, lists no failure, writes no
    ``sweep.nc``."""
    real = sweep.score_one

    def interrupted(model, **kw):
        interrupts.request()
        return real(model, **kw)

    monkeypatch.setattr(sweep, "score_one", interrupted)
    with interrupts.handled(), pytest.raises(interrupts.Interrupted, match="after 0 of 2 models"):
        sweep.run_sweep(["tiny/bert", "tiny/gpt2"], tmp_path / "out", workers=1)
    assert not (tmp_path / "out" / "failures.csv").exists() and not (tmp_path / "out" / "sweep.nc").exists()


NOTEBOOKS = ("01_first", "02_second", "03_third")
NOTEBOOK = """\
# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% tags=["parameters"]
pause = 0.1
results_dir = "out"

# %%
import os, pathlib, time
pathlib.Path(results_dir).mkdir(parents=True, exist_ok=True)
pathlib.Path(results_dir, "{stem}.pid").write_text(str(os.getpid()))

# %%
time.sleep(pause)

# %%
from attnstruct.results import write_atomically
write_atomically(pathlib.Path(results_dir, "{stem}.txt"), lambda tmp: pathlib.Path(tmp).write_text("x" * 10**7))
"""


MAX_DELAY_S = 5.0  # Ctrl-C comes this long at most after the build folder appears
PAUSE_S = 2.0  # per notebook: three of them outlast MAX_DELAY_S on any machine


@pytest.fixture
def tiny_project(tmp_path):
    """A project root with three notebooks of a few short cells (each records its kernel's process id, pauses
    ``PAUSE_S`` and writes a result atomically) and a ``tiny`` profile: ``attnstruct reproduce`` runs it in longer
    than ``MAX_DELAY_S``, so that Ctrl-C always lands while it runs, however fast the machine."""
    root = tmp_path / "project"
    (root / "notebooks").mkdir(parents=True)
    (root / "params").mkdir()
    for stem in NOTEBOOKS:
        (root / "notebooks" / f"{stem}.py").write_text(NOTEBOOK.replace("{stem}", stem))
    (root / "params" / "tiny.yaml").write_text("".join(f"{stem}:\n  pause: {PAUSE_S}\n" for stem in NOTEBOOKS))
    return root


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.signals
@pytest.mark.notebook
@pytest.mark.parametrize("seed", SEEDS[:5])
def test_ctrl_c_stops_reproduce_between_whole_notebooks_in_one_line_with_130_and_no_kernel_left(tiny_project, seed):
    build = tiny_project / "build"
    argv = ("reproduce", "--root", str(tiny_project), "--profile", "tiny", "--build-dir", str(build))
    delay = random.Random(seed).uniform(0.0, MAX_DELAY_S)
    status, err = _interrupt(_start(*argv), (build / "notebooks").is_dir, delay)
    line = _one_interrupted_line(status, err, "attnstruct reproduce")
    done = int(line.split(" after ", 1)[1].split(" of ", 1)[0])
    assert f"after {done} of {len(NOTEBOOKS)} notebooks" in line
    assert not _temporary_files(build), _temporary_files(build)
    assert sorted(p.stem for p in (build / "notebooks").glob("*.ipynb")) == list(NOTEBOOKS[:done])
    assert sorted(p.stem for p in (build / "html").glob("*.html")) == list(NOTEBOOKS[:done])
    for path in (build / "notebooks").glob("*.ipynb"):  # whole and run to the end
        cells = json.loads(path.read_text())["cells"]
        assert all(c["execution_count"] for c in cells if c["cell_type"] == "code"), path.name
    time.sleep(0.5)  # a kernel asked to shut down is given this long
    kernels = [int(p.read_text()) for p in (build / "results").glob("*.pid")] if (build / "results").is_dir() else []
    assert not [pid for pid in kernels if _alive(pid)], "a kernel outlived the interrupted run"
