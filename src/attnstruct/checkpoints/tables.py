"""The scores of attention blocks as a dataset, and the one per-model dataset with its role rule.

The table of :func:`attnstruct.checkpoints.scoring.score_blocks` (one row per block) as a dataset over ``(stack,
layer[, head])`` (:func:`blocks_dataset`); then the per-model dataset that every output (``attnstruct score --out``,
the sweep's files, :meth:`attnstruct.ModelScores.to_xarray`) and every notebook build, by one function
(:func:`model_dataset`): the scores over ``(model=1, stack, layer[, head])`` with the model's metadata as coordinates
(:data:`MODEL_COORDS`), its role by one rule (:func:`role_of`), and :func:`combine` to put models side by side. The
names, dims and dtypes are :data:`attnstruct.checkpoints.schema.SCHEMA`. :func:`score_checkpoint` and
:func:`score_local_checkpoints` score checkpoints into it for notebooks 03 and 07; the sweep
(:mod:`attnstruct.checkpoints.sweep`) goes through :func:`checkpoint_dataset`.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import xarray as xr

from .extract import AttentionBlock, iter_blocks
from .extract.blocks import STACKS
from .extract.families import FAMILY_BY_MODEL_TYPE
from .in_memory import TRANSFORMER_LENS
from .resolve import Checkpoint, open_checkpoint
from .revisions import model_position, parse_training_position
from .scoring import score_blocks

HEAD_COLUMNS = ("head_symmetry", "head_directionality")


SCORE_VARIABLES = ("symmetry", "directionality", *HEAD_COLUMNS)


INT_COLUMNS = ("n_heads", "n_kv_heads", "d_model", "d_head")


LAYER_MATRIX = "sum over heads of W_q^h W_k^h^T per attention block (d_model x d_model)"


HEAD_MATRIX = "W_q^h W_k^h^T of each head (d_model x d_model)"


def has_heads(table: pd.DataFrame) -> bool:
    """Whether the table holds per-head scores (it was scored with ``per_head``)."""
    return HEAD_COLUMNS[0] in table.columns


def _filled(table: pd.DataFrame, stacks: list[str], layers: np.ndarray, column: str, fill, dtype) -> np.ndarray:
    """``column`` over ``[stack, layer]`` as ``dtype``, ``fill`` where a stack has no such layer."""
    values = np.full((len(stacks), len(layers)), fill, dtype=dtype)
    at = np.searchsorted(layers, table["layer"].to_numpy())
    values[table["stack"].map(stacks.index).to_numpy(), at] = table[column].to_numpy(dtype)
    return values


def blocks_dataset(table: pd.DataFrame) -> xr.Dataset:
    """The table over ``(stack, layer[, head])``, stacks in the order encoder, decoder, cross, ``layer`` the layer
    numbers present (a checkpoint naming only layer 50000000 has one layer, not fifty million).

    Variables (:data:`attnstruct.checkpoints.schema.SCHEMA`): ``symmetry``, ``directionality`` over ``(stack,
    layer)``, float64 with NaN where a stack has fewer layers; ``n_heads``, ``n_kv_heads``, ``d_model``, ``d_head``
    (the shape of a block's random-layer null) over ``(stack, layer)``, int64 with 0 where there is no block;
    ``causal`` over ``(stack, layer)``, bool, False where there is no block; with per-head scores,
    ``head_symmetry`` and ``head_directionality`` over ``(stack, layer, head)``, ``head`` running to the largest
    head count, NaN beyond a block's own; ``extras`` over ``stack``, the sorted union of its blocks' extras,
    comma-separated (``""`` for none).
    """
    stacks = [s for s in STACKS if s in set(table["stack"])]
    layers = np.unique(table["layer"].to_numpy(np.int64))
    variables = {
        k: (("stack", "layer"), _filled(table, stacks, layers, k, np.nan, np.float64))
        for k in ("symmetry", "directionality")
    }
    for k in INT_COLUMNS:
        variables[k] = (("stack", "layer"), _filled(table, stacks, layers, k, 0, np.int64))
    variables["causal"] = (("stack", "layer"), _filled(table, stacks, layers, "causal", False, bool))
    coords = {"stack": stacks, "layer": layers}
    if has_heads(table):
        n_heads = max(len(v) for v in table["head_symmetry"])
        at = np.searchsorted(layers, table["layer"].to_numpy())
        where = list(zip(table["stack"].map(stacks.index), at, strict=True))
        for k in HEAD_COLUMNS:
            values = np.full((len(stacks), len(layers), n_heads), np.nan)
            for (i, layer), scores in zip(where, table[k], strict=True):
                values[i, layer, : len(scores)] = scores
            variables[k] = (("stack", "layer", "head"), values)
        coords["head"] = np.arange(n_heads)
    extras = [
        ",".join(sorted({e for x in table.loc[table["stack"] == s, "extras"] for e in x.split(",") if e}))
        for s in stacks
    ]
    variables["extras"] = ("stack", extras)
    return xr.Dataset(variables, coords=coords)


ROLES = ("encoder", "decoder", "encoder-decoder", "vision encoder")


def role_of(stacks: Iterable[str], *, vision: bool = False) -> str:
    """A model's role from the stacks of its attention blocks (:attr:`AttentionBlock.stack`) and whether it is a
    vision transformer (``vision``: its family's, :attr:`attnstruct.checkpoints.extract.families.Family.vision`).

    * ``encoder-decoder``: it has cross-attention (``cross``: decoder queries on encoder keys, so there is an
      encoder even where its blocks were not read), or both an ``encoder`` and a ``decoder`` self-attention stack;
    * ``decoder``: decoder self-attention only (causal: every reader labels causal self-attention ``decoder``);
    * ``vision encoder``: encoder self-attention only (bidirectional) over image patches (ViT, DINOv2, CLIP's vision
      tower, Swin): its blocks are an ``encoder`` stack, the role keeps it apart from the text and audio encoders;
    * ``encoder``: encoder self-attention only (bidirectional), of any other family.

    Raises ``ValueError`` for no stack or a name outside :data:`attnstruct.checkpoints.extract.blocks.STACKS`.
    """
    present = {str(s) for s in stacks}
    if not present or present - set(STACKS):
        raise ValueError(f"stacks must be a non-empty selection of {STACKS}, got {sorted(present)}")
    if "cross" in present or {"encoder", "decoder"} <= present:
        return "encoder-decoder"
    if "decoder" in present:
        return "decoder"
    return "vision encoder" if vision else "encoder"


# Coordinates along ``model`` of every per-model dataset, and their value where unknown.
MODEL_COORDS = {
    "role": "",
    "family": "",
    "reader": "",
    "n_params": math.nan,
    "source": "",
    "location": "",
    "revision": "",
    "commit": "",
    "step": math.nan,
    "tokens": math.nan,
    "phase": math.nan,
    "bytes_fetched": math.nan,
    "weights_sha256": "",
    "resolver_calls": math.nan,
    "api_calls": math.nan,
}
# Recorded in the sweep's per-model files (``parameters``): a file of another layout is scored again, not combined.
LAYOUT = "model_dataset/6"


def _relative_depth(symmetry: xr.DataArray) -> np.ndarray:
    """``[model, layer]``: ``layer / deepest``, ``deepest`` each model's largest layer number with a score (``n_layers
    - 1`` for layers numbered from 0), 1 at least; NaN beyond it."""
    layer = symmetry["layer"].values[None, :]
    scored = symmetry.notnull().any("stack").transpose("model", "layer").values
    deepest = np.where(scored, layer, -1).max(axis=1, keepdims=True)
    return np.where(layer <= deepest, layer / np.maximum(deepest, 1), np.nan)


def model_dataset(
    name: str,
    table: pd.DataFrame,
    *,
    n_params: float | None = None,
    source: str = "",
    location: str = "",
    model_type: str = "",
    reader: str | None = None,
    revision: str | None = None,
    commit: str = "",
    bytes_fetched: float = math.nan,
    weights_sha256: str = "",
    hub_calls: Mapping[str, int] | None = None,
    attrs: Mapping | None = None,
) -> xr.Dataset:
    """The one per-model dataset: ``table`` (:func:`attnstruct.checkpoints.scoring.score_blocks` of one model's
    blocks) over ``(model=1, stack, layer[, head])``.

    Variables (:func:`blocks_dataset`): ``symmetry``, ``directionality``, ``n_heads``, ``n_kv_heads`` over
    ``(model, stack, layer)``; with per-head scores ``head_symmetry``, ``head_directionality`` over ``(model, stack,
    layer, head)``; ``extras`` over ``(model, stack)``, the sorted union of the stack's blocks' extra logit terms,
    comma-separated (``""`` for none); ``n_heads``, ``n_kv_heads``, ``d_model``, ``d_head`` (int64, 0 where there is
    no block) and ``causal`` (bool) over ``(model, stack, layer)``. Coordinates: :data:`MODEL_COORDS` along ``model``
    (``role`` by :func:`role_of`, ``vision encoder`` for a family of vision transformers; ``family`` the model's own
    type, ``model_type`` (``whisper``, ``qwen3``);
    ``reader`` the code that read its weights, by default the extraction family of ``model_type`` (``BART``,
    ``LLaMA``), ``""`` where there is none; ``n_params`` NaN for
    None or 0; ``source`` how the checkpoint was had: ``zoo``, ``local``, ``module``, ``ranges``, ...; ``location``
    where; ``revision`` the one ``name`` names, ``ORG/NAME@REV``, unless given, ``""`` for none; ``commit`` the
    commit a hub model was read at; ``step``, ``tokens``, ``phase`` the training position of the revision or of
    ``name``'s last path component, NaN where unknown: :func:`attnstruct.checkpoints.revisions.model_position`;
    ``bytes_fetched``; ``weights_sha256`` the digest of a hub model's weight files as the hub states it, ``""`` when
    unknown or local: two models with one digest hold byte-identical weights; ``resolver_calls`` and ``api_calls``
    the requests of a hub model in the hub's two metered buckets, from ``hub_calls``, NaN for a model not read from
    a hub) and ``relative_depth`` over ``(model, layer)``, ``layer / (n_layers - 1)`` of the deepest stack.
    """
    ds = blocks_dataset(table).expand_dims(model=[name])
    named, position = model_position(name)
    if revision is not None and revision != named:
        given = parse_training_position(revision)
        named, position = revision, given if not math.isnan(given.step) else position
    family = FAMILY_BY_MODEL_TYPE.get(model_type)
    if reader is None:
        reader = family.name if family else ""
    values = {
        "role": role_of(ds["stack"].values, vision=bool(family and family.vision)),
        "family": model_type,
        "reader": reader,
        "n_params": float(n_params) if n_params else math.nan,
        "source": source,
        "location": location,
        "revision": named,
        "commit": commit,
        **position._asdict(),
        "bytes_fetched": float(bytes_fetched),
        "weights_sha256": str(weights_sha256 or ""),
        "resolver_calls": float(hub_calls["resolvers"]) if hub_calls else math.nan,
        "api_calls": float(hub_calls["api"]) if hub_calls else math.nan,
    }
    ds = ds.assign_coords({k: ("model", [values[k]]) for k in MODEL_COORDS})
    ds = ds.assign_coords(relative_depth=(("model", "layer"), _relative_depth(ds["symmetry"])))
    ds.attrs = dict(attrs or {})
    return ds


def reader_of(checkpoint: Checkpoint) -> str:
    """The code that read the checkpoint's weights: TransformerLens' layout, or the extraction family of its model
    type (``""`` where there is none, e.g. a format read without one)."""
    if checkpoint.kind == "transformer_lens":
        return TRANSFORMER_LENS
    family = FAMILY_BY_MODEL_TYPE.get(checkpoint.model_type)
    return family.name if family else ""


def checkpoint_dataset(
    name: str, checkpoint: Checkpoint, table: pd.DataFrame, *, attrs: Mapping | None = None
) -> xr.Dataset:
    """:func:`model_dataset` with the metadata of an opened checkpoint
    (:func:`attnstruct.checkpoints.resolve.open_checkpoint`)."""
    return model_dataset(
        name,
        table,
        n_params=checkpoint.n_params,
        source=checkpoint.kind,
        location=checkpoint.location,
        model_type=checkpoint.model_type,
        reader=reader_of(checkpoint),
        commit=checkpoint.revision,
        bytes_fetched=checkpoint.bytes_fetched(),
        weights_sha256=checkpoint.weights_sha256,
        hub_calls=checkpoint.hub_calls() if checkpoint.hub_calls else None,
        attrs=attrs,
    )


def _strings_as_objects(ds: xr.Dataset) -> xr.Dataset:
    """Fixed-width string coordinates as Python strings, so that concatenation cannot cut longer names short."""
    return ds.assign_coords({k: ds[k].astype(object) for k in ds.coords if ds[k].dtype.kind == "U"})


def combine(datasets: Sequence[xr.Dataset], **attrs) -> xr.Dataset:
    """Per-model datasets (:func:`model_dataset`) along ``model``: NaN where stacks, depths or head counts differ
    (0 for the integer shapes, False for ``causal``: no block), ``extras`` ``""`` for a stack a model lacks, stacks
    in the order encoder, decoder, cross, ``relative_depth`` recomputed per model
    (NaN beyond its depth); ``attrs`` become the result's attributes."""
    combined = xr.concat(
        [_strings_as_objects(ds.drop_vars("relative_depth", errors="ignore")) for ds in datasets],
        dim="model",
        join="outer",
        combine_attrs="drop",
        coords="different",
        compat="equals",
        fill_value={**dict.fromkeys(INT_COLUMNS, 0), "causal": False, **dict.fromkeys(SCORE_VARIABLES, np.nan)},
    )
    combined = combined.reindex(stack=[s for s in STACKS if s in combined["stack"].values])
    combined["extras"] = combined["extras"].fillna("").astype(str)
    combined = combined.assign_coords(relative_depth=(("model", "layer"), _relative_depth(combined["symmetry"])))
    combined.attrs = attrs
    return combined


def _opened(source, blocks, model_type: str = ""):
    """``open_checkpoint(source, model_type=...)``, or, with ``blocks`` given and ``source`` neither a model in
    memory nor a file or folder, a checkpoint of those blocks that only names the source (nothing is looked up on a
    hub)."""
    if blocks is not None and not isinstance(source, torch.nn.Module) and not Path(str(source)).expanduser().exists():
        return contextlib.nullcontext(Checkpoint(name=str(source), kind="", blocks=lambda: iter(blocks)))
    return open_checkpoint(source, model_type=model_type or None)


def score_checkpoint(
    source,
    *,
    name: str | None = None,
    blocks: Sequence[AttentionBlock] | None = None,
    role: str | None = None,
    n_params: float | None = None,
    kind: str | None = None,
    model_type: str = "",
) -> xr.Dataset:
    """Scores of one checkpoint, per layer and per head, float64 on the CPU: :func:`checkpoint_dataset`.

    ``source``: what :func:`attnstruct.checkpoints.resolve.open_checkpoint` opens (a model in memory, a path, a
    packaged name, a hub id). ``blocks``: its blocks if they were read already (then a ``source`` that is not a
    model in memory or a file or folder only names it). ``role``: the role the caller expects (a registry's);
    ``ValueError`` when :func:`role_of` the blocks says otherwise. ``n_params`` and ``kind`` (recorded as
    ``source``) replace what the checkpoint says, and ``model_type`` stands in where it says none, e.g. a packaged
    checkpoint read by path with its registry entry's values (as :func:`open_checkpoint` does by name).
    """
    with _opened(source, blocks, model_type) as checkpoint:
        table = score_blocks(
            blocks if blocks is not None else checkpoint.blocks(), per_head=True, precision="float64", device="cpu"
        )
        checkpoint.n_params = n_params or checkpoint.n_params
        checkpoint.kind = kind or checkpoint.kind
        checkpoint.model_type = checkpoint.model_type or model_type
        checkpoint.location = checkpoint.location or (str(source) if blocks is not None else "")
        ds = checkpoint_dataset(name or checkpoint.name, checkpoint, table)
    if role is not None and role != str(ds["role"].item()):
        raise ValueError(f"{ds.model.item()}: the role given is {role!r}, its blocks make it {ds['role'].item()!r}")
    return ds


def _local_entry(entry) -> tuple[str, Path]:
    if isinstance(entry, (list, tuple)) and len(entry) == 2:
        return str(entry[0]), Path(entry[1])
    if isinstance(entry, (str, os.PathLike)):
        return Path(entry).name, Path(entry)
    raise ValueError(f"a local model must be a path or a [name, path] pair, got {entry!r}")


def score_local_checkpoints(entries: Sequence) -> xr.Dataset | None:
    """Scores of local checkpoints (:func:`combine` of :func:`local_checkpoint_datasets`), None if ``entries`` is
    empty."""
    scored = local_checkpoint_datasets(entries)
    return combine(scored) if scored else None


def local_checkpoint_datasets(entries: Sequence) -> list[xr.Dataset]:
    """The per-model datasets (:func:`score_checkpoint`) of local checkpoints, in the order given.

    Each entry is a checkpoint path (named after its folder) or a ``[name, path]`` pair; any source that
    :func:`attnstruct.checkpoints.extract.iter_blocks` reads works (for vision: ViT, DeiT, BEiT, DINOv2, ViT-MAE
    folders). The role is :func:`role_of` its blocks' stacks. Nothing is downloaded.

    Raises ``ValueError`` for one path instead of a list, an entry that is neither, or two entries of one name.
    """
    if isinstance(entries, (str, os.PathLike)):
        raise ValueError("local_models must be a list of paths or [name, path] pairs, not one path")
    named = [_local_entry(entry) for entry in entries]
    names = [name for name, _ in named]
    if len(set(names)) != len(names):
        raise ValueError(f"two local models have the same name: {names}; name them with [name, path] pairs")
    return [score_checkpoint(path, name=name, blocks=list(iter_blocks(path))) for name, path in named]
