"""Pretrained vision transformers read beside the paper's vision values (03) and beside notebook 07's runs (07).

The packaged checkpoints whose registry entry gives them the role :data:`VISION_ROLE` are read apart from the
language models (:func:`split_vision`: a non-commercial one only when it is fetched, never fetched here), scored
layer by layer (:func:`score_vision`, :func:`vision_layers`) and set beside the authors' vision rows
(:func:`attnstruct.analyses.paper_comparison.reported_vision`), as a facts record (:func:`vision_facts`). Notebook 07,
which runs after 03, draws its own trained runs beside the same checkpoints (:func:`packaged_datasets`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import xarray as xr

from ..checkpoints import tables, zoo
from ..checkpoints.extract import AttentionBlock, iter_blocks
from ..report import prose
from . import pretrained_scores

VISION_ROLE = "vision encoder"


def split_vision(checkpoints: pd.DataFrame, cache_dir=None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(others, vision)``: the rows of :func:`checkpoint_list` whose registry role is :data:`VISION_ROLE` go to
    ``vision``, with every non-commercial vision checkpoint of the registry that is fetched into ``cache_dir`` added
    (this never fetches one). ``vision`` gains the registry's ``licence`` and ``non_commercial`` (its set is
    :data:`attnstruct.checkpoints.zoo.NON_COMMERCIAL`); the others keep their columns and order."""
    is_vision = checkpoints["role"] == VISION_ROLE
    listed = set(checkpoints.loc[is_vision, "model"])
    added = [
        pretrained_scores.zoo_row(e, cache_dir)
        for e in zoo.entries(zoo.NON_COMMERCIAL)
        if e.role == VISION_ROLE and e.name not in listed and zoo.is_fetched(e.name, cache_dir)
    ]
    vision = pd.concat([checkpoints[is_vision], pd.DataFrame(added, columns=checkpoints.columns)], ignore_index=True)
    entries = [zoo.resolve(name) for name in vision["model"]]
    vision = vision.assign(
        licence=[e.licence for e in entries], non_commercial=[e.set == zoo.NON_COMMERCIAL for e in entries]
    )
    return checkpoints[~is_vision].reset_index(drop=True), vision


def score_vision(vision: pd.DataFrame, blocks: Mapping[str, Sequence[AttentionBlock]]) -> xr.Dataset | None:
    """The per-model datasets of ``vision`` (:func:`split_vision`;
    :func:`attnstruct.checkpoints.tables.score_checkpoint`, float64, per head), combined along ``model``, with the
    registry's role (:data:`VISION_ROLE`) as ``role`` and ``non_commercial`` along ``model``; None without a vision
    checkpoint."""
    if not len(vision):
        return None
    ds = tables.combine(_scored_rows(vision, blocks))
    return ds.assign_coords(
        role=("model", [VISION_ROLE] * len(vision)), non_commercial=("model", vision["non_commercial"].astype(bool))
    )


def _scored_rows(frame: pd.DataFrame, blocks: Mapping[str, Sequence[AttentionBlock]]) -> list[xr.Dataset]:
    """:func:`attnstruct.checkpoints.tables.score_checkpoint` of each row of a checkpoint list (``model``, ``path``,
    ``source``, ``n_params``, ``model_type``) with its ``blocks``, in order."""
    return [
        tables.score_checkpoint(
            row.path,
            name=row.model,
            blocks=blocks[row.model],
            n_params=None if pd.isna(row.n_params) else row.n_params,
            kind=row.source,
            model_type=row.model_type,
        )
        for row in frame.itertuples()
    ]


def vision_layers(ds: xr.Dataset | None) -> pd.DataFrame:
    """One row per vision ``model`` and ``layer`` of :func:`score_vision`'s dataset (None: no row): ``relative_depth``,
    the layer matrix's ``symmetry`` and ``directionality`` and ``non_commercial``."""
    rows = []
    for model in [] if ds is None else ds.model.values:
        cell = ds.sel(model=model, stack="encoder")
        for layer in cell.layer.values[np.isfinite(cell.symmetry.values)]:
            at = cell.sel(layer=layer)
            rows.append(
                {
                    "model": str(model),
                    "layer": int(layer),
                    "relative_depth": float(at.relative_depth),
                    "symmetry": float(at.symmetry),
                    "directionality": float(at.directionality),
                    "non_commercial": bool(ds.non_commercial.sel(model=model)),
                }
            )
    columns = ["model", "layer", "relative_depth", "symmetry", "directionality", "non_commercial"]
    return pd.DataFrame(rows, columns=columns)


def packaged_datasets(names: Sequence[str], cache_dir=None) -> tuple[list[xr.Dataset], list[str]]:
    """``(scored, missing)``: the per-model datasets of the packaged checkpoints ``names`` that are fetched into
    ``cache_dir`` (:func:`attnstruct.checkpoints.tables.score_checkpoint`, float64, per head, role by its one rule,
    the registry's ``model_type`` where a folder's config names none), in the order given, and the names that are not
    fetched (this never fetches one). Raises ``KeyError`` for a name the registry does not know."""
    entries = [zoo.resolve(name) for name in names]
    fetched = [e for e in entries if zoo.is_fetched(e.name, cache_dir)]
    frame = pd.DataFrame([pretrained_scores.zoo_row(e, cache_dir) for e in fetched])
    blocks = {row.model: list(iter_blocks(row.path, model_type=row.model_type or None)) for row in frame.itertuples()}
    return _scored_rows(frame, blocks), [e.name for e in entries if e not in fetched]


@dataclass(frozen=True)
class VisionFacts:
    """The vision transformers read here (:func:`vision_layers`; ``has_vision``): ``count`` and per model the median
    over layers of its ``symmetry`` and ``directionality`` (``model value`` pairs); the ``non_commercial`` ones among
    them (``has_non_commercial``); and the paper's vision rows
    (:func:`attnstruct.analyses.paper_comparison.reported_vision`): the median and range of their per-model median
    symmetry and directionality over the ``paper_rows``."""

    has_vision: bool
    count: str
    models: str
    symmetry: str
    directionality: str
    has_non_commercial: bool
    non_commercial: str
    paper_rows: str
    paper_symmetry: str
    paper_symmetry_span: str
    paper_directionality: str
    paper_directionality_span: str


def _per_group(frame: pd.DataFrame, by: str, score: str) -> str:
    medians = frame.groupby(by, sort=False)[score].median()
    return ", ".join(f"{name} {prose.signed(value)}" for name, value in medians.items())


def vision_facts(layers: pd.DataFrame, paper: pd.DataFrame) -> VisionFacts:
    """The facts of the vision transformers' ``layers`` (:func:`vision_layers`) and the ``paper``'s vision rows
    (:func:`attnstruct.analyses.paper_comparison.reported_vision`)."""
    models = list(dict.fromkeys(layers["model"]))
    flagged = list(dict.fromkeys(layers.loc[layers["non_commercial"].astype(bool), "model"]))
    return VisionFacts(
        has_vision=bool(models),
        count=prose.count(len(models), "vision transformer"),
        models=", ".join(models),
        symmetry=_per_group(layers, "model", "symmetry") if models else "none",
        directionality=_per_group(layers, "model", "directionality") if models else "none",
        has_non_commercial=bool(flagged),
        non_commercial=", ".join(flagged),
        paper_rows=prose.count(len(paper), "vision row"),
        paper_symmetry=prose.signed(paper["symmetry_median"].median()),
        paper_symmetry_span=prose.span(paper["symmetry_median"]),
        paper_directionality=prose.signed(paper["directionality_median"].median()),
        paper_directionality_span=prose.span(paper["directionality_median"]),
    )


def pretrained_and_local(
    names: Sequence[str], local_models: Sequence, cache_dir=None
) -> tuple[xr.Dataset | None, list[str]]:
    """``(scored, missing)``: the packaged checkpoints ``names`` that are fetched (:func:`packaged_datasets`) and the
    ``local_models`` (:func:`attnstruct.checkpoints.tables.local_checkpoint_datasets`) scored and combined along
    ``model`` (None when there is none), and the packaged names not fetched."""
    packaged, missing = packaged_datasets(names, cache_dir)
    scored = packaged + tables.local_checkpoint_datasets(local_models)
    return (tables.combine(scored) if scored else None), missing
