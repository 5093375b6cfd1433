"""Every notebook runs through the pipeline; results are reproducible; sources and paired notebooks agree."""

import json

import jupytext
import pytest
import xarray as xr

from attnstruct import pipeline, results

from conftest import ROOT

NOTEBOOKS = [p.stem for p in pipeline.list_notebooks(ROOT)]
# Heavy notebooks (training from scratch) run here with smaller parameters than the quick profile.
TRAINING_SMALL = {
    "seeds": [0],
    "steps": 40,
    "batch_size": 8,
    "seq_len": 32,
    "d_model": 32,
    "n_layers": 2,
    "n_heads": 2,
    "warmup": 10,
    "log_every": 10,
    "eval_every": 20,
    "eval_batches": 1,
    "checkpoint_every": 20,
}
SYMMETRIC_INIT_SMALL = {
    **TRAINING_SMALL,
    "seeds": [0, 1],
    "treated_seeds": [0, 1],
    "objectives": ["mlm"],
    "steps": 30,
    "eval_every": 10,
    "checkpoint_every": 30,
    "warmup": 5,
}
TEST_OVERRIDES: dict[str, dict] = {
    "05_training_dynamics": TRAINING_SMALL,
    "06_symmetric_init": SYMMETRIC_INIT_SMALL,
    "07_vision": {
        "n_seeds": 2,
        "steps": 60,
        "log_every": 20,
        "eval_every": 60,
        "d_model": 32,
        "n_layers": 2,
        "n_heads": 2,
        "batch_size": 16,
        "n_images": 300,
    },
}
# The smallest parameters that still exercise every cell, for the repeated-run and bad-input tests.
SMALL_PARAMETERS = {
    "05_training_dynamics": TRAINING_SMALL,
    "06_symmetric_init": SYMMETRIC_INIT_SMALL,
    "04_gradient_structure": {"n_seeds": 1, "steps": 100, "every": 50, "n_sequences": 32, "batch": 16},
    "01_bilinear_form": {"d_model": 16, "n_heads": 2, "n_layers": 1, "seq_len": 5, "example_dim": 12},
    "02_scores": {
        "d_models": [16, 32],
        "n_heads": [1, 2],
        "n_draws": 4,
        "num_stds": [1.0, 2.0],
        "sweep_d_model": 32,
        "tying_heads": 2,
        "tying_d_model": 16,
    },
    "07_vision": {
        "n_seeds": 1,
        "steps": 40,
        "log_every": 20,
        "eval_every": 40,
        "d_model": 16,
        "n_layers": 2,
        "n_heads": 2,
        "batch_size": 8,
        "n_images": 100,
    },
}

pytestmark = pytest.mark.notebook


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_and_writes_results(name, tmp_path):
    quick = pipeline.load_profile(ROOT, "quick").get(name, {})
    params = {**quick, **TEST_OVERRIDES.get(name, {})}
    run = pipeline.run_notebook(ROOT, pipeline.resolve_notebook(ROOT, name), params, tmp_path, profile="quick")
    assert run.executed.is_file() and run.html.is_file()
    ds = results.load_dataset(tmp_path / "results" / f"{name}.nc")
    for key in results.REQUIRED_ATTRS:
        assert key in ds.attrs
    assert ds.attrs["score_convention"] == "paper"
    recorded = json.loads(ds.attrs["parameters"])
    for key, value in params.items():
        assert recorded[key] == value
    assert "symmetry" in ds and "directionality" in ds
    figures = sorted((tmp_path / "figures").glob(f"{name[:2]}_*.png"))
    assert figures, "the notebook wrote no figure"
    for png in figures:
        assert png.with_suffix(".pdf").is_file()


@pytest.mark.parametrize("name", ["05_training_dynamics", "06_symmetric_init", "07_vision"])
def test_the_paper_profile_starts_smoke_profile(name, tmp_path):
    """The paper's shapes (``params/smoke.yaml``: the paper profile with a few steps) run to the end on a CPU."""
    params = pipeline.load_profile(ROOT, "smoke")[name]
    paper = pipeline.load_profile(ROOT, "paper")[name]
    assert params["d_model"] == paper["d_model"] and params.get("seq_len") == paper.get("seq_len")
    pipeline.run_notebook(ROOT, pipeline.resolve_notebook(ROOT, name), params, tmp_path, profile="smoke")
    ds = results.load_dataset(tmp_path / "results" / f"{name}.nc")
    recorded = json.loads(ds.attrs["parameters"])
    assert recorded["d_model"] == paper["d_model"] and recorded["steps"] == params["steps"]
    assert int(ds.step.max()) == params["steps"]


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_same_parameters_give_identical_data(name, tmp_path):
    source = pipeline.resolve_notebook(ROOT, name)
    params = SMALL_PARAMETERS.get(name, {})
    for run in ("a", "b"):
        pipeline.run_notebook(ROOT, source, params, tmp_path / run)
    a = results.load_dataset(tmp_path / "a" / "results" / f"{name}.nc")
    b = results.load_dataset(tmp_path / "b" / "results" / f"{name}.nc")
    xr.testing.assert_equal(a, b)  # data variables and coordinates, bit for bit
    assert a.attrs["parameters"] == b.attrs["parameters"]
    for png in (tmp_path / "a" / "figures").glob("*.png"):
        assert png.read_bytes() == (tmp_path / "b" / "figures" / png.name).read_bytes(), png.name


def test_bad_parameter_fails_without_writing_results(tmp_path):
    source = pipeline.resolve_notebook(ROOT, "02_scores")
    with pytest.raises(pipeline.NotebookFailed, match="ValueError: n_draws must be an integer >= 2") as err:
        pipeline.run_notebook(ROOT, source, {**SMALL_PARAMETERS["02_scores"], "n_draws": 1}, tmp_path)
    assert err.value.name == "02_scores"
    assert not (tmp_path / "results" / "02_scores.nc").exists()


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_sources_are_canonical_and_paired_notebooks_in_sync(name):
    source = ROOT / "notebooks" / f"{name}.py"
    nb = jupytext.read(source)
    assert sum("parameters" in c.metadata.get("tags", []) for c in nb.cells) == 1
    assert nb.metadata["kernelspec"]["name"] == "python3"
    paired = source.with_suffix(".ipynb")
    if paired.exists():
        other = jupytext.read(paired)
        assert [(c.cell_type, c.source) for c in other.cells] == [(c.cell_type, c.source) for c in nb.cells], (
            f"{paired.name} differs from {source.name}: run `make sync` (the .py is the source)"
        )
