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

The **companion-wide family** (:data:`HEADLINES`): one headline claim per notebook with a plan, its plan's primary
claim (09's: the matched pairs of Ettin, read from the hub; offline, 09's pairs re-read notebook 05's runs, so 09 adds
no headline and 05's is counted once). Their p-values are Holm-corrected together across notebooks
(:func:`family_table`), the claims not tested in a build counting with p = 1: the family is the declared one.
:func:`family_reach` says from the design alone (the units of each notebook's quick profile) which headline could
survive that correction at all: Holm's adjusted p-values only grow with any p, so a claim survives at best when every
claim reaches its smallest p. A family design (03, 08: model families, a permutation test whose smallest p depends
on the families read) is set at p = 0 there, the most favourable to the others. README's findings table is
:func:`readme_table`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import xarray as xr

from .. import notebooks, results, stats
from ..report import prose
from . import nb05_training_dynamics, nb07_vision, nb10_attention_sinks, paper_comparison, pretrained_scores, text_runs

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


def sink_free_directionality(ds: xr.Dataset) -> Outcome:
    """10: the sigmoid decoder ends less column-dominant than the softmax decoder of the same seed
    (:func:`attnstruct.analyses.nb10_attention_sinks.normalisation_effects`), the claim declared before the runs."""
    effect = nb10_attention_sinks.primary_effect(nb10_attention_sinks.effects_of_dataset(ds))
    if effect is None:
        return Outcome(nb10_attention_sinks.PRIMARY, False, f"{nb10_attention_sinks.PRIMARY}: not tested")
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
    Finding("10_attention_sinks", nb10_attention_sinks.PRIMARY, sink_free_directionality),
)


# ---------------------------------------------------------------------------------------------- the headline family


@dataclass(frozen=True)
class Headline:
    """One notebook's headline claim: the ``claim`` its dataset's ``verdicts`` name, its ``unit``, and where its
    design's number of units is a notebook parameter (``seeds``: that parameter, a list of seeds or a count), else
    None (a family design, whose units are the model families read). ``offline`` is false for a claim the quick
    profile cannot test (it needs the hub), with ``instead`` saying why."""

    notebook: str
    claim: str
    unit: str
    seeds: str | None
    offline: bool = True
    instead: str = ""


HEADLINES = (
    Headline("03_pretrained_models",
             "encoder minus decoder model families, median symmetry (the authors' language models)", "model family",
             None),
    Headline("04_gradient_structure", "copy task, W_qk: final symmetry, bidirectional minus causal", "seed", "n_seeds"),
    Headline("05_training_dynamics", "encoder minus decoder, final median symmetry", "seed", "seeds"),
    Headline("06_symmetric_init", "mlm: final validation loss, placebo minus symmetric", "seed", "seeds"),
    Headline("07_vision", "masked minus next-patch, symmetry (median over layers)", "seed", "n_seeds"),
    Headline("08_model_sweep", "encoder minus decoder model families, median symmetry (the models swept)",
             "model family", None),
    Headline("09_dynamics_at_scale", "ettin: encoder minus decoder, median symmetry", "size", None, offline=False,
             instead="offline, 09's pairs are 05's runs read again: counted once, in 05"),
    Headline("10_attention_sinks", "decoder final median directionality, sigmoid minus softmax", "seed", "seeds"),
)  # fmt: skip
"""The companion's headline claims, one per notebook with a plan, each its plan's primary claim."""


def quick_units(headline: Headline, root: str | Path | None = None) -> int | None:
    """The number of seeds of ``headline``'s design at the quick profile (its notebook's parameters cell), or None
    (a family design, or a claim the quick profile does not test)."""
    if headline.seeds is None or not headline.offline:
        return None
    source = notebooks.resolve_notebook(notebooks.project_root(root), headline.notebook)
    value = notebooks.declared_parameters(notebooks.read_notebook(source))[headline.seeds]
    return len(value) if isinstance(value, (list, tuple)) else int(value)


def family_reach(units: Mapping[str, int | None], alpha: float = ALPHA) -> dict[str, float]:
    """Notebook -> the smallest Holm-adjusted p its headline can reach across :data:`HEADLINES` (module docstring):
    a seed design of ``n`` units at ``1 / 2**n``, a family design (``None``) at 0, a notebook missing from ``units``
    at 1 (not tested)."""
    smallest = []
    for h in HEADLINES:
        if h.notebook not in units:
            smallest.append(1.0)
        else:
            n = units[h.notebook]
            smallest.append(0.0 if n is None else stats.smallest_p(n))
    return dict(zip((h.notebook for h in HEADLINES), stats.holm(smallest), strict=True))


def family_table(p_values: Mapping[str, float]) -> pd.DataFrame:
    """One row per headline of :data:`HEADLINES`, indexed by notebook: its claim, its ``p`` (NaN where the build did
    not test it), and ``adjusted``, Holm's correction across the family, an untested claim counting with p = 1."""
    p = [float(p_values.get(h.notebook, math.nan)) for h in HEADLINES]
    adjusted = stats.holm([1.0 if math.isnan(v) else v for v in p])
    rows = [
        {"notebook": h.notebook, "claim": h.claim, "p": v, "adjusted": a, "survives": bool(a < ALPHA)}
        for h, v, a in zip(HEADLINES, p, adjusted, strict=True)
    ]
    return pd.DataFrame(rows).set_index("notebook")


def headline_p_values(verdicts: Mapping[str, Mapping[str, Mapping]]) -> dict[str, float]:
    """Notebook -> its headline's p (uncorrected within the notebook), from each notebook's ``verdicts`` table
    (claim -> row, as the datasets store it). A notebook whose verdicts lack its headline, as 09 offline, whose pairs
    are 05's (its ``local pairs`` claim is not its headline), adds nothing: 05's claim is counted once."""
    out = {}
    for h in HEADLINES:
        row = verdicts.get(h.notebook, {}).get(h.claim)
        if row is not None and row.get("p_value") is not None:
            out[h.notebook] = float(row["p_value"])
    return out


def build_verdicts(results_dir: str | Path) -> dict[str, dict]:
    """Notebook -> its dataset's ``verdicts`` (claim -> row), for the datasets of :data:`HEADLINES` in
    ``results_dir`` that exist."""
    out = {}
    for h in HEADLINES:
        path = Path(results_dir) / f"{h.notebook}.nc"
        if path.is_file():
            out[h.notebook] = json.loads(results.load_dataset(path).attrs.get("verdicts", "{}"))
    return out


def readme_table(root: str | Path | None = None, alpha: float = ALPHA, more_seeds: int = 8) -> str:
    """README's findings table (Markdown): per headline, its design at the quick profile, the smallest p it can reach
    there, the smallest after Holm across the family (:func:`family_reach`), whether it can survive, and whether it
    could with ``more_seeds`` seeds per seed design."""
    quick = {h.notebook: quick_units(h, root) for h in HEADLINES if h.offline}
    more = {nb: (None if n is None else more_seeds) for nb, n in quick.items()}
    at_quick, at_more = family_reach(quick, alpha), family_reach(more, alpha)
    rows = []
    for h in HEADLINES:
        n = quick.get(h.notebook)
        if not h.offline:
            design, smallest = f"not in the quick profile ({h.instead})", ""
        elif n is None:
            design, smallest = "model families, permutation", "depends on the families read"
        else:
            design, smallest = f"{prose.count(n, h.unit)}, sign-flip", f"1/{2**n}"
        tested = h.offline
        rows.append(
            {
                "notebook": f"`{h.notebook}`",
                "headline claim": h.claim,
                "design at the quick profile": design,
                "smallest p": smallest,
                f"smallest after Holm over {len(HEADLINES)}": f"{at_quick[h.notebook]:.3g}" if tested and n else "",
                "can survive": ("yes" if at_quick[h.notebook] < alpha else "no") if tested and n else "",
                f"with {more_seeds} seeds": ("yes" if at_more[h.notebook] < alpha else "no") if tested and n else "",
            }
        )
    return prose.markdown_table(pd.DataFrame(rows).set_index("notebook"))


if __name__ == "__main__":  # README's findings table: python -m attnstruct.analyses.findings
    print(readme_table())
