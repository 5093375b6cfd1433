"""Statistics behind every verdict: resampled intervals and tests, nulls of unstructured layers, and the one rule.

* :mod:`.resampling`: bootstrap intervals over units, sign-flip and two-sample permutation tests, exact where
  enumeration is affordable;
* :mod:`.nulls`: where a value sits among random layers of the same shape, and the nulls the verdicts read;
* :mod:`.verdicts`: :func:`decide`, the rule that says *holds*, *does not hold* or *cannot tell at this scale*, and
  the effects it judges;
* :mod:`.plans`: a notebook's pre-registered claims (unit, statistic, test, null, primary or secondary) and Holm's
  correction over its primary claims;
* :mod:`.families`: the pretrained population with one unit per model family;
* :mod:`.power`: the smallest effect a design detects, printed beside each verdict;
* :mod:`.student_t`: Student's t interval of a mean, printed beside the bootstrap's at small ``n``.

The names a notebook or an analysis uses are importable from here: ``from attnstruct import stats;
stats.paired_effect(...)``.
"""

from .family_units import family_effect, family_values, model_family
from .nulls import (
    SCORES,
    NullComparison,
    compare_with_null,
    decay_contrast,
    median_null,
    null_median_over_layers,
    null_of_the_mean,
    null_of_the_mean_by_unit,
    paired_null,
    peak_minus_final,
    symmetrised,
)
from .power import POWER, detectable_effect, detectable_shift, sign_flip_power
from .preregistration import Claim, Plan, PlanReach, holm, plan_reach
from .resampling import (
    ALTERNATIVES,
    EXACT_SIGN_FLIP_N,
    EXACT_SPLITS,
    Interval,
    bootstrap_interval,
    fewest_units,
    sign_flip_test,
    smallest_p,
    smallest_two_sample_p,
    two_sample_permutation_test,
)
from .student_t import t_interval, t_quantile
from .verdicts import (
    CANNOT_TELL,
    DOES_NOT_HOLD,
    HOLDS,
    NOT_LEARNED,
    VERDICTS,
    DesignReach,
    Effect,
    decide,
    design_reach,
    effect_of,
    ordering,
    overall,
    paired_effect,
    per_unit_and_layer,
    primary_verdict,
    single_unit,
    two_sample_effect,
    verdict_table,
)

__all__ = [
    "CANNOT_TELL",
    "POWER",
    "detectable_effect",
    "detectable_shift",
    "sign_flip_power",
    "DOES_NOT_HOLD",
    "HOLDS",
    "NOT_LEARNED",
    "ALTERNATIVES",
    "EXACT_SIGN_FLIP_N",
    "EXACT_SPLITS",
    "SCORES",
    "VERDICTS",
    "Claim",
    "Effect",
    "Plan",
    "PlanReach",
    "plan_reach",
    "Interval",
    "NullComparison",
    "bootstrap_interval",
    "compare_with_null",
    "fewest_units",
    "decide",
    "family_effect",
    "family_values",
    "holm",
    "model_family",
    "DesignReach",
    "design_reach",
    "median_null",
    "null_median_over_layers",
    "null_of_the_mean",
    "null_of_the_mean_by_unit",
    "effect_of",
    "ordering",
    "overall",
    "primary_verdict",
    "t_interval",
    "t_quantile",
    "paired_effect",
    "paired_null",
    "symmetrised",
    "decay_contrast",
    "peak_minus_final",
    "per_unit_and_layer",
    "sign_flip_test",
    "single_unit",
    "smallest_p",
    "smallest_two_sample_p",
    "two_sample_effect",
    "two_sample_permutation_test",
    "verdict_table",
]
