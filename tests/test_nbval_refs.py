"""The notebooks that nbval re-executes (``tests/nbval/``) are the current sources, with their claims stored.

nbval runs the code stored in ``tests/nbval/NN_topic.ipynb``, not ``notebooks/NN_topic.py``; these tests make
sure the two hold the same cells, so that ``make test`` re-checks today's claims (``make nbval-refs`` re-stores
them after a notebook changes).
"""

import nbformat
import pytest

from attnstruct import pipeline

from conftest import ROOT

HERE = ROOT / "tests" / "nbval"
TAG = "nbval-check-output"
STORED = sorted(HERE.glob("*.ipynb"))


def claim_notebooks():
    return [
        p.stem
        for p in pipeline.list_notebooks(ROOT)
        if any(TAG in c.metadata.get("tags", []) for c in pipeline.read_notebook(p).cells)
    ]


def test_every_notebook_with_claims_is_stored_and_nothing_else():
    assert claim_notebooks(), "no notebook tags a claim cell"
    assert [p.stem for p in STORED] == claim_notebooks(), "run `make nbval-refs`"


@pytest.mark.parametrize("path", STORED, ids=lambda p: p.stem)
def test_the_stored_cells_are_the_sources_cells(path):
    stored = nbformat.read(path, as_version=4)
    source = pipeline.read_notebook(ROOT / "notebooks" / f"{path.stem}.py")
    kept = [(c.cell_type, c.source) for c in stored.cells if "injected-parameters" not in c.metadata.get("tags", [])]
    assert kept == [(c.cell_type, c.source) for c in source.cells], f"{path.name} is stale: run `make nbval-refs`"


@pytest.mark.parametrize("path", STORED, ids=lambda p: p.stem)
def test_claims_have_stored_text_and_other_cells_none(path):
    stored = nbformat.read(path, as_version=4)
    claims = [c for c in stored.cells if TAG in c.metadata.get("tags", [])]
    assert claims and any(c.outputs for c in claims), "no claim cell printed anything"  # one may print nothing
    for cell in claims:
        assert {o.output_type for o in cell.outputs} <= {"stream"}, "a claim is printed text"
    others = [c for c in stored.cells if c.cell_type == "code" and TAG not in c.metadata.get("tags", [])]
    assert not any(c.outputs for c in others)
    (injected,) = [c for c in stored.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert "/tmp" not in injected.source and "../../build/nbval" in injected.source
