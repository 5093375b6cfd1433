"""Notebook 07: what the theory predicts for each vision objective, whether the runs learned, and the verdicts.

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
(:func:`attnstruct.stats.nulls.null_median_over_layers`).

Beside the verdicts: :func:`plan_runs` (the runs' configurations, from the notebook's parameters),
:func:`example_panels` (section 1's images), :func:`bar_points` and :func:`layer_spread` (the curves over training),
:func:`comparison_groups`, :func:`comparison_points` and :func:`reported_ranges` (ours beside the paper's vision
models and any local checkpoints, :func:`local_summary`), and :func:`results_dataset` (the dataset it saves).

What the notebook says comes from here as facts records (frozen dataclasses of strings formatted by
:mod:`attnstruct.report.prose`, plus the few data-dependent words); its sentences and figure titles are templates in
the notebook, filled by :func:`attnstruct.report.prose.say` and :func:`~attnstruct.report.prose.fill`, and its figures
are drawn in its cells.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
import torch
import xarray as xr

from .. import results, stats
from ..report import plotting, prose
from ..tasks import images, vision_config
from ..tasks.images import ImageData, quantise
from ..tasks.vision import CLASSIFIERS, random_patch_mask
from ..tasks.vision_config import OBJECTIVES, VisionConfig
from . import pretrained_scores
from .text_runs import ALPHA

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


def learning_thresholds(learning: pd.DataFrame) -> pd.DataFrame:
    """Per objective (the index), its ``context_free`` loss and the ``threshold`` of :func:`learning_table`."""
    return learning.groupby("objective", sort=False)[["context_free", "threshold"]].first()


def learned_objectives(learning: pd.DataFrame) -> dict[str, bool]:
    """Objective -> whether every one of its runs learned (:func:`learning_table`)."""
    return {str(o): bool(rows.learned.all()) for o, rows in learning.groupby("objective", sort=False)}


def learned_in_dataset(dataset) -> dict[str, bool]:
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


def values_by_seed(summary: pd.DataFrame, objective: str, column: str) -> pd.Series:
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
            values = values_by_seed(summary, objective, f"{score}_{place}")
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
    """The runs against :data:`PREDICTIONS`: the overall verdict (:func:`attnstruct.stats.primary_verdict`, that of
    the plan's primary claim after Holm's correction), one effect per
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
    Overall: :func:`attnstruct.stats.primary_verdict` of the decided effects, the verdict of :data:`PRIMARY` after
    Holm's correction ("cannot tell at this scale" when it could not be tested: an objective missing, or fewer than
    2 seeds); the secondary predictions are reported beside it. The null pools of random layers (:func:`null_pools`)
    describe each run in :func:`null_table`.
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
        treated, baseline = values_by_seed(summary, p.treated, column), values_by_seed(summary, p.baseline, column)
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
    summary_verdict = stats.primary_verdict(effects)
    return Comparison(summary_verdict, effects, null_table(summary, pools), untested, n_seeds, alpha, learned)


def predictions_resting_on(
    objectives: Sequence[str], predictions: Sequence[Prediction] = PREDICTIONS
) -> list[Prediction]:
    """The predictions that compare at least one of ``objectives``."""
    return [p for p in predictions if {p.treated, p.baseline} & set(objectives)]


# What the notebook trains, and the tables its figures read.

COLORS = {
    "classify": "#4f7fd1",
    "classify-mean": "#35a7c9",
    "masked": plotting.ENCODER_COLOR,
    "next-patch": plotting.DECODER_COLOR,
}  # blue: bidirectional; purple: causal
LABELS = {
    "classify": "classify ([CLS], bidirectional, ViT)",
    "classify-mean": "classify-mean (pooled, bidirectional)",
    "masked": "masked (bidirectional, BEiT)",
    "next-patch": "next-patch (causal, iGPT)",
}
# Section 8's figure, left to right: (tick label, "ours" or "paper", objective or reported group). Each group of the
# paper stands right after the objective that imitates it (paper_comparison.REPORTED_GROUPS): ViT and DeiT read the
# class from [CLS], as ``classify`` does; ``classify-mean`` has no counterpart among the paper's models.
GROUPS = (
    ("classify-mean\n(ours)", "ours", "classify-mean"),
    ("classify\n(ours)", "ours", "classify"),
    ("ViT, DeiT\n(paper)", "paper", "supervised (ViT, DeiT)"),
    ("masked\n(ours)", "ours", "masked"),
    ("BEiT, MAE,\nDiT (paper)", "paper", "masked image modelling (BEiT, MAE, DiT)"),
    ("next-patch\n(ours)", "ours", "next-patch"),
    ("iGPT\n(paper)", "paper", "autoregressive (iGPT)"),
    ("DINO, GIT,\nDETR (paper)", "paper", "other encoders (DINO, DINOv2, GIT, DETR)"),
)


def plan_runs(parameters: Mapping) -> tuple[list[str], list[VisionConfig]]:
    """The objectives in :data:`attnstruct.tasks.vision_config.OBJECTIVES`' order and one configuration per
    objective and seed (``seed``, ``seed + 1``, ... ``n_seeds`` of them), the other fields from ``parameters``."""
    objectives, n_seeds = parameters["objectives"], parameters["n_seeds"]
    if not isinstance(n_seeds, int) or isinstance(n_seeds, bool) or n_seeds < 1:
        raise ValueError(f"n_seeds must be a positive integer, got {n_seeds!r}")
    unknown = sorted(set(objectives) - set(OBJECTIVES))
    if unknown or not objectives or len(set(objectives)) != len(objectives):
        raise ValueError(f"objectives must be distinct names from {OBJECTIVES}, got {objectives!r}")
    ordered = [o for o in OBJECTIVES if o in objectives]
    configs = [
        VisionConfig.from_params(parameters, objective=o, seed=parameters["seed"] + k)
        for o in ordered
        for k in range(n_seeds)
    ]
    return ordered, configs


@dataclass(frozen=True)
class ExamplePanels:
    """Section 1's figure: the first training ``images`` ``[n, 8, 8]`` and their ``labels``, then ``panels`` (title ->
    ``[8, 8]``, NaN where a patch is masked) of the first image, the patch grid's inner ``edges`` (pixel
    coordinates) and the causal ``order`` of the patches ``[grid, grid]``."""

    images: np.ndarray
    labels: np.ndarray
    panels: dict
    edges: np.ndarray
    order: np.ndarray


def example_panels(
    data: images.ImageData, patch_size: int, levels: int, mask_rate: float, seed: int = 0, n: int = 8
) -> ExamplePanels:
    """The first ``n`` training images, and the first one as patches, as the masked objective's input (a mask drawn
    with ``mask_rate`` from ``seed``) and as the ``levels`` grey levels the pixel objectives predict."""
    size = vision_config.IMAGE_SIZE
    first = data.train_images[:1]
    patches = images.patchify(first, patch_size)
    mask = random_patch_mask(1, patches.shape[1], mask_rate, torch.Generator().manual_seed(seed))
    masked = images.unpatchify(torch.where(mask[..., None], torch.nan, patches), patch_size, size, size)
    targets = images.unpatchify(images.quantise(patches, levels).float() / (levels - 1), patch_size, size, size)
    grid = size // patch_size
    panels = {
        "image": first[0].numpy(),
        f"{grid}x{grid} patches": first[0].numpy(),
        "masked input": masked[0].numpy(),
        f"{levels}-level targets": targets[0].numpy(),
    }
    return ExamplePanels(
        data.train_images[:n].numpy(),
        data.train_labels[:n].numpy(),
        panels,
        np.arange(patch_size, size, patch_size) - 0.5,
        np.arange(grid * grid).reshape(grid, grid),
    )


def bar_points(steps, low, mid, high, k: int, n: int, n_bars: int = 5) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(x, y, yerr)`` for ``errorbar``: ``mid`` with bars from ``low`` to ``high`` at up to ``n_bars`` of the
    record ``steps`` (evenly spaced, the last included), shifted sideways for the ``k``-th of ``n`` curves by
    ``1.2%`` of the steps' span per curve so that the bars do not hide each other."""
    steps, low, mid, high = (np.asarray(v, dtype=float) for v in (steps, low, mid, high))
    at = np.unique(np.linspace(0, len(steps) - 1, min(n_bars, len(steps))).round().astype(int))
    shift = (k - (n - 1) / 2) * 0.012 * (steps[-1] - steps[0])
    return steps[at] + shift, mid[at], np.stack([mid[at] - low[at], high[at] - mid[at]])


def layer_spread(runs: xr.Dataset, score: str, objective: str) -> xr.Dataset:
    """``mean``, ``low`` and ``high`` over seeds of each layer's ``score`` of ``objective``, over ``(layer, step)``."""
    values = runs[score].sel(objective=objective)
    return xr.Dataset({"mean": values.mean("seed"), "low": values.min("seed"), "high": values.max("seed")})


def comparison_groups(objectives: Sequence[str], with_local: bool = False) -> list[tuple[str, str, str | None]]:
    """:data:`GROUPS` without the objectives not trained, and a ``("pretrained\\ncheckpoints", "local", None)`` group
    for the packaged and local checkpoints scored here."""
    groups = [g for g in GROUPS if g[1] != "ours" or g[2] in objectives]
    return groups + [("pretrained\ncheckpoints", "local", None)] if with_local else groups


def _offsets(n: int, width: float) -> np.ndarray:
    return np.linspace(-width, width, n) if n > 1 else np.zeros(n)


def comparison_points(
    groups: Sequence[tuple[str, str, str | None]],
    summary: pd.DataFrame,
    reported: pd.DataFrame,
    local: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """One row per point of section 8's figure and score: ``group`` (index into ``groups``), ``kind`` (``ours``,
    ``paper``, ``local``), ``x`` (the group's index, spread by ``+-0.15``, the paper's by ``+-0.2``), ``score``,
    ``median`` (over layers) and, for ours and local, the quartiles ``q25``, ``q75`` (NaN for the paper's), and
    ``color``: the objective's (:data:`COLORS`), the role's for the paper's and local points (a checkpoint's encoder
    stack is a vision encoder here)."""
    rows = []
    for index, (_, kind, key) in enumerate(groups):
        if kind == "ours":
            table, spread = summary[summary.objective == key], 0.15
            colors = [COLORS[key]] * len(table)
        elif kind == "paper":
            table, spread = reported[reported.group == key], 0.2
            decoder = (table.role == "decoder").all()
            colors = [plotting.DECODER_COLOR if decoder else plotting.ENCODER_COLOR] * len(table)
        else:
            table, spread = local[local["stack"] != "cross"], 0.15
            colors = [plotting.VISION_COLOR if s == "encoder" else plotting.ROLE_COLORS[s] for s in table["stack"]]
        x = index + _offsets(len(table), spread)
        for score in SCORES:
            quartiles = {
                q: table[f"{score}_{q}"] if kind != "paper" else pd.Series(np.nan, table.index) for q in ("q25", "q75")
            }
            rows.append(
                pd.DataFrame(
                    {
                        "group": index,
                        "kind": kind,
                        "x": x,
                        "score": score,
                        "median": table[f"{score}_median"].to_numpy(),
                        "q25": quartiles["q25"].to_numpy(),
                        "q75": quartiles["q75"].to_numpy(),
                        "color": colors,
                    }
                )
            )
    return pd.concat(rows, ignore_index=True)


def reported_ranges(reported: pd.DataFrame) -> pd.DataFrame:
    """The paper's median scores over layers per group: smallest, median and largest, rounded to 3 decimals."""
    columns = [f"{s}_median" for s in SCORES]
    return reported.groupby("group", sort=False)[columns].agg(["min", "median", "max"]).round(3)


def local_summary(scored: xr.Dataset | None) -> pd.DataFrame:
    """:func:`attnstruct.analyses.pretrained_scores.stack_summary` of local checkpoints' scores (empty without any)."""
    return pd.DataFrame() if scored is None else pretrained_scores.stack_summary(scored)


def results_dataset(
    runs: xr.Dataset,
    summary: pd.DataFrame,
    learning: pd.DataFrame,
    comparison: Comparison,
    *,
    parameters: Mapping,
    source: str,
    statement: str = "",
    scored: xr.Dataset | None = None,
    local_models: Sequence = (),
) -> xr.Dataset:
    """The runs (:func:`attnstruct.tasks.vision.train_many`) with, over ``(objective, seed)``,
    ``final_symmetry_median`` and ``final_directionality_median`` (from ``summary``) and ``learned`` (from
    ``learning``, :func:`learning_table`), ``context_free_loss`` over ``objective``, any local checkpoints' scores
    (``checkpoint_symmetry``, ``checkpoint_directionality`` over ``(checkpoint, checkpoint_layer)``, the one
    self-attention stack of each), and the provenance attributes with the verdict sentences the notebook showed
    (``statement``), the overall verdict (``verdict``), the table of effects (``verdicts``, JSON) and the margin of
    the learning criterion (``learning_margin``, from ``learning``)."""
    dataset = runs.copy()
    by_run = summary.set_index(["objective", "seed"])
    for var in SCORES:
        dataset[f"final_{var}_median"] = by_run[f"{var}_median"].to_xarray().sel(objective=runs.objective)
        dataset[f"final_{var}_median"].attrs["long_name"] = f"median over layers of the final {var} of each run"
    gate, margin = learning.set_index(["objective", "seed"]), float(learning.margin.iloc[0])
    dataset["learned"] = gate.learned.to_xarray().sel(objective=runs.objective, seed=runs.seed).astype(bool)
    dataset["learned"].attrs["long_name"] = (
        f"the final validation loss lies {margin:.0%} or more below the context-free loss (the run learned)"
    )
    context_free = gate.context_free.groupby(level="objective").first().to_xarray()
    dataset["context_free_loss"] = context_free.sel(objective=runs.objective)
    dataset["context_free_loss"].attrs["long_name"] = (
        "entropy in nats of the training targets' frequencies (classes, or grey levels of the pixels)"
    )
    if scored is not None:
        per_layer = scored[["symmetry", "directionality"]].max("stack", skipna=True)  # one self-attention stack each
        per_layer = per_layer.drop_vars([c for c in per_layer.coords if c not in ("model", "layer")])
        dataset = dataset.merge(
            per_layer.rename(
                model="checkpoint",
                layer="checkpoint_layer",
                symmetry="checkpoint_symmetry",
                directionality="checkpoint_directionality",
            )
        )
    dataset.attrs = {
        **runs.attrs,
        **results.provenance_attrs(
            parameters=parameters,
            scored_matrix="W_qk = sum_h W_q^h (W_k^h)^T per layer (and W_q^h (W_k^h)^T per head), the paper's "
            "row-vector form; in nn.Linear weights sum_h W_q[h]^T W_k[h]; of a vision Transformer trained from "
            "scratch, and (checkpoint_*) of the pretrained checkpoints scored beside it",
            title="07 vision: ViT-like classification ([CLS] and pooled), masked and next-patch training, scores "
            "over training",
            images=source,
            statement=statement,
            verdict=comparison.overall,
            verdicts=comparison.table().to_json(orient="index") if comparison.effects else "{}",
            learning_margin=float(margin),
            checkpoints="; ".join(str(m) for m in local_models),  # packaged names, then local paths
        ),
    }
    return dataset


# The facts the notebook's sentences and titles state: strings formatted by attnstruct.report.prose.


@dataclass(frozen=True)
class ReportedFacts:
    """The paper's vision models (:func:`attnstruct.analyses.paper_comparison.reported_vision`): the span of the
    median symmetry over layers of its ``encoders``, of the ``supervised`` (ViT, DeiT) and ``masked`` (BEiT, MAE, DiT)
    groups and of ``igpt``, and iGPT's median directionality (``igpt_directionality``); ``none`` for a group absent."""

    encoders: str
    supervised: str
    masked: str
    igpt: str
    igpt_directionality: str


def reported_facts(reported: pd.DataFrame) -> ReportedFacts:
    """The facts of the paper's vision numbers."""
    span = {name: prose.span(rows.symmetry_median) for name, rows in reported.groupby("group", sort=False)}
    igpt = reported[reported.group == "autoregressive (iGPT)"]
    return ReportedFacts(
        encoders=prose.span(reported.loc[reported.role == "encoder", "symmetry_median"]),
        supervised=span.get("supervised (ViT, DeiT)", "none"),
        masked=span.get("masked image modelling (BEiT, MAE, DiT)", "none"),
        igpt=span.get("autoregressive (iGPT)", "none"),
        igpt_directionality=prose.span(igpt.directionality_median),
    )


@dataclass(frozen=True)
class PredictionFacts:
    """One prediction of :data:`PREDICTIONS`: its ``claim``, the predicted ``sign`` (``positive``, ``negative``) and
    ``why`` the theory predicts it."""

    claim: str
    sign: str
    why: str


def predictions_declared(predictions: Sequence[Prediction] = PREDICTIONS) -> list[PredictionFacts]:
    """The facts of every prediction, in order."""
    side = {+1: "positive", -1: "negative"}
    return [PredictionFacts(p.claim, side[p.sign], p.why) for p in predictions]


@dataclass(frozen=True)
class ExampleFacts:
    """Section 1's figure (:class:`ExamplePanels`): the ``images`` shown, the first one's ``patches`` of
    ``patch_size`` (``2x2``), ``masked`` of them masked, and the grey ``levels`` of the targets."""

    images: str
    patches: str
    patch_size: str
    masked: str
    levels: str


def examples_shown(example: ExamplePanels, patch_size: int, levels: int) -> ExampleFacts:
    """The facts of :func:`example_panels`' figure."""
    n_masked = int(np.isnan(example.panels["masked input"]).sum()) // patch_size**2
    return ExampleFacts(
        images=prose.count(len(example.images), "training digit"),
        patches=prose.count(example.order.size, "patch", "patches"),
        patch_size=f"{patch_size}x{patch_size}",
        masked=str(n_masked),
        levels=str(levels),
    )


@dataclass(frozen=True)
class LearningFacts:
    """The learning criterion over every run (:func:`learning_table`): ``learned`` of ``runs`` learned
    (``all_learned``); the span of their ``gain`` (the share of the targets' context-free entropy the final validation
    losses explain) against the ``margin`` asked; the classifiers' validation ``accuracy`` (``any_accuracy`` false
    without a classifier)."""

    learned: str
    runs: str
    all_learned: bool
    gain: str
    margin: str
    accuracy: str
    any_accuracy: bool


def learning_facts(learning: pd.DataFrame) -> LearningFacts:
    """The facts of :func:`learning_table`'s table, over every run."""
    met, n = int(learning.learned.sum()), len(learning)
    accuracy = learning.val_accuracy.dropna()
    return LearningFacts(
        learned=str(met),
        runs=prose.count(n, "run"),
        all_learned=met == n,
        gain=prose.span(learning.gain, fmt=lambda v, _: prose.percent(v)),
        margin=prose.percent(learning.margin.iloc[0]),
        accuracy=prose.span(accuracy, fmt=lambda v, _: prose.percent(v)),
        any_accuracy=bool(len(accuracy)),
    )


@dataclass(frozen=True)
class ObjectiveLearningFacts:
    """One objective's runs against the criterion: its ``context_free`` loss (nats; ``classifier``: of the classes,
    else of the grey levels), the ``uniform`` guess's loss, the ``threshold`` and ``margin`` of the criterion,
    ``met`` of ``seeds`` met it; a classifier's validation ``accuracy`` (span over seeds) and ``chance``."""

    objective: str
    classifier: bool
    context_free: str
    uniform: str
    threshold: str
    margin: str
    met: str
    seeds: str
    accuracy: str
    chance: str


def learning_by_objective(learning: pd.DataFrame, levels: int, n_classes: int = 10) -> list[ObjectiveLearningFacts]:
    """The facts of :func:`learning_table`'s table, per objective in order."""
    facts = []
    for objective, rows in learning.groupby("objective", sort=False):
        facts.append(
            ObjectiveLearningFacts(
                objective=str(objective),
                classifier=objective in CLASSIFIERS,
                context_free=prose.number(float(rows.context_free.iloc[0])),
                uniform=prose.number(uniform_loss(objective, levels, n_classes)),
                threshold=prose.number(float(rows.threshold.iloc[0])),
                margin=prose.percent(float(rows.margin.iloc[0])),
                met=str(int(rows.learned.sum())),
                seeds=prose.count(len(rows), "seed"),
                accuracy=prose.span(rows.val_accuracy, 0, fmt=prose.percent),
                chance=prose.percent(1 / n_classes),
            )
        )
    return facts


@dataclass(frozen=True)
class SeedLossFacts:
    """One run's final validation ``loss``, its ``seed``, and whether it ``met`` the criterion (``met``, ``not
    met``)."""

    loss: str
    seed: str
    met: str


def seed_losses(learning: pd.DataFrame, objective: str) -> list[SeedLossFacts]:
    """The facts of ``objective``'s runs in :func:`learning_table`'s table, per seed in order."""
    rows = learning[learning.objective == objective]
    return [
        SeedLossFacts(prose.number(r.val_loss), str(int(r.seed)), "met" if r.learned else "not met")
        for r in rows.itertuples()
    ]


@dataclass(frozen=True)
class GateFacts:
    """Which objectives' runs all learned (``all_learned``; ``objectives``: every one, ``failed``: those that did
    not, named as code), the predictions resting on the failed ones (``claims``; ``any_claims``), the pronoun for
    them (``it``, ``them``), and the ``verdict`` and ``reason`` those predictions read."""

    all_learned: bool
    objectives: str
    failed: str
    claims: str
    any_claims: bool
    them: str
    verdict: str
    reason: str


def learning_gate(learned: Mapping[str, bool], predictions: Sequence[Prediction] = PREDICTIONS) -> GateFacts:
    """The facts of ``learned`` (objective -> did every run learn, :func:`learned_objectives`)."""
    failed = [o for o, ok in learned.items() if not ok]
    claims = [p.claim for p in predictions_resting_on(failed, predictions)]
    as_code = lambda o, _: f"`{o}`"  # noqa: E731
    return GateFacts(
        all_learned=not failed,
        objectives=prose.listing(list(learned), fmt=as_code),
        failed=prose.listing(failed, fmt=as_code),
        claims="; ".join(claims),
        any_claims=bool(claims),
        them="it" if len(failed) == 1 else "them",
        verdict=stats.CANNOT_TELL,
        reason=stats.NOT_LEARNED,
    )


@dataclass(frozen=True)
class OrderingFacts:
    """A figure of the runs over seeds and one prediction: with enough seeds of runs that learned (``can_tell``),
    ``treated`` ends ``direction`` (``above``, ``below``) ``baseline`` in ``score`` at ``place`` in ``agreeing`` of
    ``seeds``; otherwise the ``reason`` it cannot tell. ``ends``: each objective's final value drawn."""

    can_tell: bool
    reason: str
    treated: str
    direction: str
    baseline: str
    score: str
    place: str
    agreeing: str
    seeds: str
    ends: str


def _ordering(summary: pd.DataFrame, prediction: Prediction, learned: bool, ends: pd.Series) -> OrderingFacts:
    n = int(summary.groupby("objective").size().min())
    trained = {prediction.treated, prediction.baseline} <= set(summary.objective)
    if not learned:
        reason = stats.NOT_LEARNED
    elif stats.smallest_p(n) >= ALPHA:
        reason = f"{prose.count(n, 'seed')}, too few to compare"
    else:
        reason = "" if trained else "the predicted pair was not trained"
    agreeing = 0
    if trained:
        column = f"{prediction.score}_{prediction.place}"
        gap = values_by_seed(summary, prediction.treated, column) - values_by_seed(summary, prediction.baseline, column)
        agreeing = int((np.sign(gap) == prediction.sign).sum())
    return OrderingFacts(
        can_tell=not reason,
        reason=reason,
        treated=prediction.treated,
        direction="above" if prediction.sign > 0 else "below",
        baseline=prediction.baseline,
        score=prediction.score,
        place=PLACES[prediction.place],
        agreeing=str(agreeing),
        seeds=prose.count(n, "seed"),
        ends=", ".join(f"{o} {prose.signed(v)}" for o, v in ends.items()),
    )


def primary_ordering(summary: pd.DataFrame, learned: bool = True) -> OrderingFacts:
    """Section 4's figure: the primary prediction (masked against next-patch, median symmetry over layers) on
    :func:`final_summary`'s table; ``ends``, each objective's final median symmetry over layers, mean over seeds (the
    difference of two is the estimate of the paired verdict)."""
    ends = summary.groupby("objective", sort=False).symmetry_median.mean()
    return _ordering(summary, PREDICTIONS[0], learned, ends)


def last_layer_ordering(summary: pd.DataFrame, learned: bool = True) -> OrderingFacts:
    """Section 5's figure: the prediction on the last layer (classify-mean against classify); ``ends``, each
    objective's last layer's final symmetry, mean over seeds."""
    last = next(p for p in PREDICTIONS if p.place == "last")
    ends = summary.groupby("objective", sort=False).symmetry_last.mean()
    return _ordering(summary, last, learned, ends)


@dataclass(frozen=True)
class TrajectoryFacts:
    """One objective's median symmetry over layers, mean over seeds: its ``peak`` at step ``peak_step``, and its
    ``end`` at the last step ``end_step``."""

    objective: str
    peak: str
    peak_step: str
    end: str
    end_step: str


def trajectories(runs: xr.Dataset) -> list[TrajectoryFacts]:
    """The facts of every objective's curve of median symmetry over layers (mean over seeds), in order."""
    facts = []
    for objective in runs.objective.values:
        curve = runs.symmetry.sel(objective=objective).median("layer").mean("seed")
        peak = int(curve.argmax("step"))
        facts.append(
            TrajectoryFacts(
                objective=str(objective),
                peak=prose.signed(curve[peak]),
                peak_step=str(int(curve.step[peak])),
                end=prose.signed(curve[-1]),
                end_step=str(int(curve.step[-1])),
            )
        )
    return facts


@dataclass(frozen=True)
class LayerFacts:
    """One objective's final ``values`` of a score per layer, mean over seeds, from layer ``first`` to ``last``."""

    objective: str
    values: str
    first: str
    last: str


def final_layers(runs: xr.Dataset, score: str = "symmetry") -> list[LayerFacts]:
    """The facts of each objective's final ``score`` per layer, mean over seeds, in order."""
    final = runs[score].isel(step=-1).mean("seed")
    first, last = str(int(runs.layer[0])), str(int(runs.layer[-1]))
    return [
        LayerFacts(str(o), prose.listing(final.sel(objective=o).values), first, last) for o in runs.objective.values
    ]


@dataclass(frozen=True)
class NullFacts:
    """One objective's per-seed values of a score against random matrices (:func:`null_table`): their ``values``
    (span) over ``seeds``, ``mean``, ``percentiles`` in the null (span), ``outside`` of ``n`` outside the null's 95%
    range ``null_low`` to ``null_high`` (centre ``centre``), ``above`` it."""

    objective: str
    values: str
    seeds: str
    mean: str
    percentiles: str
    outside: str
    n: str
    null_low: str
    null_high: str
    centre: str
    above: str


def against_null(nulls: pd.DataFrame, score: str = "symmetry", place: str = "median") -> list[NullFacts]:
    """The facts of :func:`null_table`'s rows of ``score`` at ``place``, one per objective."""
    return [
        NullFacts(
            objective=row.objective,
            values=prose.span([row.low, row.high]),
            seeds=prose.count(row.n, "seed"),
            mean=prose.signed(row.mean),
            percentiles=prose.span([row.percentile_low, row.percentile_high], 0, fmt=prose.number),
            outside=str(row.n_outside),
            n=str(row.n),
            null_low=prose.signed(row.null_low),
            null_high=prose.signed(row.null_high),
            centre=prose.signed(row.null_median),
            above=str(row.n_above),
        )
        for row in nulls[(nulls.score == score) & (nulls.place == place)].itertuples()
    ]


@dataclass(frozen=True)
class OverallFacts:
    """The overall ``verdict`` (:func:`attnstruct.stats.primary_verdict`: that of the ``primary`` prediction after
    Holm's correction) and the counts of the ``tested`` predictions that ``held``, ``failed`` and are ``undecided``
    (cannot tell at this scale), ``unlearned`` of those because the runs did not learn (``any_unlearned``)."""

    verdict: str
    primary: str
    tested: str
    held: str
    failed: str
    undecided: str
    unlearned: str
    any_unlearned: bool


def overall_verdict(comparison: Comparison) -> OverallFacts:
    """The facts of ``comparison``'s verdicts."""
    verdicts = [e.verdict for e in comparison.effects]
    held, failed = verdicts.count(stats.HOLDS), verdicts.count(stats.DOES_NOT_HOLD)
    unlearned = sum(e.reason == stats.NOT_LEARNED for e in comparison.effects)
    return OverallFacts(
        verdict=comparison.overall,
        primary=PRIMARY,
        tested=str(len(verdicts)),
        held=str(held),
        failed=str(failed),
        undecided=str(len(verdicts) - held - failed),
        unlearned=str(unlearned),
        any_unlearned=bool(unlearned),
    )


@dataclass(frozen=True)
class UnpredictedFacts:
    """``classify`` against ``other`` where the theory predicts nothing (median symmetry over layers): ``classify``
    ends below it in ``below`` of ``seeds``, by a mean ``difference`` (classify minus other)."""

    other: str
    below: str
    seeds: str
    difference: str


def unpredicted(summary: pd.DataFrame) -> list[UnpredictedFacts]:
    """The facts of ``classify`` against each other objective trained (a description: no test, no verdict); empty
    without ``classify``."""
    if "classify" not in set(summary.objective):
        return []
    own = values_by_seed(summary, "classify", "symmetry_median")
    facts = []
    for other in ("masked", "next-patch", "classify-mean"):
        if other in set(summary.objective):
            theirs = values_by_seed(summary, other, "symmetry_median").reindex(own.index)
            facts.append(
                UnpredictedFacts(
                    other=other,
                    below=str(int((own < theirs).sum())),
                    seeds=prose.count(len(own), "seed"),
                    difference=prose.signed((own - theirs).mean()),
                )
            )
    return facts


@dataclass(frozen=True)
class LocalFacts:
    """The checkpoints scored (:func:`local_summary`: the packaged vision transformers fetched and any local ones):
    ``any`` scored, how many (``checkpoints``) and their ``names`` as code; the packaged ones asked for but not
    fetched (``missing``, ``any_missing``)."""

    any: bool
    checkpoints: str
    names: str
    any_missing: bool = False
    missing: str = ""


def local_facts(local: pd.DataFrame, missing: Sequence[str] = ()) -> LocalFacts:
    """The facts of :func:`local_summary`'s table and of the packaged names not fetched (``missing``)."""
    absent = prose.listing(list(missing), fmt=lambda m, _: f"`{m}`") if missing else ""
    if local.empty:
        return LocalFacts(False, prose.count(0, "checkpoint"), "", bool(missing), absent)
    names = prose.listing(list(dict.fromkeys(local.model)), fmt=lambda m, _: f"`{m}`")
    return LocalFacts(True, prose.count(local.model.nunique(), "checkpoint"), names, bool(missing), absent)


@dataclass(frozen=True)
class BesideFacts:
    """Section 8's figure: our ``runs`` beside the paper's ``models``, the span of the median symmetry over layers of
    ``ours`` and ``theirs``, and of the pretrained checkpoints' self-attention ``stacks`` scored here (``local``;
    ``any_local``)."""

    runs: str
    models: str
    ours: str
    theirs: str
    any_local: bool
    stacks: str
    local: str


def beside_paper(summary: pd.DataFrame, reported: pd.DataFrame, local: pd.DataFrame | None = None) -> BesideFacts:
    """The facts of our runs, the paper's vision models and any local checkpoints, median symmetry over layers."""
    rows = local[local["stack"] != "cross"] if local is not None and not local.empty else pd.DataFrame()
    return BesideFacts(
        runs=prose.count(len(summary), "run"),
        models=prose.count(len(reported), "vision model"),
        ours=prose.span(summary.symmetry_median),
        theirs=prose.span(reported.symmetry_median),
        any_local=not rows.empty,
        stacks=prose.count(len(rows), "pretrained stack"),
        local=prose.span(rows.symmetry_median) if not rows.empty else "none",
    )
