"""Notebook 01: the bilinear form checked on a toy BERT layer, example matrices and untrained layers placed
among random ones, and the facts its sentences and figure titles state.

A head's logit is ``q_i . k_j = x_i^T M_h x_j`` plus three bias terms (:mod:`attnstruct.bilinear`), with
``M_h = W_q[h]^T W_k[h]`` (``nn.Linear`` weights; the paper's ``W_q^h (W_k^h)^T``). :func:`identity_check` proves it
on a BERT layer: the logits from the factors equal ``Q K^T``, and their softmax equals the model's own attention.
The scores of an untrained layer, or of an example matrix, say something about structure only against the scores of
random matrices of the same shape (:func:`place_examples`, :func:`place_layers`).

What the notebook says comes from here as facts records (frozen dataclasses of strings formatted by
:mod:`attnstruct.report.prose`, plus the few data-dependent words); its sentences and figure titles are templates in
the notebook, filled by :func:`attnstruct.report.prose.say` and :func:`~attnstruct.report.prose.fill`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
import xarray as xr

from .. import bilinear, stats
from ..random_matrices import KINDS, example_matrix, generator
from ..report import prose
from ..scores import Scores, factor_scores, scores
from .matrix_readings import outlying_norms
from .null_ensembles import null_distribution

EXAMPLE_TITLES = dict(
    zip(KINDS, ("i.i.d. Gaussian", "symmetric", "skew-symmetric", "3 dominant columns", "3 dominant rows"))
)
BIAS_STD = 0.5  # the random query and key biases of the toy BERT (BERT initialises them at 0)
SCORE_NAMES = ("symmetry", "directionality")


def toy_bert(d_model: int, n_heads: int, n_layers: int, seq_len: int, seed: int, vocab_size: int = 200):
    """``(model, tokens)``: a BERT with random weights built from its configuration (nothing downloaded), dropout
    off, eager attention (which returns the attention probabilities), its query and key biases drawn from
    ``N(0, BIAS_STD^2)`` so that the bias terms of the logit are tested too, and ``tokens`` ``[1, seq_len]``.

    Drawn in that order from ``torch.manual_seed(seed)`` inside a fork of the global random state, which is left
    as it was.
    """
    from transformers import BertConfig, BertModel

    if d_model % n_heads:
        raise ValueError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads})")
    config = BertConfig(
        vocab_size=vocab_size,
        hidden_size=d_model,
        num_hidden_layers=n_layers,
        num_attention_heads=n_heads,
        intermediate_size=4 * d_model,
        max_position_embeddings=max(64, seq_len),
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = BertModel(config, add_pooling_layer=False).eval()
        model.set_attn_implementation("eager")
        with torch.no_grad():
            for layer in model.encoder.layer:
                layer.attention.self.query.bias.normal_(0, BIAS_STD)
                layer.attention.self.key.bias.normal_(0, BIAS_STD)
        tokens = torch.randint(0, vocab_size, (1, seq_len))
    return model, tokens


def layer_factors(layer, n_heads: int) -> tuple[torch.Tensor, ...]:
    """Per-head query and key weights ``[H, d_head, d_model]`` and biases ``[H, d_head]`` of one BERT layer."""
    attn = layer.attention.self
    d_head = attn.query.weight.shape[0] // n_heads
    return (
        bilinear.split_heads(attn.query.weight, n_heads),
        bilinear.split_heads(attn.key.weight, n_heads),
        attn.query.bias.reshape(n_heads, d_head),
        attn.key.bias.reshape(n_heads, d_head),
    )


def identity_check(model, tokens: torch.Tensor) -> pd.DataFrame:
    """Per layer (index ``layer``): ``max |QK^T - bilinear|``, the largest difference between the model's ``Q K^T``
    (float64, from its ``nn.Linear`` query and key maps) and the bilinear form plus bias terms from the per-head
    factors, over heads and positions; and ``max |softmax - model attention|``, between the softmax of that form
    scaled by ``1/sqrt(d_head)`` and the attention probabilities the model returns."""
    n_heads = model.config.num_attention_heads
    with torch.no_grad():
        out = model(tokens, output_hidden_states=True, output_attentions=True)
    rows = []
    for index, layer in enumerate(model.encoder.layer):
        attn = layer.attention.self
        w_q, w_k, b_q, b_k = layer_factors(layer, n_heads)
        x = out.hidden_states[index][0].double()  # the layer's input, [N, d_model]
        n, d_head = x.shape[0], w_q.shape[1]
        with torch.no_grad():
            q = (x @ attn.query.weight.double().T + attn.query.bias.double()).reshape(n, n_heads, d_head)
            k = (x @ attn.key.weight.double().T + attn.key.bias.double()).reshape(n, n_heads, d_head)
        qk = torch.einsum("ihd,jhd->hij", q, k)  # Q K^T per head, [H, N, N]
        form = bilinear.bilinear_logits(x, w_q, w_k, b_q, b_k)  # X M_h X^T + bias terms, [H, N, N]
        probs = torch.softmax(form / d_head**0.5, dim=-1)
        rows.append(
            {
                "layer": index,
                "max |QK^T - bilinear|": float((qk - form).abs().max()),
                "max |softmax - model attention|": float((probs - out.attentions[index][0].double()).abs().max()),
            }
        )
    return pd.DataFrame(rows).set_index("layer")


def example_matrices(dim: int, seed: int) -> dict[str, torch.Tensor]:
    """One ``dim x dim`` matrix of each kind of :data:`attnstruct.random_matrices.KINDS`, drawn in that order from
    ``generator(seed, 1)``."""
    gen = generator(seed, 1)
    return {kind: example_matrix(kind, dim, gen) for kind in KINDS}


def _placements(scored: dict, nulls: dict, key: str) -> pd.DataFrame:
    """``scored``: name -> :class:`~attnstruct.scores.Scores`; ``nulls``: score -> null samples. Each score's place
    in its null (:func:`attnstruct.stats.compare_with_null`), indexed by ``(key, score)``."""
    rows = []
    for name, values in scored.items():
        for score in SCORE_NAMES:
            found = stats.compare_with_null(float(getattr(values, score)), nulls[score])
            row = {key: name, "score": score, "value": found.value, "percentile": found.percentile}
            rows.append(row | {"null_low": found.null_low, "null_high": found.null_high, "outside": found.outside})
    return pd.DataFrame(rows).set_index([key, "score"])


def place_examples(matrices: dict, null_draws: int, seed: int) -> pd.DataFrame:
    """Each matrix's two scores among ``null_draws`` i.i.d. Gaussian matrices of its size (the ``gaussian``
    ensemble of :func:`attnstruct.analyses.null_ensembles.null_distribution` with ``seed``; for directionality
    those matrices and their transposes, :func:`attnstruct.stats.symmetrised`), indexed by ``(example, score)``:
    ``value``, ``percentile``, ``null_low``, ``null_high`` (the null's 95% range) and ``outside``."""
    dims = {m.shape[0] for m in matrices.values()}
    if len(dims) != 1:
        raise ValueError(f"the examples must share one size, got {sorted(dims)}")
    null = null_distribution(sorted(dims), [1], null_draws, seed).sel(ensemble="gaussian")
    nulls = {score: null[score].values[0] for score in SCORE_NAMES}
    nulls["directionality"] = stats.symmetrised(nulls["directionality"])  # each matrix and its transpose
    return _placements({kind: scores(m) for kind, m in matrices.items()}, nulls, "example")


def place_layers(layer_scores: list[Scores], d_model: int, n_heads: int, null_draws: int, seed: int) -> pd.DataFrame:
    """Each layer's scores (summed over heads) among ``null_draws`` random layers of the same width and head count
    (:func:`attnstruct.stats.null_median_over_layers` with one layer), indexed by ``(layer, score)``: ``value``,
    ``percentile``, ``null_low``, ``null_high``, ``outside``."""
    nulls = {
        s: stats.null_median_over_layers(s, d_model, n_heads, 1, n_draws=null_draws, seed=seed) for s in SCORE_NAMES
    }
    return _placements(dict(enumerate(layer_scores)), nulls, "layer")


def head_and_layer_scores(model) -> tuple[list[Scores], list[Scores]]:
    """Per layer of ``model``: the scores of each head's ``W_q[h]^T W_k[h]`` (``[H]`` tensors) and of their sum."""
    n_heads = model.config.num_attention_heads
    factors = [layer_factors(layer, n_heads)[:2] for layer in model.encoder.layer]
    return [factor_scores(*f) for f in factors], [factor_scores(*f, sum_heads=True) for f in factors]


# The facts the notebook's sentences and figure titles state.


@dataclass(frozen=True)
class LayerPlacementFacts:
    """One layer's two scores (summed over heads) among ``draws`` random layers of its shape: per score the
    ``value`` and the null's 95% range ``low`` to ``high`` (three decimals), its ``percentile`` (one decimal),
    ``outside`` the range or not and the word for it (``where``: ``outside`` or ``inside``)."""

    layer: str
    draws: str
    symmetry: str
    symmetry_percentile: str
    symmetry_low: str
    symmetry_high: str
    symmetry_outside: bool
    symmetry_where: str
    directionality: str
    directionality_percentile: str
    directionality_low: str
    directionality_high: str
    directionality_outside: bool
    directionality_where: str


def _layer_facts(layer, cell: pd.DataFrame, null_draws: int) -> LayerPlacementFacts:
    fields = {"layer": str(layer), "draws": str(null_draws)}
    for score, row in cell.droplevel("layer").iterrows():
        fields |= {
            score: prose.signed(row.value, 3),
            f"{score}_percentile": prose.number(row.percentile, 1),
            f"{score}_low": prose.signed(row.null_low, 3),
            f"{score}_high": prose.signed(row.null_high, 3),
            f"{score}_outside": bool(row.outside),
            f"{score}_where": "outside" if row.outside else "inside",
        }
    return LayerPlacementFacts(**fields)


def layers_among_random(placed: pd.DataFrame, null_draws: int) -> list[LayerPlacementFacts]:
    """The facts of every layer of :func:`place_layers`' table ``placed``, in layer order."""
    return [_layer_facts(layer, cell, null_draws) for layer, cell in placed.groupby(level="layer")]


def first_layer_among_random(placed: pd.DataFrame, null_draws: int) -> LayerPlacementFacts:
    """The facts of layer 0 of :func:`place_layers`' table ``placed``."""
    return _layer_facts(0, placed.xs(0, level="layer", drop_level=False), null_draws)


@dataclass(frozen=True)
class ExamplesNullFacts:
    """The example matrices against ``draws`` i.i.d. Gaussian matrices of their ``size``: the directionality null's
    95% range ``low`` to ``high``, and which ``(example, score)`` pairs lie ``outside`` their null's range
    (``kind (score)``, listed; ``any_outside`` false when none does)."""

    draws: str
    size: str
    low: str
    high: str
    any_outside: bool
    outside: str


def examples_among_gaussian(placed: pd.DataFrame, null_draws: int, dim: int) -> ExamplesNullFacts:
    """The facts of :func:`place_examples`' table ``placed``."""
    direc = placed.xs("directionality", level="score")
    outside = [f"{kind} ({score})" for kind, score in placed.index[placed.outside.astype(bool)]]
    return ExamplesNullFacts(
        draws=str(null_draws),
        size=str(dim),
        low=prose.signed(direc.null_low.iloc[0]),
        high=prose.signed(direc.null_high.iloc[0]),
        any_outside=bool(outside),
        outside=", ".join(outside),
    )


@dataclass(frozen=True)
class EnergyFacts:
    """The shares of a matrix's energy ``||M||^2`` carried by its ``symmetric`` and its ``skew`` part."""

    symmetric: str
    skew: str


def energy_shares(energy: Mapping[str, float]) -> EnergyFacts:
    """``energy`` holds ``||M||^2`` (``M``) and its parts' (``M_s``, ``M_n``)."""
    total = energy["M"] or 1.0
    return EnergyFacts(symmetric=prose.percent(energy["M_s"] / total), skew=prose.percent(energy["M_n"] / total))


@dataclass(frozen=True)
class ExampleScoreFacts:
    """What each score answers to in the example matrices: the ``symmetric`` and ``skew`` examples' symmetry, the
    dominant ``columns`` and ``rows`` examples' directionality."""

    symmetric: str
    skew: str
    columns: str
    rows: str


def structured_example_scores(example_scores: Mapping[str, Scores]) -> ExampleScoreFacts:
    """``example_scores[kind]`` (kinds of :data:`EXAMPLE_TITLES`): the scores of the structured examples."""
    return ExampleScoreFacts(
        symmetric=prose.signed(example_scores["symmetric"].symmetry),
        skew=prose.signed(example_scores["skew"].symmetry),
        columns=prose.signed(example_scores["columns"].directionality),
        rows=prose.signed(example_scores["rows"].directionality),
    )


@dataclass(frozen=True)
class DominantColumnsFacts:
    """How many ``columns`` and ``rows`` of a matrix pass their norm threshold (counted), their summed excesses
    ``C`` and ``R`` (three significant digits) and the matrix's ``directionality``."""

    columns: str
    rows: str
    C: str
    R: str
    directionality: str


def dominant_columns(matrix, directionality: float) -> DominantColumnsFacts:
    """The facts of :func:`attnstruct.analyses.matrix_readings.outlying_norms` of ``matrix`` and its
    ``directionality``."""
    norms = outlying_norms(np.asarray(matrix))
    return DominantColumnsFacts(
        columns=prose.count(norms["columns_over"], "column"),
        rows=prose.count(norms["rows_over"], "row"),
        C=f"{norms['C']:.3g}",
        R=f"{norms['R']:.3g}",
        directionality=prose.signed(directionality),
    )


def results_dataset(
    head_scores: list[Scores], layer_scores: list[Scores], example_scores: dict[str, Scores], check: pd.DataFrame
) -> xr.Dataset:
    """Notebook 01's results over ``layer``, ``head`` and ``example`` (attrs added by the notebook): the layers'
    scores summed over heads and per head, the example matrices' scores, and the identity check's largest errors."""
    kinds = list(example_scores)
    return xr.Dataset(
        {
            "symmetry": ("layer", [float(s.symmetry) for s in layer_scores]),
            "directionality": ("layer", [float(s.directionality) for s in layer_scores]),
            "head_symmetry": (("layer", "head"), np.stack([s.symmetry.numpy() for s in head_scores])),
            "head_directionality": (("layer", "head"), np.stack([s.directionality.numpy() for s in head_scores])),
            "example_symmetry": ("example", [float(example_scores[k].symmetry) for k in kinds]),
            "example_directionality": ("example", [float(example_scores[k].directionality) for k in kinds]),
            "logit_max_abs_error": ("layer", check["max |QK^T - bilinear|"].values),
            "attention_max_abs_error": ("layer", check["max |softmax - model attention|"].values),
        },
        coords={
            "layer": np.arange(len(layer_scores)),
            "head": np.arange(len(head_scores[0].symmetry)),
            "example": kinds,
        },
    )
