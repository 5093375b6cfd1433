"""Score every attention block of a model: the table behind ``attnstruct score``.

One row per block (``stack layer symmetry directionality``), or per block and head with ``per_head``.
The layer score is that of ``sum_h W_q^h W_k^h^T`` (the paper's tables); the per-head score that of each
``W_q^h W_k^h^T``. Both come from the factors (:func:`attnstruct.scores.factor_scores`), so no
``d_model x d_model`` matrix is formed when a head is narrower than the model.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import pandas as pd
import torch
import xarray as xr
from tqdm import tqdm

from .block_scores import block_precision, resolve_device, score_block
from .checkpoints import open_checkpoint
from .extract import AttentionBlock, ExtractionError
from .results import provenance_attrs, save_dataset, write_atomically
from .scores import DEFAULT_NUM_STD

COLUMNS = ("stack", "layer", "symmetry", "directionality")
STACK_ORDER = {"encoder": 0, "decoder": 1, "cross": 2}


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
    """Scores of ``blocks``; columns ``stack layer [head] symmetry directionality`` and, per block,
    ``n_heads n_kv_heads causal extras precision``. ``device``: ``auto``, ``cpu`` or ``cuda``."""
    block_precision(1, precision)
    where = resolve_device(device)
    rows = []
    bar = tqdm(
        blocks, total=total, desc=desc, unit="block", disable=not progress, position=position, leave=position is None
    )
    for block in bar:
        used = block_precision(block.w_q.shape[-1], precision)
        meta = {
            "n_heads": block.n_heads,
            "n_kv_heads": block.n_kv_heads,
            "causal": block.causal,
            "extras": ",".join(block.extras),
            "precision": used,
        }
        s = score_block(block, per_head=per_head, num_std=num_std, precision=used, device=where)
        heads = range(block.n_heads) if per_head else [None]
        for h in heads:
            head = {} if h is None else {"head": h}
            sym, direc = (s.symmetry, s.directionality) if h is None else (s.symmetry[h], s.directionality[h])
            rows.append(
                {
                    "stack": block.stack,
                    "layer": block.layer,
                    **head,
                    "symmetry": float(sym),
                    "directionality": float(direc),
                    **meta,
                }
            )
    if not rows:
        raise ExtractionError("the checkpoint holds no attention blocks")
    table = pd.DataFrame(rows)
    keys = ["stack", "layer"] + (["head"] if per_head else [])
    order = table["stack"].map(STACK_ORDER)
    return table.assign(_order=order).sort_values(["_order", *keys[1:]]).drop(columns="_order").reset_index(drop=True)


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


def scores_dataset(table: pd.DataFrame, *, source: str, per_head: bool, num_std: float) -> xr.Dataset:
    """The table as a Dataset over ``(stack, layer[, head])`` (NaN where a stack has fewer layers)."""
    keys = ["stack", "layer"] + (["head"] if per_head else [])
    ds = table.set_index(keys)[["symmetry", "directionality"]].to_xarray()
    per_block = table.drop_duplicates(["stack", "layer"]).set_index(["stack", "layer"])
    for name in ("n_heads", "n_kv_heads"):
        ds[name] = per_block[name].to_xarray()
    ds.attrs = provenance_attrs(
        parameters={"source": str(source), "per_head": per_head, "num_std": num_std},
        scored_matrix=(
            "W_q^h W_k^h^T of each head (d_model x d_model)"
            if per_head
            else "sum over heads of W_q^h W_k^h^T per attention block (d_model x d_model)"
        ),
        num_std=num_std,
        source=str(source),
        precision=",".join(sorted(set(table["precision"]))),
        block_extras="; ".join(
            f"{r.stack} {r.layer}: {r.extras}" for r in per_block.reset_index().itertuples() if r.extras
        ),
    )
    return ds


def write_scores(table: pd.DataFrame, out: str | os.PathLike, *, source: str, per_head: bool, num_std: float) -> Path:
    """Write the table to ``out`` (``.csv`` or ``.nc``) atomically."""
    out = Path(out)
    if out.suffix == ".nc":
        return save_dataset(scores_dataset(table, source=source, per_head=per_head, num_std=num_std), out)
    if out.suffix != ".csv":
        raise ValueError(f"--out must end in .csv or .nc, got {out.name}")
    return write_atomically(out, lambda tmp: table.to_csv(tmp, index=False, float_format="%.6f"))
