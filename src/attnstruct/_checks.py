"""Input checking and numpy/torch interchange shared by the score and bilinear-form modules.

Every public function accepts numpy arrays (or nested lists) and torch tensors. Computation happens in
torch float64; results come back as the caller's type: numpy in, numpy (or a Python float for a single
matrix) out; torch in, a float64 torch tensor on the input's device out.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

ArrayLike = Any  # np.ndarray | torch.Tensor | nested sequences of numbers


def to_float64(
    x: ArrayLike, name: str, dtype: torch.dtype = torch.float64, device: str | torch.device | None = None
) -> tuple[torch.Tensor, bool]:
    """Return ``(tensor in float64, input_was_torch)``; refuse complex, boolean, empty and non-finite input.

    ``dtype=torch.float32`` computes in single precision instead (for very large matrices; see
    :func:`attnstruct.scores.factor_scores`). ``device`` moves the tensor (default: where it is; numpy on the CPU).
    """
    is_torch = isinstance(x, torch.Tensor)
    if not is_torch:
        arr = np.asarray(x)
        if arr.dtype == object:
            raise ValueError(f"{name}: expected a numeric array, got dtype object")
        x = torch.from_numpy(np.ascontiguousarray(arr))
    if x.is_complex():
        raise ValueError(f"{name}: complex input is not supported (dtype {x.dtype})")
    if x.dtype == torch.bool:
        raise ValueError(f"{name}: boolean input is not supported")
    if x.numel() == 0:
        raise ValueError(f"{name}: empty input with shape {tuple(x.shape)}")
    x = x.detach().to(device=device, dtype=dtype)
    if not bool(torch.isfinite(x.sum())) and not bool(torch.isfinite(x).all()):  # the sum first: far cheaper
        n_bad = int((~torch.isfinite(x)).sum())
        raise ValueError(f"{name}: input contains NaN or inf ({n_bad} non-finite entries)")
    return x, is_torch


def input_eps(x: ArrayLike) -> float:
    """Machine epsilon of the floating-point type ``x`` is stored in; 0 for integers (exact values).

    The precision of the input bounds how well equal quantities can be told apart: an orthogonal matrix stored in
    float32 has row norms equal only to about float32's epsilon, whatever precision the scores are computed in.
    """
    dtype = x.dtype if isinstance(x, torch.Tensor) else np.asarray(x).dtype
    if isinstance(dtype, torch.dtype):
        return torch.finfo(dtype).eps if dtype.is_floating_point else 0.0
    return float(np.finfo(dtype).eps) if np.issubdtype(dtype, np.floating) else 0.0


def check_square(m: torch.Tensor, name: str) -> None:
    """Require shape ``[..., d, d]``."""
    if m.ndim < 2 or m.shape[-1] != m.shape[-2]:
        raise ValueError(f"{name}: expected square matrices with shape [..., d, d], got shape {tuple(m.shape)}")


def check_factors(w_q: torch.Tensor, w_k: torch.Tensor) -> None:
    """Require matching factor shapes ``[..., r, d_model]`` for queries and keys."""
    if w_q.ndim < 2:
        raise ValueError(f"W_q: expected shape [..., d_head, d_model], got shape {tuple(w_q.shape)}")
    if w_q.shape != w_k.shape:
        raise ValueError(
            f"W_q and W_k must have the same shape [..., d_head, d_model], got {tuple(w_q.shape)} and "
            f"{tuple(w_k.shape)}"
        )


def to_caller_type(result: torch.Tensor, as_torch: bool) -> Any:
    """Return ``result`` in the caller's array type: a Python float for a 0-d numpy result."""
    if as_torch:
        return result
    out = result.cpu().numpy()
    return float(out) if out.ndim == 0 else out


def finite_vector(values, name: str, *, min_n: int = 2) -> np.ndarray:
    """``values`` as a finite 1-D float array of at least ``min_n`` entries (one value per unit, e.g. per seed),
    or ValueError naming ``name``."""
    x = np.asarray(values, dtype=float)
    if x.ndim != 1 or len(x) < min_n:
        raise ValueError(f"{name} must be 1-D, one value per unit, at least {min_n} units; got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{name} contains NaN or inf at positions {np.flatnonzero(~np.isfinite(x)).tolist()}")
    return x
