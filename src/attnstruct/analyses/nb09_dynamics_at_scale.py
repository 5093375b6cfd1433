"""Notebook 09: the paper's claim read from checkpoints that others trained, at scale, without training anything.

The input is a table of entries (:data:`attnstruct.checkpoints.series.ENTRY_COLUMNS`: one row per use of a
checkpoint, with its kind, series, role, unit, seed, stage and training position) and the sweep that scored their
checkpoints (``sweep.nc``, :mod:`attnstruct.checkpoints.sweep`). :func:`checkpoint_scores` joins them into one
dataset over ``checkpoint``; every model has one self-attention stack (an encoder's or a decoder's), whose layers
are reduced to their median, as the paper does for a model. A trajectory keeps, of checkpoints of one run whose
weights are byte-identical (one ``weights_sha256``), only the latest: published series hold branches into which later
weights were copied (EleutherAI/pythia#205, #206, allenai/OLMo#915), which would draw a false plateau
(:func:`copies_of_later_checkpoints`). Then, under the plan :func:`declared_plan` declares:

* **matched pairs** (:func:`pair_effects`): encoder minus decoder of each unit (a size of Ettin, a seed of the local
  series), median symmetry (primary) and directionality (secondary), predicted positive (the decoder more
  column-dominant). The null: for pairs trained from independent starts, the mean difference of untrained stacks of
  each unit's two shapes (:func:`attnstruct.stats.null_of_the_mean_by_unit` over :func:`attnstruct.stats.median_null`);
  for pairs that share their initial weights (the local series: an encoder and a decoder of one seed start from the
  same weights), the objectives' labels swapped within units (:func:`attnstruct.stats.paired_null`), since their
  untrained difference is zero by construction.
* **trajectories** (:func:`trajectory_effects`): at each seed's last checkpoint, an encoder's median symmetry above
  an untrained layer's of its shape, a decoder's median directionality below it, against the null of that mean
  over as many untrained models (secondary).
* **cross-objective continued training** (:func:`cross_effects`): after minus before, median symmetry, predicted
  positive when the model is trained on as an encoder and negative as a decoder, against the labels ``before`` and
  ``after`` swapped within units (secondary).
* **the objective against the restart** (:func:`contrast_effects`, the local series only): a continued run restarts
  its learning rate, which moves the scores whatever the objective (notebook 05's early transient), so each
  continuation with the other objective is read against its control, the same snapshot continued with its own
  objective (same warm-up and steps): the change under the other objective minus the change under the same one,
  paired by seed, predicted positive for a run continued as an encoder and negative as a decoder, against the signs
  of the seeds' differences flipped (secondary).

Every verdict comes from :func:`attnstruct.stats.paired_effect` through the plan; a series whose runs did not learn
(``learned``) is not judged. :data:`PLAN` is the plan of the local series (:mod:`.local_series`, the quick profile).

What the notebook says comes from here as facts records (frozen dataclasses of strings formatted by
:mod:`attnstruct.report.prose`, plus the few data-dependent words); its sentences and figure titles are templates in
the notebook, filled by :func:`attnstruct.report.prose.say` and :func:`~attnstruct.report.prose.fill`. The figures
are drawn in the notebook's cells from the tables of :func:`trajectory_grid`, :func:`before_and_after` and
:func:`untrained_null`; the authors' runs are placed on the tokens axis with the paper's batch
(:data:`AUTHORS_TOKENS_PER_STEP`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from .. import results, stats
from ..report import prose
from . import local_series

SCORES = ("symmetry", "directionality")
SIGN = {"encoder": +1, "decoder": -1}
PAIR_CLAIM = "{series}: encoder minus decoder, median {score}"
TRAJECTORY_CLAIM = "{series}: final median {score} minus an untrained layer's"
CROSS_CLAIM = "{series}: median symmetry after minus before"
CONTRAST_CLAIM = "{series} minus {control}: change of median symmetry"
TRAJECTORY_SCORE = {"encoder": "symmetry", "decoder": "directionality"}
SHAPE = ("d_model", "n_heads", "n_layers")
COPIES = "left_out_copies"  # the attr of checkpoint_scores' dataset: {left-out model: the later model it copies}
AUTHORS_TOKENS_PER_STEP = 32 * 8 * 512  # the paper's batch: 32 sequences, 8 accumulation steps, 512 tokens each


def copies_of_later_checkpoints(entries: pd.DataFrame, sweep: xr.Dataset) -> dict[str, str]:
    """``{model: later model}``: each trajectory checkpoint whose weights are byte-identical (the sweep's
    ``weights_sha256``, non-empty) to a later checkpoint of its run (its series and seed), with the latest of them,
    the one kept; later is by phase, then step. Empty when the sweep records no digests."""
    if "weights_sha256" not in sweep.coords:
        return {}
    digests = dict(zip(map(str, sweep["model"].values), map(str, sweep["weights_sha256"].values), strict=True))
    phases = dict(zip(map(str, sweep["model"].values), sweep["phase"].values, strict=True))
    runs = entries[(entries["kind"] == "trajectory") & entries["model"].isin(digests)].drop_duplicates("model")
    runs = runs.assign(
        digest=runs["model"].map(digests),
        phase=runs["model"].map(phases).fillna(0.0).astype(float),
    )
    copies = {}
    for _, group in runs[runs["digest"] != ""].groupby(["series", "seed", "digest"], sort=False):
        ordered = group.sort_values(["phase", "step"], na_position="first")
        latest = str(ordered["model"].iloc[-1])
        copies |= {str(model): latest for model in ordered["model"].iloc[:-1]}
    return copies


def left_out_copies(ds: xr.Dataset) -> dict[str, str]:
    """The copies :func:`checkpoint_scores` left out of ``ds``'s trajectories, ``{model: the later model kept}``."""
    return json.loads(ds.attrs.get(COPIES, "{}"))


def checkpoint_scores(entries: pd.DataFrame, sweep: xr.Dataset) -> tuple[xr.Dataset, list[str]]:
    """``(dataset, missing)``: the entries whose model the sweep scored, over ``checkpoint`` (one per entry, in
    order), with ``symmetry`` and ``directionality`` over ``(checkpoint, layer)`` of the model's one self-attention
    stack, the entries' columns and the model's shape (``d_model``, ``n_heads``, ``n_layers``), ``phase``,
    ``family``, ``n_params``, ``bytes_fetched`` and ``weights_sha256`` (``""`` where unknown) as coordinates;
    ``missing`` lists the models the sweep lacks (they failed: its ``failures.csv`` says why). The trajectory
    entries of :func:`copies_of_later_checkpoints` are left out, and listed in the dataset's ``left_out_copies``
    attr (:func:`left_out_copies`)."""
    scored = {str(m) for m in sweep["model"].values}
    copies = copies_of_later_checkpoints(entries, sweep)
    copied = (entries["kind"] == "trajectory") & entries["model"].isin(copies)
    kept = entries[entries["model"].isin(scored) & ~copied].reset_index(drop=True)
    missing = sorted(set(entries["model"]) - scored)
    models = sweep.sel(model=list(kept["model"]))
    stacks = models["symmetry"].notnull().any("layer").sum("stack")
    if bool((stacks != 1).any()):
        several = [str(m) for m, n in zip(models["model"].values, stacks.values) if n != 1]
        raise ValueError(f"a series checkpoint has one self-attention stack; these have {sorted(set(several))}")
    one = {score: models[score].mean("stack", skipna=True) for score in SCORES}  # the one stack's values
    n_layers = one["symmetry"].notnull().sum("layer")
    coords = {column: ("checkpoint", kept[column].to_numpy()) for column in kept.columns}
    coords |= {
        "d_model": ("checkpoint", models["d_model"].max(("stack", "layer")).values.astype(int)),
        "n_heads": ("checkpoint", models["n_heads"].max(("stack", "layer")).values.astype(int)),
        "n_layers": ("checkpoint", n_layers.values.astype(int)),
    }
    for name in ("phase", "family", "n_params", "bytes_fetched"):
        coords[name] = ("checkpoint", models[name].values)
    digests = models["weights_sha256"].values.astype(str) if "weights_sha256" in models.coords else [""] * len(kept)
    coords["weights_sha256"] = ("checkpoint", np.asarray(digests, dtype=object))
    ds = xr.Dataset(
        {score: (("checkpoint", "layer"), one[score].values) for score in SCORES},
        coords={"checkpoint": np.arange(len(kept)), "layer": models["layer"].values, **coords},
        attrs={COPIES: json.dumps(copies)},
    )
    return ds, missing


def median_over_layers(ds: xr.Dataset, score: str) -> xr.DataArray:
    """The median over layers of ``score`` of every checkpoint, ``[checkpoint]``."""
    return ds[score].median("layer", skipna=True)


def entries_of(ds: xr.Dataset, kind: str, series: str | None = None) -> xr.Dataset:
    """The checkpoints of ``kind`` (of ``series`` only, when given)."""
    keep = ds["kind"] == kind
    if series is not None:
        keep = keep & (ds["series"] == series)
    return ds.isel(checkpoint=np.flatnonzero(keep.values))


def series_of(ds: xr.Dataset | pd.DataFrame, kind: str) -> list[str]:
    """The series of ``kind`` (``pair``, ``trajectory``, ``cross``), in the order they first appear."""
    table = ds if isinstance(ds, pd.DataFrame) else ds[["kind", "series"]].to_dataframe()
    return list(dict.fromkeys(table.loc[table["kind"] == kind, "series"]))


def unit_kind(units: Sequence[str]) -> str:
    """``seed`` when the units are seeds (``seed 3``), else ``size`` (Ettin's ``150m``)."""
    return "seed" if all(str(u).startswith("seed ") for u in units) else "size"


def declared_plan(entries: pd.DataFrame, notebook: str = "09_dynamics_at_scale") -> stats.Plan:
    """The declared claims of the series in ``entries``: each matched-pair series' symmetry is primary (Holm over
    them), everything else secondary (module docstring). The local series' pairs
    (:data:`attnstruct.analyses.local_series.PAIRS`) are notebook 05's final runs read with 05's statistic and null:
    their claim is 05's primary claim read again, a check of the code path and not new evidence, so it is secondary
    here and counted once, in 05."""
    claims = []
    for series in series_of(entries, "pair"):
        units = unit_kind(entries.loc[entries["series"] == series, "unit"])
        rereads_05 = series == local_series.PAIRS
        for score, role in (("symmetry", "secondary" if rereads_05 else "primary"), ("directionality", "secondary")):
            claims.append(
                stats.Claim(
                    PAIR_CLAIM.format(series=series, score=score),
                    units,
                    f"median over layers of {score}, the encoder minus the decoder of one {units}, mean over {units}s",
                    f"sign-flip over {units}s, paired",
                    "notebook 05's own values and null, read again (its primary claim, counted there): the objectives' "
                    "labels swapped within each seed"
                    if rereads_05
                    else "the objectives' labels swapped within each seed (both start from its weights)"
                    if units == "seed"
                    else "untrained stacks of each pair's two shapes (stats.null_of_the_mean_by_unit)",
                    role=role,
                )
            )
    for series in series_of(entries, "trajectory"):
        role = entries.loc[entries["series"] == series, "role"].iloc[0]
        score = TRAJECTORY_SCORE[role]
        claims.append(
            stats.Claim(
                TRAJECTORY_CLAIM.format(series=series, score=score),
                "seed",
                f"median over layers of {score} at each seed's last checkpoint minus an untrained layer's median, mean "
                "over seeds",
                "sign-flip over seeds, and beyond the null's 95% range",
                "the mean over as many untrained models of the checkpoint's shape (stats.null_of_the_mean)",
                role="secondary",
            )
        )
    for series in series_of(entries, "cross"):
        units = unit_kind(entries.loc[entries["series"] == series, "unit"])
        claims.append(
            stats.Claim(
                CROSS_CLAIM.format(series=series),
                units,
                f"median symmetry over layers after the continued training minus before, mean over {units}s",
                f"sign-flip over {units}s, paired",
                "before and after swapped within each unit (stats.paired_null)",
                role="secondary",
            )
        )
    controls = set(series_of(entries, "control"))
    for series in series_of(entries, "cross"):
        control = local_series.control_of(series)
        if control in controls:
            claims.append(
                stats.Claim(
                    CONTRAST_CLAIM.format(series=series, control=control),
                    "seed",
                    "median symmetry over layers, after minus before under the other objective minus after minus "
                    "before under the same objective (same start, warm-up and steps), mean over seeds",
                    "sign-flip over seeds, paired",
                    "the two continuations' labels swapped within each seed (stats.paired_null)",
                    role="secondary",
                )
            )
    return stats.Plan(notebook, tuple(claims))


PLAN = declared_plan(local_series.plan_entries())  # the plan of notebook 09 on the local series (the quick profile)


def smallest_p_by_claim(ds: xr.Dataset, declared: stats.Plan) -> dict[str, float]:
    """Claim -> the smallest p its sign-flip test can reach with the units the data has for it."""
    units = {}
    for kind, template in (("pair", PAIR_CLAIM), ("trajectory", TRAJECTORY_CLAIM), ("cross", CROSS_CLAIM)):
        for series in series_of(ds, kind):
            n = len(set(entries_of(ds, kind, series)["unit"].values))
            for score in SCORES:
                units[template.format(series=series, score=score)] = n
            if kind == "cross" and local_series.control_of(series) in series_of(ds, "control"):
                units[CONTRAST_CLAIM.format(series=series, control=local_series.control_of(series))] = n
    return {claim.name: stats.smallest_p(max(1, units.get(claim.name, 1))) for claim in declared.claims}


def shape_of(ds: xr.Dataset, index: int) -> tuple[int, int, int]:
    """``(d_model, n_heads, n_layers)`` of checkpoint number ``index`` of ``ds``: the shape of its null."""
    return tuple(int(ds[name].values[index]) for name in SHAPE)


def untrained_null(score: str, shape: tuple[int, int, int], n_draws: int, seed: int) -> np.ndarray:
    """``[n_draws]`` medians of ``score`` over the layers of untrained stacks of ``shape``
    (:func:`attnstruct.stats.median_null`)."""
    d_model, n_heads, n_layers = shape
    return stats.median_null(score, d_model, n_heads, n_layers, n_draws=n_draws, seed=seed)


def pair_effects(
    ds: xr.Dataset,
    declared: stats.Plan,
    *,
    n_draws: int = 200,
    seed: int = 0,
    learned: Mapping[str, bool] | None = None,
) -> list[stats.Effect]:
    """Encoder minus decoder of every matched pair, per series and score (module docstring), decided under
    ``declared``; ``learned``: ``{series: did its runs learn}`` (absent: they did)."""
    effects = []
    for series in series_of(ds, "pair"):
        pairs = entries_of(ds, "pair", series)
        units = list(dict.fromkeys(pairs["unit"].values))
        rows = {
            role: [int(np.flatnonzero((pairs["unit"] == u).values & (pairs["role"] == role).values)[0]) for u in units]
            for role in ("encoder", "decoder")
        }
        kind = unit_kind(units)
        for score in SCORES:
            values = median_over_layers(pairs, score).values
            encoder, decoder = values[rows["encoder"]], values[rows["decoder"]]
            if kind == "seed":
                null = stats.paired_null(encoder - decoder, seed=seed) if len(units) > 1 else None
            else:
                pools = [untrained_null(score, shape_of(pairs, i), n_draws, seed) for i in rows["encoder"]]
                minus = [untrained_null(score, shape_of(pairs, i), n_draws, seed + 1) for i in rows["decoder"]]
                null = stats.null_of_the_mean_by_unit(pools, minus, seed=seed)
                null = stats.symmetrised(null) if score == "directionality" else null
            effects.append(
                stats.paired_effect(
                    encoder,
                    decoder,
                    claim=PAIR_CLAIM.format(series=series, score=score),
                    unit=kind,
                    null_samples=null,
                    seed=seed,
                    learned=True if learned is None else bool(learned.get(series, True)),
                )
            )
    return declared.decide(effects)


def last_checkpoints(ds: xr.Dataset, series: str) -> xr.Dataset:
    """Each seed's last checkpoint of trajectory ``series``: the latest phase, then the largest step."""
    runs = entries_of(ds, "trajectory", series)
    frame = runs[["seed", "phase", "step"]].to_dataframe().fillna({"phase": 0.0})
    last = frame.sort_values(["seed", "phase", "step"]).groupby("seed").tail(1).index
    return runs.sel(checkpoint=list(last)).sortby("seed")


def trajectory_effects(
    ds: xr.Dataset,
    declared: stats.Plan,
    *,
    n_draws: int = 200,
    seed: int = 0,
    learned: Mapping[str, bool] | None = None,
) -> list[stats.Effect]:
    """At each seed's last checkpoint, the role's score against an untrained layer's of that shape (module
    docstring), per trajectory series, decided under ``declared``."""
    effects = []
    for series in series_of(ds, "trajectory"):
        last = last_checkpoints(ds, series)
        role = str(last["role"].values[0])
        score = TRAJECTORY_SCORE[role]
        null = untrained_null(score, shape_of(last, 0), n_draws, seed)
        centre = float(np.median(null))
        values = median_over_layers(last, score).values
        of_the_mean = stats.null_of_the_mean(null, len(values), seed=seed) - centre
        effects.append(
            stats.paired_effect(
                values,
                np.full_like(values, centre),
                claim=TRAJECTORY_CLAIM.format(series=series, score=score),
                predicted_sign=SIGN[role],
                null_samples=stats.symmetrised(of_the_mean) if score == "directionality" else of_the_mean,
                seed=seed,
                learned=True if learned is None else bool(learned.get(series, True)),
            )
        )
    return declared.decide(effects)


def before_and_after(ds: xr.Dataset, series: str, kind: str = "cross") -> pd.DataFrame:
    """Per unit of continued ``series`` (of ``kind`` ``cross``, or ``control``): median symmetry ``before``,
    ``after`` and ``change`` (after minus before), indexed by unit."""
    runs = entries_of(ds, kind, series)
    frame = pd.DataFrame(
        {
            "unit": runs["unit"].values,
            "stage": runs["stage"].values,
            "symmetry": median_over_layers(runs, "symmetry").values,
        }
    )
    table = frame.pivot_table(index="unit", columns="stage", values="symmetry", sort=False)[["before", "after"]]
    return table.assign(change=table["after"] - table["before"])


def cross_effects(
    ds: xr.Dataset, declared: stats.Plan, *, seed: int = 0, learned: Mapping[str, bool] | None = None
) -> list[stats.Effect]:
    """After minus before, median symmetry, per cross-objective series (module docstring), decided under
    ``declared``."""
    effects = []
    for series in series_of(ds, "cross"):
        table = before_and_after(ds, series)
        role = str(entries_of(ds, "cross", series)["role"].values[0])
        change = table["change"].to_numpy()
        effects.append(
            stats.paired_effect(
                table["after"].to_numpy(),
                table["before"].to_numpy(),
                claim=CROSS_CLAIM.format(series=series),
                unit=unit_kind(table.index),
                predicted_sign=SIGN[role],
                null_samples=stats.paired_null(change, seed=seed) if len(change) > 1 else None,
                seed=seed,
                learned=True if learned is None else bool(learned.get(series, True)),
            )
        )
    return declared.decide(effects)


def contrasted(ds: xr.Dataset) -> list[tuple[str, str]]:
    """``(series, control)`` of every continued series of ``ds`` whose control (the same start continued with its own
    objective, :func:`attnstruct.analyses.local_series.control_of`) it holds."""
    controls = series_of(ds, "control")
    return [(s, local_series.control_of(s)) for s in series_of(ds, "cross") if local_series.control_of(s) in controls]


def change_against_control(ds: xr.Dataset, series: str, control: str) -> pd.DataFrame:
    """Per unit present in both: the ``change`` of median symmetry under the other objective (``series``) and under
    the same one (``control``, ``same``), and ``contrast``, the first minus the second, indexed by unit."""
    other = before_and_after(ds, series)["change"]
    same = before_and_after(ds, control, kind="control")["change"]
    table = pd.concat({"change": other, "same": same}, axis=1, join="inner")
    return table.assign(contrast=table["change"] - table["same"])


def contrast_effects(
    ds: xr.Dataset, declared: stats.Plan, *, seed: int = 0, learned: Mapping[str, bool] | None = None
) -> list[stats.Effect]:
    """The objective against the restart (module docstring): per continued series with a control, the change under
    the other objective minus the change under the same one, paired by seed, predicted in the direction of the new
    objective, decided under ``declared``; judged only where both series' runs learned."""
    effects = []
    for series, control in contrasted(ds):
        table = change_against_control(ds, series, control)
        role = str(entries_of(ds, "cross", series)["role"].values[0])
        contrast = table["contrast"].to_numpy()
        both_learned = learned is None or (bool(learned.get(series, True)) and bool(learned.get(control, True)))
        effects.append(
            stats.paired_effect(
                table["change"].to_numpy(),
                table["same"].to_numpy(),
                claim=CONTRAST_CLAIM.format(series=series, control=control),
                unit=unit_kind(table.index),
                predicted_sign=SIGN[role],
                null_samples=stats.paired_null(contrast, seed=seed) if len(contrast) > 1 else None,
                seed=seed,
                learned=both_learned,
            )
        )
    return declared.decide(effects)


def trajectory_lines(ds: xr.Dataset, series: str, score: str) -> pd.DataFrame:
    """The median ``score`` over layers of every checkpoint of trajectory ``series``: one row per checkpoint with
    ``seed``, ``phase``, ``step``, ``tokens`` and the value, in training order per seed."""
    runs = entries_of(ds, "trajectory", series)
    frame = runs[["seed", "phase", "step", "tokens"]].to_dataframe().fillna({"phase": 0.0})
    frame[score] = median_over_layers(runs, score).values
    return frame.sort_values(["seed", "phase", "step"]).reset_index(drop=True)


def bytes_needed(ds: xr.Dataset, file_bytes: Mapping[str, float] | None = None) -> pd.DataFrame:
    """Per series: its checkpoints, the bytes fetched for them (each model once), per checkpoint, and, where
    ``file_bytes`` (``{model: bytes of its weight files}``) knows every model, the share of the files that was
    read."""
    rows = []
    for series in dict.fromkeys(ds["series"].values):
        models = (
            ds.isel(checkpoint=np.flatnonzero((ds["series"] == series).values))[["model", "bytes_fetched"]]
            .to_dataframe()
            .drop_duplicates("model")
        )
        fetched = float(models["bytes_fetched"].sum())
        total = [file_bytes.get(m) for m in models["model"]] if file_bytes else []
        share = fetched / sum(total) if total and all(t for t in total) else np.nan
        rows.append(
            {
                "series": series,
                "checkpoints": len(models),
                "bytes": fetched,
                "per checkpoint": fetched / len(models),
                "share of files": share,
            }
        )
    return pd.DataFrame(rows).set_index("series")


def _relative(model: str, root: Path | None) -> str:
    if root is None:
        return model
    path = Path(model)
    return path.relative_to(root).as_posix() if path.is_absolute() and path.is_relative_to(root) else model


def result_dataset(
    ds: xr.Dataset,
    *,
    parameters: Mapping,
    effects: Sequence[stats.Effect],
    missing: Sequence[str],
    source: str,
    relative_to: str | Path | None = None,
) -> xr.Dataset:
    """Notebook 09's dataset: ``ds`` (:func:`checkpoint_scores`) with provenance attrs, the checkpoints that could not
    be scored (``missing``, JSON), those left out as copies of later ones (``left_out_copies``, JSON) and the
    verdicts (``verdicts``, JSON). Local checkpoints under ``relative_to`` (the
    results folder) are named relative to it, so that the same runs give the same dataset wherever they lie."""
    root = Path(relative_to).resolve() if relative_to is not None else None
    out = ds.assign_coords(model=("checkpoint", [_relative(str(m), root) for m in ds["model"].values]))
    missing = [_relative(m, root) for m in missing]
    out.attrs = results.provenance_attrs(
        parameters=parameters,
        scored_matrix="sum over heads of W_q^h W_k^h^T of each checkpoint's self-attention layers (d_model x d_model)",
        series_source=source,
        missing=pd.Series(list(missing), dtype=object).to_json(orient="values"),
        left_out_copies=json.dumps({_relative(m, root): _relative(k, root) for m, k in left_out_copies(ds).items()}),
        verdicts=stats.verdict_table(effects).to_json(orient="index") if effects else "{}",
    )
    return out


# What the figures draw, beyond the dataset itself.


def authors_runs_on_tokens(runs: pd.DataFrame) -> pd.DataFrame:
    """The authors' training runs (:func:`attnstruct.reference.training_dynamics`: median over layers per step) with
    a ``tokens`` column, ``step * AUTHORS_TOKENS_PER_STEP``."""
    return runs.assign(tokens=runs["step"] * AUTHORS_TOKENS_PER_STEP)


def trajectory_axes(ds: xr.Dataset) -> dict[str, list[str]]:
    """The trajectory series drawn against the tokens seen (every checkpoint's tokens known) and those drawn against
    their checkpoint index in training order (``checkpoint``: Ettin's phases, whose tokens per step are not stated)."""
    axes: dict[str, list[str]] = {"tokens": [], "checkpoint": []}
    for series in series_of(ds, "trajectory"):
        tokens = entries_of(ds, "trajectory", series)["tokens"].values.astype(float)
        axes["tokens" if np.isfinite(tokens).all() else "checkpoint"].append(series)
    return axes


def trajectory_grid(ds: xr.Dataset, series: str, score: str, axis: str) -> pd.DataFrame:
    """The median ``score`` of trajectory ``series`` as ``[position, seed]``: positions are the tokens seen
    (``axis="tokens"``) or each seed's checkpoint index in training order (``"checkpoint"``)."""
    lines = trajectory_lines(ds, series, score)
    if axis == "checkpoint":
        lines = lines.assign(checkpoint=lines.groupby("seed").cumcount())
    return lines.pivot_table(index=axis, columns="seed", values=score)


def series_table(entries: pd.DataFrame) -> pd.DataFrame:
    """One row per series: its kind, role(s), units and checkpoints (each model once)."""
    rows = []
    for (kind, series), group in entries.groupby(["kind", "series"], sort=False):
        rows.append(
            {
                "series": series,
                "kind": kind,
                "roles": ", ".join(dict.fromkeys(group["role"])),
                "units": group["unit"].nunique(),
                "checkpoints": group["model"].nunique(),
            }
        )
    return pd.DataFrame(rows).set_index("series")


# The facts the notebook's sentences and titles state: strings formatted by attnstruct.report.prose.


@dataclasses.dataclass(frozen=True)
class ScoredFacts:
    """What the sweep scored: ``checkpoints`` (each model once) and ``entries``; ``parameters``, the span of the
    models' sizes in millions (``sizes_known`` false when none is known); ``missing``, the checkpoints the sweep
    could not score (``all_scored`` when none); ``left_out``, the copies of later checkpoints left out of the
    trajectories, each named with the one kept (``any_copies``), and ``digests_known``: whether any checkpoint's
    weights digest is known (a local series has none)."""

    checkpoints: str
    entries: str
    parameters: str
    sizes_known: bool
    missing: str
    all_scored: bool
    copies: str
    left_out: str
    any_copies: bool
    digests_known: bool


def scored(ds: xr.Dataset, missing: Sequence[str]) -> ScoredFacts:
    """The facts of what :func:`checkpoint_scores` scored, could not score, and left out as copies."""
    params = pd.Series(ds["n_params"].values).dropna()
    copies = left_out_copies(ds)
    return ScoredFacts(
        checkpoints=prose.count(len(pd.unique(ds["model"].values)), "checkpoint"),
        entries=prose.count(len(ds["checkpoint"]), "entry", "entries"),
        parameters=prose.span(params / 1e6, 1, prose.number),
        sizes_known=bool(len(params)),
        missing=prose.count(len(missing), "checkpoint"),
        all_scored=not missing,
        copies=prose.count(len(copies), "checkpoint"),
        left_out=", ".join(f"`{model}` (as `{kept}`)" for model, kept in copies.items()),
        any_copies=bool(copies),
        digests_known="weights_sha256" in ds.coords and any(str(d) for d in ds["weights_sha256"].values),
    )


@dataclasses.dataclass(frozen=True)
class BytesFacts:
    """What reading the series by byte ranges cost: ``total`` bytes over ``checkpoints``, the span ``per_checkpoint``,
    and the span of the ``share`` of their weight files (``share_known`` false where the file sizes are unknown)."""

    checkpoints: str
    total: str
    per_checkpoint: str
    share: str
    share_known: bool


def bytes_read(table: pd.DataFrame) -> BytesFacts:
    """The facts of :func:`bytes_needed`'s table."""
    share = table["share of files"].dropna()
    return BytesFacts(
        checkpoints=prose.count(int(table["checkpoints"].sum()), "checkpoint"),
        total=prose.byte_size(float(table["bytes"].sum())),
        per_checkpoint=prose.span(table["per checkpoint"], 1, prose.byte_size),
        share=prose.span(share, 1, prose.percent),
        share_known=bool(len(share)),
    )


@dataclasses.dataclass(frozen=True)
class PairFacts:
    """One matched-pair series: in ``more`` of its ``total`` units (``units``: counted with their kind) the encoder
    is the more symmetric; ``gap``, the span of encoder minus decoder, median symmetry."""

    series: str
    more: str
    total: str
    units: str
    gap: str


def pairs(ds: xr.Dataset) -> list[PairFacts]:
    """The facts of every matched-pair series of ``ds``."""
    facts = []
    for series in series_of(ds, "pair"):
        members = entries_of(ds, "pair", series)
        frame = pd.DataFrame(
            {
                "unit": members["unit"].values,
                "role": members["role"].values,
                "s": median_over_layers(members, "symmetry").values,
            }
        ).pivot_table(index="unit", columns="role", values="s", sort=False)
        gap = frame["encoder"] - frame["decoder"]
        facts.append(
            PairFacts(
                series=series,
                more=str(int((gap > 0).sum())),
                total=str(len(frame)),
                units=prose.count(len(frame), unit_kind(frame.index)),
                gap=prose.span(gap),
            )
        )
    return facts


@dataclasses.dataclass(frozen=True)
class TrajectoryFacts:
    """One trajectory series: its ``seeds``, how far it ``reaches`` (tokens when ``on_tokens``, else the last step),
    the ``peak`` and the ``end`` of its median symmetry, mean over seeds at each checkpoint, and ``final``, the mean
    over seeds of each seed's last checkpoint."""

    series: str
    seeds: str
    reaches: str
    on_tokens: bool
    peak: str
    end: str
    final: str


def trajectories(ds: xr.Dataset) -> list[TrajectoryFacts]:
    """The facts of every trajectory series of ``ds``."""
    facts = []
    for series in series_of(ds, "trajectory"):
        lines = trajectory_lines(ds, series, "symmetry")
        mean = lines.groupby(["phase", "step"], sort=True)["symmetry"].mean()
        tokens = lines["tokens"].max()
        facts.append(
            TrajectoryFacts(
                series=series,
                seeds=prose.count(lines["seed"].nunique(), "seed"),
                reaches=f"{tokens:.2g}" if np.isfinite(tokens) else f"{int(lines['step'].max()):,}",
                on_tokens=bool(np.isfinite(tokens)),
                peak=prose.signed(mean.max()),
                end=prose.signed(mean.iloc[-1]),
                final=prose.signed(float(median_over_layers(last_checkpoints(ds, series), "symmetry").mean())),
            )
        )
    return facts


@dataclasses.dataclass(frozen=True)
class CrossFacts:
    """One continued-training series: median symmetry moved in the predicted ``direction`` (``rose`` for a model
    trained on as an encoder, ``fell`` as a decoder) in ``moved`` of its ``units``; ``change``, the span of after minus
    before, and ``mean_change``, its mean over units."""

    series: str
    direction: str
    moved: str
    units: str
    change: str
    mean_change: str


def crosses(ds: xr.Dataset) -> list[CrossFacts]:
    """The facts of every continued-training series of ``ds``."""
    facts = []
    for series in series_of(ds, "cross"):
        table = before_and_after(ds, series)
        sign = SIGN[str(entries_of(ds, "cross", series)["role"].values[0])]
        facts.append(
            CrossFacts(
                series=series,
                direction="rose" if sign > 0 else "fell",
                moved=str(int((np.sign(table["change"]) == sign).sum())),
                units=prose.count(len(table), unit_kind(table.index)),
                change=prose.span(table["change"]),
                mean_change=prose.signed(float(table["change"].mean())),
            )
        )
    return facts


@dataclasses.dataclass(frozen=True)
class ContrastFacts:
    """One continued series against its ``control`` (the same start continued with its own objective): in ``further``
    of its ``units`` the symmetry moved further in the predicted ``direction`` (``rose`` as an encoder, ``fell`` as a
    decoder) under the other objective than under the same one; ``contrast``, the mean over units of the change under
    the other objective minus that under the same one, and ``same_change``, the control's mean change."""

    series: str
    control: str
    direction: str
    further: str
    units: str
    contrast: str
    same_change: str


def contrasts(ds: xr.Dataset) -> list[ContrastFacts]:
    """The facts of every continued series of ``ds`` read against its control."""
    facts = []
    for series, control in contrasted(ds):
        table = change_against_control(ds, series, control)
        sign = SIGN[str(entries_of(ds, "cross", series)["role"].values[0])]
        facts.append(
            ContrastFacts(
                series=series,
                control=control,
                direction="rose" if sign > 0 else "fell",
                further=str(int((np.sign(table["contrast"]) == sign).sum())),
                units=prose.count(len(table), unit_kind(table.index)),
                contrast=prose.signed(float(table["contrast"].mean())),
                same_change=prose.signed(float(table["same"].mean())),
            )
        )
    return facts


@dataclasses.dataclass(frozen=True)
class PairsSourceFacts:
    """Where the matched pairs come from: ``rereads_05`` when they are notebook 05's own runs (the local series, whose
    pair claim is 05's primary claim read again), and the pair ``series`` (listed)."""

    rereads_05: bool
    series: str


def pairs_source(entries: pd.DataFrame) -> PairsSourceFacts:
    """The facts of the pair series of ``entries``."""
    names = series_of(entries, "pair")
    return PairsSourceFacts(rereads_05=local_series.PAIRS in names, series=", ".join(names))


@dataclasses.dataclass(frozen=True)
class VerdictCounts:
    """How many of a set of claims reached each verdict (``counts``: ``2 holds, 1 cannot tell at this scale``, or
    ``no claim tested``)."""

    counts: str


def verdict_counts(effects: Sequence[stats.Effect]) -> VerdictCounts:
    """The count of each verdict among ``effects``."""
    counts = {v: sum(e.verdict == v for e in effects) for v in stats.VERDICTS}
    return VerdictCounts(", ".join(f"{n} {verdict}" for verdict, n in counts.items() if n) or "no claim tested")


@dataclasses.dataclass(frozen=True)
class PrimaryFacts:
    """One primary claim: its ``claim``, ``verdict``, ``estimate`` and number of units ``n``."""

    claim: str
    verdict: str
    estimate: str
    n: str


def primary_verdicts(effects: Sequence[stats.Effect]) -> list[PrimaryFacts]:
    """The facts of every primary claim among ``effects``, in order."""
    return [
        PrimaryFacts(e.claim, e.verdict, prose.signed(e.estimate), str(e.n))
        for e in effects
        if e.family.startswith("primary")
    ]


@dataclasses.dataclass(frozen=True)
class LearnedFacts:
    """Whether every run behind the series met its loss target (``all_learned``), and the series whose runs did not
    (``not_learned``: their claims are not judged)."""

    all_learned: bool
    not_learned: str


def learned_runs(learned: Mapping[str, bool]) -> LearnedFacts:
    """The facts of ``learned`` (``{series: did its runs learn}``)."""
    failed = [series for series, ok in learned.items() if not ok]
    return LearnedFacts(all_learned=not failed, not_learned=", ".join(failed))
