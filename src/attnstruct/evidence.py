"""Verdicts with uncertainty: intervals, permutation tests, null comparisons and the rule that turns them into words.

Every function takes one value per independent unit (the seed by default), never per-layer or per-step values
as if they were independent; a verdict is one of :data:`VERDICTS`. Exact enumeration: the bootstrap over all
``n**n`` resamples when ``n**n <= n_resamples``, the sign-flip test over all ``2**n`` patterns for ``n <= 20``
(so ``p >= 1 / 2**n``, :func:`smallest_p`), the two-sample test over all ``C(n + m, n)`` splits up to 200_000;
else Monte Carlo, p-values ``(k + 1) / (N + 1)``. ``exact=True`` / ``False`` forces one. A null statistic within
``1e-12`` times the largest possible ``|statistic|`` of the observed one counts as a tie (as extreme).

Decision rule (:func:`decide`), ``s`` the predicted sign (+1: treated minus baseline should be positive):

1. **cannot tell at this scale** when fewer than ``min_n`` units are given, or when the smallest attainable p
   (``1 / 2**n`` for a sign-flip test of ``n`` units) is ``>= alpha``: no outcome could be significant;
2. **holds** when the interval lies strictly on the predicted side of 0 (``low > 0`` for ``s = +1``,
   ``high < 0`` for ``s = -1``), ``p < alpha``, and, if a null comparison is given, its value lies beyond the
   null's 95% range on the predicted side (``> null_high`` for ``+1``, ``< null_low`` for ``-1``);
3. **does not hold** when the interval lies strictly on the opposite side and the test in the opposite
   direction, if given, has ``p_opposite < alpha``: a clear effect the other way;
4. otherwise **cannot tell at this scale**, the reason being the first failing condition (the interval
   includes 0, as one touching 0 does; p not below alpha; not beyond the null's range).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
import xarray as xr

from ._arrays import finite_vector as _values
from .null import SCORES, NullComparison, compare_with_null, null_difference, null_median_over_layers  # noqa: F401

VERDICTS = ("holds", "does not hold", "cannot tell at this scale")
ALTERNATIVES = ("greater", "less", "two-sided")
EXACT_SIGN_FLIP_N = 20  # enumerate all 2**n sign patterns up to this n
EXACT_SPLITS = 200_000  # enumerate all two-sample splits up to this many
_MAX_ENUMERATION = 2**22  # the most patterns, splits or resamples exact=True may ask for
_CHUNK = 8192


def _check(alternative=None, *, level=None, n_resamples=None, sign=None, alpha=None) -> None:
    if sign is not None and sign not in (1, -1):
        raise ValueError(f"predicted_sign must be +1 or -1, got {sign!r}")
    if alpha is not None and not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    if alternative is not None and alternative not in ALTERNATIVES:
        raise ValueError(f"unknown alternative {alternative!r}; choose one of {ALTERNATIVES}")
    if level is not None and not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    if n_resamples is not None and (int(n_resamples) != n_resamples or n_resamples < 1):
        raise ValueError(f"n_resamples must be a positive integer, got {n_resamples!r}")


def _use_exact(exact: bool | None, count: int, threshold: int, what: str) -> bool:
    if exact and count > _MAX_ENUMERATION:
        raise ValueError(f"exact=True would enumerate {count} {what}; at most {_MAX_ENUMERATION} allowed")
    return count <= threshold if exact is None else bool(exact)


def _tail_count(null: np.ndarray, observed: float, alternative: str, scale: float) -> int:
    """How many null statistics are at least as extreme as ``observed`` (ties within ``1e-12 * scale``)."""
    if alternative == "less":
        null, observed = -null, -observed
    elif alternative == "two-sided":
        null, observed = np.abs(null), abs(observed)
    return int(np.count_nonzero(null >= observed - 1e-12 * scale))


@dataclass(frozen=True)
class Interval:
    """A point estimate with a percentile-bootstrap interval at ``level`` from ``n`` units."""

    estimate: float
    low: float
    high: float
    level: float
    n: int


def _resample_stats(x: np.ndarray, statistic: Callable, exact: bool, n_resamples: int, rng) -> np.ndarray:
    """``statistic`` of each resample of ``x`` (exact: all ``n**n``, ``itertools.product`` order); vectorised
    as ``statistic(samples, axis=-1)`` where that works (numpy reductions), else one call per resample."""
    n = len(x)
    idx = np.array(list(itertools.product(range(n), repeat=n))) if exact else rng.integers(0, n, (n_resamples, n))
    samples = x[idx]
    try:
        return np.asarray(statistic(samples, axis=-1), dtype=float).reshape(len(samples))
    except (TypeError, ValueError):
        return np.array([float(statistic(row)) for row in samples])


def bootstrap_interval(
    values,
    *,
    statistic: Callable = np.mean,
    level: float = 0.95,
    n_resamples: int = 10_000,
    seed: int = 0,
    exact: bool | None = None,
) -> Interval:
    """Percentile-bootstrap interval of ``statistic`` over ``values`` ``[n]`` (one value per unit, ``n >= 2``).

    ``estimate = statistic(values)``; interval: the ``(alpha/2, 1 - alpha/2)`` quantiles, ``alpha = 1 - level``,
    of ``statistic`` over resamples of the units with replacement: all ``n**n`` (deterministic) if ``n**n <=
    n_resamples`` (``n <= 5`` at the default), else ``n_resamples`` from ``np.random.default_rng(seed)``.
    """
    _check(level=level, n_resamples=n_resamples)
    x = _values(values, "values")
    exact = _use_exact(exact, len(x) ** len(x), n_resamples, "resamples")
    stats = _resample_stats(x, statistic, exact, n_resamples, np.random.default_rng(seed))
    low, high = np.quantile(stats, [(1 - level) / 2, (1 + level) / 2])
    return Interval(float(statistic(x)), float(low), float(high), float(level), len(x))


def smallest_p(n: int, alternative: str = "greater") -> float:
    """The smallest p a sign-flip test of ``n`` units can reach: ``1 / 2**n`` one-sided, ``2 / 2**n`` two-sided."""
    _check(alternative)
    if int(n) != n or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    return min(1.0, (2.0 if alternative == "two-sided" else 1.0) / 2.0 ** int(n))


def sign_flip_test(
    differences, *, alternative: str = "greater", n_resamples: int = 100_000, seed: int = 0, exact: bool | None = None
) -> float:
    """Paired permutation p-value of ``mean(differences) = 0``, ``differences`` ``[n]`` (one per unit, ``n >= 1``).

    Null: each sign flipped independently. ``alternative``: ``"greater"`` (positive mean), ``"less"``, or
    ``"two-sided"`` (``|mean| >= |observed|``). Monte Carlo draws from ``np.random.default_rng(seed)``.
    """
    _check(alternative, n_resamples=n_resamples)
    d = _values(differences, "differences", min_n=1)
    n, observed, scale = len(d), float(d.sum()), float(np.abs(d).sum())
    if _use_exact(exact, 2**n, 2**EXACT_SIGN_FLIP_N, "sign patterns"):
        sums = functools.reduce(lambda s, v: np.concatenate([s + v, s - v]), d, np.zeros(1))  # all 2**n
        return _tail_count(sums, observed, alternative, scale) / 2.0**n
    rng, k = np.random.default_rng(seed), 0
    for start in range(0, n_resamples, _CHUNK):
        signs = 2.0 * rng.integers(0, 2, size=(min(_CHUNK, n_resamples - start), n)) - 1.0
        k += _tail_count(signs @ d, observed, alternative, scale)
    return (k + 1) / (n_resamples + 1)


def two_sample_permutation_test(
    treated,
    control,
    *,
    alternative: str = "greater",
    n_resamples: int = 100_000,
    seed: int = 0,
    exact: bool | None = None,
) -> float:
    """Permutation p-value of ``mean(treated) - mean(control) = 0``, ``treated`` ``[n]``, ``control`` ``[m]``.

    Null: the ``n + m`` values are exchangeable; exact ``p >= 1 / C(n + m, n)``. Alternatives as in
    :func:`sign_flip_test`.
    """
    _check(alternative, n_resamples=n_resamples)
    t, c = _values(treated, "treated", min_n=1), _values(control, "control", min_n=1)
    pooled, n, m = np.concatenate([t, c]), len(t), len(c)
    # mean(t) - mean(c) = (1/n + 1/m) (sum(t) - n mean(pooled)): the centred treated sum is an equivalent statistic
    centre, scale, splits = n * pooled.mean(), float(np.abs(pooled).sum()), math.comb(n + m, n)
    observed = t.sum() - centre
    if _use_exact(exact, splits, EXACT_SPLITS, "splits"):
        flat = itertools.chain.from_iterable(itertools.combinations(range(n + m), n))
        sums = pooled[np.fromiter(flat, dtype=np.intp, count=splits * n).reshape(splits, n)].sum(axis=1)
        return _tail_count(sums - centre, observed, alternative, scale) / splits
    rng, k = np.random.default_rng(seed), 0
    for start in range(0, n_resamples, _CHUNK):
        idx = np.argsort(rng.random((min(_CHUNK, n_resamples - start), n + m)), axis=1)[:, :n]
        k += _tail_count(pooled[idx].sum(axis=1) - centre, observed, alternative, scale)
    return (k + 1) / (n_resamples + 1)


@dataclass(frozen=True)
class Effect:
    """One claim's evidence: interval over ``n`` units, ``test``'s p-value, null comparison, verdict and reason."""

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

    def sentence(self, digits: int = 2) -> str:
        """One line: estimate, interval, n, p, the null's 95% range (if any), verdict and reason."""
        f = f"+.{digits}f"
        if self.n == 1:
            return f"{self.claim}: {self.estimate:{f}} (n = 1 {self.unit}; {self.verdict}: {self.reason})"
        p = "p < 0.001" if self.p_value < 0.001 else f"p = {self.p_value:.3f}"
        null = "" if self.null is None else f"; null 95% range [{self.null.null_low:{f}}, {self.null.null_high:{f}}]"
        return (
            f"{self.claim}: {self.estimate:{f}} ({self.level:.0%} CI [{self.low:{f}}, {self.high:{f}}], "
            f"n = {self.n} {self.unit}s, {self.test} {p}{null}; {self.verdict}: {self.reason})"
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
) -> tuple[str, str]:
    """``(verdict, reason)`` by the module docstring's rule. ``smallest``: the test's smallest attainable p
    (default :func:`smallest_p` of ``interval.n``); ``unit`` only words the reason."""
    _check(sign=predicted_sign, alpha=alpha)
    for name, p in (("p_value", p_value), ("p_opposite", p_opposite), ("smallest", smallest)):
        if p is not None and not 0 <= p <= 1:
            raise ValueError(f"{name} must be in [0, 1], got {p!r}")
    if not np.all(np.isfinite([interval.estimate, interval.low, interval.high])) or interval.low > interval.high:
        raise ValueError(f"interval must be finite with low <= high, got {interval}")
    n, cannot, holds, fails = interval.n, VERDICTS[2], VERDICTS[0], VERDICTS[1]
    smallest = smallest_p(n) if smallest is None else smallest
    if min_n is not None and n < min_n:
        return cannot, f"with {n} {unit}s, fewer than the {min_n} required"
    if smallest >= alpha:
        return cannot, f"with {n} {unit}s the smallest attainable p is {smallest:.3g}"
    near, far = sorted((predicted_sign * interval.low, predicted_sign * interval.high))
    what, p = f"the {interval.level:.0%} interval", f"p = {p_value:.3f}"
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
) -> Effect:
    """Effect of ``treated - baseline`` (both ``[n]``, paired by unit): bootstrap interval of the mean difference,
    sign-flip p in the predicted and the opposite direction, ``null_samples`` (the difference without structure,
    e.g. from :func:`null_difference`) compared with the estimate, and the verdict of :func:`decide`."""
    _check(sign=predicted_sign)
    t, b = _values(treated, "treated", min_n=1), _values(baseline, "baseline", min_n=1)
    if len(t) != len(b):
        raise ValueError(f"treated and baseline must have the same length, got {len(t)} and {len(b)}")
    d = t - b
    if len(d) == 1:
        return single_unit(claim, float(d[0]), unit, predicted_sign)
    interval = bootstrap_interval(d, seed=seed)
    alt, opposite = ("greater", "less") if predicted_sign > 0 else ("less", "greater")
    p, p_opp = (sign_flip_test(d, alternative=a, seed=seed) for a in (alt, opposite))
    null = None if null_samples is None else compare_with_null(interval.estimate, null_samples)
    verdict, reason = decide(
        interval, p, predicted_sign=predicted_sign, alpha=alpha, null=null, p_opposite=p_opp, unit=unit
    )
    return Effect(
        claim,
        unit,
        **asdict(interval),
        p_value=p,
        alternative=alt,
        null=null,
        verdict=verdict,
        reason=reason,
        test="sign-flip",
    )


def single_unit(claim: str, estimate: float, unit: str = "seed", predicted_sign: int = +1) -> Effect:
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
        VERDICTS[2],
        f"with 1 {unit} there is no interval",
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


def speedup_against_placebo(
    treated, placebo, *, claim: str, alpha: float = 0.05, seed: int = 0, n_resamples: int = 10_000
) -> Effect:
    """Speed-ups of an initialisation (``treated`` ``[n]``, each against the baseline of its seed) against
    baseline-vs-baseline pairs of different seeds (``placebo`` ``[m]``), predicted positive.

    NaN ("never reached the baseline's final loss") counts as 0.0, a speed-up of at most 0. Estimate ``mean(treated)
    - mean(placebo)``; interval: percentile bootstrap of each group on its own (treated drawn first), exact over
    all ``n**n * m**m`` pairs if that is ``<= n_resamples``; p: :func:`two_sample_permutation_test`. ``n`` counts
    treated seeds. Placebo pairs sharing a seed are not independent; disjoint pairs keep exchangeability.
    """
    t, c = (np.where(np.isnan(x), 0.0, x) for x in (np.asarray(treated, float), np.asarray(placebo, float)))
    t, c = _values(t, "treated", min_n=1), _values(c, "placebo", min_n=1)
    if min(len(t), len(c)) == 1:
        return single_unit(claim, float(t.mean() - c.mean()))
    _check(n_resamples=n_resamples)
    exact, rng = len(t) ** len(t) * len(c) ** len(c) <= n_resamples, np.random.default_rng(seed)
    a, b = (_resample_stats(x, np.mean, exact, n_resamples, rng) for x in (t, c))
    low, high = np.quantile((a[:, None] - b[None, :]).ravel() if exact else a - b, [0.025, 0.975])
    interval = Interval(float(t.mean() - c.mean()), float(low), float(high), 0.95, len(t))
    p, p_opp = (two_sample_permutation_test(t, c, alternative=alt, seed=seed) for alt in ("greater", "less"))
    splits = math.comb(len(t) + len(c), len(t))  # smallest attainable p: 1 / splits if exact, else ~1 / N
    verdict, reason = decide(interval, p, alpha=alpha, p_opposite=p_opp, smallest=1 / min(splits, EXACT_SPLITS + 1))
    return Effect(
        claim,
        "seed",
        **asdict(interval),
        p_value=p,
        alternative="greater",
        null=None,
        verdict=verdict,
        reason=reason,
        test="permutation",
    )


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
    score=)``). Overall: "holds" if all pairs hold, "does not hold" if any does not, else "cannot tell ...".
    """
    names = list(predicted)
    if len(names) < 2 or len(set(names)) != len(names) or not set(names) <= set(values):
        raise ValueError(f"predicted must name at least two distinct keys of values {list(values)}, got {names}")
    effects = [
        paired_effect(values[a], values[b], claim=claim_format.format(a=a, b=b, score=score), alpha=alpha, seed=seed)
        for a, b in zip(names, names[1:])
    ]
    verdicts = {e.verdict for e in effects}
    overall = VERDICTS[0] if verdicts == {VERDICTS[0]} else VERDICTS[1] if VERDICTS[1] in verdicts else VERDICTS[2]
    return overall, effects


def verdict_table(effects: Sequence[Effect]):
    """A ``pandas.DataFrame`` with one row per effect (:meth:`Effect.as_dict`), indexed by claim."""
    effects = list(effects)
    if not effects:
        raise ValueError("effects must not be empty")
    return pd.DataFrame([e.as_dict() for e in effects]).set_index("claim")
