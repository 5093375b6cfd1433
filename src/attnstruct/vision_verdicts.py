"""What the paper's theory predicts for each objective of notebook 07, and the runs' verdicts against it.

**The gradient's pairs.** In the paper's row-vector form (its section 3), head ``h`` of a layer whose
(normalised) inputs are ``x_1 .. x_N`` has logits ``a_ij = x_i^T W_qk^h x_j / sqrt(d_h)`` with
``W_qk^h = W_q^h (W_k^h)^T`` (in ``nn.Linear`` weights ``W_q[h]^T W_k[h]``; a layer's matrix sums the heads).
The gradient of a loss ``L`` with respect to that matrix is a sum of outer products, query on the left::

    dL/dW_qk^h = (1 / sqrt(d_h)) sum_images sum_i sum_j g_ij x_i x_j^T,
    g_ij = dL/da_ij = alpha_ij (delta_i . v_j - sum_k alpha_ik delta_i . v_k),

``alpha`` the attention weights, ``v_j`` token ``j``'s value and ``delta_i`` the gradient reaching query ``i``'s
attention output. A query whose output does not reach the loss (``delta_i = 0``) adds no term, and
``sum_j g_ij = 0``. The symmetric drive of the theory needs each pair in both orders, ``x_i x_j^T`` and
``x_j x_i^T``, with comparable weights; one order only (keys before queries, as under a causal mask) gives
none, and makes the early tokens' keys enter many terms (column dominance). What that says per objective:

* ``masked`` (bidirectional): below the last layer every token is a query and a key, both orders appear. In
  the last layer only the masked tokens (a ``mask_rate`` share) are queries, so both orders of a pair appear
  only when both tokens are masked. Predicted: symmetric.
* ``classify-mean`` (bidirectional): the loss reads the mean of every token's output, so ``delta_i != 0`` for
  every ``i`` in every layer, the last included. Predicted: symmetric.
* ``next-patch`` (causal): ``g_ij = 0`` for ``j > i`` in every layer. Predicted: no symmetric drive; column
  dominance (negative directionality).
* ``classify`` (bidirectional, one query in the last layer): the loss reads ``[CLS]``'s last output only, so
  in the last layer ``delta_i = 0`` for every ``i`` but ``[CLS]`` and ``dL/dW_qk = sum_images x_cls u^T`` with
  ``u = sum_j g_cls,j x_j`` (a zero-sum mix of the keys): every term has the same query, the rows lie in the span
  of the ``[CLS]`` states, and both orders never appear. The theory predicts no symmetric drive there (and no
  skew-symmetric one). Below the last layer every token reaches the loss through ``[CLS]``'s attention to it
  (its key and its value), so every token is a query and both orders appear, as in the other bidirectional
  objectives, but with query weights set by how much ``[CLS]`` attends to each token: a symmetric drive of a
  strength the theory does not give. So the theory orders ``classify``'s last layer below ``classify-mean``'s
  (same images, labels and initial trunk; only the pooling differs) and says nothing about ``classify``'s
  median over layers against the other objectives.

:data:`PREDICTIONS` lists the comparisons that follow, each tested on the per-seed values (paired by seed) with
:func:`attnstruct.evidence.paired_effect` against the null of random matrices of the same width, head count and
layer count (:func:`attnstruct.evidence.null_median_over_layers`); :data:`NOT_PREDICTED` the ones it leaves open.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import xarray as xr

from . import evidence, prose
from .vision import CLASSIFIERS

SCORES = ("symmetry", "directionality")
PLACES = {"median": "median over layers", "last": "last layer"}


@dataclass(frozen=True)
class Prediction:
    """``treated`` minus ``baseline`` in ``score`` at ``place`` (a key of :data:`PLACES`) has sign ``sign``."""

    treated: str
    baseline: str
    score: str
    place: str
    sign: int
    why: str

    @property
    def claim(self) -> str:
        return f"{self.treated} minus {self.baseline}, {self.score} ({PLACES[self.place]})"


PREDICTIONS = (
    Prediction(
        "masked",
        "next-patch",
        "symmetry",
        "median",
        +1,
        "both orders of each pair (bidirectional) against keys before queries only (causal)",
    ),
    Prediction(
        "classify-mean",
        "next-patch",
        "symmetry",
        "median",
        +1,
        "every token a query in every layer (bidirectional) against keys before queries only (causal)",
    ),
    Prediction(
        "classify-mean",
        "classify",
        "symmetry",
        "last",
        +1,
        "every token a query in the last layer against [CLS] the only query there",
    ),
    Prediction(
        "next-patch",
        "masked",
        "directionality",
        "median",
        -1,
        "early tokens' keys enter many terms under the causal mask: column dominance",
    ),
)
NOT_PREDICTED = (
    "classify against masked or next-patch (median over layers): one query in the last layer, a symmetric drive of "
    "unknown strength below it",
    "classify-mean against masked: both predicted symmetric, in no order",
)


def null_pools(d_model: int, n_heads: int, n_layers: int, *, n_draws: int = 400, seed: int = 0) -> dict:
    """``{(score, place): [n_draws]}``: the score of random matrices (``sum_h W_q[h]^T W_k[h]``, Gaussian
    factors, this width and head count) as the runs report it: the median over ``n_layers`` independent layers
    (``"median"``) or one layer (``"last"``)."""
    depth = {"median": n_layers, "last": 1}
    return {
        (score, place): evidence.null_median_over_layers(score, d_model, n_heads, layers, n_draws=n_draws, seed=seed)
        for score in SCORES
        for place, layers in depth.items()
    }


def mean_difference_null(null_a, null_b, n: int, *, n_samples: int = 4000, seed: int = 0) -> np.ndarray:
    """``[n_samples]`` samples of ``mean over n units of (A - B)``, ``A`` and ``B`` drawn independently with
    replacement from the pools ``null_a`` and ``null_b`` (``np.random.default_rng(seed)``): the paired estimate of
    :func:`attnstruct.evidence.paired_effect` for two structureless runs per seed."""
    a, b = np.asarray(null_a, float), np.asarray(null_b, float)
    if int(n) != n or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    rng = np.random.default_rng(seed)
    return (a[rng.integers(0, len(a), (n_samples, n))] - b[rng.integers(0, len(b), (n_samples, n))]).mean(1)


def per_seed(summary: pd.DataFrame, objective: str, column: str) -> pd.Series:
    """``column`` of ``objective``'s runs, indexed by seed (sorted)."""
    rows = summary[summary.objective == objective]
    return rows.set_index("seed")[column].sort_index()


def null_table(summary: pd.DataFrame, pools: Mapping) -> pd.DataFrame:
    """One row per objective, score and place: the per-seed values' mean and range, their percentiles in the
    null (mid-rank, :func:`attnstruct.evidence.compare_with_null`), how many lie outside the null's 95% range
    (and above it), and that range."""
    rows = []
    for objective in summary.objective.unique():
        for (score, place), pool in pools.items():
            values = per_seed(summary, objective, f"{score}_{place}")
            compared = [evidence.compare_with_null(v, pool) for v in values]
            rows.append(
                {
                    "objective": objective,
                    "score": score,
                    "place": place,
                    "n": len(values),
                    "mean": float(values.mean()),
                    "low": float(values.min()),
                    "high": float(values.max()),
                    "percentile_low": min(c.percentile for c in compared),
                    "percentile_high": max(c.percentile for c in compared),
                    "n_outside": sum(c.outside for c in compared),
                    "n_above": sum(c.value > c.null_high for c in compared),
                    "null_low": compared[0].null_low,
                    "null_median": compared[0].null_median,
                    "null_high": compared[0].null_high,
                }
            )
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class Comparison:
    """The runs against :data:`PREDICTIONS`: the overall verdict, one effect per testable prediction, the
    per-objective null table (:func:`null_table`) and the predictions left untested (objective or seed missing)."""

    overall: str
    effects: list
    nulls: pd.DataFrame
    untested: list

    def table(self) -> pd.DataFrame:
        return evidence.verdict_table(self.effects) if self.effects else pd.DataFrame()


def compare_objectives(
    summary: pd.DataFrame,
    *,
    d_model: int,
    n_heads: int,
    n_layers: int,
    n_draws: int = 400,
    seed: int = 0,
    alpha: float = 0.05,
    predictions: Sequence[Prediction] = PREDICTIONS,
) -> Comparison:
    """Test ``predictions`` on :func:`attnstruct.vision.final_summary`'s table.

    Each prediction: :func:`attnstruct.evidence.paired_effect` of the treated objective's per-seed values minus the
    baseline's (paired by seed, predicted sign as given), against :func:`mean_difference_null` of two independent
    null pools (:func:`null_pools` with ``seed`` and ``seed + 1``). Overall, as
    :func:`attnstruct.evidence.ordering`: "holds" if every tested prediction holds, "does not hold" if any does not,
    else "cannot tell at this scale" (also when none could be tested: an objective missing, or fewer than 2 seeds).
    """
    pools = null_pools(d_model, n_heads, n_layers, n_draws=n_draws, seed=seed)
    others = null_pools(d_model, n_heads, n_layers, n_draws=n_draws, seed=seed + 1)
    effects, untested = [], []
    present = set(summary.objective)
    for k, p in enumerate(predictions):
        if not {p.treated, p.baseline} <= present:
            untested.append(f"{p.claim}: {', '.join(sorted({p.treated, p.baseline} - present))} not trained")
            continue
        column = f"{p.score}_{p.place}"
        treated, baseline = per_seed(summary, p.treated, column), per_seed(summary, p.baseline, column)
        if list(treated.index) != list(baseline.index):
            raise ValueError(f"{p.treated} and {p.baseline} must have the same seeds to be paired")
        if len(treated) < 2:
            untested.append(f"{p.claim}: {prose.count(len(treated), 'seed')}, at least 2 are needed for an interval")
            continue
        key = (p.score, p.place)
        null = mean_difference_null(pools[key], others[key], len(treated), seed=seed + k)
        effects.append(
            evidence.paired_effect(
                treated.to_numpy(),
                baseline.to_numpy(),
                claim=p.claim,
                alpha=alpha,
                predicted_sign=p.sign,
                null_samples=null,
                seed=seed,
            )
        )
    verdicts = {e.verdict for e in effects}
    holds, fails, cannot = evidence.VERDICTS
    overall = holds if verdicts == {holds} else fails if fails in verdicts else cannot
    return Comparison(overall, effects, null_table(summary, pools), untested)


# ---------------------------------------------------------------------------------------------- sentences


def describe_nulls(nulls: pd.DataFrame, score: str = "symmetry", place: str = "median") -> list[str]:
    """One Markdown line per objective: its per-seed values of ``score`` at ``place`` and where they sit in the
    null."""
    lines = []
    for row in nulls[(nulls.score == score) & (nulls.place == place)].itertuples():
        percentiles = prose.span([row.percentile_low, row.percentile_high], 0, fmt=prose.number)
        lines.append(
            f"- `{row.objective}`: {prose.span([row.low, row.high])} over {prose.count(row.n, 'seed')} (mean "
            f"{prose.signed(row.mean)}); null percentile {percentiles}; {row.n_outside} of {row.n} outside the null's "
            f"95% range [{prose.signed(row.null_low)}, {prose.signed(row.null_high)}] (centre "
            f"{prose.signed(row.null_median)}), {row.n_above} above it."
        )
    return lines


def describe_effects(comparison: Comparison) -> list[str]:
    """Each tested prediction's :meth:`attnstruct.evidence.Effect.sentence`, the untested ones, and the overall
    verdict, as Markdown lines."""
    lines = [f"- {e.sentence()}" for e in comparison.effects]
    lines += [f"- not tested: {u}" for u in comparison.untested]
    n = len(comparison.effects)
    held = sum(e.verdict == evidence.VERDICTS[0] for e in comparison.effects)
    failed = sum(e.verdict == evidence.VERDICTS[1] for e in comparison.effects)
    lines.append(
        f"\n**Overall: {comparison.overall}** ({held} of {n} tested predictions hold, {failed} do not, "
        f"{n - held - failed} cannot be told at this scale)."
    )
    return lines


def describe_unpredicted(summary: pd.DataFrame) -> list[str]:
    """What the runs show where the theory makes no prediction: ``classify`` against the others, per seed."""
    if "classify" not in set(summary.objective):
        return []
    own = per_seed(summary, "classify", "symmetry_median")
    lines = []
    for other in ("masked", "next-patch", "classify-mean"):
        if other in set(summary.objective):
            theirs = per_seed(summary, other, "symmetry_median").reindex(own.index)
            below = int((own < theirs).sum())
            lines.append(
                f"`classify` ends below `{other}` in {below} of {prose.count(len(own), 'seed')} "
                f"(median symmetry over layers, mean difference {prose.signed((own - theirs).mean())})."
            )
    return lines


def describe_learning(runs: xr.Dataset, levels: int, n_classes: int = 10) -> list[str]:
    """Per objective: validation loss at the first and last evaluation (mean over seeds) against a uniform guess
    (``log n_classes`` for the classifiers, ``log levels`` per pixel otherwise), and the classifiers' final
    accuracy against chance ``1 / n_classes``."""
    lines = []
    for objective in runs.objective.values:
        objective = str(objective)
        cell = runs.sel(objective=objective)
        val = cell.val_loss.dropna("step", how="all")
        chance = math.log(n_classes if objective in CLASSIFIERS else levels)
        first, last = (float(val.isel(step=i).mean("seed")) for i in (0, -1))
        line = (
            f"- `{objective}`: validation loss {prose.number(first)} at step {int(val.step[0])}, "
            f"{prose.number(last)} at step {int(val.step[-1])} (mean over seeds; a uniform guess scores "
            f"{prose.number(chance)})"
        )
        if objective in CLASSIFIERS:
            accuracy = cell.val_accuracy.isel(step=-1).values
            line += (
                f"; final validation accuracy {prose.span(accuracy, 0, fmt=prose.percent)} over seeds "
                f"(chance {prose.percent(1 / n_classes)})"
            )
        lines.append(line + ".")
    return lines


def describe_reported(reported: pd.DataFrame) -> str:
    """The paper's vision numbers, from :func:`attnstruct.paper_comparison.reported_vision`'s table: the
    range of the median symmetry over layers of its encoders, of the supervised and the masked-image groups and
    of iGPT, and iGPT's directionality."""
    groups = reported.groupby("group", sort=False)
    span = {name: prose.span(rows.symmetry_median) for name, rows in groups}
    encoders = prose.span(reported.loc[reported.role == "encoder", "symmetry_median"])
    igpt = reported[reported.group == "autoregressive (iGPT)"]
    return (
        f"The paper's vision encoders score a median symmetry over layers of {encoders}: supervised ViT and DeiT "
        f"{span.get('supervised (ViT, DeiT)', 'none')}, masked image modelling (BEiT, MAE, DiT) "
        f"{span.get('masked image modelling (BEiT, MAE, DiT)', 'none')}. The one autoregressive image model, "
        f"iGPT, scores {span.get('autoregressive (iGPT)', 'none')} (directionality "
        f"{prose.span(igpt.directionality_median)}). These are the authors' values (their result files, without "
        f"the entries flagged as extraction problems), not ours."
    )


def describe_trajectories(runs: xr.Dataset) -> list[str]:
    """Per objective: the median symmetry over layers (mean over seeds) at its highest during training, at which
    step, and at the end."""
    lines = []
    for objective in runs.objective.values:
        curve = runs.symmetry.sel(objective=objective).median("layer").mean("seed")
        peak = int(curve.argmax("step"))
        lines.append(
            f"- `{objective}`: highest {prose.signed(curve[peak])} at step {int(curve.step[peak])}, "
            f"{prose.signed(curve[-1])} at the end (step {int(curve.step[-1])})."
        )
    return lines


def describe_layers(runs: xr.Dataset, score: str = "symmetry") -> list[str]:
    """Per objective: each layer's final ``score``, mean over seeds, first layer to last."""
    final = runs[score].isel(step=-1).mean("seed")
    return [
        f"- `{o}`: {prose.listing(final.sel(objective=o).values)} (layer {int(runs.layer[0])} to "
        f"{int(runs.layer[-1])})."
        for o in runs.objective.values
    ]
