"""CTranslate2 model.bin reader: a tiny Hugging Face Whisper written out as CTranslate2's converter would lay it out.

The writer below follows ``ctranslate2.specs.ModelSpec._serialize`` (binary version 6): variables sorted by name,
then aliases. The Whisper layout follows the converter's ``set_attention``: fused self-attention [q; k; v], cross
attention q alone and fused [k; v], with zero biases filled in for the bias-free key projections.
"""

import json
import math
import struct

import numpy as np
import pytest
import torch
from transformers import WhisperConfig, WhisperModel

from attnstruct.checkpoints.extract.blocks import AttentionBlock, ExtractionError
from attnstruct.checkpoints.extract.ctranslate2_reader import ctranslate2_blocks, ctranslate2_info, read_ctranslate2

N_HEADS, D_MODEL, N_LAYERS = 4, 32, 2
D_HEAD = D_MODEL // N_HEADS
TYPE_IDS = {
    np.dtype(np.float32): 0,
    np.dtype(np.int8): 1,
    np.dtype(np.int16): 2,
    np.dtype(np.int32): 3,
    np.dtype(np.float16): 4,
}
ALIAS = ("decoder/projection/weight", "decoder/embeddings/weight")


# ------------------------------------------------------------------------------------------------ minimal writer


class Bf16:
    """A float32 array to be stored as bfloat16 (its upper 16 bits, i.e. truncated)."""

    def __init__(self, values):
        self.values = np.asarray(values, dtype=np.float32)

    def bits(self) -> np.ndarray:
        return (self.values.view(np.uint32) >> 16).astype("<u2")

    def truncated(self) -> np.ndarray:
        return (self.bits().astype(np.uint32) << 16).view(np.float32)


def _string(text: str) -> bytes:
    raw = text.encode("utf-8") + b"\0"
    return struct.pack("<H", len(raw)) + raw


def _variable(name: str, value) -> bytes:
    if isinstance(value, Bf16):
        shape, dtype_id, data = value.values.shape, 5, value.bits().tobytes()
    else:
        array = np.asarray(value)
        shape, dtype_id = array.shape, TYPE_IDS[array.dtype]
        data = array.astype(array.dtype.newbyteorder("<")).tobytes()
    header = _string(name) + struct.pack("<B", len(shape)) + b"".join(struct.pack("<I", d) for d in shape)
    return header + struct.pack("<BI", dtype_id, len(data)) + data


def write_ct2(
    path, variables: dict, aliases: dict | None = None, spec: str = "WhisperSpec", revision: int = 3, version: int = 6
):
    """Write ``variables`` (name -> numpy array, numpy scalar or :class:`Bf16`) as a CTranslate2 model.bin."""
    aliases = {} if aliases is None else aliases
    parts = [struct.pack("<I", version), _string(spec), struct.pack("<II", revision, len(variables))]
    parts += [_variable(name, variables[name]) for name in sorted(variables)]
    parts.append(struct.pack("<I", len(aliases)))
    parts += [_string(alias) + _string(target) for alias, target in sorted(aliases.items())]
    path.write_bytes(b"".join(parts))
    return path


# ------------------------------------------------------------------------------------------------ Whisper layout


def _fuse(linears, dtype) -> tuple[np.ndarray, np.ndarray]:
    """Row-wise [W_1; W_2; ...] and [b_1; b_2; ...] with zeros for missing biases (ctranslate2 ``fuse_linear``)."""
    weight = torch.cat([lin.weight for lin in linears]).detach().numpy()
    bias = torch.cat([lin.bias if lin.bias is not None else torch.zeros(lin.out_features) for lin in linears])
    return weight.astype(dtype), bias.detach().numpy().astype(dtype)


def _linear(variables: dict, prefix: str, linears, dtype) -> None:
    variables[f"{prefix}/weight"], variables[f"{prefix}/bias"] = _fuse(linears, dtype)


def whisper_variables(model: WhisperModel, dtype=np.float32, num_heads: bool = True) -> dict:
    """The attention variables (plus embeddings and head counts) of CTranslate2's WhisperSpec for ``model``."""
    config = model.config
    variables = {"decoder/embeddings/weight": model.decoder.embed_tokens.weight.detach().numpy().astype(dtype)}
    if num_heads:
        variables["encoder/num_heads"] = np.int16(config.encoder_attention_heads)
        variables["decoder/num_heads"] = np.int16(config.decoder_attention_heads)
    for i, layer in enumerate(model.encoder.layers):
        attn = layer.self_attn
        _linear(variables, f"encoder/layer_{i}/self_attention/linear_0", [attn.q_proj, attn.k_proj, attn.v_proj], dtype)
        _linear(variables, f"encoder/layer_{i}/self_attention/linear_1", [attn.out_proj], dtype)
    for i, layer in enumerate(model.decoder.layers):
        attn, cross = layer.self_attn, layer.encoder_attn
        _linear(variables, f"decoder/layer_{i}/self_attention/linear_0", [attn.q_proj, attn.k_proj, attn.v_proj], dtype)
        _linear(variables, f"decoder/layer_{i}/self_attention/linear_1", [attn.out_proj], dtype)
        _linear(variables, f"decoder/layer_{i}/attention/linear_0", [cross.q_proj], dtype)
        _linear(variables, f"decoder/layer_{i}/attention/linear_1", [cross.k_proj, cross.v_proj], dtype)
        _linear(variables, f"decoder/layer_{i}/attention/linear_2", [cross.out_proj], dtype)
    return variables


@pytest.fixture(scope="module")
def model() -> WhisperModel:
    torch.manual_seed(0)
    config = WhisperConfig(
        d_model=D_MODEL,
        encoder_attention_heads=N_HEADS,
        decoder_attention_heads=N_HEADS,
        encoder_layers=N_LAYERS,
        decoder_layers=N_LAYERS,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        vocab_size=100,
        num_mel_bins=8,
        max_source_positions=16,
        max_target_positions=16,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        decoder_start_token_id=1,
    )
    model = WhisperModel(config).eval()
    with torch.no_grad():  # HF initializes biases to zero; make them nonzero so that they are tested
        for module in model.modules():
            if isinstance(module, torch.nn.Linear) and module.bias is not None:
                module.bias.normal_(0.0, 0.5)
    return model


def _write_model(directory, model, dtype, **kwargs):
    directory.mkdir()
    return write_ct2(directory / "model.bin", whisper_variables(model, dtype, **kwargs), aliases=dict([ALIAS]))


@pytest.fixture(scope="module")
def f32_dir(tmp_path_factory, model):
    directory = tmp_path_factory.mktemp("ct2") / "whisper-f32"
    _write_model(directory, model, np.float32)
    return directory


@pytest.fixture(scope="module")
def f16_dir(tmp_path_factory, model):
    directory = tmp_path_factory.mktemp("ct2") / "whisper-f16"
    _write_model(directory, model, np.float16)
    return directory


def _hf_attention(model, stack: str, layer: int):
    if stack == "encoder":
        return model.encoder.layers[layer].self_attn
    decoder_layer = model.decoder.layers[layer]
    return decoder_layer.self_attn if stack == "decoder" else decoder_layer.encoder_attn


def _heads(t: torch.Tensor) -> torch.Tensor:
    return t.detach().reshape(N_HEADS, D_HEAD, *t.shape[1:])


# ------------------------------------------------------------------------------------------------ weights


def _check_against_hf(blocks: list[AttentionBlock], model, cast) -> None:
    order = [(b.stack, b.layer) for b in blocks]
    assert order == [(s, i) for i in range(N_LAYERS) for s in ("encoder", "decoder", "cross")]
    for block in blocks:
        attn = _hf_attention(model, block.stack, block.layer)
        assert block.w_q.dtype == torch.float32 and block.w_q.shape == (N_HEADS, D_HEAD, D_MODEL)
        assert block.causal == (block.stack == "decoder") and block.n_kv_heads == N_HEADS
        assert block.extras == ("q_bias",)  # Whisper's key bias is exactly zero, so it is not an extra term
        torch.testing.assert_close(block.w_q, cast(_heads(attn.q_proj.weight)), rtol=0, atol=0)
        torch.testing.assert_close(block.w_k, cast(_heads(attn.k_proj.weight)), rtol=0, atol=0)
        torch.testing.assert_close(block.b_q, cast(_heads(attn.q_proj.bias)), rtol=0, atol=0)
        assert block.b_k.shape == (N_HEADS, D_HEAD) and not block.b_k.any()  # Whisper's k_proj has no bias
    names = {(b.stack, b.layer): b.source_name for b in blocks}
    assert names["encoder", 1] == "encoder/layer_1/self_attention/linear_0/weight"
    assert names["decoder", 0] == "decoder/layer_0/self_attention/linear_0/weight"
    assert names["cross", 1] == "decoder/layer_1/attention/linear_0/weight"


def test_float32_weights_equal_hf(model, f32_dir):
    _check_against_hf(list(ctranslate2_blocks(f32_dir)), model, lambda t: t)
    _check_against_hf(list(ctranslate2_blocks(f32_dir / "model.bin")), model, lambda t: t)


def test_float16_weights_equal_hf_rounded(model, f16_dir):
    blocks = list(ctranslate2_blocks(f16_dir))
    _check_against_hf(blocks, model, lambda t: t.half().float())
    w_q = _heads(model.encoder.layers[0].self_attn.q_proj.weight)
    torch.testing.assert_close(blocks[0].w_q, w_q, rtol=1e-3, atol=1e-3)


def test_attention_probabilities_reproduced(model, f32_dir):
    """softmax((x W_q^h^T + b_q)(y W_k^h^T + b_k)^T / sqrt(d_head)) equals the model's own attention maps."""
    model.set_attn_implementation("eager")
    inputs = {}

    def capture(key):
        def hook(module, args, kwargs):
            x = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]
            y = kwargs.get("key_value_states")
            inputs[key] = (x.detach()[0], (x if y is None else y).detach()[0])

        return hook

    handles = [
        _hf_attention(model, s, i).register_forward_pre_hook(capture((s, i)), with_kwargs=True)
        for s in ("encoder", "decoder", "cross")
        for i in range(N_LAYERS)
    ]
    generator = torch.Generator().manual_seed(1)
    features = torch.randn(1, 8, 32, generator=generator)
    decoder_ids = torch.randint(0, 100, (1, 7), generator=generator)
    try:
        with torch.no_grad():
            out = model(input_features=features, decoder_input_ids=decoder_ids, output_attentions=True, use_cache=False)
    finally:
        for handle in handles:
            handle.remove()
    maps = {"encoder": out.encoder_attentions, "decoder": out.decoder_attentions, "cross": out.cross_attentions}
    for block in ctranslate2_blocks(f32_dir):
        x, y = inputs[block.stack, block.layer]
        q = torch.einsum("td,hed->hte", x, block.w_q) + block.b_q[:, None, :]
        k = torch.einsum("td,hed->hte", y, block.w_k) + block.b_k[:, None, :]
        logits = q @ k.transpose(1, 2) / math.sqrt(D_HEAD)
        if block.causal:
            logits = logits.masked_fill(torch.ones_like(logits[0], dtype=torch.bool).triu(1), float("-inf"))
        expected = maps[block.stack][block.layer][0]
        assert expected.shape == logits.shape
        torch.testing.assert_close(torch.softmax(logits, dim=-1), expected, rtol=0, atol=1e-5)


# ------------------------------------------------------------------------------------------------ low-level reading


def test_read_ctranslate2_resolves_alias_and_maps_lazily(model, f32_dir):
    spec, variables = read_ctranslate2(f32_dir / "model.bin")
    assert spec == "WhisperSpec"
    alias, target = ALIAS
    np.testing.assert_array_equal(variables[alias], variables[target])
    np.testing.assert_array_equal(variables[target], model.decoder.embed_tokens.weight.detach().numpy())
    assert variables["encoder/num_heads"].shape == () and variables["encoder/num_heads"].dtype == np.int16
    assert int(variables["decoder/num_heads"]) == N_HEADS
    fused = variables["encoder/layer_0/self_attention/linear_0/weight"]
    assert fused.shape == (3 * D_MODEL, D_MODEL) and isinstance(fused, np.memmap) and not fused.flags.writeable


def test_bfloat16_and_int_dtypes(tmp_path, rng):
    values = rng.standard_normal((5, 3)).astype(np.float32)
    ints = np.arange(-4, 4, dtype=np.int32).reshape(2, 4)
    write_ct2(tmp_path / "model.bin", {"a/bf16": Bf16(values), "b/i32": ints, "c/f16": values.astype(np.float16)})
    _, variables = read_ctranslate2(tmp_path)
    assert variables["a/bf16"].dtype == np.float32
    np.testing.assert_array_equal(variables["a/bf16"], Bf16(values).truncated())
    np.testing.assert_allclose(variables["a/bf16"], values, rtol=2**-7)
    np.testing.assert_array_equal(variables["b/i32"], ints)
    np.testing.assert_array_equal(variables["c/f16"], values.astype(np.float16))


def test_bfloat16_and_int8_weights(tmp_path, model):
    """bf16 weights are widened exactly; int8 weights with a per-row ``weight_scale`` are divided by it."""
    variables = whisper_variables(model)
    for name in [n for n in variables if n.endswith("/weight") and "layer_" in n]:
        variables[name] = Bf16(variables[name])
    write_ct2(tmp_path / "model.bin", variables)
    for block in ctranslate2_blocks(tmp_path):
        w_q = _heads(_hf_attention(model, block.stack, block.layer).q_proj.weight)
        torch.testing.assert_close(block.w_q, torch.from_numpy(Bf16(w_q.numpy()).truncated()), rtol=0, atol=0)

    variables = whisper_variables(model)
    name = "encoder/layer_0/self_attention/linear_0/weight"
    weight = variables[name]
    scale = 127.0 / np.abs(weight).max(axis=1)
    variables[name], variables[f"{name}_scale"] = np.rint(weight * scale[:, None]).astype(np.int8), scale
    write_ct2(tmp_path / "model.bin", variables)
    block = next(ctranslate2_blocks(tmp_path))
    expected = torch.from_numpy(weight[:D_MODEL].reshape(N_HEADS, D_HEAD, D_MODEL))
    torch.testing.assert_close(block.w_q, expected, rtol=0, atol=float(0.5 / scale.min()) + 1e-6)


def test_info(f16_dir):
    info = ctranslate2_info(f16_dir)
    assert {k: info[k] for k in ("spec", "n_encoder_layers", "n_decoder_layers", "n_heads", "d_model", "dtype")} == {
        "spec": "WhisperSpec",
        "n_encoder_layers": N_LAYERS,
        "n_decoder_layers": N_LAYERS,
        "n_heads": N_HEADS,
        "d_model": D_MODEL,
        "dtype": "float16",
    }


def test_head_count_fallbacks(tmp_path, model):
    directory = tmp_path / "no-heads"
    _write_model(directory, model, np.float32, num_heads=False)
    with pytest.raises(ExtractionError, match="pass n_heads"):
        list(ctranslate2_blocks(directory))
    assert ctranslate2_info(directory)["n_heads"] is None
    assert all(b.n_heads == N_HEADS for b in ctranslate2_blocks(directory, n_heads=N_HEADS))
    with pytest.raises(ExtractionError, match="does not split|do not split"):
        list(ctranslate2_blocks(directory, n_heads=5))
    (directory / "config.json").write_text(json.dumps({"encoder_attention_heads": 2, "decoder_attention_heads": 2}))
    assert next(ctranslate2_blocks(directory)).w_q.shape == (2, D_MODEL // 2, D_MODEL)
    with pytest.raises(ExtractionError, match="n_heads=4 given"):
        next(ctranslate2_blocks(directory, n_heads=4))


# ------------------------------------------------------------------------------------------------ errors


def _raises_one_line(path, match: str, call=lambda p: list(ctranslate2_blocks(p))) -> None:
    with pytest.raises(ExtractionError, match=match) as excinfo:
        call(path)
    assert "\n" not in str(excinfo.value)


def test_missing_path(tmp_path):
    _raises_one_line(tmp_path / "absent", "no CTranslate2 model file")
    _raises_one_line(tmp_path, "no CTranslate2 model file")  # a directory without model.bin
    _raises_one_line(tmp_path / "absent", "no CTranslate2 model file", read_ctranslate2)


@pytest.mark.parametrize("keep", [0, 3, 12, -1, -500])
def test_truncated_file(tmp_path, f32_dir, keep):
    data = (f32_dir / "model.bin").read_bytes()
    (tmp_path / "model.bin").write_bytes(data[:keep] if keep >= 0 else data[: len(data) + keep])
    _raises_one_line(tmp_path, "truncated")
    _raises_one_line(tmp_path, "truncated", ctranslate2_info)


def test_wrong_version(tmp_path, model):
    write_ct2(tmp_path / "model.bin", whisper_variables(model), version=5)
    _raises_one_line(tmp_path, "binary version 5")
    (tmp_path / "model.bin").write_bytes(b"GGUF" + bytes(64))
    _raises_one_line(tmp_path, "binary version", read_ctranslate2)


def test_unsupported_spec(tmp_path, model):
    write_ct2(tmp_path / "model.bin", whisper_variables(model), spec="TransformerSpec")
    _raises_one_line(tmp_path, "unsupported architecture: CTranslate2 spec 'TransformerSpec'")
    _raises_one_line(tmp_path, "TransformerSpec", ctranslate2_info)
    assert read_ctranslate2(tmp_path)[0] == "TransformerSpec"  # the low-level reader reads any spec


def test_nan_weight(tmp_path, model):
    variables = whisper_variables(model)
    variables["decoder/layer_1/attention/linear_1/weight"][3, 5] = np.nan
    write_ct2(tmp_path / "model.bin", variables)
    _raises_one_line(tmp_path, r"decoder/layer_1/attention/linear_1/weight \(key rows\) contains NaN or inf")


def test_missing_variable(tmp_path, model):
    variables = whisper_variables(model)
    del variables["decoder/layer_1/attention/linear_1/weight"]
    write_ct2(tmp_path / "model.bin", variables)
    _raises_one_line(tmp_path, "variable decoder/layer_1/attention/linear_1/weight missing")


def test_the_container_reader_is_importable_from_the_whisper_reader(model, tmp_path):
    """The split keeps ``ctranslate2_reader.read_header`` (parameter counts, the zoo) working."""
    from attnstruct.checkpoints.extract import ctranslate2_format, ctranslate2_reader

    assert ctranslate2_reader.read_header is ctranslate2_format.read_header
    assert ctranslate2_reader.read_ctranslate2 is ctranslate2_format.read_ctranslate2
    write_ct2(tmp_path / "model.bin", whisper_variables(model))
    header = ctranslate2_reader.read_header(tmp_path)
    assert header.spec == "WhisperSpec" and header.variables["encoder/num_heads"].shape == ()


def test_a_config_json_that_is_not_an_object_gives_no_head_count(tmp_path, model):
    write_ct2(tmp_path / "model.bin", whisper_variables(model, num_heads=False))
    (tmp_path / "config.json").write_text("[4, 4]")
    _raises_one_line(tmp_path, "no encoder/num_heads .* and no config.json head count")


def test_a_head_count_that_is_not_an_integer_is_refused(tmp_path, model):
    variables = whisper_variables(model)
    variables["encoder/num_heads"] = np.float32(2.5)
    write_ct2(tmp_path / "model.bin", variables)
    _raises_one_line(tmp_path, "encoder/num_heads .* should be an integer scalar")


def test_a_quantized_weight_whose_scales_match_no_row_is_refused(tmp_path, model):
    variables = whisper_variables(model)
    name = "encoder/layer_0/self_attention/linear_0/weight"
    variables[name] = np.ones(variables[name].shape, np.int8)
    variables[f"{name}_scale"] = np.ones(5, np.float32)
    write_ct2(tmp_path / "model.bin", variables)
    _raises_one_line(tmp_path, r"weight_scale .* has shape \[5\]: neither one scale nor one per row")


def test_dims_whose_product_wraps_in_64_bits_do_not_match_their_byte_count(tmp_path):
    name = _string("encoder/layer_0/self_attention/linear_0/weight")
    variable = name + struct.pack("<B4IBI", 4, *(2**16,) * 4, 0, 0)  # 2^64 float32 elements declared as 0 bytes
    raw = struct.pack("<I", 6) + _string("WhisperSpec") + struct.pack("<II", 3, 1) + variable + struct.pack("<I", 0)
    (tmp_path / "model.bin").write_bytes(raw)
    _raises_one_line(tmp_path, "declares 0 bytes, expected 73786976294838206464", read_ctranslate2)


def test_a_layer_numbered_in_the_millions_is_refused_without_memory_for_the_gap(tmp_path, model):
    import tracemalloc

    variables = whisper_variables(model)
    name = "encoder/layer_1/self_attention/linear_0/weight"
    variables[name.replace("layer_1", "layer_3000000")] = variables.pop(name)
    write_ct2(tmp_path / "model.bin", variables)
    tracemalloc.start()
    _raises_one_line(tmp_path, "encoder layers of .* are not numbered 0 to 2: it names layer 3000000")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 20_000_000  # a set of the 3 million numbers up to it would take about 200 MB
