"""The one rule that turns an interval, a test and a null into a verdict, and the effects it judges.

A verdict is one of :data:`VERDICTS`. Every sentence of the project that says *holds*, *does not hold* or *cannot
tell at this scale* gets the word from :func:`decide`, through an :class:`Effect`.

Decision rule (:func:`decide`), ``s`` the predicted sign (+1: treated minus baseline should be positive):

0. **cannot tell at this scale** when the runs behind the numbers did not learn (``learned=False``): a score of a
   model that did not learn its task says nothing about the task;
1. **cannot tell at this scale** when fewer than ``min_n`` units are given, or when the smallest attainable p
   (``1 / 2**n`` for a sign-flip test of ``n`` units) is ``>= alpha``: no outcome could be significant;
2. **holds** when the interval lies strictly on the predicted side of 0 (``low > 0`` for ``s = +1``,
   ``high < 0`` for ``s = -1``), ``p < alpha``, and, if a null comparison is given, its value lies beyond the
   null's 95% range on the predicted side (``> null_high`` for ``+1``, ``< null_low`` for ``-1``);
3. **does not hold** when the interval lies strictly on the opposite side and the test in the opposite
   direction, if given, has ``p_opposite < alpha``: a clear effect the other way;
4. otherwise **cannot tell at this scale**, the reason being the first failing condition (the interval
   includes 0, as one touching 0 does; p not below alpha; not beyond the null's range).

Several effects read together (:func:`overall`): *holds* when every one holds, *does not hold* when any does not,
else *cannot tell at this scale*. A notebook's summary of a plan is :func:`primary_verdict`, the overall verdict of
its primary claims after Holm's correction.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace

import numpy as np
import pandas as pd
import xarray as xr

from .._checks import finite_vector as _values
from ..report.prose import count
from .nulls import NullComparison, compare_with_null
from .power import detectable_effect
from .resampling import (
    Interval,
    _check,
    _resample_stats,
    bootstrap_interval,
    fewest_units,
    sign_flip_test,
    smallest_p,
    smallest_two_sample_p,
    two_sample_permutation_test,
)
from .student_t import t_interval

VERDICTS = ("holds", "does not hold", "cannot tell at this scale")
HOLDS, DOES_NOT_HOLD, CANNOT_TELL = VERDICTS
NOT_LEARNED = "the runs did not learn"


@dataclass(frozen=True)
class Effect:
    """One claim's evidence: bootstrap interval (``low``, ``high``; the one :func:`decide` reads) and, for paired
    units, Student's t interval (``t_low``, ``t_high``) over ``n`` units, ``test``'s p-value and the smallest p it
    could reach, null comparison, whether the runs learned, verdict and reason; under a plan
    (:mod:`attnstruct.stats.preregistration`), the corrected p-value and the claim's family."""

    claim: str
    unit: str
    estimate: float
    low: float
    high: float
    level: float
    n: int
    p_value: float
    alternative: str
    null: NullComparison | None
    verdict: str
    reason: str
    test: str = "sign-flip"
    smallest: float = 1.0  # the smallest p the test could reach with these units (1.0: no test)
    learned: bool = True  # whether the runs behind the numbers learned (rule 0 of decide)
    p_opposite: float = math.nan  # the test in the opposite direction (rule 3 of decide); NaN: none
    p_adjusted: float = math.nan  # the p-value after a plan's correction (attnstruct.stats.preregistration); NaN: none
    family: str = ""  # the claim's place in its plan: "primary, Holm over m claims" or "secondary, uncorrected"
    spread: float = math.nan  # the standard deviation of the per-unit values (paired differences; pooled groups)
    n_control: int = 0  # the control group's units of a two-sample test (0: a paired test)
    detectable: float = math.nan  # the smallest effect the design detects with 80% power (stats.power); NaN: none
    t_low: float = math.nan  # Student's t interval at ``level`` beside the bootstrap's (stats.student_t); NaN: none
    t_high: float = math.nan

    def detectable_at(self, alpha: float) -> float:
        """:func:`attnstruct.stats.power.detectable_effect` of this effect's design at level ``alpha``."""
        edge = (
            None if self.null is None else self.null.null_high if self.alternative == "greater" else self.null.null_low
        )
        return detectable_effect(
            self.n,
            self.spread,
            alpha=alpha,
            control=self.n_control or None,
            predicted_sign=+1 if self.alternative == "greater" else -1,
            null_edge=edge,
        )

    def as_dict(self) -> dict:
        """Plain values; the null's fields as ``null_value`` .. ``null_median`` (NaN if none) and ``n_null`` (0)."""
        out = {k: v for k, v in asdict(self).items() if k != "null"}
        for key in ("value", "percentile", "z", "null_low", "null_high", "null_median"):
            out[key if key.startswith("null_") else f"null_{key}"] = getattr(self.null, key, float("nan"))
        return out | {"n_null": getattr(self.null, "n_null", 0)}


def decide(
    interval: Interval,
    p_value: float,
    *,
    predicted_sign: int = +1,
    alpha: float = 0.05,
    null: NullComparison | None = None,
    p_opposite: float | None = None,
    min_n: int | None = None,
    unit: str = "seed",
    smallest: float | None = None,
    learned: bool = True,
) -> tuple[str, str]:
    """``(verdict, reason)`` by the module docstring's rule. ``smallest``: the test's smallest attainable p
    (default :func:`smallest_p` of ``interval.n``); ``learned``: whether the runs behind the numbers learned
    (rule 0); ``unit`` only words the reason."""
    _check(sign=predicted_sign, alpha=alpha)
    for name, p in (("p_value", p_value), ("p_opposite", p_opposite), ("smallest", smallest)):
        if p is not None and not 0 <= p <= 1:
            raise ValueError(f"{name} must be in [0, 1], got {p!r}")
    if not np.all(np.isfinite([interval.estimate, interval.low, interval.high])) or interval.low > interval.high:
        raise ValueError(f"interval must be finite with low <= high, got {interval}")
    n, cannot, holds, fails = interval.n, CANNOT_TELL, HOLDS, DOES_NOT_HOLD
    smallest = smallest_p(n) if smallest is None else smallest
    if not learned:
        return cannot, NOT_LEARNED
    if min_n is not None and n < min_n:
        return cannot, f"with {count(n, unit)}, fewer than the {min_n} required"
    if smallest >= alpha:
        return cannot, f"with {count(n, unit)} the smallest attainable p is {smallest:.3g}"
    near, far = sorted((predicted_sign * interval.low, predicted_sign * interval.high))
    what, p = f"the {interval.level:.0%} bootstrap interval", f"p = {p_value:.3f}"
    if near > 0 and p_value < alpha:
        edge = 0.0 if null is None else null.null_high if predicted_sign > 0 else null.null_low
        if null is None or predicted_sign * (null.value - edge) > 0:
            return holds, f"{what} excludes 0 and {p} < {alpha:g}" + (", beyond the null's range" if null else "")
        return cannot, f"the estimate is not beyond the null's 95% range [{null.null_low:+.2f}, {null.null_high:+.2f}]"
    if far < 0:
        side = f"{what} lies on the other side of 0"
        if p_opposite is None:
            return fails, side
        opposite = f"the opposite test's p = {p_opposite:.3f}"
        if p_opposite < alpha:
            return fails, f"{side} and {opposite} < {alpha:g}"
        return cannot, f"{side} but {opposite} is not below {alpha:g}"
    if near > 0:
        return cannot, f"{p} is not below {alpha:g}"
    return cannot, f"{what} [{interval.low:+.2f}, {interval.high:+.2f}] includes 0"


def paired_effect(
    treated,
    baseline,
    *,
    claim: str,
    unit: str = "seed",
    predicted_sign: int = +1,
    alpha: float = 0.05,
    null_samples=None,
    seed: int = 0,
    learned: bool = True,
) -> Effect:
    """Effect of ``treated - baseline`` (both ``[n]``, paired by unit): bootstrap interval of the mean difference
    (what the verdict reads) and Student's t interval beside it (:func:`attnstruct.stats.student_t.t_interval`),
    sign-flip p in the predicted and the opposite direction, ``null_samples`` (the mean difference over ``n``
    units without structure, :func:`attnstruct.stats.nulls.null_of_the_mean`) compared with the estimate, and the
    verdict of :func:`decide` (``learned``: its rule 0)."""
    _check(sign=predicted_sign)
    t, b = _values(treated, "treated", min_n=1), _values(baseline, "baseline", min_n=1)
    if len(t) != len(b):
        raise ValueError(f"treated and baseline must have the same length, got {len(t)} and {len(b)}")
    d = t - b
    if len(d) == 1:
        return single_unit(claim, float(d[0]), unit, predicted_sign, learned=learned)
    interval = bootstrap_interval(d, seed=seed)
    alt, opposite = ("greater", "less") if predicted_sign > 0 else ("less", "greater")
    p, p_opp = (sign_flip_test(d, alternative=a, seed=seed) for a in (alt, opposite))
    null = None if null_samples is None else compare_with_null(interval.estimate, null_samples)
    verdict, reason = decide(
        interval, p, predicted_sign=predicted_sign, alpha=alpha, null=null, p_opposite=p_opp, unit=unit, learned=learned
    )
    effect = Effect(
        claim,
        unit,
        **asdict(interval),
        p_value=p,
        alternative=alt,
        null=null,
        verdict=verdict,
        reason=reason,
        test="sign-flip",
        smallest=smallest_p(len(d), alt),
        learned=learned,
        p_opposite=p_opp,
        spread=float(np.std(d, ddof=1)),
    )
    t = t_interval(d, level=interval.level)
    return replace(effect, detectable=effect.detectable_at(alpha), t_low=t.low, t_high=t.high)


def single_unit(
    claim: str, estimate: float, unit: str = "seed", predicted_sign: int = +1, *, learned: bool = True
) -> Effect:
    """The effect of one unit: its value, no interval and no test (NaN), and "cannot tell at this scale"."""
    return Effect(
        claim,
        unit,
        float(estimate),
        math.nan,
        math.nan,
        0.95,
        1,
        math.nan,
        "greater" if predicted_sign > 0 else "less",
        None,
        CANNOT_TELL,
        f"with 1 {unit} there is no interval" if learned else NOT_LEARNED,
        learned=learned,
    )


def per_unit_and_layer(
    treated: xr.DataArray, baseline: xr.DataArray, unit: str = "seed", layer: str = "layer"
) -> xr.DataArray:
    """``treated - baseline`` over ``(unit, layer, ...)``, aligned by coordinate label and sorted by it; both need
    the same ``unit`` and ``layer`` labels (in any order) and the same labels on any other shared dimension."""
    try:
        t, b = xr.align(treated.sortby([unit, layer]), baseline.sortby([unit, layer]), join="exact")
    except (KeyError, ValueError) as error:
        raise ValueError(f"treated and baseline do not share the {unit!r} and {layer!r} coordinates: {error}") from None
    return (t - b).transpose(unit, layer, ...).rename("difference")


def two_sample_effect(
    treated,
    control,
    *,
    claim: str,
    unit: str = "seed",
    predicted_sign: int = +1,
    alpha: float = 0.05,
    seed: int = 0,
    n_resamples: int = 10_000,
    learned: bool = True,
) -> Effect:
    """Effect of ``mean(treated) - mean(control)`` for two groups of independent units (``[n]`` and ``[m]``,
    not paired), predicted to have sign ``predicted_sign``.

    Interval: percentile bootstrap of each group on its own (treated drawn first), exact over all ``n**n * m**m``
    pairs if that is ``<= n_resamples``; p: :func:`~attnstruct.stats.resampling.two_sample_permutation_test` in
    the predicted and the opposite direction, whose smallest attainable p is ``1 / C(n + m, n)``; verdict:
    :func:`decide`. ``n`` counts treated units. Units that share something (two pairs with a seed in common) are
    not independent: give disjoint ones.
    """
    _check(sign=predicted_sign, n_resamples=n_resamples)
    t, c = _values(treated, "treated", min_n=1), _values(control, "control", min_n=1)
    if min(len(t), len(c)) == 1:
        return single_unit(claim, float(t.mean() - c.mean()), unit, predicted_sign, learned=learned)
    exact, rng = len(t) ** len(t) * len(c) ** len(c) <= n_resamples, np.random.default_rng(seed)
    a, b = (_resample_stats(x, np.mean, exact, n_resamples, rng) for x in (t, c))
    low, high = np.quantile((a[:, None] - b[None, :]).ravel() if exact else a - b, [0.025, 0.975])
    interval = Interval(float(t.mean() - c.mean()), float(low), float(high), 0.95, len(t))
    alt, opposite = ("greater", "less") if predicted_sign > 0 else ("less", "greater")
    p, p_opp = (two_sample_permutation_test(t, c, alternative=a_, seed=seed) for a_ in (alt, opposite))
    smallest = smallest_two_sample_p(len(t), len(c), alt)
    verdict, reason = decide(
        interval,
        p,
        predicted_sign=predicted_sign,
        alpha=alpha,
        p_opposite=p_opp,
        smallest=smallest,
        unit=unit,
        learned=learned,
    )
    pooled = np.concatenate([t - t.mean(), c - c.mean()])
    effect = Effect(
        claim,
        unit,
        **asdict(interval),
        p_value=p,
        alternative=alt,
        null=None,
        verdict=verdict,
        reason=reason,
        test="permutation",
        smallest=smallest,
        learned=learned,
        p_opposite=p_opp,
        spread=float(np.sqrt((pooled**2).sum() / (len(pooled) - 2))),
        n_control=len(c),
    )
    return replace(effect, detectable=effect.detectable_at(alpha))


@dataclass(frozen=True)
class DesignReach:
    """Can a design reach a verdict at all (rule 1 of :func:`decide`)? Its ``design`` (``"3 seeds"``, ``"2 encoder
    stacks against 2 decoder stacks"``), its ``test`` (``"sign-flip"``: one-sided, of paired units; ``"permutation"``:
    of two groups), the ``smallest`` p that test can reach and ``alpha`` (both formatted), whether the smallest p is
    below alpha (``reachable``), the ``verdict`` every claim of the design reads when it is not, and how many units it
    takes to go below alpha (``needed``: ``"5 seeds"``, ``"6 of each"`` for a balanced design; empty when no design of
    at most 64 units does, which happens only for a fixed, small control group)."""

    design: str
    test: str
    smallest: str
    alpha: str
    reachable: bool
    verdict: str
    needed: str


def design_reach(
    n: int,
    *,
    control: int | None = None,
    balanced: bool = False,
    alpha: float = 0.05,
    unit: str = "seed",
    control_unit: str | None = None,
) -> DesignReach:
    """The reach of a design of ``n`` units: the smallest p its test can reach (a one-sided sign-flip test of ``n``
    paired units; with ``control``, a permutation test of ``n`` against ``control`` units) against ``alpha``, and how
    many units it would take (:func:`~attnstruct.stats.resampling.fewest_units`, of each group with ``balanced``)."""
    _check(alpha=alpha)
    if control is None:
        design, test, smallest = count(n, unit), "sign-flip", smallest_p(n)
    else:
        design = f"{count(n, unit)} against {count(control, control_unit or unit)}"
        test, smallest = "permutation", smallest_two_sample_p(n, control)
    needed = fewest_units(alpha, control=control, balanced=balanced)
    return DesignReach(
        design=design,
        test=test,
        smallest=f"{smallest:.3g}",
        alpha=f"{alpha:g}",
        reachable=bool(smallest < alpha),
        verdict=CANNOT_TELL,
        needed="" if needed is None else f"{needed} of each" if balanced else count(needed, unit),
    )


def overall(effects: Sequence[Effect]) -> str:
    """The verdict of several effects read together: *holds* if every one holds, *does not hold* if any does not,
    else (also for none) *cannot tell at this scale*."""
    verdicts = {e.verdict for e in effects}
    if verdicts == {HOLDS}:
        return HOLDS
    return DOES_NOT_HOLD if DOES_NOT_HOLD in verdicts else CANNOT_TELL


def effect_of(effects: Sequence[Effect], claim: str) -> Effect | None:
    """The effect of ``claim`` among ``effects``, or None when that claim was not tested."""
    return next((e for e in effects if e.claim == claim), None)


def primary_verdict(effects: Sequence[Effect]) -> str:
    """The summary verdict of effects decided under a plan (:meth:`attnstruct.stats.preregistration.Plan.decide`):
    :func:`overall` of the primary claims' effects (``family`` *primary, ...*), each decided after Holm's correction,
    so that a notebook's summary line never contradicts its plan's primary verdict; *cannot tell at this scale* when
    no primary claim was tested. The secondary claims are reported beside it, not summarised into it."""
    return overall([e for e in effects if e.family.startswith("primary")])


def ordering(
    values: Mapping[str, Sequence[float]],
    predicted: Sequence[str],
    *,
    claim_format: str = "{a} minus {b}",
    score: str = "symmetry",
    alpha: float = 0.05,
    seed: int = 0,
) -> tuple[str, list[Effect]]:
    """Are ``values`` (name -> per-seed values, paired by seed) ordered as ``predicted`` (highest first)?

    One :func:`paired_effect` per adjacent pair (``a > b`` predicted, claim ``claim_format.format(a=, b=,
    score=)``); the overall verdict is :func:`overall`'s.
    """
    names = list(predicted)
    if len(names) < 2 or len(set(names)) != len(names) or not set(names) <= set(values):
        raise ValueError(f"predicted must name at least two distinct keys of values {list(values)}, got {names}")
    effects = [
        paired_effect(values[a], values[b], claim=claim_format.format(a=a, b=b, score=score), alpha=alpha, seed=seed)
        for a, b in zip(names, names[1:])
    ]
    return overall(effects), effects


def verdict_table(effects: Sequence[Effect]):
    """A ``pandas.DataFrame`` with one row per effect (:meth:`Effect.as_dict`), indexed by claim."""
    effects = list(effects)
    if not effects:
        raise ValueError("effects must not be empty")
    return pd.DataFrame([e.as_dict() for e in effects]).set_index("claim")
