"""Score every attention block of a model into one table, and that table as rows, files and datasets.

:func:`score_blocks` is the one scoring path of the project: ``attnstruct score``, ``attnstruct sweep``,
:func:`attnstruct.pretrained.score_checkpoint` (notebook 03) and the local checkpoints of notebook 07 all
go through it. Its table has one row per block, in stack order (encoder, decoder, cross) and then by layer:

* ``stack layer symmetry directionality``: the scores of the layer matrix ``sum_h W_q^h W_k^h^T`` (what the
  paper's tables and figures report, Saponati et al. 2025, section 4);
* ``n_heads n_kv_heads causal extras precision``: the block's metadata (``extras`` comma-separated, such as
  ``q_bias,k_bias`` or ``rotary``; ``precision`` the arithmetic used, :func:`~attnstruct.block_scores.block_precision`);
* with ``per_head``, ``head_symmetry head_directionality``: float64 arrays ``[n_heads]``, the scores of each
  head's ``W_q^h W_k^h^T``.

Both come from the factors (:func:`attnstruct.block_scores.score_block`), so no ``d_model x d_model`` matrix is
formed when a head is narrower than the model. :func:`head_rows` gives one row per head (the ``--per-head``
table); :func:`blocks_dataset` the table over ``(stack, layer[, head])``, the layout every dataset of the
project derives from (the ``--out FILE.nc`` file: :func:`scores_dataset`; notebook 03 and the sweep add a
``model`` dimension and their metadata).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import xarray as xr
from tqdm import tqdm

from .block_scores import block_precision, resolve_device, score_block
from .checkpoints import open_checkpoint
from .extract import AttentionBlock, ExtractionError
from .progress import hidden
from .results import provenance_attrs, save_dataset, write_atomically
from .scores import DEFAULT_NUM_STD

COLUMNS = ("stack", "layer", "symmetry", "directionality")
META_COLUMNS = ("n_heads", "n_kv_heads", "causal", "extras", "precision")
HEAD_COLUMNS = ("head_symmetry", "head_directionality")
STACKS = ("encoder", "decoder", "cross")
STACK_ORDER = {stack: i for i, stack in enumerate(STACKS)}
LAYER_MATRIX = "sum over heads of W_q^h W_k^h^T per attention block (d_model x d_model)"
HEAD_MATRIX = "W_q^h W_k^h^T of each head (d_model x d_model)"


def score_blocks(
    blocks: Iterable[AttentionBlock],
    *,
    per_head: bool = False,
    num_std: float = DEFAULT_NUM_STD,
    precision: str = "auto",
    device: str | torch.device = "auto",
    progress=False,
    total: int | None = None,
    desc: str = "scoring",
    position: int | None = None,
) -> pd.DataFrame:
    """The table of ``blocks`` (module docstring): one row per block, the layer scores, the metadata and, with
    ``per_head``, each head's scores. ``device``: ``auto``, ``cpu`` or ``cuda``; ``precision``: ``auto``,
    ``float64`` or ``float32``, chosen per block from its width.

    Raises :class:`~attnstruct.extract.ExtractionError` when there is no block, ``ValueError`` for an unknown
    precision and :class:`~attnstruct.block_scores.DeviceError` for a device that is not there.
    """
    block_precision(1, precision)
    where = resolve_device(device)
    rows = []
    bar = tqdm(
        blocks,
        total=total,
        desc=desc,
        unit="block",
        disable=hidden(progress),
        position=position,
        leave=position is None,
    )
    for block in bar:
        used = block_precision(block.w_q.shape[-1], precision)
        layer = score_block(block, num_std=num_std, precision=used, device=where)
        row = {
            "stack": block.stack,
            "layer": block.layer,
            "symmetry": float(layer.symmetry),
            "directionality": float(layer.directionality),
            "n_heads": block.n_heads,
            "n_kv_heads": block.n_kv_heads,
            "causal": block.causal,
            "extras": ",".join(block.extras),
            "precision": used,
        }
        if per_head:
            heads = score_block(block, per_head=True, num_std=num_std, precision=used, device=where)
            row |= {"head_symmetry": heads.symmetry.numpy(), "head_directionality": heads.directionality.numpy()}
        rows.append(row)
    if not rows:
        raise ExtractionError("unsupported architecture: the checkpoint holds no attention blocks")
    table = pd.DataFrame(rows)
    order = table["stack"].map(STACK_ORDER)
    return table.assign(_order=order).sort_values(["_order", "layer"]).drop(columns="_order").reset_index(drop=True)


def has_heads(table: pd.DataFrame) -> bool:
    """Whether the table holds per-head scores (it was scored with ``per_head``)."""
    return HEAD_COLUMNS[0] in table.columns


def layer_rows(table: pd.DataFrame) -> pd.DataFrame:
    """One row per block: ``stack layer symmetry directionality n_heads n_kv_heads causal extras precision``."""
    return table[[*COLUMNS, *META_COLUMNS]]


def head_rows(table: pd.DataFrame) -> pd.DataFrame:
    """One row per block and head: ``stack layer head symmetry directionality`` (that head's scores) and the
    block's metadata. Raises ``ValueError`` for a table scored without ``per_head``."""
    if not has_heads(table):
        raise ValueError("the table holds no per-head scores; score it with per_head=True")
    rows = []
    for block in table.itertuples(index=False):
        meta = {k: getattr(block, k) for k in META_COLUMNS}
        for h, (sym, direc) in enumerate(zip(block.head_symmetry, block.head_directionality, strict=True)):
            rows.append(
                {
                    "stack": block.stack,
                    "layer": block.layer,
                    "head": h,
                    "symmetry": float(sym),
                    "directionality": float(direc),
                    **meta,
                }
            )
    return pd.DataFrame(rows)


def score_model(
    source,
    *,
    per_head: bool = False,
    num_std: float = DEFAULT_NUM_STD,
    n_heads: int | None = None,
    precision: str = "auto",
    device: str | torch.device = "auto",
    progress=False,
) -> pd.DataFrame:
    """:func:`score_blocks` of every block of ``source``: a model in memory, a local checkpoint, a packaged
    checkpoint's name or a hub id ``ORG/NAME[@REVISION]`` (:func:`attnstruct.checkpoints.open_checkpoint`)."""
    block_precision(1, precision)
    resolve_device(device)
    with open_checkpoint(source, n_heads=n_heads) as checkpoint:
        return score_blocks(
            checkpoint.blocks(),
            per_head=per_head,
            num_std=num_std,
            precision=precision,
            device=device,
            progress=progress,
            total=checkpoint.n_blocks,
        )


def _grid(table: pd.DataFrame, stacks: list[str], n_layers: int, column: str) -> np.ndarray:
    """``column`` over ``[stack, layer]`` as float64, NaN where a stack has no such layer."""
    values = np.full((len(stacks), n_layers), np.nan)
    values[table["stack"].map(stacks.index).to_numpy(), table["layer"].to_numpy()] = table[column].to_numpy(float)
    return values


def blocks_dataset(table: pd.DataFrame) -> xr.Dataset:
    """The table over ``(stack, layer[, head])``, stacks in the order encoder, decoder, cross.

    Variables: ``symmetry``, ``directionality``, ``n_heads``, ``n_kv_heads`` over ``(stack, layer)``, float64 with
    NaN where a stack has fewer layers; with per-head scores, ``head_symmetry`` and ``head_directionality`` over
    ``(stack, layer, head)``, ``head`` running to the largest head count, NaN beyond a block's own; ``extras``
    over ``stack``, the sorted union of its blocks' extras, comma-separated (``""`` for none).
    """
    stacks = [s for s in STACKS if s in set(table["stack"])]
    n_layers = int(table["layer"].max()) + 1
    variables = {
        k: (("stack", "layer"), _grid(table, stacks, n_layers, k))
        for k in ("symmetry", "directionality", "n_heads", "n_kv_heads")
    }
    coords = {"stack": stacks, "layer": np.arange(n_layers)}
    if has_heads(table):
        n_heads = max(len(v) for v in table["head_symmetry"])
        where = list(zip(table["stack"].map(stacks.index), table["layer"], strict=True))
        for k in HEAD_COLUMNS:
            values = np.full((len(stacks), n_layers, n_heads), np.nan)
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


def scores_dataset(table: pd.DataFrame, *, source: str, per_head: bool, num_std: float) -> xr.Dataset:
    """The ``attnstruct score --out FILE.nc`` file: :func:`blocks_dataset` with ``symmetry``/``directionality``
    over ``(stack, layer)``, or, with ``per_head``, each head's over ``(stack, layer, head)``; ``n_heads`` and
    ``n_kv_heads`` over ``(stack, layer)``, integers unless a stack has fewer layers (then float with NaN);
    stacks in alphabetical order (the layout of the files this command has always written); provenance attrs.
    """
    full = blocks_dataset(table)
    if per_head:
        scores = full[list(HEAD_COLUMNS)].rename(head_symmetry="symmetry", head_directionality="directionality")
    else:
        scores = full[["symmetry", "directionality"]]
    ds = xr.merge([scores, full[["n_heads", "n_kv_heads"]]], combine_attrs="drop").sortby("stack")
    for name in ("n_heads", "n_kv_heads"):
        if bool(ds[name].notnull().all()):
            ds[name] = ds[name].astype(np.int64)
    ds.attrs = provenance_attrs(
        parameters={"source": str(source), "per_head": per_head, "num_std": num_std},
        scored_matrix=HEAD_MATRIX if per_head else LAYER_MATRIX,
        num_std=num_std,
        source=str(source),
        precision=",".join(sorted(set(table["precision"]))),
        block_extras="; ".join(f"{r.stack} {r.layer}: {r.extras}" for r in table.itertuples() if r.extras),
    )
    return ds


def write_scores(table: pd.DataFrame, out: str | os.PathLike, *, source: str, per_head: bool, num_std: float) -> Path:
    """Write the table to ``out`` atomically: ``.csv`` as :func:`head_rows` (``per_head``) or :func:`layer_rows`,
    scores with 6 decimals; ``.nc`` as :func:`scores_dataset`. Raises ``ValueError`` for any other suffix."""
    out = Path(out)
    if out.suffix == ".nc":
        return save_dataset(scores_dataset(table, source=source, per_head=per_head, num_std=num_std), out)
    if out.suffix != ".csv":
        raise ValueError(f"--out must end in .csv or .nc, got {out.name}")
    rows = head_rows(table) if per_head else layer_rows(table)
    return write_atomically(out, lambda tmp: rows.to_csv(tmp, index=False, float_format="%.6f"))
