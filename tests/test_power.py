"""The smallest detectable effect: known answers of the exact sign-flip test, the normal approximations, and the
effects and plans that print it."""

import math
from statistics import NormalDist

import numpy as np
import pytest

from attnstruct import stats
from attnstruct.report import prose
from attnstruct.stats import power


def test_with_five_seeds_only_the_all_positive_outcome_rejects_so_power_is_phi_to_the_fifth():
    # p < 0.05 with 5 seeds needs p = 1/32: every difference positive, probability Phi(delta)**5
    for shift in (0.0, 1.0, 2.0):
        assert power.sign_flip_power(shift, 5) == pytest.approx(NormalDist().cdf(shift) ** 5, abs=0.02)
    assert power.detectable_shift(5) == pytest.approx(NormalDist().inv_cdf(0.8**0.2), abs=0.06)


def test_a_zero_effect_is_detected_at_most_at_alpha_and_a_large_one_always():
    for n in (5, 7, 9):
        assert power.sign_flip_power(0.0, n) <= 0.05 + 0.01
        assert power.sign_flip_power(5.0, n) == 1.0


def test_the_simulated_power_matches_brute_force_enumeration_of_the_test():
    rng = np.random.default_rng(3)
    draws = 0.8 + rng.standard_normal((300, 6))
    by_hand = [stats.sign_flip_test(d, exact=True) < 0.05 for d in draws]
    np.testing.assert_array_equal(power._sign_flip_rejects(draws, 0.05), by_hand)


def test_more_units_detect_smaller_effects_and_too_few_detect_none():
    shifts = [power.detectable_shift(n) for n in (5, 6, 8, 10)]
    assert all(a > b for a, b in zip(shifts, shifts[1:]))
    assert power.detectable_shift(4) == math.inf  # 1/16 is not below 0.05
    assert power.detectable_shift(5, alpha=0.05 / 2) == math.inf  # Holm over two claims: 1/32 > 0.025
    assert power.detectable_shift(2, control=2) == math.inf  # 1/6


def test_beyond_the_exact_range_and_for_two_groups_the_normal_approximation():
    z = NormalDist().inv_cdf(0.95) + NormalDist().inv_cdf(0.8)
    assert power.detectable_shift(40) == pytest.approx(z / math.sqrt(40))
    assert power.detectable_shift(9, control=9) == pytest.approx(z * math.sqrt(2 / 9))


def test_the_detectable_effect_scales_with_the_spread_takes_the_predicted_side_and_the_null_edge():
    shift = power.detectable_shift(6)
    assert power.detectable_effect(6, 0.1) == pytest.approx(0.1 * shift)
    assert power.detectable_effect(6, 0.1, predicted_sign=-1) == pytest.approx(-0.1 * shift)
    assert power.detectable_effect(6, 0.1, null_edge=0.5) == 0.5  # the null's range lies farther out
    assert power.detectable_effect(6, 0.1, null_edge=0.0) == pytest.approx(0.1 * shift)
    assert math.isnan(power.detectable_effect(6, math.nan)) and math.isnan(power.detectable_effect(1, 0.1))


def test_a_paired_effect_carries_its_spread_and_detectable_effect_and_prints_it():
    treated, baseline = np.array([0.3, 0.5, 0.2, 0.4, 0.6, 0.35]), np.zeros(6)
    effect = stats.paired_effect(treated, baseline, claim="x")
    assert effect.spread == pytest.approx(np.std(treated, ddof=1))
    assert effect.detectable == pytest.approx(power.detectable_shift(6) * effect.spread)
    assert f"; detectable from {effect.detectable:+.2f};" in prose.effect_line(effect)
    four = stats.paired_effect(treated[:4], baseline[:4], claim="x")
    assert np.isinf(four.detectable) and "; detectable from" not in prose.effect_line(four)


def test_a_two_sample_effect_uses_the_pooled_spread():
    effect = stats.two_sample_effect([1.0, 2.0, 3.0, 4.0], [0.0, 1.0, 2.0], claim="x")
    pooled = math.sqrt((5.0 + 2.0) / 5)  # squared deviations 5 and 2 over n + m - 2 = 5
    assert effect.spread == pytest.approx(pooled) and effect.n_control == 3
    assert effect.detectable == pytest.approx(power.detectable_shift(4, control=3) * pooled)


def test_a_plan_quotes_a_primary_claims_detectable_effect_after_the_correction():
    claims = tuple(stats.Claim(name, "seed", "s", "t", "n") for name in ("a", "b"))
    plan = stats.Plan("nb", claims + (stats.Claim("c", "seed", "s", "t", "n", role="secondary"),))
    values = np.array([0.3, 0.5, 0.2, 0.4, 0.6, 0.35])
    a, c = plan.decide([stats.paired_effect(values, 0 * values, claim=name) for name in ("a", "c")])
    assert a.detectable == pytest.approx(power.detectable_shift(6, 0.025) * a.spread)
    assert c.detectable == pytest.approx(power.detectable_shift(6, 0.05) * c.spread)
    assert a.detectable > c.detectable
