"""The nulls every verdict is read against: what layers without structure score, and where a value sits among them.

* :func:`null_median_over_layers`: the median score over ``n_layers`` independent random layers of one shape
  (``sum_h W_q[h]^T W_k[h]`` with Gaussian factors, :func:`attnstruct.random_matrices.random_factors`), the
  statistic the paper reports for a model; :func:`median_null` the same at a bounded cost for deep stacks.
* :func:`null_of_the_mean`: the null of a mean over ``n`` units, of one pool or of the difference of two. A verdict
  on a mean over ``n`` seeds is read against this, never against the null of one seed's value, which is about
  ``sqrt(n)`` times as wide.
* :func:`paired_null`: the null of a mean paired difference when the two labels are exchangeable within a unit (runs
  that share their initialisation).
* :func:`peak_null`: the null of "peaks, then decays" (the mean of peak minus final value), from the same
  trajectories with their time order taken away.
* :func:`compare_with_null`: where a value sits in a null sample (percentile, ``z``, the 95% range).
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass

import numpy as np

from .._checks import finite_vector
from ..random_matrices import generator, random_factors
from ..scores import factor_scores

SCORES = ("symmetry", "directionality")


@dataclass(frozen=True)
class NullComparison:
    """Where ``value`` sits in ``n_null`` null samples (see :func:`compare_with_null`)."""

    value: float
    percentile: float
    z: float
    null_low: float
    null_high: float
    null_median: float
    n_null: int

    @property
    def outside(self) -> bool:
        """``value`` lies outside the null's 95% range ``[null_low, null_high]``."""
        return self.value < self.null_low or self.value > self.null_high


def compare_with_null(value: float, null_samples) -> NullComparison:
    """``value`` against ``null_samples`` ``[k]`` (finite, ``k >= 2``).

    ``percentile = 100 (below + equal / 2) / k``; ``z = (value - mean) / std`` (ddof 1; ``+-inf`` or NaN for a
    null without spread); ``null_low``, ``null_high``: its 2.5% and 97.5% quantiles (``np.quantile``).
    """
    value = float(finite_vector([value], "value", min_n=1)[0])
    null = finite_vector(null_samples, "null_samples")
    below, equal = np.count_nonzero(null < value), np.count_nonzero(null == value)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = float(np.float64(value - null.mean()) / null.std(ddof=1))
    low, median, high = np.quantile(null, [0.025, 0.5, 0.975])
    percentile = 100.0 * (below + 0.5 * equal) / len(null)
    return NullComparison(float(value), percentile, z, float(low), float(high), float(median), len(null))


@functools.lru_cache(maxsize=16)
def _layer_draws(d_model: int, n_heads: int, n_draws: int, seed: int) -> np.ndarray:
    """``[2, n_draws]``: symmetry and directionality of the ``factors H=n_heads, layer`` ensemble's draws."""
    gen = generator(seed, 1, d_model)  # that ensemble's cell in null_distribution([d_model], [n_heads], ...)
    out = np.empty((2, n_draws))
    for k in range(n_draws):
        s = factor_scores(*random_factors(n_heads, d_model // n_heads, d_model, gen), sum_heads=True)
        out[:, k] = float(s.symmetry), float(s.directionality)
    return out


def null_median_over_layers(
    score: str, d_model: int, n_heads: int, n_layers: int, *, n_draws: int = 400, seed: int = 0
) -> np.ndarray:
    """``[n_draws]`` samples of the median ``score`` over ``n_layers`` independent random layers.

    A layer is a draw of :func:`attnstruct.analyses.score_nulls.null_distribution`'s ensemble ``f"factors H={n_heads},
    layer"``
    (``sum_h W_q[h]^T W_k[h]``, Gaussian factors): the draws of ``null_distribution([d_model], [n_heads],
    n_draws * n_layers, seed)`` bit for bit, sample ``i`` the median of draws ``i * n_layers .. (i+1) * n_layers
    - 1``. Only that ensemble is drawn (at half the cost or less), both scores cached: about 1 s per 100 draws
    at ``d_model = 256`` on one core, 0.1 s at 64.
    """
    if score not in SCORES:
        raise ValueError(f"unknown score {score!r}; choose one of {SCORES}")
    for name, v, least in (
        ("d_model", d_model, 1),
        ("n_heads", n_heads, 1),
        ("n_layers", n_layers, 1),
        ("n_draws", n_draws, 2),
    ):
        if int(v) != v or v < least:
            raise ValueError(f"{name} must be an integer >= {least}, got {v!r}")
    if d_model % n_heads:
        raise ValueError(f"d_model ({d_model}) must be a multiple of n_heads ({n_heads})")
    draws = _layer_draws(int(d_model), int(n_heads), int(n_draws * n_layers), int(seed))[SCORES.index(score)]
    return np.median(draws.reshape(int(n_draws), int(n_layers)), axis=1)


@functools.lru_cache(maxsize=64)
def median_null(
    score: str, d_model: int, n_heads: int, n_layers: int, *, n_draws: int = 200, layer_draws: int = 200, seed: int = 0
) -> np.ndarray:
    """``[n_draws]`` samples of the median ``score`` over ``n_layers`` random layers of width ``d_model`` with
    ``n_heads`` heads (read-only, cached per argument tuple).

    A random layer is a draw of :func:`attnstruct.null_median_over_layers`'s ensemble (``sum_h W_q[h]^T
    W_k[h]`` with independent Gaussian factors, ``d_head = d_model / n_heads``). If ``n_draws * n_layers <=
    layer_draws`` the samples are that function's, each the median of its own ``n_layers`` layers. Otherwise,
    to bound the cost (one ``d_model``-cubed product per layer), ``layer_draws`` layers are drawn (that function
    with ``n_layers=1``, shared by both scores) and each sample is the median of ``n_layers`` of them picked with
    replacement (``np.random.default_rng([seed, d_model, n_heads, n_layers]).integers(0, layer_draws,
    (n_draws, n_layers))``, the same picks for both scores): a bootstrap whose centre is uncertain by about
    ``sqrt(n_layers / layer_draws)`` of its own spread.
    """
    if n_draws * n_layers <= layer_draws:
        out = null_median_over_layers(score, d_model, n_heads, n_layers, n_draws=n_draws, seed=seed)
    else:
        pool = null_median_over_layers(score, d_model, n_heads, 1, n_draws=layer_draws, seed=seed)
        picks = np.random.default_rng([seed, d_model, n_heads, n_layers]).integers(0, layer_draws, (n_draws, n_layers))
        out = np.median(pool[picks], axis=1)
    out = np.array(out, dtype=float)
    out.flags.writeable = False
    return out


def null_of_the_mean(pool, n: int, *, minus=None, n_samples: int = 4000, seed: int = 0) -> np.ndarray:
    """``[n_samples]`` draws of the mean over ``n`` units of ``A_k`` (or of ``A_k - B_k`` with ``minus``).

    ``A_k`` is drawn with replacement from ``pool`` ``[k]`` and, with ``minus`` ``[m]``, ``B_k`` independently from
    it, all from ``np.random.default_rng(seed)`` (the ``A`` draws first). This is the distribution, without
    structure, of the estimate that :func:`attnstruct.stats.verdicts.paired_effect` reports for ``n`` seeds:
    ``pool`` the null of one seed's value (one untrained model), ``minus`` that of the baseline's.
    """
    a = finite_vector(pool, "pool")
    if int(n) != n or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    if int(n_samples) != n_samples or n_samples < 2:
        raise ValueError(f"n_samples must be an integer >= 2, got {n_samples!r}")
    rng = np.random.default_rng(seed)
    draws = a[rng.integers(0, len(a), (int(n_samples), int(n)))]
    if minus is not None:
        b = finite_vector(minus, "minus")
        draws = draws - b[rng.integers(0, len(b), (int(n_samples), int(n)))]
    return draws.mean(1)


def paired_null(differences, *, n_samples: int = 4000, seed: int = 0, exact: bool | None = None) -> np.ndarray:
    """The null of the mean of ``differences`` ``[n]`` (treated minus baseline, paired by unit) when the two labels
    are exchangeable within each unit: the mean of ``s_i d_i`` over the ``2**n`` sign patterns ``s`` (all of them,
    each once, when ``exact`` or ``n <= 12``), else ``n_samples`` patterns from ``np.random.default_rng(seed)``.

    This is the null of "do the two conditions differ?" for runs that share their initialisation (an encoder and a
    decoder started from one seed's weights), for which the untrained difference is 0 by construction and the null
    of two independent untrained draws (:func:`null_of_the_mean` with ``minus``) does not apply.
    """
    d = finite_vector(differences, "differences", min_n=1)
    if exact is None:
        exact = len(d) <= 12
    if exact:
        patterns = np.array(list(itertools.product((1.0, -1.0), repeat=len(d))))
    else:
        if int(n_samples) != n_samples or n_samples < 2:
            raise ValueError(f"n_samples must be an integer >= 2, got {n_samples!r}")
        patterns = 2.0 * np.random.default_rng(seed).integers(0, 2, size=(int(n_samples), len(d))) - 1.0
    return patterns @ d / len(d)


def peak_minus_final(trajectories) -> np.ndarray:
    """``max_t x[u, t] - x[u, -1]`` for each unit's trajectory, ``trajectories`` ``[n_units, n_steps]`` (finite,
    ``n_steps >= 2``): how far the final value lies below the trajectory's peak (``>= 0`` by construction)."""
    x = np.asarray(trajectories, dtype=float)
    if x.ndim != 2 or x.shape[1] < 2 or x.shape[0] < 1 or not np.all(np.isfinite(x)):
        raise ValueError(f"trajectories must be finite [n_units, n_steps >= 2], got shape {x.shape}")
    return x.max(axis=1) - x[:, -1]


def peak_null(trajectories, *, n_samples: int = 4000, seed: int = 0, exact: bool | None = None) -> np.ndarray:
    """The null of the mean over units of :func:`peak_minus_final` when each trajectory's time order carries no
    information (its steps exchangeable): ``[k]`` draws of ``mean_u (max_t x[u, t] - x[u, T_u])``.

    Shuffling a trajectory leaves its peak where it was in value and makes the final value uniform over its ``n_steps``
    values, so the null draws one final index ``T_u`` per unit: all ``n_steps ** n_units`` choices, each once, when
    ``exact`` (default: when there are at most 100,000), else ``n_samples`` from ``np.random.default_rng(seed)``.
    Peak minus final is ``>= 0`` whatever the dynamics, so "the score peaks and then decays" is read against this
    null, never against 0.
    """
    peak_minus_final(trajectories)  # validates the shape and values
    x = np.asarray(trajectories, dtype=float)
    gaps, (n_units, n_steps) = x.max(axis=1, keepdims=True) - x, x.shape
    if exact is None:
        exact = n_steps**n_units <= 100_000
    if exact:
        picks = np.array(list(itertools.product(range(n_steps), repeat=n_units)))
    else:
        if int(n_samples) != n_samples or n_samples < 2:
            raise ValueError(f"n_samples must be an integer >= 2, got {n_samples!r}")
        picks = np.random.default_rng(seed).integers(0, n_steps, size=(int(n_samples), n_units))
    return gaps[np.arange(n_units), picks].mean(axis=1)
