r"""What the directionality score leaves out: the sink channels' share of it, QK-norm, and query/key biases.

* **directionality without the sink channels**: the score of ``M_l`` with the rows and columns of channels ``C_l``
  removed, ``dir(M_l[keep, keep])``, ``keep`` the other channels;
* **flags**: a QK-norm (a norm on queries and keys, Gemma-3's ``q_norm``/``k_norm``) rescales every logit, and biases
  add terms the weights do not hold; the score is computed from ``W_q``, ``W_k`` alone and sees neither;
* **the key-side bias term**: with query bias ``b_q`` the logit of query ``i`` on key ``j`` holds
  ``b_q^T W_k x_j / sqrt(d_head)``, the same for every query: a second sink route. Its size is the ratio of its
  spread over keys to the spread of the whole logit ``(W_q x_i + b_q)^T (W_k x_j + b_k) / sqrt(d_head)`` over the
  query-key pairs attention sees (causal: ``j <= i``), per layer and head. Positional rotations (RoPE) are left out
  of both, as they are of the score.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from ..scores import directionality_score
from .attention_passes import AttentionPass, head_counts, key_projections, query_key_weights
from .sink_channels import layer_matrices

QK_NORM_SUFFIXES = ("q_norm", "k_norm", "query_layernorm", "key_layernorm")


@dataclass(frozen=True)
class BlindSpots:
    """What the score of this model cannot see: ``qk_norm`` (the names of its query/key norm modules, first two),
    ``query_bias`` and ``key_bias`` (its projections carry them)."""

    qk_norm: bool
    qk_norm_modules: tuple[str, ...]
    query_bias: bool
    key_bias: bool


def directionality_without(
    w_q: torch.Tensor, w_k: torch.Tensor, channels: Sequence[Sequence[int]]
) -> tuple[torch.Tensor, torch.Tensor]:
    """Each layer's directionality with all channels and with ``channels[l]``'s rows and columns left out:
    ``([L], [L])``."""
    matrices = layer_matrices(w_q, w_k)
    whole = directionality_score(matrices)
    width = matrices.shape[-1]
    without = []
    for matrix, chosen in zip(matrices, channels):
        keep = torch.tensor(sorted(set(range(width)) - set(chosen)))
        without.append(directionality_score(matrix[keep][:, keep]))
    return whole, torch.stack(without)


def blind_spots(model: nn.Module) -> BlindSpots:
    """The flags of :class:`BlindSpots` read from the model's modules."""
    norms = tuple(name for name, _ in model.named_modules() if name.endswith(QK_NORM_SUFFIXES))
    _, _, b_q = query_key_weights(model)
    keys = key_projections(model)
    return BlindSpots(
        qk_norm=bool(norms),
        qk_norm_modules=norms[:2],
        query_bias=b_q is not None and bool(b_q.abs().sum() > 0),
        key_bias=all(k.bias is not None for k in keys) and any(bool(k.bias.abs().sum() > 0) for k in keys),
    )


@torch.no_grad()
def key_bias_term(model: nn.Module, passed: AttentionPass) -> torch.Tensor:
    """The spread of the key-side bias term over the spread of the whole logit, per layer and head ``[L, H]``
    (module docstring); 0 where the model has no query bias."""
    w_q, w_k, b_q = query_key_weights(model)
    n_layers, heads = w_q.shape[:2]
    if b_q is None:
        return torch.zeros(n_layers, heads, dtype=torch.float64)
    _, kv_heads, d_head = head_counts(model)
    keys = key_projections(model)
    x = passed.key_inputs.double()  # [L, B, T, d]
    length = x.shape[2]
    seen = torch.ones(length, length, dtype=torch.bool)
    if passed.causal:
        seen = seen.tril()
    ratios = torch.zeros(n_layers, heads, dtype=torch.float64)
    for layer in range(n_layers):
        bias = keys[layer].bias
        b_k = torch.zeros(heads, d_head, dtype=torch.float64) if bias is None else bias.double().cpu()
        b_k = b_k.reshape(kv_heads, d_head).repeat_interleave(heads // kv_heads, 0) if bias is not None else b_k
        q = torch.einsum("hrd,btd->bhtr", w_q[layer], x[layer]) + b_q[layer][None, :, None]
        k = torch.einsum("hrd,btd->bhtr", w_k[layer], x[layer]) + b_k[None, :, None]
        logits = q @ k.transpose(-1, -2) / math.sqrt(d_head)  # [B, H, T, T]
        term = torch.einsum("hr,hrd,btd->bht", b_q[layer], w_k[layer], x[layer]) / math.sqrt(d_head)
        spread = logits[..., seen].transpose(0, 1).flatten(1).std(1)
        ratios[layer] = term.transpose(0, 1).flatten(1).std(1) / spread
    return ratios
