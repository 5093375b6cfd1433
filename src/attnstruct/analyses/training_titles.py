"""Message titles of the figures of notebooks 05 and 06 (training runs over seeds): each says what its figure
shows, in words, with every number in it computed from the data drawn; where the runs are too few or did not learn,
the title says what is drawn instead of claiming a finding (:func:`no_finding`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import xarray as xr

from ..report.prose import count, signed, span
from .figure_titles import SCORES, more_symmetric


# Notebooks 05 and 06: training runs over seeds
def no_finding(n_seeds: int, learned: bool = True) -> str | None:
    """Why a figure of runs over ``n_seeds`` seeds carries no finding, or None when it may state one: runs short of
    their loss target (``learned`` false) describe nothing the objective did, and too few seeds for a one-sided
    sign-flip test to reach ``p < alpha`` (:func:`attnstruct.stats.smallest_p`) cannot order the arms."""
    from .. import stats
    from . import gates

    if not learned:
        return stats.NOT_LEARNED
    if stats.smallest_p(int(n_seeds)) >= gates.ALPHA:
        return f"{count(int(n_seeds), 'seed')}, too few to compare"
    return None


def _nats(value: float) -> str:
    """``0.41 nats below`` / ``0.12 nats above``: how far a loss ends under a level (``value`` = level - loss)."""
    return f"{abs(float(value)):.2f} nats {'below' if value >= 0 else 'above'}"


# Notebook 05
def loss_targets(targets: pd.DataFrame) -> str:
    """The learning gate (:func:`attnstruct.analyses.gates.loss_targets`' table): how many runs met their loss
    target, and per objective how far the final validation loss ends below the unigram entropy (mean over seeds)."""
    from .training_dynamics import label

    rows = targets.reset_index()
    met, n = int(rows["met"].sum()), len(rows)
    lead = "Every run reaches its loss target" if met == n else f"{met} of {count(n, 'run')} reach their loss target"
    below = rows.groupby("objective", sort=False)["below_unigram"].mean()
    parts = [f"{label(o)} {_nats(v)}" for o, v in below.items()]
    return f"{lead};\nfinal validation loss against the unigram entropy,\nmean over seeds: " + ",\n".join(parts)


def scores_over_training(ds: xr.Dataset, learned: bool = True) -> str:
    """Notebook 05's runs (``symmetry``, ``directionality`` over ``(objective, seed, step, layer)``): with enough
    seeds of runs that learned, in how many seeds the encoder ends more symmetric than the decoder (the primary
    claim's statistic, the final median over layers); always the final medians over seeds of both scores."""
    from .training_dynamics import DECODER, ENCODER, final_median, has_both, label

    finals = {s: final_median(ds, s).median("seed") for s in SCORES}
    roles = {o: label(o).split(" (")[0] for o in ds.objective.values}
    tail = "final median over layers (median over seeds): " + ";\n".join(
        f"{s} " + ", ".join(f"{signed(finals[s].sel(objective=o))} ({role})" for o, role in roles.items())
        for s in SCORES
    )
    reason = no_finding(ds.sizes["seed"], learned)
    if reason is not None or not has_both(ds):
        return f"Both scores during training ({reason or 'one objective'});\n{tail}"
    symmetry = final_median(ds, "symmetry")
    gap = symmetry.sel(objective=ENCODER) - symmetry.sel(objective=DECODER)
    k = int((gap > 0).sum())
    return f"The encoder ends more symmetric than the decoder in {k} of {count(ds.sizes['seed'], 'seed')};\n{tail}"


def layer_lines(ds: xr.Dataset, seed: int) -> str:
    """One seed's layers (``symmetry`` over ``(objective, seed, step, layer)``): the range over layers of the final
    symmetry, per objective."""
    from .training_dynamics import label

    final = ds.symmetry.sel(seed=seed).isel(step=-1)
    parts = [f"{span(final.sel(objective=o).values)} in the {label(o)}" for o in ds.objective.values]
    return f"Seed {seed}, layer by layer: final symmetry " + ",\n".join(parts)


def head_scores(ds: xr.Dataset) -> str:
    """Per head at the last record, mean over seeds (:func:`attnstruct.analyses.training_dynamics.final_heads`):
    the range over heads and layers of each objective's symmetry."""
    from .training_dynamics import final_heads, label

    heads = final_heads(ds, "head_symmetry")
    parts = [f"{span(heads.sel(objective=o).values)} in the {label(o)}" for o in ds.objective.values]
    return "Per head at the end, mean over seeds: symmetry\n" + ",\n".join(parts)


def beside_authors(ds: xr.Dataset, authors: pd.DataFrame, learned: bool = True) -> str:
    """Our final median symmetry over layers (mean over seeds, as drawn) per objective beside the authors' at their
    last step (:func:`attnstruct.reference.training_dynamics`), by mode; with enough seeds of runs that learned,
    whether our encoder ends above our decoder as the authors' encoders end above their decoders."""
    from .training_dynamics import DECODER, ENCODER, has_both, median_over_layers

    ours = median_over_layers(ds, "symmetry").mean("seed").isel(step=-1)
    last = authors[authors.step == authors.step.max()]
    theirs = {mode: last[last["mode"] == mode].symmetry for mode in ("encoder", "decoder")}
    here = " and ".join(
        f"{signed(ours.sel(objective=o))} ({role})"
        for o, role in ((ENCODER, "encoder"), (DECODER, "decoder"))
        if o in ds.objective.values
    )
    tail = (
        f"final median symmetry over layers {here} after {int(ds.step[-1]):,} steps here;\n"
        f"{span(theirs['encoder'])} (encoders) and {span(theirs['decoder'])} (decoders) after "
        f"{int(authors.step.max()):,} in the authors' runs"
    )
    reason = no_finding(ds.sizes["seed"], learned)
    if reason is not None or not has_both(ds):
        return f"Ours beside the authors' ({reason or 'one objective'}):\n{tail}"
    ours_more = more_symmetric(ours.sel(objective=ENCODER), ours.sel(objective=DECODER))
    theirs_more = more_symmetric(np.median(theirs["encoder"]), np.median(theirs["decoder"]))
    agree = "as" if ours_more == theirs_more else "unlike"
    return f"Our encoder ends {ours_more} our decoder, {agree} the authors':\n{tail}"


# Notebook 06
def _rows(parts: Sequence[str], per_line: int = 2) -> str:
    """``parts`` joined by commas, ``per_line`` of them a line, for the titles of narrow figures."""
    return ",\n".join(", ".join(parts[k : k + per_line]) for k in range(0, len(parts), per_line))


def _per_objective(ds: xr.Dataset, line) -> str:
    """``line(objective)`` for each objective of ``ds``, each led by the objective's name when there are several."""
    from .training_dynamics import label

    objectives = [str(o) for o in ds.objective.values]
    if len(objectives) == 1:
        return line(objectives[0])
    return "\n".join(f"{label(o)}: {line(o)}" for o in objectives)


def loss_against_baseline(both: xr.Dataset, learned: bool = True) -> str:
    """Each arm's validation loss minus the baseline's of its seed at the last evaluation, mean over seeds, beside
    the placebo's range over seeds (``both``: ``val_loss`` over ``(objective, init, seed, step)`` of the arms, the
    baseline and the placebo, :func:`attnstruct.analyses.symmetric_init.loss_differences`); with enough seeds of
    runs that learned, which arms end further ahead of the baseline than the placebo does."""
    from .symmetric_init import BASELINE, PLACEBO, loss_differences

    arms = [str(i) for i in both.init.values if i not in (BASELINE, PLACEBO)]
    reason = no_finding(both.sizes["seed"], learned)

    def line(objective: str) -> str:
        band = loss_differences(both, objective, PLACEBO).isel(step=-1)
        ends = {a: float(loss_differences(both, objective, a).isel(step=-1).mean()) for a in arms}
        tail = (
            "final validation loss minus the baseline's, mean over seeds:\n"
            + ", ".join(f"{a} {signed(v, 3)}" for a, v in ends.items())
            + f"; placebo {signed(band.min(), 3)} to {signed(band.max(), 3)}"
        )
        if reason is not None:
            return f"Each start against the baseline ({reason});\n{tail}"
        ahead = [a for a, v in ends.items() if v < float(band.min())]
        if not ahead:
            return f"No start ends further ahead of the baseline than the placebo;\n{tail}"
        verb = "ends" if len(ahead) == 1 else "end"
        return f"{', '.join(ahead)} {verb} further ahead of the baseline than the placebo;\n{tail}"

    return _per_objective(both, line)


def symmetry_persistence(runs: xr.Dataset, learned: bool = True) -> str:
    """Each start's median symmetry over layers (``symmetry`` over ``(objective, init, seed, step, layer)``): with
    enough seeds of runs that learned, in how many seeds each treated start ends above the baseline of its seed (the
    persistence claims' statistic); otherwise where each start ends, mean over seeds."""
    from .symmetric_init import BASELINE
    from .training_dynamics import final_median

    final = final_median(runs, "symmetry")
    n = runs.sizes["seed"]
    reason = no_finding(n, learned)

    def line(objective: str) -> str:
        ends = final.sel(objective=objective)
        if reason is not None:
            means = [f"{i} {signed(ends.sel(init=i).mean())}" for i in ends.init.values]
            return (
                f"How long each start's symmetry lasts ({reason});\n"
                f"final median symmetry over layers, mean over seeds:\n{', '.join(means)}"
            )
        above = [
            f"{i} in {int((ends.sel(init=i) > ends.sel(init=BASELINE)).sum())} of {count(n, 'seed')}"
            for i in ends.init.values
            if i != BASELINE
        ]
        return f"Final median symmetry over layers above the baseline's of the same seed:\n{_rows(above)}"

    return _per_objective(runs, line)
