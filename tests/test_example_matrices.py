"""Notebook 03, section 6: which layers are shown, the readings of their matrices, and the sentences."""

import numpy as np
import pytest
import torch
import xarray as xr

from attnstruct.analyses import example_matrices as em
from attnstruct.checkpoints.extract import AttentionBlock
from attnstruct.scores import row_column_excess


def made_up():
    """Two models, encoder and decoder stacks of two layers, with the blocks whose matrices are shown."""
    generator = torch.Generator().manual_seed(0)
    blocks = {
        m: [
            AttentionBlock(s, layer, *torch.randn(2, 2, 4, 8, generator=generator), s == "decoder", 2)
            for s in ("encoder", "decoder")
            for layer in range(2)
        ]
        for m in ("a", "b")
    }
    symmetry = np.array([[[0.2, 0.9], [0.1, 0.0]], [[0.5, 0.3], [0.2, 0.1]]])
    directionality = np.array([[[0.0, 0.0], [-0.2, -0.1]], [[0.0, 0.0], [-0.1, -0.7]]])
    dims, coords = ("model", "stack", "layer"), {"model": ["a", "b"], "stack": ["encoder", "decoder"], "layer": [0, 1]}
    return xr.Dataset({"symmetry": (dims, symmetry), "directionality": (dims, directionality)}, coords=coords), blocks


def test_the_examples_are_the_most_symmetric_encoder_and_most_column_dominant_decoder_layers():
    ds, blocks = made_up()
    sym, direc = em.example_layers(ds, blocks)
    assert (sym.score, sym.model, sym.stack, sym.layer, sym.value) == ("symmetry", "a", "encoder", 1, 0.9)
    assert (direc.score, direc.model, direc.stack, direc.layer, direc.value) == (
        "directionality",
        "b",
        "decoder",
        1,
        -0.7,
    )
    block = blocks["b"][3]
    expected = sum(block.w_q[h].double().T @ block.w_k[h].double() for h in range(2)).numpy()
    np.testing.assert_allclose(direc.matrix, expected, atol=1e-12)


def test_a_layer_index_restricts_the_examples_to_that_layer():
    ds, blocks = made_up()
    sym, direc = em.example_layers(ds, blocks, layer=0)
    assert (sym.model, sym.layer, direc.model, direc.layer) == ("b", 0, "a", 0)
    assert sym.scope == "encoder layers 0" and "lowest of the decoder layers 0" in direc.title()


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
    assert sym.startswith("**a, encoder layer 1** (symmetry +0.90): an entry and its mirror image are correlated")
    assert "in the decoder layer" in sym and "of $\\|M\\|_F^2$" in sym
    assert direc.startswith("**b, decoder layer 1** (directionality -0.70): ")
    assert "column norms and" in direc and "$(R - C)/(R + C)$ is the score" in direc


@pytest.mark.parametrize("dominant, words", [(0.1, "hardly stand out"), (40.0, "show as stripes")])
def test_describe_examples_says_whether_dominant_columns_stand_out(dominant, words):
    m = np.eye(30)
    m[:, :3] += dominant
    example = em.Example("directionality", "m", "decoder", 0, -0.5, "decoder layers", m)
    assert words in em.describe_examples([example])[0]
