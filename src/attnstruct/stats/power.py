"""The smallest effect a design can detect: what a verdict of *cannot tell* rules out.

A test of ``n`` units whose per-unit values spread with standard deviation ``sigma`` detects a mean effect ``delta``
with power ``power`` when, were every unit's value ``delta + sigma z`` (``z`` standard normal), the test would give
``p < alpha`` in that share of experiments. :func:`detectable_shift` finds the smallest such ``delta / sigma``:

* a one-sided sign-flip test (:func:`attnstruct.stats.resampling.sign_flip_test`), for ``n <= EXACT_POWER_N`` by
  simulation of the exact test with common random numbers (its power grows with ``delta`` draw by draw, so a
  bisection finds the threshold); for ``n = 5`` and ``alpha = 0.05`` only the all-positive outcome reaches
  ``p = 1/32``, so the answer is ``Phi^-1(power^(1/5))`` (about ``1.71``) exactly. Beyond ``EXACT_POWER_N`` the normal
  approximation ``(z_(1-alpha) + z_power) / sqrt(n)``;
* a two-sample permutation test of ``n`` against ``m`` units, by the normal approximation
  ``(z_(1-alpha) + z_power) sqrt(1/n + 1/m)``.

Either is infinite when the test cannot reach ``p < alpha`` at all. :func:`detectable_effect` scales it by the
spread and, when the verdict also asks the estimate to lie beyond a null's 95% range, takes the farther of the two.
"""

from __future__ import annotations

import functools
import itertools
import math
from statistics import NormalDist

import numpy as np

from .resampling import _check, smallest_p, smallest_two_sample_p

POWER = 0.8  # the conventional power at which a detectable effect is quoted
EXACT_POWER_N = 10  # simulate the exact sign-flip test up to this many units
_DRAWS = 4000


def _sign_flip_rejects(d: np.ndarray, alpha: float) -> np.ndarray:
    """``[k, n]`` differences -> ``[k]`` whether the exact one-sided sign-flip test gives ``p < alpha``."""
    signs = np.array(list(itertools.product((1.0, -1.0), repeat=d.shape[1])))  # [2**n, n]
    sums, observed = d @ signs.T, d.sum(axis=1, keepdims=True)
    tolerance = 1e-12 * np.abs(d).sum(axis=1, keepdims=True)
    return (sums >= observed - tolerance).mean(axis=1) < alpha


def sign_flip_power(shift: float, n: int, alpha: float = 0.05, *, n_draws: int = _DRAWS, seed: int = 0) -> float:
    """The share of ``n_draws`` simulated experiments, each of ``n`` differences ``shift + N(0, 1)``, in which the
    exact one-sided sign-flip test gives ``p < alpha``."""
    _check(alpha=alpha)
    z = np.random.default_rng(seed).standard_normal((n_draws, int(n)))
    return float(_sign_flip_rejects(shift + z, alpha).mean())


@functools.lru_cache(maxsize=256)
def detectable_shift(n: int, alpha: float = 0.05, power: float = POWER, *, control: int | None = None) -> float:
    """The smallest mean effect, in units of the per-unit standard deviation, that the test detects with ``power``
    (module docstring): a sign-flip test of ``n`` paired units, or with ``control`` a two-sample test of ``n``
    against ``control`` units. ``inf`` when the test cannot reach ``p < alpha``."""
    _check(alpha=alpha)
    if not 0 < power < 1:
        raise ValueError(f"power must be in (0, 1), got {power!r}")
    z = NormalDist().inv_cdf(1 - alpha) + NormalDist().inv_cdf(power)
    if control is not None:
        if smallest_two_sample_p(n, control) >= alpha:
            return math.inf
        return float(z * math.sqrt(1 / n + 1 / control))
    if smallest_p(n) >= alpha:
        return math.inf
    if n > EXACT_POWER_N:
        return float(z / math.sqrt(n))
    draws = np.random.default_rng(0).standard_normal((_DRAWS, int(n)))
    low, high = 0.0, 1.0
    while _sign_flip_rejects(high + draws, alpha).mean() < power:
        low, high = high, 2 * high
    for _ in range(30):
        middle = (low + high) / 2
        low, high = (middle, high) if _sign_flip_rejects(middle + draws, alpha).mean() < power else (low, middle)
    return float(high)


def detectable_effect(
    n: int,
    spread: float,
    *,
    alpha: float = 0.05,
    power: float = POWER,
    control: int | None = None,
    predicted_sign: int = +1,
    null_edge: float | None = None,
) -> float:
    """The smallest effect on the predicted side that the design detects: ``predicted_sign`` times
    :func:`detectable_shift` times ``spread`` (the per-unit standard deviation; NaN gives NaN), or, when
    ``null_edge`` is given (the null's 95% bound on the predicted side), whichever of the two lies farther out."""
    _check(sign=predicted_sign)
    if n < 2 or not np.isfinite(spread):
        return math.nan
    magnitude = detectable_shift(int(n), float(alpha), float(power), control=control) * float(spread)
    if null_edge is not None and np.isfinite(null_edge):
        magnitude = max(magnitude, predicted_sign * float(null_edge))
    return predicted_sign * magnitude
