"""The one scoring path: its table, its per-head rows, its datasets, the one per-model dataset with its role rule,
and every caller getting the same numbers."""

import numpy as np
import pandas as pd
import pytest
import torch
import xarray as xr
from extract_models import build

from attnstruct.checkpoints import sweep, tables
from attnstruct.checkpoints.extract import AttentionBlock, ExtractionError, iter_blocks
from attnstruct.checkpoints.scoring import score_blocks, score_model
from attnstruct.checkpoints.tables import blocks_dataset, head_rows, layer_rows, scores_dataset

from reference import directionality_paper, symmetry_paper


@pytest.fixture(scope="module")
def whisper_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("whisper")
    build("whisper").save_pretrained(folder)
    return folder


def test_one_row_per_block_with_layer_and_head_scores(whisper_dir):
    blocks = list(iter_blocks(whisper_dir))
    table = score_blocks(blocks, per_head=True, precision="float64", device="cpu")
    assert len(table) == len(blocks)
    assert list(table.columns) == [
        "stack",
        "layer",
        "symmetry",
        "directionality",
        "n_heads",
        "n_kv_heads",
        "d_model",
        "d_head",
        "causal",
        "extras",
        "precision",
        "head_symmetry",
        "head_directionality",
    ]
    assert list(table["stack"]) == ["encoder"] * 2 + ["decoder"] * 2 + ["cross"] * 2
    for block in blocks:
        row = table[(table["stack"] == block.stack) & (table["layer"] == block.layer)].iloc[0]
        q, k = block.w_q.double(), block.w_k.double()
        layer = sum(q[h].T @ k[h] for h in range(block.n_heads)).numpy()
        assert row.symmetry == pytest.approx(symmetry_paper(layer), abs=1e-10)
        assert row.directionality == pytest.approx(directionality_paper(layer), abs=1e-10)
        assert row.head_symmetry.shape == (block.n_heads,) and row.causal == block.causal
        head = (q[1].T @ k[1]).numpy()
        assert row.head_symmetry[1] == pytest.approx(symmetry_paper(head), abs=1e-10)


def test_head_rows_and_layer_rows(whisper_dir):
    table = score_model(whisper_dir, per_head=True)
    heads = head_rows(table)
    assert list(heads.columns[:5]) == ["stack", "layer", "head", "symmetry", "directionality"]
    assert len(heads) == int(table["n_heads"].sum())
    first = heads[(heads["stack"] == "cross") & (heads["layer"] == 1)]
    np.testing.assert_array_equal(first["symmetry"], table.iloc[-1].head_symmetry)
    assert list(first["head"]) == list(range(int(table.iloc[-1].n_heads)))
    pd.testing.assert_frame_equal(layer_rows(table), score_model(whisper_dir), check_exact=True)
    with pytest.raises(ValueError, match="no per-head scores"):
        head_rows(score_model(whisper_dir))


def test_no_blocks_is_an_unsupported_architecture():
    with pytest.raises(
        ExtractionError, match="^unsupported architecture: the checkpoint holds no attention blocks$"
    ) as error:
        score_blocks([])
    assert error.value.kind == "unsupported architecture"


def hand_table(per_head):
    """Two encoder layers with 2 heads, three decoder layers with 3 heads: stacks of different depths and widths."""
    rows = []
    for stack, n_layers, n_heads in (("decoder", 3, 3), ("encoder", 2, 2)):
        for layer in range(n_layers):
            row = {
                "stack": stack,
                "layer": layer,
                "symmetry": 0.1 * layer + (stack == "decoder"),
                "directionality": -0.1 * layer,
                "n_heads": n_heads,
                "n_kv_heads": 1,
                "causal": stack == "decoder",
                "extras": "rotary" if stack == "decoder" else "q_bias,k_bias",
                "precision": "float64",
            }
            if per_head:
                row["head_symmetry"] = np.arange(n_heads) + 10.0 * layer
                row["head_directionality"] = -np.arange(n_heads, dtype=float)
            rows.append(row)
    return pd.DataFrame(rows)


def test_blocks_dataset_pads_shorter_stacks_and_fewer_heads():
    ds = blocks_dataset(hand_table(per_head=True))
    assert list(ds["stack"].values) == ["encoder", "decoder"]
    assert ds.symmetry.dims == ("stack", "layer") and ds.head_symmetry.dims == ("stack", "layer", "head")
    assert ds.sizes == {"stack": 2, "layer": 3, "head": 3}
    assert np.isnan(ds.symmetry.sel(stack="encoder", layer=2)) and ds.symmetry.sel(stack="decoder", layer=2) == 1.2
    np.testing.assert_array_equal(ds.head_symmetry.sel(stack="encoder", layer=1), [10.0, 11.0, np.nan])
    assert list(ds["extras"].values) == ["k_bias,q_bias", "rotary"]
    assert "head" not in blocks_dataset(hand_table(per_head=False)).dims


def test_the_score_file_layout():
    table = hand_table(per_head=True)
    ds = scores_dataset(table, source="x", per_head=False, num_std=2.0)
    assert list(ds["stack"].values) == ["decoder", "encoder"] and set(ds.data_vars) == {
        "symmetry",
        "directionality",
        "n_heads",
        "n_kv_heads",
    }
    assert ds.n_heads.dtype == np.float64  # the encoder has no layer 2
    heads = scores_dataset(table, source="x", per_head=True, num_std=2.0)
    assert heads.symmetry.dims == ("stack", "layer", "head")
    np.testing.assert_array_equal(heads.symmetry.sel(stack="decoder", layer=2), [20.0, 21.0, 22.0])
    full = table[table["stack"] == "decoder"]
    assert scores_dataset(full, source="x", per_head=False, num_std=2.0).n_heads.dtype == np.int64
    assert "decoder 0: rotary" in ds.attrs["block_extras"]


def test_every_caller_gets_the_same_numbers(whisper_dir):
    """score_checkpoint (notebooks 03 and 07), the sweep's per-model dataset and score_model are one computation."""
    table = score_model(whisper_dir, per_head=True, precision="float64", device="cpu")
    expected = blocks_dataset(table)
    checkpoint = tables.score_checkpoint(whisper_dir, name="w").squeeze("model")
    swept = sweep.score_one(
        str(whisper_dir), per_head=True, num_std=2.0, precision="auto", device=torch.device("cpu"), settings=None
    ).squeeze("model")
    for var in ("symmetry", "directionality", "n_heads", "n_kv_heads", "head_symmetry", "head_directionality"):
        xr.testing.assert_equal(checkpoint[var].reset_coords(drop=True), expected[var])
        xr.testing.assert_equal(swept[var].reset_coords(drop=True), expected[var])


def test_every_caller_gets_the_same_coordinates_and_extras(whisper_dir):
    checkpoint = tables.score_checkpoint(whisper_dir, name="w").squeeze("model")
    swept = sweep.score_one(
        str(whisper_dir), per_head=False, num_std=2.0, precision="auto", device=torch.device("cpu"), settings=None
    ).squeeze("model")
    for name in ("role", "family", "model_type", "n_params", "source", "location", "revision", "bytes_fetched"):
        assert checkpoint[name].item() == swept[name].item(), name
    assert checkpoint["role"].item() == "encoder-decoder" and checkpoint["source"].item() == "local"
    assert checkpoint["extras"].dims == swept["extras"].dims == ("stack",)
    assert list(swept["extras"].values) == list(checkpoint["extras"].values) == ["q_bias"] * 3


@pytest.mark.parametrize(
    "stacks, role",
    [
        (["encoder"], "encoder"),
        (["decoder"], "decoder"),
        (["encoder", "decoder", "cross"], "encoder-decoder"),
        (["encoder", "decoder"], "encoder-decoder"),
        (["decoder", "cross"], "encoder-decoder"),  # cross-attention implies an encoder, read or not
        (["encoder", "cross"], "encoder-decoder"),
    ],
)
def test_the_role_rule(stacks, role):
    assert tables.role_of(stacks) == role


@pytest.mark.parametrize("stacks", [[], ["encoder", "vision"]])
def test_the_role_rule_rejects_no_stack_and_unknown_stacks(stacks):
    with pytest.raises(ValueError, match="stacks must be"):
        tables.role_of(stacks)


def test_the_model_dataset_has_the_metadata_as_model_coordinates():
    ds = tables.model_dataset(
        "m", hand_table(per_head=False), n_params=10, source="zoo", location="/x", model_type="llama", revision="abc"
    )
    assert set(tables.MODEL_COORDS) <= set(ds.coords) and ds.sizes["model"] == 1
    one = ds.squeeze("model")
    assert (one.role.item(), one.family.item(), one.model_type.item()) == ("encoder-decoder", "LLaMA", "llama")
    assert (one.n_params.item(), one.source.item(), one.location.item(), one.revision.item()) == (
        10,
        "zoo",
        "/x",
        "abc",
    )
    assert np.isnan(one.bytes_fetched.item())


def test_the_model_dataset_marks_unknown_metadata():
    one = tables.model_dataset("m", hand_table(per_head=False)).squeeze("model")
    assert np.isnan(one.n_params.item()) and one.family.item() == "" and one.source.item() == ""


def test_the_model_dataset_joins_each_stacks_extras_with_commas():
    ds = tables.model_dataset("m", hand_table(per_head=False))
    assert ds["extras"].dims == ("model", "stack")
    assert ds["extras"].sel(model="m").values.tolist() == ["k_bias,q_bias", "rotary"]


def test_relative_depth_runs_from_0_to_1_over_the_deepest_stack():
    ds = tables.model_dataset("m", hand_table(per_head=False))  # decoder 3 layers, encoder 2
    np.testing.assert_array_equal(ds.relative_depth.sel(model="m"), [0.0, 0.5, 1.0])


def test_combine_pads_stacks_depths_and_extras_and_keeps_long_names():
    deep = tables.model_dataset("deep", hand_table(per_head=False), location="/a/very/long/path/to/a/checkpoint")
    encoder = hand_table(per_head=False).query("stack == 'encoder'")
    shallow = tables.model_dataset("shallow", encoder, location="/b")
    ds = tables.combine([shallow, deep], title="t")
    assert list(ds.model.values) == ["shallow", "deep"] and list(ds["stack"].values) == ["encoder", "decoder"]
    assert ds.role.values.tolist() == ["encoder", "encoder-decoder"]
    assert ds["extras"].sel(model="shallow").values.tolist() == ["k_bias,q_bias", ""]
    assert bool(ds.symmetry.sel(model="shallow", stack="decoder").isnull().all())
    np.testing.assert_array_equal(ds.relative_depth.sel(model="shallow"), [0.0, 1.0, np.nan])
    assert ds.location.sel(model="deep").item() == "/a/very/long/path/to/a/checkpoint"
    assert ds.attrs == {"title": "t"}


def made_up_blocks(stack="encoder", n_layers=2):
    generator = torch.Generator().manual_seed(0)
    return [
        AttentionBlock(stack, layer, *torch.randn(2, 2, 4, 8, generator=generator), stack == "decoder", 2)
        for layer in range(n_layers)
    ]


def test_score_checkpoint_raises_when_the_role_given_disagrees_with_the_blocks():
    with pytest.raises(ValueError, match="the role given is 'decoder', its blocks make it 'encoder'"):
        tables.score_checkpoint("made-up", blocks=made_up_blocks(), role="decoder")


def test_score_checkpoint_of_blocks_with_a_label_looks_nothing_up():
    one = tables.score_checkpoint("org/not-on-any-hub", name="x", blocks=made_up_blocks("decoder")).squeeze("model")
    assert (one.role.item(), one.source.item(), one.location.item()) == ("decoder", "", "org/not-on-any-hub")
    assert one.symmetry.dims == ("stack", "layer") and one.head_symmetry.sizes["head"] == 2


def test_the_layer_coordinate_holds_only_the_layers_present():
    """A checkpoint naming only layer 50000000 has one layer: its dataset is not sized by the number."""
    one = made_up_blocks()[0]
    blocks = [AttentionBlock("encoder", 50_000_000, one.w_q, one.w_k, False, 2)]
    table = score_blocks(blocks, per_head=True, device="cpu")
    ds = tables.model_dataset("sparse", table)
    assert ds.sizes["layer"] == 1 and ds["layer"].values.tolist() == [50_000_000]
    assert float(ds.symmetry.sel(model="sparse", stack="encoder", layer=50_000_000)) == table.symmetry[0]
    heads = ds.head_symmetry.sel(model="sparse", stack="encoder", layer=50_000_000)
    assert heads.values.tolist() == list(table.head_symmetry[0])
    assert ds.nbytes < 10_000


def test_relative_depth_counts_from_the_deepest_layer_number_present():
    blocks = made_up_blocks()
    numbered = [AttentionBlock("encoder", layer, b.w_q, b.w_k, False, 2) for layer, b in zip((0, 4), blocks)]
    ds = tables.model_dataset("gap", score_blocks(numbered, device="cpu"))
    assert ds["layer"].values.tolist() == [0, 4]
    np.testing.assert_array_equal(ds.relative_depth.sel(model="gap"), [0.0, 1.0])
    together = tables.combine([ds, tables.model_dataset("dense", score_blocks(blocks, device="cpu"))])
    assert together["layer"].values.tolist() == [0, 1, 4]
    np.testing.assert_array_equal(together.relative_depth.sel(model="dense"), [0.0, 1.0, np.nan])
