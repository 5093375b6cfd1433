"""Score every attention block of a model: the table behind ``attnstruct score``.

One row per block (``stack layer symmetry directionality``), or per block and head with ``per_head``.
The layer score is that of ``sum_h W_q^h W_k^h^T`` (the paper's tables); the per-head score that of each
``W_q^h W_k^h^T``. Both come from the factors (:func:`attnstruct.scores.factor_scores`), so no
``d_model x d_model`` matrix is formed when a head is narrower than the model.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import xarray as xr
from tqdm import tqdm

from .extract.sources import count_blocks, iter_blocks
from .results import provenance_attrs, save_dataset, write_atomically
from .scores import DEFAULT_NUM_STD, factor_scores

COLUMNS = ("stack", "layer", "symmetry", "directionality")
FLOAT32_FROM_D_MODEL = 2048  # precision="auto": float32 from this width on (about 3x faster, scores to ~1e-5)
STACK_ORDER = {"encoder": 0, "decoder": 1, "cross": 2}


def block_precision(d_model: int, precision: str) -> str:
    """``"float64"`` or ``"float32"`` for a block of width ``d_model`` under ``precision`` (``auto`` or either)."""
    if precision not in ("auto", "float64", "float32"):
        raise ValueError(f"unknown precision {precision!r}; choose auto, float64 or float32")
    if precision == "auto":
        return "float32" if d_model >= FLOAT32_FROM_D_MODEL else "float64"
    return precision


def score_model(
    source,
    *,
    per_head: bool = False,
    num_std: float = DEFAULT_NUM_STD,
    n_heads: int | None = None,
    precision: str = "auto",
    progress=False,
) -> pd.DataFrame:
    """Scores of every block of ``source``; columns ``stack layer [head] symmetry directionality`` and, per
    block, ``n_heads n_kv_heads causal extras precision``."""
    block_precision(1, precision)
    rows = []
    blocks = iter_blocks(source, n_heads=n_heads)
    for block in tqdm(blocks, total=count_blocks(source), desc="scoring", unit="block", disable=not progress):
        used = block_precision(block.w_q.shape[-1], precision)
        meta = {
            "n_heads": block.n_heads,
            "n_kv_heads": block.n_kv_heads,
            "causal": block.causal,
            "extras": ",".join(block.extras),
            "precision": used,
        }
        if per_head:
            s = factor_scores(block.w_q, block.w_k, num_std=num_std, precision=used)
            for h in range(block.n_heads):
                rows.append(
                    {
                        "stack": block.stack,
                        "layer": block.layer,
                        "head": h,
                        "symmetry": float(s.symmetry[h]),
                        "directionality": float(s.directionality[h]),
                        **meta,
                    }
                )
        else:
            s = factor_scores(block.w_q, block.w_k, sum_heads=True, num_std=num_std, precision=used)
            rows.append(
                {
                    "stack": block.stack,
                    "layer": block.layer,
                    "symmetry": float(s.symmetry),
                    "directionality": float(s.directionality),
                    **meta,
                }
            )
    table = pd.DataFrame(rows)
    keys = ["stack", "layer"] + (["head"] if per_head else [])
    order = table["stack"].map(STACK_ORDER)
    return table.assign(_order=order).sort_values(["_order", *keys[1:]]).drop(columns="_order").reset_index(drop=True)


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
