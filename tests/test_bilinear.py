"""The bilinear form reproduces attention logits, on hand-made projections and on a real BERT layer."""

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertModel

import attnstruct as at


def test_bilinear_logits_equal_qk_with_biases(rng):
    h, dh, d, n = 3, 5, 12, 9
    w_q, w_k = rng.standard_normal((h, dh, d)), rng.standard_normal((h, dh, d))
    b_q, b_k = rng.standard_normal((h, dh)), rng.standard_normal((h, dh))
    x = rng.standard_normal((2, n, d))
    q = np.einsum("hed,bnd->bhne", w_q, x) + b_q[None, :, None, :]
    k = np.einsum("hed,bnd->bhne", w_k, x) + b_k[None, :, None, :]
    expected = q @ k.transpose(0, 1, 3, 2)
    np.testing.assert_allclose(at.bilinear_logits(x, w_q, w_k, b_q, b_k), expected, atol=1e-10)
    no_bias = np.einsum("hed,bnd->bhne", w_q, x) @ np.einsum("hed,bnd->bhne", w_k, x).transpose(0, 1, 3, 2)
    np.testing.assert_allclose(at.bilinear_logits(x, w_q, w_k), no_bias, atol=1e-10)


def test_bilinear_form_reproduces_bert_attention():
    torch.manual_seed(0)
    n_heads, d = 4, 32
    config = BertConfig(
        vocab_size=50,
        hidden_size=d,
        num_hidden_layers=2,
        num_attention_heads=n_heads,
        intermediate_size=64,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    model = BertModel(config, add_pooling_layer=False).eval()
    model.set_attn_implementation("eager")
    with torch.no_grad():
        for layer in model.encoder.layer:
            layer.attention.self.query.bias.normal_(0, 0.5)
            layer.attention.self.key.bias.normal_(0, 0.5)
        out = model(torch.randint(0, 50, (2, 7)), output_hidden_states=True, output_attentions=True)
    for i, layer in enumerate(model.encoder.layer):
        attn = layer.attention.self
        w_q, w_k = at.split_heads(attn.query.weight, n_heads), at.split_heads(attn.key.weight, n_heads)
        logits = at.bilinear_logits(
            out.hidden_states[i], w_q, w_k, attn.query.bias.reshape(n_heads, -1), attn.key.bias.reshape(n_heads, -1)
        )
        probs = torch.softmax(logits / (d // n_heads) ** 0.5, dim=-1)
        torch.testing.assert_close(probs, out.attentions[i].double(), atol=1e-6, rtol=0)
        # a wrong head split (heads interleaved instead of contiguous) must fail the check
        wrong = attn.query.weight.reshape(-1, n_heads, d).transpose(0, 1)
        bad = torch.softmax(at.bilinear_logits(out.hidden_states[i], wrong, w_k) / (d // n_heads) ** 0.5, -1)
        assert (bad - out.attentions[i].double()).abs().max() > 1e-3


def test_symmetric_and_skew_parts(rng):
    m = rng.standard_normal((3, 10, 10))
    s, n = at.symmetric_part(m), at.skew_part(m)
    np.testing.assert_allclose(s + n, m, atol=1e-12)
    np.testing.assert_allclose(s, np.swapaxes(s, -1, -2))
    np.testing.assert_allclose(n, -np.swapaxes(n, -1, -2))
    np.testing.assert_allclose((s * n).sum((-2, -1)), 0, atol=1e-10)  # Frobenius-orthogonal


def test_split_heads_errors():
    with pytest.raises(ValueError, match="cannot split"):
        at.split_heads(np.ones((10, 4)), 3)
    with pytest.raises(ValueError, match="square"):
        at.symmetric_part(np.ones((2, 3)))
