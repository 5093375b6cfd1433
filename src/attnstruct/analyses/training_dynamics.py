"""Notebook 05: the same Transformer trained as encoder and decoder, its verdicts and the sentences that state them.

Every function takes a combined dataset of runs (:func:`attnstruct.training.processes.combine`: dims ``objective``,
``seed``, ``step``, ``layer`` and maybe ``init``) and reduces each run to one number per seed before any
statistics, since the seed is the independent unit (:mod:`attnstruct.stats`). Layers are pooled by their
median, as the paper does for a model. The null of a score is that of an untrained layer of the same shape:
``sum_h W_q[h]^T W_k[h]`` with Gaussian factors, ``n_heads`` heads of width ``d_model / n_heads``, the median over
``n_layers`` such layers (:func:`attnstruct.stats.nulls.null_median_over_layers`). Every verdict is gated on the
runs it rests on having learned (``learned``, :mod:`attnstruct.analyses.gates`), and decided under the notebook's
declared plan (:data:`attnstruct.analyses.plans.TRAINING_DYNAMICS`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import xarray as xr

from .. import reference, results, stats
from ..report import prose
from ..tasks import text_config
from . import gates
from .plans import TRAINING_DYNAMICS as PLAN

SCORES = ("symmetry", "directionality")
ENCODER, DECODER = "mlm", "next-token"
LABELS = {
    "mlm": "encoder (masked LM)",
    "next-token": "decoder (next token)",
    "next-token-mlm-collator": "decoder, authors' collator",
}


def label(objective) -> str:
    """The name of an objective in a sentence or a legend (:data:`LABELS`, else the objective itself)."""
    return LABELS.get(str(objective), str(objective))


# ---------------------------------------------------------------------------------------------- the set-up


def describe_authors_runs(runs: pd.DataFrame | None = None) -> str:
    """The authors' medians over layers at their last step (``runs``: :func:`attnstruct.reference.training_dynamics`
    by default): the range of symmetry of their encoders (and of the 12-layer ones) and decoders, and of
    directionality."""
    runs = reference.training_dynamics() if runs is None else runs
    last = runs[runs.step == runs.step.max()]
    encoders, decoders = last[last["mode"] == "encoder"], last[last["mode"] == "decoder"]
    return (
        f"The authors' runs (median over layers at step {int(runs.step.max()):,}, their result files): encoders "
        f"{prose.span(encoders.symmetry)} in symmetry ({prose.span(encoders[encoders.n_layers == 12].symmetry)} for "
        f"the 12-layer runs the paper draws), decoders {prose.span(decoders.symmetry)}; directionality "
        f"{prose.span(encoders.directionality)} for the encoders and {prose.span(decoders.directionality)} for the "
        "decoders."
    )


def describe_setup(data, tokenizer, config: text_config.TextConfig, example: str) -> list[str]:
    """Lines that state the data and the run: the corpus (``data``, :class:`attnstruct.tasks.corpus.TokenData`),
    ``example`` cut into ``tokenizer``'s tokens, the model and how many passes over the training text the run
    makes (``steps * batch_size * seq_len / training tokens``), and the unigram entropy of the training tokens."""
    shape = config.model_config(data.vocab_size)
    passes = config.steps * config.batch_size * config.seq_len / len(data.train)
    tokens = [tokenizer.id_to_token(i) for i in tokenizer.encode(example).ids]
    return [
        data.describe(),
        f"{example} -> {tokens}",
        f"model: {config.n_layers} layers, d_model {config.d_model}, {config.n_heads} heads of {shape.d_head}, "
        f"{config.norm}-LN; {config.steps} steps of {config.batch_size} x {config.seq_len} tokens = {passes:.1f} "
        "passes over the training text",
        f"unigram entropy of the training tokens (the loss of a context-free model): {data.unigram_entropy():.3f} nats",
    ]


def mean_losses(ds: xr.Dataset, objective: str) -> tuple[xr.DataArray, xr.DataArray]:
    """``objective``'s training loss ``[step]`` and validation loss ``[evaluated step]``, means over seeds."""
    runs = ds.sel(objective=objective)
    return runs.train_loss.mean("seed"), runs.val_loss.dropna("step", how="all").mean("seed")


def loss_target_levels(unigram_entropy: float, objectives: Sequence[str]) -> dict[str, float]:
    """``{objective: the validation loss it must end below}``: the unigram entropy minus the objective's margin
    (:data:`attnstruct.analyses.gates.LOSS_MARGINS`)."""
    return {str(o): unigram_entropy - gates.LOSS_MARGINS[str(o)] for o in objectives}


# ---------------------------------------------------------------------------------------------- reductions


def median_over_layers(ds: xr.Dataset, score: str) -> xr.DataArray:
    """The median over layers of ``score`` in every record: ``[objective, (init,) seed, step]``."""
    return ds[score].median("layer")


def final_median(ds: xr.Dataset, score: str) -> xr.DataArray:
    """The median over layers of ``score`` at the last record of every run: ``[objective, (init,) seed]``."""
    return ds[score].isel(step=-1).median("layer")


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


def describe_transient(table: pd.DataFrame) -> str:
    """Per objective of :func:`transient`'s table: the mean peak over seeds, the median step of the peak, the mean
    final value and the mean decay."""
    means = table.groupby(level="objective", sort=False).agg(
        {"peak": "mean", "peak_step": "median", "final": "mean", "decay": "mean"}
    )
    return " ".join(
        f"In the {label(o)}, the median symmetry over layers rose to {prose.signed(row.peak)} (mean over seeds; "
        f"median step of the peak: {int(row.peak_step)}) and ended at {prose.signed(row.final)}, "
        f"{prose.signed(row.decay)} below its peak."
        for o, row in means.iterrows()
    )


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


def describe_per_layer_gap(table: pd.DataFrame) -> str:
    """The mean over seeds of :func:`per_layer_gap`, layer by layer."""
    if table.empty:
        return "Only one of the two objectives was trained: there is no encoder-decoder difference to show."
    by_layer = table.mean(axis=0)
    return (
        "Encoder minus decoder final symmetry per layer, mean over seeds: "
        + ", ".join(f"layer {int(layer)} {prose.signed(v)}" for layer, v in by_layer.items())
        + "."
    )


def describe_heads(ds: xr.Dataset) -> str:
    """The range of the final per-head symmetry over heads, layers and seeds, per objective."""
    heads = ds.head_symmetry.isel(step=-1)
    return (
        "Per head, at the end: "
        + "; ".join(
            f"{label(o)} symmetry {prose.span(heads.sel(objective=o))} over heads, layers and seeds"
            for o in ds.objective.values
        )
        + "."
    )


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
    null's median, against the null of that mean over as many untrained models; gated on ``learned``."""
    null = shape.null(score, n_draws, seed)
    centre = float(np.median(null))
    values = _per_seed(values)
    return stats.paired_effect(
        values,
        np.full_like(values, centre),
        claim=claim,
        predicted_sign=predicted_sign,
        null_samples=stats.null_of_the_mean(null, len(values), seed=seed) - centre,
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
    every run of it learn}`` (:func:`attnstruct.analyses.gates.learned_by`; None: all did). Claims 1 and 2 rest on
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


def decay_effects(
    ds: xr.Dataset, objectives=None, seed: int = 0, learned: Mapping[str, bool] | None = None
) -> list[stats.Effect]:
    """Per objective: does the median symmetry fall after its peak? Each seed's downward trend after the peak
    (:func:`attnstruct.stats.decay_trend`) is read against the median of its null, the same records in any order
    (:func:`attnstruct.stats.decay_null`), and the mean excess against that null of the mean; secondary claims of
    :data:`PLAN`, gated on ``learned[objective]`` (None: every objective learned)."""
    median = ds["symmetry"].median("layer")
    effects = []
    for objective in objectives or [str(o) for o in ds.objective.values]:
        runs = median.sel(objective=objective).sortby("seed").transpose("seed", "step").dropna("step", how="any")
        trajectories = np.asarray(runs.values, dtype=float)
        null = stats.decay_null(trajectories, seed=seed)
        centre = float(np.median(null))
        effects.append(
            stats.paired_effect(
                stats.decay_trend(trajectories),
                np.full(len(trajectories), centre),
                seed=seed,
                claim=f"{objective}: median symmetry falls after its peak",
                null_samples=null - centre
                if len(null) > 1
                else None,  # one draw: no run has two records after its peak
                learned=True if learned is None else bool(learned[objective]),
            )
        )
    return PLAN.decide(effects)


SYMMETRY_WORDS = {
    stats.HOLDS: "the encoder ends more symmetric than the decoder, beyond what swapping the objectives within a seed "
    "gives",
    stats.DOES_NOT_HOLD: "the decoder ends more symmetric than the encoder",
    stats.CANNOT_TELL: "these runs cannot tell whether the encoder ends more symmetric",
}


def describe_claims(claims: Sequence[stats.Effect], shape: Shape, directionality_null) -> str:
    """The paragraph of :func:`objective_effects`' three verdicts: symmetry in words (:data:`SYMMETRY_WORDS`)
    with its interval, reason and the null's range, then both directionality verdicts, and how wide the null of
    the median directionality over layers (``directionality_null`` ``[k]``) is at this width."""
    if not claims:
        return "Only one of the two objectives was trained: the encoder-decoder claims are not tested."
    gap, direction, decoder = claims
    null_text = (
        ""
        if gap.null is None
        else f" Swapping the objectives within seeds gives mean differences in [{prose.signed(gap.null.null_low)}, "
        f"{prose.signed(gap.null.null_high)}] (95%)."
    )
    interval = (
        f"95% interval [{prose.signed(gap.low)}, {prose.signed(gap.high)}] over {prose.count(gap.n, 'seed')}"
        if gap.n > 1
        else "one seed, no interval"
    )
    return (
        f"**Symmetry, at the end of training:** {SYMMETRY_WORDS[gap.verdict]} (encoder minus decoder "
        f"{prose.signed(gap.estimate)}, {interval}; {gap.reason}).{null_text} "
        f"**Directionality:** {direction.verdict} for the encoder-decoder difference "
        f"({prose.signed(direction.estimate)}), {decoder.verdict} for the decoder against an untrained layer "
        f"({prose.signed(decoder.estimate)}); at width {shape.d_model} an untrained layer's median directionality "
        f"spans {prose.span(np.quantile(directionality_null, [0.025, 0.975]))} (95%), so only a large column "
        "dominance can be told apart from chance."
    )


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
