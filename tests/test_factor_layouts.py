"""``factor_scores(layout=...)``: the same weights in attnstruct's layout and in TransformerLens' score the same when
the layout is named right, and a wrong name is refused in one line that names both layouts."""

import pytest
import torch

import attnstruct as at

H, D_HEAD, D_MODEL = 4, 8, 32


@pytest.fixture
def linear():
    gen = torch.Generator().manual_seed(0)
    return [torch.randn(2, H, D_HEAD, D_MODEL, generator=gen, dtype=torch.float64) for _ in range(2)]


@pytest.mark.parametrize("sum_heads", [False, True])
def test_transformer_lens_weights_named_as_such_score_as_the_same_weights_in_the_linear_layout(linear, sum_heads):
    w_q, w_k = linear
    expected = at.factor_scores(w_q, w_k, sum_heads=sum_heads)
    got = at.factor_scores(w_q.mT, w_k.mT, layout="transformer_lens", sum_heads=sum_heads)
    torch.testing.assert_close(got.symmetry, expected.symmetry, rtol=0, atol=1e-12)
    torch.testing.assert_close(got.directionality, expected.directionality, rtol=0, atol=1e-12)


def test_tied_transformer_lens_weights_are_symmetric():
    w = torch.randn(H, D_MODEL, D_HEAD, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    s = at.factor_scores(w, w, layout="transformer_lens", sum_heads=True)
    assert float(s.symmetry) == pytest.approx(1.0, abs=1e-12) and abs(float(s.directionality)) < 1e-12


def test_transformer_lens_weights_read_in_the_default_layout_are_refused_naming_both_layouts(linear):
    w_q, w_k = linear
    with pytest.raises(ValueError) as err:
        at.factor_scores(w_q.mT, w_k.mT)
    message = str(err.value)
    assert "\n" not in message
    assert "layout='linear'" in message and "layout='transformer_lens'" in message
    assert "d_head 32 wider than d_model 8" in message


def test_linear_weights_named_transformer_lens_are_refused(linear):
    with pytest.raises(
        ValueError, match=r"layout='transformer_lens' .* d_head 32 wider than d_model 8; layout='linear'"
    ):
        at.factor_scores(*linear, layout="transformer_lens")


def test_an_unknown_layout_is_refused():
    with pytest.raises(ValueError, match="unknown layout 'nnsight'"):
        at.factor_scores(torch.ones(1, 2, 3), torch.ones(1, 2, 3), layout="nnsight")
