"""Extraction proven against each family's own attention, in memory and from checkpoints on disk."""

from __future__ import annotations

import json

import pytest
import torch
import transformers as T
from extract_models import CASES, LAYERS, SEQ, VOCAB, D, H, build, text

from attnstruct.analyses.nb03_pretrained_models import authors_gqa_pairing
from attnstruct.checkpoints.extract import AttentionBlock, ExtractionError, hf, iter_blocks
from attnstruct.training.model import LanguageModel, attention_layers, attention_scale
from attnstruct.training.model_config import TransformerConfig


def capture_attention_inputs(model, blocks: list[AttentionBlock]):
    """Forward pre-hooks on each block's attention module: ``{(stack, layer): (queries_in, keys_in)}``."""
    captured, handles = {}, []
    for block in blocks:
        q_module = block.source_name.removesuffix(".weight")
        attention = model.get_submodule(q_module.rsplit(".", 1)[0])

        def hook(module, args, kwargs, key=(block.stack, block.layer)):
            if key in captured:  # ALBERT calls its shared layer again
                return
            x = kwargs.get("hidden_states", args[0] if args else None)
            y = kwargs.get("key_value_states")
            if y is None and block.stack == "cross":
                y = args[1] if len(args) > 1 else kwargs.get("key")
            captured[key] = (x, x if y is None else y)

        handles.append(attention.register_forward_pre_hook(hook, with_kwargs=True))
    return captured, handles


def model_attentions(out, stack: str, layer: int) -> torch.Tensor:
    if getattr(out, "module_attentions", None) is not None:
        return out.module_attentions[layer]
    if getattr(out, "vision_model_output", None) is not None:  # CLIP: only its vision tower is read
        return out.vision_model_output.attentions[layer]
    if stack == "cross":
        return out.cross_attentions[layer]
    if getattr(out, "decoder_attentions", None) is not None:
        return (out.encoder_attentions if stack == "encoder" else out.decoder_attentions)[layer]
    return out.attentions[layer]


def apply_norm(norm: torch.nn.Module, t: torch.Tensor) -> torch.Tensor:
    """A model's QK-norm on per-head projections ``[B, H, N, e]``: per head when its weight is ``[e]`` (Gemma-3),
    else over the whole projection of the distinct heads before the head split (OLMo-2: ``[H e]`` queries,
    ``[n_kv e]`` keys). Key heads arrive expanded (query head ``h`` has key head ``h // (H / n_kv)``), so the
    distinct ones are every ``H / n_kv``-th; the normalised keys are expanded again the same way."""
    batch, heads, length, width = t.shape
    size = norm.weight.numel()
    with torch.no_grad():
        if size == width:
            return norm.double()(t)
        groups = size // width
        distinct = t[:, :: heads // groups].transpose(1, 2).reshape(batch, length, size)
        normed = norm.double()(distinct).view(batch, length, groups, width).transpose(1, 2)
    return normed.repeat_interleave(heads // groups, dim=1)


def projections(block: AttentionBlock, x, y) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-head queries ``[B, H, N, d_head]`` and keys ``[B, H, M, d_head]`` from the extracted weights and biases."""
    q = torch.einsum("hed,bnd->bhne", block.w_q.double(), x.double())
    k = torch.einsum("hed,bmd->bhme", block.w_k.double(), y.double())
    if block.b_q is not None:
        q = q + block.b_q.double()[None, :, None, :]
    if block.b_k is not None:
        k = k + block.b_k.double()[None, :, None, :]
    return q, k


def our_logits(block: AttentionBlock, x, y, model=None, qk_norm=False):
    """Unscaled logits ``[B, H, N, M]`` from the extracted weights (plus biases, plus QK-norm when asked)."""
    q, k = projections(block, x, y)
    if qk_norm:
        attention = model.get_submodule(block.source_name.removesuffix(".weight").rsplit(".", 1)[0])
        q, k = apply_norm(attention.q_norm, q), apply_norm(attention.k_norm, k)
    return q @ k.transpose(-1, -2)


def fit_residual(logits: torch.Tensor, probs: torch.Tensor) -> tuple[float, float]:
    """Fit ``log probs = s * logits + row constant`` on the attended entries; return ``(s, max residual)``.

    Every scaled dot-product attention is ``softmax(s * logits + mask)``; the scale differs between families,
    so it is fitted, and the check is that one ``s`` explains every head and row to rounding.
    """
    probs = probs.double()
    valid = probs > 1e-12
    log_p = torch.where(valid, probs.clamp_min(1e-300).log(), 0.0)
    count = valid.sum(-1, keepdim=True)
    centre = lambda t: torch.where(valid, t - (torch.where(valid, t, 0.0).sum(-1, keepdim=True) / count), 0.0)  # noqa: E731
    a, b = centre(log_p), centre(logits.double())
    s = float((a * b).sum() / (b * b).sum())
    return s, float((a - s * b).abs().max())


def extracted(model):
    return list(hf.hf_blocks(hf.ModuleSource(model)))


def run(model, name, blocks=None):
    """The model's output on its case's inputs; with ``probs_from_modules``, ``module_attentions`` added: the
    probabilities each block's attention module returned (in ``blocks``' order)."""
    case = CASES[name]
    inputs = case.inputs()
    if case.rotary:
        first = next(iter(inputs.values()))
        inputs["position_ids"] = torch.zeros(first.shape[:2], dtype=torch.long)
    probs, handles = [], []
    for block in blocks if case.probs_from_modules else ():
        attention = model.get_submodule(block.source_name.removesuffix(".weight").rsplit(".", 1)[0])
        handles.append(attention.register_forward_hook(lambda module, args, output: probs.append(output[1])))
    with torch.no_grad():
        out = model(**inputs, output_attentions=True)
    for handle in handles:
        handle.remove()
    if case.probs_from_modules:
        out.module_attentions = probs
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_extraction_reproduces_the_models_attention(name):
    model = build(name)
    blocks = extracted(model)
    captured, handles = capture_attention_inputs(model, blocks)
    out = run(model, name, blocks)
    for handle in handles:
        handle.remove()
    stacks = {b.stack for b in blocks}
    expected_stacks = {"t5": 3, "bart": 3, "whisper": 3}.get(name, 1)
    assert len(stacks) == expected_stacks
    for block in blocks:
        x, y = captured[(block.stack, block.layer)]
        logits = our_logits(block, x, y, model, qk_norm=CASES[name].qk_norm)
        probs = model_attentions(out, block.stack, block.layer)
        assert probs.shape == logits.shape, (block.stack, block.layer)
        if block.causal:
            assert bool((probs[..., 0, 1:] == 0).all()), "a causal block must not attend ahead"
        scale, residual = fit_residual(logits, probs)
        assert scale > 0 and residual < 1e-4, f"{name} {block.stack} layer {block.layer}: residual {residual:.2e}"


@pytest.mark.parametrize("name", ["llama", "mistral", "qwen2", "olmo", "olmo2", "phi3"])
def test_grouped_query_pairing(name):
    """Query head h uses key head h // (H / n_kv); the pairing h mod n_kv must fail the attention check.

    (Gemma-3's single key head, multi-query attention, cannot tell the two pairings apart.)
    """
    model = build(name)
    blocks = extracted(model)
    assert all(b.n_kv_heads < b.n_heads for b in blocks)
    captured, handles = capture_attention_inputs(model, blocks)
    out = run(model, name)
    for handle in handles:
        handle.remove()
    block = blocks[0]
    wrong = authors_gqa_pairing(block)
    assert not torch.equal(wrong.w_k, block.w_k)
    x, y = captured[(block.stack, block.layer)]
    probs = model_attentions(out, block.stack, block.layer)
    _, right = fit_residual(our_logits(block, x, y, model, CASES[name].qk_norm), probs)
    _, bad = fit_residual(our_logits(wrong, x, y, model, CASES[name].qk_norm), probs)
    assert right < 1e-4 and bad > 1e-2


@pytest.mark.parametrize("name", sorted(CASES))
def test_disk_reader_equals_in_memory(name, tmp_path):
    model = build(name)
    model.save_pretrained(tmp_path)
    memory = extracted(model)
    disk = list(hf.hf_blocks(hf.SafetensorsSource(tmp_path)))
    assert [(b.stack, b.layer) for b in disk] == [(b.stack, b.layer) for b in memory]
    for a, b in zip(memory, disk, strict=True):
        assert torch.equal(a.w_q, b.w_q) and torch.equal(a.w_k, b.w_k)
        for x, y in ((a.b_q, b.b_q), (a.b_k, b.b_k)):
            assert (x is None and y is None) or torch.equal(x, y)
        assert a.extras == b.extras and a.causal == b.causal and a.n_kv_heads == b.n_kv_heads


@pytest.mark.parametrize("name", ["llama", "modernbert-decoder", "olmo2"])
def test_torch_bin_and_sharded_safetensors(name, tmp_path):
    model = build(name)
    memory = extracted(model)
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    (tmp_path / "bin").mkdir()
    model.config.save_pretrained(tmp_path / "bin")
    torch.save(state, tmp_path / "bin" / "pytorch_model.bin")
    model.save_pretrained(tmp_path / "sharded", max_shard_size="20KB")
    assert (tmp_path / "sharded" / "model.safetensors.index.json").is_file()
    for source in (hf.TorchBinSource(tmp_path / "bin"), hf.SafetensorsSource(tmp_path / "sharded")):
        for a, b in zip(memory, hf.hf_blocks(source), strict=True):
            assert torch.equal(a.w_q, b.w_q) and torch.equal(a.w_k, b.w_k)
            assert a.extras == b.extras and a.source_name == b.source_name
    for a, b in zip(memory, iter_blocks(tmp_path / "bin"), strict=True):
        assert torch.equal(a.w_q, b.w_q) and torch.equal(a.w_k, b.w_k) and a.extras == b.extras


@pytest.mark.parametrize(
    ("name", "with_head", "query"),
    [
        ("modernbert", T.ModernBertForMaskedLM, "model.layers.{}.attn.Wqkv.weight"),
        ("modernbert-decoder", T.ModernBertDecoderForCausalLM, "model.layers.{}.attn.q_proj.weight"),
    ],
)
def test_ettin_checkpoints(name, with_head, query, tmp_path):
    """Ettin's encoders and decoders as the hub keeps them, with their heads (names start ``model.``): the encoder's
    fused ``Wqkv`` ``[3 H d_head, d_model]`` and the decoder's ``q_proj``/``k_proj`` ``[H d_head, d_model]`` are
    found in memory and on disk, in global and sliding-window layers alike, and give the model's own weights."""
    torch.manual_seed(0)
    config = CASES[name].config()
    assert config.layer_types == ["full_attention", "sliding_attention", "sliding_attention", "full_attention"]
    model = with_head(config).eval()
    model.set_attn_implementation("eager")
    model.save_pretrained(tmp_path)
    names = [query.format(layer) for layer in range(config.num_hidden_layers)]
    for blocks in (extracted(model), list(iter_blocks(tmp_path))):
        assert [b.source_name for b in blocks] == names
        assert all(b.stack == ("decoder" if b.causal else "encoder") and "rotary" in b.extras for b in blocks)
        assert [b.causal for b in blocks] == [name == "modernbert-decoder"] * config.num_hidden_layers
        for layer, block in zip(model.model.layers, blocks, strict=True):
            if name == "modernbert":
                w_q, w_k = layer.attn.Wqkv.weight[:D], layer.attn.Wqkv.weight[D : 2 * D]
            else:
                w_q, w_k = layer.attn.q_proj.weight, layer.attn.k_proj.weight
            assert torch.equal(block.w_q, w_q.detach().view(H, D // H, D))
            assert torch.equal(block.w_k, w_k.detach().view(H, D // H, D))
    inputs = text()
    with torch.no_grad():
        out = model.model(**inputs, position_ids=torch.zeros_like(inputs["input_ids"]), output_attentions=True)
    allowed = (torch.ones(SEQ, SEQ).tril() if name == "modernbert-decoder" else torch.ones(SEQ, SEQ)).bool()
    for kind, probs in zip(config.layer_types, out.attentions, strict=True):
        masked_in_window = bool((probs[..., allowed] == 0).any())
        assert masked_in_window == (kind == "sliding_attention"), "the local layers of the proof must mask tokens"


def test_olmo2_qk_norm_is_flagged_and_needed(tmp_path):
    """OLMo-2 normalises the whole query and key projections (``q_norm`` ``[H d_head]``, ``k_norm``
    ``[n_kv d_head]``, not per head): its blocks carry ``qk_norm`` in memory and on disk, OLMo's do not, and the
    model's attention is reproduced with its norm applied to the extracted projections, not without."""
    model = build("olmo2")
    model.save_pretrained(tmp_path)
    blocks = extracted(model)
    assert all("qk_norm" in b.extras for b in blocks) and all("qk_norm" in b.extras for b in iter_blocks(tmp_path))
    assert not any("qk_norm" in b.extras for b in extracted(build("olmo")))
    attention = model.layers[0].self_attn
    assert attention.q_norm.weight.numel() == D and attention.k_norm.weight.numel() == blocks[0].n_kv_heads * (D // H)
    captured, handles = capture_attention_inputs(model, blocks)
    out = run(model, "olmo2")
    for handle in handles:
        handle.remove()
    for block in blocks:
        x, y = captured[(block.stack, block.layer)]
        probs = model_attentions(out, block.stack, block.layer)
        _, normed = fit_residual(our_logits(block, x, y, model, qk_norm=True), probs)
        _, plain = fit_residual(our_logits(block, x, y), probs)
        assert normed < 1e-4 and plain > 1e-2, (block.layer, normed, plain)


def test_gpt_neox_partial_rotary():
    """Pythia rotates the first ``rotary_pct`` of each head's dimensions and passes the rest through: with real
    positions, the extracted heads rotated by the model's own ``apply_rotary_pos_emb`` (which leaves the last
    three quarters of each head as they are) reproduce its attention, and unrotated they do not."""
    from transformers.models.gpt_neox.modeling_gpt_neox import apply_rotary_pos_emb

    model = build("gpt_neox")
    blocks = extracted(model)
    rotations, handles = {}, []
    for block, layer in zip(blocks, model.layers, strict=True):

        def hook(module, args, kwargs, key=block.layer):
            rotations[key] = (kwargs.get("hidden_states", args[0] if args else None), kwargs["position_embeddings"])

        handles.append(layer.attention.register_forward_pre_hook(hook, with_kwargs=True))
    with torch.no_grad():
        out = model(**text(), output_attentions=True)
    for handle in handles:
        handle.remove()
    for block in blocks:
        x, (cos, sin) = rotations[block.layer]
        assert cos.shape[-1] == D // H // 4 and cos.shape[-2] == SEQ
        q, k = projections(block, x, x)
        q_rot, k_rot = apply_rotary_pos_emb(q, k, cos.double(), sin.double())
        assert torch.equal(q_rot[..., cos.shape[-1] :], q[..., cos.shape[-1] :])
        probs = out.attentions[block.layer]
        _, rotated = fit_residual(q_rot @ k_rot.transpose(-1, -2), probs)
        _, plain = fit_residual(q @ k.transpose(-1, -2), probs)
        assert rotated < 1e-4 and plain > 1e-2, (block.layer, rotated, plain)


def test_swin_blocks_by_stage_with_their_relative_position_bias_and_windows(tmp_path):
    """Swin's (stage, block) pairs are layers 0..3, each with its stage's heads and width, in memory and on disk
    (transformers 4.x names ``attention.self.query``), and carry ``relative_position`` and ``windows``: with a random
    relative position bias table the model's attention is its bias added to the extracted logits, and not the logits
    alone; the shifted block's windows mask pairs that the others do not."""
    model = build("swin")
    with torch.no_grad():
        for stage in model.encoder.layers:
            for block in stage.blocks:
                block.attention.relative_position_bias.relative_position_bias_table.normal_(0, 1)
    model.save_pretrained(tmp_path)
    for blocks in (extracted(model), list(iter_blocks(tmp_path))):
        assert [(b.layer, b.n_heads, b.w_q.shape[-1]) for b in blocks] == [
            (0, 2, 16),
            (1, 2, 16),
            (2, 4, 32),
            (3, 4, 32),
        ]
        assert all(b.extras[:2] == ("relative_position", "windows") for b in blocks)
    blocks = extracted(model)
    captured, handles = capture_attention_inputs(model, blocks)
    out = run(model, "swin", blocks)
    for handle in handles:
        handle.remove()
    attentions = [block.attention for stage in model.encoder.layers for block in stage.blocks]
    for block, attention, probs in zip(blocks, attentions, out.module_attentions, strict=True):
        x, y = captured[(block.stack, block.layer)]
        logits = our_logits(block, x, y)
        bias = attention.relative_position_bias().double() / attention.scaling
        _, with_bias = fit_residual(logits + bias, probs)
        _, without = fit_residual(logits, probs)
        assert with_bias < 1e-4 and without > 1e-2, (block.layer, with_bias, without)
    masked = [bool((probs < 1e-12).any()) for probs in out.module_attentions]
    assert masked == [False, True, False, False]


@pytest.mark.parametrize("name", ["clip", "clip_vision_model"])
def test_clip_reads_the_vision_tower_alone(name, tmp_path):
    """CLIP's vision tower (``clip_vision_model``, or the vision half of ``clip``, its head count in
    ``vision_config``) gives one encoder block per layer with the tower's own weights, in memory and on disk; the text
    tower of ``clip`` is not read."""
    model = build(name)
    model.save_pretrained(tmp_path)
    tower = model.vision_model if name == "clip" else model
    for blocks in (extracted(model), list(iter_blocks(tmp_path))):
        assert [(b.stack, b.layer, b.causal) for b in blocks] == [("encoder", i, False) for i in range(LAYERS)]
        for block, layer in zip(blocks, tower.encoder.layers, strict=True):
            assert torch.equal(block.w_q, layer.self_attn.q_proj.weight.detach().view(H, D // H, D))
            assert torch.equal(block.w_k, layer.self_attn.k_proj.weight.detach().view(H, D // H, D))


@pytest.mark.parametrize("causal", [False, True])
def test_attnstruct_snapshot(causal, tmp_path):
    """A snapshot of the project's Transformer, ``config.json`` (``model_type`` ``attnstruct-encoder`` or
    ``attnstruct-decoder``, ``num_attention_heads``) and ``pytorch_model.bin`` of its ``state_dict``: per head, the
    extracted ``W_q[h] x + b_q[h]`` and ``W_k[h] x + b_k[h]`` give the model's own ``q k^T`` ``[B, H, T, T]``, and
    softmax of those logits times ``1/sqrt(d_head)`` under the stack's mask, applied to the model's values, gives
    the output of its scaled dot-product attention; under the other stack's mask it does not.

    In memory the model cannot be read: its ``.config`` is a ``TransformerConfig`` without a ``model_type``."""
    torch.manual_seed(0)
    config = TransformerConfig(vocab_size=VOCAB, max_len=16, d_model=D, n_layers=LAYERS, n_heads=H, dropout=0.0)
    model = LanguageModel(config).eval()
    with torch.no_grad():
        for pname, param in model.named_parameters():
            if pname.endswith("bias"):
                param.normal_(0, 0.3)
    model_type = "attnstruct-decoder" if causal else "attnstruct-encoder"
    (tmp_path / "config.json").write_text(json.dumps({"model_type": model_type, "num_attention_heads": H}))
    torch.save(model.state_dict(), tmp_path / "pytorch_model.bin")
    blocks = list(iter_blocks(tmp_path))
    stack = "decoder" if causal else "encoder"
    assert [(b.stack, b.layer, b.causal, b.n_kv_heads) for b in blocks] == [
        (stack, i, causal, H) for i in range(LAYERS)
    ]
    assert [b.source_name for b in blocks] == [f"encoder.blocks.{i}.attention.query.weight" for i in range(LAYERS)]
    assert all(set(b.extras) == {"q_bias", "k_bias"} for b in blocks)

    layers = attention_layers(model)
    captured = {}

    def hook(module, args, output):
        captured[layers.index(module)] = (*args, output)

    handles = [layer.register_forward_hook(hook) for layer in layers]
    with torch.no_grad():
        model(torch.randint(0, VOCAB, (2, SEQ)), causal)
    for handle in handles:
        handle.remove()

    def heads(t):
        return t.view(2, SEQ, H, D // H).transpose(1, 2).double()

    def attend(layer, logits, v, mask):
        scores = (logits * attention_scale(config)).masked_fill(~mask, float("-inf"))
        mixed = (torch.softmax(scores, -1) @ v).transpose(1, 2).reshape(2, SEQ, D)
        with torch.no_grad():
            return layer.output(mixed.float())

    causal_mask, full = torch.ones(SEQ, SEQ, dtype=torch.bool).tril(), torch.ones(SEQ, SEQ, dtype=torch.bool)
    own, other = (causal_mask, full) if causal else (full, causal_mask)
    for block, layer in zip(blocks, layers, strict=True):
        x, was_causal, output = captured[block.layer]
        assert was_causal is causal
        with torch.no_grad():
            q, k, v = heads(layer.query(x)), heads(layer.key(x)), heads(layer.value(x))
        logits = our_logits(block, x, x)
        assert (logits - q @ k.transpose(-1, -2)).abs().max() < 1e-5
        assert (attend(layer, logits, v, own) - output).abs().max() < 1e-5
        assert (attend(layer, logits, v, other) - output).abs().max() > 1e-3


def test_reader_errors(tmp_path):
    model = build("bert")
    model.save_pretrained(tmp_path / "ok")
    with pytest.raises(ExtractionError, match="no config.json"):
        hf.SafetensorsSource(tmp_path)
    data = (tmp_path / "ok" / "model.safetensors").read_bytes()
    (tmp_path / "cut").mkdir()
    (tmp_path / "cut" / "config.json").write_text((tmp_path / "ok" / "config.json").read_text())
    (tmp_path / "cut" / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(ExtractionError, match="truncated"):
        list(hf.hf_blocks(hf.SafetensorsSource(tmp_path / "cut")))
    config = model.config.to_dict()
    config["model_type"] = "xlnet"
    unsupported = tmp_path / "xlnet"
    unsupported.mkdir()
    (unsupported / "config.json").write_text(json.dumps(config))
    with pytest.raises(ExtractionError, match="^unsupported architecture: 'xlnet'; supported model types: .*bert"):
        hf.family_of(type("C", (), {"model_type": "xlnet"})())
    with torch.no_grad():
        model.encoder.layer[1].attention.self.key.weight[0, 0] = float("nan")
    with pytest.raises(ExtractionError, match="NaN"):
        extracted(model)


# -- folders that are not what they claim: one ExtractionError, nothing read from outside -------------------------

BERT_CONFIG = {"model_type": "bert", "num_attention_heads": 2, "hidden_size": 8}
QUERY, KEY = "encoder.layer.{}.attention.self.query.{}", "encoder.layer.{}.attention.self.key.{}"


def bert_tensors(layers=(0, 1), **replaced) -> dict[str, torch.Tensor]:
    """Query/key weights of a 2-head, d_model 8 BERT, ``replaced`` by short name (``q0``, ``k1``, ``bq0``)."""
    generator = torch.Generator().manual_seed(0)
    tensors = {}
    for layer in layers:
        tensors[QUERY.format(layer, "weight")] = replaced.get(f"q{layer}", torch.randn(8, 8, generator=generator))
        tensors[KEY.format(layer, "weight")] = replaced.get(f"k{layer}", torch.randn(8, 8, generator=generator))
        if f"bq{layer}" in replaced:
            tensors[QUERY.format(layer, "bias")] = replaced[f"bq{layer}"]
    return {name: tensor.clone() for name, tensor in tensors.items()}


def bert_folder(folder, tensors=None, config=None, fmt="safetensors"):
    """``folder`` with ``config.json`` and the tensors as ``model.safetensors`` or ``pytorch_model.bin``."""
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(BERT_CONFIG if config is None else config))
    tensors = bert_tensors() if tensors is None else tensors
    if fmt == "safetensors":
        save_file(tensors, folder / "model.safetensors")
    else:
        torch.save(tensors, folder / "pytorch_model.bin")
    return folder


def sharded(folder, fmt: str, weight_map) -> type:
    """``folder`` with a shard index of ``fmt`` holding ``weight_map`` (as given: JSON text or an object); the
    source class that reads it."""
    index = "model.safetensors.index.json" if fmt == "safetensors" else "pytorch_model.bin.index.json"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(BERT_CONFIG))
    text = weight_map if isinstance(weight_map, str) else json.dumps(weight_map)
    (folder / index).write_text(text)
    return hf.SafetensorsSource if fmt == "safetensors" else hf.TorchBinSource


FORMATS = ("safetensors", "bin")


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("how", ["absolute", "parent"])
def test_a_shard_index_naming_a_file_outside_the_folder_is_refused(tmp_path, fmt, how):
    other = bert_folder(tmp_path / "other", fmt=fmt)
    shard = other / ("model.safetensors" if fmt == "safetensors" else "pytorch_model.bin")
    name = str(shard) if how == "absolute" else f"../other/{shard.name}"
    source = sharded(tmp_path / "model", fmt, {"weight_map": {QUERY.format(0, "weight"): name}})
    with pytest.raises(ExtractionError, match="relative file name|would leave its folder"):
        source(tmp_path / "model")


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_shard_index_naming_a_link_out_of_the_folder_is_refused(tmp_path, fmt):
    other = bert_folder(tmp_path / "other", fmt=fmt)
    shard = other / ("model.safetensors" if fmt == "safetensors" else "pytorch_model.bin")
    source = sharded(tmp_path / "model", fmt, {"weight_map": {QUERY.format(0, "weight"): "linked"}})
    (tmp_path / "model" / "linked").symlink_to(shard)
    with pytest.raises(ExtractionError, match="would lead out of"):
        source(tmp_path / "model")


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_weight_file_that_links_out_of_a_folder_without_an_index_is_refused(tmp_path, fmt):
    other = bert_folder(tmp_path / "other", fmt=fmt)
    name = "model.safetensors" if fmt == "safetensors" else "pytorch_model.bin"
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(BERT_CONFIG))
    (folder / name).symlink_to(other / name)
    source = hf.SafetensorsSource if fmt == "safetensors" else hf.TorchBinSource
    with pytest.raises(ExtractionError, match="would lead out of"):
        source(folder)


def test_a_tensor_in_two_safetensors_shards_is_refused_naming_both(tmp_path):
    from safetensors.torch import save_file

    folder = bert_folder(tmp_path / "model")
    save_file({QUERY.format(0, "weight"): torch.zeros(8, 8)}, folder / "model-2.safetensors")
    with pytest.raises(ExtractionError, match="is in both model-2.safetensors and model.safetensors"):
        hf.SafetensorsSource(folder)


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_hub_cache_snapshot_is_read_through_its_links_into_blobs(tmp_path, fmt):
    """huggingface_hub's cache: ``snapshots/REV/FILE`` links to ``../../blobs/HASH``, outside the snapshot folder."""
    repo = tmp_path / "models--org--bert"
    blob = bert_folder(repo / "blobs", fmt=fmt) / ("model.safetensors" if fmt == "safetensors" else "pytorch_model.bin")
    snapshot = repo / "snapshots" / ("0" * 40)
    source = sharded(snapshot, fmt, {"weight_map": {QUERY.format(0, "weight"): "shard-1"}})
    (snapshot / "shard-1").symlink_to(f"../../blobs/{blob.name}")
    assert len(list(hf.hf_blocks(source(snapshot)))) == 2


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(
    "weight_map",
    ["{not json", "[1, 2]", {"metadata": {}}, {"weight_map": ["model.safetensors"]}, {"weight_map": {"w": 5}}],
    ids=["not-json", "a-list", "no-weight-map", "weight-map-a-list", "a-number-as-file"],
)
def test_a_malformed_shard_index_is_refused_in_one_line(tmp_path, fmt, weight_map):
    source = sharded(tmp_path, fmt, weight_map)
    with pytest.raises(ExtractionError) as caught:
        source(tmp_path)
    assert "index.json" in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.parametrize("model_type", [["bert"], {"bert": 1}, 7])
def test_a_model_type_that_is_not_a_string_is_an_unsupported_architecture(model_type):
    with pytest.raises(ExtractionError, match="unsupported architecture"):
        hf.family_of(type("C", (), {"model_type": model_type})())


def test_a_boolean_head_count_is_no_head_count(tmp_path):
    folder = bert_folder(tmp_path, config={**BERT_CONFIG, "num_attention_heads": True})
    with pytest.raises(ExtractionError, match="num_attention_heads as a positive integer"):
        list(iter_blocks(folder))


def test_a_layer_number_past_any_models_depth_is_refused(tmp_path):
    folder = bert_folder(tmp_path, bert_tensors(layers=(2**31,)))
    with pytest.raises(ExtractionError, match="names layer 2147483648"):
        list(iter_blocks(folder))


@pytest.mark.parametrize(
    "replaced",
    [
        {"q0": torch.randn(8), "k0": torch.randn(8)},
        {"q0": torch.randn(2, 4, 8), "k0": torch.randn(2, 4, 8)},
        {"q0": torch.zeros(0, 8), "k0": torch.zeros(0, 8)},
        {"q0": torch.zeros(8, 0), "k0": torch.zeros(8, 0)},
        {"k0": torch.randn(8, 4)},
        {"bq0": torch.randn(3)},
    ],
    ids=["1-d", "3-d", "no-rows", "no-columns", "key-narrower", "bias-too-short"],
)
def test_query_and_key_weights_that_are_not_matrices_of_one_width_are_refused(tmp_path, replaced):
    folder = bert_folder(tmp_path, bert_tensors(**replaced))
    with pytest.raises(ExtractionError, match=r"encoder\.layer\.0\.attention\.self\.query\.weight: "):
        list(iter_blocks(folder))


@pytest.mark.parametrize(
    "model_type, name, shape",
    [
        ("gpt2", "h.0.attn.c_attn.weight", (24, 8)),
        ("gpt_neox", "gpt_neox.layers.0.attention.query_key_value.weight", (7, 8)),
        ("phi3", "model.layers.0.self_attn.qkv_proj.weight", (24,)),
    ],
)
def test_a_fused_weight_of_the_wrong_shape_is_refused(tmp_path, model_type, name, shape):
    config = {"model_type": model_type, "num_attention_heads": 2, "n_head": 2}
    folder = bert_folder(tmp_path, {name: torch.randn(*shape)}, config)
    with pytest.raises(ExtractionError, match="fused"):
        list(iter_blocks(folder))


@pytest.mark.parametrize("layout", ["zip", "legacy"])
def test_a_bin_whose_stride_0_view_claims_more_than_its_storage_is_refused(tmp_path, layout):
    """A kilobyte file whose query weight is one value expanded to 16384 x 16384 (a gigabyte as float32)."""
    expanded = torch.randn(1, 1).expand(2**14, 2**14)
    folder = bert_folder(tmp_path, {**bert_tensors(), QUERY.format(0, "weight"): expanded}, fmt="bin")
    if layout == "legacy":  # the same state dict in the format of torch before 1.6, read whole by torch.load
        state = torch.load(folder / "pytorch_model.bin", weights_only=True)
        torch.save(state, folder / "pytorch_model.bin", _use_new_zipfile_serialization=False)
    assert (folder / "pytorch_model.bin").stat().st_size < 10_000
    with pytest.raises(ExtractionError, match="more than its storage's 1"):
        hf.TorchBinSource(folder)
