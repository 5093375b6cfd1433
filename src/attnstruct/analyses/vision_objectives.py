"""What the paper's theory predicts for each objective of notebook 07, whether the runs learned, and their verdicts.

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

**Did the runs learn?** A score of a model that did not learn its task says nothing about the task, so every
verdict is gated on learning (:func:`learning_table`, rule 0 of :func:`attnstruct.stats.verdicts.decide`). The
yardstick is the best a model can do without looking at the image: the entropy ``H = -sum_c p_c log p_c`` of the
targets' frequencies in the training images (:func:`context_free_loss`): the classes of the training labels for
``classify`` and ``classify-mean``, the grey levels (``levels`` equal-width bins) of the training pixels for
``masked`` and ``next-patch`` (every pixel is a next-patch target, and any patch is masked with the same chance).
A run *learned* when its final validation loss (mean cross-entropy per target, in nats) lies below
``(1 - margin) H``, :data:`LEARNING_MARGIN` of the context-free loss below it: the image must explain that share of
the targets' entropy, more than matching their frequencies (which a model reaches without any attention) or the
noise between seeds can give. A fifth was chosen between what runs that barely moved explain (the tests' runs of
60 steps at width 32: a tenth or less of the pixels' entropy, nothing of the classes') and what the quick profile's
runs explain (800 steps at width 64: two fifths or more for the pixel objectives, nine tenths for the classifiers),
far from both. A prediction rests on the runs of its two objectives, every seed: it is tested with
``learned=False`` unless all of them learned.

:data:`PREDICTIONS` lists the comparisons the theory makes, each tested on the per-seed values (paired by seed) with
:func:`attnstruct.stats.verdicts.paired_effect` against the objectives swapped within seeds
(:func:`attnstruct.stats.paired_null`), and decided under the notebook's declared :data:`PLAN`; each run is described
against random matrices of the same width, head count and layer count
(:func:`attnstruct.stats.nulls.null_median_over_layers`). :data:`NOT_PREDICTED` lists the ones the theory leaves open.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
import xarray as xr

from .. import stats
from ..report import prose
from ..tasks import vision_config
from ..tasks.images import ImageData, quantise
from ..tasks.vision import CLASSIFIERS
from ..tasks.vision_config import OBJECTIVES

SCORES = ("symmetry", "directionality")
VERDICT_COLUMNS = ("estimate", "low", "high", "n", "p_value", "null_low", "null_high", "null_percentile", "verdict")
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
PRIMARY = PREDICTIONS[0].claim  # the paper's contrast: bidirectional against causal training of one model


def _claim(p: Prediction) -> stats.Claim:
    return stats.Claim(
        p.claim,
        "seed",
        f"{p.score} ({PLACES[p.place]}) at the end of training, {p.treated} minus {p.baseline} of one seed, mean over "
        "seeds",
        "sign-flip over seeds, paired (the objectives of a seed start from the same trunk), and beyond the null's "
        "95% range",
        "the two objectives' labels exchangeable within a seed (stats.paired_null)",
        role="primary" if p.claim == PRIMARY else "secondary",
    )


PLAN = stats.Plan("07_vision", tuple(_claim(p) for p in PREDICTIONS))
NOT_PREDICTED = (
    "classify against masked or next-patch (median over layers): one query in the last layer, a symmetric drive of "
    "unknown strength below it",
    "classify-mean against masked: both predicted symmetric, in no order",
)


LEARNING_MARGIN = 0.2  # a run learned when its final validation loss is this share below the context-free loss


def context_free_loss(data: ImageData, objective: str, levels: int) -> float:
    """The entropy in nats of ``objective``'s targets in the training images: the mean cross-entropy of the best
    prediction that ignores the image (the targets' frequencies), on the training targets.

    Classifiers: the frequencies of the ``data.n_classes`` classes of ``data.train_labels``. ``masked`` and
    ``next-patch``: the frequencies of the ``levels`` grey levels (:func:`attnstruct.tasks.images.quantise`) of every
    training pixel.
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; choose one of {', '.join(OBJECTIVES)}")
    if objective in CLASSIFIERS:
        targets, n = data.train_labels, data.n_classes
    else:
        targets, n = quantise(data.train_images, levels), levels
    counts = np.bincount(np.asarray(targets).ravel(), minlength=n)
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log(p)).sum())


def context_free_losses(data: ImageData, objectives: Sequence[str], levels: int) -> dict[str, float]:
    """Objective -> :func:`context_free_loss`."""
    return {o: context_free_loss(data, o, levels) for o in objectives}


def uniform_loss(objective: str, levels: int, n_classes: int = 10) -> float:
    """The cross-entropy of a uniform guess, where every run starts: ``log n_classes`` or ``log levels``."""
    return float(np.log(n_classes if objective in CLASSIFIERS else levels))


def learning_table(
    summary: pd.DataFrame, baselines: Mapping[str, float], margin: float = LEARNING_MARGIN
) -> pd.DataFrame:
    """Whether each run learned, one row per objective and seed of ``summary`` (``objective``, ``seed``,
    ``val_loss``, ``val_accuracy``, as :func:`final_summary` gives).

    Columns ``objective``, ``seed``, ``val_loss``, ``val_accuracy``, ``context_free`` (``baselines[objective]``,
    :func:`context_free_loss`), ``margin``, ``threshold = (1 - margin) * context_free``, ``gain = 1 - val_loss /
    context_free`` (the share of the targets' entropy the run explains) and ``learned = val_loss < threshold`` (a
    missing loss has not learned).
    """
    if not 0 <= margin < 1:
        raise ValueError(f"margin must be in [0, 1), got {margin!r}")
    missing = sorted(set(summary.objective) - set(baselines))
    if missing:
        raise ValueError(f"no context-free loss for {', '.join(missing)}")
    table = summary[["objective", "seed", "val_loss", "val_accuracy"]].reset_index(drop=True)
    table["context_free"] = table.objective.map(baselines).astype(float)
    table["margin"] = float(margin)
    table["threshold"] = (1 - margin) * table.context_free
    table["gain"] = 1 - table.val_loss / table.context_free
    table["learned"] = (table.val_loss < table.threshold).astype(bool)  # NaN < x is False
    return table


def thresholds(learning: pd.DataFrame) -> pd.DataFrame:
    """Per objective (the index), its ``context_free`` loss and the ``threshold`` of :func:`learning_table`."""
    return learning.groupby("objective", sort=False)[["context_free", "threshold"]].first()


def learned_objectives(learning: pd.DataFrame) -> dict[str, bool]:
    """Objective -> whether every one of its runs learned (:func:`learning_table`)."""
    return {str(o): bool(rows.learned.all()) for o, rows in learning.groupby("objective", sort=False)}


def learned_in(dataset) -> dict[str, bool]:
    """Objective -> whether every run learned, read from notebook 07's saved dataset (its ``learned`` variable, over
    ``objective`` and ``seed``): what :func:`compare_objectives` needs to gate a dataset read back."""
    if "learned" not in dataset:
        raise ValueError("the dataset has no 'learned' variable (saved before runs were gated on learning)")
    return {str(o): bool(dataset.learned.sel(objective=o).all()) for o in dataset.objective.values}


def null_pools(d_model: int, n_heads: int, n_layers: int, *, n_draws: int = 400, seed: int = 0) -> dict:
    """``{(score, place): [n_draws]}``: the score of random matrices (``sum_h W_q[h]^T W_k[h]``, Gaussian
    factors, this width and head count) as the runs report it: the median over ``n_layers`` independent layers
    (``"median"``) or one layer (``"last"``)."""
    depth = {"median": n_layers, "last": 1}
    return {
        (score, place): stats.null_median_over_layers(score, d_model, n_heads, layers, n_draws=n_draws, seed=seed)
        for score in SCORES
        for place, layers in depth.items()
    }


def per_seed(summary: pd.DataFrame, objective: str, column: str) -> pd.Series:
    """``column`` of ``objective``'s runs, indexed by seed (sorted)."""
    rows = summary[summary.objective == objective]
    return rows.set_index("seed")[column].sort_index()


def null_table(summary: pd.DataFrame, pools: Mapping) -> pd.DataFrame:
    """One row per objective, score and place: the per-seed values' mean and range, their percentiles in the
    null (mid-rank, :func:`attnstruct.stats.nulls.compare_with_null`), how many lie outside the null's 95% range
    (and above it), and that range."""
    rows = []
    for objective in summary.objective.unique():
        for (score, place), pool in pools.items():
            values = per_seed(summary, objective, f"{score}_{place}")
            compared = [stats.compare_with_null(v, pool) for v in values]
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
    """The runs against :data:`PREDICTIONS`: the overall verdict (:func:`attnstruct.stats.overall`), one effect per
    testable prediction, the per-objective null table (:func:`null_table`), the predictions left untested (objective
    or seed missing), the number of seeds, the level ``alpha`` and whether each objective's runs learned."""

    overall: str
    effects: list
    nulls: pd.DataFrame
    untested: list
    n_seeds: int = 0
    alpha: float = 0.05
    learned: dict = field(default_factory=dict)

    def table(self, columns: Sequence[str] | None = None) -> pd.DataFrame:
        """:func:`attnstruct.stats.verdict_table` of the effects (``columns`` of it, default all; empty without)."""
        if not self.effects:
            return pd.DataFrame()
        table = stats.verdict_table(self.effects)
        return table if columns is None else table[list(columns)]


def final_summary(ds: xr.Dataset, last: int = 1) -> pd.DataFrame:
    """Per objective and seed: median and quartiles over layers of the scores at the last ``last`` records
    (averaged over those records), the last layer's scores (``{score}_last``), the final validation loss and
    accuracy. :func:`compare_objectives` tests these against the theory."""
    tail = ds.isel(step=slice(-last, None)).mean("step")
    rows = []
    for objective in ds.objective.values:
        for seed in ds.seed.values:
            cell = tail.sel(objective=objective, seed=seed)
            row = {"objective": str(objective), "seed": int(seed), "causal": vision_config.CAUSAL[str(objective)]}
            for var in ("symmetry", "directionality"):
                values = cell[var].values
                row[f"{var}_median"] = float(np.median(values))
                row[f"{var}_q25"], row[f"{var}_q75"] = (float(q) for q in np.percentile(values, [25, 75]))
                row[f"{var}_last"] = float(cell[var].isel(layer=-1))
            final = ds.sel(objective=objective, seed=seed).isel(step=-1)
            row["val_loss"] = float(final["val_loss"])
            row["val_accuracy"] = float(final["val_accuracy"])
            rows.append(row)
    return pd.DataFrame(rows)


def compare_objectives(
    summary: pd.DataFrame,
    *,
    d_model: int,
    n_heads: int,
    n_layers: int,
    n_draws: int = 400,
    seed: int = 0,
    alpha: float = 0.05,
    learned: Mapping[str, bool] | None = None,
    predictions: Sequence[Prediction] = PREDICTIONS,
) -> Comparison:
    """Test ``predictions`` on :func:`final_summary`'s table.

    Each prediction: :func:`attnstruct.stats.verdicts.paired_effect` of the treated objective's per-seed values minus
    the baseline's (paired by seed, predicted sign as given). The objectives of a seed start from the same trunk, so
    the null swaps the two objectives within seeds (:func:`attnstruct.stats.paired_null`); ``learned=False`` unless
    both objectives' runs learned (``learned``: objective -> bool, :func:`learned_objectives`; ``None`` takes every
    run as learned). The effects are decided under :data:`PLAN` (:data:`PRIMARY` primary, the others secondary).
    Overall: :func:`attnstruct.stats.overall` of the effects ("cannot tell at this scale" when none could be tested:
    an objective missing, or fewer than 2 seeds). The null pools of random layers (:func:`null_pools`) describe each
    run in :func:`null_table`.
    """
    pools = null_pools(d_model, n_heads, n_layers, n_draws=n_draws, seed=seed)
    present = set(summary.objective)
    if learned is not None and not present <= set(learned):
        raise ValueError(f"learned must say whether each objective learned; missing {sorted(present - set(learned))}")
    learned = {o: True if learned is None else bool(learned[o]) for o in sorted(present)}
    effects, untested = [], []
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
        null = stats.paired_null(treated.to_numpy() - baseline.to_numpy(), seed=seed + k)
        effects.append(
            stats.paired_effect(
                treated.to_numpy(),
                baseline.to_numpy(),
                claim=p.claim,
                alpha=alpha,
                predicted_sign=p.sign,
                null_samples=null,
                seed=seed,
                learned=learned[p.treated] and learned[p.baseline],
            )
        )
    n_seeds = int(summary.groupby("objective").seed.nunique().min()) if len(summary) else 0
    effects = replace(PLAN, alpha=alpha).decide(effects) if effects else effects
    return Comparison(stats.overall(effects), effects, null_table(summary, pools), untested, n_seeds, alpha, learned)


def resting_on(objectives: Sequence[str], predictions: Sequence[Prediction] = PREDICTIONS) -> list[Prediction]:
    """The predictions that compare at least one of ``objectives``."""
    return [p for p in predictions if {p.treated, p.baseline} & set(objectives)]
