"""Notebook 03's analyses: the checkpoints, their datasets and summaries, the nulls, the saved dataset, the two checks,
and MiniLM-L6 against an independent computation.

The MiniLM test reads the checkpoint fetched by `make fetch` (`make test` runs it first).
"""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import xarray as xr
from extract_models import build
from safetensors.numpy import load_file

from attnstruct import reference
from attnstruct.analyses import extraction_checks, pretrained
from attnstruct.checkpoints import tables, zoo
from attnstruct.checkpoints.extract import iter_blocks
from attnstruct.stats import nulls

from reference import directionality_paper, symmetry_paper


@pytest.mark.checkpoint
def test_minilm_layer_scores_match_an_independent_computation():
    assert zoo.is_fetched("minilm-l6"), "run `make fetch` (attnstruct fetch-models --set core) first"
    folder = zoo.path("minilm-l6")
    tensors = load_file(str(folder / "model.safetensors"))
    ds = tables.score_checkpoint(folder, name="minilm-l6", role="encoder")
    layers = sorted({int(k.split(".")[2]) for k in tensors if ".attention.self.query.weight" in k})
    assert len(layers) == 6
    for layer in layers:
        prefix = next(k for k in tensors if k.endswith(f"layer.{layer}.attention.self.query.weight"))[
            : -len("query.weight")
        ]
        m = tensors[prefix + "query.weight"].astype(np.float64).T @ tensors[prefix + "key.weight"].astype(np.float64)
        got = ds.sel(model="minilm-l6", stack="encoder", layer=layer)
        assert float(got.symmetry) == pytest.approx(symmetry_paper(m), abs=1e-9)
        assert float(got.directionality) == pytest.approx(directionality_paper(m), abs=1e-9)
    assert float(ds.n_params[0]) == sum(t.size for t in tensors.values() if t.dtype.kind == "f")


def test_combine_and_summary():
    bert, gpt = build("bert"), build("gpt2")
    ds = tables.combine(
        [
            tables.score_checkpoint(bert, name="bert", role="encoder", n_params=1e5),
            tables.score_checkpoint(gpt, name="gpt2", role="decoder", n_params=2e5),
        ]
    )
    assert ds.symmetry.dims == ("model", "stack", "layer")
    assert list(ds["stack"].values) == ["encoder", "decoder"]
    assert bool(ds.symmetry.sel(model="bert", stack="decoder").isnull().all())
    table = pretrained.summary(ds)
    assert list(zip(table["model"], table["stack"])) == [("bert", "encoder"), ("gpt2", "decoder")]
    values = ds.symmetry.sel(model="gpt2", stack="decoder").dropna("layer").values
    assert table.symmetry_median[1] == pytest.approx(np.median(values))
    assert table.symmetry_q25[1] == pytest.approx(np.percentile(values, 25))


def test_authors_gqa_pairing_changes_the_layer_matrix():
    blocks = list(iter_blocks(build("llama")))
    comparison = extraction_checks.gqa_comparison(blocks)
    assert (comparison.n_kv_heads < comparison.n_heads).all()
    wrong = extraction_checks.authors_gqa_pairing(blocks[0])
    assert not torch.equal(wrong.w_k, blocks[0].w_k)
    assert torch.equal(wrong.w_k[: blocks[0].n_kv_heads], blocks[0].w_k[:: blocks[0].n_heads // blocks[0].n_kv_heads])


def test_quantization_roundtrip_and_effect():
    w = torch.randn(64, 96)
    q8 = extraction_checks.quantize_roundtrip(w, "Q8_0")
    assert q8.shape == w.shape and float((q8 - w).norm() / w.norm()) < 0.01
    q4 = extraction_checks.quantize_roundtrip(w, "Q4_0")
    assert 0.01 < float((q4 - w).norm() / w.norm()) < 0.2
    effect = extraction_checks.quantization_effect(list(iter_blocks(build("bert"))), ["Q8_0", "Q4_0"])
    assert len(effect) == 4
    q8_rows = effect[effect.qtype == "Q8_0"]
    assert (q8_rows.wqk_relative_error < 0.02).all()
    assert ((q8_rows.symmetry_quantized - q8_rows.symmetry).abs() < 0.01).all()


def test_wqk_corner_is_the_layer_matrix_block():
    block = next(iter(iter_blocks(build("bert"))))
    full = sum(block.w_q[h].double().T @ block.w_k[h].double() for h in range(block.n_heads))
    np.testing.assert_allclose(extraction_checks.wqk_corner(block, 10), full[:10, :10].numpy(), atol=1e-10)


def test_count_parameters_of_a_saved_model(tmp_path):
    from attnstruct.checkpoints.extract import count_parameters

    model = build("bert")
    model.save_pretrained(tmp_path)
    floats = [p for p in model.state_dict().values() if p.is_floating_point()]
    assert count_parameters(tmp_path) == sum(p.numel() for p in floats) == model.num_parameters()


def test_local_checkpoints_are_scored(tmp_path):
    import transformers

    config = transformers.ViTConfig(
        hidden_size=32, num_attention_heads=4, num_hidden_layers=2, intermediate_size=64, image_size=16, patch_size=4
    )
    torch.manual_seed(0)
    transformers.ViTModel(config).save_pretrained(tmp_path / "tiny-vit")
    scored = tables.score_local_checkpoints([str(tmp_path / "tiny-vit"), ["named", tmp_path / "tiny-vit"]])
    assert list(scored.model.values) == ["tiny-vit", "named"]
    assert list(scored.role.values) == ["encoder", "encoder"]
    assert scored.symmetry.sel(stack="encoder").notnull().all()
    assert tables.score_local_checkpoints([]) is None
    with pytest.raises(ValueError, match="same name"):
        tables.score_local_checkpoints([tmp_path / "tiny-vit", tmp_path / "tiny-vit"])
    with pytest.raises(ValueError, match="list of paths"):
        tables.score_local_checkpoints(str(tmp_path / "tiny-vit"))
    with pytest.raises(ValueError, match="path or a \\[name, path\\] pair"):
        tables.score_local_checkpoints([["a", "b", "c"]])


def test_a_causal_local_checkpoint_is_a_decoder(tmp_path):
    build("gpt2").save_pretrained(tmp_path / "tiny-gpt2")
    scored = tables.score_local_checkpoints([tmp_path / "tiny-gpt2"])
    assert list(scored.role.values) == ["decoder"] and list(scored["stack"].values) == ["decoder"]
    tensors = load_file(str(tmp_path / "tiny-gpt2" / "model.safetensors"))
    assert float(scored.n_params[0]) == sum(t.size for t in tensors.values() if t.dtype.kind == "f")


def test_reference_table_is_package_data():
    from attnstruct.reference import reference_names, reference_path

    assert {"paper_reported_pretrained.csv", "paper_training_dynamics.csv"} <= set(reference_names())
    assert reference.REFERENCE_CSV == reference_path("paper_reported_pretrained.csv")
    assert reference.REFERENCE_CSV.parent == Path(reference.__file__).parent
    table = reference.reference_table()
    assert {"model", "role", "symmetry_median", "caveats"} <= set(table.columns) and len(table) > 100
    with pytest.raises(FileNotFoundError, match="no reference file 'missing.csv'.*paper_reported_pretrained"):
        reference_path("missing.csv")


def test_summary_labels_rotary_and_cross_attention_from_the_blocks():
    bart, llama = build("bart"), build("llama")
    ds = tables.combine(
        [
            tables.score_checkpoint(bart, name="bart", role="encoder-decoder", n_params=1e5),
            tables.score_checkpoint(llama, name="llama", role="decoder", n_params=1e5),
        ]
    )
    table = pretrained.summary(ds).set_index(["model", "stack"])
    assert table.loc[("bart", "cross"), "attention"] == "cross"
    assert (table.drop(("bart", "cross"))["attention"] == "self").all()
    assert table.loc[("llama", "decoder"), "rotary"] and not table.loc[("bart", "encoder"), "rotary"]
    blocks = {"bart": list(iter_blocks(bart)), "llama": list(iter_blocks(llama))}
    shapes = pretrained.block_shapes(blocks).set_index(["model", "stack"])
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
    got = pretrained.null_comparison(table, n_draws=n_draws, layer_draws=layer_draws, seed=seed)
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
            expected = brute_force_comparison(table.loc[index, f"{score}_median"], medians[s])
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


def test_null_sentences_name_the_rows_outside_and_inside():
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
        table[f"{score}_percentile"] = [100.0, 100.0, 50.0] if score == "symmetry" else [30.0, 0.0, 0.0]
        table[f"{score}_z"] = [90.0, 20.0, 0.0] if score == "symmetry" else [-1.0, -4.0, -9.0]
        table[f"{score}_null_low"], table[f"{score}_null_high"] = low, high
        table[f"{score}_outside"] = (table[f"{score}_median"] < low) | (table[f"{score}_median"] > high)
    sym, direc = pretrained.null_sentences(table)
    assert sym.startswith("Median symmetry: outside the null's 95% range for 2 of 3 stacks: enc encoder +0.500 (z")
    assert "Inside it: dec cross (cross-attention) +0.000 (z +0.0, percentile 50.0; null -0.010 to +0.010)." in sym
    assert sym.endswith("ranges lie within -0.010 to +0.010.")
    assert "for 2 of 3 stacks: dec decoder -0.30 (z -4.0, percentile 0.0; null -0.20 to +0.25)" in direc
    assert "Inside it: enc encoder -0.10" in direc


def test_checkpoint_list_names_the_fetch_command_for_a_missing_zoo_model(tmp_path):
    with pytest.raises(RuntimeError, match="not fetched yet.*run: attnstruct fetch-models minilm-l6$"):
        pretrained.checkpoint_list("minilm-l6", cache_dir=tmp_path)


def test_checkpoint_list_appends_local_models_with_or_without_a_role():
    listed = pretrained.checkpoint_list([], [["a", "/p"], ("b", "/q", "decoder")])
    assert listed[["model", "source", "role", "model_type"]].values.tolist() == [
        ["a", "local", "", ""],
        ["b", "local", "decoder", ""],
    ]
    assert listed["n_params"].isna().all()


@pytest.mark.parametrize("entry", [["a", "/p", "seq2seq"], ["a"], "a/path"])
def test_checkpoint_list_rejects_a_bad_local_entry(entry):
    with pytest.raises(ValueError, match="role must be one of|a local model is"):
        pretrained.checkpoint_list([], [entry])


def test_score_models_takes_the_role_from_the_blocks_and_checks_the_one_listed(tmp_path):
    build("gpt2").save_pretrained(tmp_path / "gpt")
    listed = pretrained.checkpoint_list([], [["gpt", tmp_path / "gpt"]])
    blocks = pretrained.read_blocks(listed)
    ds = pretrained.score_models(listed, blocks)
    assert ds.role.values.tolist() == ["decoder"] and ds.source.values.tolist() == ["local"]
    wrong = pretrained.checkpoint_list([], [["gpt", tmp_path / "gpt", "encoder"]])
    with pytest.raises(ValueError, match="its blocks make it 'decoder'"):
        pretrained.score_models(wrong, blocks)


def made_up_scores():
    """Two models over (model, stack, layer): an encoder with two layers and an encoder-decoder with one each."""
    symmetry = np.array([[[0.5, 0.7], [np.nan, np.nan]], [[0.4, np.nan], [0.1, np.nan]]])
    return xr.Dataset(
        {
            "symmetry": (("model", "stack", "layer"), symmetry),
            "directionality": (("model", "stack", "layer"), -symmetry),
            "extras": (("model", "stack"), [["q_bias,rotary", ""], ["", "k_bias"]]),
        },
        coords={
            "model": ["enc", "both"],
            "stack": ["encoder", "decoder"],
            "layer": [0, 1],
            "role": ("model", ["encoder", "encoder-decoder"]),
            "family": ("model", ["BERT", "BART"]),
            "n_params": ("model", [1e6, 2e6]),
        },
    )


def test_summary_reads_the_comma_separated_extras_and_the_model_coordinates():
    table = pretrained.summary(made_up_scores()).set_index(["model", "stack"])
    assert list(table.index) == [("enc", "encoder"), ("both", "encoder"), ("both", "decoder")]
    assert table["rotary"].tolist() == [True, False, False]
    assert table.loc[("both", "decoder"), "family"] == "BART" and table.loc[("enc", "encoder"), "n_layers"] == 2
    assert table.loc[("enc", "encoder"), "symmetry_median"] == pytest.approx(0.6)


def test_encoder_decoder_models_are_those_of_that_role():
    assert pretrained.encoder_decoder_models(made_up_scores()) == ["both"]


def test_describe_caveated_stacks_lists_rotary_and_cross_stacks():
    table = pd.DataFrame(
        {
            "model": ["a", "b", "b"],
            "stack": ["decoder", "decoder", "cross"],
            "rotary": [True, False, False],
            "attention": ["self", "self", "cross"],
        }
    )
    assert pretrained.describe_caveated_stacks(table) == (
        "Rotary stacks in this run: a (decoder). Cross-attention stacks: b."
    )
    assert pretrained.describe_caveated_stacks(table.iloc[1:2]) == (
        "Rotary stacks in this run: none. Cross-attention stacks: none."
    )


def test_stack_quartiles_keep_self_attention_by_stack_then_model():
    table = pretrained.summary(made_up_scores()).assign(attention="self")
    table.loc[len(table)] = table.iloc[0].to_dict() | {"model": "x", "stack": "cross", "attention": "cross"}
    rows = pretrained.stack_quartiles(table)
    assert list(zip(rows["model"], rows["stack"])) == [("both", "decoder"), ("both", "encoder"), ("enc", "encoder")]
    assert list(rows.columns)[-1] == "directionality_median"


def null_table():
    table = pretrained.summary(made_up_scores()).assign(d_model=16, n_heads=4)
    return table.join(pretrained.null_comparison(table, n_draws=5, layer_draws=10, seed=0))


def test_null_view_shows_the_shape_then_each_scores_place_in_its_null():
    view = pretrained.null_view(null_table())
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
    ds = pretrained.results_dataset(made_up_scores(), table, parameters={"null_draws": 5}, checkpoints=listed)
    assert set(pretrained.NULL_VARIABLES) <= set(ds.data_vars)
    row = table.set_index(["model", "stack"]).loc[("both", "decoder")]
    assert ds.symmetry_z.sel(model="both", stack="decoder") == row["symmetry_z"]
    assert np.isnan(ds.symmetry_z.sel(model="enc", stack="decoder"))  # a stack the model lacks
    assert ds.attrs["checkpoints"] == "enc: /e; both: /b" and '"null_draws": 5' in ds.attrs["parameters"]
