"""The t interval beside the bootstrap: Student's t quantiles (numpy only) against a brute-force integral of the
t density, the interval of a mean, and the effects and lines that carry it."""

import math

import numpy as np
import pytest

from attnstruct import stats
from attnstruct.report import prose


def brute_force_quantile(p: float, df: int) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom, from the density summed on a fine grid of
    ``x = tan(u)`` (``u`` over ``(-pi/2, pi/2)``, so that the heavy tails are on the grid too)."""
    u = np.linspace(-math.pi / 2, math.pi / 2, 2_000_001)[1:-1]
    x = np.tan(u)
    log_c = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    weight = np.exp(log_c - (df + 1) / 2 * np.log1p(x**2 / df)) / np.cos(u) ** 2
    cdf = np.cumsum(weight) * (u[1] - u[0])
    return float(np.interp(p, cdf, x))


@pytest.mark.parametrize("df", [1, 2, 3, 4, 5, 7, 10, 30])
@pytest.mark.parametrize("p", [0.9, 0.975, 0.995])
def test_the_t_quantile_matches_a_brute_force_integral_of_the_density(p, df):
    assert stats.t_quantile(p, df) == pytest.approx(brute_force_quantile(p, df), rel=1e-4)


def test_the_t_interval_of_five_values_is_the_mean_plus_or_minus_t_times_the_standard_error():
    values = np.array([0.02, 0.05, 0.08, 0.11, 0.12])
    interval = stats.t_interval(values)
    half = stats.t_quantile(0.975, 4) * values.std(ddof=1) / math.sqrt(5)
    assert (interval.low, interval.high) == pytest.approx((values.mean() - half, values.mean() + half))
    assert interval.n == 5 and interval.level == 0.95


def test_a_paired_effect_carries_its_t_interval_beside_the_bootstrap_and_prints_both():
    treated, baseline = np.array([0.1, 0.12, 0.05, 0.2, 0.09]), np.zeros(5)
    effect = stats.paired_effect(treated, baseline, claim="made up")
    t = stats.t_interval(treated - baseline)
    assert (effect.t_low, effect.t_high) == (t.low, t.high)
    assert (effect.t_low, effect.t_high) != (effect.low, effect.high)
    assert {"t_low", "t_high"} <= set(stats.verdict_table([effect]).columns)
    line = prose.effect_line(effect)
    assert f"[bootstrap {effect.low:+.2f}, {effect.high:+.2f}; t {effect.t_low:+.2f}, {effect.t_high:+.2f}]" in line
