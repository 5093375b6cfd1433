r"""How much two channel sets chosen per layer share, against the overlap of sets drawn at random.

Per layer ``l`` a found set ``F_l`` and a reference set ``S_l`` of channels out of ``d``. The statistic is the
summed overlap ``O = sum_l |F_l & S_l|``. Chance is judged twice:

* the hypergeometric expectation: a set of ``|S_l|`` channels drawn without replacement from ``d`` meets ``F_l`` in
  ``|F_l| |S_l| / d`` channels on average, so ``E[O] = sum_l |F_l| |S_l| / d``;
* a drawn null: ``n_draws`` times, each ``S_l`` replaced by ``|S_l|`` channels drawn uniformly without replacement,
  the summed overlap recomputed; the one-sided p-value is ``(1 + #{null >= O}) / (1 + n_draws)``.

:func:`percentile_in_null` says where one observed value sits among drawn null values (the share at or below it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class OverlapTest:
    """The summed overlap of two per-layer channel sets and what chance gives.

    ``per_layer`` ``[L]`` the overlaps; ``layers_with_overlap`` how many are above 0; ``expected`` the hypergeometric
    expectation of the sum; ``null_mean`` the mean of the drawn null; ``p_value`` one-sided (overlap greater)."""

    observed: int
    per_layer: tuple[int, ...]
    layers_with_overlap: int
    expected: float
    null_mean: float
    p_value: float
    n_draws: int


def _checked_sets(sets: Sequence[Sequence[int]], n_channels: int, what: str) -> list[np.ndarray]:
    out = []
    for layer, channels in enumerate(sets):
        array = np.unique(np.asarray(list(channels), dtype=np.int64))
        if array.size and (array[0] < 0 or array[-1] >= n_channels):
            raise ValueError(f"{what} of layer {layer} holds a channel outside 0..{n_channels - 1}")
        out.append(array)
    return out


def overlap_against_chance(
    found: Sequence[Sequence[int]],
    reference: Sequence[Sequence[int]],
    n_channels: int,
    *,
    n_draws: int = 2000,
    seed: int = 0,
) -> OverlapTest:
    """The summed overlap of ``found[l]`` and ``reference[l]`` over layers, against the hypergeometric expectation
    and a null of ``reference`` sets drawn at random with the same sizes (module docstring)."""
    if len(found) != len(reference):
        raise ValueError(f"found has {len(found)} layers, reference {len(reference)}")
    if n_draws < 1:
        raise ValueError(f"n_draws must be positive, got {n_draws}")
    found_sets = _checked_sets(found, n_channels, "found")
    reference_sets = _checked_sets(reference, n_channels, "reference")
    per_layer = tuple(int(np.intersect1d(f, s).size) for f, s in zip(found_sets, reference_sets))
    expected = float(sum(f.size * s.size / n_channels for f, s in zip(found_sets, reference_sets)))
    rng = np.random.default_rng(seed)
    null = np.zeros(n_draws)
    for f, s in zip(found_sets, reference_sets):
        if not (f.size and s.size):
            continue
        member = np.zeros(n_channels, dtype=bool)
        member[f] = True
        draws = np.argsort(rng.random((n_draws, n_channels)), axis=1)[:, : s.size]
        null += member[draws].sum(axis=1)
    observed = sum(per_layer)
    return OverlapTest(
        observed=observed,
        per_layer=per_layer,
        layers_with_overlap=sum(1 for n in per_layer if n),
        expected=expected,
        null_mean=float(null.mean()),
        p_value=float((1 + np.count_nonzero(null >= observed)) / (1 + n_draws)),
        n_draws=n_draws,
    )


def percentile_in_null(observed: float, null) -> float:
    """The percentage of ``null`` values at or below ``observed`` (0 below all of them, 100 at or above all)."""
    null = np.asarray(null, dtype=float).ravel()
    if not null.size:
        raise ValueError("the null holds no values")
    return float(100.0 * np.count_nonzero(null <= observed) / null.size)
