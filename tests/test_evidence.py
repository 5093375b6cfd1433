"""Verdicts with uncertainty: the tests against brute force, known answers, the decision rule, input checks."""

import itertools
import math

import numpy as np
import pytest
import xarray as xr

from attnstruct import stats
from attnstruct.analyses.null_ensembles import null_distribution
from attnstruct.report import prose

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
        assert stats.sign_flip_test(d, alternative=alternative) == expected


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
        assert stats.two_sample_permutation_test(t, c, alternative=alternative) == pytest.approx(expected, abs=1e-15)


@pytest.mark.parametrize("statistic", [np.mean, np.median])
def test_exact_bootstrap_equals_an_explicit_loop_over_all_resamples(statistic):
    for n in (2, 3, 4, 5):
        x = np.random.default_rng(n).normal(size=n)
        resampled = [statistic(x[list(idx)]) for idx in itertools.product(range(n), repeat=n)]
        low, high = np.quantile(resampled, [0.05, 0.95])
        got = stats.bootstrap_interval(x, statistic=statistic, level=0.9, seed=n)
        assert (got.low, got.high) == pytest.approx((low, high), abs=1e-12)
        assert got.estimate == pytest.approx(statistic(x)) and got.n == n and got.level == 0.9


def test_exact_bootstrap_does_not_depend_on_the_seed_and_monte_carlo_does():
    five, six = np.random.default_rng(0).normal(size=5), np.random.default_rng(0).normal(size=6)
    assert stats.bootstrap_interval(five, seed=1) == stats.bootstrap_interval(five, seed=2)  # 5**5 <= 10_000
    assert stats.bootstrap_interval(six, seed=1) != stats.bootstrap_interval(six, seed=2)  # 6**6 > 10_000
    assert stats.bootstrap_interval(six, seed=1) == stats.bootstrap_interval(six, seed=1)


def test_monte_carlo_bootstrap_agrees_with_the_exact_one():
    x = np.random.default_rng(3).normal(size=5)
    exact = stats.bootstrap_interval(x)
    sampled = stats.bootstrap_interval(x, exact=False, n_resamples=100_000)
    spread = x.max() - x.min()
    assert abs(sampled.low - exact.low) < 0.02 * spread and abs(sampled.high - exact.high) < 0.02 * spread
    # a statistic without an axis argument takes the one-call-per-resample path, with the same result
    slow = stats.bootstrap_interval(x, statistic=lambda v: float(np.mean(v)))
    assert (slow.low, slow.high) == pytest.approx((exact.low, exact.high), abs=1e-12)


@pytest.mark.parametrize("alternative", ALTERNATIVES)
def test_monte_carlo_sign_flip_agrees_with_exact_just_above_the_threshold(alternative):
    d = np.random.default_rng(7).normal(0.3, 1.0, stats.EXACT_SIGN_FLIP_N + 1)
    exact = stats.sign_flip_test(d, alternative=alternative, exact=True)
    sampled = stats.sign_flip_test(d, alternative=alternative)  # n = 21: Monte Carlo by default
    assert sampled != exact and abs(sampled - exact) < 0.01
    assert stats.sign_flip_test(d[:-1], alternative=alternative) == stats.sign_flip_test(
        d[:-1], alternative=alternative, exact=True
    )


@pytest.mark.parametrize("alternative", ALTERNATIVES)
def test_monte_carlo_two_sample_test_agrees_with_exact(alternative):
    rng = np.random.default_rng(8)
    t, c = rng.normal(0.5, 1, 6), rng.normal(0, 1, 6)
    exact = stats.two_sample_permutation_test(t, c, alternative=alternative)
    sampled = stats.two_sample_permutation_test(t, c, alternative=alternative, exact=False)
    assert abs(sampled - exact) < 0.01


def test_smallest_p_is_attained_by_all_positive_differences():
    assert stats.smallest_p(3) == 0.125 and stats.smallest_p(3, "two-sided") == 0.25
    assert stats.sign_flip_test([0.5, 1.0, 2.0]) == 0.125
    assert stats.sign_flip_test([0.5, 1.0, 2.0], alternative="two-sided") == 0.25
    assert stats.sign_flip_test([0.5, 1.0, 2.0], alternative="less") == 1.0
    assert stats.sign_flip_test(np.zeros(4)) == 1.0


def test_sign_flip_test_is_calibrated_under_zero_effect():
    rng = np.random.default_rng(2025)
    p = np.array([stats.sign_flip_test(rng.normal(size=12)) for _ in range(200)])
    assert 0.01 <= np.mean(p < 0.05) <= 0.12


def test_zero_effect_cannot_be_told():
    zero = stats.paired_effect(np.ones(6), np.ones(6), claim="nothing")
    assert zero.verdict == "cannot tell at this scale" and zero.p_value == 1.0 and "includes 0" in zero.reason
    noise = stats.paired_effect(np.random.default_rng(1).normal(size=6), np.zeros(6), claim="noise")
    assert noise.verdict == "cannot tell at this scale"


def test_a_large_effect_holds():
    d = 1.0 + 0.1 * np.random.default_rng(4).normal(size=6)
    effect = stats.paired_effect(d, np.zeros(6), claim="encoder minus decoder")
    assert effect.verdict == "holds" and effect.p_value == 1 / 64 and effect.low > 0
    assert stats.paired_effect(-d, np.zeros(6), claim="x", predicted_sign=-1).verdict == "holds"


def test_a_large_effect_the_other_way_does_not_hold():
    d = 1.0 + 0.1 * np.random.default_rng(4).normal(size=6)
    effect = stats.paired_effect(np.zeros(6), d, claim="encoder minus decoder")
    assert effect.verdict == "does not hold" and effect.high < 0 and effect.p_value == 1.0


def test_three_seeds_cannot_tell_even_a_large_effect():
    effect = stats.paired_effect([1.0, 1.1, 0.9], [0.0, 0.0, 0.0], claim="x")
    assert effect.verdict == "cannot tell at this scale" and "0.125" in effect.reason and "3 seeds" in effect.reason
    assert stats.paired_effect([0.0] * 3, [1.0, 1.1, 0.9], claim="x").verdict == "cannot tell at this scale"


def test_an_effect_inside_the_null_range_cannot_be_told():
    d = 1.0 + 0.1 * np.random.default_rng(4).normal(size=6)
    wide = np.random.default_rng(5).normal(0, 3, 400)
    effect = stats.paired_effect(d, np.zeros(6), claim="x", null_samples=wide)
    assert effect.verdict == "cannot tell at this scale" and "null" in effect.reason
    narrow = stats.paired_effect(d, np.zeros(6), claim="x", null_samples=wide / 100)
    assert narrow.verdict == "holds" and narrow.null.outside


def test_decide_reasons():
    inside = stats.Interval(0.5, 0.0, 1.0, 0.95, 6)  # touching 0 counts as including it
    assert stats.decide(inside, 0.01) == (
        "cannot tell at this scale",
        "the 95% bootstrap interval [+0.00, +1.00] includes 0",
    )
    clear = stats.Interval(0.5, 0.2, 0.8, 0.95, 6)
    assert stats.decide(clear, 0.2) == ("cannot tell at this scale", "p = 0.200 is not below 0.05")
    assert stats.decide(clear, 0.01, min_n=8)[1] == "with 6 seeds, fewer than the 8 required"
    assert stats.decide(clear, 0.01, predicted_sign=-1, p_opposite=0.3)[0] == "cannot tell at this scale"
    assert stats.decide(clear, 0.01, predicted_sign=-1)[0] == "does not hold"
    assert stats.decide(clear, 0.01, smallest=0.1)[1] == "with 6 seeds the smallest attainable p is 0.1"


def test_compare_with_null():
    null = np.arange(101.0)
    above = stats.compare_with_null(1000.0, null)
    assert above.percentile == 100.0 and above.outside and above.n_null == 101
    middle = stats.compare_with_null(50.0, null)
    assert middle.percentile == pytest.approx(50.0) and not middle.outside and middle.null_median == 50.0
    assert middle.null_low == np.quantile(null, 0.025) and middle.null_high == np.quantile(null, 0.975)
    samples = np.random.default_rng(0).normal(size=50)
    assert stats.compare_with_null(1.3, samples).z == pytest.approx((1.3 - samples.mean()) / samples.std(ddof=1))


def test_null_median_over_layers_is_built_from_the_null_ensemble():
    ds = null_distribution([16], [2], n_draws=12, seed=3).sel(ensemble="factors H=2, layer", d_model=16)
    for score in ("symmetry", "directionality"):
        drawn = len(stats.null_median_over_layers(score, 16, 2, 1, n_draws=12, seed=3)) // 12  # 2: with transposes
        single = stats.null_median_over_layers(score, 16, 2, 1, n_draws=12, seed=3)
        np.testing.assert_array_equal(single[:12], ds[score].values)
        grouped = stats.null_median_over_layers(score, 16, 2, 3, n_draws=4, seed=3)
        np.testing.assert_array_equal(grouped[:4], np.median(ds[score].values.reshape(4, 3), axis=1))
        assert len(grouped) == 4 * drawn


def test_null_median_over_layers_shape_seed_and_spread():
    a = stats.null_median_over_layers("symmetry", 16, 4, 5, n_draws=100, seed=0)
    assert a.shape == (100,) and np.array_equal(a, stats.null_median_over_layers("symmetry", 16, 4, 5, n_draws=100))
    assert not np.array_equal(a, stats.null_median_over_layers("symmetry", 16, 4, 5, n_draws=100, seed=1))
    single = stats.null_median_over_layers("symmetry", 16, 4, 1, n_draws=100, seed=0)
    assert a.std() < 0.75 * single.std()


def test_the_null_of_the_mean_matches_every_equally_likely_draw():
    """Brute force: with pools of 3 and 2 values and n = 2, each of the (3 * 2)**2 = 36 draws of ((A_1, B_1),
    (A_2, B_2)) is equally likely; the sampled means must follow the exact distribution of their means."""
    a, b, n = np.array([0.0, 1.0, 3.0]), np.array([0.0, 2.0]), 2
    exact = {}
    for pairs in itertools.product(itertools.product(a, b), repeat=n):
        mean = round(float(np.mean([x - y for x, y in pairs])), 9)
        exact[mean] = exact.get(mean, 0) + 1 / 36
    sampled = stats.null_of_the_mean(a, n, minus=b, n_samples=200_000, seed=3)
    values, counts = np.unique(np.round(sampled, 9), return_counts=True)
    assert set(values) == set(exact)
    for value, count in zip(values, counts):
        p = exact[value]
        assert abs(count / len(sampled) - p) < 5 * np.sqrt(p * (1 - p) / len(sampled)), value


def test_the_null_of_the_mean_by_unit_matches_every_equally_likely_draw():
    """Brute force: two units with their own pools (3 values minus 2, and 2 minus 1): each of the 3 * 2 * 2 * 1 = 12
    draws is equally likely, and the sampled means follow the exact distribution; one shared pool gives the law of
    :func:`stats.null_of_the_mean`."""
    pools, minus = [np.array([0.0, 1.0, 3.0]), np.array([10.0, 20.0])], [np.array([0.0, 2.0]), np.array([5.0])]
    exact = {}
    for a0, b0, a1, b1 in itertools.product(pools[0], minus[0], pools[1], minus[1]):
        mean = round(((a0 - b0) + (a1 - b1)) / 2, 9)
        exact[mean] = exact.get(mean, 0) + 1 / 12
    sampled = stats.null_of_the_mean_by_unit(pools, minus, n_samples=200_000, seed=5)
    values, counts = np.unique(np.round(sampled, 9), return_counts=True)
    assert set(values) == set(exact)
    for value, count in zip(values, counts):
        p = exact[value]
        assert abs(count / len(sampled) - p) < 5 * np.sqrt(p * (1 - p) / len(sampled)), value
    shared = stats.null_of_the_mean_by_unit([pools[0]] * 3, n_samples=100_000, seed=1)
    one_pool = stats.null_of_the_mean(pools[0], 3, n_samples=100_000, seed=2)
    assert abs(shared.mean() - one_pool.mean()) < 0.02 and abs(shared.std() - one_pool.std()) < 0.02
    with pytest.raises(ValueError, match="one sample per unit"):
        stats.null_of_the_mean_by_unit(pools, minus[:1])


def test_the_null_of_the_mean_of_one_pool_and_its_scale():
    pool = np.arange(100.0)
    one = stats.null_of_the_mean(pool, 1, n_samples=20_000, seed=1)
    four = stats.null_of_the_mean(pool, 4, n_samples=20_000, seed=1)
    assert set(one) <= set(pool)  # n = 1: draws of the pool itself
    assert four.std() == pytest.approx(pool.std() / 2, rel=0.05)  # sqrt(n) narrower than one unit's
    difference = stats.null_of_the_mean(pool, 4, minus=pool, n_samples=20_000, seed=1)
    assert difference.std() == pytest.approx(np.sqrt(2) * pool.std() / 2, rel=0.05)
    np.testing.assert_array_equal(four, stats.null_of_the_mean(pool, 4, n_samples=20_000, seed=1))


@pytest.mark.parametrize("n, m, p", [(2, 2, 1 / 6), (3, 3, 1 / 20), (1, 4, 1 / 5), (4, 4, 1 / 70)])
def test_the_smallest_two_sample_p_is_one_split_in_all(n, m, p):
    splits = sum(1 for _ in itertools.combinations(range(n + m), n))
    assert stats.smallest_two_sample_p(n, m) == pytest.approx(p) == pytest.approx(1 / splits)
    assert stats.smallest_two_sample_p(n, m, "two-sided") == pytest.approx(min(1.0, 2 * p))
    rng = np.random.default_rng(n + m)
    treated, control = 1.0 + rng.random(n), -1.0 - rng.random(m)  # every treated value above every control value
    assert stats.two_sample_permutation_test(treated, control) == pytest.approx(1 / splits)


@pytest.mark.parametrize(
    "alpha, control, balanced",
    [
        (0.05, None, False),
        (0.2, None, False),
        (0.01, None, False),
        (0.05, 2, False),
        (0.05, 5, False),
        (0.05, None, True),
        (0.01, None, True),
    ],
)
def test_fewest_units_is_the_first_design_whose_smallest_p_is_below_alpha(alpha, control, balanced):
    """Brute force: count the sign patterns or the splits of each design until one is below alpha."""
    n = 1
    while True:
        if balanced:
            outcomes = math.comb(2 * n, n)
        else:
            outcomes = 2**n if control is None else math.comb(n + control, n)
        if 1 / outcomes < alpha:
            break
        n += 1
    assert stats.fewest_units(alpha, control=control, balanced=balanced) == n


def test_the_reach_of_a_design_is_computed_from_its_numbers():
    three = stats.design_reach(3)
    assert (three.design, three.test, three.smallest, three.alpha) == ("3 seeds", "sign-flip", "0.125", "0.05")
    assert (three.reachable, three.verdict, three.needed) == (False, stats.CANNOT_TELL, "5 seeds")
    assert stats.design_reach(5).reachable and stats.design_reach(5).smallest == "0.0312"
    pairs = stats.design_reach(3, control=5, control_unit="placebo pair")
    assert (pairs.test, pairs.smallest, pairs.reachable) == ("permutation", "0.0179", True)
    assert pairs.design == f"{prose.count(3, 'seed')} against {prose.count(5, 'placebo pair')}"
    assert not stats.design_reach(2, control=2).reachable
    stacks = stats.design_reach(2, control=2, balanced=True, unit="encoder stack", control_unit="decoder stack")
    assert (stacks.smallest, stacks.needed) == ("0.167", "4 of each")


def test_every_effect_records_the_smallest_p_its_test_could_reach():
    assert stats.paired_effect([1.0, 2.0, 3.0], [0.0, 0.0, 0.0], claim="x").smallest == 1 / 8
    assert stats.two_sample_effect([1.0, 2.0], [0.0, 0.5], claim="x").smallest == pytest.approx(1 / 6)
    assert stats.paired_effect([1.0], [0.0], claim="x").smallest == 1.0


def test_runs_that_did_not_learn_get_no_verdict():
    rng = np.random.default_rng(2)
    treated, baseline = 1.0 + 0.01 * rng.normal(size=6), 0.01 * rng.normal(size=6)
    assert stats.paired_effect(treated, baseline, claim="gap").verdict == "holds"
    gated = stats.paired_effect(treated, baseline, claim="gap", learned=False)
    assert (gated.verdict, gated.reason, gated.learned) == (
        "cannot tell at this scale",
        "the runs did not learn",
        False,
    )
    assert f"{stats.CANNOT_TELL}: {stats.NOT_LEARNED}" in prose.effect_line(gated)
    assert stats.paired_effect([1.0], [0.0], claim="one", learned=False).reason == "the runs did not learn"
    assert stats.two_sample_effect(treated, baseline, claim="two", learned=False).reason == "the runs did not learn"
    interval = stats.Interval(1.0, 0.9, 1.1, 0.95, 6)
    assert stats.decide(interval, 0.001, learned=False) == ("cannot tell at this scale", "the runs did not learn")


def test_two_sample_effect_clear_effect_holds_and_no_effect_does_not():
    rng = np.random.default_rng(6)
    treated, placebo = 0.5 + 0.02 * rng.normal(size=5), 0.02 * rng.normal(size=5)
    effect = stats.two_sample_effect(treated, placebo, claim="symmetric init")
    assert effect.verdict == "holds" and effect.test == "permutation" and effect.null is None
    assert effect.p_value == pytest.approx(1 / 252)
    same = stats.two_sample_effect(placebo, placebo, claim="placebo")
    assert same.verdict == "cannot tell at this scale" and same.estimate == 0.0
    lower = stats.two_sample_effect(placebo, treated, claim="slower", predicted_sign=-1)
    assert lower.verdict == "holds" and lower.alternative == "less"


def test_overall_reads_several_effects():
    effect = stats.paired_effect([1.0, 1.1, 0.9, 1.2, 1.0, 1.05], [0.0] * 6, claim="a")
    other = stats.paired_effect([0.0, 0.1, -0.1, 0.05, -0.05, 0.0], [0.0] * 6, claim="b")
    opposite = stats.paired_effect([-1.0, -1.1, -0.9, -1.2, -1.0, -1.05], [0.0] * 6, claim="c")
    assert stats.overall([effect, effect]) == "holds"
    assert stats.overall([effect, other]) == "cannot tell at this scale"
    assert stats.overall([effect, other, opposite]) == "does not hold"
    assert stats.overall([]) == "cannot tell at this scale"


def test_ordering():
    rng = np.random.default_rng(9)
    values = {name: level + 0.05 * rng.normal(size=6) for name, level in (("mlm", 0.6), ("clf", 0.3), ("ar", 0.0))}
    overall, effects = stats.ordering(values, ["mlm", "clf", "ar"])
    assert overall == "holds" and [e.claim for e in effects] == ["mlm minus clf", "clf minus ar"]
    overall, effects = stats.ordering(values, ["mlm", "ar", "clf"], claim_format="{a} over {b} ({score})")
    assert overall == "does not hold" and [e.verdict for e in effects] == ["holds", "does not hold"]
    assert effects[1].claim == "ar over clf (symmetry)"


def test_per_unit_and_layer_aligns_on_labels():
    coords = {"seed": [0, 1, 2], "layer": [0, 1]}
    treated = xr.DataArray(np.arange(6.0).reshape(3, 2), coords=coords, dims=("seed", "layer"))
    baseline = (treated * 0 + 1).sel(seed=[2, 0, 1]).transpose("layer", "seed")
    np.testing.assert_array_equal(stats.per_unit_and_layer(treated, baseline).values, treated.values - 1)
    with pytest.raises(ValueError, match="do not share"):
        stats.per_unit_and_layer(treated, baseline.sel(seed=[0, 1]))
    with pytest.raises(ValueError, match="do not share"):
        stats.per_unit_and_layer(treated, baseline.rename(seed="run"))


def test_effect_line_dict_and_table():
    d = 1.0 + 0.1 * np.random.default_rng(4).normal(size=6)
    plain = stats.paired_effect(d, np.zeros(6), claim="encoder minus decoder")
    assert prose.effect_line(plain) == (
        f"encoder minus decoder: {plain.estimate:+.2f} (95% intervals [bootstrap {plain.low:+.2f}, {plain.high:+.2f}; "
        f"t {plain.t_low:+.2f}, {plain.t_high:+.2f}], n = 6 seeds, sign-flip p = 0.016; detectable from "
        f"{plain.detectable:+.2f}; holds: {plain.reason})"
    )
    with_null = stats.paired_effect(d, np.zeros(6), claim="e", null_samples=np.linspace(-0.1, 0.1, 41))
    assert "[-0.10, +0.10]" in prose.effect_line(with_null) and "[-0.10, +0.10]" not in prose.effect_line(plain)
    row = with_null.as_dict()
    assert row["null_high"] == pytest.approx(0.095) and row["n_null"] == 41 and row["verdict"] == "holds"
    assert all(isinstance(v, (str, int, float)) for v in row.values())
    table = stats.verdict_table([plain, with_null])
    assert list(table.index) == [plain.claim, with_null.claim] and np.isnan(
        table.loc["encoder minus decoder", "null_z"]
    )


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: stats.bootstrap_interval([1.0, np.nan, 2.0]), "values"),
        (lambda: stats.bootstrap_interval([1.0]), "values"),
        (lambda: stats.bootstrap_interval([1.0, 2.0], level=1.5), "level"),
        (lambda: stats.sign_flip_test([1.0, 2.0], alternative="bigger"), "alternative"),
        (lambda: stats.sign_flip_test([1.0, 2.0], n_resamples=0), "n_resamples"),
        (lambda: stats.sign_flip_test(np.ones(30), exact=True), "exact"),
        (lambda: stats.two_sample_permutation_test([1.0], [np.inf]), "control"),
        (lambda: stats.smallest_p(0), "n"),
        (lambda: stats.compare_with_null(np.nan, [1.0, 2.0]), "value"),
        (lambda: stats.compare_with_null(1.0, [1.0]), "null_samples"),
        (lambda: stats.null_median_over_layers("sym", 16, 2, 1), "score"),
        (lambda: stats.null_median_over_layers("symmetry", 16, 3, 1), "n_heads"),
        (lambda: stats.null_median_over_layers("symmetry", 16, 2, 0), "n_layers"),
        (lambda: stats.null_of_the_mean([1.0, 2.0], 0), "n must"),
        (lambda: stats.null_of_the_mean([1.0, np.nan], 2), "pool"),
        (lambda: stats.paired_effect([1.0, 2.0], [1.0, 2.0, 3.0], claim="x"), "same length"),
        (lambda: stats.paired_effect([1.0, 2.0], [1.0, 2.0], claim="x", predicted_sign=0), "predicted_sign"),
        (lambda: stats.decide(stats.Interval(0.0, -1.0, 1.0, 0.95, 5), 0.5, alpha=0), "alpha"),
        (lambda: stats.decide(stats.Interval(0.0, -1.0, 1.0, 0.95, 5), np.nan), "p_value"),
        (lambda: stats.two_sample_effect([0.1, np.inf], [0.0, 0.0], claim="x"), "treated"),
        (lambda: stats.ordering({"a": [1.0, 2.0]}, ["a", "b"]), "predicted"),
        (lambda: stats.ordering({"a": [1.0, 2.0]}, ["a", "a"]), "predicted"),
        (lambda: stats.verdict_table([]), "effects"),
    ],
)
def test_bad_input_is_refused_with_the_parameter_named(call, name):
    with pytest.raises(ValueError, match=name) as error:
        call()
    assert "\n" not in str(error.value)


def test_one_unit_gives_its_value_and_cannot_tell():
    effect = stats.paired_effect([0.7], [0.2], claim="gap")
    assert effect.n == 1 and effect.estimate == pytest.approx(0.5) and np.isnan(effect.low)
    assert effect.verdict == "cannot tell at this scale" and "(n = 1 seed;" in prose.effect_line(effect)
    assert stats.two_sample_effect([0.5], [0.0], claim="s").verdict == "cannot tell at this scale"
