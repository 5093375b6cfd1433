"""``at.score``: any model as one tidy table (one row per model, stack, layer and head) and the sweep's dataset."""

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
import xarray as xr
from extract_models import build

import attnstruct as at
from attnstruct.checkpoints.extract import ExtractionError
from attnstruct.checkpoints.scoring import score_model
from attnstruct.checkpoints.tables import score_checkpoint


@pytest.fixture(scope="module")
def bert():
    return build("bert")


@pytest.fixture(scope="module")
def llama():
    return build("llama")


def test_the_table_is_long_one_row_per_layer_and_per_head_with_head_empty_for_the_layer(bert):
    scores = at.score(bert, per_head=True)
    table = scores.table
    assert list(table.columns) == [
        "model", "stack", "layer", "head", "symmetry", "directionality", "n_heads", "n_kv_heads", "d_model",
        "d_head", "causal", "family", "reader", "extras",
    ]  # fmt: skip
    assert len(table) == 2 * (1 + 4)  # two layers: the layer matrix and four heads each
    layers = table[table["head"].isna()]
    assert list(layers["layer"]) == [0, 1]
    assert list(table.loc[table["layer"] == 0, "head"].dropna()) == [0, 1, 2, 3]
    wide = score_model(bert, per_head=True)
    np.testing.assert_allclose(layers["symmetry"], wide["symmetry"], rtol=0, atol=0)
    np.testing.assert_allclose(
        table.loc[table["layer"] == 1, "directionality"].iloc[1:], wide["head_directionality"][1]
    )
    assert set(table["family"]) == {"bert"} and set(table["reader"]) == {"BERT"}
    assert table["head"].dtype == "Int64" and table["n_heads"].dtype == np.int64


def test_without_per_head_there_are_only_layer_rows(bert):
    table = at.score(bert).table
    assert len(table) == 2 and table["head"].isna().all()


def test_to_xarray_is_the_per_model_dataset_the_sweep_writes(bert):
    ds = at.score(bert, per_head=True, precision="float64", device="cpu").to_xarray()
    xr.testing.assert_identical(ds, score_checkpoint(bert))


def test_a_state_dict_with_its_config_scores_as_the_model(bert, llama):
    for model in (bert, llama):
        expected = at.score(model, per_head=True).table.drop(columns="model")
        state = model.state_dict()
        for config in (model.config, model.config.to_dict()):
            got = at.score(state, per_head=True, config=config).table
            assert set(got["model"]) == {"state_dict"}
            pd.testing.assert_frame_equal(got.drop(columns="model"), expected)


def test_a_state_dict_with_a_family_and_head_count_scores_as_the_model(bert):
    expected = at.score(bert).table.drop(columns="model")
    got = at.score(bert.state_dict(), family="bert", n_heads=4, name="tiny").table
    assert set(got["model"]) == {"tiny"}
    pd.testing.assert_frame_equal(got.drop(columns="model"), expected)


def test_a_clip_state_dict_with_a_family_and_head_count_scores_its_vision_tower_as_the_model():
    """``clip`` keeps its vision tower's head count in a nested config (``vision_config``): ``n_heads=`` stands in
    for it."""
    clip = build("clip")
    expected = at.score(clip).table.drop(columns="model")
    got = at.score(clip.state_dict(), family="clip", n_heads=4, name="tiny").table
    pd.testing.assert_frame_equal(got.drop(columns="model"), expected)


def test_a_state_dict_without_config_or_family_is_one_line_naming_what_is_missing(bert):
    for call in (lambda s: at.score(s), lambda s: score_model(s)):
        with pytest.raises(ExtractionError) as err:
            call(bert.state_dict())
        message = str(err.value)
        assert "\n" not in message and "config=" in message and "family=" in message
        assert "File name too long" not in message and "tensor(" not in message


def fake_transformer_lens(model, n_kv_heads=None):
    """A stand-in of TransformerLens' ``HookedTransformer`` layout: ``cfg`` and ``blocks[i].attn.W_Q``/``W_K``
    ``[n_heads, d_model, d_head]``, ``b_Q``/``b_K`` ``[n_heads, d_head]`` (TransformerLens' AbstractAttention and
    GroupedQueryAttention, whose ``W_K`` repeats the key heads to ``n_heads``), the weights of a transformers model."""
    n_heads = model.config.num_attention_heads
    blocks = []
    for layer in model.encoder.layer:
        attn = layer.attention.self
        per_head = [
            (lin.weight.detach().reshape(n_heads, -1, lin.weight.shape[1]), lin.bias.detach().reshape(n_heads, -1))
            for lin in (attn.query, attn.key)
        ]
        (w_q, b_q), (w_k, b_k) = per_head
        blocks.append(SimpleNamespace(attn=SimpleNamespace(W_Q=w_q.mT, W_K=w_k.mT, b_Q=b_q, b_K=b_k)))
    cfg = SimpleNamespace(
        n_heads=n_heads,
        n_key_value_heads=n_kv_heads,
        d_model=model.config.hidden_size,
        d_head=model.config.hidden_size // n_heads,
        attention_dir="bidirectional",
        positional_embedding_type="standard",
        model_name="tl-bert",
        original_architecture="BertForMaskedLM",
    )
    return SimpleNamespace(cfg=cfg, blocks=blocks)


def test_a_transformer_lens_model_is_read_in_its_layout_and_scores_as_the_transformers_model(bert):
    expected = at.score(bert, per_head=True).table
    got = at.score(fake_transformer_lens(bert), per_head=True).table
    assert set(got["model"]) == {"tl-bert"} and set(got["reader"]) == {"TransformerLens"}
    assert set(got["family"]) == {"BertForMaskedLM"} and not got["causal"].any()
    for column in ("symmetry", "directionality", "d_model", "d_head", "n_heads", "extras"):
        np.testing.assert_array_equal(got[column], expected[column])


def test_a_transformer_lens_model_in_the_wrong_shape_is_refused_in_one_line(bert):
    model = fake_transformer_lens(bert)
    model.blocks[0].attn.W_K = model.blocks[0].attn.W_K.mT  # [H, d_head, d_model]: attnstruct's, not TransformerLens'
    with pytest.raises(ExtractionError, match=r"blocks\.0\.attn: W_Q .* not TransformerLens' \[n_heads=4"):
        at.score(model)


def test_the_repr_names_the_model_and_shows_each_block(bert):
    text = repr(at.score(bert, name="tiny-bert"))
    assert text.splitlines()[0] == "ModelScores of tiny-bert (bert, read as BERT): 2 blocks scored per layer"
    assert len(text.splitlines()) == 1 + 1 + 2  # the summary, the header, one line per block


def test_config_is_refused_for_anything_but_a_state_dict(bert):
    with pytest.raises(ValueError, match="config= and family= are for a state_dict"):
        at.score(bert, config=bert.config)


def test_score_and_model_scores_are_public_names():
    assert "score" in at.__all__ and "ModelScores" in at.__all__
    assert isinstance(at.score, type(lambda: 0)) and at.ModelScores.__name__ == "ModelScores"
    assert torch.is_tensor(at.factor_scores(torch.ones(1, 2, 3), torch.ones(1, 2, 3)).symmetry)
