"""The claim cells: stored in ``tests/claims/`` from today's sources and parameters, and equal to what the shared
build prints (:mod:`stored_claims`). No notebook is executed here beyond the shared build."""

import ast

import nbformat
import pytest

from attnstruct import notebooks

import notebook_params
import stored_claims
from conftest import ROOT

STORED = sorted(stored_claims.HERE.glob("*.ipynb"))
CLAIMED = stored_claims.claim_notebooks()


def injected_parameters(nb) -> dict:
    """The values papermill injected into a stored notebook, output folders left out."""
    (cell,) = [c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])]
    values = {}
    for node in ast.parse(cell.source).body:
        (target,) = node.targets
        values[target.id] = ast.literal_eval(node.value)
    return {k: v for k, v in values.items() if k not in notebooks.PATH_PARAMETERS and k != "profile"}


def test_every_notebook_with_claims_is_stored_and_nothing_else():
    assert CLAIMED, "no notebook tags a claim cell"
    assert [p.stem for p in STORED] == CLAIMED, "run `make claims-refs`"


@pytest.mark.parametrize("path", STORED, ids=lambda p: p.stem)
def test_the_stored_cells_are_the_sources_cells(path):
    stored = nbformat.read(path, as_version=4)
    source = notebooks.read_notebook(ROOT / "notebooks" / f"{path.stem}.py")
    kept = [(c.cell_type, c.source) for c in stored.cells if "injected-parameters" not in c.metadata.get("tags", [])]
    assert kept == [(c.cell_type, c.source) for c in source.cells], f"{path.name} is stale: run `make claims-refs`"


@pytest.mark.parametrize("path", STORED, ids=lambda p: p.stem)
def test_the_stored_notebook_ran_with_the_tests_parameters(path):
    stored = nbformat.read(path, as_version=4)
    expected = notebook_params.parameters(ROOT, path.stem)
    assert injected_parameters(stored) == expected, f"{path.name} ran with other parameters: run `make claims-refs`"


@pytest.mark.parametrize("path", STORED, ids=lambda p: p.stem)
def test_claims_have_stored_text_and_other_cells_none(path):
    stored = nbformat.read(path, as_version=4)
    claims = [c for c in stored.cells if stored_claims.is_claim(c)]
    assert claims and any(c.outputs for c in claims), "no claim cell printed anything"  # one may print nothing
    for cell in claims:
        assert {o.output_type for o in cell.outputs} <= {"stream"}, "a claim is printed text"
    others = [c for c in stored.cells if c.cell_type == "code" and not stored_claims.is_claim(c)]
    assert not any(c.outputs for c in others)
    (injected,) = [c for c in stored.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert "/tmp" not in injected.source and '"/' not in injected.source  # the build's folders, relative


def test_a_changed_number_is_a_different_claim_and_a_timing_is_not():
    def notebook(text):
        nb = nbformat.v4.new_notebook()
        cell = nbformat.v4.new_code_cell("print(x)", metadata={"tags": [stored_claims.TAG]})
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
        nb.cells = [nbformat.v4.new_code_cell("x = 1"), cell]
        return nb

    same = stored_claims.claim_outputs(notebook("agree: True (12.5 s)\n"))
    assert same == stored_claims.claim_outputs(notebook("agree: True (3 s)\n"))
    assert same != stored_claims.claim_outputs(notebook("agree: False (12.5 s)\n"))
    assert stored_claims.claim_outputs(notebook("0.209\n")) != stored_claims.claim_outputs(notebook("0.210\n"))


@pytest.mark.notebook
@pytest.mark.parametrize("name", CLAIMED)
def test_the_shared_build_prints_the_stored_claims(name, executed_build):
    run, _ = executed_build(name)
    now = stored_claims.claim_outputs(nbformat.read(run.executed, as_version=4))
    then = stored_claims.claim_outputs(nbformat.read(stored_claims.HERE / f"{name}.ipynb", as_version=4))
    assert len(now) == len(then), "the number of claim cells changed: run `make claims-refs`"
    for (k, new), (_, old) in zip(now, then):
        assert new == old, f"claim {k + 1} of {name} changed"
