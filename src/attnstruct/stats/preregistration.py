"""Pre-registered analyses: the claims of a notebook declared before their results, and Holm's correction over them.

A :class:`Plan` holds one notebook's claims (:class:`Claim`): for each, the unit, the statistic and its aggregation,
the test, the null of *that* question, and whether it is **primary** (one of the family that Holm's step-down
correction, :func:`holm`, adjusts together) or **secondary** (reported uncorrected and labelled so). The notebook
prints :meth:`Plan.table` before its results; :meth:`Plan.decide` turns the effects it measured into verdicts
through :func:`attnstruct.stats.verdicts.decide`, with each primary claim's p-value (and the smallest p its design
can reach) replaced by the Holm-adjusted one, and refuses an effect whose claim the plan does not declare.

Holm over ``m`` primary claims multiplies the smallest p-value by ``m``, so a design whose test cannot go below
``p_min`` reaches a primary verdict only if ``m * p_min < alpha``: a sign-flip test over 5 seeds (``p_min = 1/32``)
cannot decide any of 3 primary claims (``3 / 32 = 0.094``); over 7 seeds it can (``3 / 128 = 0.023``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from ..report.prose import count
from .resampling import Interval, _check
from .verdicts import CANNOT_TELL, Effect, decide

ROLES = ("primary", "secondary")


def holm(p_values) -> np.ndarray:
    """Holm's step-down adjusted p-values of ``p_values`` ``[m]`` (each in [0, 1]), in the given order.

    With ``p_(1) <= ... <= p_(m)`` sorted, ``adjusted_(i) = max_{j <= i} min(1, (m - j + 1) p_(j))``; rejecting the
    claims whose adjusted p is below ``alpha`` controls the family-wise error rate at ``alpha`` under any dependence.
    Ties keep their input order. ``m = 0`` gives an empty array.
    """
    p = np.asarray(p_values, dtype=float).reshape(-1)
    if np.any(~np.isfinite(p)) or np.any((p < 0) | (p > 1)):
        raise ValueError(f"p_values must be finite and in [0, 1], got {p.tolist()}")
    order = np.argsort(p, kind="stable")
    m = len(p)
    steps = np.minimum(1.0, (m - np.arange(m)) * p[order])
    adjusted = np.empty(m)
    adjusted[order] = np.maximum.accumulate(steps) if m else steps
    return adjusted


@dataclass(frozen=True)
class Claim:
    """One declared claim. ``name`` is the claim text the :class:`~attnstruct.stats.verdicts.Effect` carries;
    ``unit`` what is resampled (seed, model, family); ``statistic`` the quantity and its aggregation (over layers,
    steps, units); ``test`` the test; ``null`` the null of this question; ``role`` ``"primary"`` or
    ``"secondary"``."""

    name: str
    unit: str
    statistic: str
    test: str
    null: str
    role: str = "primary"

    def __post_init__(self):
        if self.role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, got {self.role!r}")
        for field in ("name", "unit", "statistic", "test", "null"):
            if not str(getattr(self, field)).strip():
                raise ValueError(f"a claim's {field} must not be empty")


@dataclass(frozen=True)
class Plan:
    """A notebook's declared claims and the level ``alpha`` they are decided at."""

    notebook: str
    claims: tuple[Claim, ...]
    alpha: float = 0.05

    def __post_init__(self):
        _check(alpha=self.alpha)
        names = [c.name for c in self.claims]
        if not names:
            raise ValueError(f"the plan of {self.notebook} declares no claim")
        if len(set(names)) != len(names):
            raise ValueError(f"the plan of {self.notebook} declares a claim twice: {sorted(names)}")
        object.__setattr__(self, "claims", tuple(self.claims))

    @property
    def primary(self) -> tuple[Claim, ...]:
        """The claims of the family that Holm corrects."""
        return tuple(c for c in self.claims if c.role == "primary")

    def claim(self, name: str) -> Claim:
        """The declared claim called ``name``; ``KeyError`` naming the plan's claims otherwise."""
        for c in self.claims:
            if c.name == name:
                return c
        declared = [c.name for c in self.claims]
        raise KeyError(f"{name!r} is not a claim of the plan of {self.notebook}; it declares {declared}")

    def smallest_after_correction(self, name: str, smallest: float) -> float:
        """The smallest p claim ``name`` can reach after the correction, its design's own being ``smallest``:
        ``min(1, m * smallest)`` for a primary claim among ``m``, ``smallest`` for a secondary one."""
        m = len(self.primary) if self.claim(name).role == "primary" else 1
        return min(1.0, m * float(smallest))

    def table(self, smallest: Mapping[str, float] | None = None) -> pd.DataFrame:
        """One row per claim, indexed by claim: unit, statistic, test, null, role, the correction, and (for the claims
        in ``smallest``, name -> the smallest p the design can reach at the notebook's ``n``) that p before and after
        the correction and whether a verdict is reachable (``after < alpha``)."""
        smallest = dict(smallest or {})
        unknown = sorted(set(smallest) - {c.name for c in self.claims})
        if unknown:
            raise KeyError(f"{unknown} are not claims of the plan of {self.notebook}")
        m = len(self.primary)
        rows = []
        for c in self.claims:
            row = {"claim": c.name, "role": c.role, "unit": c.unit, "statistic": c.statistic, "test": c.test}
            row |= {"null": c.null, "correction": f"Holm over {m}" if c.role == "primary" else "none (secondary)"}
            low = smallest.get(c.name, math.nan)
            after = self.smallest_after_correction(c.name, low) if c.name in smallest else math.nan
            rows.append(row | {"smallest p": low, "after correction": after, "reachable": bool(after < self.alpha)})
        return pd.DataFrame(rows).set_index("claim")

    def decide(self, effects: Sequence[Effect]) -> list[Effect]:
        """The verdicts of ``effects`` under the plan, in their order.

        Every effect must name a declared claim, once (``KeyError`` / ``ValueError`` otherwise). The primary effects'
        p-values are Holm-adjusted together (their ``p_opposite`` too, as a family of their own), and so is the
        smallest p each could reach (:meth:`smallest_after_correction`); each is then decided again by
        :func:`~attnstruct.stats.verdicts.decide` with those values, keeping its interval, null and ``learned``, and
        its smallest detectable effect is that of a test at ``alpha / m`` (Holm's first step). A
        secondary effect keeps its p and verdict. Each returned effect carries ``p_adjusted`` and its ``family``
        (*primary, Holm over m claims* or *secondary, uncorrected*), which its line prints
        (:func:`attnstruct.report.prose.effect_line`); an effect of one unit (no test) keeps its verdict.
        """
        effects = list(effects)
        names = [e.claim for e in effects]
        for name in names:
            self.claim(name)
        if len(set(names)) != len(names):
            raise ValueError(f"an effect of the plan of {self.notebook} is given twice: {sorted(names)}")
        tested = [i for i, e in enumerate(effects) if self.claim(e.claim).role == "primary" and e.n > 1]
        m = len(self.primary)
        # the primary claims not measured here count towards m all the same: the family is the declared one
        pad = [1.0] * (m - len(tested))
        adjusted = holm([effects[i].p_value for i in tested] + pad)[: len(tested)]
        opposite = [effects[i].p_opposite for i in tested]
        has_opposite = all(np.isfinite(opposite))
        adjusted_opposite = holm(opposite + pad)[: len(tested)] if has_opposite else [None] * len(tested)
        out, family = list(effects), f"primary, Holm over {count(m, 'claim')}"
        for i, p, p_opp in zip(tested, adjusted, adjusted_opposite):
            e = effects[i]
            smallest = self.smallest_after_correction(e.claim, e.smallest)
            verdict, reason = decide(
                Interval(e.estimate, e.low, e.high, e.level, e.n),
                float(p),
                predicted_sign=+1 if e.alternative == "greater" else -1,
                alpha=self.alpha,
                null=e.null,
                p_opposite=None if p_opp is None else float(p_opp),
                unit=e.unit,
                smallest=smallest,
                learned=e.learned,
            )
            detectable = e.detectable_at(self.alpha / m)  # Holm's first step tests the smallest p at alpha / m
            out[i] = replace(
                e, verdict=verdict, reason=reason, p_adjusted=float(p), family=family, detectable=detectable
            )
        for i, e in enumerate(effects):
            if self.claim(e.claim).role == "secondary":
                out[i] = replace(e, p_adjusted=e.p_value, family="secondary, uncorrected")
            elif i not in tested:
                out[i] = replace(e, family=family)
        return out


@dataclass(frozen=True)
class PlanReach:
    """What a plan's design can reach: its ``primary`` claims (corrected by Holm's method) and ``secondary`` ones
    (uncorrected), counted (``"1 primary claim"``); whether it has a primary claim (``has_primary``); the smallest p a
    primary claim can reach after the correction (``smallest``) against ``alpha``, whether it is below
    (``reachable``), the ``verdict`` the primary claims read when it is not; and that smallest p were every one of the
    ``claims`` primary (``every``). Without a primary claim the p fields are empty."""

    primary: str
    secondary: str
    has_primary: bool
    smallest: str
    alpha: str
    reachable: bool
    verdict: str
    claims: str
    every: str


def plan_reach(plan: Plan, smallest: Mapping[str, float]) -> PlanReach:
    """The reach of ``plan``'s design, ``smallest`` giving each claim's smallest attainable p before the correction
    (every primary claim named; ``KeyError`` otherwise): the smallest over the primary claims after
    :meth:`Plan.smallest_after_correction`, and what it would be with every claim primary (a claim not in ``smallest``
    counting as 1)."""
    primary = plan.primary
    missing = sorted(c.name for c in primary if c.name not in smallest)
    if missing:
        raise KeyError(f"smallest must give every primary claim of the plan of {plan.notebook}; missing {missing}")
    after = min((plan.smallest_after_correction(c.name, smallest[c.name]) for c in primary), default=math.nan)
    every = min(1.0, len(plan.claims) * min(float(smallest.get(c.name, 1.0)) for c in plan.claims))
    return PlanReach(
        primary=count(len(primary), "primary claim"),
        secondary=count(len(plan.claims) - len(primary), "secondary claim"),
        has_primary=bool(primary),
        smallest=f"{after:.3g}" if primary else "",
        alpha=f"{plan.alpha:g}",
        reachable=bool(after < plan.alpha),
        verdict=CANNOT_TELL,
        claims=str(len(plan.claims)),
        every=f"{every:.3g}" if primary else "",
    )
