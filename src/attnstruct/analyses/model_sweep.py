"""Notebook 08: the list of models, the sweep's outcome in words, its dataset, and the caveat groups of the
point-by-point comparison with the authors' values.

The sweep itself is :func:`attnstruct.checkpoints.sweep.run_sweep`; its per-model datasets are the one per-model
dataset of :func:`attnstruct.checkpoints.tables.model_dataset`, read here by
:func:`attnstruct.analyses.pretrained_scores.stack_summary`. The comparison with the paper is
:mod:`attnstruct.analyses.paper_comparison`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pandas as pd
import xarray as xr

from .. import results, stats
from ..checkpoints import sweep
from ..checkpoints.sweep import SweepResult
from ..report import prose
from . import pretrained_scores

ZOO_SELECTIONS = ("core", "all")


def model_names(models, cache_dir=None) -> list[str]:
    """The models to sweep: a zoo selection (``core``, ``all``: its names, which must have been fetched), ``paper``
    or a list file (:func:`attnstruct.checkpoints.sweep.read_model_list`), or a list of ids and paths as given.

    Raises ``RuntimeError`` naming the fetch command when a zoo model is not fetched."""
    if isinstance(models, str) and models in ZOO_SELECTIONS:
        return [e.name for e in pretrained_scores.fetched_entries(models, cache_dir)]
    if isinstance(models, str):
        return sweep.read_model_list(models)
    return [str(m) for m in models]


def describe_run(run: SweepResult, names, device) -> str:
    """How many of ``names`` the sweep ``run`` scored now, found done before, and could not score, on ``device``."""
    return (
        f"{prose.count(len(names), 'model')} on {device}: {len(run.scored)} scored now, {len(run.skipped)} done "
        f"before, {len(run.failures)} failed."
    )


def failures(run: SweepResult) -> pd.DataFrame:
    """The models ``run`` could not score: ``model``, ``kind`` (what went wrong), ``reason`` (one line)."""
    return pd.DataFrame(run.failures, columns=["model", "kind", "reason"])


def load_scores(run: SweepResult, folder) -> xr.Dataset:
    """The sweep's combined dataset (``sweep.nc``); ``RuntimeError`` pointing to ``folder``'s ``failures.csv`` when
    no model could be scored."""
    if run.path is None:
        raise RuntimeError(f"no model could be scored; see {Path(folder) / 'failures.csv'}")
    return results.load_dataset(run.path)


def caveat_group(caveats: str) -> str:
    """The colour group of an authors' entry in the comparison figure: ``no known caveat``, the caveat itself for
    the two extraction problems that shift many entries (grouped-query pairing, fused QKV), ``other caveat``."""
    if not caveats:
        return "no known caveat"
    return caveats if caveats in ("gqa_head_pairing_suspect", "fused_qkv_branch_suspect") else "other caveat"


def with_caveat_groups(table: pd.DataFrame) -> pd.DataFrame:
    """:func:`attnstruct.analyses.paper_comparison.agreement`'s ``table`` with a ``caveat_group`` column
    (:func:`caveat_group`)."""
    return table.assign(caveat_group=[caveat_group(c) for c in table["caveats"]])


def results_dataset(ds: xr.Dataset, *, parameters: Mapping, failures: int, effects=()) -> xr.Dataset:
    """Notebook 08's dataset: the sweep's scores ``ds`` with provenance attrs (``parameters``, the scored matrix as
    the sweep recorded it, the number of models that failed, and under ``verdicts`` the table of ``effects``, JSON,
    ``"{}"`` for none)."""
    out = ds.copy()
    out.attrs = results.provenance_attrs(
        parameters=dict(parameters),
        scored_matrix=ds.attrs["scored_matrix"],
        failures=failures,
        verdicts=stats.verdict_table(effects).to_json(orient="index") if len(effects) else "{}",
    )
    return out
