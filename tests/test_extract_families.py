"""Extraction proven against each family's own attention, in memory and from checkpoints on disk."""

from __future__ import annotations

import pytest
import torch
from extract_models import CASES, build

from attnstruct.analyses.extraction_checks import authors_gqa_pairing
from attnstruct.checkpoints.extract import AttentionBlock, ExtractionError, hf


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
    if stack == "cross":
        return out.cross_attentions[layer]
    if getattr(out, "decoder_attentions", None) is not None:
        return (out.encoder_attentions if stack == "encoder" else out.decoder_attentions)[layer]
    return out.attentions[layer]


def our_logits(block: AttentionBlock, x, y, model=None, qk_norm=False):
    """Unscaled logits ``[B, H, N, M]`` from the extracted weights (plus biases, plus QK-norm when asked)."""
    q = torch.einsum("hed,bnd->bhne", block.w_q.double(), x.double())
    k = torch.einsum("hed,bmd->bhme", block.w_k.double(), y.double())
    if block.b_q is not None:
        q = q + block.b_q.double()[None, :, None, :]
    if block.b_k is not None:
        k = k + block.b_k.double()[None, :, None, :]
    if qk_norm:
        attention = model.get_submodule(block.source_name.removesuffix(".weight").rsplit(".", 1)[0])
        with torch.no_grad():
            q = attention.q_norm.double()(q)
            k = attention.k_norm.double()(k)
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


def run(model, name):
    case = CASES[name]
    inputs = case.inputs()
    if case.rotary:
        first = next(iter(inputs.values()))
        inputs["position_ids"] = torch.zeros(first.shape[:2], dtype=torch.long)
    with torch.no_grad():
        return model(**inputs, output_attentions=True)


@pytest.mark.parametrize("name", sorted(CASES))
def test_extraction_reproduces_the_models_attention(name):
    model = build(name)
    blocks = extracted(model)
    captured, handles = capture_attention_inputs(model, blocks)
    out = run(model, name)
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


@pytest.mark.parametrize("name", ["llama", "mistral", "qwen2", "phi3"])
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


def test_torch_bin_and_sharded_safetensors(tmp_path):
    model = build("llama")
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
    config["model_type"] = "swin"
    unsupported = tmp_path / "swin"
    unsupported.mkdir()
    import json

    (unsupported / "config.json").write_text(json.dumps(config))
    with pytest.raises(ExtractionError, match="^unsupported architecture: 'swin'; supported model types: .*bert"):
        hf.family_of(type("C", (), {"model_type": "swin"})())
    with torch.no_grad():
        model.encoder.layer[1].attention.self.key.weight[0, 0] = float("nan")
    with pytest.raises(ExtractionError, match="NaN"):
        extracted(model)
