"""Notebook 06's speed-up: how much sooner a treated run reaches the baseline's final loss, against a placebo.

The paper's claim (section 4, the symmetric-initialisation table): a symmetric initialisation lets encoders
reach the baseline's final loss up to 73% sooner. Its metric, reproduced by :func:`paper_speedup`:

1. take the baseline's *last logged training loss* (no smoothing);
2. find the first logged row where the treated run's training loss is below it;
3. speed-up ``= 1 - index / n_rows`` (0-based index; their rows are logged every 200 steps, 1000 rows, so row
   ``index`` is step ``200 (index + 1)``).

If the treated run never gets below, the authors' ``idxmax`` returns 0 and their notebook prints 100%; here the
result is NaN.

:func:`robust_speedup` uses held-out loss and smoothing instead: the first step at which the treated run's
smoothed validation loss reaches the baseline's final smoothed validation loss, as a fraction of the run,
``1 - step / steps``. Both return NaN when the level is never reached; a negative value is not possible (at the
last step the speed-up is 0 if the level is reached exactly there).

**The placebo.** :func:`speedups` applies both metrics to each treated run against the baseline of its seed, and to
the baseline of the next seed against the baseline of each seed (init ``"bert"`` in the table): two runs that
differ only in their seed, whose speed-up is noise. :func:`speedup_effects` compares the two groups with the one
rule (:func:`attnstruct.stats.two_sample_effect`), gated on every run behind them having learned.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import xarray as xr

from .. import reference, results, stats
from ..report import prose
from . import gates
from .plans import SPEEDUP_CLAIM
from .plans import SYMMETRIC_INIT as PLAN
from .training_dynamics import label

PLACEBO = "bert"  # the baseline initialisation; its rows in the speed-up table are the placebo


def _finite_series(steps, values, what: str) -> tuple[np.ndarray, np.ndarray]:
    steps, values = np.asarray(steps, dtype=float), np.asarray(values, dtype=float)
    if steps.shape != values.shape or steps.ndim != 1:
        raise ValueError(
            f"{what}: steps and values must be 1-D of the same length, got {steps.shape} and {values.shape}"
        )
    keep = np.isfinite(values)
    steps, values = steps[keep], values[keep]
    if len(values) == 0:
        raise ValueError(f"{what}: no finite values")
    if np.any(np.diff(steps) <= 0):
        raise ValueError(f"{what}: steps must increase")
    return steps, values


def check_design(
    inits: Sequence[str],
    objectives: Sequence[str],
    treated_objectives: Sequence[str],
    seeds: Sequence[int],
    treated_seeds: Sequence[int],
    smoothing: int,
) -> None:
    """Refuse a design notebook 06 cannot read: the baseline :data:`PLACEBO` first in ``inits`` and no init twice,
    treated objectives and seeds among the baselines', ``smoothing >= 1``."""
    if not inits or inits[0] != PLACEBO or len(set(inits)) != len(inits):
        raise ValueError(f"inits must start with the baseline {PLACEBO!r} and not repeat, got {list(inits)}")
    if not set(treated_seeds) <= set(seeds):
        raise ValueError(f"treated_seeds {list(treated_seeds)} must be among seeds {list(seeds)}")
    if not set(treated_objectives) <= set(objectives):
        raise ValueError(f"treated_objectives {list(treated_objectives)} must be among objectives {list(objectives)}")
    if smoothing < 1:
        raise ValueError("smoothing must be >= 1")


def trailing_mean(values, window: int) -> np.ndarray:
    """Mean of each value and the ``window - 1`` before it (fewer at the start): ``[n] -> [n]``."""
    if not isinstance(window, int) or window < 1:
        raise ValueError(f"window must be a positive integer, got {window!r}")
    values = np.asarray(values, dtype=float)
    sums = np.cumsum(np.insert(values, 0, 0.0))
    index = np.arange(1, len(values) + 1)
    start = np.maximum(index - window, 0)
    return (sums[index] - sums[start]) / (index - start)


def robust_speedup(steps, treated, baseline, total_steps: int, window: int = 3) -> tuple[float, float]:
    """``(speed-up, step)``: first step where the treated smoothed loss <= the baseline's final smoothed loss.

    Args:
        steps: ``[n]`` the steps of the evaluations (NaN losses between evaluations are dropped).
        treated, baseline: ``[n]`` validation losses of the two runs at those steps.
        total_steps: length of the run; the speed-up is ``1 - step / total_steps``.
        window: evaluations in the trailing mean.

    Returns ``(nan, nan)`` if the treated run never reaches the level.
    """
    steps_t, treated = _finite_series(steps, treated, "treated")
    steps_b, baseline = _finite_series(steps, baseline, "baseline")
    target = trailing_mean(baseline, window)[-1]
    reached = np.nonzero(trailing_mean(treated, window) <= target)[0]
    if len(reached) == 0:
        return float("nan"), float("nan")
    step = float(steps_t[reached[0]])
    return 1.0 - step / total_steps, step


def paper_speedup(treated, baseline) -> float:
    """The authors' metric on logged training losses ``[n]`` of both runs (same logging grid); NaN if never reached.

    ``1 - i / n`` with ``i`` the first 0-based index where ``treated < baseline[-1]``; rows with NaN loss (step 0)
    are dropped first.
    """
    treated = np.asarray(treated, dtype=float)
    baseline = np.asarray(baseline, dtype=float)
    if treated.shape != baseline.shape or treated.ndim != 1:
        raise ValueError("treated and baseline must be 1-D logs of the same length")
    keep = np.isfinite(treated) & np.isfinite(baseline)
    treated, baseline = treated[keep], baseline[keep]
    if len(treated) == 0:
        raise ValueError("no finite training losses")
    below = np.nonzero(treated < baseline[-1])[0]
    if len(below) == 0:
        return float("nan")
    return 1.0 - below[0] / len(treated)


def speedup_against_placebo(
    treated,
    placebo,
    *,
    claim: str,
    alpha: float = 0.05,
    seed: int = 0,
    n_resamples: int = 10_000,
    learned: bool = True,
) -> stats.Effect:
    """Speed-ups of an initialisation (``treated`` ``[n]``, each against the baseline of its seed) against
    baseline-vs-baseline pairs of different seeds (``placebo`` ``[m]``), predicted positive
    (:func:`attnstruct.stats.two_sample_effect`); ``learned``: did every run behind both learn.

    NaN ("never reached the baseline's final loss") counts as 0.0, a speed-up of at most 0.
    """
    t, c = (np.where(np.isnan(x), 0.0, x) for x in (np.asarray(treated, float), np.asarray(placebo, float)))
    return stats.two_sample_effect(t, c, claim=claim, alpha=alpha, seed=seed, n_resamples=n_resamples, learned=learned)


def describe_reported(table: pd.DataFrame | None = None) -> str:
    """The paper's speed-ups of its encoders (:func:`reported`), 4-layer then 12-layer, and the datasets on which
    the symmetric run never reached the baseline's final loss."""
    table = reference.symmetric_init() if table is None else table
    encoders = table[table["mode"] == "encoder"]
    four, twelve = (encoders[encoders.n_layers == n] for n in (4, 12))
    never = twelve[twelve.speedup.isna()]

    def listed(rows: pd.DataFrame) -> str:
        return ", ".join(f"{prose.percent(r.speedup, 1)} ({r.dataset})" for r in rows.itertuples())

    tail = (
        f", and none on {', '.join(never.dataset)}: that symmetric run ended above the baseline's final loss "
        "(the authors' notebook printed it as a speed-up of 100%)."
        if len(never)
        else "."
    )
    return (
        "**The paper's speed-ups** (authors' result files, their rule on the training loss, one seed each): 4-layer "
        f"encoders {listed(four)}; 12-layer encoders {listed(twelve.dropna(subset=['speedup']))}{tail}"
    )


# ---------------------------------------------------------------------------------------------- our runs


def speedups(baselines: xr.Dataset, treated: xr.Dataset, *, steps: int, smoothing: int = 3) -> pd.DataFrame:
    """Both speed-ups of every treated run against the baseline of its seed, and the placebo's.

    ``baselines``: the ``bert`` runs ``[objective, seed, step]`` (notebook 05's); ``treated``: the runs of every
    initialisation ``[objective, init, seed, step]``. One row per ``objective``, ``init``, ``seed``: ``robust``
    (:func:`robust_speedup` on the validation loss, trailing mean of ``smoothing`` evaluations, fraction of
    ``steps``) and ``paper`` (:func:`paper_speedup` on the training loss); NaN where never reached. The rows of
    init :data:`PLACEBO` (when there are two baseline seeds or more) are the placebo: the baseline of the next
    seed (the last seed's next is the first) against the baseline of ``seed``.
    """
    seeds = [int(s) for s in baselines.seed.values]
    rows = []
    for objective in [str(o) for o in treated.objective.values]:
        base = baselines.sel(objective=objective)
        pairs = [
            (str(init), int(seed), treated.sel(objective=objective, init=init, seed=seed))
            for init in treated.init.values
            if init != PLACEBO
            for seed in treated.seed.values
        ]
        if len(seeds) > 1:
            pairs += [(PLACEBO, seed, base.sel(seed=seeds[(k + 1) % len(seeds)])) for k, seed in enumerate(seeds)]
        for init, seed, run in pairs:
            baseline = base.sel(seed=seed)
            robust, _ = robust_speedup(baselines.step, run.val_loss, baseline.val_loss, steps, smoothing)
            paper = paper_speedup(run.train_loss, baseline.train_loss)
            rows.append({"objective": objective, "init": init, "seed": seed, "robust": robust, "paper": paper})
    return pd.DataFrame(rows, columns=["objective", "init", "seed", "robust", "paper"])


def _groups(table: pd.DataFrame):
    """``(objective, init, treated rows, placebo rows)`` of every treated initialisation of an objective that has
    placebo rows, in the table's order."""
    for objective, rows in table.groupby("objective", sort=False):
        control = rows[rows["init"] == PLACEBO]
        if len(control):
            for init, treated in rows[rows["init"] != PLACEBO].groupby("init", sort=False):
                yield str(objective), str(init), treated, control


def speedup_effects(
    table: pd.DataFrame, *, column: str = "robust", targets: pd.DataFrame | None = None, seed: int = 0
) -> list[stats.Effect]:
    """Per objective and treated initialisation of :func:`speedups`' ``table``: its speed-ups in ``column`` (one
    per seed) against the placebo's (:func:`speedup_against_placebo`); none for an objective without placebo
    rows. ``targets`` (:func:`attnstruct.analyses.gates.loss_targets` of every run, None: all learned): each
    effect is gated on the treated runs of its initialisation and the objective's baselines having learned, and
    decided under the notebook's plan (:data:`attnstruct.analyses.plans.SYMMETRIC_INIT`)."""
    effects = [
        speedup_against_placebo(
            treated[column].to_numpy(dtype=float),
            control[column].to_numpy(dtype=float),
            seed=seed,
            claim=SPEEDUP_CLAIM.format(objective=objective, init=init),
            learned=targets is None or gates.learned(targets, objective=objective, init=[init, PLACEBO]),
        )
        for objective, init, treated, control in _groups(table)
    ]
    return PLAN.decide(effects) if effects else effects


def spread(values) -> str:
    """Speed-ups ``[n]`` as ``median [min, max]`` of those reached, and how many seeds never reached the level."""
    values = np.asarray(values, dtype=float)
    reached = values[np.isfinite(values)]
    if len(reached) == 0:
        return f"never (0/{len(values)} seeds)"
    shown = f"{prose.percent(np.median(reached))} [{prose.percent(reached.min())}, {prose.percent(reached.max())}]"
    return shown if len(reached) == len(values) else f"{shown}, {len(values) - len(reached)} seed(s) never"


def speedup_summary(table: pd.DataFrame) -> pd.DataFrame:
    """One row per objective and initialisation of :func:`speedups`' table (the placebo last, as ``bert
    (placebo)``): both speed-ups as :func:`spread` over seeds."""
    rows = []
    for (objective, init), group in table.groupby(["objective", "init"], sort=False):
        rows.append(
            {
                "objective": objective,
                "init": init if init != PLACEBO else f"{PLACEBO} (placebo)",
                "robust speed-up, median [min, max] over seeds": spread(group["robust"]),
                "paper's metric on our runs": spread(group["paper"]),
            }
        )
    return pd.DataFrame(rows).set_index(["objective", "init"])


SPEEDUP_WORDS = {
    stats.HOLDS: "reaches the baseline's final loss sooner than the placebo does",
    stats.DOES_NOT_HOLD: "is slower than the placebo",
    stats.CANNOT_TELL: "cannot be told apart from the placebo",
}


def _interval(effect: stats.Effect) -> str:
    if effect.n == 1:
        return "one treated seed, no interval"
    low, high = prose.signed(effect.low), prose.signed(effect.high)
    return f"95% interval [{low}, {high}], permutation p = {prose.number(effect.p_value)}"


def describe_speedups(table: pd.DataFrame, effects: Sequence[stats.Effect]) -> str:
    """One Markdown item per effect of :func:`speedup_effects` (same table, same order): the verdict in words
    (:data:`SPEEDUP_WORDS`), the robust speed-ups against the placebo's, the difference of the means with its
    interval, p and reason, and the paper's metric on the same runs; then whether the design can reach a verdict
    (:func:`attnstruct.stats.describe_reach`)."""
    groups = list(_groups(table))
    if not groups:
        return "With one baseline seed there is no placebo: the speed-ups are not tested against one."
    if len(groups) != len(effects):
        raise ValueError(f"{len(effects)} effects for {len(groups)} treated initialisations")
    lines = [
        f"- **{init}** ({label(objective)}): {SPEEDUP_WORDS[effect.verdict]} (robust speed-up "
        f"{spread(treated['robust'])} against the placebo's {spread(control['robust'])}; difference of the means "
        f"{prose.signed(effect.estimate)}, {_interval(effect)}; {effect.reason}). The paper's metric gives "
        f"{spread(treated['paper'])} on the same runs, and {spread(control['paper'])} for the placebo."
        for (objective, init, treated, control), effect in zip(groups, effects)
    ]
    n, m = min(len(g[2]) for g in groups), min(len(g[3]) for g in groups)
    reach = stats.describe_reach(n, control=m, control_unit="placebo pair", what="each speed-up verdict")
    return "**The speed-up at this scale:**\n\n" + "\n".join(lines) + "\n\n" + reach


def placebo_curves(baselines: xr.DataArray) -> xr.DataArray | None:
    """The placebo's validation-loss differences ``[pair, step]`` of one objective's baselines (``[seed, step]``,
    NaN between evaluations): the baseline of the next seed minus that of each seed; None with one seed."""
    own = baselines.dropna("step", how="all")
    seeds = list(own.seed.values)
    if len(seeds) < 2:
        return None
    pairs = [
        own.sel(seed=seeds[(k + 1) % len(seeds)]).drop_vars("seed") - own.sel(seed=seed).drop_vars("seed")
        for k, seed in enumerate(seeds)
    ]
    return xr.concat(pairs, "pair")


def loss_differences(treated: xr.Dataset, objective: str, init: str) -> xr.DataArray:
    """``init``'s validation loss minus the baseline's of the same seed, ``[seed, evaluated step]``."""
    losses = treated.val_loss.sel(objective=objective)
    base = losses.sel(init=PLACEBO).dropna("step", how="all")
    return losses.sel(init=init).dropna("step", how="all") - base


# ---------------------------------------------------------------------------------------------- the dataset


LONG_NAMES = {
    "robust_speedup": "1 - step/steps at which the smoothed validation loss reaches the baseline's final one",
    "paper_speedup": "the authors' metric on the logged training loss (1 - index/rows)",
    "placebo_robust_speedup": "the robust speed-up of the baseline of the next seed (a placebo)",
}


def speedup_variables(table: pd.DataFrame, treated: xr.Dataset, baseline_seeds: Sequence[int]) -> xr.Dataset:
    """:func:`speedups`' table as variables: ``robust_speedup`` and ``paper_speedup`` ``[objective,
    treated_init, seed]`` over ``treated``'s objectives, non-baseline inits and seeds, and the placebo's
    ``placebo_robust_speedup`` and ``placebo_paper_speedup`` ``[objective, baseline_seed]`` (NaN without a
    placebo)."""
    objectives = [str(o) for o in treated.objective.values]
    inits = [str(i) for i in treated.init.values if i != PLACEBO]
    seeds, baseline_seeds = [int(s) for s in treated.seed.values], [int(s) for s in baseline_seeds]
    indexed = table.set_index(["objective", "init", "seed"])
    out = xr.Dataset(coords={"objective": objectives, "treated_init": inits, "baseline_seed": baseline_seeds})
    for metric in ("robust", "paper"):
        cells = pd.MultiIndex.from_product([objectives, inits, seeds])
        values = indexed[metric].reindex(cells).to_numpy(dtype=float)
        out[f"{metric}_speedup"] = (
            ("objective", "treated_init", "seed"),
            values.reshape(len(objectives), len(inits), -1),
        )
        placebo = indexed[metric].reindex(pd.MultiIndex.from_product([objectives, [PLACEBO], baseline_seeds]))
        out[f"placebo_{metric}_speedup"] = (
            ("objective", "baseline_seed"),
            placebo.to_numpy(dtype=float).reshape(len(objectives), -1),
        )
    for name, long_name in LONG_NAMES.items():
        out[name].attrs["long_name"] = long_name
    return out.assign_coords(seed=seeds)


def result_dataset(
    treated: xr.Dataset,
    table: pd.DataFrame,
    *,
    baseline_seeds: Sequence[int],
    effects: Sequence[stats.Effect],
    parameters: Mapping,
    unigram_entropy: float,
    learned: bool,
) -> xr.Dataset:
    """Notebook 06's dataset: the treated runs, :func:`speedup_variables`, the provenance attrs, whether every run
    learned (``loss_targets_met``) and under ``verdicts`` the table of ``effects`` (JSON, ``"{}"`` for none)."""
    out = treated.copy()
    out = out.assign(speedup_variables(table, treated, baseline_seeds).data_vars)
    out.attrs.update(
        results.provenance_attrs(
            parameters=parameters,
            scored_matrix=treated.attrs["scored_matrix"],
            unigram_entropy=unigram_entropy,
            loss_targets_met="yes" if learned else "no",
            verdicts=stats.verdict_table(effects).to_json(orient="index") if effects else "{}",
        )
    )
    out.attrs["runs"] = treated.attrs["runs"]
    return out
