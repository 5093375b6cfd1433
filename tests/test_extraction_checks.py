"""Notebook 03's checks: attention from extracted blocks, the grouped-query pairing against a model's own attention,
both pairings per model, the quantisation summary, and their sentences."""

import pandas as pd
import pytest
import torch
from extract_models import build

from attnstruct.analyses import extraction_checks
from attnstruct.checkpoints.extract import AttentionBlock, iter_blocks


def block_of(w_q, w_k):
    return AttentionBlock("decoder", 0, w_q, w_k, True, w_q.shape[0])


def test_attention_from_zero_logits_is_uniform_over_the_keys_allowed():
    x = torch.randn(4, 3, generator=torch.Generator().manual_seed(0))
    probs = extraction_checks.attention_from(block_of(torch.zeros(1, 2, 3), torch.zeros(1, 2, 3)), x)
    expected = torch.tril(torch.ones(4, 4)) / torch.arange(1, 5)[:, None]
    torch.testing.assert_close(probs[0], expected.double())


def test_attention_from_without_the_causal_mask_attends_to_every_key():
    x = torch.randn(4, 3, generator=torch.Generator().manual_seed(0))
    probs = extraction_checks.attention_from(block_of(torch.zeros(1, 2, 3), torch.zeros(1, 2, 3)), x, causal=False)
    torch.testing.assert_close(probs[0], torch.full((4, 4), 0.25, dtype=torch.float64))


def test_attention_from_is_the_scaled_softmax_of_the_bilinear_form():
    generator = torch.Generator().manual_seed(1)
    w_q, w_k, x = (torch.randn(*shape, generator=generator) for shape in ((2, 4, 6), (2, 4, 6), (5, 6)))
    probs = extraction_checks.attention_from(block_of(w_q, w_k), x, causal=False)
    for h in range(2):
        logits = (x.double() @ w_q[h].double().T) @ (x.double() @ w_k[h].double().T).T / 2.0  # sqrt(d_head = 4)
        torch.testing.assert_close(probs[h], logits.softmax(-1))


def test_the_right_pairing_reproduces_the_models_attention():
    errors = extraction_checks.pairing_errors()
    assert list(errors.index) == list(extraction_checks.PAIRINGS)
    assert errors[extraction_checks.PAIRINGS[0]] < 1e-6


def test_the_authors_pairing_does_not_reproduce_the_models_attention():
    assert extraction_checks.pairing_errors()[extraction_checks.PAIRINGS[1]] > 1e-3


def test_with_one_key_head_both_pairings_coincide():
    errors = extraction_checks.pairing_errors(n_heads=4, n_kv_heads=1)
    assert errors.max() < 1e-6


def test_describe_pairing_errors_says_which_pairing_reproduces_the_model():
    errors = pd.Series([1e-8, 0.02], index=list(extraction_checks.PAIRINGS))
    right, wrong = extraction_checks.describe_pairing_errors(errors, tolerance=1e-6)
    assert right == (
        "query head h with key head h // (H / n_kv), attnstruct's: reproduces the model's attention "
        "(max error < 1e-6): True"
    )
    assert wrong.startswith("query head h with key head h mod n_kv, the authors' code") and wrong.endswith(": False")


def test_gqa_table_has_a_row_per_grouped_query_model_with_medians_over_layers():
    blocks = {"bert": list(iter_blocks(build("bert"))), "llama": list(iter_blocks(build("llama")))}
    table = extraction_checks.gqa_table(blocks)
    assert table["model"].tolist() == ["llama"] and table.loc[0, ["n_heads", "n_kv_heads"]].tolist() == [4, 2]
    per_layer = extraction_checks.gqa_comparison(blocks["llama"])
    assert table.loc[0, "symmetry (correct)"] == pytest.approx(per_layer["symmetry"].median())
    assert table.loc[0, "symmetry (authors' pairing)"] == pytest.approx(per_layer["symmetry_authors_pairing"].median())


def test_describe_gqa_states_both_pairings_or_that_no_model_shares_key_heads():
    table = pd.DataFrame([["m", 9, 3, 0.094, 0.033, -0.245, -0.134]], columns=extraction_checks.gqa_table({}).columns)
    assert extraction_checks.describe_gqa(table) == [
        "m (9 query heads, 3 key heads): median symmetry +0.09 with the correct pairing, +0.03 with the authors'; "
        "median directionality -0.24 and -0.13."
    ]
    assert "No model of this run shares key heads" in extraction_checks.describe_gqa(table.iloc[:0])[0]


def test_quantization_summary_is_the_largest_change_over_layers_per_type():
    blocks = list(iter_blocks(build("bert")))
    summary = extraction_checks.quantization_summary(blocks, ["Q8_0", "Q4_0"])
    effect = extraction_checks.quantization_effect(blocks, ["Q8_0", "Q4_0"])
    assert list(summary.index) == ["Q8_0", "Q4_0"]
    q4 = effect[effect.qtype == "Q4_0"]
    assert summary.loc["Q4_0", "wqk_relative_error"] == q4.wqk_relative_error.max()
    assert summary.loc["Q4_0", "abs change symmetry"] == (q4.symmetry_quantized - q4.symmetry).abs().max()


def test_describe_quantization_states_the_range_and_the_largest_changes():
    summary = pd.DataFrame(
        {
            "wqk_relative_error": [0.006, 0.094],
            "abs change symmetry": [0.0001, 0.0043],
            "abs change directionality": [0.0004, 0.0134],
        },
        index=pd.Index(["Q8_0", "Q4_0"], name="qtype"),
    )
    assert extraction_checks.describe_quantization("m", summary) == (
        "Rounding m's $W_q$ and $W_k$ through Q8_0, Q4_0 changes its $W_{qk}$ by 0.6% to 9.4% (relative Frobenius "
        "error, largest over layers); symmetry moves by at most 0.0043, directionality by at most 0.0134."
    )
