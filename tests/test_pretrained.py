"""Pretrained-model scoring: datasets, summaries, the two checks, and MiniLM-L6 against an independent computation.

The MiniLM test reads the checkpoint fetched by `make fetch` (`make test` runs it first).
"""

from pathlib import Path

import numpy as np
import pytest
import torch
from extract_models import build
from safetensors.numpy import load_file

from attnstruct import pretrained, zoo
from attnstruct.extract import iter_blocks

from reference import directionality_paper, symmetry_paper


def test_minilm_layer_scores_match_an_independent_computation():
    assert zoo.is_fetched("minilm-l6"), "run `make fetch` (attnstruct fetch-models --set core) first"
    folder = zoo.path("minilm-l6")
    tensors = load_file(str(folder / "model.safetensors"))
    ds = pretrained.score_checkpoint(folder, name="minilm-l6", role="encoder")
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
    ds = pretrained.combine(
        [
            pretrained.score_checkpoint(bert, name="bert", role="encoder", n_params=1e5),
            pretrained.score_checkpoint(gpt, name="gpt2", role="decoder", n_params=2e5),
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
    comparison = pretrained.gqa_comparison(blocks)
    assert (comparison.n_kv_heads < comparison.n_heads).all()
    wrong = pretrained.authors_gqa_pairing(blocks[0])
    assert not torch.equal(wrong.w_k, blocks[0].w_k)
    assert torch.equal(wrong.w_k[: blocks[0].n_kv_heads], blocks[0].w_k[:: blocks[0].n_heads // blocks[0].n_kv_heads])


def test_quantization_roundtrip_and_effect():
    w = torch.randn(64, 96)
    q8 = pretrained.quantize_roundtrip(w, "Q8_0")
    assert q8.shape == w.shape and float((q8 - w).norm() / w.norm()) < 0.01
    q4 = pretrained.quantize_roundtrip(w, "Q4_0")
    assert 0.01 < float((q4 - w).norm() / w.norm()) < 0.2
    effect = pretrained.quantization_effect(list(iter_blocks(build("bert"))), ["Q8_0", "Q4_0"])
    assert len(effect) == 4
    q8_rows = effect[effect.qtype == "Q8_0"]
    assert (q8_rows.wqk_relative_error < 0.02).all()
    assert ((q8_rows.symmetry_quantized - q8_rows.symmetry).abs() < 0.01).all()


def test_wqk_corner_is_the_layer_matrix_block():
    block = next(iter(iter_blocks(build("bert"))))
    full = sum(block.w_q[h].double().T @ block.w_k[h].double() for h in range(block.n_heads))
    np.testing.assert_allclose(pretrained.wqk_corner(block, 10), full[:10, :10].numpy(), atol=1e-10)


def test_count_parameters_of_a_saved_model(tmp_path):
    from attnstruct.extract import count_parameters

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
    scored = pretrained.score_local_checkpoints([str(tmp_path / "tiny-vit"), ["named", tmp_path / "tiny-vit"]])
    assert list(scored.model.values) == ["tiny-vit", "named"]
    assert list(scored.role.values) == ["encoder", "encoder"]
    assert scored.symmetry.sel(stack="encoder").notnull().all()
    assert pretrained.score_local_checkpoints([]) is None
    with pytest.raises(ValueError, match="same name"):
        pretrained.score_local_checkpoints([tmp_path / "tiny-vit", tmp_path / "tiny-vit"])
    with pytest.raises(ValueError, match="list of paths"):
        pretrained.score_local_checkpoints(str(tmp_path / "tiny-vit"))
    with pytest.raises(ValueError, match="path or a \\[name, path\\] pair"):
        pretrained.score_local_checkpoints([["a", "b", "c"]])


def test_a_causal_local_checkpoint_is_a_decoder(tmp_path):
    build("gpt2").save_pretrained(tmp_path / "tiny-gpt2")
    scored = pretrained.score_local_checkpoints([tmp_path / "tiny-gpt2"])
    assert list(scored.role.values) == ["decoder"] and list(scored["stack"].values) == ["decoder"]
    tensors = load_file(str(tmp_path / "tiny-gpt2" / "model.safetensors"))
    assert float(scored.n_params[0]) == sum(t.size for t in tensors.values() if t.dtype.kind == "f")


def test_reference_table_is_package_data():
    from attnstruct.reference import reference_names, reference_path

    assert reference_names() == ["paper_reported_pretrained.csv", "paper_training_dynamics.csv"]
    assert pretrained.REFERENCE_CSV == reference_path("paper_reported_pretrained.csv")
    assert pretrained.REFERENCE_CSV.parent.parent == Path(pretrained.__file__).parent
    table = pretrained.reference_table()
    assert {"model", "role", "symmetry_median", "caveats"} <= set(table.columns) and len(table) > 100
    with pytest.raises(FileNotFoundError, match="no reference file 'missing.csv'.*paper_reported_pretrained"):
        reference_path("missing.csv")
