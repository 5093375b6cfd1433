"""GGUF reader: tiny random Hugging Face models written to GGUF the way llama.cpp's converter does, read back."""

import math

import gguf
import numpy as np
import pytest
import torch
import transformers
from gguf import GGMLQuantizationType as QT

from attnstruct.checkpoints.extract import AttentionBlock, ExtractionError
from attnstruct.checkpoints.extract.gguf_reader import SUPPORTED_GGUF_ARCHITECTURES, gguf_blocks, gguf_info

SMALL = dict(hidden_size=32, num_hidden_layers=2, intermediate_size=64, vocab_size=64)
CONFIGS = {
    "llama": lambda: transformers.LlamaConfig(num_attention_heads=4, num_key_value_heads=2, **SMALL),
    "qwen2": lambda: transformers.Qwen2Config(num_attention_heads=4, num_key_value_heads=2, **SMALL),
    "gemma3": lambda: transformers.Gemma3TextConfig(num_attention_heads=4, num_key_value_heads=1, head_dim=16, **SMALL),
}


def converter_permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's ``LlamaModel.permute`` (convert_hf_to_gguf.py): HF row order -> GGUF row order for RoPE."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def tiny_model(arch: str, seed: int = 0) -> transformers.PreTrainedModel:
    """A random causal LM; biases and QK-norm gains are randomized too (their default init is 0)."""
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(CONFIGS[arch]()).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith(("proj.bias", "q_norm.weight", "k_norm.weight")):
                param.normal_(0.0, 0.5)
    return model


def attention(model, layer: int):
    return model.model.layers[layer].self_attn


def quantized(w: np.ndarray, qtype: QT) -> np.ndarray:
    return w if qtype == QT.F32 else gguf.quants.quantize(w, qtype)


def write_gguf(path, model, arch: str | None = None, qtype: QT = QT.F32, skip=(), edit=None):
    """Write the attention tensors (and metadata) of ``model`` as llama.cpp's converter would; return ``path``.

    ``arch`` overrides ``general.architecture`` (the tensors stay those of ``model``); ``skip`` drops tensor names;
    ``edit(name, array)`` may change an F32 array before it is written.
    """
    config = model.config
    source_arch = {"LlamaConfig": "llama", "Qwen2Config": "qwen2", "Gemma3TextConfig": "gemma3"}[type(config).__name__]
    arch = arch or source_arch
    n_head, n_kv = config.num_attention_heads, config.num_key_value_heads
    d_head = getattr(config, "head_dim", None) or config.hidden_size // n_head
    writer = gguf.GGUFWriter(path, arch)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_embedding_length(config.hidden_size)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_kv)
    writer.add_key_length(d_head)
    for i in range(config.num_hidden_layers):
        attn = attention(model, i)
        tensors = {
            f"blk.{i}.attn_q.weight": (attn.q_proj.weight, n_head),
            f"blk.{i}.attn_k.weight": (attn.k_proj.weight, n_kv),
            f"blk.{i}.attn_v.weight": (attn.v_proj.weight, None),
        }
        if attn.q_proj.bias is not None:
            tensors |= {
                f"blk.{i}.attn_q.bias": (attn.q_proj.bias, n_head),
                f"blk.{i}.attn_k.bias": (attn.k_proj.bias, n_kv),
            }
        if hasattr(attn, "q_norm"):
            tensors |= {
                f"blk.{i}.attn_q_norm.weight": (attn.q_norm.weight + 1.0, None),
                f"blk.{i}.attn_k_norm.weight": (attn.k_norm.weight + 1.0, None),
            }
        for name, (value, heads) in tensors.items():
            w = value.detach().numpy().astype(np.float32)
            if source_arch == "llama" and heads is not None:
                w = converter_permute(w, heads)
            if edit is not None:
                w = edit(name, w)
            if name in skip:
                continue
            if w.ndim == 2 and name.endswith(("attn_q.weight", "attn_k.weight")) and qtype != QT.F32:
                writer.add_tensor(name, quantized(w, qtype), raw_dtype=qtype)
            else:
                writer.add_tensor(name, w)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def hf_heads(model, layer: int):
    """The model's own per-head weights: ``[n_heads, d_head, d_model]`` and ``[n_kv, d_head, d_model]``."""
    attn, config = attention(model, layer), model.config
    d_head = attn.head_dim
    w_q = attn.q_proj.weight.detach().view(config.num_attention_heads, d_head, config.hidden_size)
    w_k = attn.k_proj.weight.detach().view(config.num_key_value_heads, d_head, config.hidden_size)
    return w_q, w_k


@pytest.fixture(scope="module")
def models():
    return {arch: tiny_model(arch) for arch in CONFIGS}


def test_gguf_round_trip_reverses_shapes(tmp_path):
    w = np.arange(12 * 32, dtype=np.float32).reshape(12, 32)
    writer = gguf.GGUFWriter(tmp_path / "shape.gguf", "llama")
    writer.add_tensor("t", w)
    writer.add_tensor("t8", gguf.quants.quantize(w, QT.Q8_0), raw_dtype=QT.Q8_0)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    tensors = {t.name: t for t in gguf.GGUFReader(tmp_path / "shape.gguf").tensors}
    assert list(tensors["t"].shape) == [32, 12]
    assert tensors["t"].data.shape == (12, 32)
    np.testing.assert_array_equal(tensors["t"].data, w)
    assert gguf.quants.dequantize(tensors["t8"].data, QT.Q8_0).shape == (12, 32)


@pytest.mark.parametrize("arch", list(CONFIGS))
def test_info_matches_config(tmp_path, models, arch):
    config = models[arch].config
    info = gguf_info(write_gguf(tmp_path / f"{arch}.gguf", models[arch]))
    assert info["architecture"] == arch
    assert (info["n_layers"], info["n_heads"], info["n_kv_heads"], info["d_model"], info["d_head"]) == (
        2,
        config.num_attention_heads,
        config.num_key_value_heads,
        32,
        attention(models[arch], 0).head_dim,
    )
    assert info["q_type"] == "F32"
    assert info["rope_permuted"] == (arch == "llama")


@pytest.mark.parametrize("arch", list(CONFIGS))
def test_blocks_equal_hf_weights_with_gqa_pairing(tmp_path, models, arch):
    model = models[arch]
    blocks = list(gguf_blocks(write_gguf(tmp_path / f"{arch}.gguf", model)))
    n_heads, n_kv = model.config.num_attention_heads, model.config.num_key_value_heads
    group = n_heads // n_kv
    assert [b.layer for b in blocks] == [0, 1]
    for block in blocks:
        assert isinstance(block, AttentionBlock)
        assert (block.stack, block.causal, block.n_kv_heads) == ("decoder", True, n_kv)
        assert block.source_name == f"blk.{block.layer}.attn_q.weight"
        w_q, w_k = hf_heads(model, block.layer)
        assert block.w_q.dtype == torch.float32 and block.w_q.shape == w_q.shape
        assert torch.equal(block.w_q, w_q)
        assert torch.equal(block.w_k, torch.stack([w_k[h // group] for h in range(n_heads)]))
        if n_kv > 1:
            assert not torch.allclose(block.w_k, torch.stack([w_k[h % n_kv] for h in range(n_heads)]))
        attn = attention(model, block.layer)
        if arch == "qwen2":
            assert block.extras == ("rotary", "q_bias", "k_bias")
            assert torch.equal(block.b_q, attn.q_proj.bias.detach().view(n_heads, -1))
            b_k = attn.k_proj.bias.detach().view(n_kv, -1)
            assert torch.equal(block.b_k, torch.stack([b_k[h // group] for h in range(n_heads)]))
        else:
            assert block.b_q is None and block.b_k is None
            assert block.extras == (("rotary", "qk_norm") if arch == "gemma3" else ("rotary",))


def test_zero_biases_are_read_but_not_listed_as_extra_terms(tmp_path):
    model = tiny_model("qwen2")
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.q_proj.bias.zero_()
            layer.self_attn.k_proj.bias.zero_()
    block = next(gguf_blocks(write_gguf(tmp_path / "zero.gguf", model)))
    assert block.b_q.shape == block.b_k.shape == (4, 8)
    assert not block.b_q.any() and block.extras == ("rotary",)


def test_llama_rows_are_permuted_in_file(tmp_path, models):
    """The file really holds llama.cpp's row order, so reading it unchanged would not give q_proj."""
    path = write_gguf(tmp_path / "llama.gguf", models["llama"])
    raw = {t.name: t.data for t in gguf.GGUFReader(path).tensors}
    w_q, w_k = hf_heads(models["llama"], 0)
    assert not np.allclose(raw["blk.0.attn_q.weight"], w_q.reshape(-1, 32).numpy())
    assert not np.allclose(raw["blk.0.attn_k.weight"], w_k.reshape(-1, 32).numpy())


def max_error(w: np.ndarray, qtype: QT) -> float:
    """Worst-case rounding error of ``qtype`` for values like ``w``, with 5% slack.

    Half a step for Q8_0 (step amax/127) and Q4_1 (step (max - min)/15). One step for Q5_0 (step amax/16): its
    levels run from -16 to 15 steps, so a value opposite in sign to the block's extreme is clipped by a full step.
    """
    amax, spread = float(np.abs(w).max()), float(w.max() - w.min())
    bound = {QT.Q8_0: amax / 127 / 2, QT.Q5_0: amax / 16, QT.Q4_1: spread / 15 / 2}[qtype]
    return 1.05 * bound


@pytest.mark.parametrize("qtype", [QT.Q8_0, QT.Q5_0, QT.Q4_1])
@pytest.mark.parametrize("arch", ["llama", "gemma3"])
def test_quantized_weights_are_close(tmp_path, models, arch, qtype):
    """Elementwise error within :func:`max_error`; relative Frobenius error < 1% (Q8_0) or < 12% (4/5-bit)."""
    model = models[arch]
    info = gguf_info(write_gguf(tmp_path / "q.gguf", model, qtype=qtype))
    assert info["q_type"] == info["k_type"] == qtype.name
    n_heads, n_kv = model.config.num_attention_heads, model.config.num_key_value_heads
    for block in gguf_blocks(tmp_path / "q.gguf"):
        w_q, w_k = hf_heads(model, block.layer)
        w_k = w_k.repeat_interleave(n_heads // n_kv, dim=0)
        for got, want in ((block.w_q, w_q), (block.w_k, w_k)):
            assert got.shape == want.shape and got.dtype == torch.float32
            assert (got - want).abs().max() <= max_error(want.numpy(), qtype)
            relative = float((got - want).norm() / want.norm())
            assert 0 < relative < (0.01 if qtype == QT.Q8_0 else 0.12)


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_weights_reproduce_model_attention(tmp_path, arch):
    """With all position ids 0 (rotary = identity) the read weights give layer 0's attention probabilities."""
    model = tiny_model(arch, seed=1)
    model.set_attn_implementation("eager")
    block = next(gguf_blocks(write_gguf(tmp_path / f"{arch}.gguf", model)))
    captured = {}

    def hook(module, args, kwargs):
        captured["x"] = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]

    handle = attention(model, 0).register_forward_pre_hook(hook, with_kwargs=True)
    ids = torch.randint(0, model.config.vocab_size, (2, 7), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        out = model(ids, position_ids=torch.zeros_like(ids), output_attentions=True)
    handle.remove()
    x = captured["x"]
    q = torch.einsum("hed,btd->bhte", block.w_q, x)
    k = torch.einsum("hed,btd->bhte", block.w_k, x)
    if block.b_q is not None:
        q, k = q + block.b_q[None, :, None], k + block.b_k[None, :, None]
    logits = q @ k.transpose(-1, -2) / math.sqrt(block.w_q.shape[1])
    future = torch.ones(7, 7, dtype=torch.bool).triu(1)
    probs = logits.masked_fill(future, float("-inf")).softmax(-1)
    assert out.attentions[0].shape == probs.shape
    torch.testing.assert_close(probs, out.attentions[0], atol=1e-5, rtol=0)


def assert_one_line_error(excinfo, *fragments):
    message = str(excinfo.value)
    assert message and "\n" not in message
    for fragment in fragments:
        assert fragment in message


def test_missing_file(tmp_path):
    with pytest.raises(ExtractionError) as excinfo:
        gguf_info(tmp_path / "absent.gguf")
    assert_one_line_error(excinfo, "not found")
    with pytest.raises(ExtractionError):
        gguf_blocks(tmp_path / "absent.gguf")


@pytest.mark.parametrize("keep", [0, 10, 100, 0.5, -100])
def test_truncated_file(tmp_path, models, keep):
    path = write_gguf(tmp_path / "full.gguf", models["llama"])
    data = path.read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(data[: int(len(data) * keep) if isinstance(keep, float) else keep])
    for read in (gguf_info, lambda p: list(gguf_blocks(p))):
        with pytest.raises(ExtractionError) as excinfo:
            read(cut)
        assert_one_line_error(excinfo, "cut.gguf")


def test_not_gguf(tmp_path):
    path = tmp_path / "model.gguf"
    path.write_text("this is not a GGUF file\n" * 20)
    with pytest.raises(ExtractionError) as excinfo:
        list(gguf_blocks(path))
    assert_one_line_error(excinfo, "not a readable GGUF file")


def test_unsupported_architecture(tmp_path, models):
    path = write_gguf(tmp_path / "bert.gguf", models["llama"], arch="bert")
    for read in (gguf_info, lambda p: list(gguf_blocks(p))):
        with pytest.raises(ExtractionError) as excinfo:
            read(path)
        assert_one_line_error(excinfo, "'bert'", *SUPPORTED_GGUF_ARCHITECTURES)


def test_missing_tensor(tmp_path, models):
    path = write_gguf(tmp_path / "m.gguf", models["qwen2"], skip={"blk.1.attn_k.weight"})
    blocks = gguf_blocks(path)
    assert next(blocks).layer == 0
    with pytest.raises(ExtractionError) as excinfo:
        next(blocks)
    assert_one_line_error(excinfo, "blk.1.attn_k.weight", "missing")


def test_nan_in_query_weight_is_found_when_its_layer_is_read(tmp_path, models):
    def poison(name, w):
        if name == "blk.1.attn_q.weight":
            w = w.copy()
            w[3, 5] = np.nan
        return w

    path = write_gguf(tmp_path / "nan.gguf", models["llama"], edit=poison)
    blocks = gguf_blocks(path)
    assert next(blocks).layer == 0
    with pytest.raises(ExtractionError) as excinfo:
        next(blocks)
    assert_one_line_error(excinfo, "blk.1.attn_q.weight", "NaN")


def test_inconsistent_shape(tmp_path, models):
    path = write_gguf(tmp_path / "s.gguf", models["llama"], edit=lambda n, w: w[:-1] if "attn_k.weight" in n else w)
    with pytest.raises(ExtractionError) as excinfo:
        next(gguf_blocks(path))
    assert_one_line_error(excinfo, "blk.0.attn_k.weight", "shape")
