"""Notebook 06's designed experiment: four initialisations of one model, the same batches, and a placebo.

The speed-ups are :mod:`attnstruct.analyses.speedup_metrics`' (the paper's metric on the training loss, and a robust
one on the validation loss).

**The design.** Every arm of a seed (the baseline :data:`BASELINE` and each treated initialisation) sees the same
batches, since a run's batches are a function of ``(seed, step)``; only the initial weights differ. The placebo
(:data:`PLACEBO`) is the baseline once more, its weights drawn from another seed (``init_seed``) and its batches from
the same one: a run that differs from the baseline in nothing but the draw of its start. Each seed gives one
disjoint pair per arm (the arm against the baseline of its seed), so the units are exchangeable.

* **Primary statistic** (:func:`loss_effects`): the baseline's final validation loss minus the arm's, paired by
  seed, read by a sign-flip test (under no effect, the two runs of a seed are exchangeable).
* **Secondary** (:func:`speedup_effects`): the crossing time above, the arm's speed-up minus the placebo's of the
  same seed, paired by seed; a run that never reaches the level counts as no speed-up (0).

Both go through the notebook's plan (:data:`attnstruct.analyses.plans.SYMMETRIC_INIT`), gated on every run behind
them having learned.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import xarray as xr

from .. import results, stats
from ..report import prose
from . import gates
from .plans import LOSS_CLAIM, SPEEDUP_CLAIM
from .plans import SYMMETRIC_INIT as PLAN
from .speedup_metrics import paper_speedup, robust_speedup
from .training_dynamics import label

BASELINE = "bert"  # the baseline initialisation
PLACEBO = "placebo"  # the baseline with other initial weights and the same batches


def check_design(
    inits: Sequence[str], objectives: Sequence[str], seeds: Sequence[int], smoothing: int, placebo_offset: int
) -> None:
    """Refuse a design notebook 06 cannot read: the baseline :data:`BASELINE` first in ``inits`` and no init twice,
    at least one objective, distinct seeds, ``smoothing >= 1``, and a ``placebo_offset >= 1`` that draws no
    placebo's weights from a seed of the design."""
    if not inits or inits[0] != BASELINE or len(set(inits)) != len(inits):
        raise ValueError(f"inits must start with the baseline {BASELINE!r} and not repeat, got {list(inits)}")
    if not objectives:
        raise ValueError("objectives must name at least one objective")
    if len(set(seeds)) != len(seeds) or not seeds:
        raise ValueError(f"seeds must be distinct and at least one, got {list(seeds)}")
    if smoothing < 1:
        raise ValueError("smoothing must be >= 1")
    if not isinstance(placebo_offset, int) or placebo_offset < 1 or {s + placebo_offset for s in seeds} & set(seeds):
        raise ValueError(
            f"placebo_offset {placebo_offset!r} must be a positive integer that takes no seed to another seed of "
            f"{list(seeds)}"
        )


# ---------------------------------------------------------------------------------------------- our runs


def as_placebo(runs: xr.Dataset) -> xr.Dataset:
    """The placebo runs (baseline runs with ``init_seed`` set) under the init :data:`PLACEBO`: ``[objective, init,
    seed, step]`` with one init."""
    if list(runs.init.values) != [BASELINE]:
        raise ValueError(f"the placebo runs must be {BASELINE!r} runs, got inits {list(runs.init.values)}")
    return runs.assign_coords(init=[PLACEBO])


def final_loss(val_loss) -> float:
    """The last measured validation loss of a run (``[step]``, NaN between evaluations)."""
    values = np.asarray(val_loss, dtype=float)
    values = values[np.isfinite(values)]
    if len(values) == 0:
        raise ValueError("the run has no validation loss")
    return float(values[-1])


COLUMNS = ["objective", "init", "seed", "robust", "paper", "final_loss", "baseline_final_loss"]


def speedups(runs: xr.Dataset, placebo: xr.Dataset, *, steps: int, smoothing: int = 3) -> pd.DataFrame:
    """Every arm of every seed against the baseline of its seed: one row per ``objective``, ``init`` (the treated
    initialisations of ``runs``, then :data:`PLACEBO`) and ``seed``.

    ``runs``: ``[objective, init, seed, step]`` with :data:`BASELINE` among the inits; ``placebo``: :func:`as_placebo`
    runs of the same objectives and seeds. Columns: ``robust`` (:func:`robust_speedup` on the validation loss,
    trailing mean of ``smoothing`` evaluations, fraction of ``steps``), ``paper`` (:func:`paper_speedup` on the
    training loss), NaN where never reached; ``final_loss`` (the arm's last validation loss) and
    ``baseline_final_loss`` (the baseline's of the same seed).
    """
    rows = []
    arms = [str(i) for i in runs.init.values if i != BASELINE]
    for objective in [str(o) for o in runs.objective.values]:
        for init, source in [(i, runs) for i in arms] + [(PLACEBO, placebo)]:
            for seed in [int(s) for s in runs.seed.values]:
                baseline = runs.sel(objective=objective, init=BASELINE, seed=seed)
                run = source.sel(objective=objective, init=init, seed=seed)
                robust, _ = robust_speedup(runs.step, run.val_loss, baseline.val_loss, steps, smoothing)
                rows.append(
                    {
                        "objective": objective,
                        "init": init,
                        "seed": seed,
                        "robust": robust,
                        "paper": paper_speedup(run.train_loss, baseline.train_loss),
                        "final_loss": final_loss(run.val_loss),
                        "baseline_final_loss": final_loss(baseline.val_loss),
                    }
                )
    return pd.DataFrame(
        rows, columns=["objective", "init", "seed", "robust", "paper", "final_loss", "baseline_final_loss"]
    )


def _arms(table: pd.DataFrame):
    """``(objective, init, its rows, the placebo's rows)`` per treated initialisation, rows in seed order."""
    for objective, rows in table.groupby("objective", sort=False):
        control = rows[rows["init"] == PLACEBO].sort_values("seed")
        for init, arm in rows[rows["init"] != PLACEBO].groupby("init", sort=False):
            yield str(objective), str(init), arm.sort_values("seed"), control


def _gate(targets: pd.DataFrame | None, objective: str, init: str) -> bool:
    return targets is None or gates.learned(targets, objective=objective, init=[init, BASELINE, PLACEBO])


def loss_effects(table: pd.DataFrame, *, targets: pd.DataFrame | None = None, seed: int = 0) -> list[stats.Effect]:
    """The primary statistic, per objective and treated initialisation of :func:`speedups`' ``table``: the
    baseline's final validation loss minus the arm's, paired by seed (predicted positive: the arm ends lower),
    :func:`attnstruct.stats.paired_effect`; gated on the arm, the baseline and the placebo having learned
    (``targets``, :func:`attnstruct.analyses.gates.loss_targets`; None: all learned); decided under the plan."""
    effects = [
        stats.paired_effect(
            arm["baseline_final_loss"].to_numpy(float),
            arm["final_loss"].to_numpy(float),
            claim=LOSS_CLAIM.format(objective=objective, init=init),
            seed=seed,
            learned=_gate(targets, objective, init),
        )
        for objective, init, arm, _ in _arms(table)
    ]
    return PLAN.decide(effects) if effects else effects


def speedup_effects(
    table: pd.DataFrame, *, column: str = "robust", targets: pd.DataFrame | None = None, seed: int = 0
) -> list[stats.Effect]:
    """The secondary statistic, per objective and treated initialisation: the arm's speed-up in ``column`` minus
    the placebo's of the same seed, paired by seed (a speed-up never reached counts as 0), predicted positive;
    gated and decided as :func:`loss_effects`."""
    effects = []
    for objective, init, arm, control in _arms(table):
        if list(arm["seed"]) != list(control["seed"]):
            raise ValueError(f"{init} ({objective}) and the placebo do not have the same seeds")
        treated, placebo = (np.nan_to_num(rows[column].to_numpy(float), nan=0.0) for rows in (arm, control))
        effects.append(
            stats.paired_effect(
                treated,
                placebo,
                claim=SPEEDUP_CLAIM.format(objective=objective, init=init),
                seed=seed,
                learned=_gate(targets, objective, init),
            )
        )
    return PLAN.decide(effects) if effects else effects


def spread(values) -> str:
    """Speed-ups ``[n]`` as ``median [min, max]`` of those reached, and how many seeds never reached the level."""
    values = np.asarray(values, dtype=float)
    reached = values[np.isfinite(values)]
    if len(reached) == 0:
        return f"never (0/{len(values)} seeds)"
    shown = f"{prose.percent(np.median(reached))} [{prose.percent(reached.min())}, {prose.percent(reached.max())}]"
    return shown if len(reached) == len(values) else f"{shown}, {len(values) - len(reached)} seed(s) never"


def _gains(rows: pd.DataFrame) -> np.ndarray:
    return (rows["baseline_final_loss"] - rows["final_loss"]).to_numpy(float)


def _range(values) -> str:
    values = np.asarray(values, dtype=float)
    return f"{prose.signed(np.mean(values), 3)} [{prose.signed(values.min(), 3)}, {prose.signed(values.max(), 3)}]"


def speedup_summary(table: pd.DataFrame) -> pd.DataFrame:
    """One row per objective and arm of :func:`speedups`' table (the placebo last): the final-loss gain over the
    baseline of the same seed as mean [min, max] over seeds, and both speed-ups as :func:`spread`."""
    rows = []
    for (objective, init), group in table.groupby(["objective", "init"], sort=False):
        rows.append(
            {
                "objective": objective,
                "init": init,
                "final loss, baseline minus arm: mean [min, max]": _range(_gains(group)),
                "robust speed-up, median [min, max]": spread(group["robust"]),
                "paper's metric on our runs": spread(group["paper"]),
            }
        )
    return pd.DataFrame(rows).set_index(["objective", "init"])


LOSS_WORDS = {
    stats.HOLDS: "ends below the baseline of its seed",
    stats.DOES_NOT_HOLD: "ends above the baseline of its seed",
    stats.CANNOT_TELL: "cannot be told apart from the baseline at the end",
}
SPEEDUP_WORDS = {
    stats.HOLDS: "reaches the baseline's final loss sooner than the placebo does",
    stats.DOES_NOT_HOLD: "is slower than the placebo",
    stats.CANNOT_TELL: "cannot be told apart from the placebo",
}


def _evidence(effect: stats.Effect) -> str:
    if effect.n == 1:
        return f"one seed, no interval; {effect.reason}"
    return (
        f"95% interval [{prose.signed(effect.low, 3)}, {prose.signed(effect.high, 3)}], sign-flip p = "
        f"{prose.number(effect.p_value)}, {effect.family}; {effect.reason}"
    )


def _arms_with(table: pd.DataFrame, effects: Sequence[stats.Effect]) -> list:
    """:func:`_arms` of ``table`` paired with ``effects``, one per treated initialisation in the same order."""
    arms = list(_arms(table))
    if len(arms) != len(effects):
        raise ValueError(f"{len(effects)} effects for {len(arms)} treated initialisations")
    return list(zip(arms, effects))


def describe_losses(table: pd.DataFrame, effects: Sequence[stats.Effect]) -> str:
    """One Markdown item per effect of :func:`loss_effects` (same table, same order): the verdict in words
    (:data:`LOSS_WORDS`), the mean gain with its interval, p and family, the placebo's gains beside it as the
    yardstick of a change of starting weights alone, and the smallest gain the design detects."""
    return "\n".join(
        f"- **{init}** ({label(objective)}): {LOSS_WORDS[effect.verdict]} (final validation loss, baseline minus "
        f"arm, mean over seeds {prose.signed(effect.estimate, 3)}; {_evidence(effect)}). The placebo, the baseline "
        f"from other weights, gives {_range(_gains(control))}; a gain of "
        f"{prose.signed(effect.detectable, 3)} or more would be detected with 80% power."
        for (objective, init, _, control), effect in _arms_with(table, effects)
    )


def describe_speedups(table: pd.DataFrame, effects: Sequence[stats.Effect]) -> str:
    """One Markdown item per effect of :func:`speedup_effects` (same table, same order): the verdict in words
    (:data:`SPEEDUP_WORDS`), the robust speed-ups against the placebo's, the mean paired difference with its
    interval, p and reason, and the paper's metric on the same runs."""
    return "\n".join(
        f"- **{init}** ({label(objective)}): {SPEEDUP_WORDS[effect.verdict]} (robust speed-up {spread(arm['robust'])} "
        f"against the placebo's {spread(control['robust'])}; mean paired difference {prose.signed(effect.estimate)}, "
        f"{_evidence(effect)}). The paper's metric gives {spread(arm['paper'])} on the same runs, and "
        f"{spread(control['paper'])} for the placebo."
        for (objective, init, arm, control), effect in _arms_with(table, effects)
    )


def loss_differences(runs: xr.Dataset, objective: str, init: str) -> xr.DataArray:
    """``init``'s validation loss minus the baseline's of the same seed, ``[seed, evaluated step]`` (``runs``
    ``[objective, init, seed, step]``, the placebo's included when merged in)."""
    losses = runs.val_loss.sel(objective=objective)
    base = losses.sel(init=BASELINE).dropna("step", how="all")
    return losses.sel(init=init).dropna("step", how="all") - base


# ---------------------------------------------------------------------------------------------- the dataset


LONG_NAMES = {
    "robust_speedup": "1 - step/steps at which the smoothed validation loss reaches the baseline's final one",
    "paper_speedup": "the authors' metric on the logged training loss (1 - index/rows)",
    "final_loss_gain": "the baseline's final validation loss minus the arm's, same seed",
    "placebo_robust_speedup": "the robust speed-up of the placebo (the baseline from other weights, same batches)",
    "placebo_final_loss_gain": "the baseline's final validation loss minus the placebo's, same seed",
}


def speedup_variables(table: pd.DataFrame, runs: xr.Dataset) -> xr.Dataset:
    """:func:`speedups`' table as variables over ``runs``' objectives and seeds: ``robust_speedup``,
    ``paper_speedup`` and ``final_loss_gain`` ``[objective, treated_init, seed]`` of the treated initialisations,
    and the placebo's ``placebo_robust_speedup``, ``placebo_paper_speedup``, ``placebo_final_loss_gain``
    ``[objective, seed]``."""
    objectives = [str(o) for o in runs.objective.values]
    inits = [str(i) for i in runs.init.values if i != BASELINE]
    seeds = [int(s) for s in runs.seed.values]
    indexed = table.assign(final_loss_gain=table["baseline_final_loss"] - table["final_loss"])
    indexed = indexed.rename(columns={"robust": "robust_speedup", "paper": "paper_speedup"})
    indexed = indexed.set_index(["objective", "init", "seed"])
    out = xr.Dataset(coords={"objective": objectives, "treated_init": inits, "seed": seeds})
    for name in ("robust_speedup", "paper_speedup", "final_loss_gain"):
        cells = pd.MultiIndex.from_product([objectives, inits, seeds])
        values = indexed[name].reindex(cells).to_numpy(dtype=float)
        out[name] = (("objective", "treated_init", "seed"), values.reshape(len(objectives), len(inits), -1))
        placebo = indexed[name].reindex(pd.MultiIndex.from_product([objectives, [PLACEBO], seeds]))
        out[f"placebo_{name}"] = (("objective", "seed"), placebo.to_numpy(dtype=float).reshape(len(objectives), -1))
    for name, long_name in LONG_NAMES.items():
        out[name].attrs["long_name"] = long_name
    return out


def result_dataset(
    runs: xr.Dataset,
    placebo: xr.Dataset,
    table: pd.DataFrame,
    *,
    effects: Sequence[stats.Effect],
    parameters: Mapping,
    unigram_entropy: float,
    learned: bool,
) -> xr.Dataset:
    """Notebook 06's dataset: every arm's runs, the placebo's losses (``placebo_val_loss``, ``placebo_train_loss``
    ``[objective, seed, step]``), :func:`speedup_variables`, the provenance attrs, whether every run learned
    (``loss_targets_met``) and under ``verdicts`` the table of ``effects`` (JSON, ``"{}"`` for none)."""
    out = runs.copy()
    out = out.assign(speedup_variables(table, runs).data_vars)
    for name in ("val_loss", "train_loss"):
        out[f"placebo_{name}"] = placebo[name].sel(init=PLACEBO, drop=True)
    out.attrs.update(
        results.provenance_attrs(
            parameters=parameters,
            scored_matrix=runs.attrs["scored_matrix"],
            unigram_entropy=unigram_entropy,
            loss_targets_met="yes" if learned else "no",
            verdicts=stats.verdict_table(effects).to_json(orient="index") if effects else "{}",
        )
    )
    out.attrs["runs"] = json.dumps(json.loads(runs.attrs["runs"]) + json.loads(placebo.attrs["runs"]), sort_keys=True)
    return out
