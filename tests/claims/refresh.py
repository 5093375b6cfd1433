"""Store the claim cells again (``make claims-refs``): after changing a notebook's code or the tests' parameters.

Each notebook with claim cells (tag ``nbval-check-output``, :mod:`stored_claims`) is run through the pipeline with
the tests' parameters (:func:`notebook_params.parameters`) and the tests' kernel environment, as the shared build
of ``make test`` runs it; the executed copy is stored here as ``NN_topic.ipynb`` with only the claim cells'
outputs kept. ``tests/test_claims.py`` then compares the shared build's claim outputs with these.

    .venv/bin/python tests/claims/refresh.py [NN ...]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import notebook_params  # noqa: E402
import stored_claims  # noqa: E402


def main(names: list[str]) -> int:
    from attnstruct import notebooks

    root = stored_claims.ROOT
    wanted = claim = stored_claims.claim_notebooks()
    if names:
        wanted = [notebooks.resolve_notebook(root, n).stem for n in names]
    notebook_params.pin_kernel_threads()
    with tempfile.TemporaryDirectory() as tmp:
        build = Path(tmp).resolve()
        for name in wanted:
            params = notebook_params.parameters(root, name)
            run = notebooks.run_notebook(root, notebooks.resolve_notebook(root, name), params, build, profile="quick")
            nbformat.write(stored_claims.stored(run.executed, build), HERE / f"{name}.ipynb")
            print(f"{name}: stored in {HERE / f'{name}.ipynb'} ({run.seconds:.0f} s)")
    for old in sorted({p.stem for p in HERE.glob("*.ipynb")} - set(claim)):
        (HERE / f"{old}.ipynb").unlink()
        print(f"{old}: has no claim cell any more; removed {HERE / f'{old}.ipynb'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
