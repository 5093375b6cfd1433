"""Notebook 06: symmetric initialisation as a designed experiment, its plan, verdicts and the facts it states.

**The design.** Every arm of a seed (the baseline :data:`BASELINE` and each treated initialisation) sees the same
batches, since a run's batches are a function of ``(seed, step)``; only the initial weights differ. The placebo
(:data:`PLACEBO`) is the baseline once more, its weights drawn from another seed (``init_seed``) and its batches from
the same one: a run that differs from the baseline in nothing but the draw of its start. Each seed gives one
disjoint pair per arm (the arm against the baseline of its seed), so the units are exchangeable.

**Every arm against the placebo.** Each claim reads an arm against the placebo of its seed, not the baseline: the
baseline is one draw of the start, and a baseline that drew lucky (or not) moves every arm's difference at once;
the placebo is a second, independent draw, and under no effect the arm and the placebo of a seed are two runs of
one design from two draws, so their difference is symmetric about 0 and the sign-flip test is exact (the mean of
the baseline and the placebo would halve the control's draw noise, but an arm minus a mean of two runs is not
symmetric under no effect unless the losses are). The baseline minus the placebo is reported beside each verdict:
the size of the luck of a draw.

* **Primary statistic** (:func:`loss_effects`): the placebo's final validation loss minus the arm's, paired by
  seed, read by a sign-flip test (under no effect, the two runs of a seed are exchangeable).
* **Secondary** (:func:`speedup_effects`): the crossing time below, the arm's speed-up minus the placebo's of the
  same seed, paired by seed; a run that never reaches the level counts as no speed-up (0).
* **Secondary** (:func:`persistence_effects`): ``W_q^h = W_k^h`` in every head makes ``W_qk^h = W_k^h (W_k^h)^T``
  symmetric (positive semi-definite) at step 0, so every head scores +1 (:func:`initial_state` measures it on the
  models, with the weight scales that tell the initialisations apart). Training keeps it so only while the gradients
  of ``W_q`` and ``W_k`` agree: per treated initialisation, does the final median symmetry over layers still lie
  above the placebo's, paired by seed?

All go through the notebook's declared :data:`PLAN`, gated on every run behind them having learned
(:mod:`attnstruct.analyses.text_runs`).

**The speed-up metrics.** The paper's claim (section 4, the symmetric-initialisation table): a symmetric
initialisation lets encoders reach the baseline's final loss up to 73% sooner. Its metric, :func:`paper_speedup`:
the baseline's *last logged training loss* (no smoothing); the first logged row where the treated run's training
loss is below it; speed-up ``= 1 - index / n_rows`` (0-based index; their rows are logged every 200 steps, 1000 rows,
so row ``index`` is step ``200 (index + 1)``). If the treated run never gets below, the authors' ``idxmax`` returns 0
and their notebook prints 100%; here the result is NaN. :func:`robust_speedup` uses held-out loss and smoothing
instead: the first step at which the treated run's smoothed validation loss reaches the baseline's final smoothed
validation loss, as a fraction of the run, ``1 - step / steps``. Both return NaN when the level is never reached; a
negative value is not possible.

What the notebook says comes from here as facts records (frozen dataclasses of strings formatted by
:mod:`attnstruct.report.prose`, plus the few data-dependent words); its sentences and figure titles are templates in
the notebook, filled by :func:`attnstruct.report.prose.say` and :func:`~attnstruct.report.prose.fill`, and its figures
are drawn in its cells.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import xarray as xr

from .. import reference, results, stats
from ..report import prose
from ..scores import factor_scores
from ..tasks import text, text_config
from . import text_runs
from .text_runs import final_median, label, no_finding

# ---------------------------------------------------------------------------------------------- the plan

LOSS_CLAIM = "{objective}: final validation loss, placebo minus {init}"
SPEEDUP_CLAIM = "{objective}: speed-up of {init} minus the placebo's"
PERSISTENCE_CLAIM = "{init} minus placebo, final median symmetry ({objective})"
_06_OBJECTIVES, _06_INITS = ("mlm", "next-token"), ("symmetric", "symmetric-matched", "default-scale")
_SAME_BATCHES = "the runs of a seed see the same batches from different starts"
_AGAINST_PLACEBO = (
    "the initialisation and the placebo (the baseline from other weights, same batches) exchangeable within a seed; "
    "the baseline minus the placebo shows the spread of a new draw of the start alone"
)

PLAN = stats.Plan(
    "06_symmetric_init",
    tuple(
        stats.Claim(
            LOSS_CLAIM.format(objective=objective, init=init),
            "seed",
            "validation loss at the last step on the fixed held-out windows, the placebo minus the initialisation "
            "of one seed, mean over seeds",
            f"sign-flip over seeds, paired ({_SAME_BATCHES})",
            _AGAINST_PLACEBO,
            role="primary" if (objective, init) == ("mlm", "symmetric") else "secondary",
        )
        for objective in _06_OBJECTIVES
        for init in _06_INITS
    )
    + tuple(
        stats.Claim(
            SPEEDUP_CLAIM.format(objective=objective, init=init),
            "seed",
            "1 - step / steps at which a run's smoothed validation loss first reaches its baseline's final one (never: "
            "0), the initialisation minus the placebo of one seed, mean over seeds",
            f"sign-flip over seeds, paired ({_SAME_BATCHES})",
            "the placebo: the baseline from other weights and the same batches, one disjoint pair per seed",
            role="secondary",
        )
        for objective in _06_OBJECTIVES
        for init in _06_INITS
    )
    + tuple(
        stats.Claim(
            PERSISTENCE_CLAIM.format(objective=objective, init=init),
            "seed",
            "median symmetry over layers at the end, the initialisation minus the placebo of one seed, mean over seeds",
            f"sign-flip over seeds, paired ({_SAME_BATCHES})",
            _AGAINST_PLACEBO,
            role="secondary",
        )
        for objective in _06_OBJECTIVES
        for init in _06_INITS
    ),
)


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


def _paired_arms(table: pd.DataFrame):
    """:func:`_arms`, refusing an arm whose seeds are not the placebo's."""
    for objective, init, arm, control in _arms(table):
        if list(arm["seed"]) != list(control["seed"]):
            raise ValueError(f"{init} ({objective}) and the placebo do not have the same seeds")
        yield objective, init, arm, control


def _gate(targets: pd.DataFrame | None, objective: str, init: str) -> bool:
    return targets is None or text_runs.learned(targets, objective=objective, init=[init, BASELINE, PLACEBO])


def loss_effects(table: pd.DataFrame, *, targets: pd.DataFrame | None = None, seed: int = 0) -> list[stats.Effect]:
    """The primary statistic, per objective and treated initialisation of :func:`speedups`' ``table``: the
    placebo's final validation loss minus the arm's, paired by seed (predicted positive: the arm ends lower),
    :func:`attnstruct.stats.paired_effect`; gated on the arm, the baseline and the placebo having learned
    (``targets``, :func:`attnstruct.analyses.text_runs.loss_targets`; None: all learned); decided under the plan."""
    effects = [
        stats.paired_effect(
            control["final_loss"].to_numpy(float),
            arm["final_loss"].to_numpy(float),
            claim=LOSS_CLAIM.format(objective=objective, init=init),
            seed=seed,
            learned=_gate(targets, objective, init),
        )
        for objective, init, arm, control in _paired_arms(table)
    ]
    return PLAN.decide(effects) if effects else effects


def speedup_effects(
    table: pd.DataFrame, *, column: str = "robust", targets: pd.DataFrame | None = None, seed: int = 0
) -> list[stats.Effect]:
    """The secondary statistic, per objective and treated initialisation: the arm's speed-up in ``column`` minus
    the placebo's of the same seed, paired by seed (a speed-up never reached counts as 0), predicted positive;
    gated and decided as :func:`loss_effects`."""
    effects = []
    for objective, init, arm, control in _paired_arms(table):
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


# ---------------------------------------------------------------------------------------------- the speed-up metrics


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


def _placebo_gains(rows: pd.DataFrame, table: pd.DataFrame) -> np.ndarray:
    """The placebo's final loss minus each row's, the placebo of the row's objective and seed."""
    placebo = table[table["init"] == PLACEBO].set_index(["objective", "seed"])["final_loss"]
    keys = pd.MultiIndex.from_arrays([rows["objective"], rows["seed"]])
    return placebo.reindex(keys).to_numpy(float) - rows["final_loss"].to_numpy(float)


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
                "final loss, placebo minus arm: mean [min, max]": _range(_placebo_gains(group, table)),
                "robust speed-up, median [min, max]": spread(group["robust"]),
                "paper's metric on our runs": spread(group["paper"]),
            }
        )
    return pd.DataFrame(rows).set_index(["objective", "init"])


# ---------------------------------------------------------------------------------------------- the symmetric start


def initial_state(configs: Sequence[text_config.TextConfig], vocab_size: int) -> pd.DataFrame:
    """The model of the first configuration of each initialisation in ``configs`` at step 0, one row per
    initialisation: the standard deviation of the first layer's ``W_q``, ``W_k`` and ``W_v``, the largest
    absolute bias of its Q, K and V, and the range of the symmetry of every head's ``W_qk`` (text)."""
    from ..training.model import query_key_factors

    rows, seen = [], set()
    for config in configs:
        if config.init in seen:
            continue
        seen.add(config.init)
        model = text.build_model(config, vocab_size)
        layer = model.encoder.blocks[0].attention
        symmetry = factor_scores(*query_key_factors(model)).symmetry
        linears = {"q": layer.query, "k": layer.key, "v": layer.value}
        rows.append(
            {"init": config.init}
            | {f"std W_{name}": float(linear.weight.detach().std()) for name, linear in linears.items()}
            | {
                "max |bias q,k,v|": max(float(m.bias.detach().abs().max()) for m in linears.values()),
                "head symmetry (min..max)": f"{float(symmetry.min()):+.2f} .. {float(symmetry.max()):+.2f}",
            }
        )
    return pd.DataFrame(rows).set_index("init")


def persistence_table(treated: xr.Dataset) -> pd.DataFrame:
    """The final median symmetry over layers, mean over seeds: one row per objective, one column per init."""
    final = final_median(treated, "symmetry").mean("seed")
    return final.transpose("objective", "init").to_pandas().rename_axis(index=None, columns=None)


def persistence_effects(
    treated: xr.Dataset,
    placebo: xr.Dataset,
    objective: str,
    *,
    targets: pd.DataFrame | None = None,
    seed: int = 0,
) -> list[stats.Effect]:
    """Per treated initialisation: its final median symmetry over layers minus the placebo's of the same seed
    (``placebo``: :func:`as_placebo` runs with ``symmetry``), paired by seed (predicted positive: the start's
    symmetry persists), gated on the initialisation's, the baseline's and the placebo's runs of these seeds having
    learned (``targets``, :func:`attnstruct.analyses.text_runs.loss_targets`; None: all learned); secondary claims
    of :data:`PLAN`."""
    final = final_median(treated, "symmetry").sel(objective=objective)
    seeds = [int(s) for s in treated.seed.values]
    control = final_median(placebo, "symmetry").sel(objective=objective, init=PLACEBO).sel(seed=seeds)
    effects = [
        stats.paired_effect(
            final.sel(init=init).values,
            control.values,
            claim=PERSISTENCE_CLAIM.format(init=init, objective=objective),
            seed=seed,
            learned=targets is None
            or text_runs.learned(targets, objective=objective, init=[str(init), BASELINE, PLACEBO], seed=seeds),
        )
        for init in treated.init.values
        if init != BASELINE
    ]
    return PLAN.decide(effects) if effects else effects


def loss_gains(runs: xr.Dataset, objective: str, init: str, control: str = PLACEBO) -> xr.DataArray:
    """``control``'s validation loss minus ``init``'s of the same seed, ``[seed, evaluated step]``: positive where
    ``init`` is ahead (``runs`` ``[objective, init, seed, step]``, the placebo's included when merged in). At the last
    step and with the placebo as ``control``, its mean over seeds is the estimate of :func:`loss_effects`."""
    losses = runs.val_loss.sel(objective=objective)
    reference = losses.sel(init=control).dropna("step", how="all")
    return reference - losses.sel(init=init).dropna("step", how="all")


# ---------------------------------------------------------------------------------------------- the dataset


LONG_NAMES = {
    "robust_speedup": "1 - step/steps at which the smoothed validation loss reaches the baseline's final one",
    "paper_speedup": "the authors' metric on the logged training loss (1 - index/rows)",
    "final_loss_gain": "the baseline's final validation loss minus the arm's, same seed",
    "placebo_robust_speedup": "the robust speed-up of the placebo (the baseline from other weights, same batches)",
    "placebo_final_loss_gain": "the baseline's final validation loss minus the placebo's, same seed",
    "final_loss_gain_over_placebo": "the placebo's final validation loss minus the arm's, same seed",
}


def speedup_variables(table: pd.DataFrame, runs: xr.Dataset) -> xr.Dataset:
    """:func:`speedups`' table as variables over ``runs``' objectives and seeds: ``robust_speedup``,
    ``paper_speedup``, ``final_loss_gain`` and ``final_loss_gain_over_placebo`` ``[objective, treated_init, seed]``
    of the treated initialisations,
    and the placebo's ``placebo_robust_speedup``, ``placebo_paper_speedup``, ``placebo_final_loss_gain``
    ``[objective, seed]``."""
    objectives = [str(o) for o in runs.objective.values]
    inits = [str(i) for i in runs.init.values if i != BASELINE]
    seeds = [int(s) for s in runs.seed.values]
    indexed = table.assign(
        final_loss_gain=table["baseline_final_loss"] - table["final_loss"],
        final_loss_gain_over_placebo=_placebo_gains(table, table),
    )
    indexed = indexed.rename(columns={"robust": "robust_speedup", "paper": "paper_speedup"})
    indexed = indexed.set_index(["objective", "init", "seed"])
    out = xr.Dataset(coords={"objective": objectives, "treated_init": inits, "seed": seeds})
    for name in ("robust_speedup", "paper_speedup", "final_loss_gain"):
        cells = pd.MultiIndex.from_product([objectives, inits, seeds])
        values = indexed[name].reindex(cells).to_numpy(dtype=float)
        out[name] = (("objective", "treated_init", "seed"), values.reshape(len(objectives), len(inits), -1))
        placebo = indexed[name].reindex(pd.MultiIndex.from_product([objectives, [PLACEBO], seeds]))
        out[f"placebo_{name}"] = (("objective", "seed"), placebo.to_numpy(dtype=float).reshape(len(objectives), -1))
    cells = pd.MultiIndex.from_product([objectives, inits, seeds])
    values = indexed["final_loss_gain_over_placebo"].reindex(cells).to_numpy(dtype=float)
    out["final_loss_gain_over_placebo"] = (
        ("objective", "treated_init", "seed"),
        values.reshape(len(objectives), len(inits), -1),
    )
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


# The facts the notebook's sentences and titles state: strings formatted by attnstruct.report.prose.


@dataclass(frozen=True)
class ReportedFacts:
    """The paper's speed-ups of its encoders (:func:`attnstruct.reference.symmetric_init`, one seed each): the
    ``four``-layer and ``twelve``-layer ones (``26.0% (jigsaw), ...``), the datasets where the symmetric run ``never``
    reached the baseline's final loss (``any_never``), and the full speed-up the authors' notebook ``printed`` then."""

    four: str
    twelve: str
    any_never: bool
    never: str
    printed: str


def reported_speedups(table: pd.DataFrame | None = None) -> ReportedFacts:
    """The facts of the paper's speed-ups (``table``: :func:`attnstruct.reference.symmetric_init` by default)."""
    table = reference.symmetric_init() if table is None else table
    encoders = table[table["mode"] == "encoder"]
    four, twelve = (encoders[encoders.n_layers == n] for n in (4, 12))
    never = twelve[twelve.speedup.isna()]

    def listed(rows: pd.DataFrame) -> str:
        return ", ".join(f"{prose.percent(r.speedup, 1)} ({r.dataset})" for r in rows.itertuples())

    return ReportedFacts(
        four=listed(four),
        twelve=listed(twelve.dropna(subset=["speedup"])),
        any_never=bool(len(never)),
        never=", ".join(never.dataset),
        printed=prose.percent(1.0),
    )


@dataclass(frozen=True)
class ScaleFacts:
    """The standard deviation of PyTorch's default ``U(+-1/sqrt(d))`` at width ``d_model`` (``default_std``), and
    BERT's (``bert_std``)."""

    d_model: str
    default_std: str
    bert_std: str


def initial_scales(d_model: int) -> ScaleFacts:
    """The facts of the two initial scales at width ``d_model``."""
    return ScaleFacts(str(d_model), prose.number(1 / np.sqrt(3 * d_model), 4), prose.number(0.02))


@dataclass(frozen=True)
class ArmVerdictFacts:
    """One treated ``init``'s verdict on an ``objective`` (the effect's own line,
    :func:`attnstruct.report.prose.effect_line`, gives its evidence): whether it ``holds`` or ``fails`` (neither:
    cannot tell), the mean paired difference ``estimate``; the baseline's final-loss gains over the placebo of the
    same seed (``baseline_gains``: mean [min, max], the luck of one draw of the start); the robust speed-ups of the
    arm and the placebo (``robust``, ``placebo_robust``) and the paper's metric of both (``paper``,
    ``placebo_paper``), each as :func:`spread`."""

    init: str
    objective: str
    holds: bool
    fails: bool
    estimate: str
    baseline_gains: str
    robust: str
    placebo_robust: str
    paper: str
    placebo_paper: str


def arm_verdicts(table: pd.DataFrame, effects: Sequence[stats.Effect], digits: int = 2) -> list[ArmVerdictFacts]:
    """The facts of each effect of :func:`loss_effects` or :func:`speedup_effects` (same ``table``, same order), its
    estimate to ``digits``."""
    arms = list(_arms(table))
    if len(arms) != len(effects):
        raise ValueError(f"{len(effects)} effects for {len(arms)} treated initialisations")
    return [
        ArmVerdictFacts(
            init=init,
            objective=label(objective),
            holds=effect.verdict == stats.HOLDS,
            fails=effect.verdict == stats.DOES_NOT_HOLD,
            estimate=prose.signed(effect.estimate, digits),
            baseline_gains=_range(control["final_loss"].to_numpy(float) - arm["baseline_final_loss"].to_numpy(float)),
            robust=spread(arm["robust"]),
            placebo_robust=spread(control["robust"]),
            paper=spread(arm["paper"]),
            placebo_paper=spread(control["paper"]),
        )
        for (objective, init, arm, control), effect in zip(arms, effects)
    ]


@dataclass(frozen=True)
class PersistenceFacts:
    """Where each start's median symmetry over layers ends on an ``objective`` after ``steps`` (``ends``, mean over
    seeds, ``+0.21 (bert), ...``)."""

    objective: str
    steps: str
    ends: str


def persistence(treated: xr.Dataset, objective: str) -> PersistenceFacts:
    """The facts of the final median symmetry over layers of each initialisation of ``treated``."""
    final = final_median(treated, "symmetry").sel(objective=objective).mean("seed")
    ends = ", ".join(f"{prose.signed(final.sel(init=init))} ({init})" for init in final.init.values)
    return PersistenceFacts(label(objective), str(int(treated.step[-1])), ends)


@dataclass(frozen=True)
class PersistenceVerdictFacts:
    """One :func:`persistence_effects` effect: the ``arm`` (``symmetric minus bert``), its ``estimate``, ``verdict``
    and ``reason``."""

    arm: str
    estimate: str
    verdict: str
    reason: str


def persistence_verdicts(effects: Sequence[stats.Effect]) -> list[PersistenceVerdictFacts]:
    """The facts of :func:`persistence_effects`' effects, in order."""
    return [
        PersistenceVerdictFacts(e.claim.split(",")[0], prose.signed(e.estimate), e.verdict, e.reason) for e in effects
    ]


@dataclass(frozen=True)
class LossTitleFacts:
    """One ``objective``'s final validation losses against the placebo of the same seed (``several``: more than one
    objective drawn), as the verdict lines read them: per treated arm, the placebo's final loss minus the arm's, mean
    over seeds, and its verdict where one can be reached (``ends``: ``symmetric +0.050 (holds), ...``, the estimates of
    :func:`loss_effects`);
    ``baseline``, the same for the baseline (a second draw of the start: the luck of a draw); with enough seeds of
    runs that learned (``can_tell``, else the ``reason``), the arms whose verdict holds (``ahead``, ``any_ahead``)
    and the ``verb`` that agrees with them."""

    objective: str
    several: bool
    can_tell: bool
    reason: str
    ends: str
    baseline: str
    any_ahead: bool
    ahead: str
    verb: str


def losses_against_placebo(
    both: xr.Dataset, effects: Sequence[stats.Effect], learned: bool = True, digits: int = 3
) -> list[LossTitleFacts]:
    """The facts of each objective of ``both`` (``val_loss`` over ``(objective, init, seed, step)`` of the arms, the
    baseline and the placebo, :func:`loss_gains`), in order, with the verdicts of ``effects``
    (:func:`loss_effects`)."""
    arms = [str(i) for i in both.init.values if i not in (BASELINE, PLACEBO)]
    reason = no_finding(both.sizes["seed"], learned)
    objectives = [str(o) for o in both.objective.values]
    facts = []
    for objective in objectives:
        ends, ahead = [], []
        for arm in arms:
            gain = prose.signed(float(loss_gains(both, objective, arm).isel(step=-1).mean()), digits)
            effect = stats.effect_of(effects, LOSS_CLAIM.format(objective=objective, init=arm))
            ends.append(f"{arm} {gain}" + (f" ({effect.verdict})" if effect is not None and not reason else ""))
            if effect is not None and effect.verdict == stats.HOLDS:
                ahead.append(arm)
        facts.append(
            LossTitleFacts(
                objective=label(objective),
                several=len(objectives) > 1,
                can_tell=not reason,
                reason=reason,
                ends=", ".join(ends),
                baseline=prose.signed(float(loss_gains(both, objective, BASELINE).isel(step=-1).mean()), digits),
                any_ahead=bool(ahead),
                ahead=", ".join(ahead),
                verb="ends" if len(ahead) == 1 else "end",
            )
        )
    return facts


@dataclass(frozen=True)
class PersistenceTitleFacts:
    """One ``objective``'s final median symmetry over layers against the placebo of the same seed (``several``: more
    than one objective drawn), as :func:`persistence_effects` reads it: per treated start, its final median symmetry
    minus the placebo's, mean over seeds, with its verdict where one was tested (``against``: ``symmetric +0.30
    (holds), ...``); the ``placebo``'s own final median symmetry, mean over seeds; with enough seeds of runs that
    learned (``can_tell``, else the ``reason``)."""

    objective: str
    several: bool
    can_tell: bool
    reason: str
    against: str
    placebo: str


def symmetry_against_placebo(
    runs: xr.Dataset, placebo: xr.Dataset, effects: Sequence[stats.Effect], learned: bool = True
) -> list[PersistenceTitleFacts]:
    """The facts of each objective's starts (``symmetry`` over ``(objective, init, seed, step, layer)``; ``placebo``:
    :func:`as_placebo` runs with ``symmetry``), in order, with the verdicts of ``effects``
    (:func:`persistence_effects`)."""
    final = final_median(runs, "symmetry")
    control = final_median(placebo, "symmetry").sel(init=PLACEBO)
    reason = no_finding(runs.sizes["seed"], learned)
    objectives = [str(o) for o in runs.objective.values]
    facts = []
    for objective in objectives:
        ends = final.sel(objective=objective)
        reference = control.sel(objective=objective).sel(seed=ends.seed.values)
        against = []
        for init in [str(i) for i in ends.init.values if i != BASELINE]:
            difference = prose.signed(float((ends.sel(init=init) - reference).mean()))
            effect = stats.effect_of(effects, PERSISTENCE_CLAIM.format(init=init, objective=objective))
            against.append(
                f"{init} {difference}" + (f" ({effect.verdict})" if effect is not None and not reason else "")
            )
        facts.append(
            PersistenceTitleFacts(
                objective=label(objective),
                several=len(objectives) > 1,
                can_tell=not reason,
                reason=reason,
                against=", ".join(against),
                placebo=prose.signed(float(reference.mean())),
            )
        )
    return facts
