"""Small reference matrices and random factors, seeded, for pictures, null distributions and tests.

Every generator takes a ``torch.Generator`` (or a seed) and returns float64 tensors, so a fixed seed gives
the same numbers on every CPU run.
"""

from __future__ import annotations

import numpy as np
import torch

KINDS = ("gaussian", "symmetric", "skew", "columns", "rows")


def generator(*seed_parts: int) -> torch.Generator:
    """A torch generator seeded from any tuple of non-negative integers (via numpy's SeedSequence)."""
    seed = int(np.random.SeedSequence([int(p) for p in seed_parts]).generate_state(1, dtype=np.uint64)[0])
    return torch.Generator().manual_seed(seed)


def gaussian(d: int, gen: torch.Generator, *, batch: tuple[int, ...] = ()) -> torch.Tensor:
    """I.i.d. standard normal matrices ``[*batch, d, d]``."""
    return torch.randn(*batch, d, d, generator=gen, dtype=torch.float64)


def example_matrix(kind: str, d: int, gen: torch.Generator, *, n_outliers: int = 3, gain: float = 8.0) -> torch.Tensor:
    """One ``d x d`` matrix of a named structure.

    ``gaussian``: i.i.d. N(0, 1) (symmetry about 0). ``symmetric``: ``(G + G^T)/2`` (symmetry 1).
    ``skew``: ``(G - G^T)/2`` (symmetry -1). ``columns`` / ``rows``: Gaussian with ``n_outliers`` random
    columns / rows multiplied by ``gain`` (directionality strongly negative / positive).
    """
    if kind not in KINDS:
        raise ValueError(f"unknown example kind {kind!r}; choose one of {KINDS}")
    g = gaussian(d, gen)
    if kind == "symmetric":
        return (g + g.T) / 2
    if kind == "skew":
        return (g - g.T) / 2
    if kind in ("columns", "rows"):
        idx = torch.randperm(d, generator=gen)[:n_outliers]
        scale = torch.ones(d, dtype=torch.float64)
        scale[idx] = gain
        return g * scale if kind == "columns" else g * scale[:, None]
    return g


def random_factors(
    n_heads: int, d_head: int, d_model: int, gen: torch.Generator, *, batch: tuple[int, ...] = ()
) -> tuple[torch.Tensor, torch.Tensor]:
    """Independent Gaussian ``W_q, W_k`` of shape ``[*batch, H, d_head, d_model]``, std ``1/sqrt(d_model)``."""
    shape = (*batch, n_heads, d_head, d_model)
    std = d_model**-0.5
    w_q = torch.randn(*shape, generator=gen, dtype=torch.float64) * std
    w_k = torch.randn(*shape, generator=gen, dtype=torch.float64) * std
    return w_q, w_k


def tied_factors(
    theta: float, n_heads: int, d_head: int, d_model: int, gen: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Partly tied factors ``W_q = cos(theta) W_k + sin(theta) G`` with ``W_k, G`` independent Gaussian.

    ``theta = 0`` is the symmetric initialisation ``W_q = W_k`` (every head's ``M_h = W_k^T W_k`` symmetric);
    ``theta = pi/2`` makes ``W_q`` independent of ``W_k``. Shapes ``[H, d_head, d_model]``.
    """
    w_k, g = random_factors(n_heads, d_head, d_model, gen)
    return np.cos(theta) * w_k + np.sin(theta) * g, w_k
