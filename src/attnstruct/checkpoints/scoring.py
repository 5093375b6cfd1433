r"""Scores of one attention block on a chosen device, grouped-query layers from their distinct key heads.

The layer matrix of a block with ``H`` query heads sharing ``n_kv`` key heads (group ``g = H / n_kv``; query
head ``h`` uses key head ``h // g``, as :class:`~attnstruct.checkpoints.extract.AttentionBlock` pairs them) is::

    M = sum_h W_q[h]^T W_k[h // g] = sum_j (sum_{h in group j} W_q[h])^T W_k[j] = A^T B

with ``A`` the group sums of the query heads and ``B`` the distinct key heads, both ``[n_kv * d_head, d_model]``.
The scores then come from ``r_kv x r_kv`` Gram matrices (``r_kv = n_kv * d_head``,
:func:`attnstruct.scores.factor_scores`): ``O(d_model * r_kv^2)`` work, against ``O(d_model * r^2)`` with the
key heads repeated (``r = H * d_head``) or ``O(d_model^3)``-like costs when ``d x d`` is formed. Per-head scores
use each head's own ``d_head``-wide factors.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import pandas as pd
import torch
from tqdm import tqdm

from .. import interrupts
from .._checks import input_eps
from ..conventions import FLOAT32_FROM_D_MODEL, PRECISIONS
from ..devices import DeviceError, resolve_device
from ..report.progress import bar_disabled
from ..scores import DEFAULT_NUM_STD, Scores, factor_scores
from ..untrusted import one_line
from .extract import AttentionBlock, ExtractionError
from .extract.blocks import STACKS
from .resolve import open_checkpoint


def block_precision(d_model: int, precision: str) -> str:
    """``"float64"`` or ``"float32"`` for a block of width ``d_model`` under ``precision`` (``auto`` or either)."""
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; choose auto, float64 or float32")
    if precision == "auto":
        return "float32" if d_model >= FLOAT32_FROM_D_MODEL else "float64"
    return precision


def layer_factors(
    block: AttentionBlock, dtype: torch.dtype = torch.float64, device: str | torch.device | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(A, B)``, each ``[n_kv * d_head, d_model]`` in ``dtype`` on ``device``, with ``A^T B`` the block's layer
    matrix (module docstring). The query heads are summed in ``dtype``, after the move to ``device``.

    Raises ``ValueError`` when the block's key heads are not repeated in groups of ``H / n_kv`` as announced.
    """
    n_heads, d_head, d_model = block.w_q.shape
    n_kv = block.n_kv_heads
    w_q = block.w_q.to(device=device, dtype=dtype)
    if n_kv == n_heads:
        return w_q.reshape(-1, d_model), block.w_k.to(device=device, dtype=dtype).reshape(-1, d_model)
    if n_kv < 1 or n_heads % n_kv:
        raise ValueError(f"{n_heads} query heads cannot share {n_kv} key heads evenly")
    groups = block.w_k.reshape(n_kv, n_heads // n_kv, d_head, d_model)
    keys = groups[:, 0]
    if not torch.equal(groups, keys[:, None].expand_as(groups)):
        raise ValueError(f"{block.source_name or 'block'}: key heads are not shared in groups of {n_heads // n_kv}")
    queries = w_q.reshape(n_kv, n_heads // n_kv, d_head, d_model).sum(1)
    return queries.reshape(-1, d_model), keys.to(device=device, dtype=dtype).reshape(-1, d_model)


def score_block(
    block: AttentionBlock,
    *,
    per_head: bool = False,
    num_std: float = DEFAULT_NUM_STD,
    precision: str = "auto",
    device: str | torch.device | None = None,
) -> Scores:
    """Both scores of ``block``: of its layer matrix (0-d tensors) or of each head's matrix (``[H]`` tensors).

    ``precision``: ``auto``, ``float64`` or ``float32`` (:func:`block_precision`); ``device``: where the products
    run (``None``: the CPU). The results are float64 tensors on the CPU.
    """
    used = block_precision(block.w_q.shape[-1], precision)
    if per_head:
        w_q, w_k = block.w_q, block.w_k
    else:
        dtype = torch.float64 if used == "float64" else torch.float32
        w_q, w_k = layer_factors(block, dtype, device)
    s = factor_scores(w_q, w_k, num_std=num_std, precision=used, device=device, source_eps=input_eps(block.w_q))
    return Scores(s.symmetry.cpu(), s.directionality.cpu())


STACK_ORDER = {stack: i for i, stack in enumerate(STACKS)}


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
    """The table of ``blocks`` (module docstring): one row per block, the layer scores, the metadata (head counts,
    ``d_model`` and ``d_head``, causal, extras, precision) and, with ``per_head``, each head's scores. ``device``:
    ``auto``, ``cpu`` or ``cuda``; ``precision``: ``auto``, ``float64`` or ``float32``, chosen per block from its
    width.

    Raises :class:`~attnstruct.checkpoints.extract.ExtractionError` when there is no block or a block cannot be
    scored (its layer matrix is zero, say), ``ValueError`` for an unknown precision and
    :class:`~attnstruct.devices.DeviceError` for a device that is not there.
    """
    block_precision(1, precision)
    where = resolve_device(device)
    rows = []
    bar = tqdm(
        blocks,
        total=total,
        desc=desc,
        unit="block",
        disable=bar_disabled(progress),
        position=position,
        leave=position is None,
    )
    for block in bar:
        interrupts.check()  # a sweep's worker stops between two blocks (attnstruct.interrupts)
        used = block_precision(block.w_q.shape[-1], precision)
        try:
            layer = score_block(block, num_std=num_std, precision=used, device=where)
            heads = None
            if per_head:
                heads = score_block(block, per_head=True, num_std=num_std, precision=used, device=where)
        except ExtractionError:
            raise
        except ValueError as err:  # a zero layer matrix, key heads not shared as announced, scores not finite
            raise ExtractionError(f"{block.stack} layer {block.layer} ({block.source_name}): {err}") from None
        row = {
            "stack": block.stack,
            "layer": block.layer,
            "symmetry": float(layer.symmetry),
            "directionality": float(layer.directionality),
            "n_heads": block.n_heads,
            "n_kv_heads": block.n_kv_heads,
            "d_model": block.w_q.shape[-1],
            "d_head": block.w_q.shape[1],
            "causal": block.causal,
            "extras": ",".join(block.extras),
            "precision": used,
        }
        if heads is not None:
            row |= {"head_symmetry": heads.symmetry.numpy(), "head_directionality": heads.directionality.numpy()}
        rows.append(row)
    if not rows:
        raise ExtractionError("the checkpoint holds no attention blocks", "unsupported architecture")
    table = pd.DataFrame(rows)
    order = table["stack"].map(STACK_ORDER)
    return table.assign(_order=order).sort_values(["_order", "layer"]).drop(columns="_order").reset_index(drop=True)


def score_opened(checkpoint, **settings) -> pd.DataFrame:
    """:func:`score_blocks` of every block of an opened checkpoint
    (:func:`attnstruct.checkpoints.resolve.open_checkpoint`), its block count the progress bar's total; ``settings``
    as :func:`score_blocks` takes them."""
    return score_blocks(checkpoint.blocks(), total=checkpoint.n_blocks, **settings)


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
    checkpoint's name or a hub id ``ORG/NAME[@REVISION]`` (:func:`attnstruct.checkpoints.resolve.open_checkpoint`).

    Whatever is wrong with the checkpoint raises :class:`~attnstruct.checkpoints.extract.ExtractionError` whose line
    names ``source`` (a path, a name or a hub id; not a model or state_dict in memory); ``DeviceError`` and
    ``ValueError`` for an unknown precision as :func:`score_blocks`.
    """
    block_precision(1, precision)
    resolve_device(device)
    try:
        with open_checkpoint(source, n_heads=n_heads) as checkpoint:
            return score_opened(
                checkpoint, per_head=per_head, num_std=num_std, precision=precision, device=device, progress=progress
            )
    except DeviceError:
        raise
    except ValueError as err:  # ExtractionError, and a reader's or the scores' ValueError
        raise _naming(err, source) from None


def _naming(err: ValueError, source) -> ExtractionError:
    """``err`` as an :class:`ExtractionError` of the same kind whose detail names ``source``."""
    if isinstance(err, ExtractionError):
        kind, detail = err.kind, err.detail
    else:
        kind, detail = "error", " ".join(str(err).split()) or one_line(err)
    if isinstance(source, (str, os.PathLike)) and str(source) not in detail:  # a model in memory has no name to give
        detail = f"{source}: {detail}"
    return ExtractionError(detail, kind)
