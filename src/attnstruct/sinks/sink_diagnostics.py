r"""Every sink diagnostic of one model on one batch, as one record.

For token ids ``[B, T]`` (equal-length windows, no padding): the sink mass per layer and head
(:mod:`.attention_mass`) against the uniform share; the dominant key channels of each layer's ``W_qk``, the ``k``
first-position channels and the ``k`` massive-activation channels (:mod:`.sink_channels`); the overlap of the
dominant set with each, against chance (:func:`attnstruct.stats.set_overlap.overlap_against_chance`); the sink mass
change when the dominant key channels are zeroed, against random ones (:mod:`.channel_ablation`); directionality
with the first-position channels left out, the score's blind spots and the key-side bias term
(:mod:`.score_blind_spots`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from ..stats.set_overlap import OverlapTest, overlap_against_chance
from .attention_mass import sink_mass, sink_positions, uniform_share
from .attention_passes import attention_pass, query_key_weights
from .channel_ablation import AblationTest, key_channel_ablation
from .score_blind_spots import BlindSpots, blind_spots, directionality_without, key_bias_term
from .sink_channels import dominant_key_channels, first_position_channels, massive_activation_channels


@dataclass(frozen=True)
class SinkDiagnostics:
    """One model's sink diagnostics on one batch.

    ``mass`` ``[L, H]`` the sink mass on ``positions``, ``uniform`` the uniform share; ``dominant``,
    ``first_position``, ``massive`` the channel lists per layer; ``overlap_first`` and ``overlap_massive`` the
    dominant set's overlap with each against chance; ``ablation`` the dominant key channels zeroed against random
    ones; ``directionality`` and ``directionality_without_first`` ``[L]``; ``blind_spots``; ``key_bias_term``
    ``[L, H]``; ``seconds`` the wall time of the whole diagnostic."""

    mass: np.ndarray
    uniform: float
    positions: tuple[int, ...]
    causal: bool
    dominant: list[list[int]]
    first_position: list[list[int]]
    massive: list[list[int]]
    overlap_first: OverlapTest
    overlap_massive: OverlapTest
    ablation: AblationTest
    directionality: np.ndarray
    directionality_without_first: np.ndarray
    blind_spots: BlindSpots
    key_bias_term: np.ndarray
    seconds: float


def layer_sink_mass(model: nn.Module, ids: torch.Tensor, positions: Sequence[int], *, causal: bool) -> torch.Tensor:
    """The sink mass of each layer averaged over its heads, ``[L]``: what the ablation measures."""
    return sink_mass(attention_pass(model, ids, causal=causal).probabilities, positions, causal=causal).mean(-1)


def diagnose(
    model: nn.Module,
    ids: torch.Tensor,
    *,
    causal: bool,
    positions: Sequence[int] | None = None,
    k: int = 10,
    ablation_draws: int = 20,
    overlap_draws: int = 2000,
    seed: int = 0,
) -> SinkDiagnostics:
    """All diagnostics of ``model`` (the project's own or a transformers model in eager attention) on ``ids``
    ``[B, T]``; ``positions`` default to :func:`~.attention_mass.sink_positions` (0, and the last for an encoder)."""
    start = time.perf_counter()
    positions = tuple(sink_positions(ids.shape[1], causal=causal) if positions is None else positions)
    passed = attention_pass(model, ids, causal=causal)
    w_q, w_k, _ = query_key_weights(model)
    width = w_q.shape[-1]
    dominant = dominant_key_channels(w_q, w_k)
    first = first_position_channels(passed.residual, k)
    massive = massive_activation_channels(passed.residual, k)
    ablation = key_channel_ablation(
        model,
        lambda m: layer_sink_mass(m, ids, positions, causal=causal),
        dominant,
        n_draws=ablation_draws,
        seed=seed,
    )
    whole, without = directionality_without(w_q, w_k, first)
    return SinkDiagnostics(
        mass=sink_mass(passed.probabilities, positions, causal=causal).numpy(),
        uniform=uniform_share(ids.shape[1], positions, causal=causal),
        positions=positions,
        causal=causal,
        dominant=dominant,
        first_position=first,
        massive=massive,
        overlap_first=overlap_against_chance(dominant, first, width, n_draws=overlap_draws, seed=seed),
        overlap_massive=overlap_against_chance(dominant, massive, width, n_draws=overlap_draws, seed=seed),
        ablation=ablation,
        directionality=whole.numpy(),
        directionality_without_first=without.numpy(),
        blind_spots=blind_spots(model),
        key_bias_term=key_bias_term(model, passed).numpy(),
        seconds=time.perf_counter() - start,
    )
