r"""The gradient of a token-prediction loss with respect to ``W_qk``, written out (paper section 3).

Model: one attention layer with ``H`` heads over token embeddings ``x_i`` (rows of ``X``, ``[B, N, d]``)::

    a^h_ij = s * x_i^T W^h x_j                (W^h = W_q^h W_k^h^T, s the scale, j in the context set D_i)
    P^h_i. = softmax_j(a^h_i.)                (masked to D_i)
    o^h_i  = sum_j P^h_ij x_j W_v^h           ([d_v])
    y_i    = sum_h o^h_i W_o^h                ([d])
    L      = mean over predicted positions i of cross-entropy(y_i U^T, t_i)

Backpropagating: ``g_i = dL/dy_i``, ``delta^h_i = g_i W_o^h^T``, ``dL/dP^h_ij = delta^h_i . v^h_j`` and, through the
softmax, ``dL/da^h_ij = P^h_ij (dL/dP^h_ij - sum_k P^h_ik dL/dP^h_ik)``. With ``beta^h_ij = s dL/da^h_ij``::

    dL/dW^h = sum_b sum_i sum_{j in D_i} beta^h_ij x_i x_j^T          (a sum of rank-1 outer products K_ij)

``x_i`` is the query position (the token whose output makes the prediction) and ``x_j`` a context token, so
each term adds ``x_i`` to the column space of the update and ``x_j`` to its row space. Context sets:
``bidirectional`` (every position, as in masked LM; ``include_self=False`` drops ``j = i``) and ``causal``
(``j <= i``, as in next-token prediction).
"""

from __future__ import annotations

import torch

OBJECTIVES = ("bidirectional", "causal")


def context_mask(n: int, objective: str, *, include_self: bool = True) -> torch.Tensor:
    """Boolean ``[n, n]``: entry ``(i, j)`` is True when ``j`` is in the context set ``D_i``."""
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; choose one of {OBJECTIVES}")
    if objective == "causal":
        return torch.tril(torch.ones(n, n, dtype=torch.bool))
    mask = torch.ones(n, n, dtype=torch.bool)
    if not include_self:
        mask.fill_diagonal_(False)
    return mask


def forward(x, w_qk, w_v, w_o, unembed, mask, scale):
    """Attention probabilities ``[B, H, N, N]``, values ``[B, H, N, d_v]`` and output logits ``[B, N, V]``."""
    a = scale * torch.einsum("bid,hde,bje->bhij", x, w_qk, x)
    a = a.masked_fill(~mask, float("-inf"))
    p = torch.softmax(a, dim=-1)
    v = torch.einsum("bjd,hdv->bhjv", x, w_v)
    o = p @ v
    y = torch.einsum("bhiv,hvd->bid", o, w_o)
    return p, v, y @ unembed.T


def loss(logits, targets, predict):
    """Mean cross-entropy over the positions where ``predict`` ``[B, N]`` is True."""
    per_token = torch.nn.functional.cross_entropy(logits.transpose(1, 2), targets, reduction="none")
    return (per_token * predict).sum() / predict.sum()


def analytic_gradient(x, w_qk, w_v, w_o, unembed, targets, predict, mask, scale):
    """``dL/dW^h`` ``[H, d, d]`` and the coefficients ``beta`` ``[B, H, N, N]`` (see the module docstring)."""
    p, v, logits = forward(x, w_qk, w_v, w_o, unembed, mask, scale)
    count = predict.sum()
    g = (torch.softmax(logits, -1) - torch.nn.functional.one_hot(targets, unembed.shape[0]).to(x.dtype)) @ unembed
    g = g * (predict[..., None].to(x.dtype) / count)  # [B, N, d]
    delta = torch.einsum("bid,hvd->bhiv", g, w_o)
    d_p = delta @ v.transpose(-1, -2)  # [B, H, N, N]
    d_a = p * (d_p - (p * d_p).sum(-1, keepdim=True))
    beta = scale * d_a
    return outer_product_sum(beta, x), beta


def outer_product_sum(beta: torch.Tensor, x: torch.Tensor, *, include_self: bool = True) -> torch.Tensor:
    """``sum_b sum_i sum_j beta^h_bij x_bi x_bj^T`` ``[H, d, d]``, from ``beta`` ``[B, H, N, N]`` and ``x``
    ``[B, N, d]``: the gradient of :func:`analytic_gradient`. ``include_self=False`` leaves out the self-pairs
    ``j = i``, whose terms ``beta_ii x_i x_i^T`` are symmetric matrices whatever the objective."""
    if not include_self:
        beta = beta * ~torch.eye(beta.shape[-1], dtype=torch.bool)
    return torch.einsum("bhij,bid,bje->hde", beta, x, x)


def role_counts(predict: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per position: how often it is a query (predicts) and how often it is context, ``[N]`` each, over the batch.

    ``predict`` ``[B, N]`` marks the query positions; position ``j`` is context for every query ``i`` with ``j``
    in ``D_i``.
    """
    as_query = predict.sum(0).to(torch.float64)
    as_context = (predict[..., None] & mask).sum((0, 1)).to(torch.float64)
    return as_query, as_context


def pair_frequencies(predict: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``P`` ``[N, N]`` (float64): ``P[i, j]`` is the fraction of the ``B`` sequences in which position ``i`` is a
    query and ``j`` is in its context set ``D_i``, from ``predict`` ``[B, N]`` and ``mask`` ``[N, N]`` (or
    ``[B, N, N]``): an estimate of ``P(i query, j context)``.

    Its margins count terms ``x_i x_j^T`` of the update: ``B * P.sum(0)`` is :func:`role_counts`' ``as_context``
    and, for a mask shared by the batch, ``B * P[i].sum()`` is ``as_query[i] * |D_i|``, the terms with ``i`` as
    the query. The two directions of a pair enter equally often when ``P = P^T``: masked LM (every position
    equally likely to be masked, ``D_i`` every position) is symmetric in expectation, next-token prediction
    (``j <= i``) lower-triangular.
    """
    if predict.ndim != 2 or mask.shape[-2:] != (predict.shape[1], predict.shape[1]):
        raise ValueError(
            f"need predict [B, N] and mask [N, N] or [B, N, N], got {tuple(predict.shape)}, {tuple(mask.shape)}"
        )
    pairs = predict[:, :, None] & mask.to(torch.bool)
    return pairs.sum(0).to(torch.float64) / predict.shape[0]
