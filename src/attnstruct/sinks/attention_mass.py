r"""The attention mass that queries put on the sink positions, per layer and head, and the uniform share.

With attention probabilities ``P`` of shape ``[L, H, B, T, T]`` (``P[l, h, b, i, j]``: query ``i`` on key ``j``,
rows summing to 1) and sink positions ``S`` (position 0, or [CLS] = 0 and [SEP] = ``T - 1`` for an encoder)::

    mass[l, h] = mean_{b, i in Q} sum_{j in S} P[l, h, b, i, j]

with ``Q`` every query, except query 0 in a causal model (it can attend only to itself, so its mass on position 0
is 1 whatever the model learned). The uniform share is what attention spread evenly would give: ``|S| / T``
bidirectionally, and ``mean_{t = 1..T-1} 1 / (t + 1)`` causally (query ``t`` sees ``t + 1`` keys, ``S = {0}``).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def sink_positions(length: int, *, causal: bool) -> tuple[int, ...]:
    """The sink positions of a sequence of ``length`` tokens: ``(0,)`` for a causal model, ``(0, length - 1)``
    ([CLS] and [SEP]) for an encoder."""
    return (0,) if causal or length < 2 else (0, length - 1)


def _queries(length: int, causal: bool) -> slice:
    return slice(1, length) if causal else slice(0, length)


def sink_mass(probabilities: torch.Tensor, positions: Sequence[int] = (0,), *, causal: bool) -> torch.Tensor:
    """Mean mass on ``positions`` per layer and head: ``[L, H, B, T, T] -> [L, H]`` (module docstring)."""
    if probabilities.ndim != 5 or probabilities.shape[-1] != probabilities.shape[-2]:
        raise ValueError(f"attention probabilities must be [L, H, B, T, T], got {tuple(probabilities.shape)}")
    length = probabilities.shape[-1]
    if causal and length < 2:
        raise ValueError("a causal sink mass needs at least two positions (query 0 is left out)")
    if any(not -length <= p < length for p in positions):
        raise ValueError(f"sink positions {tuple(positions)} lie outside a sequence of {length}")
    keys = sorted({p % length for p in positions})
    on_sinks = probabilities[..., _queries(length, causal), :][..., keys].sum(-1)  # [L, H, B, T_q]
    return on_sinks.double().mean((-2, -1))


def uniform_share(length: int, positions: Sequence[int] = (0,), *, causal: bool) -> float:
    """The mass :func:`sink_mass` would find if every query spread its attention evenly over the keys it sees."""
    if causal:
        if tuple({p % length for p in positions}) != (0,):
            raise ValueError("the causal uniform share is defined for position 0 alone")
        return sum(1.0 / (t + 1) for t in range(1, length)) / (length - 1)
    return len({p % length for p in positions}) / length
