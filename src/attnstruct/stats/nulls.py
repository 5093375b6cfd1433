"""The nulls every verdict is read against: what layers without structure score, and where a value sits among them.

* :func:`null_median_over_layers`: the median score over ``n_layers`` independent random layers of one shape
  (``sum_h W_q[h]^T W_k[h]`` with Gaussian factors, :func:`attnstruct.random_matrices.random_factors`), the
  statistic the paper reports for a model; :func:`median_null` the same at a bounded cost for deep stacks.
* :func:`symmetrised`: a null of directionality, each draw with its transpose. Transposing a matrix negates its
  directionality and keeps its symmetry, and ``W_q``, ``W_k`` are exchangeable without structure, so every null of
  directionality (a median over layers, a mean over units, a difference of two) is symmetric about 0: its draws
  are pooled with their negations, which centres it at 0 exactly instead of at a Monte Carlo error.
* :func:`null_of_the_mean`: the null of a mean over ``n`` units, of one pool or of the difference of two. A verdict
  on a mean over ``n`` seeds is read against this, never against the null of one seed's value, which is about
  ``sqrt(n)`` times as wide.
* :func:`null_of_the_mean_by_unit`: the same when each unit has a null of its own (units of different shapes).
* :func:`paired_null`: the null of a mean paired difference when the two labels are exchangeable within a unit (runs
  that share their initialisation).
* :func:`decay_contrast`: the statistic of "peaks, then decays", the early minus the late window of the records
  after the peak, read by a sign-flip over units (no null of its own: those records are autocorrelated, so their
  orders are not equally likely).
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


def symmetrised(samples) -> np.ndarray:
    """``[2 k]``: ``samples`` ``[k]`` (draws of a null of directionality) followed by their negations, the same
    draws with every matrix transposed (``dir(M^T) = -dir(M)``). Its median is 0 and its quantiles mirror each other
    (``q(p) = -q(1 - p)``) exactly."""
    draws = finite_vector(samples, "samples", min_n=1)
    return np.concatenate([draws, -draws])


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
    """``[n_draws]`` samples of the median ``score`` over ``n_layers`` independent random layers; for directionality
    ``[2 n_draws]``, those draws followed by the same layers transposed (:func:`symmetrised`).

    A layer is a draw of :func:`attnstruct.analyses.null_ensembles.null_distribution`'s ensemble ``f"factors
    H={n_heads}, layer"`` (``sum_h W_q[h]^T W_k[h]``, Gaussian factors): the draws of ``null_distribution([d_model],
    [n_heads], n_draws * n_layers, seed)`` bit for bit, sample ``i`` the median of draws ``i * n_layers .. (i+1) *
    n_layers - 1``. Only that ensemble is drawn (at half the cost or less), both scores cached: about 1 s per 100
    draws at ``d_model = 256`` on one core, 0.1 s at 64.
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
    medians = np.median(draws.reshape(int(n_draws), int(n_layers)), axis=1)
    return symmetrised(medians) if score == "directionality" else medians


@functools.lru_cache(maxsize=64)
def median_null(
    score: str, d_model: int, n_heads: int, n_layers: int, *, n_draws: int = 200, layer_draws: int = 200, seed: int = 0
) -> np.ndarray:
    """``[n_draws]`` samples of the median ``score`` over ``n_layers`` random layers of width ``d_model`` with
    ``n_heads`` heads (read-only, cached per argument tuple); for directionality ``[2 n_draws]``, each sample with
    the same layers transposed (:func:`symmetrised`), so that its centre is 0 exactly.

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
        pool = null_median_over_layers(score, d_model, n_heads, 1, n_draws=layer_draws, seed=seed)[:layer_draws]
        picks = np.random.default_rng([seed, d_model, n_heads, n_layers]).integers(0, layer_draws, (n_draws, n_layers))
        out = np.median(pool[picks], axis=1)
        out = symmetrised(out) if score == "directionality" else out
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


def null_of_the_mean_by_unit(pools, minus=None, *, n_samples: int = 4000, seed: int = 0) -> np.ndarray:
    """``[n_samples]`` draws of the mean over units of ``A_u`` (or ``A_u - B_u``), each unit with a null of its own.

    ``pools`` holds one sample per unit (``[k_u]`` each: the null of that unit's value, an untrained model of *its*
    shape); ``A_u`` is drawn with replacement from ``pools[u]`` and, with ``minus`` (as many samples), ``B_u``
    independently from ``minus[u]``, all from ``np.random.default_rng(seed)``. This is the null of a paired effect
    whose units differ in shape (Ettin's encoder-decoder pairs of six sizes): :func:`null_of_the_mean` is the case
    of one shared pool.
    """
    a = [finite_vector(pool, "pool", min_n=1) for pool in pools]
    if not a:
        raise ValueError("pools must hold one null sample per unit, got none")
    b = None if minus is None else [finite_vector(pool, "minus", min_n=1) for pool in minus]
    if b is not None and len(b) != len(a):
        raise ValueError(f"minus must hold one sample per unit like pools: {len(b)} against {len(a)}")
    if int(n_samples) != n_samples or n_samples < 2:
        raise ValueError(f"n_samples must be an integer >= 2, got {n_samples!r}")
    rng = np.random.default_rng(seed)
    total = np.zeros(int(n_samples))
    for u, pool in enumerate(a):
        total += pool[rng.integers(0, len(pool), int(n_samples))]
        if b is not None:
            total -= b[u][rng.integers(0, len(b[u]), int(n_samples))]
    return total / len(a)


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


def decay_contrast(trajectories, *, fraction: float = 1 / 3) -> np.ndarray:
    """How far each trajectory fell after its peak: the mean of the early window of its records after the peak step
    minus the mean of the late window, ``trajectories`` ``[n_units, n_steps]`` (finite, ``n_steps >= 2``).

    With ``m`` records after the peak (the first step of the highest value), each window holds the first and the
    last ``max(1, floor(m * fraction))`` of them, ``0 < fraction <= 1/2``, so the windows never overlap but for
    ``m = 1``; the contrast is 0 when no record follows the peak. Positive: the run fell. Read by a sign-flip test
    over units, paired: unlike a rank statistic that treats the records after the peak as exchangeable (they are
    autocorrelated), it assumes only that units are independent, and one late bump moves it by its share of the
    late window, not by a share of every pair of records.
    """
    peak_minus_final(trajectories)  # validates the shape and values
    if not 0 < fraction <= 0.5:
        raise ValueError(f"fraction must lie in (0, 1/2], got {fraction!r}")
    contrasts = []
    for row in np.asarray(trajectories, dtype=float):
        after = row[int(np.argmax(row)) + 1 :]
        k = max(1, int(len(after) * fraction))
        contrasts.append(after[:k].mean() - after[-k:].mean() if len(after) else 0.0)
    return np.array(contrasts)
