"""The attention normalisation of the project's Transformer (``TransformerConfig.attention``): each form against a
direct implementation written here from its definition, causality, the softmax path as before, and a run of each
through the command line notebooks' runs share."""

import json
import math

import numpy as np
import pytest
import torch

from attnstruct import cli, notebooks, results
from attnstruct.tasks.text_config import TextConfig
from attnstruct.training import run_folder
from attnstruct.training.model import LanguageModel, SelfAttention, query_key_factors
from attnstruct.training.model_config import ATTENTIONS, TransformerConfig

pytestmark = pytest.mark.usefixtures("one_torch_thread")

NON_SOFTMAX = [form for form in ATTENTIONS if form != "softmax"]


def shape(attention: str = "softmax", **changes) -> TransformerConfig:
    values = dict(vocab_size=50, max_len=8, d_model=16, n_layers=2, n_heads=2, dropout=0.0, norm="pre")
    return TransformerConfig(**{**values, "attention": attention, **changes})


def direct_attention(layer: SelfAttention, x: torch.Tensor, causal: bool) -> torch.Tensor:
    """The layer's output from the definitions, one batch row, head, query and key at a time:

    * softmax: ``w_ij = exp(s_ij) / sum_j' exp(s_ij')`` over the visible keys;
    * sigmoid: ``w_ij = sigmoid(s_ij)`` for a visible key, 0 for a masked one, no normalisation;
    * softmax-null-slot: softmax over the visible keys and the slot ``(k0, v0)``, which every query sees;

    with ``s_ij = q_i . k_j / sqrt(d_head)`` and ``out_i = sum_j w_ij v_j``.
    """
    batch, length, d = x.shape
    n_heads, d_head = layer.n_heads, layer.d_head
    q, k, v = (getattr(layer, name)(x).view(batch, length, n_heads, d_head) for name in ("query", "key", "value"))
    out = torch.zeros(batch, length, n_heads, d_head, dtype=x.dtype)
    form = layer.attention
    for b in range(batch):
        for h in range(n_heads):
            for i in range(length):
                keys = [k[b, j, h] for j in range(length) if not causal or j <= i]
                values = [v[b, j, h] for j in range(length) if not causal or j <= i]
                if form == "softmax-null-slot":
                    keys, values = [layer.null_key[h], *keys], [layer.null_value[h], *values]
                scores = torch.stack([torch.dot(q[b, i, h], key) / math.sqrt(d_head) for key in keys])
                weights = torch.sigmoid(scores) if form == "sigmoid" else torch.softmax(scores, 0)
                out[b, i, h] = sum(w * value for w, value in zip(weights, values))
    return layer.output(out.reshape(batch, length, d))


@pytest.mark.parametrize("causal", [True, False], ids=["causal", "bidirectional"])
@pytest.mark.parametrize("attention", ATTENTIONS)
def test_each_attention_is_its_definition(attention, causal):
    torch.manual_seed(0)
    model = LanguageModel(shape(attention)).double().eval()  # dropout off
    layer = model.encoder.blocks[0].attention
    x = torch.randn(2, 6, 16, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(layer(x, causal), direct_attention(layer, x, causal))


@pytest.mark.parametrize("attention", NON_SOFTMAX)
def test_a_causal_output_does_not_see_later_tokens(attention):
    torch.manual_seed(0)
    model = LanguageModel(shape(attention)).eval()
    ids = torch.randint(0, 50, (2, 8), generator=torch.Generator().manual_seed(1))
    changed = ids.clone()
    changed[:, 5:] = (changed[:, 5:] + 7) % 50
    with torch.no_grad():
        before, after = model(ids, True), model(changed, True)
    torch.testing.assert_close(after[:, :5], before[:, :5])
    assert not torch.allclose(after[:, 5:], before[:, 5:])


def test_the_softmax_model_gives_the_logits_it_gave_before_the_choice():
    """Logits of a fixed seed, recorded with the model before ``attention`` existed."""
    torch.manual_seed(0)
    model = LanguageModel(shape()).eval()
    assert not any("null" in name for name in model.state_dict())
    ids = torch.randint(0, 50, (2, 8), generator=torch.Generator().manual_seed(1))
    recorded = {
        True: [0.032962825, 0.090370864, 0.028291104, -0.106789827, -0.049164288, 0.015104352, 0.064628445, 0.01348296],
        False: [
            0.032659933,
            0.089952193,
            0.028305106,
            -0.106772222,
            -0.049145807,
            0.015062192,
            0.064628467,
            0.013482779,
        ],
    }
    with torch.no_grad():
        for causal, first_logits in recorded.items():
            torch.testing.assert_close(model(ids, causal)[0, :, 0], torch.tensor(first_logits), atol=1e-6, rtol=0)


def test_the_null_slot_is_learned():
    torch.manual_seed(0)
    model = LanguageModel(shape("softmax-null-slot"))
    ids = torch.randint(0, 50, (2, 8), generator=torch.Generator().manual_seed(1))
    model(ids, True).logsumexp(-1).sum().backward()
    for layer in model.encoder.blocks:
        for slot in (layer.attention.null_key, layer.attention.null_value):
            assert slot.grad is not None and bool(slot.grad.abs().sum() > 0)


def test_the_null_slot_is_counted_and_left_out_of_the_query_key_factors():
    torch.manual_seed(0)
    config = shape("softmax-null-slot")
    model = LanguageModel(config)
    assert config.n_parameters == sum(p.numel() for p in model.parameters())
    queries, keys = query_key_factors(model)
    assert queries.shape == keys.shape == (2, 2, 8, 16)  # W_q and W_k only: the slot is a key bias, like rotary's


def test_an_unknown_attention_names_the_choices():
    with pytest.raises(ValueError, match="softmax, sigmoid, softmax-null-slot"):
        shape("linear")
    with pytest.raises(ValueError, match="softmax, sigmoid, softmax-null-slot"):
        TextConfig(attention="linear")


def test_a_softmax_run_keeps_its_record_digest_and_name():
    """Runs recorded before the choice existed (notebooks 05-09) keep their folders: digests recorded then."""
    config = TextConfig()
    assert "attention" not in config.to_dict()
    assert config.digest() == "bb7784734a6475cd"
    assert TextConfig(objective="next-token").digest() == "9f0848a875bdb621"
    assert config.run_name() == "mlm-bert-seed0"
    assert "attention" not in config.model_config(500).to_dict()  # a snapshot's config.json as before


@pytest.mark.parametrize("attention", NON_SOFTMAX)
def test_another_attention_is_recorded_and_names_its_run(attention):
    config = TextConfig(objective="next-token", seed=3, attention=attention)
    assert config.to_dict()["attention"] == attention
    assert config.digest() != TextConfig(objective="next-token", seed=3).digest()
    assert config.run_name() == f"next-token-bert-seed3-{attention}"
    assert config.model_config(500).attention == attention
    assert TextConfig.from_dict(config.to_dict()) == config


def test_a_notebook_sets_the_attention_run_by_run():
    """The attention is not a parameter a notebook must declare: it is chosen per run, like ``init_seed``."""
    cell = notebooks.run_settings("text-training")  # what a parameters cell tagged text-training holds
    assert "attention" not in cell
    assert (
        TextConfig.from_params(cell, objective="mlm", init="bert", seed=0, attention="sigmoid").attention == "sigmoid"
    )
    assert TextConfig.from_params(cell, objective="mlm", init="bert", seed=0).attention == "softmax"


@pytest.mark.parametrize("attention", NON_SOFTMAX)
def test_a_tiny_run_trains_with_each_attention_from_the_command_line(tmp_path, attention):
    corpus = tmp_path / "tiny.txt"
    corpus.write_text("the king is dead long live the king and all his men\n" * 40)
    run = tmp_path / "run"
    tiny = [
        "--corpus", str(corpus), "--vocab-size", "300", "--seq-len", "16", "--objective", "next-token",
        "--steps", "4", "--batch-size", "4", "--warmup", "1", "--log-every", "2", "--eval-every", "2",
        "--checkpoint-every", "2", "--eval-batches", "1", "--d-model", "16", "--n-layers", "2", "--n-heads", "2",
    ]  # fmt: skip
    assert cli.main(["train", "--run-dir", str(run), *tiny, "--attention", attention, "--save-final"]) == 0
    ds = results.load_dataset(run / run_folder.RUN_FILE)
    assert json.loads(ds.attrs["parameters"])["attention"] == attention
    assert bool(np.isfinite(ds.train_loss.values[1:]).all())  # NaN at step 0: no step taken yet
    config = json.loads((run / "final" / "config.json").read_text())
    assert config["attnstruct"]["transformer"]["attention"] == attention
