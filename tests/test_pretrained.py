"""Scored checkpoints: their datasets combined and summarised per model and stack (:mod:`attnstruct.analyses.
pretrained_scores`), local checkpoints, the reference table, and MiniLM-L6 against an independent computation.

The MiniLM test reads the checkpoint fetched by `make fetch` (`make test` runs it first).
"""

from pathlib import Path

import numpy as np
import pytest
import torch
import xarray as xr
from extract_models import build
from safetensors.numpy import load_file

from attnstruct import reference
from attnstruct.analyses import pretrained_scores
from attnstruct.checkpoints import tables, zoo

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


def test_combine_and_stack_summary():
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
    table = pretrained_scores.stack_summary(ds)
    assert list(zip(table["model"], table["stack"])) == [("bert", "encoder"), ("gpt2", "decoder")]
    values = ds.symmetry.sel(model="gpt2", stack="decoder").dropna("layer").values
    assert table.symmetry_median[1] == pytest.approx(np.median(values))
    assert table.symmetry_q25[1] == pytest.approx(np.percentile(values, 25))


def test_the_role_of_a_vision_familys_encoder_stack_is_vision_encoder():
    assert tables.role_of(["encoder"], vision=True) == "vision encoder"
    assert tables.role_of(["encoder"]) == "encoder"
    assert tables.role_of(["encoder", "decoder"], vision=True) == "encoder-decoder"


@pytest.mark.parametrize("model_type", ["vit", "swin"])
def test_a_vision_transformer_scored_is_a_vision_encoder(model_type):
    ds = tables.score_checkpoint(build(model_type), name=model_type, role="vision encoder")
    assert ds.role.item() == "vision encoder" and list(ds["stack"].values) == ["encoder"]


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
    assert list(scored.role.values) == ["vision encoder", "vision encoder"]
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


def test_stack_summary_reads_the_comma_separated_extras_and_the_model_coordinates():
    table = pretrained_scores.stack_summary(made_up_scores()).set_index(["model", "stack"])
    assert list(table.index) == [("enc", "encoder"), ("both", "encoder"), ("both", "decoder")]
    assert table["rotary"].tolist() == [True, False, False]
    assert table.loc[("both", "decoder"), "family"] == "BART" and table.loc[("enc", "encoder"), "n_layers"] == 2
    assert table.loc[("enc", "encoder"), "symmetry_median"] == pytest.approx(0.6)
