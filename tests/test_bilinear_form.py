"""Notebook 01's analysis: the toy BERT, the identity check against its own attention, where scores sit among random
matrices, and the sentences that say so."""

import numpy as np
import pandas as pd
import pytest
import torch

from attnstruct import stats
from attnstruct.analyses import bilinear_form
from attnstruct.random_matrices import KINDS
from attnstruct.report import prose


@pytest.fixture(scope="module")
def bert():
    return bilinear_form.toy_bert(d_model=16, n_heads=2, n_layers=2, seq_len=5, seed=0)


def test_the_toy_bert_is_seeded_has_biases_and_leaves_the_global_rng_alone(bert):
    torch.manual_seed(7)
    expected = torch.rand(3)
    torch.manual_seed(7)
    again, tokens = bilinear_form.toy_bert(d_model=16, n_heads=2, n_layers=2, seq_len=5, seed=0)
    assert torch.equal(torch.rand(3), expected)
    model, first_tokens = bert
    assert torch.equal(tokens, first_tokens) and tokens.shape == (1, 5)
    assert torch.equal(again.encoder.layer[1].attention.self.key.bias, model.encoder.layer[1].attention.self.key.bias)
    assert float(model.encoder.layer[0].attention.self.query.bias.detach().abs().max()) > 0.1


def test_the_bilinear_form_reproduces_the_models_attention(bert):
    check = bilinear_form.identity_check(*bert)
    assert list(check.index) == [0, 1]
    assert (check["max |QK^T - bilinear|"] < 1e-10).all() and (check["max |softmax - model attention|"] < 1e-6).all()


def test_the_check_fails_when_the_model_attends_otherwise():
    model, tokens = bilinear_form.toy_bert(d_model=16, n_heads=2, n_layers=2, seq_len=5, seed=0)
    model.encoder.layer[0].attention.self.scaling = 1.0  # the model no longer divides its logits by sqrt(d_head)
    check = bilinear_form.identity_check(model, tokens)
    assert check.loc[0, "max |softmax - model attention|"] > 1e-3 > check.loc[1, "max |softmax - model attention|"]


def test_examples_are_placed_in_the_gaussian_null():
    matrices = bilinear_form.examples(dim=12, seed=0)
    assert list(matrices) == list(KINDS)
    placed = bilinear_form.place_examples(matrices, null_draws=50, seed=0)
    assert placed.index.names == ["example", "score"] and len(placed) == 2 * len(KINDS)
    assert placed.loc[("symmetric", "symmetry"), "value"] == pytest.approx(1.0)
    assert bool(placed.loc[("symmetric", "symmetry"), "outside"]) and bool(placed.loc[("skew", "symmetry"), "outside"])
    with pytest.raises(ValueError, match="one size"):
        bilinear_form.place_examples({"a": torch.eye(3), "b": torch.eye(4)}, 10, 0)


def test_layers_are_placed_as_compare_with_null_places_them(bert):
    _, layer_scores = bilinear_form.head_and_layer_scores(bert[0])
    placed = bilinear_form.place_layers(layer_scores, d_model=16, n_heads=2, null_draws=40, seed=0)
    null = stats.null_median_over_layers("symmetry", 16, 2, 1, n_draws=40, seed=0)
    expected = stats.compare_with_null(float(layer_scores[1].symmetry), null)
    assert placed.loc[(1, "symmetry"), "percentile"] == expected.percentile
    assert placed.loc[(1, "symmetry"), "null_high"] == expected.null_high


def placed(rows):
    return pd.DataFrame(rows).set_index(["layer", "score"])


def test_the_sentences_say_inside_or_outside():
    rows = [
        {"layer": 0, "score": s, "value": v, "percentile": p, "null_low": -0.1, "null_high": 0.1, "outside": o}
        for s, v, p, o in (("symmetry", 0.5, 100.0, True), ("directionality", 0.0, 50.0, False))
    ]
    table = placed(rows)
    first = bilinear_form.describe_first_layer(table, 10)
    assert first.startswith("Symmetry of layer 0 (untrained): +0.500, percentile 100.0 of 10 random layers")
    assert first.endswith("outside that range.")
    layers = bilinear_form.describe_layers(table, 10)
    assert len(layers) == 1 and "symmetry +0.500 at percentile 100.0" in layers[0] and "inside)" in layers[0]


def test_the_examples_sentence_lists_what_lies_outside():
    rows = [
        {"example": k, "score": s, "value": 0.2, "percentile": 60.0, "null_low": -1.0, "null_high": 1.0,
         "outside": k == "columns" and s == "directionality"}
        for k in ("gaussian", "columns") for s in ("symmetry", "directionality")
    ]  # fmt: skip
    sentence = bilinear_form.describe_examples(pd.DataFrame(rows).set_index(["example", "score"]), 50, 12)
    assert f"95% range {prose.signed(-1.0)} to {prose.signed(1.0)}" in sentence
    assert sentence.endswith("Outside the null's range: columns (directionality).")


def test_the_dataset_holds_layers_heads_examples_and_the_check(bert):
    heads, layers = bilinear_form.head_and_layer_scores(bert[0])
    check = bilinear_form.identity_check(*bert)
    matrices = bilinear_form.examples(8, 0)
    from attnstruct import scores

    ds = bilinear_form.dataset(heads, layers, {k: scores(m) for k, m in matrices.items()}, check)
    assert ds.head_symmetry.dims == ("layer", "head") and ds.sizes == {"layer": 2, "head": 2, "example": 5}
    np.testing.assert_array_equal(ds.logit_max_abs_error.values, check["max |QK^T - bilinear|"].values)
