"""ONNX reader: per-head Q/K weights of BERT-style encoders, from hand-built graphs and a real TorchScript export."""

from __future__ import annotations

import math
import warnings

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper
from transformers import BertConfig, BertModel

from attnstruct.checkpoints.extract.blocks import ExtractionError
from attnstruct.checkpoints.extract.onnx_reader import ATTENTION_MATMUL_PATTERNS, onnx_blocks, onnx_info

D_MODEL, HEADS, LAYERS = 32, 4, 2
D_HEAD = D_MODEL // HEADS


@pytest.fixture(scope="module")
def bert() -> BertModel:
    """Tiny random BertModel (eval, eager attention) with random query/key biases (BERT initialises them to 0)."""
    torch.manual_seed(0)
    config = BertConfig(
        hidden_size=D_MODEL, num_attention_heads=HEADS, num_hidden_layers=LAYERS, intermediate_size=64, vocab_size=50
    )
    model = BertModel(config).eval()
    model.set_attn_implementation("eager")
    with torch.no_grad():
        for layer in model.encoder.layer:
            layer.attention.self.query.bias.normal_(0.0, 0.5)
            layer.attention.self.key.bias.normal_(0.0, 0.5)
    return model


def _linears(model: BertModel, layer: int) -> dict[str, torch.nn.Linear]:
    attn = model.encoder.layer[layer].attention.self
    return {"query": attn.query, "key": attn.key}


def _projection_nodes(
    prefix: str, proj: str, linear: torch.nn.Linear, weight_name: str, shape_source: str, reshape: bool
) -> tuple[list, list, str]:
    """Nodes and initializers of one exporter-style projection; returns (nodes, initializers, output name).

    ``MatMul(hidden, W^T) -> Add(b, .) -> Reshape([0, 0, heads, d_head]) -> Transpose``, the shape from a Constant
    node (``shape_source="constant"``) or an initializer (``"initializer"``).
    """
    base = f"{prefix}/{proj}"
    w_t = linear.weight.detach().numpy().T.copy()  # (in, out), as the exporter stores it
    inits = [
        numpy_helper.from_array(w_t, weight_name),
        numpy_helper.from_array(linear.bias.detach().numpy().copy(), f"encoder.{proj}.bias{prefix}"),
    ]
    nodes = [
        helper.make_node("MatMul", ["hidden", weight_name], [f"{base}/MatMul_output_0"], name=f"{base}/MatMul"),
        helper.make_node(
            "Add", [inits[1].name, f"{base}/MatMul_output_0"], [f"{base}/Add_output_0"], name=f"{base}/Add"
        ),
    ]
    if not reshape:
        return nodes, inits, f"{base}/Add_output_0"
    shape = np.array([0, 0, HEADS, D_HEAD], dtype=np.int64)
    shape_name = f"{prefix}/{proj}_shape"
    if shape_source == "constant":
        nodes.append(
            helper.make_node(
                "Constant", [], [shape_name], name=f"{prefix}/{proj}_Constant", value=numpy_helper.from_array(shape)
            )
        )
    else:
        inits.append(numpy_helper.from_array(shape, shape_name))
    nodes += [
        helper.make_node(
            "Reshape",
            [f"{base}/Add_output_0", shape_name],
            [f"{base}/Reshape_output_0"],
            name=f"{prefix}/Reshape_{proj}",
        ),
        helper.make_node(
            "Transpose",
            [f"{base}/Reshape_output_0"],
            [f"{base}/Transpose_output_0"],
            name=f"{prefix}/Transpose_{proj}",
            perm=[0, 2, 1, 3],
        ),
    ]
    return nodes, inits, f"{base}/Transpose_output_0"


def _mimic_graph(model: BertModel, reshape: bool = True, corrupt=None) -> onnx.ModelProto:
    """Exporter-like graph of the Q/K input projections of every layer (not runnable BERT, but a valid model).

    ``corrupt`` optionally edits ``(layer, proj, W^T)`` in place before it is stored.
    """
    nodes, inits, outputs, counter = [], [], [], 470
    for layer in range(LAYERS):
        prefix = f"/encoder/layer.{layer}/attention/self"
        for proj, linear in _linears(model, layer).items():
            weight_name = f"onnx::MatMul_{counter}"
            counter += 1
            source = "constant" if layer == 0 else "initializer"
            n, i, out = _projection_nodes(prefix, proj, linear, weight_name, source, reshape)
            if corrupt is not None:
                w_t = numpy_helper.to_array(i[0]).copy()
                corrupt(layer, proj, w_t)
                i[0] = numpy_helper.from_array(w_t, weight_name)
            nodes += n
            inits += i
            shape = ["batch", HEADS, "seq", D_HEAD] if reshape else ["batch", "seq", D_MODEL]
            outputs.append(helper.make_tensor_value_info(out, TensorProto.FLOAT, shape))
    hidden = helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["batch", "seq", D_MODEL])
    graph = helper.make_graph(nodes, "bert_qk", [hidden], outputs, initializer=inits)
    onnx_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(onnx_model)
    return onnx_model


def _save(onnx_model: onnx.ModelProto, path) -> str:
    onnx.save(onnx_model, str(path))
    return str(path)


def _assert_blocks_match(blocks, model: BertModel, with_bias: bool = True) -> None:
    """Every block equals the model's own query/key weights and biases, split per head."""
    assert [b.layer for b in blocks] == list(range(LAYERS))
    for block in blocks:
        lin = _linears(model, block.layer)
        assert block.stack == "encoder" and block.causal is False
        assert block.n_heads == HEADS and block.n_kv_heads == HEADS
        assert block.w_q.dtype == torch.float32 and block.w_q.shape == (HEADS, D_HEAD, D_MODEL)
        assert block.source_name.endswith(f"/encoder/layer.{block.layer}/attention/self/query/MatMul")
        for h in range(HEADS):
            rows = slice(h * D_HEAD, (h + 1) * D_HEAD)
            torch.testing.assert_close(block.w_q[h], lin["query"].weight[rows].detach(), rtol=0, atol=0)
            torch.testing.assert_close(block.w_k[h], lin["key"].weight[rows].detach(), rtol=0, atol=0)
            if with_bias:
                torch.testing.assert_close(block.b_q[h], lin["query"].bias[rows].detach(), rtol=0, atol=0)
                torch.testing.assert_close(block.b_k[h], lin["key"].bias[rows].detach(), rtol=0, atol=0)
        if with_bias:
            assert block.b_q.shape == (HEADS, D_HEAD)
            assert block.extras == ("q_bias",) + (
                ("k_bias",) if bool(block.b_k.any()) else ()
            )  # zero biases do not count


def _assert_one_line_error(path, match: str, **kwargs) -> str:
    with pytest.raises(ExtractionError, match=match) as info:
        list(onnx_blocks(path, **kwargs))
    assert "\n" not in str(info.value)
    return str(info.value)


# 1. Exporter-like graph: exact weights and biases per head --------------------------------------------------------


def test_mimic_graph_gives_exact_weights_and_biases(bert, tmp_path):
    path = _save(_mimic_graph(bert), tmp_path / "bert.onnx")
    _assert_blocks_match(list(onnx_blocks(path)), bert)
    assert onnx_info(path) == {"n_layers": LAYERS, "n_heads": HEADS, "d_model": D_MODEL, "d_head": D_HEAD}


def test_patterns_recognise_exporter_and_generic_names():
    names = {
        "/encoder/layer.3/attention/self/query/MatMul": ("3", "query"),
        "/bert/encoder/layer.11/attention/self/key/MatMul": ("11", "key"),
        "/transformer/layer.2/attention/q_lin/MatMul": ("2", "q_lin"),
        "/encoder/layers.0/self_attn/k_proj/MatMul": ("0", "k_proj"),
    }
    for name, expected in names.items():
        match = next(m for m in (p.search(name) for p in ATTENTION_MATMUL_PATTERNS) if m)
        assert (match["layer"], match["proj"]) == expected
    for name in (
        "/encoder/layer.0/attention/self/value/MatMul",
        "/encoder/layer.0/attention/self/MatMul",
        "/encoder/layer.0/intermediate/dense/MatMul",
        "/encoder/layer.0/attention/attn/q/MatMul",  # MPNet: relative positions, not read
        "/encoder/block.0/layer.0/SelfAttention/q/MatMul",  # T5
    ):
        assert not any(p.search(name) for p in ATTENTION_MATMUL_PATTERNS)


# 2. Head count: from the Reshape, else n_heads, else an error ------------------------------------------------------


def test_head_count_fallback_to_argument(bert, tmp_path):
    path = _save(_mimic_graph(bert, reshape=False), tmp_path / "noreshape.onnx")
    _assert_blocks_match(list(onnx_blocks(path, n_heads=HEADS)), bert)
    assert onnx_info(path, n_heads=HEADS)["d_head"] == D_HEAD


def test_head_count_missing_is_an_error(bert, tmp_path):
    path = _save(_mimic_graph(bert, reshape=False), tmp_path / "noreshape.onnx")
    _assert_one_line_error(path, "head count")
    with pytest.raises(ExtractionError, match="head count"):
        onnx_info(path)
    _assert_one_line_error(path, "does not divide", n_heads=5)


def test_head_count_disagreeing_argument_is_an_error(bert, tmp_path):
    path = _save(_mimic_graph(bert), tmp_path / "bert.onnx")
    _assert_one_line_error(path, "n_heads=8", n_heads=8)
    assert len(list(onnx_blocks(path, n_heads=HEADS))) == LAYERS


# 3. The extracted weights reproduce the model's own attention probabilities ----------------------------------------


def test_extracted_weights_reproduce_attention(bert, tmp_path):
    path = _save(_mimic_graph(bert), tmp_path / "bert.onnx")
    block = next(iter(onnx_blocks(path)))
    captured = {}

    def pre_hook(module, args, kwargs):
        captured["x"] = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]

    handle = bert.encoder.layer[0].attention.self.register_forward_pre_hook(pre_hook, with_kwargs=True)
    try:
        with torch.no_grad():
            out = bert(input_ids=torch.tensor([[1, 7, 3, 9, 21, 4, 40]]), output_attentions=True)
    finally:
        handle.remove()
    x = captured["x"][0]  # [seq, d_model]
    probs = out.attentions[0][0]  # [heads, seq, seq]
    for h in range(HEADS):
        q = x @ block.w_q[h].T + block.b_q[h]  # [seq, d_head]
        k = x @ block.w_k[h].T + block.b_k[h]
        ours = torch.softmax(q @ k.T / math.sqrt(D_HEAD), dim=-1)
        torch.testing.assert_close(ours, probs[h], rtol=0, atol=1e-5)


# 4. Error cases: one-line ExtractionError --------------------------------------------------------------------------


def test_missing_file(tmp_path):
    _assert_one_line_error(tmp_path / "absent.onnx", "not found")
    with pytest.raises(ExtractionError, match="not found"):
        onnx_info(tmp_path / "absent.onnx")


def test_truncated_file(bert, tmp_path):
    data = _mimic_graph(bert).SerializeToString()
    path = tmp_path / "truncated.onnx"
    path.write_bytes(data[: len(data) * 3 // 5])
    _assert_one_line_error(path, "not a valid ONNX model")


@pytest.mark.parametrize("payload", [b"this is not an onnx file\n" * 20, b"", bytes(range(256)) * 4])
def test_non_onnx_bytes(tmp_path, payload):
    path = tmp_path / "junk.onnx"
    path.write_bytes(payload)
    _assert_one_line_error(path, "not a valid ONNX model")


def test_graph_without_attention_matmuls(tmp_path):
    weight = numpy_helper.from_array(np.ones((4, 4), dtype=np.float32), "W")
    node = helper.make_node("MatMul", ["x", "W"], ["y"], name="/encoder/layer.0/output/dense/MatMul")
    graph = helper.make_graph(
        [node],
        "plain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        initializer=[weight],
    )
    onnx_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(onnx_model)
    message = _assert_one_line_error(_save(onnx_model, tmp_path / "plain.onnx"), "no attention query/key MatMuls")
    assert "attention/self/query/MatMul" in message


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_weight(bert, tmp_path, bad):
    def corrupt(layer, proj, w_t):
        if (layer, proj) == (1, "key"):
            w_t[3, 5] = bad

    path = _save(_mimic_graph(bert, corrupt=corrupt), tmp_path / "nan.onnx")
    _assert_one_line_error(path, "NaN or inf")


# 5. A real TorchScript export of the tiny BertModel ----------------------------------------------------------------


class _LastHidden(torch.nn.Module):
    """``input_ids -> last_hidden_state`` (exporting BertModel itself fails: its forward gets ``use_cache`` twice)."""

    def __init__(self, model: BertModel):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        return self.model(input_ids=input_ids).last_hidden_state


@pytest.mark.parametrize(
    "export_kwargs",
    [{}, {"dynamic_axes": {"input_ids": {0: "batch", 1: "seq"}}}, {"do_constant_folding": False}],
    ids=["static", "dynamic_axes", "no_constant_folding"],
)
def test_real_torchscript_export(bert, tmp_path, export_kwargs):
    # Layer 1's key bias is left at BERT's initial zeros, so the exporter deduplicates it with other zero tensors
    # into an Identity node; the reader must follow it.
    with torch.no_grad():
        saved = bert.encoder.layer[1].attention.self.key.bias.clone()
        bert.encoder.layer[1].attention.self.key.bias.zero_()
    try:
        path = tmp_path / "bert_export.onnx"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                _LastHidden(bert),
                (torch.tensor([[1, 7, 3, 9, 21, 4, 40]]),),
                str(path),
                dynamo=False,
                input_names=["input_ids"],
                opset_version=17,
                **export_kwargs,
            )
        onnx.checker.check_model(onnx.load(str(path)))
        blocks = list(onnx_blocks(path))
        _assert_blocks_match(blocks, bert)
        assert blocks[0].source_name == "/model/encoder/layer.0/attention/self/query/MatMul"
        assert onnx_info(path) == {"n_layers": LAYERS, "n_heads": HEADS, "d_model": D_MODEL, "d_head": D_HEAD}
    finally:
        with torch.no_grad():
            bert.encoder.layer[1].attention.self.key.bias.copy_(saved)


def test_a_projection_weight_without_elements_is_refused(bert, tmp_path):
    model = _mimic_graph(bert, reshape=False)
    for init in model.graph.initializer:
        if init.name.startswith("onnx::MatMul"):
            init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init)[:, :0].copy(), init.name))
    path = tmp_path / "empty.onnx"
    onnx.save(model, str(path))
    _assert_one_line_error(path, "with no elements", n_heads=4)
