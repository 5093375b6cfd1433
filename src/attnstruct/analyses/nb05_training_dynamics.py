"""Notebook 05: the same Transformer trained as encoder and decoder, its plan, verdicts and the facts it states.

Every function takes a combined dataset of runs (:func:`attnstruct.training.processes.combine`: dims ``objective``,
``seed``, ``step``, ``layer`` and maybe ``init``) and reduces each run to one number per seed before any
statistics, since the seed is the independent unit (:mod:`attnstruct.stats`). Layers are pooled by their
median, as the paper does for a model (:mod:`attnstruct.analyses.text_runs`). The null of a score is that of an
untrained layer of the same shape: ``sum_h W_q[h]^T W_k[h]`` with Gaussian factors, ``n_heads`` heads of width
``d_model / n_heads``, the median over ``n_layers`` such layers
(:func:`attnstruct.stats.nulls.null_median_over_layers`). Every verdict is gated on the runs it rests on having
learned (``learned``, :func:`attnstruct.analyses.text_runs.learned_by`), and decided under the notebook's declared
:data:`PLAN`.

**The final state and the schedule.** The final state of a run whose learning rate decays linearly to zero is where
the decay froze the weights. :func:`schedule_runs` reads the calibration runs of ``docs/calibration.csv`` that
trained this model with a constant rate after warm-up and with the linear decay: one seed per schedule and
objective, so they are described (:func:`schedules_compared`), never judged.

What the notebook says comes from here as facts records (frozen dataclasses of strings formatted by
:mod:`attnstruct.report.prose`, plus the few data-dependent words); its sentences and figure titles are templates in
the notebook, filled by :func:`attnstruct.report.prose.say` and :func:`~attnstruct.report.prose.fill`, and its figures
are drawn in its cells.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from .. import notebooks, reference, results, stats
from ..report import prose
from ..tasks import text_config
from .text_runs import LOSS_MARGINS, SCORES, final_median, label, median_over_layers, no_finding

ENCODER, DECODER = "mlm", "next-token"

# ---------------------------------------------------------------------------------------------- the plan

_SEED_PAIRED = "sign-flip over seeds, paired (both runs of a seed start from the same weights)"
_SWAPPED = "the two objectives' labels exchangeable within a seed (stats.paired_null)"
GAP_WITHOUT_LAYER_ZERO = "encoder minus decoder, final median symmetry without layer 0"


DECAY_WINDOW = 1 / 3  # each window of the decay contrast: this share of the records after the peak


def _decay(objective: str) -> stats.Claim:
    return stats.Claim(
        f"{objective}: median symmetry, early minus late after its peak",
        "seed",
        "median symmetry over layers, over the records after the run's peak: the mean of the first third of them "
        "minus the mean of the last third (stats.decay_contrast), mean over seeds",
        "sign-flip over seeds",
        "no fall after the peak: each seed's contrast as likely negative as positive",
        role="secondary",
    )


PLAN = stats.Plan(
    "05_training_dynamics",
    (
        stats.Claim(
            "encoder minus decoder, final median symmetry",
            "seed",
            "median over layers of the final symmetry, encoder minus decoder of one seed, mean over seeds",
            _SEED_PAIRED,
            _SWAPPED,
        ),
        stats.Claim(
            "encoder minus decoder, final median directionality",
            "seed",
            "median over layers of the final directionality, encoder minus decoder of one seed, mean over seeds",
            _SEED_PAIRED,
            _SWAPPED,
            role="secondary",
        ),
        stats.Claim(
            GAP_WITHOUT_LAYER_ZERO,
            "seed",
            "median over the layers after layer 0 of the final symmetry, encoder minus decoder of one seed, mean over "
            "seeds",
            _SEED_PAIRED,
            _SWAPPED,
            role="secondary",
        ),
        stats.Claim(
            "decoder final median directionality minus an untrained layer's",
            "seed",
            "median over layers of the decoder's final directionality minus an untrained layer's median, mean over "
            "seeds",
            "sign-flip over seeds, and beyond the null's 95% range",
            "the mean over as many untrained models of this shape (stats.null_of_the_mean)",
            role="secondary",
        ),
        _decay("mlm"),
        _decay("next-token"),
    ),
)


# ---------------------------------------------------------------------------------------------- the runs


def mean_losses(ds: xr.Dataset, objective: str) -> tuple[xr.DataArray, xr.DataArray]:
    """``objective``'s training loss ``[step]`` and validation loss ``[evaluated step]``, means over seeds."""
    runs = ds.sel(objective=objective)
    return runs.train_loss.mean("seed"), runs.val_loss.dropna("step", how="all").mean("seed")


def loss_target_levels(unigram_entropy: float, objectives: Sequence[str]) -> dict[str, float]:
    """``{objective: the validation loss it must end below}``: the unigram entropy minus the objective's margin
    (:data:`attnstruct.analyses.text_runs.LOSS_MARGINS`)."""
    return {str(o): unigram_entropy - LOSS_MARGINS[str(o)] for o in objectives}


def final_heads(ds: xr.Dataset, score: str = "head_symmetry") -> xr.DataArray:
    """A per-head score at the last record, mean over seeds: ``[objective, layer, head]``."""
    return ds[score].isel(step=-1).mean("seed")


def transient(ds: xr.Dataset, score: str = "symmetry") -> pd.DataFrame:
    """Per run: the peak of the median over layers of ``score`` during training, the step of the peak, the final
    value and ``decay = peak - final`` (how much of its peak the run lost by the end)."""
    median = ds[score].median("layer")
    peak_index = median.fillna(-np.inf).argmax("step")
    table = xr.Dataset(
        {
            "peak": median.max("step"),
            "peak_step": ds["step"].isel(step=peak_index).drop_vars("step"),
            "final": median.isel(step=-1),
        }
    ).to_dataframe()
    table = table[["peak", "peak_step", "final"]]
    table["decay"] = table["peak"] - table["final"]
    return table


def has_both(ds: xr.Dataset, encoder: str = ENCODER, decoder: str = DECODER) -> bool:
    """Were both objectives of the encoder-decoder claims trained?"""
    return {encoder, decoder} <= {str(o) for o in ds.objective.values}


def per_layer_gap(ds: xr.Dataset, encoder: str = ENCODER, decoder: str = DECODER) -> pd.DataFrame:
    """Encoder minus decoder final symmetry per seed (rows) and layer (columns), paired by seed; empty when an
    objective was not trained."""
    if not has_both(ds, encoder, decoder):
        return pd.DataFrame()
    final = ds.symmetry.isel(step=-1)
    gap = stats.per_unit_and_layer(final.sel(objective=encoder, drop=True), final.sel(objective=decoder, drop=True))
    return gap.drop_vars([c for c in gap.coords if c not in gap.dims]).to_pandas()


# ---------------------------------------------------------------------------------------------- verdicts


@dataclass(frozen=True)
class Shape:
    """The attention shape whose untrained layers make the null."""

    d_model: int
    n_heads: int
    n_layers: int

    def null(self, score: str, n_draws: int, seed: int) -> np.ndarray:
        return stats.null_median_over_layers(
            score, self.d_model, self.n_heads, self.n_layers, n_draws=n_draws, seed=seed
        )


def _per_seed(values: xr.DataArray) -> np.ndarray:
    return np.asarray(values.transpose("seed").values, dtype=float)


def against_null_effect(
    values: xr.DataArray,
    *,
    claim: str,
    score: str,
    shape: Shape,
    predicted_sign: int,
    n_draws: int = 400,
    seed: int = 0,
    learned: bool = True,
) -> stats.Effect:
    """A model's score per seed (``[seed]``) against an untrained model of ``shape``: the mean difference from the
    null's median, against the null of that mean over as many untrained models; gated on ``learned``. For
    directionality both nulls hold each draw and its transpose (:func:`attnstruct.stats.symmetrised`): the centre
    is 0 exactly."""
    null = shape.null(score, n_draws, seed)
    centre = float(np.median(null))
    values = _per_seed(values)
    of_the_mean = stats.null_of_the_mean(null, len(values), seed=seed) - centre
    return stats.paired_effect(
        values,
        np.full_like(values, centre),
        claim=claim,
        predicted_sign=predicted_sign,
        null_samples=stats.symmetrised(of_the_mean) if score == "directionality" else of_the_mean,
        seed=seed,
        learned=learned,
    )


def objective_effects(
    ds: xr.Dataset,
    shape: Shape,
    *,
    encoder: str = ENCODER,
    decoder: str = DECODER,
    n_draws: int = 400,
    seed: int = 0,
    learned: Mapping[str, bool] | None = None,
) -> list[stats.Effect]:
    """The paper's three claims about encoders and decoders trained from scratch, at the end of training, decided
    under :data:`PLAN` (the first primary, the others secondary):

    1. the encoder ends more symmetric than the decoder (encoder minus decoder median symmetry > 0);
    2. the decoder ends more column-dominant (encoder minus decoder median directionality > 0);
    3. the decoder's directionality is negative beyond an untrained layer's (decoder minus null median < 0).

    The encoder and the decoder of one seed start from the same weights, so 1 and 2 are paired, and their null
    swaps the two objectives within a seed (:func:`attnstruct.stats.paired_null`). ``learned``: ``{objective: did
    every run of it learn}`` (:func:`attnstruct.analyses.text_runs.learned_by`; None: all did). Claims 1 and 2 rest on
    both objectives' runs, claim 3 on the decoder's.
    """
    for name in (encoder, decoder):
        if name not in ds.objective.values:
            raise ValueError(f"objective {name!r} is not in the runs ({list(map(str, ds.objective.values))})")
    ok = {encoder: True, decoder: True} if learned is None else {o: bool(learned[o]) for o in (encoder, decoder)}
    gaps = []
    for score in SCORES:
        final = final_median(ds, score)
        treated = final.sel(objective=encoder)
        treated, baseline = _per_seed(treated), _per_seed(final.sel(objective=decoder).sel(seed=treated.seed))
        gaps.append(
            stats.paired_effect(
                treated,
                baseline,
                claim=f"encoder minus decoder, final median {score}",
                null_samples=stats.paired_null(treated - baseline, seed=seed),
                seed=seed,
                learned=ok[encoder] and ok[decoder],
            )
        )
    decoder_direction = against_null_effect(
        final_median(ds, "directionality").sel(objective=decoder),
        score="directionality",
        shape=shape,
        predicted_sign=-1,
        claim="decoder final median directionality minus an untrained layer's",
        n_draws=n_draws,
        seed=seed,
        learned=ok[decoder],
    )
    return PLAN.decide([*gaps, decoder_direction])


def paper_claims(
    ds: xr.Dataset, shape: Shape, *, n_draws: int = 400, learned: Mapping[str, bool] | None = None
) -> list[stats.Effect]:
    """:func:`objective_effects` when both objectives were trained, else none."""
    return objective_effects(ds, shape, n_draws=n_draws, learned=learned) if has_both(ds) else []


def gap_without_layer_zero(
    ds: xr.Dataset,
    *,
    encoder: str = ENCODER,
    decoder: str = DECODER,
    seed: int = 0,
    learned: Mapping[str, bool] | None = None,
) -> list[stats.Effect]:
    """The primary claim's gap once more without the first layer (a secondary claim of :data:`PLAN`): per seed the
    encoder's median final symmetry over the layers after layer 0 minus the decoder's, paired, against the null of
    swapping the objectives within a seed; gated on both objectives' runs having learned (``learned``, None: all
    did). None when an objective was not trained or the model has one layer."""
    if not has_both(ds, encoder, decoder) or ds.sizes["layer"] < 2:
        return []
    final = final_median(ds.sortby("layer").isel(layer=slice(1, None)), "symmetry")
    treated = final.sel(objective=encoder)
    treated, baseline = _per_seed(treated), _per_seed(final.sel(objective=decoder).sel(seed=treated.seed))
    ok = learned is None or (bool(learned[encoder]) and bool(learned[decoder]))
    effect = stats.paired_effect(
        treated,
        baseline,
        claim=GAP_WITHOUT_LAYER_ZERO,
        null_samples=stats.paired_null(treated - baseline, seed=seed),
        seed=seed,
        learned=ok,
    )
    return PLAN.decide([effect])


def decay_effects(
    ds: xr.Dataset, objectives=None, seed: int = 0, learned: Mapping[str, bool] | None = None
) -> list[stats.Effect]:
    """Per objective: does the median symmetry fall after its peak? Each seed's early-window mean minus late-window
    mean of its records after the peak (:func:`attnstruct.stats.decay_contrast`, windows of :data:`DECAY_WINDOW`
    of those records), read by a sign-flip test over seeds; secondary claims of :data:`PLAN`, gated on
    ``learned[objective]`` (None: every objective learned)."""
    median = ds["symmetry"].median("layer")
    effects = []
    for objective in objectives or [str(o) for o in ds.objective.values]:
        runs = median.sel(objective=objective).sortby("seed").transpose("seed", "step").dropna("step", how="any")
        contrast = stats.decay_contrast(np.asarray(runs.values, dtype=float), fraction=DECAY_WINDOW)
        effects.append(
            stats.paired_effect(
                contrast,
                np.zeros_like(contrast),
                seed=seed,
                claim=_decay(objective).name,
                learned=True if learned is None else bool(learned[objective]),
            )
        )
    return PLAN.decide(effects)


# ---------------------------------------------------------------------------------------------- the schedules


def schedule_runs(root: str | os.PathLike | None = None) -> pd.DataFrame:
    """The calibration runs that compare learning-rate schedules (rows of ``docs/calibration.csv`` under the
    project root ``root``, default :func:`attnstruct.notebooks.find_root`, whose ``purpose`` is ``schedule``);
    empty when the file is not there (an installed package without the repository)."""
    try:
        path = Path(root or notebooks.project_root()) / "docs" / "calibration.csv"
    except notebooks.PipelineError:
        return pd.DataFrame()
    if not path.is_file():
        return pd.DataFrame()
    table = pd.read_csv(path, comment="#")
    return table[table["purpose"] == "schedule"].reset_index(drop=True)


def _setting(rows: pd.DataFrame, column: str) -> str:
    values = sorted({int(v) for v in rows[column]})
    return " or ".join(f"{v:,}" for v in values)


# ---------------------------------------------------------------------------------------------- the dataset


def result_dataset(
    runs: xr.Dataset,
    *,
    parameters: Mapping,
    corpus: str,
    unigram_entropy: float,
    learned: bool,
    effects: Sequence[stats.Effect],
) -> xr.Dataset:
    """Notebook 05's dataset: the runs with the provenance attrs, whether every run learned
    (``loss_targets_met``), and under ``verdicts`` the table of ``effects`` (JSON, ``"{}"`` for none)."""
    out = runs.copy()
    out.attrs.update(
        results.provenance_attrs(
            parameters=parameters,
            scored_matrix=runs.attrs["scored_matrix"],
            corpus=corpus,
            unigram_entropy=unigram_entropy,
            loss_targets_met="yes" if learned else "no",
            verdicts=stats.verdict_table(effects).to_json(orient="index") if effects else "{}",
        )
    )
    out.attrs["runs"] = runs.attrs["runs"]
    return out


# The facts the notebook's sentences and titles state: strings formatted by attnstruct.report.prose.


@dataclass(frozen=True)
class AuthorsRunsFacts:
    """The authors' medians over layers at their last ``step``: the span of the symmetry of their ``encoders`` (and
    of the 12-layer ones, ``encoders_12``) and ``decoders``, and of the directionality of each
    (``encoder_directionality``, ``decoder_directionality``)."""

    step: str
    encoders: str
    encoders_12: str
    decoders: str
    encoder_directionality: str
    decoder_directionality: str


def authors_runs(runs: pd.DataFrame | None = None) -> AuthorsRunsFacts:
    """The facts of the authors' runs (``runs``: :func:`attnstruct.reference.training_dynamics` by default)."""
    runs = reference.training_dynamics() if runs is None else runs
    last = runs[runs.step == runs.step.max()]
    encoders, decoders = last[last["mode"] == "encoder"], last[last["mode"] == "decoder"]
    return AuthorsRunsFacts(
        step=f"{int(runs.step.max()):,}",
        encoders=prose.span(encoders.symmetry),
        encoders_12=prose.span(encoders[encoders.n_layers == 12].symmetry),
        decoders=prose.span(decoders.symmetry),
        encoder_directionality=prose.span(encoders.directionality),
        decoder_directionality=prose.span(decoders.directionality),
    )


@dataclass(frozen=True)
class SetupFacts:
    """The data and the run: the ``corpus`` (its own description), an ``example`` cut into the tokenizer's
    ``tokens``, the model (``n_layers``, ``d_model``, ``n_heads`` of ``d_head``, ``norm``), the run (``steps`` of
    ``batch_size`` x ``seq_len`` tokens, ``passes`` over the training text) and the ``unigram_entropy`` (nats) of the
    training tokens."""

    corpus: str
    example: str
    tokens: str
    n_layers: str
    d_model: str
    n_heads: str
    d_head: str
    norm: str
    steps: str
    batch_size: str
    seq_len: str
    passes: str
    unigram_entropy: str


def setup(data, tokenizer, config: text_config.TextConfig, example: str) -> SetupFacts:
    """The facts of the corpus (``data``, :class:`attnstruct.tasks.plays_and_text_files.TokenData`), ``example`` in
    ``tokenizer``'s tokens, and the run of ``config`` (passes: ``steps * batch_size * seq_len / training tokens``)."""
    shape = config.model_config(data.vocab_size)
    passes = config.steps * config.batch_size * config.seq_len / len(data.train)
    return SetupFacts(
        corpus=data.describe(),
        example=example,
        tokens=str([tokenizer.id_to_token(i) for i in tokenizer.encode(example).ids]),
        n_layers=str(config.n_layers),
        d_model=str(config.d_model),
        n_heads=str(config.n_heads),
        d_head=str(shape.d_head),
        norm=str(config.norm),
        steps=str(config.steps),
        batch_size=str(config.batch_size),
        seq_len=str(config.seq_len),
        passes=prose.number(passes, 1),
        unigram_entropy=prose.number(data.unigram_entropy(), 3),
    )


@dataclass(frozen=True)
class ObjectiveLossFacts:
    """One ``objective``'s final validation loss against the unigram entropy, mean over seeds: ``distance`` nats
    ``side`` (``below``, ``above``) it."""

    objective: str
    distance: str
    side: str


def losses_against_entropy(targets: pd.DataFrame) -> list[ObjectiveLossFacts]:
    """The facts of :func:`attnstruct.analyses.text_runs.loss_targets`' table per objective, in order."""
    below = targets.reset_index().groupby("objective", sort=False)["below_unigram"].mean()
    return [
        ObjectiveLossFacts(label(o), prose.number(abs(float(v))), "below" if v >= 0 else "above")
        for o, v in below.items()
    ]


@dataclass(frozen=True)
class ScoresFacts:
    """The scores over training: with enough seeds of runs that learned and both objectives (``can_tell``), the
    encoder ends more symmetric than the decoder in ``more`` of ``seeds`` (final median over layers); otherwise the
    ``reason`` it cannot tell. ``ends``: the final medians over layers of both scores, mean over seeds (the
    statistic the verdicts read)."""

    can_tell: bool
    reason: str
    more: str
    seeds: str
    ends: str


def scores_over_training(ds: xr.Dataset, learned: bool = True) -> ScoresFacts:
    """The facts of the runs' symmetry and directionality over training."""
    finals = {s: final_median(ds, s).mean("seed") for s in SCORES}  # the verdicts' statistic, seed by seed
    roles = {o: label(o).split(" (")[0] for o in ds.objective.values}
    ends = "; ".join(
        f"{s} " + ", ".join(f"{prose.signed(finals[s].sel(objective=o))} ({role})" for o, role in roles.items())
        for s in SCORES
    )
    reason = no_finding(ds.sizes["seed"], learned) or ("" if has_both(ds) else "one objective")
    more = 0
    if not reason:
        symmetry = final_median(ds, "symmetry")
        more = int((symmetry.sel(objective=ENCODER) - symmetry.sel(objective=DECODER) > 0).sum())
    return ScoresFacts(not reason, reason, str(more), prose.count(ds.sizes["seed"], "seed"), ends)


@dataclass(frozen=True)
class LayerSpanFacts:
    """One ``objective``'s final symmetry in seed ``seed``: its ``span`` over layers."""

    objective: str
    seed: str
    span: str


def final_layer_spans(ds: xr.Dataset, seed: int) -> list[LayerSpanFacts]:
    """The facts of each objective's final symmetry per layer in ``seed``, in order."""
    final = ds.symmetry.sel(seed=seed).isel(step=-1)
    return [LayerSpanFacts(label(o), str(seed), prose.span(final.sel(objective=o).values)) for o in ds.objective.values]


@dataclass(frozen=True)
class TransientFacts:
    """One ``objective``'s transient (:func:`transient`' table): the ``peak`` of its median symmetry over layers
    (mean over seeds) at ``peak_step`` (median over seeds), its ``final`` value (mean) and ``decay`` (mean)."""

    objective: str
    peak: str
    peak_step: str
    final: str
    decay: str


def transients(table: pd.DataFrame) -> list[TransientFacts]:
    """The facts of :func:`transient`'s table per objective, in order."""
    means = table.groupby(level="objective", sort=False).agg(
        {"peak": "mean", "peak_step": "median", "final": "mean", "decay": "mean"}
    )
    return [
        TransientFacts(
            label(o), prose.signed(row.peak), str(int(row.peak_step)), prose.signed(row.final), prose.signed(row.decay)
        )
        for o, row in means.iterrows()
    ]


@dataclass(frozen=True)
class LayerGapFacts:
    """Encoder minus decoder final symmetry, when both objectives were trained (``both_trained``): of the medians
    over layers, ``mean`` over ``seeds``; per layer, mean over seeds (``layers``: ``layer 0 +0.12, layer 1 ...``);
    with more than one layer (``beyond_first``), of the medians over the layers after layer 0, the mean over seeds
    (``without_first``) and in how many seeds it is below 0 (``negative_without_first``: ``2 of 5 seeds``)."""

    both_trained: bool
    mean: str
    seeds: str
    layers: str
    beyond_first: bool
    without_first: str
    negative_without_first: str


def layer_gap(ds: xr.Dataset) -> LayerGapFacts:
    """The facts of the encoder-decoder gap of final symmetry (:func:`per_layer_gap`)."""
    if not has_both(ds):
        return LayerGapFacts(False, "", "", "", False, "", "")
    medians = final_median(ds, "symmetry")
    gap = (medians.sel(objective=ENCODER) - medians.sel(objective=DECODER)).values
    by_layer = per_layer_gap(ds).mean(axis=0)
    beyond_first = ds.sizes["layer"] > 1
    rest = np.zeros(0)
    if beyond_first:
        rest_medians = final_median(ds.sortby("layer").isel(layer=slice(1, None)), "symmetry")
        rest = (rest_medians.sel(objective=ENCODER) - rest_medians.sel(objective=DECODER)).values
    return LayerGapFacts(
        both_trained=True,
        mean=prose.signed(float(gap.mean())),
        seeds=prose.count(len(gap), "seed"),
        layers=", ".join(f"layer {int(layer)} {prose.signed(v)}" for layer, v in by_layer.items()),
        beyond_first=beyond_first,
        without_first=prose.signed(float(rest.mean())) if beyond_first else "",
        negative_without_first=f"{int((rest < 0).sum())} of {prose.count(len(rest), 'seed')}" if beyond_first else "",
    )


@dataclass(frozen=True)
class HeadFacts:
    """One ``objective``'s final per-head symmetry: the span over heads and layers of the mean over seeds
    (``mean_span``), and over heads, layers and seeds (``span``)."""

    objective: str
    mean_span: str
    span: str


def heads_at_end(ds: xr.Dataset) -> list[HeadFacts]:
    """The facts of each objective's per-head symmetry at the last record, in order."""
    means, heads = final_heads(ds, "head_symmetry"), ds.head_symmetry.isel(step=-1)
    return [
        HeadFacts(label(o), prose.span(means.sel(objective=o).values), prose.span(heads.sel(objective=o)))
        for o in ds.objective.values
    ]


@dataclass(frozen=True)
class ClaimsFacts:
    """:func:`objective_effects`' three verdicts, when both objectives were trained (``tested``). Symmetry: whether
    the encoder-decoder claim ``holds`` or ``fails`` (neither: cannot tell), its ``estimate``, the interval ``low`` to
    ``high`` over ``seeds`` (``one_seed``: none), its ``reason``, and the null's 95% range ``null_low`` to
    ``null_high`` (``has_null``). Directionality: the ``direction_verdict`` and ``direction_estimate`` of the
    encoder-decoder difference, the ``decoder_verdict`` and ``decoder_estimate`` against an untrained layer, and at
    width ``d_model`` the 95% ``null_span`` of an untrained layer's median directionality."""

    tested: bool
    holds: bool
    fails: bool
    estimate: str
    one_seed: bool
    low: str
    high: str
    seeds: str
    reason: str
    has_null: bool
    null_low: str
    null_high: str
    direction_verdict: str
    direction_estimate: str
    decoder_verdict: str
    decoder_estimate: str
    d_model: str
    null_span: str


def claims_stated(claims: Sequence[stats.Effect], shape: Shape, directionality_null) -> ClaimsFacts:
    """The facts of :func:`paper_claims`' effects (none: ``tested`` false), with ``directionality_null`` ``[k]``,
    the null of the median directionality over layers of ``shape``."""
    if not claims:
        return ClaimsFacts(False, False, False, "", False, "", "", "", "", False, "", "", "", "", "", "", "", "")
    gap, direction, decoder = claims
    return ClaimsFacts(
        tested=True,
        holds=gap.verdict == stats.HOLDS,
        fails=gap.verdict == stats.DOES_NOT_HOLD,
        estimate=prose.signed(gap.estimate),
        one_seed=gap.n <= 1,
        low=prose.signed(gap.low),
        high=prose.signed(gap.high),
        seeds=prose.count(gap.n, "seed"),
        reason=gap.reason,
        has_null=gap.null is not None,
        null_low="" if gap.null is None else prose.signed(gap.null.null_low),
        null_high="" if gap.null is None else prose.signed(gap.null.null_high),
        direction_verdict=direction.verdict,
        direction_estimate=prose.signed(direction.estimate),
        decoder_verdict=decoder.verdict,
        decoder_estimate=prose.signed(decoder.estimate),
        d_model=str(shape.d_model),
        null_span=prose.span(np.quantile(directionality_null, [0.025, 0.975])),
    )


@dataclass(frozen=True)
class SchedulesFacts:
    """The calibration runs of the two schedules (:func:`schedule_runs`), when any are recorded (``any``): their
    settings (``width``, ``layers``, ``steps``, ``batch_size``), ``per_cell`` runs per schedule and objective, their
    ``seeds``; the final median symmetry ``by_schedule``; the encoder minus the decoder per schedule (``gaps``;
    ``has_gaps``); ``met`` of ``runs`` met their loss targets."""

    any: bool
    width: str
    layers: str
    steps: str
    batch_size: str
    per_cell: str
    seeds: str
    by_schedule: str
    has_gaps: bool
    gaps: str
    met: str
    runs: str


def schedules_compared(rows: pd.DataFrame) -> SchedulesFacts:
    """The facts of :func:`schedule_runs`' rows: values of single runs, with no verdict."""
    if rows.empty:
        return SchedulesFacts(False, "", "", "", "", "", "", "", False, "", "", "")
    table = rows.pivot_table(index="schedule", columns="objective", values="final_symmetry", sort=False)
    by_schedule = "; ".join(
        f"`{schedule}`: " + ", ".join(f"{o} {prose.signed(v)}" for o, v in values.dropna().items())
        for schedule, values in table.iterrows()
    )
    has_gaps = {ENCODER, DECODER} <= set(table.columns)
    gaps = ""
    if has_gaps:
        gap = table[ENCODER] - table[DECODER]
        gaps = ", ".join(f"`{s}` {prose.signed(v)}" for s, v in gap.items())
    return SchedulesFacts(
        any=True,
        width=_setting(rows, "d_model"),
        layers=_setting(rows, "n_layers"),
        steps=_setting(rows, "steps"),
        batch_size=_setting(rows, "batch_size"),
        per_cell=prose.count(int(rows.groupby(["schedule", "objective"]).size().max()), "run"),
        seeds=", ".join(str(int(s)) for s in sorted(set(rows["seed"]))),
        by_schedule=by_schedule,
        has_gaps=has_gaps,
        gaps=gaps,
        met=str(int(rows["met"].astype(bool).sum())),
        runs=prose.count(len(rows), "run"),
    )


@dataclass(frozen=True)
class BesideAuthorsFacts:
    """Our final median symmetry over layers (mean over seeds) per objective, ``ours``, after ``steps`` beside the
    span of the authors' ``encoders`` and ``decoders`` after ``authors_steps``; with enough seeds of runs that learned
    and both objectives (``can_tell``, else the ``reason``), how our encoder compares with our decoder
    (``comparison``: ``more symmetric than``, ``less symmetric than``, ``as symmetric as``) and whether ``as``
    or ``unlike`` (``agree``) the authors'."""

    can_tell: bool
    reason: str
    ours: str
    steps: str
    encoders: str
    decoders: str
    authors_steps: str
    comparison: str
    agree: str


def beside_authors(ds: xr.Dataset, authors: pd.DataFrame, learned: bool = True) -> BesideAuthorsFacts:
    """The facts of our runs beside the authors' (:func:`attnstruct.reference.training_dynamics`), by mode."""
    ours = median_over_layers(ds, "symmetry").mean("seed").isel(step=-1)
    last = authors[authors.step == authors.step.max()]
    theirs = {mode: last[last["mode"] == mode].symmetry for mode in ("encoder", "decoder")}
    here = " and ".join(
        f"{prose.signed(ours.sel(objective=o))} ({role})"
        for o, role in ((ENCODER, "encoder"), (DECODER, "decoder"))
        if o in ds.objective.values
    )
    reason = no_finding(ds.sizes["seed"], learned) or ("" if has_both(ds) else "one objective")
    comparison = agree = ""
    if not reason:
        comparison = prose.compared(ours.sel(objective=ENCODER), ours.sel(objective=DECODER))
        theirs_compared = prose.compared(np.median(theirs["encoder"]), np.median(theirs["decoder"]))
        agree = "as" if comparison == theirs_compared else "unlike"
    return BesideAuthorsFacts(
        can_tell=not reason,
        reason=reason,
        ours=here,
        steps=f"{int(ds.step[-1]):,}",
        encoders=prose.span(theirs["encoder"]),
        decoders=prose.span(theirs["decoder"]),
        authors_steps=f"{int(authors.step.max()):,}",
        comparison=comparison,
        agree=agree,
    )
