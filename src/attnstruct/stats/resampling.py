"""Intervals and tests from resampling the units: the bootstrap, the sign-flip test, the two-sample permutation test.

Every function takes one value per independent unit (the seed by default), never per-layer or per-step values as if
they were independent. Exact enumeration: the bootstrap over all ``n**n`` resamples when ``n**n <= n_resamples``,
the sign-flip test over all ``2**n`` patterns for ``n <= 20`` (so ``p >= 1 / 2**n``, :func:`smallest_p`), the
two-sample test over all ``C(n + m, n)`` splits up to 200_000; else Monte Carlo, p-values ``(k + 1) / (N + 1)``.
``exact=True`` / ``False`` forces one. A null statistic within ``1e-12`` times the largest possible ``|statistic|``
of the observed one counts as a tie (as extreme).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .._checks import finite_vector as _values

ALTERNATIVES = ("greater", "less", "two-sided")


EXACT_SIGN_FLIP_N = 20  # enumerate all 2**n sign patterns up to this n


EXACT_SPLITS = 200_000  # enumerate all two-sample splits up to this many


_MAX_ENUMERATION = 2**22  # the most patterns, splits or resamples exact=True may ask for


_CHUNK = 8192


def _check(alternative=None, *, level=None, n_resamples=None, sign=None, alpha=None) -> None:
    if sign is not None and sign not in (1, -1):
        raise ValueError(f"predicted_sign must be +1 or -1, got {sign!r}")
    if alpha is not None and not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    if alternative is not None and alternative not in ALTERNATIVES:
        raise ValueError(f"unknown alternative {alternative!r}; choose one of {ALTERNATIVES}")
    if level is not None and not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    if n_resamples is not None and (int(n_resamples) != n_resamples or n_resamples < 1):
        raise ValueError(f"n_resamples must be a positive integer, got {n_resamples!r}")


def _use_exact(exact: bool | None, count: int, threshold: int, what: str) -> bool:
    if exact and count > _MAX_ENUMERATION:
        raise ValueError(f"exact=True would enumerate {count} {what}; at most {_MAX_ENUMERATION} allowed")
    return count <= threshold if exact is None else bool(exact)


def _tail_count(null: np.ndarray, observed: float, alternative: str, scale: float) -> int:
    """How many null statistics are at least as extreme as ``observed`` (ties within ``1e-12 * scale``)."""
    if alternative == "less":
        null, observed = -null, -observed
    elif alternative == "two-sided":
        null, observed = np.abs(null), abs(observed)
    return int(np.count_nonzero(null >= observed - 1e-12 * scale))


@dataclass(frozen=True)
class Interval:
    """A point estimate with a percentile-bootstrap interval at ``level`` from ``n`` units."""

    estimate: float
    low: float
    high: float
    level: float
    n: int


def _resample_stats(x: np.ndarray, statistic: Callable, exact: bool, n_resamples: int, rng) -> np.ndarray:
    """``statistic`` of each resample of ``x`` (exact: all ``n**n``, ``itertools.product`` order); vectorised
    as ``statistic(samples, axis=-1)`` where that works (numpy reductions), else one call per resample."""
    n = len(x)
    idx = np.array(list(itertools.product(range(n), repeat=n))) if exact else rng.integers(0, n, (n_resamples, n))
    samples = x[idx]
    try:
        return np.asarray(statistic(samples, axis=-1), dtype=float).reshape(len(samples))
    except (TypeError, ValueError):
        return np.array([float(statistic(row)) for row in samples])


def bootstrap_interval(
    values,
    *,
    statistic: Callable = np.mean,
    level: float = 0.95,
    n_resamples: int = 10_000,
    seed: int = 0,
    exact: bool | None = None,
) -> Interval:
    """Percentile-bootstrap interval of ``statistic`` over ``values`` ``[n]`` (one value per unit, ``n >= 2``).

    ``estimate = statistic(values)``; interval: the ``(alpha/2, 1 - alpha/2)`` quantiles, ``alpha = 1 - level``,
    of ``statistic`` over resamples of the units with replacement: all ``n**n`` (deterministic) if ``n**n <=
    n_resamples`` (``n <= 5`` at the default), else ``n_resamples`` from ``np.random.default_rng(seed)``.
    """
    _check(level=level, n_resamples=n_resamples)
    x = _values(values, "values")
    exact = _use_exact(exact, len(x) ** len(x), n_resamples, "resamples")
    stats = _resample_stats(x, statistic, exact, n_resamples, np.random.default_rng(seed))
    low, high = np.quantile(stats, [(1 - level) / 2, (1 + level) / 2])
    return Interval(float(statistic(x)), float(low), float(high), float(level), len(x))


def smallest_p(n: int, alternative: str = "greater") -> float:
    """The smallest p a sign-flip test of ``n`` units can reach: ``1 / 2**n`` one-sided, ``2 / 2**n`` two-sided."""
    _check(alternative)
    if int(n) != n or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    return min(1.0, (2.0 if alternative == "two-sided" else 1.0) / 2.0 ** int(n))


def smallest_two_sample_p(n: int, m: int, alternative: str = "greater") -> float:
    """The smallest p a two-sample permutation test of ``n`` against ``m`` units can reach
    (:func:`two_sample_permutation_test`): one split in ``C(n + m, n)`` when the splits are enumerated, one in
    ``EXACT_SPLITS + 1`` beyond (Monte Carlo's ``1 / (N + 1)``); twice that two-sided."""
    _check(alternative)
    if min(int(n), int(m)) < 1 or int(n) != n or int(m) != m:
        raise ValueError(f"n and m must be positive integers, got {n!r} and {m!r}")
    splits = min(math.comb(int(n) + int(m), int(n)), EXACT_SPLITS + 1)
    return min(1.0, (2.0 if alternative == "two-sided" else 1.0) / splits)


def fewest_units(
    alpha: float = 0.05, *, control: int | None = None, balanced: bool = False, at_most: int = 64
) -> int | None:
    """The fewest units ``n`` whose test can reach ``p < alpha``: a one-sided sign-flip test of ``n`` paired units
    (:func:`smallest_p`); with ``control``, a two-sample test of ``n`` against ``control`` units; with ``balanced``,
    of ``n`` against ``n`` (:func:`smallest_two_sample_p`). None when ``at_most`` units are not enough."""
    _check(alpha=alpha)

    def smallest(n: int) -> float:
        if balanced:
            return smallest_two_sample_p(n, n)
        return smallest_p(n) if control is None else smallest_two_sample_p(n, control)

    return next((n for n in range(1, at_most + 1) if smallest(n) < alpha), None)


def sign_flip_test(
    differences, *, alternative: str = "greater", n_resamples: int = 100_000, seed: int = 0, exact: bool | None = None
) -> float:
    """Paired permutation p-value of ``mean(differences) = 0``, ``differences`` ``[n]`` (one per unit, ``n >= 1``).

    Null: each sign flipped independently. ``alternative``: ``"greater"`` (positive mean), ``"less"``, or
    ``"two-sided"`` (``|mean| >= |observed|``). Monte Carlo draws from ``np.random.default_rng(seed)``.
    """
    _check(alternative, n_resamples=n_resamples)
    d = _values(differences, "differences", min_n=1)
    n, observed, scale = len(d), float(d.sum()), float(np.abs(d).sum())
    if _use_exact(exact, 2**n, 2**EXACT_SIGN_FLIP_N, "sign patterns"):
        sums = functools.reduce(lambda s, v: np.concatenate([s + v, s - v]), d, np.zeros(1))  # all 2**n
        return _tail_count(sums, observed, alternative, scale) / 2.0**n
    rng, k = np.random.default_rng(seed), 0
    for start in range(0, n_resamples, _CHUNK):
        signs = 2.0 * rng.integers(0, 2, size=(min(_CHUNK, n_resamples - start), n)) - 1.0
        k += _tail_count(signs @ d, observed, alternative, scale)
    return (k + 1) / (n_resamples + 1)


def two_sample_permutation_test(
    treated,
    control,
    *,
    alternative: str = "greater",
    n_resamples: int = 100_000,
    seed: int = 0,
    exact: bool | None = None,
) -> float:
    """Permutation p-value of ``mean(treated) - mean(control) = 0``, ``treated`` ``[n]``, ``control`` ``[m]``.

    Null: the ``n + m`` values are exchangeable; exact ``p >= 1 / C(n + m, n)``. Alternatives as in
    :func:`sign_flip_test`.
    """
    _check(alternative, n_resamples=n_resamples)
    t, c = _values(treated, "treated", min_n=1), _values(control, "control", min_n=1)
    pooled, n, m = np.concatenate([t, c]), len(t), len(c)
    # mean(t) - mean(c) = (1/n + 1/m) (sum(t) - n mean(pooled)): the centred treated sum is an equivalent statistic
    centre, scale, splits = n * pooled.mean(), float(np.abs(pooled).sum()), math.comb(n + m, n)
    observed = t.sum() - centre
    if _use_exact(exact, splits, EXACT_SPLITS, "splits"):
        flat = itertools.chain.from_iterable(itertools.combinations(range(n + m), n))
        sums = pooled[np.fromiter(flat, dtype=np.intp, count=splits * n).reshape(splits, n)].sum(axis=1)
        return _tail_count(sums - centre, observed, alternative, scale) / splits
    rng, k = np.random.default_rng(seed), 0
    for start in range(0, n_resamples, _CHUNK):
        idx = np.argsort(rng.random((min(_CHUNK, n_resamples - start), n + m)), axis=1)[:, :n]
        k += _tail_count(pooled[idx].sum(axis=1) - centre, observed, alternative, scale)
    return (k + 1) / (n_resamples + 1)
