"""Student's t interval of a mean over a few units, printed beside the bootstrap's.

A percentile bootstrap of the mean under-covers at ``n = 5``: it resamples five values, whose spread understates
the population's. The t interval ``mean +- t_{(1 + level) / 2, n - 1} * sd / sqrt(n)`` (sample standard deviation,
ddof 1) is exact for normal values and wider at small ``n``. Its quantile comes from the closed form of Student's t
distribution with integer degrees of freedom (Abramowitz and Stegun 26.7.3-4), inverted by bisection, numpy only.
"""

from __future__ import annotations

import math

import numpy as np

from .._checks import finite_vector
from .resampling import Interval


def _t_cdf(t: float, df: int) -> float:
    """P(T <= t) for Student's t with integer ``df >= 1`` degrees of freedom."""
    theta = math.atan(abs(t) / math.sqrt(df))
    s, c = math.sin(theta), math.cos(theta)
    if df % 2:  # P(|T| < t) = 2/pi (theta + sin(theta) (c + 2/3 c^3 + ... + (2.4..(df-3))/(1.3..(df-2)) c^(df-2)))
        term, total = c, c if df > 1 else 0.0
        for k in range(3, df - 1, 2):
            term *= c * c * (k - 1) / k
            total += term
        inside = 2 / math.pi * (theta + s * total)
    else:  # P(|T| < t) = sin(theta) (1 + 1/2 c^2 + ... + (1.3..(df-3))/(2.4..(df-2)) c^(df-2))
        term = total = 1.0
        for k in range(2, df - 1, 2):
            term *= c * c * (k - 1) / k
            total += term
        inside = s * total
    return 0.5 + math.copysign(inside / 2, t)


def t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile (``0 < p < 1``) of Student's t with integer ``df >= 1`` degrees of freedom, to 1e-12."""
    if not 0 < p < 1:
        raise ValueError(f"p must be in (0, 1), got {p!r}")
    if int(df) != df or df < 1:
        raise ValueError(f"df must be a positive integer, got {df!r}")
    low, high = -1.0, 1.0
    while _t_cdf(low, int(df)) > p:
        low *= 2
    while _t_cdf(high, int(df)) < p:
        high *= 2
    while high - low > 1e-12 * max(1.0, abs(high)):
        middle = (low + high) / 2
        low, high = (middle, high) if _t_cdf(middle, int(df)) < p else (low, middle)
    return (low + high) / 2


def t_interval(values, level: float = 0.95) -> Interval:
    """Student's t interval of the mean of ``values`` ``[n]`` (finite, ``n >= 2``) at ``level``."""
    x = finite_vector(values, "values", min_n=2)
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    half = t_quantile((1 + level) / 2, len(x) - 1) * float(np.std(x, ddof=1)) / math.sqrt(len(x))
    mean = float(x.mean())
    return Interval(mean, mean - half, mean + half, level, len(x))
