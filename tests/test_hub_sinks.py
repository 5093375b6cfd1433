"""Sink diagnostics of models named by hub id, against the stand-in hub on 127.0.0.1: fused query/key projections
split as transformers splits them, the whole model fetched once through the hub client and rebuilt from the
project's own readers, one row per model and a one-line reason for each that cannot be read."""

import json

import numpy as np
import pandas as pd
import pytest
import torch

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

from attnstruct.checkpoints.extract.blocks import ExtractionError  # noqa: E402
from attnstruct.sinks import hub_models, packaged  # noqa: E402
from attnstruct.sinks.attention_passes import key_projections, query_projections, transformers_pass  # noqa: E402

from conftest import tiny  # noqa: E402

pytestmark = pytest.mark.hub

VOCAB = 300  # 256 bytes and the special tokens


def byte_tokenizer() -> transformers.PreTrainedTokenizerFast:
    """A tokenizer of one token per byte with [CLS], [SEP] and a BOS token, as a hub repository's tokenizer.json."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    specials = ["[PAD]", "[CLS]", "[SEP]", "<bos>"]
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {token: i for i, token in enumerate(specials + sorted(alphabet))}
    core = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    core.decoder = decoders.ByteLevel()
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]", bos_token="<bos>"
    )


def model_folder(tmp_path, name: str, *, bin_only: bool = False, with_tokenizer: bool = True, seed: int = 0):
    overrides = {"vocab_size": VOCAB, "pad_token_id": 0, "cls_token_id": 1, "sep_token_id": 2, "bos_token_id": 3}
    if name == "gpt_neox":
        model = transformers.GPTNeoXForCausalLM(tiny(name, seed=seed, **overrides).config)
    elif name == "modernbert":
        model = transformers.ModernBertForMaskedLM(tiny(name, seed=seed, **overrides).config)
    else:
        model = transformers.ModernBertDecoderForCausalLM(tiny(name, seed=seed, **overrides).config)
    folder = tmp_path / f"{name}-{seed}-{bin_only}-{with_tokenizer}"
    model.save_pretrained(folder)
    if bin_only:
        from safetensors.torch import load_file

        torch.save(load_file(folder / "model.safetensors"), folder / "pytorch_model.bin")
        (folder / "model.safetensors").unlink()
    if with_tokenizer:
        byte_tokenizer().save_pretrained(folder)
    return folder, model


class CapturedAttention:
    """An attention function registered with transformers that records the query and key states it is handed."""

    def __init__(self):
        self.queries, self.keys = [], []

    def __call__(self, module, query, key, value, attention_mask, **kwargs):
        self.queries.append(query.detach())
        self.keys.append(key.detach())
        return transformers.modeling_utils.ALL_ATTENTION_FUNCTIONS["sdpa"](
            module, query, key, value, attention_mask, **kwargs
        )


@pytest.mark.parametrize("name", ["gpt_neox", "modernbert"])
def test_a_fused_query_key_value_is_split_as_the_model_splits_it(name):
    """One token at position 0, where the rotary embedding is the identity: the query and key states the model
    hands its attention function are the rows of the fused projection that key_projections and query_projections
    name, applied to that layer's input."""
    captured = CapturedAttention()
    transformers.AttentionInterface.register("captured-for-test", captured)
    model = tiny(name, vocab_size=VOCAB)
    model.set_attn_implementation("captured-for-test")
    inputs = []
    keys, queries = key_projections(model), query_projections(model)
    hooks = [k.module.register_forward_pre_hook(lambda _m, a: inputs.append(a[0].detach())) for k in keys]
    with torch.no_grad():
        model(input_ids=torch.tensor([[7]]))
    for hook in hooks:
        hook.remove()
    heads = model.config.num_attention_heads
    assert len(keys) == len(captured.keys) == model.config.num_hidden_layers
    for layer, x in enumerate(inputs):
        for projection, states in ((keys[layer], captured.keys[layer]), (queries[layer], captured.queries[layer])):
            mine = torch.nn.functional.linear(x, projection.weight, projection.bias)  # [1, 1, H d_head]
            theirs = states.transpose(1, 2).reshape(1, 1, -1)  # [1, H, 1, d_head] -> [1, 1, H d_head]
            assert theirs.shape[-1] == heads * (projection.weight.shape[0] // heads)
            torch.testing.assert_close(mine, theirs, rtol=1e-5, atol=1e-6)


def test_zeroing_key_input_columns_of_a_fused_projection_leaves_its_query_and_value_rows():
    model = tiny("gpt_neox", vocab_size=VOCAB)
    before = model.layers[0].attention.query_key_value.weight.detach().clone()
    key = key_projections(model)[0]
    with torch.no_grad():
        key.set_input_columns([1, 3], 0.0)
    after = key.module.weight.detach()
    changed = (after != before).any(dim=1)
    assert set(changed.nonzero().flatten().tolist()) <= set(key.rows.tolist())
    assert torch.all(after[key.rows][:, [1, 3]] == 0)


@pytest.mark.parametrize("name,causal", [("gpt_neox", True), ("modernbert", False)])
def test_the_pass_of_a_fused_model_returns_its_own_attention_rows(name, causal):
    model = tiny(name, vocab_size=VOCAB)
    model.set_attn_implementation("eager")
    ids = torch.randint(4, VOCAB, (2, 9), generator=torch.Generator().manual_seed(0))
    passed = transformers_pass(model.eval(), ids, causal=causal)
    layers, heads = model.config.num_hidden_layers, model.config.num_attention_heads
    assert passed.probabilities.shape == (layers, heads, 2, 9, 9)
    torch.testing.assert_close(passed.probabilities.sum(-1), torch.ones(layers, heads, 2, 9))
    above = torch.ones(9, 9, dtype=torch.bool).triu(1)
    assert bool((passed.probabilities[..., above] == 0).all()) == causal


@pytest.fixture
def sink_hub(hub, tmp_path):
    """The stand-in hub with a Pythia-like decoder (GPT-NeoX, its step branch without a tokenizer and with
    pytorch_model.bin only), an Ettin-like encoder and decoder (ModernBERT), and an encoder-decoder."""
    neox, neox_model = model_folder(tmp_path, "gpt_neox")
    step, _ = model_folder(tmp_path, "gpt_neox", bin_only=True, with_tokenizer=False, seed=1)
    encoder, encoder_model = model_folder(tmp_path, "modernbert")
    decoder, _ = model_folder(tmp_path, "modernbert-decoder")
    hub.add_folder("org/pythia-tiny", neox)
    hub.add_folder("org/pythia-tiny", step, revision="step100")
    hub.add_folder("org/ettin-encoder-tiny", encoder)
    hub.add_folder("org/ettin-decoder-tiny", decoder)
    hub.models = {"org/pythia-tiny": neox_model, "org/ettin-encoder-tiny": encoder_model}
    return hub


def test_a_hub_decoder_is_diagnosed_as_its_own_weights_give(sink_hub):
    rows, skipped = hub_models.diagnose_hub(["org/pythia-tiny"], n_sequences=2, seq_len=16, ablation_draws=3)
    assert skipped == [] and list(rows["model"]) == ["org/pythia-tiny"]
    assert rows.loc[0, "role"] == "decoder" and rows.loc[0, "sink_positions"] == "0"
    model = sink_hub.models["org/pythia-tiny"].base_model.eval()
    model.set_attn_implementation("eager")
    expected = packaged.diagnose_loaded(
        "direct", "decoder", model, byte_tokenizer(), n_sequences=2, seq_len=16, k=10, ablation_draws=3, seed=0, start=0
    )
    for column in ("sink_mass", "overlap_first", "ablation_change", "directionality", "key_bias"):
        assert rows.loc[0, column] == pytest.approx(expected[column], rel=1e-6), column


def test_an_encoder_and_a_decoder_of_one_pair_are_read_with_their_roles(sink_hub):
    ids = ["org/ettin-encoder-tiny", "org/ettin-decoder-tiny"]
    rows, skipped = hub_models.diagnose_hub(ids, n_sequences=2, seq_len=16, ablation_draws=2)
    assert skipped == []
    assert dict(zip(rows["model"], rows["role"])) == dict(zip(ids, ["encoder", "decoder"]))
    assert rows.set_index("model").loc["org/ettin-encoder-tiny", "sink_positions"] == "[CLS]+[SEP]"


def test_a_branch_without_a_tokenizer_and_with_bin_weights_takes_mains_tokenizer(sink_hub):
    rows, skipped = hub_models.diagnose_hub(["org/pythia-tiny@step100"], n_sequences=2, seq_len=16, ablation_draws=2)
    assert skipped == [] and list(rows["model"]) == ["org/pythia-tiny@step100"]
    asked = [path for _, path, _ in sink_hub.requests if "/resolve/" in path]
    assert any("pytorch_model.bin" in p for p in asked) and not any("step100/tokenizer" in p for p in asked)


def test_a_second_reading_asks_the_hub_nothing(sink_hub):
    first, _ = hub_models.diagnose_hub(["org/pythia-tiny"], n_sequences=2, seq_len=16, ablation_draws=2)
    sink_hub.reset_counters()
    second, _ = hub_models.diagnose_hub(["org/pythia-tiny"], n_sequences=2, seq_len=16, ablation_draws=2)
    assert sink_hub.requests == []
    assert second.drop(columns="seconds").equals(first.drop(columns="seconds"))


def test_what_cannot_be_read_is_named_in_one_line_and_nothing_else_stops(sink_hub):
    ids = ["tiny/bart", "org/missing", "not a hub id", "org/pythia-tiny"]
    rows, skipped = hub_models.diagnose_hub(ids, n_sequences=2, seq_len=16, ablation_draws=2)
    assert list(rows["model"]) == ["org/pythia-tiny"]
    reasons = dict(skipped)
    assert set(reasons) == {"tiny/bart", "org/missing", "not a hub id"}
    assert all(reason and "\n" not in reason for reason in reasons.values())


@pytest.mark.parametrize("model_id,kind", [("tiny/bart", "unsupported architecture"), ("org/missing", "not found")])
def test_an_encoder_decoder_and_a_missing_repository_fail_with_their_kind(sink_hub, model_id, kind):
    with pytest.raises(ExtractionError) as failed:
        hub_models.fetch_for_forward(model_id)
    assert failed.value.kind == kind


def test_a_config_naming_a_class_transformers_does_not_ship_is_refused(sink_hub, tmp_path):
    folder, _ = model_folder(tmp_path, "gpt_neox", seed=2)
    config = json.loads((folder / "config.json").read_text())
    config["architectures"] = ["RemoteCodeForCausalLM"]
    config["auto_map"] = {"AutoModelForCausalLM": "modeling.RemoteCodeForCausalLM"}
    (folder / "config.json").write_text(json.dumps(config))
    sink_hub.add_folder("org/remote-code", folder)
    found = hub_models.fetch_for_forward("org/remote-code")
    with pytest.raises(ExtractionError, match="names no model class transformers ships"):
        hub_models.load_for_forward(found)


def test_weights_that_leave_a_parameter_unfilled_are_refused(sink_hub, tmp_path):
    from safetensors.torch import load_file, save_file

    folder, _ = model_folder(tmp_path, "gpt_neox", seed=3)
    tensors = load_file(folder / "model.safetensors")
    del tensors["gpt_neox.layers.0.attention.query_key_value.weight"]
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    sink_hub.add_folder("org/holed", folder)
    with pytest.raises(ExtractionError, match="leave 1 parameters unfilled"):
        hub_models.load_for_forward(hub_models.fetch_for_forward("org/holed"))


def test_the_paper_profile_reads_ettins_pairs_and_one_pythia_series_by_hub_id():
    from pathlib import Path

    from attnstruct import notebooks
    from attnstruct.analyses import nb10_attention_sinks as nb10
    from attnstruct.checkpoints.hub import parse_hub_id

    ids = notebooks.load_profile(Path(__file__).parents[1], "paper")["10_attention_sinks"]["diagnose_hub"]
    parsed = [parse_hub_id(model_id) for model_id in ids]
    encoders = {repo.replace("encoder", "") for repo, _ in parsed if "ettin-encoder" in repo}
    decoders = {repo.replace("decoder", "") for repo, _ in parsed if "ettin-decoder" in repo}
    assert encoders and encoders == decoders
    frame = pd.DataFrame({"model": ids, "sink_mass": 0.0, "uniform": 0.0, "directionality": 0.0})
    series = nb10.training_series(frame)
    assert set(series["repo"]) == {repo for repo, revision in parsed if revision != "main"}
    assert series["step"].is_monotonic_increasing and len(series) >= 5


def test_a_series_is_the_hub_rows_of_one_repository_at_two_or_more_steps_in_training_order():
    from attnstruct.analyses import nb10_attention_sinks as nb10

    frame = pd.DataFrame(
        {
            "model": ["org/a@step1000", "smollm2-135m", "org/a@step0", "org/b@step5", "org/c", "org/a@step64"],
            "sink_mass": [0.5, 0.4, 0.1, 0.3, 0.2, 0.2],
            "uniform": 0.05,
            "directionality": [-0.3, -0.2, 0.0, -0.1, -0.1, -0.1],
        }
    )
    series = nb10.training_series(frame)
    assert list(series["repo"]) == ["org/a"] * 3 and list(series["step"]) == [0, 64, 1000]
    (facts,) = nb10.series_facts(series)
    assert (facts.first_step, facts.last_step) == ("0", "1,000")
    assert float(facts.correlation) == pytest.approx(np.corrcoef([0.1, 0.2, 0.5], [0.0, -0.1, -0.3])[0, 1], abs=0.01)
