"""Verdicts with uncertainty: the tests against brute force, known answers, the decision rule, input checks."""

import itertools

import numpy as np
import pytest
import xarray as xr

from attnstruct import evidence as ev
from attnstruct.null import null_distribution

ALTERNATIVES = ("greater", "less", "two-sided")


def _extreme(null, observed, alternative, tol=1e-9):
    null = np.asarray(null)
    if alternative == "greater":
        return np.count_nonzero(null >= observed - tol)
    if alternative == "less":
        return np.count_nonzero(null <= observed + tol)
    return np.count_nonzero(np.abs(null) >= abs(observed) - tol)


@pytest.mark.parametrize("alternative", ALTERNATIVES)
def test_sign_flip_test_equals_an_explicit_loop_over_sign_patterns(alternative):
    for n in range(3, 9):
        d = np.random.default_rng(n).normal(0.3, 1.0, n)
        null = [np.mean(np.array(signs) * d) for signs in itertools.product((-1, 1), repeat=n)]
        expected = _extreme(null, d.mean(), alternative) / 2**n
        assert ev.sign_flip_test(d, alternative=alternative) == expected


@pytest.mark.parametrize("alternative", ALTERNATIVES)
def test_two_sample_test_equals_an_explicit_loop_over_splits(alternative):
    for n, m in [(2, 3), (3, 3), (4, 2), (3, 5)]:
        rng = np.random.default_rng(10 * n + m)
        t, c = rng.normal(0.5, 1, n), rng.normal(0, 1, m)
        pooled = np.concatenate([t, c])
        null = []
        for chosen in itertools.combinations(range(n + m), n):
            rest = [i for i in range(n + m) if i not in chosen]
            null.append(pooled[list(chosen)].mean() - pooled[rest].mean())
        expected = _extreme(null, t.mean() - c.mean(), alternative) / len(null)
        assert ev.two_sample_permutation_test(t, c, alternative=alternative) == pytest.approx(expected, abs=1e-15)


@pytest.mark.parametrize("statistic", [np.mean, np.median])
def test_exact_bootstrap_equals_an_explicit_loop_over_all_resamples(statistic):
    for n in (2, 3, 4, 5):
        x = np.random.default_rng(n).normal(size=n)
        stats = [statistic(x[list(idx)]) for idx in itertools.product(range(n), repeat=n)]
        low, high = np.quantile(stats, [0.05, 0.95])
        got = ev.bootstrap_interval(x, statistic=statistic, level=0.9, seed=n)
        assert (got.low, got.high) == pytest.approx((low, high), abs=1e-12)
        assert got.estimate == pytest.approx(statistic(x)) and got.n == n and got.level == 0.9


def test_exact_bootstrap_does_not_depend_on_the_seed_and_monte_carlo_does():
    five, six = np.random.default_rng(0).normal(size=5), np.random.default_rng(0).normal(size=6)
    assert ev.bootstrap_interval(five, seed=1) == ev.bootstrap_interval(five, seed=2)  # 5**5 <= 10_000
    assert ev.bootstrap_interval(six, seed=1) != ev.bootstrap_interval(six, seed=2)  # 6**6 > 10_000
    assert ev.bootstrap_interval(six, seed=1) == ev.bootstrap_interval(six, seed=1)


def test_monte_carlo_bootstrap_agrees_with_the_exact_one():
    x = np.random.default_rng(3).normal(size=5)
    exact = ev.bootstrap_interval(x)
    sampled = ev.bootstrap_interval(x, exact=False, n_resamples=100_000)
    spread = x.max() - x.min()
    assert abs(sampled.low - exact.low) < 0.02 * spread and abs(sampled.high - exact.high) < 0.02 * spread
    # a statistic without an axis argument takes the one-call-per-resample path, with the same result
    slow = ev.bootstrap_interval(x, statistic=lambda v: float(np.mean(v)))
    assert (slow.low, slow.high) == pytest.approx((exact.low, exact.high), abs=1e-12)


@pytest.mark.parametrize("alternative", ALTERNATIVES)
def test_monte_carlo_sign_flip_agrees_with_exact_just_above_the_threshold(alternative):
    d = np.random.default_rng(7).normal(0.3, 1.0, ev.EXACT_SIGN_FLIP_N + 1)
    exact = ev.sign_flip_test(d, alternative=alternative, exact=True)
    sampled = ev.sign_flip_test(d, alternative=alternative)  # n = 21: Monte Carlo by default
    assert sampled != exact and abs(sampled - exact) < 0.01
    assert ev.sign_flip_test(d[:-1], alternative=alternative) == ev.sign_flip_test(
        d[:-1], alternative=alternative, exact=True
    )


@pytest.mark.parametrize("alternative", ALTERNATIVES)
def test_monte_carlo_two_sample_test_agrees_with_exact(alternative):
    rng = np.random.default_rng(8)
    t, c = rng.normal(0.5, 1, 6), rng.normal(0, 1, 6)
    exact = ev.two_sample_permutation_test(t, c, alternative=alternative)
    sampled = ev.two_sample_permutation_test(t, c, alternative=alternative, exact=False)
    assert abs(sampled - exact) < 0.01


def test_smallest_p_is_attained_by_all_positive_differences():
    assert ev.smallest_p(3) == 0.125 and ev.smallest_p(3, "two-sided") == 0.25
    assert ev.sign_flip_test([0.5, 1.0, 2.0]) == 0.125
    assert ev.sign_flip_test([0.5, 1.0, 2.0], alternative="two-sided") == 0.25
    assert ev.sign_flip_test([0.5, 1.0, 2.0], alternative="less") == 1.0
    assert ev.sign_flip_test(np.zeros(4)) == 1.0


def test_sign_flip_test_is_calibrated_under_zero_effect():
    rng = np.random.default_rng(2025)
    p = np.array([ev.sign_flip_test(rng.normal(size=12)) for _ in range(200)])
    assert 0.01 <= np.mean(p < 0.05) <= 0.12


def test_zero_effect_cannot_be_told():
    zero = ev.paired_effect(np.ones(6), np.ones(6), claim="nothing")
    assert zero.verdict == "cannot tell at this scale" and zero.p_value == 1.0 and "includes 0" in zero.reason
    noise = ev.paired_effect(np.random.default_rng(1).normal(size=6), np.zeros(6), claim="noise")
    assert noise.verdict == "cannot tell at this scale"


def test_a_large_effect_holds():
    d = 1.0 + 0.1 * np.random.default_rng(4).normal(size=6)
    effect = ev.paired_effect(d, np.zeros(6), claim="encoder minus decoder")
    assert effect.verdict == "holds" and effect.p_value == 1 / 64 and effect.low > 0
    assert ev.paired_effect(-d, np.zeros(6), claim="x", predicted_sign=-1).verdict == "holds"


def test_a_large_effect_the_other_way_does_not_hold():
    d = 1.0 + 0.1 * np.random.default_rng(4).normal(size=6)
    effect = ev.paired_effect(np.zeros(6), d, claim="encoder minus decoder")
    assert effect.verdict == "does not hold" and effect.high < 0 and effect.p_value == 1.0


def test_three_seeds_cannot_tell_even_a_large_effect():
    effect = ev.paired_effect([1.0, 1.1, 0.9], [0.0, 0.0, 0.0], claim="x")
    assert effect.verdict == "cannot tell at this scale" and "0.125" in effect.reason and "3 seeds" in effect.reason
    assert ev.paired_effect([0.0] * 3, [1.0, 1.1, 0.9], claim="x").verdict == "cannot tell at this scale"


def test_an_effect_inside_the_null_range_cannot_be_told():
    d = 1.0 + 0.1 * np.random.default_rng(4).normal(size=6)
    wide = np.random.default_rng(5).normal(0, 3, 400)
    effect = ev.paired_effect(d, np.zeros(6), claim="x", null_samples=wide)
    assert effect.verdict == "cannot tell at this scale" and "null" in effect.reason
    narrow = ev.paired_effect(d, np.zeros(6), claim="x", null_samples=wide / 100)
    assert narrow.verdict == "holds" and narrow.null.outside


def test_decide_reasons():
    inside = ev.Interval(0.5, 0.0, 1.0, 0.95, 6)  # touching 0 counts as including it
    assert ev.decide(inside, 0.01) == ("cannot tell at this scale", "the 95% interval [+0.00, +1.00] includes 0")
    clear = ev.Interval(0.5, 0.2, 0.8, 0.95, 6)
    assert ev.decide(clear, 0.2) == ("cannot tell at this scale", "p = 0.200 is not below 0.05")
    assert ev.decide(clear, 0.01, min_n=8)[1] == "with 6 seeds, fewer than the 8 required"
    assert ev.decide(clear, 0.01, predicted_sign=-1, p_opposite=0.3)[0] == "cannot tell at this scale"
    assert ev.decide(clear, 0.01, predicted_sign=-1)[0] == "does not hold"
    assert ev.decide(clear, 0.01, smallest=0.1)[1] == "with 6 seeds the smallest attainable p is 0.1"


def test_compare_with_null():
    null = np.arange(101.0)
    above = ev.compare_with_null(1000.0, null)
    assert above.percentile == 100.0 and above.outside and above.n_null == 101
    middle = ev.compare_with_null(50.0, null)
    assert middle.percentile == pytest.approx(50.0) and not middle.outside and middle.null_median == 50.0
    assert middle.null_low == np.quantile(null, 0.025) and middle.null_high == np.quantile(null, 0.975)
    samples = np.random.default_rng(0).normal(size=50)
    assert ev.compare_with_null(1.3, samples).z == pytest.approx((1.3 - samples.mean()) / samples.std(ddof=1))


def test_null_median_over_layers_is_built_from_the_null_ensemble():
    ds = null_distribution([16], [2], n_draws=12, seed=3).sel(ensemble="factors H=2, layer", d_model=16)
    for score in ("symmetry", "directionality"):
        single = ev.null_median_over_layers(score, 16, 2, 1, n_draws=12, seed=3)
        np.testing.assert_array_equal(single, ds[score].values)
        grouped = ev.null_median_over_layers(score, 16, 2, 3, n_draws=4, seed=3)
        np.testing.assert_array_equal(grouped, np.median(ds[score].values.reshape(4, 3), axis=1))


def test_null_median_over_layers_shape_seed_and_spread():
    a = ev.null_median_over_layers("symmetry", 16, 4, 5, n_draws=100, seed=0)
    assert a.shape == (100,) and np.array_equal(a, ev.null_median_over_layers("symmetry", 16, 4, 5, n_draws=100))
    assert not np.array_equal(a, ev.null_median_over_layers("symmetry", 16, 4, 5, n_draws=100, seed=1))
    single = ev.null_median_over_layers("symmetry", 16, 4, 1, n_draws=100, seed=0)
    assert a.std() < 0.75 * single.std()


def test_null_difference_pairs_a_permutation():
    a, b = np.arange(10.0), np.arange(10.0) * 10
    diff = ev.null_difference(a, b, seed=1)
    np.testing.assert_array_equal(np.sort(a - diff), b)
    assert not np.array_equal(diff, a - b) and np.array_equal(diff, ev.null_difference(a, b, seed=1))


def test_speedup_counts_never_reached_as_zero():
    placebo = [0.02, -0.01, 0.0, 0.01, -0.02]
    with_nan = ev.speedup_against_placebo([0.5, np.nan, 0.4, 0.6, 0.5], placebo, claim="x")
    with_zero = ev.speedup_against_placebo([0.5, 0.0, 0.4, 0.6, 0.5], placebo, claim="x")
    assert with_nan == with_zero and with_nan.estimate == pytest.approx(0.4)


def test_speedup_clear_effect_holds_and_no_effect_does_not():
    rng = np.random.default_rng(6)
    treated, placebo = 0.5 + 0.02 * rng.normal(size=5), 0.02 * rng.normal(size=5)
    effect = ev.speedup_against_placebo(treated, placebo, claim="symmetric init")
    assert effect.verdict == "holds" and effect.test == "permutation" and effect.null is None
    assert effect.p_value == pytest.approx(1 / 252)
    same = ev.speedup_against_placebo(placebo, placebo, claim="placebo")
    assert same.verdict == "cannot tell at this scale" and same.estimate == 0.0


def test_ordering():
    rng = np.random.default_rng(9)
    values = {name: level + 0.05 * rng.normal(size=6) for name, level in (("mlm", 0.6), ("clf", 0.3), ("ar", 0.0))}
    overall, effects = ev.ordering(values, ["mlm", "clf", "ar"])
    assert overall == "holds" and [e.claim for e in effects] == ["mlm minus clf", "clf minus ar"]
    overall, effects = ev.ordering(values, ["mlm", "ar", "clf"], claim_format="{a} over {b} ({score})")
    assert overall == "does not hold" and [e.verdict for e in effects] == ["holds", "does not hold"]
    assert effects[1].claim == "ar over clf (symmetry)"


def test_per_unit_and_layer_aligns_on_labels():
    coords = {"seed": [0, 1, 2], "layer": [0, 1]}
    treated = xr.DataArray(np.arange(6.0).reshape(3, 2), coords=coords, dims=("seed", "layer"))
    baseline = (treated * 0 + 1).sel(seed=[2, 0, 1]).transpose("layer", "seed")
    np.testing.assert_array_equal(ev.per_unit_and_layer(treated, baseline).values, treated.values - 1)
    with pytest.raises(ValueError, match="do not share"):
        ev.per_unit_and_layer(treated, baseline.sel(seed=[0, 1]))
    with pytest.raises(ValueError, match="do not share"):
        ev.per_unit_and_layer(treated, baseline.rename(seed="run"))


def test_sentence_dict_and_table():
    d = 1.0 + 0.1 * np.random.default_rng(4).normal(size=6)
    plain = ev.paired_effect(d, np.zeros(6), claim="encoder minus decoder")
    assert plain.sentence().startswith(f"encoder minus decoder: {plain.estimate:+.2f} (95% CI [")
    assert "n = 6 seeds, sign-flip p = 0.016; holds: " in plain.sentence() and "null" not in plain.sentence()
    with_null = ev.paired_effect(d, np.zeros(6), claim="e", null_samples=np.linspace(-0.1, 0.1, 41))
    assert "; null 95% range [-0.10, +0.10]; holds" in with_null.sentence()
    row = with_null.as_dict()
    assert row["null_high"] == pytest.approx(0.095) and row["n_null"] == 41 and row["verdict"] == "holds"
    assert all(isinstance(v, (str, int, float)) for v in row.values())
    table = ev.verdict_table([plain, with_null])
    assert list(table.index) == ["encoder minus decoder", "e"] and np.isnan(
        table.loc["encoder minus decoder", "null_z"]
    )


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: ev.bootstrap_interval([1.0, np.nan, 2.0]), "values"),
        (lambda: ev.bootstrap_interval([1.0]), "values"),
        (lambda: ev.bootstrap_interval([1.0, 2.0], level=1.5), "level"),
        (lambda: ev.sign_flip_test([1.0, 2.0], alternative="bigger"), "alternative"),
        (lambda: ev.sign_flip_test([1.0, 2.0], n_resamples=0), "n_resamples"),
        (lambda: ev.sign_flip_test(np.ones(30), exact=True), "exact"),
        (lambda: ev.two_sample_permutation_test([1.0], [np.inf]), "control"),
        (lambda: ev.smallest_p(0), "n"),
        (lambda: ev.compare_with_null(np.nan, [1.0, 2.0]), "value"),
        (lambda: ev.compare_with_null(1.0, [1.0]), "null_samples"),
        (lambda: ev.null_median_over_layers("sym", 16, 2, 1), "score"),
        (lambda: ev.null_median_over_layers("symmetry", 16, 3, 1), "n_heads"),
        (lambda: ev.null_median_over_layers("symmetry", 16, 2, 0), "n_layers"),
        (lambda: ev.null_difference([1.0, 2.0], [1.0, 2.0, 3.0]), "same length"),
        (lambda: ev.paired_effect([1.0, 2.0], [1.0, 2.0, 3.0], claim="x"), "same length"),
        (lambda: ev.paired_effect([1.0, 2.0], [1.0, 2.0], claim="x", predicted_sign=0), "predicted_sign"),
        (lambda: ev.decide(ev.Interval(0.0, -1.0, 1.0, 0.95, 5), 0.5, alpha=0), "alpha"),
        (lambda: ev.decide(ev.Interval(0.0, -1.0, 1.0, 0.95, 5), np.nan), "p_value"),
        (lambda: ev.speedup_against_placebo([0.1, np.inf], [0.0, 0.0], claim="x"), "treated"),
        (lambda: ev.ordering({"a": [1.0, 2.0]}, ["a", "b"]), "predicted"),
        (lambda: ev.ordering({"a": [1.0, 2.0]}, ["a", "a"]), "predicted"),
        (lambda: ev.verdict_table([]), "effects"),
    ],
)
def test_bad_input_is_refused_with_the_parameter_named(call, name):
    with pytest.raises(ValueError, match=name) as error:
        call()
    assert "\n" not in str(error.value)


def test_one_unit_gives_its_value_and_cannot_tell():
    effect = ev.paired_effect([0.7], [0.2], claim="gap")
    assert effect.n == 1 and effect.estimate == pytest.approx(0.5) and np.isnan(effect.low)
    assert effect.verdict == "cannot tell at this scale" and "1 seed" in effect.sentence()
    assert ev.speedup_against_placebo([0.5], [np.nan], claim="s").verdict == "cannot tell at this scale"
