"""The project's headline findings, checked on the datasets of a finished ``make reproduce`` (``make findings``).

Each :class:`Finding` reads one notebook's dataset (``results/NN_topic.nc``), recomputes its claim with the same
function whose result the notebook prints, and returns an :class:`Outcome`: whether the outcome the finding
expects is met, in one line with the numbers. Nothing is typed: the parameters (widths, null draws, seeds) come
from the dataset's ``parameters`` attribute.

What a finding built on an :class:`attnstruct.evidence.Effect` expects is the strongest outcome its design allows:

- **holds** (:func:`attnstruct.evidence.decide`) when the test can reach ``p < alpha`` at all, i.e. when the
  smallest attainable p of ``n`` seeds (:func:`attnstruct.evidence.smallest_p`) is below ``alpha``;
- otherwise **the predicted side**: the same rule with the p-value condition set aside, i.e. the interval strictly
  on the predicted side of 0 and the estimate beyond the null's 95% range on that side. The notebook's verdict is
  then "cannot tell at this scale" whatever the runs do (3 seeds: p >= 0.125), so only the direction can flip.

Notebook 03's ordering of the packaged stacks is a share of (encoder, decoder) pairs, not a test
(:func:`attnstruct.paper_comparison.is_papers_ordering`); its finding expects the paper's ordering.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import xarray as xr

from . import evidence, paper_comparison, pretrained, results, vision, vision_verdicts
from . import training_evidence as te

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


def holds_but_for_the_p_value(effect: evidence.Effect, alpha: float = ALPHA) -> bool:
    """:func:`attnstruct.evidence.decide` on ``effect``'s interval and null with the p-value condition met: the
    interval strictly on the predicted side of 0, and the estimate beyond the null's 95% range on that side."""
    if effect.n < 2:
        return False
    interval = evidence.Interval(effect.estimate, effect.low, effect.high, effect.level, effect.n)
    sign = +1 if effect.alternative == "greater" else -1
    verdict, _ = evidence.decide(interval, 0.0, predicted_sign=sign, alpha=alpha, null=effect.null, smallest=0.0)
    return verdict == evidence.VERDICTS[0]


def effect_outcome(effect: evidence.Effect, alpha: float = ALPHA) -> Outcome:
    """The :class:`Outcome` of ``effect`` against the strongest outcome its number of units allows (module doc)."""
    if effect.n >= 2 and evidence.smallest_p(effect.n) < alpha:
        expected, met = "expected: holds", effect.verdict == evidence.VERDICTS[0]
    else:
        expected = (
            f"expected: the predicted side (with {effect.n} {effect.unit}s no test reaches p < {alpha:g}, so the "
            "verdict cannot be 'holds')"
        )
        met = holds_but_for_the_p_value(effect, alpha)
    return Outcome(effect.claim, met, f"{effect.sentence()}; {expected}")


def training_symmetry_gap(ds: xr.Dataset) -> Outcome:
    """05: the encoder ends more symmetric than the decoder (:func:`attnstruct.training_evidence.objective_effects`)."""
    p = parameters(ds)
    shape = te.Shape(p["d_model"], p["n_heads"], p["n_layers"])
    gap = te.objective_effects(ds, shape, n_draws=p["n_null_draws"])[0]
    return effect_outcome(gap)


def vision_prediction(claim: str) -> Callable[[xr.Dataset], Outcome]:
    """07: one prediction of :data:`attnstruct.vision_verdicts.PREDICTIONS`, by its claim."""

    def measure(ds: xr.Dataset) -> Outcome:
        p = parameters(ds)
        comparison = vision_verdicts.compare_objectives(
            vision.final_summary(ds),
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
    """03: the packaged encoder stacks are more symmetric than the packaged decoder stacks (self-attention)."""
    own = pretrained.summary(ds)
    own = own[own["attention"] == "self"]
    share = paper_comparison.ordering_probability(own, "symmetry")
    n_enc, n_dec = (int((own["stack"] == s).sum()) for s in ("encoder", "decoder"))
    met = paper_comparison.is_papers_ordering(share)
    line = (
        f"an encoder stack is the more symmetric in {share:.0%} of the {n_enc} x {n_dec} (encoder, decoder) pairs of "
        f"{', '.join(dict.fromkeys(own['model']))}; expected: the paper's ordering (more than half)"
    )
    return Outcome("encoder stacks more symmetric than decoder stacks", met, line)


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
    Finding("03_pretrained_models", "encoder stacks more symmetric than decoder stacks", pretrained_ordering),
)
