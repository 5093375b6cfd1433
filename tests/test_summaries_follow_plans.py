"""A notebook's summary line never contradicts its plan: it is the verdict of the plan's primary claims after Holm's
correction (stats.primary_verdict), checked on made-up effects where the primary claim holds and the secondary
claims do not."""

import numpy as np
from test_nb07_vision import COLUMN, SMALL_NULL, UP, summary_of

from attnstruct import stats
from attnstruct.analyses import nb04_gradient_structure as toys
from attnstruct.analyses import nb07_vision as vision_study
from attnstruct.tasks import toy_tasks

CLEAR = np.array([0.5, 0.6, 0.55, 0.7, 0.65])  # five seeds on the predicted side: p = 1/32


def plan_table_primary(plan: stats.Plan, effects) -> str:
    """The verdict the plan table gives its primary claims, read together."""
    table = stats.verdict_table(effects)
    return stats.overall([e for e in effects if plan.claim(e.claim).role == "primary" and e.claim in table.index])


def test_the_summary_of_a_plan_is_its_primary_verdict_whatever_the_secondary_claims_say():
    plan = stats.Plan(
        "made up",
        (
            stats.Claim("primary", "seed", "s", "t", "n"),
            stats.Claim("against", "seed", "s", "t", "n", role="secondary"),
            stats.Claim("unclear", "seed", "s", "t", "n", role="secondary"),
        ),
    )
    effects = plan.decide(
        [
            stats.paired_effect(CLEAR, np.zeros(5), claim="primary"),
            stats.paired_effect(-CLEAR, np.zeros(5), claim="against"),
            stats.paired_effect(np.array([0.1, -0.1, 0.2, -0.2, 0.0]), np.zeros(5), claim="unclear"),
        ]
    )
    assert [e.verdict for e in effects] == [stats.HOLDS, stats.DOES_NOT_HOLD, stats.CANNOT_TELL]
    assert stats.primary_verdict(effects) == stats.HOLDS == plan_table_primary(plan, effects)
    assert stats.primary_verdict(effects[1:]) == stats.CANNOT_TELL, "no primary claim tested: nothing to summarise"


def test_notebook_07s_overall_line_is_its_primary_verdict_when_a_secondary_goes_against_it():
    against = {**COLUMN, "masked": [-0.9] * 5, "next-patch": [0.9] * 5}  # the secondary on directionality flips
    comparison = vision_study.compare_objectives(summary_of(UP, against), **SMALL_NULL)
    assert [e.verdict for e in comparison.effects][-1] == stats.DOES_NOT_HOLD
    summary = vision_study.overall_verdict(comparison)
    assert summary.verdict == comparison.overall == plan_table_primary(vision_study.PLAN, comparison.effects)
    assert summary.verdict == stats.HOLDS


def made_up_effects_of_04(primary_shift: float) -> dict:
    """Notebook 04's effects decided under its plan: the primary claim shifted by ``primary_shift`` per seed, every
    other claim without a clear effect."""
    unclear = np.array([0.1, -0.1, 0.2, -0.2, 0.0])
    effects = {}
    for task in toy_tasks.TASKS:
        for parameterisation in toy_tasks.PARAMETERISATIONS.values():
            for score in toys.SCORES:
                claim = toys.objective_claim(task, parameterisation, score)
                sign = toys.COMPARISONS[score][2]
                values = sign * primary_shift * CLEAR if claim == toys.PRIMARY else unclear
                effects[task, parameterisation, score] = stats.paired_effect(
                    values, np.zeros(5), claim=claim, predicted_sign=sign
                )
    return dict(zip(effects, toys.PLAN.decide(list(effects.values()))))


def test_notebook_04s_summary_is_its_primary_verdict_when_the_other_tasks_cannot_tell():
    effects = made_up_effects_of_04(1.0)
    summary = toys.primary_summary(effects)
    assert summary.verdict == plan_table_primary(toys.PLAN, list(effects.values())) == stats.HOLDS
    assert toys.primary_summary(made_up_effects_of_04(-1.0)).verdict == stats.DOES_NOT_HOLD


def test_effect_of_finds_a_claims_effect_by_name_and_none_for_a_claim_not_tested():
    effects = [stats.paired_effect(CLEAR, np.zeros(5), claim=name) for name in ("first", "second")]
    assert stats.effect_of(effects, "second") is effects[1]
    assert stats.effect_of(effects, "third") is None
