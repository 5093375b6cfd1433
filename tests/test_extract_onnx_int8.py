"""ONNX reader on int8 graphs of onnxruntime's ``quantize_dynamic``: the dequantised query/key weights against the
quantised graph's own projections, run by onnxruntime on a small input (the reader itself never runs a graph)."""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import onnxruntime
import pytest
import torch
import transformers as T
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import QuantType, quantize_dynamic

from attnstruct.checkpoints.extract.blocks import ExtractionError
from attnstruct.checkpoints.extract.onnx_reader import onnx_blocks, onnx_info

D, H = 32, 4


class _Hidden(torch.nn.Module):
    """``pixel_values -> last_hidden_state`` of a vision model, for the TorchScript exporter."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, pixel_values):
        return self.model(pixel_values=pixel_values).last_hidden_state


def _randomised(model):
    """``model`` in eval mode with eager attention and random biases (trained checkpoints have non-zero ones)."""
    model.eval()
    model.set_attn_implementation("eager")
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("bias") and param.ndim == 1:
                param.normal_(0, 0.3)
    return model


def clip_vision():
    torch.manual_seed(0)
    config = T.CLIPVisionConfig(
        hidden_size=D, num_attention_heads=H, num_hidden_layers=2, intermediate_size=64, image_size=16, patch_size=4
    )
    return _randomised(T.CLIPVisionModel(config)), torch.randn(1, 3, 16, 16)


def swin():
    """Two stages of two blocks: d_model 16 with 2 heads, then 32 with 4; the second block of stage 0 shifted."""
    torch.manual_seed(0)
    config = T.SwinConfig(
        image_size=32, patch_size=4, embed_dim=16, depths=[2, 2], num_heads=[2, 4], window_size=4, mlp_ratio=2.0
    )
    return _randomised(T.SwinModel(config)), torch.randn(1, 3, 32, 32)


def export(model, pixels, path) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            _Hidden(model), (pixels,), str(path), dynamo=False, input_names=["pixel_values"], opset_version=17
        )
    return str(path)


def quantised(model, pixels, tmp_path, per_channel: bool) -> str:
    """The model exported to ONNX and quantised by ``quantize_dynamic`` (int8 weights, uint8 activations)."""
    float_path = export(model, pixels, tmp_path / "float.onnx")
    path = str(tmp_path / f"int8_{per_channel}.onnx")
    quantize_dynamic(float_path, path, per_channel=per_channel, weight_type=QuantType.QInt8)
    return path


def run_with_outputs(path, pixels, names: list[str]) -> dict[str, np.ndarray]:
    """Run the graph at ``path`` on ``pixels`` with the values ``names`` added as graph outputs."""
    model = onnx.load(path)
    known = {o.name for o in model.graph.output}
    for name in names:
        if name not in known:
            model.graph.output.append(helper.make_empty_tensor_value_info(name))
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip(names, session.run(names, {"pixel_values": pixels.numpy()}), strict=True))


def projection_values(path, matmul_name: str) -> list[str]:
    """Names of the float input ``x``, its uint8 quantisation ``(x_q, scale, zero point)`` and the projection's
    output after its bias (the exporter's ``.../Add_output_0``), around the MatMulInteger ``matmul_name``."""
    graph = onnx.load(path).graph
    node = next(n for n in graph.node if n.name == matmul_name)
    assert node.op_type == "MatMulInteger"
    quantise = next(n for n in graph.node if node.input[0] in n.output)
    assert quantise.op_type == "DynamicQuantizeLinear"
    return [quantise.input[0], *quantise.output, f"{matmul_name.rsplit('/', 1)[0]}/Add_output_0"]


def _check_against_graph(path, pixels, blocks) -> None:
    """Each block's ``W x + b`` on the graph's own dequantised input equals the graph's projection output (to float
    rounding), and on the float input it is within the input's quantisation error of it."""
    for block in blocks:
        prefix = block.source_name.rsplit("/", 2)[0]
        for proj, w, b in (("q", block.w_q, block.b_q), ("k", block.w_k, block.b_k)):
            name = block.source_name if proj == "q" else _key_matmul(path, prefix)
            x, x_q, scale, zero, out = (
                run_with_outputs(path, pixels, projection_values(path, name))[v] for v in projection_values(path, name)
            )
            weight = w.reshape(-1, w.shape[-1]).double().numpy()
            bias = b.reshape(-1).double().numpy()
            dequantised = (x_q.astype(np.float64) - float(zero)) * float(scale)
            exact = dequantised @ weight.T + bias
            assert np.abs(exact - out).max() < 1e-4 * np.abs(out).max(), (block.layer, proj)
            from_float = x.astype(np.float64) @ weight.T + bias
            bound = float(scale) / 2 * np.abs(weight).sum(axis=1).max()
            assert np.abs(from_float - out).max() < bound, (block.layer, proj)


def _key_matmul(path, prefix: str) -> str:
    names = [n.name for n in onnx.load(path).graph.node if n.op_type == "MatMulInteger" and n.name.startswith(prefix)]
    keys = [n for n in names if "/k_proj/" in n or "/key/" in n]
    assert len(keys) == 1, names
    return keys[0]


@pytest.mark.parametrize("per_channel", [True, False], ids=["per-channel", "per-tensor"])
def test_int8_clip_vision_weights_reproduce_the_quantised_graphs_projections(tmp_path, per_channel):
    model, pixels = clip_vision()
    path = quantised(model, pixels, tmp_path, per_channel)
    blocks = list(onnx_blocks(path))
    assert [b.layer for b in blocks] == [0, 1]
    assert blocks[0].source_name == "/model/encoder/layers.0/self_attn/q_proj/MatMul_quant"
    assert all(b.w_q.shape == (H, D // H, D) and b.n_heads == H for b in blocks)
    _check_against_graph(path, pixels, blocks)


@pytest.mark.parametrize("per_channel", [True, False], ids=["per-channel", "per-tensor"])
def test_int8_weights_are_the_float_weights_to_half_a_quantisation_step(tmp_path, per_channel):
    """Per output channel (or per tensor) the step is ``max |W| / 127``: the dequantised weight is within half a
    step of the float model's, and it is not the float weight itself (the file holds integers)."""
    model, pixels = clip_vision()
    blocks = list(onnx_blocks(quantised(model, pixels, tmp_path, per_channel)))
    for block, layer in zip(blocks, model.encoder.layers, strict=True):
        for ours, linear in ((block.w_q, layer.self_attn.q_proj), (block.w_k, layer.self_attn.k_proj)):
            w = linear.weight.detach().reshape(ours.shape)
            flat = linear.weight.detach()
            # channels are the output features: the rows of the nn.Linear weight, the columns of the [in, out] store
            step = (flat.abs().amax(dim=1) if per_channel else flat.abs().max().expand(flat.shape[0])) / 127
            error = (ours - w).abs().reshape(flat.shape)
            assert bool((error <= step[:, None] / 2 + 1e-6).all())
            assert not torch.equal(ours, w)
        torch.testing.assert_close(block.b_q.reshape(-1), layer.self_attn.q_proj.bias.detach(), rtol=0, atol=0)


def test_int8_swin_blocks_are_numbered_over_stages_with_each_stages_width(tmp_path):
    """Swin's ``layers.S/blocks.B`` give one block each, numbered 0..3 over (stage, block), each with its stage's
    d_model and heads from the graph, what its score leaves out recorded (the relative position bias, the windows),
    and their weights reproduce the quantised graph's projections."""
    model, pixels = swin()
    path = quantised(model, pixels, tmp_path, per_channel=True)
    blocks = list(onnx_blocks(path))
    assert [(b.layer, b.n_heads, b.w_q.shape[-1]) for b in blocks] == [(0, 2, 16), (1, 2, 16), (2, 4, 32), (3, 4, 32)]
    assert "layers.1/blocks.0/" in blocks[2].source_name
    assert all(b.extras == ("relative_position", "windows", "q_bias", "k_bias") for b in blocks)
    _check_against_graph(path, pixels, blocks)
    assert onnx_info(path) == {"n_layers": 4, "n_heads": 2, "d_model": 16, "d_head": 8}


def test_float_swin_export_is_read_with_its_own_weights(tmp_path):
    model, pixels = swin()
    blocks = list(onnx_blocks(export(model, pixels, tmp_path / "swin.onnx")))
    attentions = [block.attention for stage in model.encoder.layers for block in stage.blocks]
    assert len(blocks) == len(attentions) == 4
    for block, attention in zip(blocks, attentions, strict=True):
        torch.testing.assert_close(block.w_q.reshape(attention.q_proj.weight.shape), attention.q_proj.weight.detach())
        torch.testing.assert_close(block.w_k.reshape(attention.k_proj.weight.shape), attention.k_proj.weight.detach())


# -- hand-built graphs: what the reader accepts and refuses -----------------------------------------------------------


def _integer_projection(prefix: str, w_q: np.ndarray, zero: np.ndarray, w_scale: np.ndarray, chain: str = "ort"):
    """Nodes and initializers of one quantised projection of ``hidden`` as ``quantize_dynamic`` writes it:
    ``DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul(activation scale x weight scale) -> Add(bias)``.
    ``chain="no-cast"`` leaves the Cast out (a graph the reader must refuse)."""
    n_out = w_q.shape[1]
    inits = [
        numpy_helper.from_array(w_q, f"{prefix}_w_quantized"),
        numpy_helper.from_array(zero, f"{prefix}_w_zero_point"),
        numpy_helper.from_array(w_scale, f"{prefix}_w_scale"),
        numpy_helper.from_array(np.linspace(-1, 1, n_out, dtype=np.float32), f"{prefix}.bias"),
    ]
    matmul_out = f"{prefix}/MatMul_output_0_quantized"
    nodes = [
        helper.make_node(
            "DynamicQuantizeLinear", ["hidden"], [f"{prefix}_xq", f"{prefix}_xs", f"{prefix}_xz"], name=f"{prefix}/Q"
        ),
        helper.make_node(
            "MatMulInteger",
            [f"{prefix}_xq", f"{prefix}_w_quantized", f"{prefix}_xz", f"{prefix}_w_zero_point"],
            [matmul_out],
            name=f"{prefix}/MatMul_quant",
        ),
        helper.make_node("Mul", [f"{prefix}_xs", f"{prefix}_w_scale"], [f"{prefix}_scales"], name=f"{prefix}/S"),
    ]
    if chain == "no-cast":
        cast_out = matmul_out
    else:
        cast_out = f"{prefix}_cast"
        nodes.append(helper.make_node("Cast", [matmul_out], [cast_out], name=f"{prefix}/C", to=TensorProto.FLOAT))
    nodes += [
        helper.make_node("Mul", [cast_out, f"{prefix}_scales"], [f"{prefix}/MatMul_output_0"], name=f"{prefix}/M"),
        helper.make_node("Add", [f"{prefix}.bias", f"{prefix}/MatMul_output_0"], [f"{prefix}/Add_output_0"]),
    ]
    return nodes, inits, f"{prefix}/Add_output_0"


def _int8_graph(path, w_q, zero, w_scale, chain="ort") -> str:
    nodes, inits, outputs = [], [], []
    for proj in ("q_proj", "k_proj"):
        n, i, out = _integer_projection(f"/encoder/layers.0/self_attn/{proj}", w_q, zero, w_scale, chain)
        nodes, inits = nodes + n, inits + i
        outputs.append(helper.make_tensor_value_info(out, TensorProto.FLOAT, None))
    hidden = helper.make_tensor_value_info("hidden", TensorProto.FLOAT, [3, w_q.shape[0]])
    graph = helper.make_graph(nodes, "int8", [hidden], outputs, initializer=inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


def test_per_channel_zero_points_and_scales_are_applied_per_output_column(tmp_path):
    """``W = (W_q - zero_point) * scale``, zero point and scale ``[out]`` along the columns of the ``[in, out]``
    store: the block's weight ``[out, in]`` is that, transposed."""
    rng = np.random.default_rng(0)
    w_q = rng.integers(-128, 128, size=(8, 4), dtype=np.int8)
    zero = np.array([0, 3, -5, 7], dtype=np.int8)
    scale = np.array([0.5, 0.25, 2.0, 0.125], dtype=np.float32)
    block = next(iter(onnx_blocks(_int8_graph(tmp_path / "g.onnx", w_q, zero, scale), n_heads=2)))
    expected = ((w_q.astype(np.float32) - zero) * scale).T
    np.testing.assert_array_equal(block.w_q.reshape(4, 8).numpy(), expected)
    np.testing.assert_array_equal(block.b_q.reshape(-1).numpy(), np.linspace(-1, 1, 4, dtype=np.float32))


def test_per_tensor_scale_and_zero_point(tmp_path):
    w_q = np.arange(-16, 16, dtype=np.int8).reshape(8, 4)
    path = _int8_graph(tmp_path / "g.onnx", w_q, np.array(2, dtype=np.int8), np.array(0.5, dtype=np.float32))
    block = next(iter(onnx_blocks(path, n_heads=1)))
    np.testing.assert_array_equal(block.w_k[0].numpy(), ((w_q.astype(np.float32) - 2) * 0.5).T)


@pytest.mark.parametrize(
    "case",
    ["no-cast", "scale-too-long", "zero-point-too-long"],
)
def test_an_int8_projection_not_dequantised_as_quantize_dynamic_writes_it_is_refused(tmp_path, case):
    w_q = np.ones((8, 4), dtype=np.int8)
    zero, scale = np.zeros(4, dtype=np.int8), np.ones(4, dtype=np.float32)
    if case == "scale-too-long":
        scale = np.ones(5, dtype=np.float32)
    if case == "zero-point-too-long":
        zero = np.zeros(5, dtype=np.int8)
    path = _int8_graph(tmp_path / "g.onnx", w_q, zero, scale, chain="no-cast" if case == "no-cast" else "ort")
    with pytest.raises(ExtractionError, match="MatMul_quant") as caught:
        list(onnx_blocks(path, n_heads=2))
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("per_channel", [True, False], ids=["per-channel", "per-tensor"])
def test_an_int8_graph_counts_the_parameters_of_its_float_export(tmp_path, per_channel):
    """Quantised weights (int8 ``MatMulInteger``/``ConvInteger`` weights, a dequantised embedding) count as the
    parameters they replace; scales and zero points are not parameters."""
    from attnstruct.checkpoints.extract.parameters import count_parameters

    model, pixels = clip_vision()
    path = quantised(model, pixels, tmp_path, per_channel)
    assert count_parameters(path) == count_parameters(tmp_path / "float.onnx") > 18_000
