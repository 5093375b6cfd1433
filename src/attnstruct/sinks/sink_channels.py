r"""Channel sets of one model, per layer: the dominant key channels of ``W_qk``, the channels that set the first
position apart, and the massive-activation channels.

* **dominant key channels**: the layer matrix ``M_l = sum_h W_q[l, h]^T W_k[l, h]`` (``[d, d]``; in ``x_i^T M x_j``
  column ``j`` weighs key channel ``j``) and the columns the directionality score counts as outlying,
  :func:`attnstruct.scores.dominant_columns` (norm above ``mean + 2 std`` of the column norms);
* **first-position channels**: per layer, with ``h`` the residual stream ``[B, T, d]`` entering it,
  ``z_c = (mean_b h[b, 0, c] - mean_{b, t > 0} h[b, t, c]) / std_{b, t > 0} h[b, t, c]``, and the ``k`` channels of
  largest ``|z_c|``;
* **massive-activation channels** (Sun et al. 2024, "Massive activations in large language models"): the ``k``
  channels of largest ``max_{b, t} |h[b, t, c]|``.
"""

from __future__ import annotations

import torch

from ..scores import dominant_columns


def layer_matrices(w_q: torch.Tensor, w_k: torch.Tensor) -> torch.Tensor:
    """``M_l = sum_h W_q[l, h]^T W_k[l, h]``: ``[L, H, d_head, d] x2 -> [L, d, d]`` (float64)."""
    a, b = w_q.double(), w_k.double()
    return torch.einsum("lhrd,lhre->lde", a, b)


def dominant_key_channels(w_q: torch.Tensor, w_k: torch.Tensor) -> list[list[int]]:
    """The dominant columns of each layer's ``W_qk`` by the directionality score's own threshold, ``L`` lists."""
    mask = dominant_columns(layer_matrices(w_q, w_k))
    return [torch.nonzero(row).flatten().tolist() for row in mask]


def _top_k(values: torch.Tensor, k: int) -> list[list[int]]:
    if not 0 < k <= values.shape[-1]:
        raise ValueError(f"k must be in 1..{values.shape[-1]}, got {k}")
    return [sorted(row.topk(k).indices.tolist()) for row in values]


def first_position_z(residual: torch.Tensor) -> torch.Tensor:
    """``z_c`` of the first position against the others (module docstring): ``[L, B, T, d] -> [L, d]``."""
    if residual.ndim != 4 or residual.shape[2] < 3:
        raise ValueError(f"the residual stream must be [L, B, T >= 3, d], got {tuple(residual.shape)}")
    h = residual.double()
    others = h[:, :, 1:].flatten(1, 2)  # [L, B (T - 1), d]
    spread = others.std(1).clamp_min(torch.finfo(torch.float64).tiny)
    return (h[:, :, 0].mean(1) - others.mean(1)) / spread


def first_position_channels(residual: torch.Tensor, k: int) -> list[list[int]]:
    """The ``k`` channels per layer where the first position differs most from the others (largest ``|z_c|``)."""
    return _top_k(first_position_z(residual).abs(), k)


def massive_activation_channels(residual: torch.Tensor, k: int) -> list[list[int]]:
    """The ``k`` channels per layer of largest ``|activation|`` anywhere in the batch, ``[L, B, T, d]``."""
    return _top_k(residual.double().abs().amax((1, 2)), k)
