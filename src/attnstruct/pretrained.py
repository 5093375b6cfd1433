"""Scores of pretrained checkpoints as datasets, and the two checks of notebook 06.

* :func:`score_checkpoint` scores every block of a checkpoint, per layer (sum over heads) and per head, through
  the project's one scoring path (:func:`attnstruct.model_scores.score_blocks`, float64 on the CPU) into a
  Dataset over ``(model=1, stack, layer, head)``; :func:`combine` stacks several along ``model``;
  :func:`score_local_checkpoints` does both for a list of local folders (notebook 07).
* :func:`summary` gives the paper's per-model statistic: median and quartiles over layers, with the stack's
  attention kind (``self`` or ``cross``) and whether its blocks use rotary position embeddings.
* :func:`block_shapes` gives each stack's width and head counts; :func:`null_comparison` places each stack's
  median scores in the null distribution of the median over as many random layers of the same shape.
* :func:`gqa_comparison` scores grouped-query models with the correct key-head pairing and with the
  authors' (query head ``h`` with key head ``h mod n_kv``).
* :func:`quantization_effect` rounds fp32 query/key weights through GGUF quantisation types and rescores.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import xarray as xr

from . import evidence, prose
from .extract import AttentionBlock, count_parameters, iter_blocks
from .model_scores import STACKS as STACK_ORDER
from .model_scores import blocks_dataset, score_blocks
from .reference import reference_path
from .scores import factor_scores

REFERENCE_CSV = reference_path("paper_reported_pretrained.csv")


def _blocks(source_or_blocks) -> Iterable[AttentionBlock]:
    """Blocks read already (a list) or a source to read them from."""
    return source_or_blocks if isinstance(source_or_blocks, list) else iter_blocks(source_or_blocks)


def scores_from_blocks(blocks: Iterable[AttentionBlock]) -> xr.Dataset:
    """Per layer and per head, float64 on the CPU, over ``(stack, layer, head)``: ``symmetry``,
    ``directionality``, ``n_kv_heads`` (float, NaN where a stack has fewer layers), ``head_symmetry``,
    ``head_directionality`` and ``extras`` per stack (:func:`attnstruct.model_scores.blocks_dataset`)."""
    table = score_blocks(blocks, per_head=True, precision="float64", device="cpu")
    return blocks_dataset(table).drop_vars("n_heads")


def score_checkpoint(source, *, name: str, role: str, n_params: int | None = None, blocks=None) -> xr.Dataset:
    """Scores of one checkpoint with a ``model`` dimension of length 1 and its metadata as coordinates.

    ``blocks``: the checkpoint's blocks if they were read already (a list), to avoid reading twice.
    ``relative_depth`` (over ``layer``) is ``layer / (n_layers - 1)`` with ``n_layers`` the deepest stack's.
    """
    ds = scores_from_blocks(blocks if blocks is not None else iter_blocks(source))
    if n_params is None and not isinstance(source, torch.nn.Module):
        n_params = count_parameters(source)
    ds = ds.expand_dims(model=[name])
    ds = ds.assign_coords(
        role=("model", [role]),
        n_params=("model", [float(n_params) if n_params else np.nan]),
        source=("model", [str(source) if not isinstance(source, torch.nn.Module) else type(source).__name__]),
    )
    n_layers = ds.symmetry.notnull().sum("layer").max().item()
    return ds.assign_coords(relative_depth=("layer", ds.layer.values / max(n_layers - 1, 1)))


def combine(datasets: Sequence[xr.Dataset]) -> xr.Dataset:
    """Concatenate per-model datasets along ``model`` (NaN where depths, stacks or head counts differ).

    ``relative_depth`` (model, layer) is ``layer / (n_layers - 1)`` of each model, NaN beyond its depth.
    """
    padded = [ds.drop_vars("relative_depth") for ds in datasets]
    out = xr.concat(padded, dim="model", join="outer", combine_attrs="drop")
    out = out.reindex(stack=[s for s in STACK_ORDER if s in out["stack"].values])
    out["extras"] = out["extras"].fillna("").astype(str)
    n_layers = out.symmetry.notnull().any("stack").sum("layer").values[:, None]
    layer = out.layer.values[None, :]
    depth = np.where(layer < n_layers, layer / np.maximum(n_layers - 1, 1), np.nan)
    return out.assign_coords(relative_depth=(("model", "layer"), depth))


def _extras(cell: xr.Dataset) -> set[str]:
    """The extra logit terms recorded for a (model, stack) cell (``extras``: comma- or semicolon-separated)."""
    if "extras" not in cell:
        return set()
    return {e for e in str(cell["extras"].values).replace(";", ",").split(",") if e}


def summary(ds: xr.Dataset) -> pd.DataFrame:
    """Per model and stack: median and quartiles over layers of both scores (the paper's statistic).

    Also ``attention``: ``cross`` for a decoder's cross-attention (queries from the decoder's sequence, keys
    from the encoder's), ``self`` otherwise; ``rotary``: whether the stack's blocks carry rotary position
    embeddings (the ``rotary`` extra that the extraction records from the model's family,
    :data:`attnstruct.extract.EXTRA_TERMS`).
    """
    rows = []
    for model in ds.model.values:
        for stack in ds["stack"].values:
            cell = ds.sel(model=model, stack=stack)
            if not bool(cell.symmetry.notnull().any()):
                continue
            row = {
                "model": model,
                "stack": stack,
                "role": str(cell.role.values),
                "attention": "cross" if stack == "cross" else "self",
                "rotary": "rotary" in _extras(cell),
                "n_params": float(cell.n_params),
                "n_layers": int(cell.symmetry.notnull().sum()),
            }
            for var in ("symmetry", "directionality"):
                values = cell[var].dropna("layer").values
                row[f"{var}_median"] = float(np.median(values))
                row[f"{var}_q25"], row[f"{var}_q75"] = (float(q) for q in np.percentile(values, [25, 75]))
            rows.append(row)
    return pd.DataFrame(rows)


def block_shapes(blocks: Mapping[str, Sequence[AttentionBlock]]) -> pd.DataFrame:
    """Per model (the keys of ``blocks``) and stack: ``d_model``, ``n_heads``, ``d_head``, ``n_kv_heads`` of its
    blocks (the most common value over its layers, the smallest of ties)."""
    rows = []
    for model, model_blocks in blocks.items():
        for stack in STACK_ORDER:
            shapes = pd.DataFrame(
                [(b.w_q.shape[-1], b.n_heads, b.w_q.shape[-2], b.n_kv_heads) for b in model_blocks if b.stack == stack],
                columns=["d_model", "n_heads", "d_head", "n_kv_heads"],
            )
            if len(shapes):
                rows.append({"model": model, "stack": stack} | {k: int(shapes[k].mode()[0]) for k in shapes})
    return pd.DataFrame(rows, columns=["model", "stack", "d_model", "n_heads", "d_head", "n_kv_heads"])


NULL_SCORES = ("symmetry", "directionality")
NULL_FIELDS = ("percentile", "z", "null_low", "null_high")


@functools.lru_cache(maxsize=64)
def median_null(
    score: str, d_model: int, n_heads: int, n_layers: int, *, n_draws: int = 200, layer_draws: int = 200, seed: int = 0
) -> np.ndarray:
    """``[n_draws]`` samples of the median ``score`` over ``n_layers`` random layers of width ``d_model`` with
    ``n_heads`` heads (read-only, cached per argument tuple).

    A random layer is a draw of :func:`attnstruct.evidence.null_median_over_layers`'s ensemble (``sum_h W_q[h]^T
    W_k[h]`` with independent Gaussian factors, ``d_head = d_model / n_heads``). If ``n_draws * n_layers <=
    layer_draws`` the samples are that function's, each the median of its own ``n_layers`` layers. Otherwise,
    to bound the cost (one ``d_model``-cubed product per layer), ``layer_draws`` layers are drawn (that function
    with ``n_layers=1``, shared by both scores) and each sample is the median of ``n_layers`` of them picked with
    replacement (``np.random.default_rng([seed, d_model, n_heads, n_layers]).integers(0, layer_draws,
    (n_draws, n_layers))``, the same picks for both scores): a bootstrap whose centre is uncertain by about
    ``sqrt(n_layers / layer_draws)`` of its own spread.
    """
    if n_draws * n_layers <= layer_draws:
        out = evidence.null_median_over_layers(score, d_model, n_heads, n_layers, n_draws=n_draws, seed=seed)
    else:
        pool = evidence.null_median_over_layers(score, d_model, n_heads, 1, n_draws=layer_draws, seed=seed)
        picks = np.random.default_rng([seed, d_model, n_heads, n_layers]).integers(0, layer_draws, (n_draws, n_layers))
        out = np.median(pool[picks], axis=1)
    out = np.array(out, dtype=float)
    out.flags.writeable = False
    return out


def null_comparison(table: pd.DataFrame, *, n_draws: int = 200, layer_draws: int = 200, seed: int = 0) -> pd.DataFrame:
    """Where each row's median scores lie among random layers of the same shape (:func:`median_null`).

    Args:
        table: one row per model and stack with ``d_model``, ``n_heads``, ``n_layers``, ``symmetry_median`` and
            ``directionality_median`` (:func:`summary` merged with :func:`block_shapes`).

    Returns:
        Indexed as ``table``: ``null_layers`` (independent random layers behind the null), ``null_resampled``
        (whether it is the bootstrap of :func:`median_null`) and per score ``{score}_percentile``,
        ``{score}_z``, ``{score}_null_low``, ``{score}_null_high`` (the null's 2.5% and 97.5% quantiles) and
        ``{score}_outside`` (:func:`attnstruct.evidence.compare_with_null`). NaN, and not outside, where
        ``d_model`` is not a multiple of ``n_heads``. The null's key heads are independent, even for a
        grouped-query model, and its heads are ``d_model / n_heads`` wide whatever the model's ``d_head``.
    """
    rows = []
    for row in table.itertuples():
        d, h, n_layers = int(row.d_model), int(row.n_heads), int(row.n_layers)
        resampled = n_draws * n_layers > layer_draws
        out = {"null_layers": layer_draws if resampled else n_draws * n_layers, "null_resampled": resampled}
        for score in NULL_SCORES:
            if d % h:
                out |= {f"{score}_{k}": np.nan for k in NULL_FIELDS} | {f"{score}_outside": False}
                continue
            samples = median_null(score, d, h, n_layers, n_draws=n_draws, layer_draws=layer_draws, seed=seed)
            found = evidence.compare_with_null(getattr(row, f"{score}_median"), samples)
            out |= {f"{score}_{k}": getattr(found, k) for k in NULL_FIELDS} | {f"{score}_outside": found.outside}
        rows.append(out)
    return pd.DataFrame(rows, index=table.index)


def _null_entry(row, score: str, digits: int) -> str:
    cross = " (cross-attention)" if getattr(row, "attention", "self") == "cross" else ""
    value, z = getattr(row, f"{score}_median"), getattr(row, f"{score}_z")
    low, high = getattr(row, f"{score}_null_low"), getattr(row, f"{score}_null_high")
    return (
        f"{row.model} {row.stack}{cross} {prose.signed(value, digits)} (z {prose.signed(z, 1)}, percentile "
        f"{prose.number(getattr(row, f'{score}_percentile'), 1)}; null {prose.signed(low, digits)} to "
        f"{prose.signed(high, digits)})"
    )


def null_sentences(table: pd.DataFrame, digits: Mapping[str, int] | None = None) -> list[str]:
    """One sentence per score: which rows of ``table`` (``model``, ``stack``, ``attention``, ``{score}_median``
    joined to :func:`null_comparison`'s columns) lie outside the null's 95% range, which inside, and the
    span of the nulls' ranges over the rows. ``digits`` per score (default: 3 for symmetry, 2 otherwise)."""
    digits = {"symmetry": 3} | dict(digits or {})
    lines = []
    for score in NULL_SCORES:
        places, outside = digits.get(score, 2), table[f"{score}_outside"].astype(bool)
        parts = {
            name: "; ".join(_null_entry(r, score, places) for r in table[rows].itertuples())
            for name, rows in (("outside", outside), ("inside", ~outside))
        }
        line = f"Median {score}: outside the null's 95% range for {int(outside.sum())} of "
        line += f"{prose.count(len(table), 'stack')}" + (f": {parts['outside']}." if outside.any() else ".")
        if (~outside).any():
            line += f" Inside it: {parts['inside']}."
        low, high = table[f"{score}_null_low"].min(), table[f"{score}_null_high"].max()
        lines.append(
            f"{line} Over these shapes the nulls' 95% ranges lie within {prose.signed(low, places)} to "
            f"{prose.signed(high, places)}."
        )
    return lines


def reference_table(path: str | Path | None = None) -> pd.DataFrame:
    """The authors' reported per-model scores (``attnstruct/reference/paper_reported_pretrained.csv``, package
    data; its README gives the columns); numbers reported by the paper, not ours."""
    return pd.read_csv(path or REFERENCE_CSV)


def _local_entry(entry) -> tuple[str, Path]:
    if isinstance(entry, (list, tuple)) and len(entry) == 2:
        return str(entry[0]), Path(entry[1])
    if isinstance(entry, (str, os.PathLike)):
        return Path(entry).name, Path(entry)
    raise ValueError(f"a local model must be a path or a [name, path] pair, got {entry!r}")


def score_local_checkpoints(entries: Sequence) -> xr.Dataset | None:
    """Scores of local checkpoints (:func:`combine` of :func:`score_checkpoint`), None if ``entries`` is empty.

    Each entry is a checkpoint path (named after its folder) or a ``[name, path]`` pair; any source that
    :func:`attnstruct.extract.iter_blocks` reads works (for vision: ViT, DeiT, BEiT, DINOv2, ViT-MAE folders).
    The role is ``decoder`` if any block is causal, else ``encoder``. Nothing is downloaded.

    Raises ``ValueError`` for one path instead of a list, an entry that is neither, or two entries of one name.
    """
    if isinstance(entries, (str, os.PathLike)):
        raise ValueError("local_models must be a list of paths or [name, path] pairs, not one path")
    scored = []
    for entry in entries:
        name, path = _local_entry(entry)
        blocks = list(iter_blocks(path))
        role = "decoder" if any(b.causal for b in blocks) else "encoder"
        scored.append(score_checkpoint(path, name=name, role=role, blocks=blocks))
    names = [ds.model.item() for ds in scored]
    if len(set(names)) != len(names):
        raise ValueError(f"two local models have the same name: {names}; name them with [name, path] pairs")
    return combine(scored) if scored else None


def authors_gqa_pairing(block: AttentionBlock) -> AttentionBlock:
    """The block with query head ``h`` paired with key head ``h mod n_kv`` (the authors' code), not ``h // group``."""
    group = block.n_heads // block.n_kv_heads
    index = torch.arange(block.n_heads) % block.n_kv_heads
    w_k = block.w_k[::group][index]
    b_k = block.b_k[::group][index] if block.b_k is not None else None
    return AttentionBlock(
        block.stack,
        block.layer,
        block.w_q,
        w_k,
        block.causal,
        block.n_kv_heads,
        block.b_q,
        b_k,
        block.extras,
        block.source_name,
    )


def gqa_comparison(source_or_blocks) -> pd.DataFrame:
    """Per layer: scores with the correct pairing and with the authors' ``h mod n_kv`` pairing."""
    rows = []
    for block in _blocks(source_or_blocks):
        right = factor_scores(block.w_q, block.w_k, sum_heads=True)
        wrong_block = authors_gqa_pairing(block)
        wrong = factor_scores(wrong_block.w_q, wrong_block.w_k, sum_heads=True)
        rows.append(
            {
                "layer": block.layer,
                "n_heads": block.n_heads,
                "n_kv_heads": block.n_kv_heads,
                "symmetry": float(right.symmetry),
                "symmetry_authors_pairing": float(wrong.symmetry),
                "directionality": float(right.directionality),
                "directionality_authors_pairing": float(wrong.directionality),
            }
        )
    return pd.DataFrame(rows)


def quantize_roundtrip(w: torch.Tensor, qtype: str) -> torch.Tensor:
    """``w`` ``[rows, cols]`` quantised to a GGUF type (``Q8_0``, ``Q5_0``, ``Q4_1``, ``Q4_0``, ...) and back."""
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize, quantize

    kind = GGMLQuantizationType[qtype]
    array = w.detach().float().numpy()
    return torch.from_numpy(dequantize(quantize(array, kind), kind).reshape(array.shape).astype(np.float32))


def quantization_effect(source_or_blocks, qtypes: Sequence[str]) -> pd.DataFrame:
    """Per layer and type: scores after rounding W_q and W_k through the type, and the relative error of W_qk."""
    rows = []
    for block in _blocks(source_or_blocks):
        exact = factor_scores(block.w_q, block.w_k, sum_heads=True)
        m = block.w_q.reshape(-1, block.w_q.shape[-1]).double().T @ block.w_k.reshape(-1, block.w_k.shape[-1]).double()
        for qtype in qtypes:
            q = quantize_roundtrip(block.w_q.reshape(-1, block.w_q.shape[-1]), qtype)
            k = quantize_roundtrip(block.w_k.reshape(-1, block.w_k.shape[-1]), qtype)
            s = factor_scores(q[None], k[None], sum_heads=True)
            error = float(torch.linalg.norm(q.double().T @ k.double() - m) / torch.linalg.norm(m))
            rows.append(
                {
                    "stack": block.stack,
                    "layer": block.layer,
                    "qtype": qtype,
                    "symmetry": float(exact.symmetry),
                    "symmetry_quantized": float(s.symmetry),
                    "directionality": float(exact.directionality),
                    "directionality_quantized": float(s.directionality),
                    "wqk_relative_error": error,
                }
            )
    return pd.DataFrame(rows)


def wqk_corner(block: AttentionBlock, size: int) -> np.ndarray:
    """The top-left ``size x size`` block of the layer matrix ``sum_h W_q^h (W_k^h)^T`` (in the blocks' ``nn.Linear``
    weights ``sum_h W_q[h]^T W_k[h]``; the paper's example figure)."""
    a = block.w_q.reshape(-1, block.w_q.shape[-1])[:, :size].double()
    b = block.w_k.reshape(-1, block.w_k.shape[-1])[:, :size].double()
    return (a.T @ b).numpy()
