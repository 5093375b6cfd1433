"""Sink diagnostics on known answers: a tiny model with a key bias planted on chosen channels is found out by the
overlap and the ablation, random channels do nothing, and a model without a plant shows nothing."""

import numpy as np
import pytest
import torch

from attnstruct.scores import dominant_columns, row_column_excess
from attnstruct.sinks import attention_mass, attention_passes, sink_channels, sink_diagnostics
from attnstruct.stats.set_overlap import overlap_against_chance, percentile_in_null
from attnstruct.training.model import LanguageModel, attention_layers
from attnstruct.training.model_config import TransformerConfig

PLANTED = [5, 17]  # the key channels of the planted sink
CONSTANT = 40  # the channel every normalised token carries, so that queries share a direction
D_MODEL, LENGTH = 64, 12


def tiny_model(seed: int, *, planted: bool) -> LanguageModel:
    torch.manual_seed(seed)
    config = TransformerConfig(vocab_size=50, max_len=LENGTH, d_model=D_MODEL, n_layers=2, n_heads=2, dropout=0.0)
    model = LanguageModel(config.__class__(**{**config.to_dict(), "norm": "pre"})).eval()
    if planted:
        with torch.no_grad():
            model.encoder.position.weight[0, PLANTED] = 1.0  # position 0 set apart on the planted channels
            for block in model.encoder.blocks:
                block.attention_norm.bias[CONSTANT] = 3.0
                for head in range(2):
                    row = head * model.config.d_head
                    block.attention.query.weight[row, CONSTANT] = 1.0
                    block.attention.key.weight[row, PLANTED] = 1.0
    return model


def token_ids(seed: int = 1) -> torch.Tensor:
    return torch.randint(0, 50, (6, LENGTH), generator=torch.Generator().manual_seed(seed))


def test_the_recomputed_probabilities_rebuild_each_layers_own_attention_output():
    model = tiny_model(0, planted=True)
    outputs, inputs = [], []

    def keep(_module, args, out):
        inputs.append(args[0])
        outputs.append(out)

    hooks = [layer.register_forward_hook(keep) for layer in attention_layers(model)]
    ids = token_ids()
    with torch.no_grad():
        model(ids, True)
    for hook in hooks:
        hook.remove()
    passed = attention_passes.own_model_pass(model, ids, causal=True)
    for index, layer in enumerate(attention_layers(model)):
        probabilities = passed.probabilities[index].transpose(0, 1)  # [B, H, T, T]
        rebuilt = attention_passes.output_from_probabilities(layer, inputs[index], probabilities)
        torch.testing.assert_close(rebuilt, outputs[index], rtol=1e-5, atol=1e-6)
    assert bool(torch.all(passed.probabilities.triu(1) == 0))


def test_sink_mass_leaves_out_query_zero_and_the_uniform_share_matches_uniform_causal_attention():
    uniform = torch.ones(LENGTH, LENGTH).tril()
    uniform = (uniform / uniform.sum(-1, keepdim=True)).expand(1, 1, 1, LENGTH, LENGTH)
    mass = attention_mass.sink_mass(uniform, (0,), causal=True)
    assert float(mass) == pytest.approx(attention_mass.uniform_share(LENGTH, causal=True))
    assert float(mass) < 0.5  # query 0, whose whole mass is on itself, is not counted


def test_the_encoder_sink_positions_are_cls_and_sep_and_their_uniform_share_is_two_over_t():
    assert attention_mass.sink_positions(LENGTH, causal=False) == (0, LENGTH - 1)
    flat = torch.full((1, 1, 1, LENGTH, LENGTH), 1.0 / LENGTH)
    mass = attention_mass.sink_mass(flat, (0, LENGTH - 1), causal=False)
    assert float(mass) == pytest.approx(attention_mass.uniform_share(LENGTH, (0, LENGTH - 1), causal=False))


def test_the_dominant_columns_are_those_the_directionality_score_counts():
    generator = torch.Generator().manual_seed(3)
    matrix = torch.randn(30, 30, generator=generator, dtype=torch.float64)
    matrix[:, [4, 9]] *= 8
    mask = dominant_columns(matrix)
    assert torch.nonzero(mask).flatten().tolist() == [4, 9]
    rows, cols = row_column_excess(matrix)
    assert float(cols) > 0 and float(row_column_excess(matrix[:, ~mask][~mask])[1]) < float(cols)


def test_overlap_against_chance_gives_the_hypergeometric_expectation_under_random_sets():
    rng = np.random.default_rng(0)
    found = [rng.choice(100, 10, replace=False).tolist() for _ in range(20)]
    reference = [rng.choice(100, 5, replace=False).tolist() for _ in range(20)]
    test = overlap_against_chance(found, reference, 100, n_draws=4000)
    assert test.expected == pytest.approx(20 * 10 * 5 / 100)
    assert test.null_mean == pytest.approx(test.expected, rel=0.05)
    assert test.p_value > 0.05
    assert percentile_in_null(test.observed, [test.observed - 1, test.observed + 1]) == 50.0


def test_a_planted_key_bias_makes_a_sink_the_overlap_finds_and_the_ablation_removes():
    model = tiny_model(0, planted=True)
    found = sink_diagnostics.diagnose(model, token_ids(), causal=True, k=2, ablation_draws=30, overlap_draws=2000)
    assert found.mass.min() > 4 * found.uniform
    assert all(set(PLANTED) <= set(channels) for channels in found.dominant)
    assert found.first_position == [PLANTED, PLANTED]
    assert found.overlap_first.observed == 4 and found.overlap_first.p_value < 0.01
    assert found.overlap_massive.observed >= 2 and found.overlap_massive.observed > found.overlap_massive.expected
    assert found.ablation.ablated.max() < 2 * found.uniform  # the sink is gone
    assert found.ablation.layers_halved == 2
    assert found.ablation.percentile == 0.0
    assert abs(found.ablation.null_mean) < 0.1 * abs(found.ablation.change)  # random channels do almost nothing


def test_a_model_without_a_plant_shows_no_sink_channels():
    model = tiny_model(0, planted=False)
    found = sink_diagnostics.diagnose(model, token_ids(), causal=True, k=2, ablation_draws=30, overlap_draws=2000)
    assert found.mass.mean() < 1.5 * found.uniform
    assert found.overlap_first.p_value > 0.05
    assert 0.0 < found.ablation.percentile < 100.0 or abs(found.ablation.change) < 1e-3
    assert abs(found.ablation.change) < 0.01


def test_directionality_without_the_planted_channels_loses_their_column_dominance():
    model = tiny_model(0, planted=True)
    w_q, w_k, _ = attention_passes.query_key_weights(model)
    whole, without = sink_channels_directionality(w_q, w_k)
    assert bool(torch.all(whole < without))


def sink_channels_directionality(w_q, w_k):
    from attnstruct.sinks.score_blind_spots import directionality_without

    return directionality_without(w_q, w_k, [PLANTED, PLANTED])


def test_the_key_side_bias_term_is_measured_where_there_is_a_query_bias_and_absent_without():
    from attnstruct.sinks.score_blind_spots import blind_spots, key_bias_term

    model = tiny_model(0, planted=False)
    passed = attention_passes.own_model_pass(model, token_ids(), causal=True)
    assert float(key_bias_term(model, passed).abs().max()) == 0.0  # BERT's initialisation: zero biases
    with torch.no_grad():
        for layer in attention_layers(model):
            layer.query.bias.copy_(3 * layer.query.weight[:, 0] / layer.query.weight[:, 0].norm())
    spots = blind_spots(model)
    assert spots.query_bias and not spots.key_bias and not spots.qk_norm
    assert float(key_bias_term(model, attention_passes.own_model_pass(model, token_ids(), causal=True)).min()) > 0.0


def test_massive_activation_channels_are_the_largest_absolute_values():
    residual = torch.zeros(1, 2, 4, 8)
    residual[0, 1, 3, 6] = -50.0
    residual[0, 0, 2, 1] = 20.0
    assert sink_channels.massive_activation_channels(residual, 2) == [[1, 6]]


@pytest.mark.parametrize("attention", ["sigmoid", "softmax-null-slot"])
def test_the_shares_follow_the_weights_each_normalisation_applies(attention):
    torch.manual_seed(0)
    config = TransformerConfig(
        vocab_size=50, max_len=LENGTH, d_model=D_MODEL, n_layers=1, n_heads=2, dropout=0.0, attention=attention
    )
    model = LanguageModel(config).eval()
    (layer,) = attention_layers(model)
    x = torch.randn(3, LENGTH, D_MODEL)
    heads = lambda t: t.view(3, LENGTH, 2, layer.d_head).transpose(1, 2)  # noqa: E731
    q, k, v = heads(layer.query(x)), heads(layer.key(x)), heads(layer.value(x))
    logits = q @ k.transpose(-1, -2) / layer.d_head**0.5
    visible = torch.ones(LENGTH, LENGTH, dtype=torch.bool).tril()
    if attention == "sigmoid":  # the weights applied, from the definition: sigmoid, 0 after the query
        weights = torch.sigmoid(logits).masked_fill(~visible, 0.0)
        applied = weights @ v
    else:  # softmax over the slot (column 0) and the visible positions
        slot = (q * layer.null_key.view(1, 2, 1, -1)).sum(-1, keepdim=True) / layer.d_head**0.5
        probabilities = torch.cat([slot, logits.masked_fill(~visible, float("-inf"))], -1).softmax(-1)
        weights = probabilities[..., 1:]
        applied = probabilities[..., :1] * layer.null_value.view(1, 2, 1, -1) + weights @ v
    with torch.no_grad():
        torch.testing.assert_close(layer.output(applied.transpose(1, 2).reshape(3, LENGTH, -1)), layer(x, True))
        shares = attention_passes._layer_probabilities(layer, x, True)
    torch.testing.assert_close(shares, weights / weights.sum(-1, keepdim=True))
