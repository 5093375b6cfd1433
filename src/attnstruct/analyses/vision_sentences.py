"""The sentences of notebook 07, computed from its runs: each function returns Markdown (shown with
:func:`attnstruct.report.prose.show`), and every verdict word in it comes from :mod:`attnstruct.stats` through
:mod:`attnstruct.analyses.vision_objectives`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd
import xarray as xr

from .. import stats
from ..report import prose
from ..tasks.vision import CLASSIFIERS
from .vision_objectives import (
    NOT_PREDICTED,
    PREDICTIONS,
    Comparison,
    Prediction,
    per_seed,
    resting_on,
    uniform_loss,
)

TARGETS = {
    "classify": "the class frequencies of the training labels",
    "classify-mean": "the class frequencies of the training labels",
    "masked": "the grey-level frequencies of the training pixels",
    "next-patch": "the grey-level frequencies of the training pixels",
}
NULL_BLOCKS = (
    ("Final median symmetry over layers", "symmetry", "median"),
    ("Final symmetry of the last layer", "symmetry", "last"),
    ("Final median directionality over layers", "directionality", "median"),
)


def describe_reported(reported: pd.DataFrame) -> str:
    """The paper's vision numbers, from :func:`attnstruct.analyses.paper_comparison.reported_vision`'s table: the
    range of the median symmetry over layers of its encoders, of the supervised and the masked-image groups and
    of iGPT, and iGPT's directionality."""
    groups = reported.groupby("group", sort=False)
    span = {name: prose.span(rows.symmetry_median) for name, rows in groups}
    encoders = prose.span(reported.loc[reported.role == "encoder", "symmetry_median"])
    igpt = reported[reported.group == "autoregressive (iGPT)"]
    return (
        f"The paper's vision encoders score a median symmetry over layers of {encoders}: supervised ViT and DeiT "
        f"{span.get('supervised (ViT, DeiT)', 'none')}, masked image modelling (BEiT, MAE, DiT) "
        f"{span.get('masked image modelling (BEiT, MAE, DiT)', 'none')}. The one autoregressive image model, "
        f"iGPT, scores {span.get('autoregressive (iGPT)', 'none')} (directionality "
        f"{prose.span(igpt.directionality_median)}). These are the authors' values (their result files, without "
        f"the entries flagged as extraction problems), not ours."
    )


def describe_predictions(
    predictions: Sequence[Prediction] = PREDICTIONS, not_predicted: Sequence[str] = NOT_PREDICTED
) -> str:
    """The comparisons the theory predicts (treated minus baseline, with the predicted sign and why) and those it
    leaves open, as two Markdown lists."""
    side = {+1: "positive", -1: "negative"}
    return (
        "**Predicted** (treated minus baseline, per seed):\n\n"
        + "\n".join(f"- {p.claim}: {side[p.sign]}; {p.why}." for p in predictions)
        + "\n\n**Not predicted:**\n\n"
        + "\n".join(f"- {line}." for line in not_predicted)
    )


def describe_learning(learning: pd.DataFrame, levels: int, n_classes: int = 10) -> str:
    """Per objective, from :func:`attnstruct.analyses.vision_objectives.learning_table`: the context-free loss and
    what it is made of, the threshold and margin of the criterion, and each seed's final validation loss with
    whether it met the criterion; the classifiers' final accuracy against chance ``1 / n_classes``."""
    lines = []
    for objective, rows in learning.groupby("objective", sort=False):
        context_free, margin = float(rows.context_free.iloc[0]), float(rows.margin.iloc[0])
        seeds = ", ".join(
            f"{prose.number(r.val_loss)} (seed {int(r.seed)}, {'met' if r.learned else 'not met'})"
            for r in rows.itertuples()
        )
        line = (
            f"- `{objective}`: context-free loss {prose.number(context_free)} nats ({TARGETS[objective]}; a uniform "
            f"guess scores {prose.number(uniform_loss(objective, levels, n_classes))}); learned means a final "
            f"validation loss below {prose.number(float(rows.threshold.iloc[0]))}, {prose.percent(margin)} below it. "
            f"Final validation loss {seeds}: {int(rows.learned.sum())} of {prose.count(len(rows), 'seed')} met it"
        )
        if objective in CLASSIFIERS:
            line += (
                f"; final validation accuracy {prose.span(rows.val_accuracy, 0, fmt=prose.percent)} "
                f"(chance {prose.percent(1 / n_classes)})"
            )
        lines.append(line + ".")
    return "\n".join(lines)


def describe_gate(learned: Mapping[str, bool], predictions: Sequence[Prediction] = PREDICTIONS) -> str:
    """Which objectives' runs did not all learn, and which predictions that leaves without a verdict."""
    failed = [o for o, ok in learned.items() if not ok]
    if not failed:
        return (
            f"Every run of {prose.listing(list(learned), fmt=lambda o, _: f'`{o}`')} met the criterion: the "
            "predictions of section 6 are tested on runs that learned."
        )
    claims = [p.claim for p in resting_on(failed, predictions)]
    who = prose.listing(failed, fmt=lambda o, _: f"`{o}`")
    return f"Not every run of {who} met the criterion. " + (
        f"The predictions that rest on {'it' if len(failed) == 1 else 'them'} ({'; '.join(claims)}) read "
        f"*{stats.CANNOT_TELL}: {stats.NOT_LEARNED}*, whatever their scores show."
        if claims
        else "No prediction rests on them."
    )


def describe_trajectories(runs: xr.Dataset) -> str:
    """Per objective: the median symmetry over layers (mean over seeds) at its highest during training, at which
    step, and at the end."""
    lines = []
    for objective in runs.objective.values:
        curve = runs.symmetry.sel(objective=objective).median("layer").mean("seed")
        peak = int(curve.argmax("step"))
        lines.append(
            f"- `{objective}`: highest {prose.signed(curve[peak])} at step {int(curve.step[peak])}, "
            f"{prose.signed(curve[-1])} at the end (step {int(curve.step[-1])})."
        )
    return "Median symmetry over layers, mean over seeds:\n\n" + "\n".join(lines)


def describe_layers(runs: xr.Dataset, score: str = "symmetry") -> str:
    """Per objective: each layer's final ``score``, mean over seeds, first layer to last."""
    final = runs[score].isel(step=-1).mean("seed")
    lines = [
        f"- `{o}`: {prose.listing(final.sel(objective=o).values)} (layer {int(runs.layer[0])} to "
        f"{int(runs.layer[-1])})."
        for o in runs.objective.values
    ]
    return f"Final {score} of each layer, mean over seeds:\n\n" + "\n".join(lines)


def describe_nulls(nulls: pd.DataFrame, score: str = "symmetry", place: str = "median") -> list[str]:
    """One Markdown line per objective: its per-seed values of ``score`` at ``place`` and where they sit in the
    null (:func:`attnstruct.analyses.vision_objectives.null_table`)."""
    lines = []
    for row in nulls[(nulls.score == score) & (nulls.place == place)].itertuples():
        percentiles = prose.span([row.percentile_low, row.percentile_high], 0, fmt=prose.number)
        lines.append(
            f"- `{row.objective}`: {prose.span([row.low, row.high])} over {prose.count(row.n, 'seed')} (mean "
            f"{prose.signed(row.mean)}); null percentile {percentiles}; {row.n_outside} of {row.n} outside the null's "
            f"95% range [{prose.signed(row.null_low)}, {prose.signed(row.null_high)}] (centre "
            f"{prose.signed(row.null_median)}), {row.n_above} above it."
        )
    return lines


def describe_null_tables(nulls: pd.DataFrame) -> str:
    """:func:`describe_nulls` for each block of :data:`NULL_BLOCKS`, under its title."""
    return "\n\n".join(
        f"**{title}**, per objective:\n\n" + "\n".join(describe_nulls(nulls, score, place))
        for title, score, place in NULL_BLOCKS
    )


def describe_effects(comparison: Comparison) -> list[str]:
    """Each tested prediction's :meth:`attnstruct.stats.Effect.sentence`, the untested ones, and the overall
    verdict with its counts, as Markdown lines."""
    lines = [f"- {e.sentence()}" for e in comparison.effects]
    lines += [f"- not tested: {u}" for u in comparison.untested]
    verdicts = [e.verdict for e in comparison.effects]
    held, failed = verdicts.count(stats.HOLDS), verdicts.count(stats.DOES_NOT_HOLD)
    unlearned = sum(e.reason == stats.NOT_LEARNED for e in comparison.effects)
    n = len(verdicts)
    lines.append(
        f"\n**Overall: {comparison.overall}** ({held} of {n} tested predictions hold, {failed} do not, "
        f"{n - held - failed} cannot be told at this scale"
        + (f", {unlearned} of them because the runs did not learn" if unlearned else "")
        + ")."
    )
    return lines


def describe_unpredicted(summary: pd.DataFrame) -> str:
    """What the runs show where the theory makes no prediction: ``classify`` against the others, per seed (a
    description: no test, no verdict); empty without ``classify``."""
    if "classify" not in set(summary.objective):
        return ""
    own = per_seed(summary, "classify", "symmetry_median")
    lines = []
    for other in ("masked", "next-patch", "classify-mean"):
        if other in set(summary.objective):
            theirs = per_seed(summary, other, "symmetry_median").reindex(own.index)
            below = int((own < theirs).sum())
            lines.append(
                f"`classify` ends below `{other}` in {below} of {prose.count(len(own), 'seed')} "
                f"(median symmetry over layers, mean difference {prose.signed((own - theirs).mean())})."
            )
    return "Where the theory predicts nothing (`classify`'s median over layers): " + " ".join(lines)


def describe_local(local: pd.DataFrame) -> str:
    """The local checkpoints scored (:func:`attnstruct.analyses.vision_results.local_summary`), or that none was
    given."""
    if local.empty:
        return "No local checkpoints given (parameter `local_models`)."
    models = prose.listing(list(dict.fromkeys(local.model)), fmt=lambda m, _: f"`{m}`")
    return f"{prose.count(local.model.nunique(), 'local checkpoint')} scored: {models}; their summary below."
