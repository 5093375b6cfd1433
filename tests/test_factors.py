"""Factor-based scores equal matrix-based ones, per head and summed, for any head shape."""

import numpy as np
import pytest
import torch

import attnstruct as at

from reference import directionality_paper, symmetry_paper

SHAPES = [  # (H, d_head, d_model)
    (1, 1, 1),
    (1, 3, 8),
    (3, 7, 16),  # H * d_head != d_model
    (4, 16, 64),  # the usual d_head = d_model / H
    (4, 40, 64),  # H * d_head > d_model: auto uses the matrix for the sum, the factors per head
    (2, 32, 32),  # d_head = d_model: auto uses the matrix per head too (a wider head is refused: TransformerLens')
    (16, 64, 1024),
]


def factors(rng, h, dh, d, batch=()):
    w_q = rng.standard_normal((*batch, h, dh, d))
    w_k = rng.standard_normal((*batch, h, dh, d))
    if d > 4:
        w_k[..., :2] *= 6  # a few dominant key-side columns, so directionality is not trivially 0
    return w_q, w_k


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("method", ["factors", "matrix", "auto"])
def test_factor_scores_match_direct_definitions(rng, shape, method):
    h, dh, d = shape
    w_q, w_k = factors(rng, h, dh, d)
    per_head = at.factor_scores(w_q, w_k, method=method)
    summed = at.factor_scores(w_q, w_k, sum_heads=True, method=method)
    assert per_head.symmetry.shape == per_head.directionality.shape == (h,)
    heads = [w_q[i].T @ w_k[i] for i in range(h)]
    for i, m in enumerate(heads):
        assert per_head.symmetry[i] == pytest.approx(symmetry_paper(m), abs=1e-6)
        assert per_head.directionality[i] == pytest.approx(directionality_paper(m), abs=1e-6)
    layer = sum(heads)
    assert summed.symmetry == pytest.approx(symmetry_paper(layer), abs=1e-6)
    assert summed.directionality == pytest.approx(directionality_paper(layer), abs=1e-6)


@pytest.mark.parametrize("sum_heads", [False, True])
def test_factor_and_matrix_methods_agree_batched(rng, sum_heads):
    w_q, w_k = factors(rng, 3, 5, 24, batch=(2,))
    a = at.factor_scores(w_q, w_k, sum_heads=sum_heads, method="factors", convention="raw")
    b = at.factor_scores(w_q, w_k, sum_heads=sum_heads, method="matrix", convention="raw")
    m = at.wqk(w_q, w_k, sum_heads=sum_heads)
    c = at.scores(m, convention="raw")
    for x, y in ((a, b), (a, c)):
        np.testing.assert_allclose(x.symmetry, y.symmetry, atol=1e-10)
        np.testing.assert_allclose(x.directionality, y.directionality, atol=1e-10)


def test_layer_matrix_is_the_linear_weights_product(rng):
    """The paper's per-layer matrix W_q^lin^T W_k^lin is the sum over heads of the per-head forms."""
    h, dh, d = 4, 8, 32
    lin_q, lin_k = rng.standard_normal((h * dh, d)), rng.standard_normal((h * dh, d))
    w_q, w_k = at.split_heads(lin_q, h), at.split_heads(lin_k, h)
    np.testing.assert_allclose(at.wqk(w_q, w_k), lin_q.T @ lin_k, atol=1e-10)
    per_head = at.wqk(w_q, w_k, sum_heads=False)
    np.testing.assert_allclose(per_head.sum(0), lin_q.T @ lin_k, atol=1e-10)


def test_symmetric_initialisation_scores_exactly(rng):
    w = rng.standard_normal((4, 8, 32))
    per_head = at.factor_scores(w, w)
    summed = at.factor_scores(w, w, sum_heads=True)
    np.testing.assert_allclose(per_head.symmetry, 1.0, atol=1e-12)
    np.testing.assert_array_equal(per_head.directionality, 0.0)
    assert summed.symmetry == pytest.approx(1.0, abs=1e-12)
    assert summed.directionality == pytest.approx(0.0, abs=1e-9)  # the matmul W^T W is symmetric up to rounding


def test_torch_factors_return_torch(rng):
    w_q, w_k = (torch.from_numpy(x).float() for x in factors(rng, 2, 4, 16))
    s = at.factor_scores(w_q, w_k)
    assert isinstance(s.symmetry, torch.Tensor) and s.symmetry.shape == (2,)


def test_factor_errors(rng):
    with pytest.raises(ValueError, match="same shape"):
        at.factor_scores(np.ones((2, 3, 8)), np.ones((2, 4, 8)))
    with pytest.raises(ValueError, match="head axis"):
        at.factor_scores(np.ones((3, 8)), np.ones((3, 8)), sum_heads=True)
    with pytest.raises(ValueError, match="method"):
        at.factor_scores(np.ones((3, 8)), np.ones((3, 8)), method="fast")
    with pytest.raises(ValueError, match="zero matrix"):
        at.factor_scores(np.zeros((1, 3, 8)), np.ones((1, 3, 8)))
    with pytest.raises(ValueError, match="NaN or inf"):
        at.factor_scores(np.full((1, 3, 8), np.nan), np.ones((1, 3, 8)))


@pytest.mark.parametrize("scale", [1e9, 1e-12])
@pytest.mark.parametrize("method", ["factors", "matrix"])
def test_float32_scores_of_scaled_weights_are_those_of_the_weights(rng, scale, method):
    """The scores are invariant under scaling a factor; in float32 the Gram products of weights times 1e9 overflow
    and of weights times 1e-12 underflow unless the factors are brought to a common scale first."""
    w_q, w_k = factors(rng, 4, 16, 64)
    exact = at.factor_scores(w_q, w_k, sum_heads=True, method=method)
    q, k = (torch.from_numpy(x * scale).float() for x in (w_q, w_k))
    single = at.factor_scores(q, k, sum_heads=True, method=method, precision="float32")
    assert float(single.symmetry) == pytest.approx(exact.symmetry, abs=1e-5)
    assert float(single.directionality) == pytest.approx(exact.directionality, abs=1e-5)


def test_float64_scores_of_weights_at_the_edges_of_the_range_match_the_definitions(rng):
    """Weights near float64's largest and smallest normal numbers score as the brute-force definitions of the
    unscaled matrix do, to 1e-15."""
    w_q, w_k = factors(rng, 2, 4, 16)
    m = w_q[0].T @ w_k[0]
    for scale in (1e150, 1e-160):
        s = at.factor_scores(w_q[:1] * scale, w_k[:1] * scale, method="factors")
        assert s.symmetry[0] == pytest.approx(symmetry_paper(m), abs=1e-15)
        assert s.directionality[0] == pytest.approx(directionality_paper(m), abs=1e-15)
