"""Notebook 03, section 6: which layers are shown, the readings of their matrices, and the sentences."""

import numpy as np
import pytest
import torch
import xarray as xr

from attnstruct.analyses import example_matrices as em
from attnstruct.checkpoints.extract import AttentionBlock
from attnstruct.scores import row_column_excess


def made_up():
    """Three models, encoder and decoder stacks of two layers (one score missing in each), with the blocks whose
    matrices are shown. Encoder symmetry: median +0.30 (model b, layer 1), extreme +0.90 (a, 1); among layers 0:
    median +0.20 (a, 0). Decoder directionality: median -0.20 (a, 1), extreme -0.70 (b, 1); among layers 0: median
    -0.10 (c, 0)."""
    generator = torch.Generator().manual_seed(0)
    models = ("a", "b", "c")
    blocks = {
        m: [
            AttentionBlock(s, layer, *torch.randn(2, 2, 4, 8, generator=generator), s == "decoder", 2)
            for s in ("encoder", "decoder")
            for layer in range(2)
        ]
        for m in models
    }
    nan = np.nan
    symmetry = np.array([[[0.2, 0.9], [0.1, 0.0]], [[0.5, 0.3], [0.2, 0.1]], [[0.1, nan], [0.4, nan]]])
    directionality = np.array([[[0.0, 0.0], [-0.05, -0.2]], [[0.0, 0.0], [-0.3, -0.7]], [[0.1, nan], [-0.1, nan]]])
    dims = ("model", "stack", "layer")
    coords = {"model": list(models), "stack": ["encoder", "decoder"], "layer": [0, 1]}
    return xr.Dataset({"symmetry": (dims, symmetry), "directionality": (dims, directionality)}, coords=coords), blocks


def test_the_examples_are_the_encoder_and_decoder_layers_nearest_their_roles_median():
    ds, blocks = made_up()
    sym, direc = em.example_layers(ds, blocks)
    assert (sym.score, sym.model, sym.stack, sym.layer, sym.value) == ("symmetry", "b", "encoder", 1, 0.3)
    assert (sym.median, sym.low, sym.high) == (pytest.approx(0.3), 0.1, 0.9)
    assert (direc.score, direc.model, direc.stack, direc.layer, direc.value) == (
        "directionality",
        "a",
        "decoder",
        1,
        -0.2,
    )
    assert (direc.median, direc.low, direc.high) == (pytest.approx(-0.2), -0.7, -0.05)
    block = blocks["a"][3]
    expected = sum(block.w_q[h].double().T @ block.w_k[h].double() for h in range(2)).numpy()
    np.testing.assert_allclose(direc.matrix, expected, atol=1e-12)


def test_a_layer_index_restricts_the_examples_to_that_layer():
    ds, blocks = made_up()
    sym, direc = em.example_layers(ds, blocks, layer=0)
    assert (sym.model, sym.layer, direc.model, direc.layer) == ("a", 0, "c", 0)
    assert (sym.median, direc.median, direc.low, direc.high) == (0.2, -0.1, -0.3, -0.05)
    assert sym.scope == "encoder layers 0" and "median of the decoder layers 0 -0.10" in direc.title()


def test_nearest_median_takes_the_first_of_two_middle_values_and_skips_nan():
    values = xr.DataArray(
        [[1.0, np.nan], [0.25, 0.5]], dims=("model", "layer"), coords={"model": ["x", "y"], "layer": [0, 1]}
    )
    model, layer, value, median, low, high = em.nearest_median(values)
    assert (model, layer, value, median, low, high) == ("y", 1, 0.5, 0.5, 0.25, 1.0)
    even = values.fillna(0.75)  # median 0.625, with 0.5 and 0.75 equally near: (x, 1) comes first
    assert em.nearest_median(even)[:4] == ("x", 1, 0.75, 0.625)


def test_describe_choice_puts_each_layer_beside_its_roles_median_and_range():
    ds, blocks = made_up()
    line = em.describe_choice(em.example_layers(ds, blocks))
    encoder = "b, encoder layer 1: symmetry +0.30 against a median of +0.30 over the encoder layers"
    assert encoder + " (range +0.10 to +0.90)" in line
    assert "a, decoder layer 1: directionality -0.20 against a median of -0.20 over the decoder layers" in line
    assert "(range -0.70 to -0.05)" in line and "\n" not in line


def test_the_mirror_correlation_of_symmetric_skew_and_unstructured_matrices():
    a = np.random.default_rng(0).standard_normal((40, 40))
    assert em.mirror_correlation(a + a.T) == pytest.approx(1.0)
    assert em.mirror_correlation(a - a.T) == pytest.approx(-1.0)
    assert abs(em.mirror_correlation(a)) < 0.2


def test_the_diagonal_share_of_the_squared_norm():
    assert em.diagonal_share(np.diag([3.0, 4.0])) == 1.0
    assert em.diagonal_share(np.array([[1.0, 1.0], [1.0, 1.0]])) == 0.5


def test_outlying_norms_count_the_norms_above_threshold_and_their_excess():
    m = np.eye(10)
    m[:, 0] = 5.0  # one dominant column
    n = em.outlying_norms(m)
    assert (n["columns_over"], n["rows_over"]) == (1, 0)
    r_excess, c_excess = row_column_excess(m)
    assert (n["R"], n["C"]) == (pytest.approx(float(r_excess)), pytest.approx(float(c_excess)))
    cols = np.linalg.norm(m, axis=0)
    assert n["column_ratio"] == pytest.approx(cols.max() / cols.mean())


def test_describe_examples_words_each_layer_by_its_score():
    ds, blocks = made_up()
    sym, direc = em.describe_examples(em.example_layers(ds, blocks))
    assert sym.startswith("**b, encoder layer 1** (symmetry +0.30): an entry and its mirror image are correlated")
    assert "in the decoder layer" in sym and "of $\\|M\\|_F^2$" in sym
    assert direc.startswith("**a, decoder layer 1** (directionality -0.20): ")
    assert "column norms and" in direc and "$(R - C)/(R + C)$ is the score" in direc


@pytest.mark.parametrize("dominant, words", [(0.1, "hardly stand out"), (40.0, "show as stripes")])
def test_describe_examples_says_whether_dominant_columns_stand_out(dominant, words):
    m = np.eye(30)
    m[:, :3] += dominant
    example = em.Example("directionality", "m", "decoder", 0, -0.5, "decoder layers", m, -0.5, -0.9, 0.1)
    assert words in em.describe_examples([example])[0]
