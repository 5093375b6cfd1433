"""Pre-registered plans: Holm's correction against its sequential definition, the smallest p after the correction,
and the verdicts a plan gives on known answers (no effect, a large one, one the other way, too few seeds)."""

import itertools

import numpy as np
import pytest

from attnstruct import stats
from attnstruct.report import prose


def _holm_rejects(p, alpha):
    """Holm's procedure as written: walk the sorted p-values, reject while p_(j) <= alpha / (m - j + 1)."""
    order, m, rejected = np.argsort(p, kind="stable"), len(p), np.zeros(len(p), bool)
    for j, i in enumerate(order):
        if p[i] > alpha / (m - j):
            break
        rejected[i] = True
    return rejected


def test_holm_adjusted_p_rejects_exactly_what_the_sequential_procedure_rejects():
    rng = np.random.default_rng(0)
    for m in (1, 2, 3, 5, 8):
        for _ in range(40):
            p = rng.choice([rng.uniform(0, 0.1), rng.uniform(0, 1)], size=m)
            adjusted = stats.holm(p)
            assert np.all(adjusted >= p - 1e-15) and np.all(adjusted <= 1)
            for alpha in (0.01, 0.025, 0.05, 0.1, 0.2):
                assert np.array_equal(adjusted <= alpha, _holm_rejects(p, alpha)), (p, alpha)


def test_holm_on_a_worked_example():
    assert stats.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert stats.holm([0.5]) == pytest.approx([0.5])
    assert stats.holm([0.6, 0.6, 0.6]) == pytest.approx([1.0, 1.0, 1.0])
    assert stats.holm([]).shape == (0,)
    with pytest.raises(ValueError, match="p_values"):
        stats.holm([0.1, 1.5])


def _plan(primary=3, secondary=0):
    claims = [
        stats.Claim(f"claim {i}", "seed", "final median symmetry", "sign-flip", "labels exchangeable")
        for i in range(primary)
    ]
    claims += [
        stats.Claim(f"extra {i}", "seed", "time average", "sign-flip", "labels exchangeable", role="secondary")
        for i in range(secondary)
    ]
    return stats.Plan("05_training_dynamics", tuple(claims))


def _effect(name, n, shift, sign=+1):
    rng = np.random.default_rng(n)
    treated, baseline = rng.normal(shift, 0.1, n), rng.normal(0.0, 0.1, n)
    return stats.paired_effect(treated, baseline, claim=name, predicted_sign=sign)


def test_five_seeds_cannot_reach_three_primary_claims_and_seven_can():
    table = _plan(3).table({"claim 0": stats.smallest_p(5), "claim 1": stats.smallest_p(7)})
    assert table.loc["claim 0", "after correction"] == pytest.approx(3 / 32) and not table.loc["claim 0", "reachable"]
    assert table.loc["claim 1", "after correction"] == pytest.approx(3 / 128) and table.loc["claim 1", "reachable"]
    assert np.isnan(table.loc["claim 2", "smallest p"]) and table.loc["claim 2", "correction"] == "Holm over 3"
    assert list(table.columns[:5]) == ["role", "unit", "statistic", "test", "null"]


def test_a_large_effect_holds_alone_but_not_among_three_claims_at_five_seeds():
    large = _effect("claim 0", 5, 2.0)
    assert large.verdict == stats.HOLDS
    (alone,) = _plan(1).decide([large])
    assert alone.verdict == stats.HOLDS and alone.p_adjusted == pytest.approx(1 / 32)
    (among,) = _plan(3).decide([large])
    assert among.verdict == stats.CANNOT_TELL and among.family == "primary, Holm over 3 claims"
    assert "0.0938" in among.reason and prose.effect_line(among).endswith(f"; {among.family})")
    assert among.p_value == pytest.approx(1 / 32) and among.p_adjusted == pytest.approx(3 / 32)


def test_at_seven_seeds_a_large_effect_holds_no_effect_cannot_tell_and_the_flip_does_not_hold():
    effects = [_effect("claim 0", 7, 2.0), _effect("claim 1", 7, 0.0), _effect("claim 2", 7, 2.0, sign=-1)]
    decided = _plan(3).decide(effects)
    assert [e.verdict for e in decided] == [stats.HOLDS, stats.CANNOT_TELL, stats.DOES_NOT_HOLD]
    assert [e.claim for e in decided] == ["claim 0", "claim 1", "claim 2"]
    raw = np.array([e.p_value for e in effects])
    assert [e.p_adjusted for e in decided] == pytest.approx(stats.holm(raw))
    assert f"adjusted {decided[0].p_adjusted:.3f}" in prose.effect_line(decided[0])


def test_a_secondary_claim_is_not_corrected_and_says_so():
    plan = _plan(3, secondary=1)
    (secondary,) = plan.decide([_effect("extra 0", 5, 2.0)])
    assert secondary.verdict == stats.HOLDS and secondary.family == "secondary, uncorrected"
    assert secondary.reason == _effect("extra 0", 5, 2.0).reason
    assert prose.effect_line(secondary).endswith(f"; {secondary.family})")
    assert secondary.p_adjusted == secondary.p_value
    assert plan.table().loc["extra 0", "correction"] == "none (secondary)"


def test_the_plan_refuses_an_undeclared_or_repeated_claim():
    plan = _plan(2)
    with pytest.raises(KeyError, match="'other' is not a claim of the plan of 05_training_dynamics"):
        plan.decide([_effect("other", 5, 1.0)])
    with pytest.raises(ValueError, match="given twice"):
        plan.decide([_effect("claim 0", 5, 1.0), _effect("claim 0", 6, 1.0)])
    with pytest.raises(ValueError, match="twice"):
        stats.Plan("x", (_plan(1).claims[0],) * 2)
    with pytest.raises(ValueError, match="role"):
        stats.Claim("a", "seed", "s", "t", "n", role="tertiary")
    with pytest.raises(KeyError, match="not claims"):
        plan.table({"nope": 0.1})


def test_runs_that_did_not_learn_stay_without_a_verdict_under_a_plan():
    rng = np.random.default_rng(3)
    effect = stats.paired_effect(rng.normal(2, 0.1, 7), rng.normal(0, 0.1, 7), claim="claim 0", learned=False)
    (decided,) = _plan(1).decide([effect])
    assert decided.verdict == stats.CANNOT_TELL and decided.reason == stats.NOT_LEARNED


@pytest.mark.parametrize("m", [1, 2, 3, 4])
def test_holm_never_rejects_more_than_bonferroni_allows_per_step(m):
    for p in itertools.product([0.001, 0.01, 0.02, 0.04, 0.3], repeat=m):
        adjusted = stats.holm(p)
        assert np.all(adjusted >= np.array(p)) and min(adjusted) == pytest.approx(min(1, m * min(p)))


def test_the_plan_computes_what_its_design_can_reach():
    plan = _plan(1, secondary=2)
    at_five = stats.plan_reach(plan, {name: stats.smallest_p(5) for name in ("claim 0", "extra 0", "extra 1")})
    assert (at_five.primary, at_five.secondary, at_five.has_primary) == ("1 primary claim", "2 secondary claims", True)
    assert (at_five.smallest, at_five.alpha, at_five.reachable, at_five.claims, at_five.every) == (
        "0.0312",
        "0.05",
        True,
        "3",
        "0.0938",
    )
    at_four = stats.plan_reach(_plan(3), {f"claim {i}": stats.smallest_p(4) for i in range(3)})
    assert (at_four.smallest, at_four.reachable, at_four.verdict) == ("0.188", False, stats.CANNOT_TELL)
    with pytest.raises(KeyError, match="missing"):
        stats.plan_reach(plan, {"extra 0": 0.1})
