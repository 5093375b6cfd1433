"""The project's headline findings, checked on the datasets of a finished ``make reproduce`` (``make findings``).

Each :class:`Finding` reads one notebook's dataset (``results/NN_topic.nc``), recomputes its claim with the same
function whose result the notebook prints, and returns an :class:`Outcome`: whether the outcome the finding
expects is met, in one line with the numbers. Nothing is typed: the parameters (widths, null draws, seeds) come
from the dataset's ``parameters`` attribute.

Every finding is an :class:`attnstruct.stats.Effect`, and expects the strongest outcome its design allows:

- **holds** (:func:`attnstruct.stats.decide`) when its test can reach ``p < alpha`` at all, i.e. when the smallest
  attainable p of its units (``Effect.smallest``: ``1 / 2**n`` for a sign-flip test of ``n`` seeds, ``1 / C(n + m,
  n)`` for a two-sample test of ``n`` against ``m`` stacks) is below ``alpha``;
- otherwise **the predicted side**: the same rule with the p-value condition set aside, i.e. the interval strictly
  on the predicted side of 0 and the estimate beyond the null's 95% range on that side. The notebook's verdict is
  then "cannot tell at this scale" whatever the data (3 seeds: p >= 0.125; 2 stacks against 2: p >= 1/6), so only
  the direction can flip.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import xarray as xr

from .. import results, stats
from ..report import prose
from . import nb05_training_dynamics, nb07_vision, paper_comparison, pretrained_scores, text_runs

ALPHA = 0.05


@dataclass(frozen=True)
class Outcome:
    """A finding's result on one dataset: ``met`` and one line saying what was measured and what was expected."""

    claim: str
    met: bool
    line: str


@dataclass(frozen=True)
class Finding:
    """``measure(dataset)`` of notebook ``notebook``'s dataset gives the :class:`Outcome` of ``claim``."""

    notebook: str
    claim: str
    measure: Callable[[xr.Dataset], Outcome]

    def dataset_path(self, results_dir: Path) -> Path:
        return Path(results_dir) / f"{self.notebook}.nc"

    def check(self, results_dir: Path) -> Outcome:
        return self.measure(results.load_dataset(self.dataset_path(results_dir)))


def parameters(ds: xr.Dataset) -> dict:
    """The notebook parameters recorded in a dataset's attrs."""
    return json.loads(ds.attrs["parameters"])


def holds_but_for_the_p_value(effect: stats.Effect, alpha: float = ALPHA) -> bool:
    """:func:`attnstruct.stats.verdicts.decide` on ``effect``'s interval and null with the p-value condition met: the
    runs learned, the interval strictly on the predicted side of 0, and the estimate beyond the null's 95% range on
    that side."""
    if effect.n < 2:
        return False
    interval = stats.Interval(effect.estimate, effect.low, effect.high, effect.level, effect.n)
    sign = +1 if effect.alternative == "greater" else -1
    verdict, _ = stats.decide(
        interval, 0.0, predicted_sign=sign, alpha=alpha, null=effect.null, smallest=0.0, learned=effect.learned
    )
    return verdict == stats.VERDICTS[0]


def effect_outcome(effect: stats.Effect, alpha: float = ALPHA) -> Outcome:
    """The :class:`Outcome` of ``effect`` against the strongest outcome its number of units allows (module doc)."""
    if effect.n >= 2 and effect.smallest < alpha:
        expected, met = "expected: holds", effect.verdict == stats.VERDICTS[0]
    else:
        expected = (
            f"expected: the predicted side (with {effect.n} {effect.unit}s the {effect.test} test cannot reach "
            f"p < {alpha:g}: its smallest p is {effect.smallest:.3g})"
        )
        met = holds_but_for_the_p_value(effect, alpha)
    return Outcome(effect.claim, met, f"{prose.effect_line(effect)}; {expected}")


def training_symmetry_gap(ds: xr.Dataset) -> Outcome:
    """05: the encoder ends more symmetric than the decoder
    (:func:`attnstruct.analyses.nb05_training_dynamics.objective_effects`)."""
    p = parameters(ds)
    shape = nb05_training_dynamics.Shape(p["d_model"], p["n_heads"], p["n_layers"])
    learned = text_runs.learned_by(text_runs.loss_targets(ds, float(ds.attrs["unigram_entropy"])), "objective")
    gap = nb05_training_dynamics.objective_effects(ds, shape, n_draws=p["n_null_draws"], learned=learned)[0]
    return effect_outcome(gap)


def vision_prediction(claim: str) -> Callable[[xr.Dataset], Outcome]:
    """07: one prediction of :data:`attnstruct.analyses.nb07_vision.PREDICTIONS`, by its claim."""

    def measure(ds: xr.Dataset) -> Outcome:
        p = parameters(ds)
        comparison = nb07_vision.compare_objectives(
            nb07_vision.final_summary(ds),
            learned=nb07_vision.learned_in_dataset(ds),
            d_model=p["d_model"],
            n_heads=p["n_heads"],
            n_layers=p["n_layers"],
            n_draws=p["n_null_draws"],
            seed=p["seed"],
        )
        effects = {e.claim: e for e in comparison.effects}
        if claim not in effects:
            return Outcome(claim, False, f"{claim}: not tested ({'; '.join(comparison.untested) or 'no such claim'})")
        return effect_outcome(effects[claim])

    return measure


def pretrained_ordering(ds: xr.Dataset) -> Outcome:
    """03: the packaged encoder stacks are more symmetric than the packaged decoder stacks (self-attention), by
    :func:`attnstruct.analyses.paper_comparison.role_effect` (one stack, one unit)."""
    effect = paper_comparison.role_effect(pretrained_scores.stack_summary(ds), "symmetry")
    if effect is None:
        return Outcome("encoder minus decoder stacks, median symmetry over layers", False, "no stack of each role")
    return effect_outcome(effect)


FINDINGS = (
    Finding("05_training_dynamics", "encoder minus decoder, final median symmetry", training_symmetry_gap),
    Finding(
        "07_vision",
        "masked minus next-patch, symmetry (median over layers)",
        vision_prediction("masked minus next-patch, symmetry (median over layers)"),
    ),
    Finding(
        "07_vision",
        "classify-mean minus next-patch, symmetry (median over layers)",
        vision_prediction("classify-mean minus next-patch, symmetry (median over layers)"),
    ),
    Finding("03_pretrained_models", "encoder minus decoder stacks, median symmetry over layers", pretrained_ordering),
)
