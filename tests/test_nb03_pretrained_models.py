"""Notebook 03 (:mod:`attnstruct.analyses.nb03_pretrained_models`): its plan and verdicts, the checkpoints and their
scores, the nulls, the example matrices, the two checks, the saved dataset, and the facts its sentences state."""

import numpy as np
import pandas as pd
import pytest
import torch
import xarray as xr
from extract_models import build
from random_blocks import encoder_blocks
from test_paper_comparison import REFERENCE, stacks
from test_pretrained import made_up_scores

from attnstruct import reference, stats
from attnstruct.analyses import matrix_readings, paper_comparison, pretrained_scores
from attnstruct.analyses import nb03_pretrained_models as study
from attnstruct.checkpoints import tables
from attnstruct.checkpoints.extract import AttentionBlock, iter_blocks
from attnstruct.report import prose
from attnstruct.stats import nulls

AUTHORS = reference.reference_table()


def test_the_family_rows_are_the_language_rows_without_a_caveat_with_their_family():
    rows = study.family_rows(AUTHORS)
    language = AUTHORS[AUTHORS.family == "language"]
    assert len(rows) == language.caveats.isna().sum() and rows.caveats.isna().all()
    assert list(rows.model_family) == [stats.model_family(m) for m in rows.model]


def test_the_family_effects_are_family_effects_decided_under_the_plan():
    decided = study.family_effects(AUTHORS)
    rows = study.family_rows(AUTHORS)
    for effect, score in zip(decided, ("symmetry", "directionality")):
        raw = stats.family_effect(
            rows, f"{score}_median", treated="encoder", control="decoder", claim=effect.claim, family="model_family"
        )
        assert (effect.estimate, effect.p_value, effect.n) == (raw.estimate, raw.p_value, raw.n)
        assert effect.unit == "family" and study.PLAN.claim(effect.claim)
    assert [e.family for e in decided] == ["primary, Holm over 1 claim", "secondary, uncorrected"]


def test_the_family_test_fails_when_the_roles_are_swapped():
    swapped = AUTHORS.assign(role=AUTHORS.role.map({"encoder": "decoder", "decoder": "encoder"}))
    assert {e.verdict for e in study.family_effects(swapped)} == {stats.DOES_NOT_HOLD}


def test_no_difference_between_roles_cannot_be_told():
    rng = np.random.default_rng(0)
    same = AUTHORS.assign(symmetry_median=rng.normal(0.3, 0.1, len(AUTHORS)))
    assert study.family_effects(same)[0].verdict == stats.CANNOT_TELL


def test_every_verdict_of_the_notebook_is_a_claim_of_its_plan():
    summary = stacks([0.5, 0.45], [0.1, 0.05])
    decided = study.effects(summary, AUTHORS)
    assert [e.claim for e in decided] == [c.name for c in study.PLAN.claims]
    stack = study.stack_effect(summary)
    assert stack.family == "secondary, uncorrected" and stack.p_value == paper_comparison.role_effect(summary).p_value
    assert study.stack_effect(stacks([0.5], [])) is None


def test_the_families_facts_count_and_name_the_families_and_carry_the_family_tests():
    decided = study.effects(stacks([0.5, 0.45], [0.1, 0.05]), AUTHORS)
    facts = study.families(AUTHORS, decided)
    rows = study.family_rows(AUTHORS)
    n_left_out = int(((AUTHORS.family == "language") & AUTHORS.caveats.notna()).sum())
    encoders = sorted(rows.loc[rows.role == "encoder", "model_family"].unique())
    assert (facts.rows, facts.left_out) == (f"{len(rows)} rows", f"{n_left_out} rows")
    assert facts.encoder_names == ", ".join(encoders) and facts.encoder_families == f"{len(encoders)} encoder families"
    assert "gpt2" in facts.decoder_names.split(", ")
    assert facts.tests == " ".join(f"{prose.effect_line(e)}." for e in decided if e.unit == "family")


def test_the_plans_reach_is_that_of_the_reference_tables_families():
    table = study.PLAN.table(study.smallest_p_by_claim(AUTHORS))
    assert bool(table.iloc[0]["reachable"]) and np.isnan(table.iloc[2]["smallest p"])
    assert isinstance(table, pd.DataFrame) and pytest.approx(table.iloc[0]["smallest p"]) == table.iloc[1]["smallest p"]


def test_authors_gqa_pairing_changes_the_layer_matrix():
    blocks = list(iter_blocks(build("llama")))
    comparison = study.gqa_comparison(blocks)
    assert (comparison.n_kv_heads < comparison.n_heads).all()
    wrong = study.authors_gqa_pairing(blocks[0])
    assert not torch.equal(wrong.w_k, blocks[0].w_k)
    assert torch.equal(wrong.w_k[: blocks[0].n_kv_heads], blocks[0].w_k[:: blocks[0].n_heads // blocks[0].n_kv_heads])


def test_quantization_roundtrip_and_effect():
    w = torch.randn(64, 96)
    q8 = study.quantize_roundtrip(w, "Q8_0")
    assert q8.shape == w.shape and float((q8 - w).norm() / w.norm()) < 0.01
    q4 = study.quantize_roundtrip(w, "Q4_0")
    assert 0.01 < float((q4 - w).norm() / w.norm()) < 0.2
    effect = study.quantization_effect(list(iter_blocks(build("bert"))), ["Q8_0", "Q4_0"])
    assert len(effect) == 4
    q8_rows = effect[effect.qtype == "Q8_0"]
    assert (q8_rows.wqk_relative_error < 0.02).all()
    assert ((q8_rows.symmetry_quantized - q8_rows.symmetry).abs() < 0.01).all()


def test_wqk_corner_is_the_layer_matrix_block():
    block = next(iter(iter_blocks(build("bert"))))
    full = sum(block.w_q[h].double().T @ block.w_k[h].double() for h in range(block.n_heads))
    np.testing.assert_allclose(study.wqk_corner(block, 10), full[:10, :10].numpy(), atol=1e-10)


def test_the_stack_table_labels_rotary_and_cross_attention_and_gives_each_stacks_shape():
    bart, llama = build("bart"), build("llama")
    ds = tables.combine(
        [
            tables.score_checkpoint(bart, name="bart", role="encoder-decoder", n_params=1e5),
            tables.score_checkpoint(llama, name="llama", role="decoder", n_params=1e5),
        ]
    )
    blocks = {"bart": list(iter_blocks(bart)), "llama": list(iter_blocks(llama))}
    table = study.stack_table(ds, blocks).set_index(["model", "stack"])
    assert table.loc[("bart", "cross"), "attention"] == "cross"
    assert (table.drop(("bart", "cross"))["attention"] == "self").all()
    assert table.loc[("llama", "decoder"), "rotary"] and not table.loc[("bart", "encoder"), "rotary"]
    shapes = study.block_shapes(blocks).set_index(["model", "stack"])
    first = blocks["llama"][0]
    assert shapes.loc[("llama", "decoder")].to_dict() == {
        "d_model": first.w_q.shape[-1],
        "n_heads": first.n_heads,
        "d_head": first.w_q.shape[-2],
        "n_kv_heads": first.n_kv_heads,
    }
    assert set(shapes.index) == set(table.index)


def brute_force_medians(d, h, n_layers, n_layer_draws, seed):
    """Per-layer null draws from attnstruct.stats.nulls (an independent path), both scores: [2, n_layer_draws]."""
    from attnstruct.analyses import null_ensembles as null

    ds = null.null_distribution([d], [h], n_layer_draws, seed).sel(ensemble=f"factors H={h}, layer", d_model=d)
    return np.stack([ds.symmetry.values, ds.directionality.values])


def brute_force_comparison(value, samples):
    below, equal = (samples < value).sum(), (samples == value).sum()
    low, high = np.quantile(samples, [0.025, 0.975])
    z = (value - samples.mean()) / samples.std(ddof=1)
    return 100 * (below + equal / 2) / len(samples), z, low, high, bool(value < low or value > high)


@pytest.mark.parametrize("layer_draws", [30, 12])  # 10 draws x 3 layers: exact at 30, resampled at 12
def test_null_comparison_against_brute_force(layer_draws):
    d, h, n_layers, n_draws, seed = 16, 4, 3, 10, 3
    table = pd.DataFrame(
        {
            "d_model": [d, d, 6],
            "n_heads": [h, h, 4],
            "n_layers": [n_layers, n_layers, n_layers],
            "symmetry_median": [0.9, 0.01, 0.5],
            "directionality_median": [0.0, -1.0, 0.0],
        },
        index=[5, 7, 9],
    )
    got = study.null_comparison(table, n_draws=n_draws, layer_draws=layer_draws, seed=seed)
    assert list(got.index) == [5, 7, 9]
    exact = layer_draws >= n_draws * n_layers
    draws = brute_force_medians(d, h, n_layers, layer_draws if not exact else n_draws * n_layers, seed)
    if exact:
        medians = np.median(draws.reshape(2, n_draws, n_layers), axis=2)
    else:
        picks = np.random.default_rng([seed, d, h, n_layers]).integers(0, layer_draws, (n_draws, n_layers))
        medians = np.median(draws[:, picks], axis=2)
    assert (got["null_layers"] == (n_draws * n_layers if exact else layer_draws)).all()
    assert (got["null_resampled"] == (not exact)).all()
    assert (medians.std(axis=1) > 0).all()  # both nulls have a spread at this width
    for index in (5, 7):
        for s, score in enumerate(("symmetry", "directionality")):
            null = medians[s] if score == "symmetry" else np.concatenate([medians[s], -medians[s]])  # transposes
            expected = brute_force_comparison(table.loc[index, f"{score}_median"], null)
            row = got.loc[index]
            assert row[f"{score}_percentile"] == pytest.approx(expected[0])
            assert row[f"{score}_z"] == pytest.approx(expected[1])
            assert row[f"{score}_null_low"] == pytest.approx(expected[2])
            assert row[f"{score}_null_high"] == pytest.approx(expected[3])
            assert row[f"{score}_outside"] == expected[4]
    assert got.loc[5, "symmetry_outside"] and got.loc[5, "symmetry_percentile"] == 100.0
    assert np.isnan(got.loc[9, "symmetry_z"]) and not got.loc[9, "directionality_outside"]  # 6 is no multiple of 4
    samples = nulls.median_null("symmetry", d, h, n_layers, n_draws=n_draws, layer_draws=layer_draws, seed=seed)
    assert not samples.flags.writeable and len(samples) == n_draws


def placed_table():
    """Three stacks against made-up nulls: symmetry outside for enc and dec, directionality outside for dec and its
    cross stack."""
    table = pd.DataFrame(
        {
            "model": ["enc", "dec", "dec"],
            "stack": ["encoder", "decoder", "cross"],
            "attention": ["self", "self", "cross"],
            "symmetry_median": [0.5, 0.1, 0.0],
            "directionality_median": [-0.1, -0.3, -0.7],
        }
    )
    for score, low, high in (("symmetry", -0.01, 0.01), ("directionality", -0.2, 0.25)):
        table[f"{score}_null_low"], table[f"{score}_null_high"] = low, high
        table[f"{score}_outside"] = (table[f"{score}_median"] < low) | (table[f"{score}_median"] > high)
    return table


def test_the_null_placements_count_and_name_the_stacks_outside_each_null():
    sym, direc = study.null_placements(placed_table())
    assert (sym.score, sym.outside, sym.stacks) == ("symmetry", "2", "3 stacks")
    assert sym.outside_stacks.split(", ") == ["enc encoder", "dec decoder"]
    assert (direc.outside, direc.any_outside) == ("2", True)
    assert direc.outside_stacks.split(", ") == ["dec decoder", "dec cross"]


def test_the_null_placements_give_the_span_of_the_nulls_symmetrys_to_three_decimals():
    sym, direc = study.null_placements(placed_table())
    assert (sym.low, sym.high, direc.low, direc.high) == ("-0.010", "+0.010", "-0.20", "+0.25")


def test_a_score_inside_every_null_has_no_stack_outside():
    table = placed_table().assign(symmetry_outside=False)
    assert not study.null_placements(table)[0].any_outside and study.null_placements(table)[0].outside_stacks == ""


def test_checkpoint_list_names_the_fetch_command_for_a_missing_zoo_model(tmp_path):
    with pytest.raises(RuntimeError, match="not fetched yet.*run: attnstruct fetch-models minilm-l6$"):
        study.checkpoint_list("minilm-l6", cache_dir=tmp_path)


def test_checkpoint_list_appends_local_models_with_or_without_a_role():
    listed = study.checkpoint_list([], [["a", "/p"], ("b", "/q", "decoder")])
    assert listed[["model", "source", "role", "model_type"]].values.tolist() == [
        ["a", "local", "", ""],
        ["b", "local", "decoder", ""],
    ]
    assert listed["n_params"].isna().all()


@pytest.mark.parametrize("entry", [["a", "/p", "seq2seq"], ["a"], "a/path"])
def test_checkpoint_list_rejects_a_bad_local_entry(entry):
    with pytest.raises(ValueError, match="role must be one of|a local model is"):
        study.checkpoint_list([], [entry])


def test_score_models_takes_the_role_from_the_blocks_and_checks_the_one_listed(tmp_path):
    build("gpt2").save_pretrained(tmp_path / "gpt")
    listed = study.checkpoint_list([], [["gpt", tmp_path / "gpt"]])
    blocks = study.read_blocks(listed)
    ds = study.score_models(listed, blocks)
    assert ds.role.values.tolist() == ["decoder"] and ds.source.values.tolist() == ["local"]
    wrong = study.checkpoint_list([], [["gpt", tmp_path / "gpt", "encoder"]])
    with pytest.raises(ValueError, match="its blocks make it 'decoder'"):
        study.score_models(wrong, blocks)


def test_encoder_decoder_models_are_those_of_that_role():
    assert study.encoder_decoder_models(made_up_scores()) == ["both"]


def test_the_caveated_stacks_are_the_rotary_ones_and_the_models_with_cross_attention():
    table = pd.DataFrame(
        {
            "model": ["a", "b", "b"],
            "stack": ["decoder", "decoder", "cross"],
            "rotary": [True, False, False],
            "attention": ["self", "self", "cross"],
        }
    )
    assert study.caveated_stacks(table) == study.CaveatFacts(rotary="a (decoder)", cross="b")
    assert study.caveated_stacks(table.iloc[1:2]) == study.CaveatFacts(rotary="none", cross="none")


def test_stack_quartiles_keep_self_attention_by_stack_then_model():
    table = pretrained_scores.stack_summary(made_up_scores()).assign(attention="self")
    table.loc[len(table)] = table.iloc[0].to_dict() | {"model": "x", "stack": "cross", "attention": "cross"}
    rows = study.stack_quartiles(table)
    assert list(zip(rows["model"], rows["stack"])) == [("both", "decoder"), ("both", "encoder"), ("enc", "encoder")]
    assert list(rows.columns)[-1] == "directionality_median"


def null_table():
    table = pretrained_scores.stack_summary(made_up_scores()).assign(d_model=16, n_heads=4)
    return table.join(study.null_comparison(table, n_draws=5, layer_draws=10, seed=0))


def test_null_view_shows_the_shape_then_each_scores_place_in_its_null():
    view = study.null_view(null_table())
    assert list(view.columns[:7]) == ["model", "stack", "attention", "d_model", "n_heads", "n_layers", "null_layers"]
    assert list(view.columns[7:13]) == [
        "symmetry_median",
        "symmetry_percentile",
        "symmetry_z",
        "symmetry_null_low",
        "symmetry_null_high",
        "symmetry_outside",
    ]


def test_results_dataset_adds_the_nulls_by_model_and_stack_and_the_provenance():
    table = null_table()
    listed = pd.DataFrame({"model": ["enc", "both"], "path": ["/e", "/b"]})
    ds = study.results_dataset(made_up_scores(), table, parameters={"null_draws": 5}, checkpoints=listed)
    assert set(study.NULL_VARIABLES) <= set(ds.data_vars)
    row = table.set_index(["model", "stack"]).loc[("both", "decoder")]
    assert ds.symmetry_z.sel(model="both", stack="decoder") == row["symmetry_z"]
    assert np.isnan(ds.symmetry_z.sel(model="enc", stack="decoder"))  # a stack the model lacks
    assert ds.attrs["checkpoints"] == "enc: /e; both: /b" and '"null_draws": 5' in ds.attrs["parameters"]


def test_results_dataset_names_the_non_commercial_checkpoints_it_holds():
    listed = pd.DataFrame({"model": ["enc", "iglm"], "path": ["/e", "/i"]})
    ds = study.results_dataset(made_up_scores(), null_table(), parameters={}, checkpoints=listed)
    assert ds.attrs["non_commercial"] == "iglm"
    mine = study.results_dataset(made_up_scores(), null_table(), parameters={}, checkpoints=listed.iloc[:1])
    assert mine.attrs["non_commercial"] == ""


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
    sym, direc = study.example_layers(ds, blocks)
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
    sym, direc = study.example_layers(ds, blocks, layer=0)
    assert (sym.model, sym.layer, direc.model, direc.layer) == ("a", 0, "c", 0)
    assert (sym.median, direc.median, direc.low, direc.high) == (0.2, -0.1, -0.3, -0.05)
    assert sym.scope == "encoder layers 0" and direc.scope == "decoder layers 0"


def test_nearest_median_takes_the_first_of_two_middle_values_and_skips_nan():
    values = xr.DataArray(
        [[1.0, np.nan], [0.25, 0.5]], dims=("model", "layer"), coords={"model": ["x", "y"], "layer": [0, 1]}
    )
    model, layer, value, median, low, high = study.nearest_median(values)
    assert (model, layer, value, median, low, high) == ("y", 1, 0.5, 0.5, 0.25, 1.0)
    even = values.fillna(0.75)  # median 0.625, with 0.5 and 0.75 equally near: (x, 1) comes first
    assert study.nearest_median(even)[:4] == ("x", 1, 0.75, 0.625)


def test_the_examples_chosen_put_each_layer_beside_its_roles_median_and_range():
    ds, blocks = made_up()
    encoder, decoder = study.examples_chosen(study.example_layers(ds, blocks))
    assert (encoder.model, encoder.layer, encoder.value, encoder.median) == ("b", "1", "+0.30", "+0.30")
    assert (encoder.scope, encoder.span) == ("encoder layers", "+0.10 to +0.90")
    assert (decoder.model, decoder.score, decoder.value, decoder.span) == (
        "a",
        "directionality",
        "-0.20",
        "-0.70 to -0.05",
    )


def test_the_symmetric_reading_is_of_the_encoder_layer_beside_the_decoder_layers_mirror_correlation():
    ds, blocks = made_up()
    examples = study.example_layers(ds, blocks)
    (reading,) = study.symmetric_readings(examples)
    encoder, decoder = examples
    assert (reading.model, reading.layer, reading.value, reading.has_other) == ("b", "1", "+0.30", True)
    assert reading.mirror == prose.signed(matrix_readings.mirror_correlation(encoder.matrix))
    assert reading.other_mirror == prose.signed(matrix_readings.mirror_correlation(decoder.matrix))
    assert reading.diagonal_share == prose.percent(matrix_readings.diagonal_share(encoder.matrix))


def test_a_symmetric_matrix_keeps_all_its_energy_in_its_symmetric_part():
    a = np.random.default_rng(0).standard_normal((6, 6))
    m = a @ a.T  # symmetric, with a positive diagonal
    example = study.Example("symmetry", "m", "encoder", 0, 1.0, "encoder layers", m, 1.0, 1.0, 1.0)
    (reading,) = study.symmetric_readings([example])
    assert (reading.energy_share, reading.positive, reading.has_other) == ("100%", "100%", False)


def test_the_directional_reading_counts_the_outlying_norms_and_says_which_outweigh():
    m = np.eye(30)
    m[:, 0] += 5.0  # one dominant column
    example = study.Example("directionality", "m", "decoder", 0, -0.5, "decoder layers", m, -0.5, -0.9, 0.1)
    (reading,) = study.directional_readings([example])
    norms = matrix_readings.outlying_norms(m)
    assert (reading.columns_over, reading.rows_over) == ("1", str(norms["rows_over"]))
    assert (reading.larger, reading.smaller) == ("columns", "rows")
    assert (reading.C, reading.R) == (f"{norms['C']:.3g}", f"{norms['R']:.3g}")


@pytest.mark.parametrize("dominant, stands_out", [(0.1, False), (40.0, True)])
def test_the_directional_reading_says_whether_the_dominant_columns_stand_out(dominant, stands_out):
    m = np.eye(30)
    m[:, :3] += dominant
    example = study.Example("directionality", "m", "decoder", 0, -0.5, "decoder layers", m, -0.5, -0.9, 0.1)
    assert study.directional_readings([example])[0].stands_out is stands_out


def block_of(w_q, w_k):
    return AttentionBlock("decoder", 0, w_q, w_k, True, w_q.shape[0])


def test_attention_from_zero_logits_is_uniform_over_the_keys_allowed():
    x = torch.randn(4, 3, generator=torch.Generator().manual_seed(0))
    probs = study.attention_from(block_of(torch.zeros(1, 2, 3), torch.zeros(1, 2, 3)), x)
    expected = torch.tril(torch.ones(4, 4)) / torch.arange(1, 5)[:, None]
    torch.testing.assert_close(probs[0], expected.double())


def test_attention_from_without_the_causal_mask_attends_to_every_key():
    x = torch.randn(4, 3, generator=torch.Generator().manual_seed(0))
    probs = study.attention_from(block_of(torch.zeros(1, 2, 3), torch.zeros(1, 2, 3)), x, causal=False)
    torch.testing.assert_close(probs[0], torch.full((4, 4), 0.25, dtype=torch.float64))


def test_attention_from_is_the_scaled_softmax_of_the_bilinear_form():
    generator = torch.Generator().manual_seed(1)
    w_q, w_k, x = (torch.randn(*shape, generator=generator) for shape in ((2, 4, 6), (2, 4, 6), (5, 6)))
    probs = study.attention_from(block_of(w_q, w_k), x, causal=False)
    for h in range(2):
        logits = (x.double() @ w_q[h].double().T) @ (x.double() @ w_k[h].double().T).T / 2.0  # sqrt(d_head = 4)
        torch.testing.assert_close(probs[h], logits.softmax(-1))


def test_the_right_pairing_reproduces_the_models_attention():
    errors = study.pairing_errors()
    assert list(errors.index) == list(study.PAIRINGS)
    assert errors[study.PAIRINGS[0]] < 1e-6


def test_the_authors_pairing_does_not_reproduce_the_models_attention():
    assert study.pairing_errors()[study.PAIRINGS[1]] > 1e-3


def test_with_one_key_head_both_pairings_coincide():
    errors = study.pairing_errors(n_heads=4, n_kv_heads=1)
    assert errors.max() < 1e-6


def test_the_pairing_checks_say_which_pairing_reproduces_the_model_below_the_tolerance():
    errors = pd.Series([1e-8, 0.02], index=list(study.PAIRINGS))
    right, wrong = study.pairing_checks(errors, tolerance=1e-6)
    assert right == study.PairingFacts("h // (H / n_kv), attnstruct's", "1e-6", "True")
    assert (wrong.pairing, wrong.reproduces) == ("h mod n_kv, the authors' code", "False")


def test_gqa_table_has_a_row_per_grouped_query_model_with_medians_over_layers():
    blocks = {"bert": list(iter_blocks(build("bert"))), "llama": list(iter_blocks(build("llama")))}
    table = study.gqa_table(blocks)
    assert table["model"].tolist() == ["llama"] and table.loc[0, ["n_heads", "n_kv_heads"]].tolist() == [4, 2]
    per_layer = study.gqa_comparison(blocks["llama"])
    assert table.loc[0, "symmetry (correct)"] == pytest.approx(per_layer["symmetry"].median())
    assert table.loc[0, "symmetry (authors' pairing)"] == pytest.approx(per_layer["symmetry_authors_pairing"].median())


def test_the_grouped_query_models_are_named_or_said_to_be_none():
    table = pd.DataFrame([["m", 9, 3, 0.094, 0.033, -0.245, -0.134]], columns=study.gqa_table({}).columns)
    assert study.grouped_query_models(table) == study.GroupedQueryFacts(True, "m")
    assert not study.grouped_query_models(table.iloc[:0]).any_grouped


def test_quantization_summary_is_the_largest_change_over_layers_per_type():
    blocks = list(iter_blocks(build("bert")))
    summary = study.quantization_summary(blocks, ["Q8_0", "Q4_0"])
    effect = study.quantization_effect(blocks, ["Q8_0", "Q4_0"])
    assert list(summary.index) == ["Q8_0", "Q4_0"]
    q4 = effect[effect.qtype == "Q4_0"]
    assert summary.loc["Q4_0", "wqk_relative_error"] == q4.wqk_relative_error.max()
    assert summary.loc["Q4_0", "abs change symmetry"] == (q4.symmetry_quantized - q4.symmetry).abs().max()


def test_the_quantization_facts_are_the_span_of_errors_and_the_largest_changes():
    summary = pd.DataFrame(
        {
            "wqk_relative_error": [0.006, 0.094],
            "abs change symmetry": [0.0001, 0.0043],
            "abs change directionality": [0.0004, 0.0134],
        },
        index=pd.Index(["Q8_0", "Q4_0"], name="qtype"),
    )
    assert study.quantization_facts("m", summary) == study.QuantizationFacts(
        "m", "Q8_0, Q4_0", "0.6% to 9.4%", "0.0043", "0.0134"
    )


def test_the_stack_roles_name_the_stacks_and_give_the_share_of_pairs_in_the_papers_order():
    summary = stacks([0.5, 0.3], [0.4, 0.1], cross=[0.9])
    facts = study.stack_roles(summary)
    assert (facts.encoders, facts.encoder_names, facts.encoder_median) == ("2 encoder stacks", "e0, e1", "+0.40")
    assert (facts.encoder_span, facts.decoder_span, facts.decoder_median) == (
        "+0.30 to +0.50",
        "+0.10 to +0.40",
        "+0.25",
    )
    assert (facts.share, facts.pairs, facts.both_roles) == ("75%", "4", True)
    assert facts.test == prose.effect_line(paper_comparison.role_effect(summary))


def test_the_stack_roles_state_the_test_decided_under_the_plan_when_given():
    summary = stacks([0.5, 0.45], [0.1, 0.05])
    decided = study.stack_effect(summary)
    assert study.stack_roles(summary, effect=decided).test == prose.effect_line(decided)


def test_without_a_stack_of_each_role_the_stack_roles_are_empty():
    facts = study.stack_roles(stacks([0.5], []))
    assert not facts.both_roles and facts.encoders == "" and facts.test == ""


def test_the_authors_reported_medians_with_and_without_the_rows_with_a_caveat():
    facts = study.authors_reported(REFERENCE)
    assert (facts.encoders, facts.encoder_rows) == ("+0.50", "1 language-encoder row")
    assert (facts.decoders, facts.decoder_rows) == ("+0.05", "2 language-decoder rows")
    assert (facts.clean_encoders, facts.clean_decoders, facts.clean_decoder_rows) == ("+0.50", "+0.10", "1 row")
    assert (facts.encoder_directionality, facts.decoder_directionality) == ("-0.10", "-0.55")
    assert facts.clean_decoder_directionality == "-0.50"


def test_the_layer_profiles_are_the_encoder_symmetrys_span_and_the_lowest_decoder_directionality():
    facts = study.layer_profiles(made_up_scores())
    assert facts == study.ProfileFacts(True, "+0.40 to +0.70", True, "-0.10")
    encoders_only = study.layer_profiles(made_up_scores().sel(stack=["encoder"]))
    assert (encoders_only.has_encoder, encoders_only.has_decoder) == (True, False)


def test_the_encoder_decoder_medians_are_per_self_attention_stack_with_cross_apart():
    ds = made_up_scores()
    facts = study.encoder_decoder_medians(ds, "both")
    assert (facts.medians, facts.has_cross) == ("encoder +0.40, decoder +0.10", False)
    cross = xr.concat([ds, ds.sel(stack=["decoder"]).assign_coords(stack=["cross"])], dim="stack")
    facts = study.encoder_decoder_medians(cross, "both")
    assert (facts.medians, facts.has_cross, facts.cross) == ("encoder +0.40, decoder +0.10", True, "+0.10")


# The fine-tune pair.


def finetune_dataset():
    """A base and two fine-tunes of it: the first moves every weight a little, the second not at all."""
    base = encoder_blocks(3, 0)
    nudged = [AttentionBlock("encoder", b.layer, b.w_q + 0.3 * torch.randn_like(b.w_q), b.w_k, False, 4) for b in base]
    scored = [
        tables.score_checkpoint(f"/{name}", name=name, blocks=blocks)
        for name, blocks in (("base", base), ("moved", nudged), ("same", base))
    ]
    return tables.combine(scored)


def test_the_finetune_changes_are_each_layers_score_minus_the_bases_beside_the_heads_spread():
    ds = finetune_dataset()
    changes = study.finetune_changes(ds, "base")
    assert list(zip(changes["model"], changes["layer"])) == [("moved", i) for i in range(3)] + [
        ("same", i) for i in range(3)
    ]
    moved = changes[changes["model"] == "moved"].iloc[1]
    before, after = ds.sel(stack="encoder", layer=1).sel(model="base"), ds.sel(stack="encoder", layer=1, model="moved")
    assert moved["symmetry_change"] == pytest.approx(float(after.symmetry - before.symmetry))
    assert moved["symmetry_head_spread"] == pytest.approx(float(np.std(before.head_symmetry.values)))
    assert moved["symmetry_head_change"] == pytest.approx(
        float(np.median(np.abs(after.head_symmetry.values - before.head_symmetry.values)))
    )
    same = changes[changes["model"] == "same"]
    assert (same["symmetry_change"] == 0).all() and (same["directionality_head_change"] == 0).all()


def test_the_finetune_facts_describe_the_changes_against_the_heads_spread():
    changes = study.finetune_changes(finetune_dataset(), "base")
    moved, same = study.finetune_facts(changes, "base")
    rows = changes[changes["model"] == "moved"]
    largest = rows["symmetry_change"].iloc[int(np.argmax(rows["symmetry_change"].abs().values))]
    assert moved.model == "moved" and moved.base == "base" and moved.layers == "3 layers"
    assert moved.symmetry_largest == prose.signed(largest, 3)
    assert moved.symmetry_median == prose.number(rows["symmetry_change"].abs().median(), 3)
    beyond = int((rows["symmetry_change"].abs() > rows["symmetry_head_spread"]).sum())
    assert moved.symmetry_beyond == f"{beyond} of 3"
    assert same.symmetry_median == prose.number(0.0, 3) and same.directionality_beyond == "0 of 3"


def test_the_finetune_status_names_the_missing_checkpoints_and_their_fetch_command(tmp_path):
    status = study.finetune_status(["rxnfp-pretrained", "rxnfp-ft"], cache_dir=tmp_path)
    assert not status.fetched and status.base == "rxnfp-pretrained" and status.tuned == "rxnfp-ft"
    assert status.command.split() == ["attnstruct", "fetch-models", "rxnfp-pretrained", "rxnfp-ft"]
