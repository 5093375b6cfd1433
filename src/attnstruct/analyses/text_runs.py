"""Readings of text training runs (notebooks 05 and 06, and what reads their datasets): the runs' medians over
layers, and the two conditions a verdict rests on before any effect is read.

Every function takes a combined dataset of runs (:func:`attnstruct.training.processes.combine`: dims ``objective``,
``seed``, ``step``, ``layer`` and maybe ``init``). Layers are pooled by their median, as the paper does for a model.

1. **The runs learned.** A score of a model that did not learn its task says nothing about the task, so every
   verdict is gated on it (``learned=`` of :func:`attnstruct.stats.paired_effect` and
   :func:`attnstruct.stats.two_sample_effect`, rule 0 of :func:`attnstruct.stats.decide`). The criterion
   (:func:`loss_targets`): a run learned when its last validation loss lies below the unigram entropy of its tokens
   (the loss of a model that ignores context) by at least its objective's margin (:data:`LOSS_MARGINS`: 0.3 nat for
   masked LM, 1.0 for next-token prediction; chosen from the calibration runs of ``docs/calibration.md``). An effect
   rests on several runs (both objectives of a difference, every seed, the placebo's baselines); it is gated on
   all of them having learned (:func:`learned`).
2. **The design can reach a verdict.** With ``n`` seeds a one-sided sign-flip test cannot give a p below
   ``1 / 2**n``, and a permutation test of ``n`` against ``m`` units not below ``1 / C(n + m, n)``. When that is
   not below ``alpha`` no outcome could be significant, whatever the runs show: :func:`attnstruct.stats.design_reach`
   says so, computed from the number of seeds, and a figure of such runs states no finding (:func:`no_finding`).

What the notebooks say of the learning gate comes from here as facts records (:func:`loss_target_facts`,
:func:`missed_targets`): strings formatted by :mod:`attnstruct.report.prose` and the few data-dependent words.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import xarray as xr

from .. import stats
from ..report import prose

ALPHA = 0.05  # the level of every test of the training notebooks (the stats functions' default)
LOSS_MARGINS = {"mlm": 0.3, "next-token": 1.0, "next-token-mlm-collator": 0.3}  # nats below the unigram entropy
SCORES = ("symmetry", "directionality")
LABELS = {
    "mlm": "encoder (masked LM)",
    "next-token": "decoder (next token)",
    "next-token-mlm-collator": "decoder, authors' collator",
}


def label(objective) -> str:
    """The name of an objective in a sentence or a legend (:data:`LABELS`, else the objective itself)."""
    return LABELS.get(str(objective), str(objective))


# ---------------------------------------------------------------------------------------------- reductions


def median_over_layers(ds: xr.Dataset, score: str) -> xr.DataArray:
    """The median over layers of ``score`` in every record: ``[objective, (init,) seed, step]``."""
    return ds[score].median("layer")


def final_median(ds: xr.Dataset, score: str) -> xr.DataArray:
    """The median over layers of ``score`` at the last record of every run: ``[objective, (init,) seed]``."""
    return ds[score].isel(step=-1).median("layer")


# ---------------------------------------------------------------------------------------------- the learning gate


def _targets(ds: xr.Dataset, unigram_entropy: float, margins: dict[str, float]) -> pd.DataFrame:
    final = ds["val_loss"].dropna("step", how="all").isel(step=-1)
    keys = [k for k in ("objective", "init", "seed") if k in final.dims]
    table = final.to_dataframe(name="val_loss")[["val_loss"]].reset_index().set_index(keys)
    objectives = table.index.get_level_values("objective")
    table["below_unigram"] = unigram_entropy - table["val_loss"]
    table["target"] = [margins[str(o)] for o in objectives]
    table["met"] = table["below_unigram"] >= table["target"]
    return table


def loss_targets(
    runs: xr.Dataset | Sequence[xr.Dataset], unigram_entropy: float, margins: dict[str, float] | None = None
) -> pd.DataFrame:
    """Did every run learn? One row per run of one combined dataset of runs, or of several (a run that appears in
    more than one, as notebook 05's baselines in notebook 06, is kept once): its last validation loss, how far it
    lies below ``unigram_entropy`` (``below_unigram``), the margin asked of its objective (``target``, from
    :data:`LOSS_MARGINS` updated by ``margins``) and whether it got there (``met``).

    ``runs``: combined runs with ``val_loss`` over ``step`` and run keys among ``objective``, ``init``, ``seed``, by
    which the table is indexed; a run whose validation loss was never measured does not meet its target.
    """
    runs = [runs] if isinstance(runs, xr.Dataset) else list(runs)
    if not runs:
        raise ValueError("no runs to check")
    margins = {**LOSS_MARGINS, **(margins or {})}
    tables = [_targets(ds, unigram_entropy, margins) for ds in runs]
    if len({tuple(t.index.names) for t in tables}) > 1:
        raise ValueError(f"the runs have different keys: {[t.index.names for t in tables]}")
    table = pd.concat(tables)
    return table[~table.index.duplicated()]


def _selected(targets: pd.DataFrame, keys: dict) -> pd.DataFrame:
    rows = targets.reset_index()
    for key, wanted in keys.items():
        if key not in rows:
            raise ValueError(f"the runs have no key {key!r}; they have {list(targets.index.names)}")
        wanted = [wanted] if isinstance(wanted, (str, int, np.integer)) else list(wanted)
        rows = rows[rows[key].isin(wanted)]
    return rows


def learned(targets: pd.DataFrame, **keys) -> bool:
    """Did every run of ``targets`` (:func:`loss_targets`) that matches ``keys`` learn? ``keys``: a run key and
    the value, or the values, it takes (``objective="mlm"``, ``init=["bert", "symmetric"]``). False when no run
    matches: an effect with no run behind it rests on nothing that learned."""
    rows = _selected(targets, keys)
    return bool(len(rows)) and bool(rows["met"].all())


def learned_by(targets: pd.DataFrame, key: str) -> dict[str, bool]:
    """``{value of key: did every run with it learn}``, e.g. per objective."""
    rows = _selected(targets, {})
    if key not in rows:
        raise ValueError(f"the runs have no key {key!r}; they have {list(targets.index.names)}")
    return {str(value): bool(group["met"].all()) for value, group in rows.groupby(key, sort=False)}


def no_finding(n_seeds: int, learned: bool = True) -> str:
    """Why a figure of runs over ``n_seeds`` seeds carries no finding, or ``""`` when it may state one: runs short
    of their loss target (``learned`` false) describe nothing the objective did, and too few seeds for a one-sided
    sign-flip test to reach ``p < alpha`` (:func:`attnstruct.stats.smallest_p`) cannot order the arms."""
    if not learned:
        return stats.NOT_LEARNED
    if stats.smallest_p(int(n_seeds)) >= ALPHA:
        return f"{prose.count(int(n_seeds), 'seed')}, too few to compare"
    return ""


# The facts the notebooks state of the learning gate: strings formatted by attnstruct.report.prose.


@dataclass(frozen=True)
class LossTargetFacts:
    """The learning gate over every run of :func:`loss_targets`' table: ``met`` of ``runs`` met their target
    (``all_met``), the ``unigram_entropy`` (nats) and the ``margins`` asked below it per objective; the ``verdict``
    and ``reason`` a claim resting on a run short of its target reads."""

    all_met: bool
    met: str
    runs: str
    unigram_entropy: str
    margins: str
    verdict: str
    reason: str


def loss_target_facts(targets: pd.DataFrame, unigram_entropy: float) -> LossTargetFacts:
    """The facts of :func:`loss_targets`' table against ``unigram_entropy``."""
    rows = _selected(targets, {})
    margins = ", ".join(
        f"`{o}` {prose.number(m, 1)}" for o, m in rows.groupby("objective", sort=False)["target"].first().items()
    )
    met = int(rows["met"].sum())
    return LossTargetFacts(
        all_met=met == len(rows),
        met=str(met),
        runs=prose.count(len(rows), "run"),
        unigram_entropy=prose.number(unigram_entropy, 3),
        margins=margins,
        verdict=stats.CANNOT_TELL,
        reason=stats.NOT_LEARNED,
    )


@dataclass(frozen=True)
class MissedTargetFacts:
    """One run short of its loss target: the ``run`` (its keys: `` `mlm` `bert` seed 2``), how far (``distance``,
    nats) its final validation loss ended ``side`` (``below``, ``above``) the unigram entropy, and the ``target``
    margin asked."""

    run: str
    distance: str
    side: str
    target: str


def _run_name(row: pd.Series, keys: Iterable[str]) -> str:
    return " ".join(f"seed {row[k]}" if k == "seed" else f"`{row[k]}`" for k in keys)


def missed_targets(targets: pd.DataFrame) -> list[MissedTargetFacts]:
    """The facts of every run of :func:`loss_targets`' table that missed its target, in order."""
    rows = _selected(targets, {})
    keys = list(targets.index.names)
    return [
        MissedTargetFacts(
            run=_run_name(row, keys),
            distance=prose.number(abs(row.below_unigram)),
            side="below" if row.below_unigram >= 0 else "above",
            target=prose.number(row.target, 1),
        )
        for _, row in rows[~rows["met"]].iterrows()
    ]
