"""Notebook 01's analysis (analyses.nb01_bilinear_form): the toy BERT, the identity check against its own attention,
where scores sit among random matrices, and the facts its sentences and titles state."""

import numpy as np
import pandas as pd
import pytest
import torch

from attnstruct import stats
from attnstruct.analyses import matrix_readings
from attnstruct.analyses import nb01_bilinear_form as bilinear_study
from attnstruct.random_matrices import KINDS
from attnstruct.scores import Scores


@pytest.fixture(scope="module")
def bert():
    return bilinear_study.toy_bert(d_model=16, n_heads=2, n_layers=2, seq_len=5, seed=0)


def test_the_toy_bert_is_seeded_has_biases_and_leaves_the_global_rng_alone(bert):
    torch.manual_seed(7)
    expected = torch.rand(3)
    torch.manual_seed(7)
    again, tokens = bilinear_study.toy_bert(d_model=16, n_heads=2, n_layers=2, seq_len=5, seed=0)
    assert torch.equal(torch.rand(3), expected)
    model, first_tokens = bert
    assert torch.equal(tokens, first_tokens) and tokens.shape == (1, 5)
    assert torch.equal(again.encoder.layer[1].attention.self.key.bias, model.encoder.layer[1].attention.self.key.bias)
    assert float(model.encoder.layer[0].attention.self.query.bias.detach().abs().max()) > 0.1


def test_the_bilinear_form_reproduces_the_models_attention(bert):
    check = bilinear_study.identity_check(*bert)
    assert list(check.index) == [0, 1]
    assert (check["max |QK^T - bilinear|"] < 1e-10).all() and (check["max |softmax - model attention|"] < 1e-6).all()


def test_the_check_fails_when_the_model_attends_otherwise():
    model, tokens = bilinear_study.toy_bert(d_model=16, n_heads=2, n_layers=2, seq_len=5, seed=0)
    model.encoder.layer[0].attention.self.scaling = 1.0  # the model no longer divides its logits by sqrt(d_head)
    check = bilinear_study.identity_check(model, tokens)
    assert check.loc[0, "max |softmax - model attention|"] > 1e-3 > check.loc[1, "max |softmax - model attention|"]


def test_examples_are_placed_in_the_gaussian_null():
    matrices = bilinear_study.example_matrices(dim=12, seed=0)
    assert list(matrices) == list(KINDS)
    placed = bilinear_study.place_examples(matrices, null_draws=50, seed=0)
    assert placed.index.names == ["example", "score"] and len(placed) == 2 * len(KINDS)
    assert placed.loc[("symmetric", "symmetry"), "value"] == pytest.approx(1.0)
    assert bool(placed.loc[("symmetric", "symmetry"), "outside"]) and bool(placed.loc[("skew", "symmetry"), "outside"])
    with pytest.raises(ValueError, match="one size"):
        bilinear_study.place_examples({"a": torch.eye(3), "b": torch.eye(4)}, 10, 0)


def test_the_gaussian_null_of_directionality_holds_each_matrix_and_its_transpose():
    placed = bilinear_study.place_examples(bilinear_study.example_matrices(dim=12, seed=0), null_draws=50, seed=0)
    rows = placed.xs("directionality", level="score")
    assert rows.loc["symmetric", "value"] == 0.0 and rows.loc["symmetric", "percentile"] == 50.0, "0 is its centre"


def test_layers_are_placed_as_compare_with_null_places_them(bert):
    _, layer_scores = bilinear_study.head_and_layer_scores(bert[0])
    placed = bilinear_study.place_layers(layer_scores, d_model=16, n_heads=2, null_draws=40, seed=0)
    null = stats.null_median_over_layers("symmetry", 16, 2, 1, n_draws=40, seed=0)
    expected = stats.compare_with_null(float(layer_scores[1].symmetry), null)
    assert placed.loc[(1, "symmetry"), "percentile"] == expected.percentile
    assert placed.loc[(1, "symmetry"), "null_high"] == expected.null_high


def placed(rows):
    return pd.DataFrame(rows).set_index(["layer", "score"])


def test_the_layer_facts_say_inside_or_outside_per_score():
    rows = [
        {"layer": 0, "score": s, "value": v, "percentile": p, "null_low": -0.1, "null_high": 0.1, "outside": o}
        for s, v, p, o in (("symmetry", 0.5, 100.0, True), ("directionality", 0.0, 50.0, False))
    ]
    first = bilinear_study.first_layer_among_random(placed(rows), 10)
    assert (first.layer, first.draws, first.symmetry, first.symmetry_percentile) == ("0", "10", "+0.500", "100.0")
    assert (first.symmetry_low, first.symmetry_high) == ("-0.100", "+0.100")
    assert (first.symmetry_outside, first.symmetry_where) == (True, "outside")
    assert (first.directionality_outside, first.directionality_where) == (False, "inside")


def test_every_layer_gets_its_facts_in_layer_order():
    rows = [
        {"layer": k, "score": s, "value": 0.1 * k, "percentile": 50.0, "null_low": -1.0, "null_high": 1.0,
         "outside": False}
        for k in (0, 1) for s in ("symmetry", "directionality")
    ]  # fmt: skip
    layers = bilinear_study.layers_among_random(placed(rows), 10)
    assert [(f.layer, f.symmetry, f.directionality) for f in layers] == [
        ("0", "+0.000", "+0.000"),
        ("1", "+0.100", "+0.100"),
    ]


def test_the_examples_facts_list_what_lies_outside_the_gaussian_null():
    rows = [
        {"example": k, "score": s, "value": 0.2, "percentile": 60.0, "null_low": -1.0, "null_high": 1.0,
         "outside": k == "columns" and s == "directionality"}
        for k in ("gaussian", "columns") for s in ("symmetry", "directionality")
    ]  # fmt: skip
    facts = bilinear_study.examples_among_gaussian(pd.DataFrame(rows).set_index(["example", "score"]), 50, 12)
    assert facts == bilinear_study.ExamplesNullFacts("50", "12", "-1.00", "+1.00", True, "columns (directionality)")


def test_no_example_outside_the_null_is_said_so():
    rows = [
        {"example": "gaussian", "score": s, "value": 0.0, "percentile": 50.0, "null_low": -1.0, "null_high": 1.0,
         "outside": False}
        for s in ("symmetry", "directionality")
    ]  # fmt: skip
    facts = bilinear_study.examples_among_gaussian(pd.DataFrame(rows).set_index(["example", "score"]), 50, 12)
    assert (facts.any_outside, facts.outside) == (False, "")


def test_the_energy_shares_are_each_parts_share_of_the_energy():
    assert bilinear_study.energy_shares({"M": 4.0, "M_s": 3.0, "M_n": 1.0}) == bilinear_study.EnergyFacts("75%", "25%")


def test_the_structured_examples_give_the_score_each_answers_to():
    values = [("gaussian", 0, 0), ("symmetric", 1, 0), ("skew", -1, 0), ("columns", 0, -0.8), ("rows", 0, 0.7)]
    example_scores = {kind: Scores(np.float64(s), np.float64(d)) for kind, s, d in values}
    facts = bilinear_study.structured_example_scores(example_scores)
    assert facts == bilinear_study.ExampleScoreFacts("+1.00", "-1.00", "-0.80", "+0.70")


def test_the_dominant_columns_facts_count_the_outlying_norms_and_their_excesses():
    m = np.ones((20, 20)) + 0.01 * np.random.default_rng(0).standard_normal((20, 20))
    m[:, 3] *= 10.0
    facts = bilinear_study.dominant_columns(torch.tensor(m), -0.92)
    norms = matrix_readings.outlying_norms(m)
    assert (facts.columns, facts.directionality) == ("1 column", "-0.92")
    assert (facts.C, facts.R) == (f"{norms['C']:.3g}", f"{norms['R']:.3g}")


def test_the_dataset_holds_layers_heads_examples_and_the_check(bert):
    heads, layers = bilinear_study.head_and_layer_scores(bert[0])
    check = bilinear_study.identity_check(*bert)
    matrices = bilinear_study.example_matrices(8, 0)
    from attnstruct import scores

    ds = bilinear_study.results_dataset(heads, layers, {k: scores(m) for k, m in matrices.items()}, check)
    assert ds.head_symmetry.dims == ("layer", "head") and ds.sizes == {"layer": 2, "head": 2, "example": 5}
    np.testing.assert_array_equal(ds.logit_max_abs_error.values, check["max |QK^T - bilinear|"].values)
