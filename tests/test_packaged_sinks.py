"""Sink diagnostics of transformers models and of the packaged checkpoints: the forward pass returns the model's own
attention, and :func:`diagnose_packaged` reads what it can and names what it cannot, without fetching."""

import dataclasses
import json
import math

import pytest
import torch

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

from attnstruct.checkpoints import zoo  # noqa: E402
from attnstruct.sinks import packaged  # noqa: E402
from attnstruct.sinks.attention_passes import transformers_pass  # noqa: E402

B, T = 2, 10


def tiny_bert() -> torch.nn.Module:
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=4, intermediate_size=32
    )
    return transformers.BertModel(config, add_pooling_layer=False).eval()


def tiny_llama() -> torch.nn.Module:
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=40,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=32,
    )
    return transformers.LlamaModel(config).eval()


def ids() -> torch.Tensor:
    return torch.randint(0, 40, (B, T), generator=torch.Generator().manual_seed(1))


def eager(model: torch.nn.Module) -> torch.nn.Module:
    model.config._attn_implementation = "eager"
    model.set_attn_implementation("eager")
    return model


def test_transformers_pass_returns_the_bert_softmax_of_each_layer_and_head():
    model = eager(tiny_bert())
    passed = transformers_pass(model, ids(), causal=False)
    heads, d_head = 4, 4
    for index, (layer, x) in enumerate(zip(model.encoder.layer, passed.key_inputs)):
        attention = layer.attention.self
        q = attention.query(x).view(B, T, heads, d_head).transpose(1, 2)
        k = attention.key(x).view(B, T, heads, d_head).transpose(1, 2)
        direct = (q @ k.transpose(-1, -2) / math.sqrt(d_head)).softmax(-1)  # [B, H, T, T]
        torch.testing.assert_close(passed.probabilities[index], direct.transpose(0, 1), atol=1e-5, rtol=1e-5)


def test_transformers_pass_finds_mpnets_key_projections():
    torch.manual_seed(0)
    config = transformers.MPNetConfig(
        vocab_size=40, hidden_size=16, num_hidden_layers=3, num_attention_heads=4, intermediate_size=32
    )
    model = eager(transformers.MPNetModel(config, add_pooling_layer=False).eval())
    passed = transformers_pass(model, ids(), causal=False)
    assert passed.key_inputs.shape == (3, B, T, 16) and passed.probabilities.shape == (3, 4, B, T, T)


def test_transformers_pass_returns_llamas_output_attentions_by_layer_then_head():
    model = eager(tiny_llama())
    out = model(input_ids=ids(), output_attentions=True)
    passed = transformers_pass(model, ids(), causal=True)
    assert passed.probabilities.shape == (2, 4, B, T, T)
    torch.testing.assert_close(passed.probabilities, torch.stack(out.attentions).transpose(1, 2))


def test_transformers_pass_reads_llamas_keys_after_the_pre_norm():
    model = eager(tiny_llama())
    passed = transformers_pass(model, ids(), causal=True)
    for layer, residual, key_input in zip(model.layers, passed.residual, passed.key_inputs):
        torch.testing.assert_close(key_input, layer.input_layernorm(residual))


WORDS = packaged.held_out_passage().lower().replace(".", " ").replace(",", " ").replace(";", " ").split()


def save_tiny_encoder(folder) -> None:
    """A tiny BERT with a word-level tokenizer over the passage's words, saved as a packaged folder is."""
    vocab = {token: i for i, token in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", *sorted(set(WORDS))])}
    backend = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]"
    )
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=len(vocab), hidden_size=16, num_hidden_layers=2, num_attention_heads=4, intermediate_size=32
    )
    transformers.BertModel(config, add_pooling_layer=False).save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def fake_entry(name: str, **changes) -> zoo.Entry:
    fields = dict(
        name=name,
        title=name,
        distributions=("fake==0",),
        members=("m",),
        payload="model.safetensors",
        sha256="0" * 64,
        size=1,
        format="safetensors-dir",
        licence="MIT",
        role="encoder",
    )
    return dataclasses.replace(zoo.Entry(**fields), **changes)


@pytest.fixture
def fake_cache(tmp_path, monkeypatch):
    """The fake entries ``tiny-bert`` (fetched), ``tiny-absent`` (not fetched) and ``tiny-onnx`` (fetched, ONNX)."""
    entries = {
        "tiny-bert": fake_entry("tiny-bert"),
        "tiny-absent": fake_entry("tiny-absent"),
        "tiny-onnx": fake_entry("tiny-onnx", format="onnx", payload="model.onnx"),
    }
    save_tiny_encoder(tmp_path / "tiny-bert")
    monkeypatch.setattr(zoo, "resolve", lambda name: entries[getattr(name, "name", name)])
    monkeypatch.setattr(zoo, "is_fetched", lambda entry, cache=None: entry.name != "tiny-absent")
    monkeypatch.setattr(zoo, "path", lambda entry, cache=None: tmp_path / entry.name)
    monkeypatch.setattr(zoo, "why_not_fetched", lambda entry, cache=None: "is not fetched yet")
    return tmp_path


def small_run(names):
    return packaged.diagnose_packaged(names, n_sequences=2, seq_len=12, k=3, ablation_draws=2)


def test_diagnose_packaged_gives_a_fetched_encoder_one_row_of_every_column(fake_cache):
    rows, skipped = small_run(["tiny-bert"])
    assert list(rows.columns) == list(packaged.COLUMNS) and skipped == []
    row = rows.iloc[0]
    assert (row.model, row.role, row.layers, row.heads, row.sink_positions) == (
        "tiny-bert",
        "encoder",
        2,
        4,
        "[CLS]+[SEP]",
    )
    assert 0 < row.sink_mass < 1 and row.uniform == pytest.approx(2 / 12)


def test_diagnose_packaged_names_a_model_not_fetched_and_fetches_nothing(fake_cache):
    rows, skipped = small_run(["tiny-absent"])
    assert rows.empty and [name for name, _ in skipped] == ["tiny-absent"]
    assert "not fetched" in skipped[0][1]
    assert not (fake_cache / "tiny-absent").exists()


def test_diagnose_packaged_lists_a_format_transformers_cannot_run_with_its_reason(fake_cache):
    rows, skipped = small_run(["tiny-onnx", "tiny-bert"])
    assert list(rows.model) == ["tiny-bert"]
    assert [name for name, _ in skipped] == ["tiny-onnx"] and skipped[0][1].startswith("onnx")


def test_passage_windows_wrap_an_encoders_windows_in_cls_and_sep(fake_cache):
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(fake_cache / "tiny-bert"))
    windows, label = packaged.passage_windows(tokenizer, causal=False, n_sequences=3, seq_len=8)
    assert windows.shape == (3, 8) and label == "[CLS]+[SEP]"
    assert set(windows[:, 0].tolist()) == {tokenizer.cls_token_id} and set(windows[:, -1].tolist()) == {
        tokenizer.sep_token_id
    }
    inner = windows[:, 1:-1].flatten().tolist()
    assert inner == tokenizer(packaged.held_out_passage(), add_special_tokens=False).input_ids[:18]


def test_passage_windows_refuse_a_passage_too_short_in_one_line(fake_cache):
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(fake_cache / "tiny-bert"))
    with pytest.raises(ValueError, match="fewer than the 100 x 998"):
        packaged.passage_windows(tokenizer, causal=False, n_sequences=100, seq_len=1000)


def test_diagnose_packaged_reads_a_folder_whose_config_names_no_model_type_as_the_registry_says(
    fake_cache, monkeypatch
):
    config = fake_cache / "tiny-bert" / "config.json"
    settings = json.loads(config.read_text())
    del settings["model_type"]
    config.write_text(json.dumps(settings))
    bert = fake_entry("tiny-bert", model_type="bert")
    monkeypatch.setattr(zoo, "resolve", lambda name: bert)
    rows, skipped = small_run(["tiny-bert"])
    assert skipped == [] and list(rows.model) == ["tiny-bert"]


def test_diagnose_packaged_names_a_model_that_is_not_a_text_encoder_or_decoder(fake_cache, monkeypatch):
    speech = fake_entry("tiny-speech", role="encoder-decoder")
    monkeypatch.setattr(zoo, "resolve", lambda name: speech)
    rows, skipped = small_run(["tiny-speech"])
    assert rows.empty and [name for name, _ in skipped] == ["tiny-speech"] and "encoder-decoder" in skipped[0][1]
