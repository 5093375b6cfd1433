r"""Self-attention's pre-softmax core as a bilinear form.

For token embeddings ``x_i`` (rows of ``X``, ``[N, d_model]``) and one head with query/key weights
``W_q[h], W_k[h]`` (``[d_head, d_model]``, the ``nn.Linear`` layout: ``q_i = W_q[h] x_i + b_q``)::

    q_i . k_j = x_i^T W_q[h]^T W_k[h] x_j  +  x_i^T W_q[h]^T b_k  +  b_q^T W_k[h] x_j  +  b_q . b_k
              = <x_i, x_j>_{M_h}           +  (query-side bias term) + (key-side bias term) + const

with ``M_h = W_q[h]^T W_k[h]``, the paper's ``W_qk = W_q W_k^T`` written for ``nn.Linear`` weights.
Softmax is invariant to terms that are constant along ``j``, so the query-side term and the constant
never change attention; the key-side term ``b_q^T W_k[h] x_j`` does, and the scores of ``M_h`` leave it out.
"""

from __future__ import annotations

import torch

from ._checks import ArrayLike, check_factors, check_square, to_caller_type, to_float64


def split_heads(weight: ArrayLike, n_heads: int) -> ArrayLike:
    """Split an ``nn.Linear`` weight ``[H * d_head, d_model]`` into ``[H, d_head, d_model]`` (heads contiguous)."""
    w, as_torch = to_float64(weight, "weight")
    if w.ndim != 2 or n_heads < 1 or w.shape[0] % n_heads:
        raise ValueError(f"cannot split weight of shape {tuple(w.shape)} into {n_heads} heads")
    return to_caller_type(w.reshape(n_heads, w.shape[0] // n_heads, w.shape[1]), as_torch)


def wqk(w_q: ArrayLike, w_k: ArrayLike, *, sum_heads: bool = True) -> ArrayLike:
    """The query-key matrix from the factors.

    Args:
        w_q, w_k: ``[..., H, d_head, d_model]``.
        sum_heads: return the layer matrix ``sum_h W_q[h]^T W_k[h]`` ``[..., d_model, d_model]``;
            otherwise one matrix per head ``[..., H, d_model, d_model]``.
    """
    a, as_torch = to_float64(w_q, "W_q")
    b, _ = to_float64(w_k, "W_k")
    check_factors(a, b)
    per_head = a.mT @ b
    if not sum_heads:
        return to_caller_type(per_head, as_torch)
    if a.ndim < 3:
        raise ValueError(f"sum_heads=True needs a head axis: shape [..., H, d_head, d_model], got {tuple(a.shape)}")
    return to_caller_type(per_head.sum(-3), as_torch)


def symmetric_part(m: ArrayLike) -> ArrayLike:
    """``M_s = (M + M^T) / 2`` for ``[..., d, d]``."""
    t, as_torch = to_float64(m, "M")
    check_square(t, "M")
    return to_caller_type((t + t.mT) / 2, as_torch)


def skew_part(m: ArrayLike) -> ArrayLike:
    """``M_n = (M - M^T) / 2`` for ``[..., d, d]``; ``M = M_s + M_n`` and the two are Frobenius-orthogonal."""
    t, as_torch = to_float64(m, "M")
    check_square(t, "M")
    return to_caller_type((t - t.mT) / 2, as_torch)


def bilinear_logits(
    x: ArrayLike,
    w_q: ArrayLike,
    w_k: ArrayLike,
    b_q: ArrayLike | None = None,
    b_k: ArrayLike | None = None,
) -> ArrayLike:
    """Unscaled attention logits ``q_i . k_j`` written through the bilinear form, per head.

    Args:
        x: ``[..., N, d_model]`` inputs of the attention layer.
        w_q, w_k: ``[H, d_head, d_model]``.
        b_q, b_k: optional ``[H, d_head]`` biases.

    Returns:
        ``[..., H, N, N]``: ``X M_h X^T`` plus the three bias terms of the module docstring. Divide by
        ``sqrt(d_head)`` for the logits of scaled dot-product attention.
    """
    xs, as_torch = to_float64(x, "X")
    a, _ = to_float64(w_q, "W_q")
    b, _ = to_float64(w_k, "W_k")
    check_factors(a, b)
    if a.ndim != 3 or xs.shape[-1] != a.shape[-1]:
        raise ValueError(f"X {tuple(xs.shape)} and W_q {tuple(a.shape)}: need X [..., N, d] and W [H, d_head, d]")
    m = a.mT @ b  # [H, d, d]
    x_h = xs.unsqueeze(-3)  # [..., 1, N, d]
    logits = x_h @ m @ x_h.mT
    if b_q is not None or b_k is not None:
        bq = (
            to_float64(b_q, "b_q")[0]
            if b_q is not None
            else torch.zeros(a.shape[:2], dtype=torch.float64, device=a.device)
        )
        bk = (
            to_float64(b_k, "b_k")[0]
            if b_k is not None
            else torch.zeros(a.shape[:2], dtype=torch.float64, device=a.device)
        )
        query_term = x_h @ (a.mT @ bk.unsqueeze(-1))  # [..., H, N, 1]: constant along j
        key_term = (x_h @ (b.mT @ bq.unsqueeze(-1))).mT  # [..., H, 1, N]
        const = (bq * bk).sum(-1)[..., None, None]
        logits = logits + query_term + key_term + const
    return to_caller_type(logits, as_torch)
