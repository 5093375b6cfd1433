"""Statistics behind every verdict: resampled intervals and tests, nulls of unstructured layers, and the one rule.

* :mod:`.resampling`: bootstrap intervals over units, sign-flip and two-sample permutation tests, exact where
  enumeration is affordable;
* :mod:`.nulls`: where a value sits among random layers of the same shape, and the nulls the verdicts read;
* :mod:`.verdicts`: :func:`decide`, the rule that says *holds*, *does not hold* or *cannot tell at this scale*, and
  the effects it judges.

The names a notebook or an analysis uses are importable from here: ``from attnstruct import stats;
stats.paired_effect(...)``.
"""

from .nulls import (
    SCORES,
    NullComparison,
    compare_with_null,
    median_null,
    null_median_over_layers,
    null_of_the_mean,
)
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
from .verdicts import (
    CANNOT_TELL,
    DOES_NOT_HOLD,
    HOLDS,
    NOT_LEARNED,
    VERDICTS,
    Effect,
    decide,
    describe_reach,
    ordering,
    overall,
    paired_effect,
    per_unit_and_layer,
    single_unit,
    two_sample_effect,
    verdict_table,
)

__all__ = [
    "CANNOT_TELL",
    "DOES_NOT_HOLD",
    "HOLDS",
    "NOT_LEARNED",
    "ALTERNATIVES",
    "EXACT_SIGN_FLIP_N",
    "EXACT_SPLITS",
    "SCORES",
    "VERDICTS",
    "Effect",
    "Interval",
    "NullComparison",
    "bootstrap_interval",
    "compare_with_null",
    "fewest_units",
    "decide",
    "describe_reach",
    "median_null",
    "null_median_over_layers",
    "null_of_the_mean",
    "ordering",
    "overall",
    "paired_effect",
    "per_unit_and_layer",
    "sign_flip_test",
    "single_unit",
    "smallest_p",
    "smallest_two_sample_p",
    "two_sample_effect",
    "two_sample_permutation_test",
    "verdict_table",
]
