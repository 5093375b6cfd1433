"""Notebook 09: the paper's claim read from checkpoints that others trained, at scale, without training anything.

The input is a table of entries (:data:`attnstruct.checkpoints.series.ENTRY_COLUMNS`: one row per use of a
checkpoint, with its kind, series, role, unit, seed, stage and training position) and the sweep that scored their
checkpoints (``sweep.nc``, :mod:`attnstruct.checkpoints.sweep`). :func:`checkpoint_scores` joins them into one
dataset over ``checkpoint``; every model has one self-attention stack (an encoder's or a decoder's), whose layers
are reduced to their median, as the paper does for a model. A trajectory keeps, of checkpoints of one run whose
weights are byte-identical (one ``weights_sha256``), only the latest: published series hold branches into which later
weights were copied (EleutherAI/pythia#205, #206, allenai/OLMo#915), which would draw a false plateau
(:func:`copies_of_later_checkpoints`). Then, under the plan :func:`plan` declares:

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

Every verdict comes from :func:`attnstruct.stats.paired_effect` through the plan; a series whose runs did not learn
(``learned``) is not judged.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from .. import results, stats

SCORES = ("symmetry", "directionality")
SIGN = {"encoder": +1, "decoder": -1}
PAIR_CLAIM = "{series}: encoder minus decoder, median {score}"
TRAJECTORY_CLAIM = "{series}: final median {score} minus an untrained layer's"
CROSS_CLAIM = "{series}: median symmetry after minus before"
TRAJECTORY_SCORE = {"encoder": "symmetry", "decoder": "directionality"}
SHAPE = ("d_model", "n_heads", "n_layers")
COPIES = "left_out_copies"  # the attr of checkpoint_scores' dataset: {left-out model: the later model it copies}


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


def median(ds: xr.Dataset, score: str) -> xr.DataArray:
    """The median over layers of ``score`` of every checkpoint, ``[checkpoint]``."""
    return ds[score].median("layer", skipna=True)


def select(ds: xr.Dataset, kind: str, series: str | None = None) -> xr.Dataset:
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


def plan(entries: pd.DataFrame, notebook: str = "09_dynamics_at_scale") -> stats.Plan:
    """The declared claims of the series in ``entries``: each matched-pair series' symmetry is primary (Holm over
    them), everything else secondary (module docstring)."""
    claims = []
    for series in series_of(entries, "pair"):
        units = unit_kind(entries.loc[entries["series"] == series, "unit"])
        for score, role in (("symmetry", "primary"), ("directionality", "secondary")):
            claims.append(
                stats.Claim(
                    PAIR_CLAIM.format(series=series, score=score),
                    units,
                    f"median over layers of {score}, the encoder minus the decoder of one {units}, mean over {units}s",
                    f"sign-flip over {units}s, paired",
                    "the objectives' labels swapped within each seed (both start from its weights)"
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
    return stats.Plan(notebook, tuple(claims))


def reach(ds: xr.Dataset, declared: stats.Plan) -> dict[str, float]:
    """Claim -> the smallest p its sign-flip test can reach with the units the data has for it."""
    units = {}
    for kind, template in (("pair", PAIR_CLAIM), ("trajectory", TRAJECTORY_CLAIM), ("cross", CROSS_CLAIM)):
        for series in series_of(ds, kind):
            n = len(set(select(ds, kind, series)["unit"].values))
            for score in SCORES:
                units[template.format(series=series, score=score)] = n
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
        pairs = select(ds, "pair", series)
        units = list(dict.fromkeys(pairs["unit"].values))
        rows = {
            role: [int(np.flatnonzero((pairs["unit"] == u).values & (pairs["role"] == role).values)[0]) for u in units]
            for role in ("encoder", "decoder")
        }
        kind = unit_kind(units)
        for score in SCORES:
            values = median(pairs, score).values
            encoder, decoder = values[rows["encoder"]], values[rows["decoder"]]
            if kind == "seed":
                null = stats.paired_null(encoder - decoder, seed=seed) if len(units) > 1 else None
            else:
                pools = [untrained_null(score, shape_of(pairs, i), n_draws, seed) for i in rows["encoder"]]
                minus = [untrained_null(score, shape_of(pairs, i), n_draws, seed + 1) for i in rows["decoder"]]
                null = stats.null_of_the_mean_by_unit(pools, minus, seed=seed)
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
    runs = select(ds, "trajectory", series)
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
        values = median(last, score).values
        effects.append(
            stats.paired_effect(
                values,
                np.full_like(values, centre),
                claim=TRAJECTORY_CLAIM.format(series=series, score=score),
                predicted_sign=SIGN[role],
                null_samples=stats.null_of_the_mean(null, len(values), seed=seed) - centre,
                seed=seed,
                learned=True if learned is None else bool(learned.get(series, True)),
            )
        )
    return declared.decide(effects)


def before_and_after(ds: xr.Dataset, series: str) -> pd.DataFrame:
    """Per unit of cross-objective ``series``: median symmetry ``before``, ``after`` and ``change`` (after minus
    before), indexed by unit."""
    runs = select(ds, "cross", series)
    frame = pd.DataFrame(
        {"unit": runs["unit"].values, "stage": runs["stage"].values, "symmetry": median(runs, "symmetry").values}
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
        role = str(select(ds, "cross", series)["role"].values[0])
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


def trajectory_lines(ds: xr.Dataset, series: str, score: str) -> pd.DataFrame:
    """The median ``score`` over layers of every checkpoint of trajectory ``series``: one row per checkpoint with
    ``seed``, ``phase``, ``step``, ``tokens`` and the value, in training order per seed."""
    runs = select(ds, "trajectory", series)
    frame = runs[["seed", "phase", "step", "tokens"]].to_dataframe().fillna({"phase": 0.0})
    frame[score] = median(runs, score).values
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
