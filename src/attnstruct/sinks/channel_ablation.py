r"""The change of the sink mass when key channels are zeroed, against as many random channels.

Zeroing key channels ``C_l`` of layer ``l`` sets the key projection's input columns to 0, ``W_k[:, C_l] = 0`` (in
a copy of the model): keys no longer read those residual channels, so a key bias carried by them is gone. With
``m_l`` the sink mass of layer ``l`` averaged over its heads (``measure``), the observed change is
``delta = mean_l (m_l(ablated) - m_l)``. The null zeroes, in every layer, ``|C_l|`` channels drawn uniformly at random
(``n_draws`` draws from ``seed``); :attr:`AblationTest.percentile` is the share of null changes at or below
``delta`` (near 0: the chosen channels lower the sink more than random ones do).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from ..stats.set_overlap import percentile_in_null
from .attention_passes import key_projections


@dataclass(frozen=True)
class AblationTest:
    """The sink mass per layer ``[L]`` before (``base``) and after (``ablated``) zeroing the chosen key channels;
    ``change`` their mean difference; ``null_changes`` ``[n_draws]`` the same with random channels, ``null_mean``
    their mean and ``percentile`` where ``change`` sits among them; ``layers_halved`` how many layers' sink mass
    the ablation at least halved."""

    base: np.ndarray
    ablated: np.ndarray
    change: float
    null_changes: np.ndarray
    null_mean: float
    percentile: float
    layers_halved: int
    seed: int


@torch.no_grad()
def _mass_with_zeroed(
    model: nn.Module, measure: Callable[[nn.Module], torch.Tensor], channels: Sequence[Sequence[int]]
) -> np.ndarray:
    """``measure`` of ``model`` with ``W_k[:, channels[l]] = 0`` in each layer ``l``, the weights restored after."""
    keys = key_projections(model)
    kept = [k.input_columns(list(c)) for k, c in zip(keys, channels)]
    try:
        for key, chosen in zip(keys, channels):
            key.set_input_columns(list(chosen), 0.0)
        return np.asarray(measure(model), dtype=float)
    finally:
        for key, chosen, weights in zip(keys, channels, kept):
            key.set_input_columns(list(chosen), weights)


def key_channel_ablation(
    model: nn.Module,
    measure: Callable[[nn.Module], torch.Tensor],
    channels: Sequence[Sequence[int]],
    *,
    n_draws: int = 20,
    seed: int = 0,
) -> AblationTest:
    """Zero ``channels[l]`` of each layer's key projection input in a copy of ``model`` and compare the change of
    ``measure`` (the sink mass per layer, ``[L]``) with ``n_draws`` random channel sets of the same sizes."""
    keys = key_projections(model)
    if len(channels) != len(keys):
        raise ValueError(f"channels are given for {len(channels)} layers, the model has {len(keys)}")
    if n_draws < 1:
        raise ValueError(f"n_draws must be positive, got {n_draws}")
    work = copy.deepcopy(model)
    base = np.asarray(measure(work), dtype=float)
    ablated = _mass_with_zeroed(work, measure, channels)
    width = keys[0].weight.shape[1]
    rng = np.random.default_rng(seed)
    null = np.empty(n_draws)
    for draw in range(n_draws):
        random_sets = [rng.choice(width, size=len(c), replace=False).tolist() for c in channels]
        null[draw] = float(np.mean(_mass_with_zeroed(work, measure, random_sets) - base))
    change = float(np.mean(ablated - base))
    return AblationTest(
        base=base,
        ablated=ablated,
        change=change,
        null_changes=null,
        null_mean=float(null.mean()),
        percentile=percentile_in_null(change, null),
        layers_halved=int(np.count_nonzero(ablated <= base / 2)),
        seed=seed,
    )
