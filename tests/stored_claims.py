"""The claim cells of the notebooks, stored in ``tests/claims/`` and compared with the shared build's.

A claim cell (tag ``nbval-check-output``) prints a number or an identity that is reproducible at the tests'
parameters (:func:`notebook_params.parameters`): the bilinear-form identity, the agreement with autograd, a
score table. ``tests/claims/NN_topic.ipynb`` is notebook ``NN_topic`` executed with those parameters, with only
the claim cells' outputs kept (``make claims-refs``, ``tests/claims/refresh.py``). ``tests/test_claims.py``
compares them with the claim outputs of the notebooks the tests executed anyway (``conftest.executed_build``),
after the replacements of ``tests/claims/sanitize.cfg`` (timings, paths, addresses), so no notebook is executed
again for it. The tag's name is nbval's; the stored files' output folders are written relative to
``tests/claims/``, so no path of the machine that stored them is committed.
"""

from __future__ import annotations

import configparser
import re
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent / "claims"
ROOT = HERE.parents[1]
TAG = "nbval-check-output"
OUTPUT_DIR = "../../build/claims"  # the stored notebooks' output folders, relative to tests/claims/


def is_claim(cell) -> bool:
    return cell.cell_type == "code" and TAG in cell.metadata.get("tags", [])


def claim_notebooks(root: Path = ROOT) -> list[str]:
    """The notebooks that hold at least one claim cell, by stem."""
    from attnstruct import notebooks

    return [p.stem for p in notebooks.list_notebooks(root) if any(map(is_claim, notebooks.read_notebook(p).cells))]


def sanitizers(path: Path = HERE / "sanitize.cfg") -> list[tuple[re.Pattern, str]]:
    """The ``(regex, replacement)`` pairs of an nbval sanitize file (one section per pair)."""
    config = configparser.ConfigParser(interpolation=None)
    config.read(path)
    return [(re.compile(config[s]["regex"]), config[s]["replace"]) for s in config.sections()]


def claim_outputs(nb) -> list[tuple[int, str]]:
    """``(index of the claim among the claim cells, printed text)``: each claim cell's streams joined in order
    (stdout, then a ``[stderr]`` part if any), after :func:`sanitizers`; any other output is named by its type."""
    rules = sanitizers()
    out = []
    for k, cell in enumerate(c for c in nb.cells if is_claim(c)):
        streams = {"stdout": "", "stderr": ""}
        others = []
        for output in cell.get("outputs", []):
            if output.output_type == "stream":
                streams[output.name] += output.text
            else:
                others.append(f"[{output.output_type}]")
        text = streams["stdout"] + (f"[stderr]{streams['stderr']}" if streams["stderr"] else "") + "".join(others)
        for pattern, replacement in rules:
            text = pattern.sub(replacement, text)
        out.append((k, text))
    return out


def stored(executed: Path, build: Path) -> nbformat.NotebookNode:
    """The executed notebook as stored: claim outputs only, no timings, output folders made relative."""
    nb = nbformat.read(executed, as_version=4)
    nb.metadata.pop("papermill", None)
    for cell in nb.cells:
        cell.metadata.pop("papermill", None)
        cell.metadata.pop("execution", None)
        if "injected-parameters" in cell.metadata.get("tags", []):
            cell.source = cell.source.replace(str(build), OUTPUT_DIR)
        if cell.cell_type == "code" and not is_claim(cell):
            cell.outputs = []
            cell.execution_count = None
    return nb
