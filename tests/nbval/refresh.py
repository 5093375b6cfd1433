"""Regenerate the stored notebooks that nbval re-executes in ``make test`` (``make nbval-refs``).

Each notebook with claim cells (tagged ``nbval-check-output``) is run through the pipeline with the tests'
small parameters (``tests/notebook_params.py``); the executed copy is stored here as ``NN_topic.ipynb`` with
only the claim cells' outputs kept, no timings, and its output folders relative to this folder
(``../../build/nbval/``). ``pytest --nbval-lax`` then runs every cell again and compares the claim cells'
printed text with what is stored: a change of a claim (the bilinear identity, the agreement with autograd, a
verdict line) fails the test. Run this after changing a notebook's code (a test checks that the stored cells
are the sources' cells) or when a claim changes on purpose.

    .venv/bin/python tests/nbval/refresh.py [NN ...]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))
TAG = "nbval-check-output"
OUTPUT_DIR = "../../build/nbval"  # relative to this folder: nbval starts each kernel here


def claim_notebooks(root: Path = ROOT) -> list[str]:
    """The notebooks that hold at least one claim cell, by stem."""
    from attnstruct import pipeline

    return [
        p.stem
        for p in pipeline.list_notebooks(root)
        if any(TAG in c.metadata.get("tags", []) for c in pipeline.read_notebook(p).cells)
    ]


def parameters(name: str) -> dict:
    from attnstruct import pipeline

    from notebook_params import SMALL_PARAMETERS, TEST_OVERRIDES

    quick = pipeline.load_profile(ROOT, "quick").get(name, {})
    return {**quick, **TEST_OVERRIDES.get(name, {}), **SMALL_PARAMETERS.get(name, {})}


def stored(executed: Path, build: Path) -> nbformat.NotebookNode:
    """The executed notebook as stored: claim outputs only, no timings, output folders made relative."""
    nb = nbformat.read(executed, as_version=4)
    nb.metadata.pop("papermill", None)
    for cell in nb.cells:
        cell.metadata.pop("papermill", None)
        cell.metadata.pop("execution", None)
        if "injected-parameters" in cell.metadata.get("tags", []):
            cell.source = cell.source.replace(str(build), OUTPUT_DIR)
        if cell.cell_type == "code" and TAG not in cell.metadata.get("tags", []):
            cell.outputs = []  # not compared under --nbval-lax; a claim cell keeps its count (nbval needs it)
            cell.execution_count = None
    return nb


def main(names: list[str]) -> int:
    from attnstruct import pipeline

    wanted = [pipeline.resolve_notebook(ROOT, n).stem for n in names] if names else claim_notebooks()
    with tempfile.TemporaryDirectory() as tmp:
        build = Path(tmp).resolve()
        for name in wanted:
            run = pipeline.run_notebook(ROOT, pipeline.resolve_notebook(ROOT, name), parameters(name), build)
            nbformat.write(stored(run.executed, build), HERE / f"{name}.ipynb")
            print(f"{name}: stored in {HERE / f'{name}.ipynb'} ({run.seconds:.0f} s)")
    for old in sorted(set(p.stem for p in HERE.glob("*.ipynb")) - set(claim_notebooks())):
        print(f"{old}: has no claim cell any more; remove {HERE / f'{old}.ipynb'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
