"""Notebook 10: is column dominance the attention sink? Its plan, the runs of each attention normalisation, the
verdicts, the sink diagnostics of its own decoders and of real models, its dataset and the facts it states.

The runs are notebook 05's Transformer, batches, seeds and loss with only ``TransformerConfig.attention`` changed:
``softmax`` (05's runs, reused), ``sigmoid`` (no normalisation: Gu et al.'s sink-free form) and
``softmax-null-slot`` (a learned key/value slot every query sees: an explicit key bias). Each arm is one combined
dataset of runs (:func:`attnstruct.training.processes.combine`: dims ``objective``, ``seed``, ``step``, ``layer``);
:func:`combined` stacks the arms along ``attention``, an objective an arm did not train being NaN there.

Every run is reduced to one number per seed (its median over layers at the end) before any statistics, and the
arms are **paired by seed**: the runs of one seed share their windows of text (and, where the arms' weights have the
same shapes, their initial weights). Each paired difference is read against the null of its own question, the mean
difference when the two labels are swapped within seeds (:func:`attnstruct.stats.paired_null`), and decided under
:data:`PLAN`. Each verdict is gated on every run it rests on having learned (:func:`arm_targets`).

The sink diagnostics of each arm's decoders (:func:`own_sink_table`) read the trained weights of each run's last
snapshot on windows of the held-out split, each query's share of its attention under the arm's own normalisation
(:mod:`attnstruct.sinks`); they describe, they decide nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import xarray as xr

from .. import results, stats
from ..report import prose
from ..sinks import sink_diagnostics
from ..tasks import text, text_config
from ..training import processes, snapshots
from .text_runs import final_median, label, loss_targets

SOFTMAX, SIGMOID, NULL_SLOT = "softmax", "sigmoid", "softmax-null-slot"
ENCODER, DECODER = "mlm", "next-token"
ATTENTIONS = (SOFTMAX, SIGMOID, NULL_SLOT)

# ---------------------------------------------------------------------------------------------- the plan

PRIMARY = "decoder final median directionality, sigmoid minus softmax"
NULL_SLOT_CLAIM = "decoder final median directionality, softmax-null-slot minus softmax"
_SEED_PAIRED = "sign-flip over seeds, paired (the runs of a seed see the same windows of text)"
_SWAPPED = "the two normalisations' labels exchangeable within a seed (stats.paired_null)"
_SWAPPED_OBJECTIVES = "the two objectives' labels exchangeable within a seed (stats.paired_null)"


def gap_claim(attention: str) -> str:
    """The name of the claim "encoder minus decoder, final median symmetry" under ``attention``."""
    return f"encoder minus decoder, final median symmetry, {attention}"


PLAN = stats.Plan(
    "10_attention_sinks",
    (
        stats.Claim(
            PRIMARY,
            "seed",
            "median over layers of the decoder's final directionality, sigmoid minus softmax of one seed, mean over "
            "seeds; predicted positive (toward 0) if column dominance is sink machinery",
            _SEED_PAIRED,
            _SWAPPED,
        ),
        stats.Claim(
            NULL_SLOT_CLAIM,
            "seed",
            "median over layers of the decoder's final directionality, null slot minus softmax of one seed, mean "
            "over seeds; predicted positive (toward 0): the slot offers the key bias a sink needs",
            _SEED_PAIRED,
            _SWAPPED,
            role="secondary",
        ),
        *(
            stats.Claim(
                gap_claim(attention),
                "seed",
                "median over layers of the final symmetry, encoder minus decoder of one seed, mean over seeds",
                "sign-flip over seeds, paired (both runs of a seed start from the same weights)",
                _SWAPPED_OBJECTIVES,
                role="secondary",
            )
            for attention in (SIGMOID, SOFTMAX)
        ),
    ),
)
"""Notebook 10's declared claims: the primary, and the secondary ones reported uncorrected. The loss gate and the
sink diagnostics of each arm's decoders (sink mass on position 0, overlap of the dominant columns with the first
position's channels against chance, zeroing them against random channels) are declared as descriptions."""


# ---------------------------------------------------------------------------------------------- the runs


def combined(arms: Mapping[str, xr.Dataset]) -> xr.Dataset:
    """The arms' datasets (attention -> combined runs) stacked along ``attention``, in the order given; an objective
    an arm did not train is NaN there. The ``runs`` attrs of every arm are kept, as one JSON list."""
    if not arms:
        raise ValueError("no arm to combine")
    names = list(arms)
    out = xr.concat([arms[a] for a in names], dim=pd.Index(names, name="attention"), join="outer")
    runs = []
    for name in names:
        runs.extend(_runs(arms[name].attrs.get("runs", "[]")))
    out.attrs = dict(arms[names[0]].attrs)
    out.attrs["runs"] = json.dumps(runs)
    return out


def _runs(attr) -> list:
    return json.loads(attr) if isinstance(attr, str) else list(attr)


def trained(ds: xr.Dataset, attention: str, objective: str) -> bool:
    """Did ``ds`` train ``objective`` under ``attention`` (a record that is not NaN)?"""
    if attention not in ds.attention.values or objective not in ds.objective.values:
        return False
    return bool(ds["val_loss"].sel(attention=attention, objective=objective).notnull().any())


def arm(ds: xr.Dataset, attention: str) -> xr.Dataset:
    """The runs of one arm: ``ds`` at ``attention``, without the objectives it did not train."""
    one = ds.sel(attention=attention, drop=True)
    return one.sel(objective=[o for o in one.objective.values if trained(ds, attention, str(o))])


def arm_targets(ds: xr.Dataset, unigram_entropy: float) -> pd.DataFrame:
    """:func:`attnstruct.analyses.text_runs.loss_targets` of every arm, indexed by ``attention``, ``objective``,
    ``seed``."""
    tables = []
    for attention in ds.attention.values:
        table = loss_targets(arm(ds, str(attention)), unigram_entropy).reset_index()
        table.insert(0, "attention", str(attention))
        tables.append(table.set_index(["attention", "objective", "seed"]))
    return pd.concat(tables)


def learned_by_arm(targets: pd.DataFrame) -> dict[tuple[str, str], bool]:
    """``{(attention, objective): did every seed of that arm learn}``."""
    rows = targets.reset_index()
    return {(str(a), str(o)): bool(g["met"].all()) for (a, o), g in rows.groupby(["attention", "objective"])}


def _per_seed(values: xr.DataArray) -> np.ndarray:
    return np.asarray(values.transpose("seed").values, dtype=float)


def _paired(treated: xr.DataArray, baseline: xr.DataArray, claim: str, learned: bool, seed: int) -> stats.Effect:
    seeds = [s for s in treated.seed.values if s in baseline.seed.values]
    t, b = _per_seed(treated.sel(seed=seeds)), _per_seed(baseline.sel(seed=seeds))
    return stats.paired_effect(
        t, b, claim=claim, null_samples=stats.paired_null(t - b, seed=seed), seed=seed, learned=learned
    )


def normalisation_effects(
    ds: xr.Dataset, *, learned: Mapping[tuple[str, str], bool] | None = None, seed: int = 0
) -> list[stats.Effect]:
    """The claims of :data:`PLAN` that ``ds`` (:func:`combined`) has the runs for, decided under it: each arm's
    decoder against the softmax decoder of the same seed (final median directionality, predicted positive), and the
    encoder-minus-decoder gap of final median symmetry under sigmoid and softmax. ``learned``: :func:`learned_by_arm`
    (None: every run learned); a claim is gated on the arms it reads."""

    def ok(*keys: tuple[str, str]) -> bool:
        return learned is None or all(learned.get(k, False) for k in keys)

    effects = []
    direction = final_median(ds, "directionality")
    if trained(ds, SOFTMAX, DECODER):
        for attention, claim in ((SIGMOID, PRIMARY), (NULL_SLOT, NULL_SLOT_CLAIM)):
            if trained(ds, attention, DECODER):
                effects.append(
                    _paired(
                        direction.sel(attention=attention, objective=DECODER),
                        direction.sel(attention=SOFTMAX, objective=DECODER),
                        claim,
                        ok((attention, DECODER), (SOFTMAX, DECODER)),
                        seed,
                    )
                )
    symmetry = final_median(ds, "symmetry")
    for attention in (SIGMOID, SOFTMAX):
        if trained(ds, attention, ENCODER) and trained(ds, attention, DECODER):
            effects.append(
                _paired(
                    symmetry.sel(attention=attention, objective=ENCODER),
                    symmetry.sel(attention=attention, objective=DECODER),
                    gap_claim(attention),
                    ok((attention, ENCODER), (attention, DECODER)),
                    seed,
                )
            )
    return PLAN.decide(effects) if effects else []


def primary_effect(effects: Sequence[stats.Effect]) -> stats.Effect | None:
    """The effect of :data:`PRIMARY` among ``effects``, or None when it was not tested."""
    return stats.effect_of(effects, PRIMARY)


def final_per_seed(ds: xr.Dataset, score: str, objective: str = DECODER) -> pd.DataFrame:
    """The final median over layers of ``score`` of ``objective``: one row per seed, one column per arm that
    trained it (what the paired figure draws)."""
    final = final_median(ds, score).sel(objective=objective)
    table = final.transpose("seed", "attention").to_pandas()
    return table[[a for a in table.columns if trained(ds, str(a), objective)]]


# ---------------------------------------------------------------------------------------------- own sinks


def run_folder(runs_dir: str | Path, config: text_config.TextConfig) -> Path:
    """The folder of ``config``'s run under ``runs_dir`` (what :func:`attnstruct.tasks.text.train_many` wrote:
    :func:`attnstruct.training.processes.run_dirs`)."""
    return Path(processes.run_dirs([config], runs_dir)[0])


def final_model(config: text_config.TextConfig, runs_dir: str | Path, vocab_size: int):
    """The project's model of ``config``'s run with the weights of its last snapshot, in eval mode; None when the run
    kept no snapshot of its last step (``snapshot_every`` unset)."""
    folder = snapshots.complete_snapshots(run_folder(runs_dir, config)).get(config.steps)
    if folder is None:
        return None
    model = text.build_model(replace(config, init_from=None), vocab_size)
    model.load_state_dict(snapshots.read_weights(folder))
    return model.eval()


def held_out_windows(data, n_sequences: int, seq_len: int, seed: int = 0) -> torch.Tensor:
    """``[n_sequences, seq_len]`` windows of the corpus's held-out split (``data.val``), drawn from ``seed``."""
    generator = torch.Generator().manual_seed(seed)
    return text.draw_windows(data.val, n_sequences, seq_len, generator)


SINK_COLUMNS = (
    "sink_mass",
    "uniform",
    "overlap_first",
    "overlap_first_expected",
    "overlap_first_p",
    "ablation_change",
    "ablation_null_mean",
    "ablation_percentile",
    "directionality",
    "directionality_without_first",
)


def sink_row(found: sink_diagnostics.SinkDiagnostics) -> dict[str, float]:
    """One run's diagnostics as numbers: the median sink mass over layers and heads, the uniform share, the overlap
    of the dominant columns with the first position's channels (summed over layers) and chance, the ablation's
    change of the sink mass against random channels, and the median directionality with and without the first
    position's channels."""
    return {
        "sink_mass": float(np.median(found.mass)),
        "uniform": float(found.uniform),
        "overlap_first": float(found.overlap_first.observed),
        "overlap_first_expected": float(found.overlap_first.expected),
        "overlap_first_p": float(found.overlap_first.p_value),
        "ablation_change": float(found.ablation.change),
        "ablation_null_mean": float(found.ablation.null_mean),
        "ablation_percentile": float(found.ablation.percentile),
        "directionality": float(np.median(found.directionality)),
        "directionality_without_first": float(np.median(found.directionality_without_first)),
    }


def own_sink_table(models: Mapping[int, torch.nn.Module], ids: torch.Tensor, *, k: int, draws: int) -> pd.DataFrame:
    """:func:`sink_row` of each decoder (seed -> model) on ``ids``, one row per seed (:data:`SINK_COLUMNS`)."""
    rows = {
        int(seed): sink_row(sink_diagnostics.diagnose(model, ids, causal=True, k=k, ablation_draws=draws, seed=seed))
        for seed, model in models.items()
    }
    return pd.DataFrame.from_dict(rows, orient="index", columns=list(SINK_COLUMNS)).rename_axis("seed")


# ---------------------------------------------------------------------------------------------- the dataset


def result_dataset(
    runs: xr.Dataset,
    *,
    sinks: Mapping[str, pd.DataFrame],
    parameters: Mapping,
    corpus: str,
    unigram_entropy: float,
    learned: bool,
    effects: Sequence[stats.Effect],
    real: pd.DataFrame | None = None,
) -> xr.Dataset:
    """Notebook 10's dataset: the arms' runs (:func:`combined`), each arm's decoders' sink diagnostics (``sinks``:
    attention -> :func:`own_sink_table`) as ``sink_*`` variables over ``(attention, seed)`` (NaN where not
    diagnosed), the real models' diagnostics (``real``: :func:`attnstruct.sinks.packaged.diagnose_packaged`'s table)
    as ``real_*`` variables over ``model`` (:func:`real_variables`), the provenance attrs, whether every run learned
    (``loss_targets_met``) and under ``verdicts`` the table of ``effects`` (JSON, ``"{}"`` for none)."""
    out = runs.copy()
    seeds = pd.Index(runs.seed.values, name="seed")
    for column in SINK_COLUMNS:
        values = np.full((runs.sizes["attention"], len(seeds)), np.nan)
        for row, attention in enumerate(runs.attention.values):
            table = sinks.get(str(attention), pd.DataFrame()).reindex(seeds)
            if column in table:
                values[row] = table[column].to_numpy(dtype=float)
        out[f"sink_{column}"] = xr.DataArray(values, dims=["attention", "seed"])
    out = out.merge(real_variables(real if real is not None else pd.DataFrame()))
    out.attrs.update(
        results.provenance_attrs(
            parameters=parameters,
            scored_matrix=runs.attrs.get("scored_matrix", ""),
            corpus=corpus,
            unigram_entropy=unigram_entropy,
            loss_targets_met="yes" if learned else "no",
            verdicts=stats.verdict_table(effects).to_json(orient="index") if effects else "{}",
        )
    )
    out.attrs["runs"] = runs.attrs.get("runs", "[]")
    return out


REAL_LEFT_OUT = ("seconds",)  # how long a model took to read: not reproducible, not stored
REAL_FLAGS = ("qk_norm", "query_bias", "key_bias")  # what the score cannot see, stored as 0/1
REAL_TEXT = ("role", "sink_positions", "first_token")


def real_variables(real: pd.DataFrame) -> xr.Dataset:
    """The real models' table (one row per model, the columns of :data:`attnstruct.sinks.packaged.COLUMNS`) as
    ``real_<column>`` variables over ``model``: numbers as float, :data:`REAL_FLAGS` as 0/1, :data:`REAL_TEXT` as
    strings, :data:`REAL_LEFT_OUT` left out. No row: an empty dataset (no ``model`` dim). Whatever models the table
    holds (packaged or read from the hub) are stored alike."""
    if real.empty:
        return xr.Dataset()
    models = pd.Index([str(m) for m in real["model"]], name="model")
    out = xr.Dataset(coords={"model": models})
    for column in real.columns:
        if column == "model" or column in REAL_LEFT_OUT:
            continue
        values = real[column].to_numpy()
        if column in REAL_TEXT:
            values = np.array([str(v) for v in values], dtype=str)
        elif column in REAL_FLAGS:
            values = np.array([bool(v) for v in values], dtype=np.int8)
        else:
            values = values.astype(float)
        out[f"real_{column}"] = xr.DataArray(values, dims=["model"])
    return out


def real_table_of(ds: xr.Dataset) -> pd.DataFrame:
    """The real models' table stored by :func:`real_variables`, read back from notebook 10's dataset (the flags as
    bool, ``layers`` and ``heads`` as int); no ``model`` dim: an empty table."""
    names = [name for name in ds.data_vars if str(name).startswith("real_")]
    if "model" not in ds.dims or not names:
        return pd.DataFrame(columns=["model"])
    table = pd.DataFrame({str(name).removeprefix("real_"): ds[name].values for name in names})
    table.insert(0, "model", [str(m) for m in ds.model.values])
    for column in REAL_FLAGS:
        if column in table:
            table[column] = table[column].astype(bool)
    for column in ("layers", "heads"):
        if column in table:
            table[column] = table[column].astype(int)
    for column in REAL_TEXT:
        if column in table:
            table[column] = table[column].astype(str)
    return table


def effects_of_dataset(ds: xr.Dataset) -> list[stats.Effect]:
    """:func:`normalisation_effects` recomputed from notebook 10's dataset (what ``make findings`` reads)."""
    targets = arm_targets(ds, float(ds.attrs["unigram_entropy"]))
    return normalisation_effects(ds, learned=learned_by_arm(targets))


# The facts the notebook's sentences and titles state: strings formatted by attnstruct.report.prose.


@dataclass(frozen=True)
class ArmFacts:
    """One arm and objective at the end of training: ``attention``, ``objective`` (its label), the mean over seeds
    of the final median ``directionality`` and ``symmetry``, and their ``span`` of directionality over seeds."""

    attention: str
    objective: str
    directionality: str
    symmetry: str
    span: str


def arms_at_end(ds: xr.Dataset) -> list[ArmFacts]:
    """:class:`ArmFacts` of every arm and objective ``ds`` trained."""
    direction, symmetry = final_median(ds, "directionality"), final_median(ds, "symmetry")
    out = []
    for attention in ds.attention.values:
        for objective in ds.objective.values:
            if not trained(ds, str(attention), str(objective)):
                continue
            d = direction.sel(attention=attention, objective=objective)
            out.append(
                ArmFacts(
                    attention=f"`{attention}`",
                    objective=label(objective),
                    directionality=prose.signed(float(d.mean())),
                    symmetry=prose.signed(float(symmetry.sel(attention=attention, objective=objective).mean())),
                    span=prose.span(d.values),
                )
            )
    return out


@dataclass(frozen=True)
class PrimaryFacts:
    """The primary claim for a title: whether it was ``tested``, its ``verdict``, the mean ``estimate`` of sigmoid
    minus softmax, in how many seeds the sigmoid decoder ends closer to 0 than the softmax one (``toward`` of
    ``seeds``), and the two arms' means (``sigmoid``, ``softmax``)."""

    tested: bool
    verdict: str
    estimate: str
    toward: str
    seeds: str
    sigmoid: str
    softmax: str


def primary_facts(ds: xr.Dataset, effects: Sequence[stats.Effect]) -> PrimaryFacts:
    """:class:`PrimaryFacts` of ``ds`` and its decided ``effects``."""
    effect = primary_effect(effects)
    if effect is None:
        return PrimaryFacts(False, stats.CANNOT_TELL, "", "", "", "", "")
    table = final_per_seed(ds, "directionality")
    toward = int((table[SIGMOID].abs() < table[SOFTMAX].abs()).sum())
    return PrimaryFacts(
        tested=True,
        verdict=effect.verdict,
        estimate=prose.signed(effect.estimate),
        toward=str(toward),
        seeds=prose.count(len(table), "seed"),
        sigmoid=prose.signed(float(table[SIGMOID].mean())),
        softmax=prose.signed(float(table[SOFTMAX].mean())),
    )


SINK_FACTOR = 2.0  # a decoder "has a sink" when its median mass on position 0 is above this many uniform shares


@dataclass(frozen=True)
class ReadingFacts:
    """What the arms say together about the sink reading, beyond the primary verdict: the sigmoid decoders' mean
    final directionality (``sigmoid``) and in how many seeds it ends past 0 on the row side (``overshoot`` of
    ``seeds``; ``overshoots``); how far sigmoid attention moves the encoder's directionality (``encoder_shift``,
    sigmoid minus softmax, mean over seeds; ``encoder_read``: the encoder was trained under both) and the decoder's
    (``decoder_shift``); the null slot's
    decoder estimate against softmax and its verdict (``null_estimate``, ``null_verdict``; ``null_read``); the
    softmax decoders' median sink mass on position 0 against the uniform share (``sink_mass``, ``uniform``;
    ``sinks_read``) and whether it exceeds :data:`SINK_FACTOR` uniform shares (``has_sink``), with their mean final
    directionality (``softmax``) and whether it is column-dominant (``column_dominant``: below 0)."""

    sigmoid: str
    overshoot: str
    seeds: str
    overshoots: bool
    encoder_read: bool
    encoder_shift: str
    decoder_shift: str
    null_read: bool
    null_estimate: str
    null_verdict: str
    sinks_read: bool
    sink_mass: str
    uniform: str
    has_sink: bool
    softmax: str
    column_dominant: bool


def reading(ds: xr.Dataset, effects: Sequence[stats.Effect], sinks: Mapping[str, pd.DataFrame]) -> ReadingFacts:
    """:class:`ReadingFacts` of the arms ``ds``, their decided ``effects`` and the decoders' sink tables (``sinks``:
    attention -> :func:`own_sink_table`)."""
    decoders = final_per_seed(ds, "directionality")
    sigmoid = decoders[SIGMOID] if SIGMOID in decoders else pd.Series(dtype=float)
    encoders = final_per_seed(ds, "directionality", ENCODER)
    encoder_read = {SIGMOID, SOFTMAX} <= set(encoders.columns)
    null = stats.effect_of(effects, NULL_SLOT_CLAIM)
    softmax_sinks = sinks.get(SOFTMAX, pd.DataFrame())
    sinks_read = not softmax_sinks.empty
    mass = float(softmax_sinks["sink_mass"].median()) if sinks_read else float("nan")
    uniform = float(softmax_sinks["uniform"].median()) if sinks_read else float("nan")
    overshoot = int((sigmoid > 0).sum())
    return ReadingFacts(
        sigmoid=prose.signed(float(sigmoid.mean())) if len(sigmoid) else "",
        overshoot=str(overshoot),
        seeds=prose.count(len(sigmoid), "seed"),
        overshoots=overshoot > len(sigmoid) / 2,
        encoder_read=encoder_read,
        encoder_shift=prose.signed(float((encoders[SIGMOID] - encoders[SOFTMAX]).mean())) if encoder_read else "",
        decoder_shift=prose.signed(float((sigmoid - decoders[SOFTMAX]).mean())) if len(sigmoid) else "",
        null_read=null is not None,
        null_estimate=prose.signed(null.estimate) if null is not None else "",
        null_verdict=null.verdict if null is not None else "",
        sinks_read=sinks_read,
        sink_mass=prose.number(mass, 3) if sinks_read else "",
        uniform=prose.number(uniform, 3) if sinks_read else "",
        has_sink=sinks_read and mass > SINK_FACTOR * uniform,
        softmax=prose.signed(float(decoders[SOFTMAX].mean())),
        column_dominant=bool(decoders[SOFTMAX].mean() < 0),
    )


@dataclass(frozen=True)
class OwnSinksFacts:
    """The sink diagnostics of one arm's decoders (``attention``, as code): how many were ``diagnosed`` (``any``),
    the median ``sink_mass`` on position 0 against the ``uniform`` share, the dominant columns among the first
    position's channels (``overlap`` summed over layers, median over seeds) against ``expected`` by chance, in how
    many seeds above chance at p < 0.05 (``beyond``), the ablation's change of the sink mass (``ablation``) against
    random channels (``ablation_null``), and the median directionality with (``directionality``) and without the
    first position's channels (``without_first``)."""

    attention: str
    any: bool
    diagnosed: str
    sink_mass: str
    uniform: str
    overlap: str
    expected: str
    beyond: str
    ablation: str
    ablation_null: str
    directionality: str
    without_first: str


def own_sinks(table: pd.DataFrame, attention: str = "softmax") -> OwnSinksFacts:
    """:class:`OwnSinksFacts` of :func:`own_sink_table`'s rows of the arm ``attention`` (medians over seeds)."""
    if table.empty:
        return OwnSinksFacts(f"`{attention}`", False, prose.count(0, "decoder"), *[""] * 9)
    median = table.median()
    return OwnSinksFacts(
        attention=f"`{attention}`",
        any=True,
        diagnosed=prose.count(len(table), "decoder"),
        sink_mass=prose.number(median["sink_mass"], 3),
        uniform=prose.number(median["uniform"], 3),
        overlap=prose.number(median["overlap_first"], 1),
        expected=prose.number(median["overlap_first_expected"], 1),
        beyond=f"{int((table['overlap_first_p'] < 0.05).sum())} of {len(table)}",
        ablation=prose.signed(median["ablation_change"], 3),
        ablation_null=prose.signed(median["ablation_null_mean"], 3),
        directionality=prose.signed(median["directionality"]),
        without_first=prose.signed(median["directionality_without_first"]),
    )


@dataclass(frozen=True)
class RealModelFacts:
    """One real model's sink diagnostics: ``model``, ``role``, the median ``sink_mass`` against the ``uniform``
    share, the dominant columns among the first position's channels (``overlap``) against ``expected``, the
    ablation's ``change`` against random channels (``null``), and its median ``directionality``."""

    model: str
    role: str
    sink_mass: str
    uniform: str
    overlap: str
    expected: str
    change: str
    null: str
    directionality: str


def real_models(frame: pd.DataFrame) -> list[RealModelFacts]:
    """:class:`RealModelFacts` of each row of :func:`attnstruct.sinks.packaged.diagnose_packaged`'s table."""
    return [
        RealModelFacts(
            model=f"`{row.model}`",
            role=str(row.role),
            sink_mass=prose.number(float(row.sink_mass), 2),
            uniform=prose.number(float(row.uniform), 3),
            overlap=prose.number(float(row.overlap_first), 0),
            expected=prose.number(float(row.overlap_first_expected), 1),
            change=prose.signed(float(row.ablation_change), 3),
            null=prose.signed(float(row.ablation_null_mean), 3),
            directionality=prose.signed(float(row.directionality)),
        )
        for row in frame.itertuples(index=False)
    ]


@dataclass(frozen=True)
class RealSummaryFacts:
    """The real models at a glance: how many were read (``n``), how many put more than :data:`SINK_FACTOR` uniform
    shares on their sink positions (``with_sink``), and in how many the dominant columns fall among the first
    position's channels beyond chance (``beyond_chance``: the overlap's p below :data:`OVERLAP_ALPHA`)."""

    n: str
    with_sink: str
    beyond_chance: str


OVERLAP_ALPHA = 0.05


def real_summary(frame: pd.DataFrame) -> RealSummaryFacts:
    """:class:`RealSummaryFacts` of :func:`read_real_models`' table (a figure's title when it lists too many models
    to name each)."""
    with_sink = int((frame["sink_mass"] > SINK_FACTOR * frame["uniform"]).sum())
    beyond = int((frame["overlap_first_p"] < OVERLAP_ALPHA).sum())
    return RealSummaryFacts(prose.count(len(frame), "model"), str(with_sink), str(beyond))


@dataclass(frozen=True)
class NotReadFacts:
    """A model the real-model section could not read, and why."""

    model: str
    reason: str


def not_read(missing: Sequence[tuple[str, str]]) -> list[NotReadFacts]:
    """:class:`NotReadFacts` of ``(name, reason)`` pairs."""
    return [NotReadFacts(f"`{name}`", str(reason)) for name, reason in missing]


def read_real_models(
    packaged_names: Sequence[str], hub_ids: Sequence[str], *, cache_dir=None, k: int = 10, seed: int = 0
) -> tuple[pd.DataFrame, list[tuple[str, str]]]:
    """The sink diagnostics of the packaged checkpoints ``packaged_names`` (never fetched) and of the hub models
    ``hub_ids`` (fetched whole, :mod:`attnstruct.sinks.hub_models`), one table (:data:`~attnstruct.sinks.packaged.
    COLUMNS`), and ``(name, reason)`` for each model not read."""
    from ..sinks import hub_models, packaged

    frame, missing = packaged.diagnose_packaged(packaged_names, cache_dir=cache_dir, k=k, seed=seed)
    if not hub_ids:
        return frame, missing
    from_hub, hub_missing = hub_models.diagnose_hub(hub_ids, k=k, seed=seed)
    frames = [f for f in (frame, from_hub) if len(f)]
    joined = pd.concat(frames, ignore_index=True) if frames else frame
    return joined, [*missing, *hub_missing]


def training_series(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of hub models read at two or more training steps of one repository (``ORG/NAME@stepN``, Ettin's
    ``extN``, ...; :func:`attnstruct.checkpoints.revisions.parse_training_position`): columns ``repo``, ``step``,
    ``sink_mass``, ``uniform``, ``directionality``, sorted by repository and ``(phase, step)``."""
    from ..checkpoints.revisions import parse_training_position

    rows = []
    for row in frame.itertuples(index=False):
        repo, _, revision = str(row.model).partition("@")
        position = parse_training_position(revision) if revision else None
        if position is not None and np.isfinite(position.step):
            sink = (float(row.sink_mass), float(row.uniform), float(row.directionality))
            rows.append((repo, position.phase, position.step, *sink))
    table = pd.DataFrame(rows, columns=["repo", "phase", "step", "sink_mass", "uniform", "directionality"])
    counts = table.groupby("repo")["step"].transform("size")
    return table[counts >= 2].sort_values(["repo", "phase", "step"]).drop(columns="phase").reset_index(drop=True)


@dataclass(frozen=True)
class SeriesFacts:
    """One repository's checkpoints read in training order: the sink mass and directionality at the first and the
    last step read, and their correlation over the steps read."""

    repo: str
    n: str
    first_step: str
    last_step: str
    first_sink: str
    last_sink: str
    first_directionality: str
    last_directionality: str
    correlation: str


def series_facts(series: pd.DataFrame) -> list[SeriesFacts]:
    """:class:`SeriesFacts` of each repository of :func:`training_series`."""
    facts = []
    for repo, rows in series.groupby("repo", sort=False):
        first, last = rows.iloc[0], rows.iloc[-1]
        r = np.corrcoef(rows["sink_mass"], rows["directionality"])[0, 1] if len(rows) > 2 else np.nan
        facts.append(
            SeriesFacts(
                repo=f"`{repo}`",
                n=prose.count(len(rows), "checkpoint"),
                first_step=f"{int(first.step):,}",
                last_step=f"{int(last.step):,}",
                first_sink=prose.number(float(first.sink_mass), 2),
                last_sink=prose.number(float(last.sink_mass), 2),
                first_directionality=prose.signed(float(first.directionality)),
                last_directionality=prose.signed(float(last.directionality)),
                correlation="undefined" if not np.isfinite(r) else prose.signed(float(r)),
            )
        )
    return facts


# ---------------------------------------------------------------------------------------------- the docs' numbers
