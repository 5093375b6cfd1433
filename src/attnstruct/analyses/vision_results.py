"""What notebook 07 trains, the tables its figures read, and the dataset it saves.

* :func:`plan_runs`: the configurations of the runs (every objective by every seed), from the notebook's parameters;
* :func:`example_panels`: the images, patches, mask and targets of section 1's figure;
* :func:`bar_points`, :func:`layer_spread`: the error bars and per-layer curves of the figures over training;
* :func:`comparison_groups`, :func:`comparison_points`, :func:`reported_ranges`, :func:`local_summary`: ours, the
  paper's values and any local checkpoints, in the groups of section 8's figure;
* :func:`results_dataset`: the runs with the per-seed summaries, the learning criterion, the local checkpoints'
  scores and the verdicts, as one dataset with provenance.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
import xarray as xr

from .. import results
from ..report import plotting
from ..tasks import images, vision_config
from ..tasks.vision import random_patch_mask
from ..tasks.vision_config import OBJECTIVES, VisionConfig
from . import pretrained
from .vision_objectives import Comparison
from .vision_sentences import describe_effects

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
SCORES = ("symmetry", "directionality")


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
    """:data:`GROUPS` without the objectives not trained, and a ``("local\\ncheckpoints", "local", None)`` group."""
    groups = [g for g in GROUPS if g[1] != "ours" or g[2] in objectives]
    return groups + [("local\ncheckpoints", "local", None)] if with_local else groups


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
    ``color``: the objective's (:data:`COLORS`), the role's for the paper's and local points."""
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
            colors = [plotting.ROLE_COLORS[s] for s in table["stack"]]
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
    """:func:`attnstruct.analyses.pretrained.summary` of local checkpoints' scores (empty without any)."""
    return pd.DataFrame() if scored is None else pretrained.summary(scored)


def results_dataset(
    runs: xr.Dataset,
    summary: pd.DataFrame,
    learning: pd.DataFrame,
    comparison: Comparison,
    *,
    parameters: Mapping,
    source: str,
    scored: xr.Dataset | None = None,
    local_models: Sequence = (),
) -> xr.Dataset:
    """The runs (:func:`attnstruct.tasks.vision.train_many`) with, over ``(objective, seed)``,
    ``final_symmetry_median`` and ``final_directionality_median`` (from ``summary``) and ``learned`` (from
    ``learning``, :func:`attnstruct.analyses.vision_objectives.learning_table`), ``context_free_loss`` over
    ``objective``, any local checkpoints' scores (``checkpoint_symmetry``, ``checkpoint_directionality`` over
    ``(checkpoint, checkpoint_layer)``, the one self-attention stack of each), and the provenance attributes with
    the verdict sentences (``statement``), the overall verdict (``verdict``), the table of effects (``verdicts``,
    JSON) and the margin of the learning criterion (``learning_margin``, from ``learning``)."""
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
            "scratch, and (checkpoint_*) of local checkpoints",
            title="07 vision: ViT-like classification ([CLS] and pooled), masked and next-patch training, scores "
            "over training",
            images=source,
            statement="\n".join(describe_effects(comparison)),
            verdict=comparison.overall,
            verdicts=comparison.table().to_json(orient="index") if comparison.effects else "{}",
            learning_margin=float(margin),
            checkpoints="; ".join(str(m) for m in local_models),
        ),
    }
    return dataset
