"""Every notebook runs through the pipeline; results are reproducible; sources and paired notebooks agree."""

import json
import re

import jupytext
import pytest
import xarray as xr

from attnstruct import notebooks, results
from attnstruct.analyses import plans
from attnstruct.report import plotting
from attnstruct.teaching import lab

from conftest import ROOT, copy_stored_work
from notebook_params import parameters as course_parameters

NOTEBOOKS = [p.stem for p in notebooks.list_notebooks(ROOT)]
VERDICT_LINE = re.compile(r"; (?:holds|does not hold|cannot tell at this scale): ")  # as Effect.sentence writes it


@pytest.mark.notebook
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_and_writes_results(name, executed_build):
    run, params = executed_build(name)
    build = executed_build.build_dir
    assert run.executed.is_file() and run.html.is_file()
    ds = results.load_dataset(build / "results" / f"{name}.nc")
    for key in results.REQUIRED_ATTRS:
        assert key in ds.attrs
    assert ds.attrs["score_convention"] == "paper"
    recorded = json.loads(ds.attrs["parameters"])
    for key, value in params.items():
        assert recorded[key] == value
    assert "symmetry" in ds and "directionality" in ds
    figures = sorted((build / "figures").glob(f"{name[:2]}_*.png"))
    assert figures, "the notebook wrote no figure"
    for png in figures:
        assert png.with_suffix(".pdf").is_file()


@pytest.mark.notebook
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_every_figure_shows_its_titles(name, executed_build):
    """Each figure the notebook saves has titles of at most two lines that overlap no panel, as measured on the
    figure when it was saved (the layout record :func:`attnstruct.report.plotting.savefig` writes beside it)."""
    executed_build(name)
    figures = sorted((executed_build.build_dir / "figures").glob(f"{name[:2]}_*.png"))
    faults = {png.stem: plotting.title_faults(plotting.read_layout(png)) for png in figures}
    assert not {stem: found for stem, found in faults.items() if found}


@pytest.mark.notebook
@pytest.mark.parametrize("name", sorted(plans.PLANS))
def test_every_verdict_is_a_claim_of_the_plan_printed_before_the_results(name, executed_build):
    """The dataset's verdicts are claims of the notebook's plan, decided under it (Holm for a primary claim, the label
    of a secondary one), and the notebook shows the plan's table before its first verdict line."""
    run, _ = executed_build(name)
    plan = plans.plan_of(name)
    verdicts = json.loads(results.load_dataset(executed_build.build_dir / "results" / f"{name}.nc").attrs["verdicts"])
    assert verdicts and set(verdicts) <= {claim.name for claim in plan.claims}, sorted(verdicts)
    for claim, row in verdicts.items():
        role = plan.claim(claim).role
        assert row["family"].startswith("primary, Holm over" if role == "primary" else "secondary, uncorrected"), row
    cells = [c for c in notebooks.read_notebook(run.executed).cells if c.cell_type == "code"]
    outputs = [json.dumps(c.get("outputs", [])) for c in cells]
    table = next(i for i, c in enumerate(cells) if "markdown_table(" in c.source and "plan" in c.source.lower())
    first_verdict = next(i for i, shown in enumerate(outputs) if VERDICT_LINE.search(shown))
    assert table < first_verdict
    assert all(claim.name in outputs[table] for claim in plan.claims)


@pytest.mark.notebook
@pytest.mark.parametrize("name", ["05_training_dynamics", "06_symmetric_init", "07_vision"])
def test_the_paper_profile_starts_smoke_profile(name, tmp_path):
    """The paper's shapes (``params/smoke.yaml``: the paper profile with a few steps) run to the end on a CPU.

    A second execution of 05, 06 and 07, with other parameters than the shared build's: the paper's widths,
    sequence lengths, vocabulary and micro-batches, which the tests' small parameters never reach. 05 and 06 print
    the cost of their runs before the cell that trains them."""
    params = notebooks.load_profile(ROOT, "smoke")[name]
    paper = notebooks.load_profile(ROOT, "paper")[name]
    assert params["d_model"] == paper["d_model"] and params.get("seq_len") == paper.get("seq_len")
    if name == "05_training_dynamics":  # the paper's micro-batches (06 takes fewer: ten runs)
        assert params.get("accumulate") == paper["accumulate"] and params["batch_size"] % paper["accumulate"] == 0
    run = notebooks.run_notebook(ROOT, notebooks.resolve_notebook(ROOT, name), params, tmp_path, profile="smoke")
    if name != "07_vision":
        cells = [c for c in notebooks.read_notebook(run.executed).cells if c.cell_type == "code"]
        outputs = [json.dumps(c.get("outputs", [])) for c in cells]
        cost = next(i for i, shown in enumerate(outputs) if "each run: " in shown)
        first_slow = next(i for i, c in enumerate(cells) if "slow" in c.metadata.get("tags", []))
        assert cost < first_slow and "projected: " in outputs[cost] and "passes over the " in outputs[cost]
    ds = results.load_dataset(tmp_path / "results" / f"{name}.nc")
    recorded = json.loads(ds.attrs["parameters"])
    assert recorded["d_model"] == paper["d_model"] and recorded["steps"] == params["steps"]
    assert int(ds.step.max()) == params["steps"]


@pytest.mark.notebook
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_same_parameters_give_identical_data(name, executed_build, student_runs):
    """Two runs with the same parameters write the same data and figures, bit for bit: the notebook, and its
    student version (whose exercises come after the dataset and the figures are written) in a fresh kernel that
    reads the build's stored runs (a second training of the same run is proven to give the same run by the
    training tests: a resumed run, runs in processes, under torchrun)."""
    _, again = student_runs(name)
    a = results.load_dataset(executed_build.build_dir / "results" / f"{name}.nc")
    b = results.load_dataset(again / "results" / f"{name}.nc")
    xr.testing.assert_equal(a, b)  # data variables and coordinates, bit for bit
    assert a.attrs["parameters"] == b.attrs["parameters"]
    pngs = sorted((executed_build.build_dir / "figures").glob(f"{name[:2]}_*.png"))
    assert pngs
    for png in pngs:
        assert png.read_bytes() == (again / "figures" / png.name).read_bytes(), png.name


@pytest.mark.notebook
def test_bad_parameter_fails_without_writing_results(tmp_path):
    """Another execution of 02 (it stops at its parameter check): a bad value must fail and write nothing."""
    source = notebooks.resolve_notebook(ROOT, "02_scores")
    with pytest.raises(notebooks.NotebookFailed, match="ValueError: n_draws must be an integer >= 2") as err:
        notebooks.run_notebook(ROOT, source, {**course_parameters(ROOT, "02_scores"), "n_draws": 1}, tmp_path)
    assert err.value.name == "02_scores"
    assert not (tmp_path / "results" / "02_scores.nc").exists()


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_sources_are_canonical_and_paired_notebooks_in_sync(name):
    source = ROOT / "notebooks" / f"{name}.py"
    nb = jupytext.read(source)
    assert sum("parameters" in c.metadata.get("tags", []) for c in nb.cells) == 1
    assert nb.metadata["kernelspec"]["name"] == "python3"
    paired = ROOT / lab.LAB_OUTPUTS / f"{name}.ipynb"  # jupytext.toml's pairing, written by the lab and make sync
    if paired.exists():
        other = jupytext.read(paired)
        assert [(c.cell_type, c.source) for c in other.cells] == [(c.cell_type, c.source) for c in nb.cells], (
            f"{paired.name} differs from {source.name}: run `make sync` (the .py is the source)"
        )


@pytest.mark.notebook
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_after_a_build_the_notebook_runs_again_in_a_fresh_kernel_and_trains_nothing(
    name, executed_build, tmp_path, monkeypatch
):
    """A lecturer's "run live" after ``make reproduce``: the notebook in a fresh kernel, its output folders left to
    their default (the work folder, here a copy of the build's stored runs), finds every slow result stored, and
    ``ATTNSTRUCT_STORED_RUNS_ONLY=1`` makes anything that would train fail the run."""
    _, params = executed_build(name)
    work = tmp_path / "work"
    copy_stored_work(executed_build.build_dir, work, name)
    monkeypatch.setenv("ATTNSTRUCT_WORK", str(work))
    monkeypatch.setenv("ATTNSTRUCT_STORED_RUNS_ONLY", "1")
    defaults = {"results_dir": None, "figures_dir": None}
    notebooks.run_notebook(ROOT, notebooks.resolve_notebook(ROOT, name), {**params, **defaults}, tmp_path / "live")
    assert (work / "results" / f"{name}.nc").is_file(), "the notebook did not write to the work folder"
