"""Per-head query/key weights of encoders exported to ONNX (BERT-style, CLIP's vision tower, Swin), float or int8,
read from the graph without running it.

The TorchScript exporter (``torch.onnx.export(..., dynamo=False)``, also used by Optimum) writes each attention
input projection as ``MatMul(hidden, W^T) -> Add(b) -> Reshape([batch, seq, heads, d_head]) -> Transpose``:

* the weight is an initializer, often anonymous (``onnx::MatMul_470``), found through the MatMul node's name, e.g.
  ``/encoder/layer.0/attention/self/query/MatMul``; it is stored ``(in, out)``, so the ``nn.Linear`` weight is its
  transpose (without constant folding it is ``Transpose(encoder.layer.0...query.weight)``, which is followed too);
* the bias is the constant input of the ``Add`` node that consumes the MatMul output (identical initializers are
  deduplicated by the exporter into ``Identity`` nodes, which are followed);
* the head count is in the constant shape of the ``Reshape`` that splits heads: ``[0, 0, 12, 32]``,
  ``[1, 7, -1, 8]`` or ``Concat(Unsqueeze(...), Unsqueeze(...), [-1], [8])`` (only its last two entries are used);
* the ``1/sqrt(d_head)`` scale is a separate ``Div``/``Mul`` node, so the weights are unscaled.

int8 graphs written by onnxruntime's ``quantize_dynamic`` replace each such MatMul by
``MatMulInteger(DynamicQuantizeLinear(x), W_q, x_zero_point, w_zero_point) -> Cast(float) -> Mul(s)``, named after it
with ``_quant`` (``.../self_attn/q_proj/MatMul_quant``), where ``s = Mul(x_scale, w_scale)``: ``x_scale`` the
activation's scale that DynamicQuantizeLinear computes at run time, ``w_scale`` a constant. Following the operators'
definitions (``MatMulInteger``: ``(A - a_zero_point) (B - b_zero_point)`` in int32, ``b_zero_point`` a scalar or one
per column of a 2-D ``B``), the Mul's output is ``x~ W`` with ``x~`` the dequantised activation and
``W = (W_q - w_zero_point) * w_scale``: ``W_q`` int8 or uint8 ``[in, out]``, zero point and scale a scalar (per
tensor) or ``[out]`` (per output channel). ``W`` is what the reader yields (transposed to the ``nn.Linear`` layout);
the bias ``Add`` and the head-splitting ``Reshape`` follow the Mul as they follow a float MatMul. A quantised
projection in any other form is refused, naming its node.

Swin numbers its attention blocks by stage and block (``.../layers.S/blocks.B/attention/self/query/MatMul``); the
blocks are yielded as layers ``0..n-1`` in (stage, block) order, each with its stage's width and head count, and
with the extras ``relative_position`` and ``windows``: its logits add a learned relative position bias and are taken
inside local windows, which the score of ``W_qk`` leaves out.

onnxruntime is not needed: only ``onnx`` (protobuf) and numpy are used.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import torch
from onnx import helper, numpy_helper

from ...untrusted import one_line
from .blocks import AttentionBlock, ExtractionError, bias_extras, check_finite

# Node-name patterns of the query/key projection MatMuls (``_quant`` for their int8 replacements), tried in order;
# each names the group ``proj`` and either ``layer`` or Swin's ``stage`` and ``block``. The first is Swin's (old
# ``attention/self/query`` and new ``attention/q_proj`` module names); the second is what the TorchScript exporter
# writes for BERT/MiniLM/RoBERTa (any module prefix such as ``/m`` or ``/bert`` is allowed); the third is the generic
# ``layer.N`` / ``layers.N`` form with the common projection names (DistilBERT ``q_lin``, BART/Whisper-encoder and
# CLIP ``self_attn/q_proj``). Bare ``q``/``k`` (MPNet, T5) is left out on purpose: those models add
# relative-position terms that an ONNX graph does not label.
_MATMUL = r"/MatMul(?:_quant)?$"
ATTENTION_MATMUL_PATTERNS = (
    re.compile(
        r"(?:^|/)layers\.(?P<stage>\d+)/blocks\.(?P<block>\d+)/attention/(?:self/)?(?P<proj>query|key|q_proj|k_proj)"
        + _MATMUL
    ),
    re.compile(r"(?:^|/)layer\.(?P<layer>\d+)/attention/self/(?P<proj>query|key)" + _MATMUL),
    re.compile(r"(?:^|[/.])layers?[._](?P<layer>\d+)/(?:.*/)?(?P<proj>query|key|q_proj|k_proj|q_lin|k_lin)" + _MATMUL),
)
_MATMUL_OPS = ("MatMul", "MatMulInteger")
_PROJ = {"query": "q", "q_proj": "q", "q_lin": "q", "key": "k", "k_proj": "k", "k_lin": "k"}
_LOOKED_FOR = (
    "MatMul nodes named like '.../layer.N/attention/self/query/MatMul' (or 'layer.N .../q_proj/MatMul', "
    "'layers.S/blocks.B/attention/self/query/MatMul', int8 ones ending in '/MatMul_quant')"
)
_UNKNOWN = object()  # an unknown-length segment of a shape vector


@dataclass(frozen=True)
class _Projection:
    """One query or key projection: ``weight`` ``[out, d_model]`` (``nn.Linear`` layout), ``bias`` ``[out]``."""

    node_name: str
    weight: np.ndarray
    bias: np.ndarray | None
    split: tuple[int, int] | None  # (heads, d_head) from the head-splitting Reshape, if found


class _Graph:
    """Lookup tables over an ONNX graph: initializers, the producer and the consumers of every value."""

    def __init__(self, graph: onnx.GraphProto):
        self.nodes = list(graph.node)
        self.initializers = {t.name: t for t in graph.initializer}
        self.producer = {out: node for node in self.nodes for out in node.output}
        self.consumers: dict[str, list[onnx.NodeProto]] = defaultdict(list)
        for node in self.nodes:
            for name in node.input:
                self.consumers[name].append(node)

    def constant(self, name: str, depth: int = 0) -> np.ndarray | None:
        """The value of ``name`` if it is an initializer or a Constant, through Identity/Transpose/Cast; else None."""
        if name in self.initializers:
            return _to_array(self.initializers[name])
        node = self.producer.get(name)
        if node is None or depth > 16:
            return None
        if node.op_type == "Constant":
            return _constant_node_value(node)
        if node.op_type in ("Identity", "Transpose", "Cast") and node.input:
            value = self.constant(node.input[0], depth + 1)
            if value is None or node.op_type == "Identity":
                return value
            if node.op_type == "Cast":
                return value.astype(helper.tensor_dtype_to_np_dtype(_attribute(node, "to")))
            perm = _attribute(node, "perm")
            return np.transpose(value, perm if perm is not None else None)
        return None

    def shape_vector(self, name: str, depth: int = 0) -> list:
        """The entries of a shape vector as ints, with ``_UNKNOWN`` for parts that are computed at run time.

        Follows Concat, Unsqueeze, Squeeze, Identity and Cast, as in the dynamic-axes exports
        ``Concat(Unsqueeze(Gather(Shape(x))), ..., [-1], [d_head])``.
        """
        value = self.constant(name)
        if value is not None:
            return [int(v) for v in np.asarray(value).reshape(-1)]
        node = self.producer.get(name)
        if node is None or depth > 16:
            return [_UNKNOWN]
        if node.op_type == "Concat":
            return [v for part in node.input for v in self.shape_vector(part, depth + 1)]
        if node.op_type in ("Unsqueeze", "Squeeze", "Identity", "Cast") and node.input:
            return self.shape_vector(node.input[0], depth + 1)
        return [_UNKNOWN]


def _to_array(tensor: onnx.TensorProto) -> np.ndarray:
    """``numpy_helper.to_array`` with any failure (bad or truncated data, missing external file) as ExtractionError."""
    try:
        return numpy_helper.to_array(tensor)
    except Exception as exc:  # noqa: BLE001 - onnx raises many kinds here
        raise ExtractionError(f"cannot read initializer {tensor.name!r}: {one_line(exc)}") from exc


def _constant_node_value(node: onnx.NodeProto) -> np.ndarray | None:
    """Value of a Constant node (``value`` tensor or ``value_int(s)``/``value_float(s)``), or None."""
    for attr in node.attribute:
        if attr.name == "value":
            return _to_array(attr.t)
        if attr.name in ("value_int", "value_ints", "value_float", "value_floats"):
            return np.asarray(helper.get_attribute_value(attr))
    return None


def _attribute(node: onnx.NodeProto, name: str):
    """Value of the attribute ``name`` of ``node``, or None."""
    for attr in node.attribute:
        if attr.name == name:
            return helper.get_attribute_value(attr)
    return None


def _load(path) -> onnx.ModelProto:
    """Load and sanity-check an ONNX file; every failure is a one-line :class:`ExtractionError`."""
    path = Path(path)
    if not path.exists():
        raise ExtractionError(f"ONNX file {path}", "not found")
    if not path.is_file():
        raise ExtractionError(f"not a file: {path}")
    try:
        model = onnx.load(str(path))
    except Exception as exc:  # noqa: BLE001 - protobuf DecodeError, OSError for external data, ...
        raise ExtractionError(f"{path} is not a valid ONNX model (unreadable or truncated): {one_line(exc)}") from exc
    if model.ir_version <= 0 or not model.graph.node:
        raise ExtractionError(f"{path} is not a valid ONNX model (no IR version or an empty graph)")
    return model


def _find_attention_matmuls(graph: _Graph) -> dict[tuple[int, ...], dict[str, onnx.NodeProto]]:
    """``{key: {"q": node, "k": node}}`` from the MatMul node names (see :data:`ATTENTION_MATMUL_PATTERNS`); the key
    is ``(layer,)``, or ``(stage, block)`` for Swin."""
    found: dict[tuple[int, ...], dict[str, onnx.NodeProto]] = defaultdict(dict)
    for node in graph.nodes:
        if node.op_type not in _MATMUL_OPS:
            continue
        for pattern in ATTENTION_MATMUL_PATTERNS:
            match = pattern.search(node.name)
            if match:
                groups = match.groupdict()
                key = (int(groups["layer"]),) if groups.get("layer") else (int(match["stage"]), int(match["block"]))
                proj = _PROJ[match["proj"]]
                if proj in found[key]:
                    raise ExtractionError(
                        f"ambiguous attention MatMuls for layer {_key_name(key)}: {found[key][proj].name!r} and "
                        f"{node.name!r}"
                    )
                found[key][proj] = node
                break
    return dict(found)


def _key_name(key: tuple[int, ...]) -> str:
    return str(key[0]) if len(key) == 1 else f"{key[1]} of stage {key[0]}"


def _numbered(indices: list[int], what: str, path) -> None:
    if indices != list(range(len(indices))):
        raise ExtractionError(f"{what} of {path} are not numbered 0..{len(indices) - 1}: {indices}")


def _check_layers(found: dict[tuple[int, ...], dict[str, onnx.NodeProto]], path) -> list[tuple[int, ...]]:
    """Layer keys in order; every layer has a query and a key MatMul, and they number 0..n-1 (Swin: stages 0..S-1,
    the blocks of each 0..n_s-1)."""
    if not found:
        raise ExtractionError(f"no attention query/key MatMuls in {path}: looked for {_LOOKED_FOR}")
    keys = sorted(found)
    for key in keys:
        missing = {"q", "k"} - set(found[key])
        if missing:
            kind = "query" if "q" in missing else "key"
            raise ExtractionError(f"layer {_key_name(key)} of {path} has no {kind} MatMul")
    if len({len(key) for key in keys}) != 1:
        raise ExtractionError(f"{path} names attention layers both by layer and by stage and block")
    if len(keys[0]) == 1:
        _numbered([key[0] for key in keys], "attention layers", path)
    else:
        stages = sorted({key[0] for key in keys})
        _numbered(stages, "attention stages", path)
        for stage in stages:
            _numbered([key[1] for key in keys if key[0] == stage], f"the blocks of stage {stage}", path)
    return keys


def _matmul_weight(graph: _Graph, node: onnx.NodeProto) -> np.ndarray:
    """The constant operand of a projection MatMul as a float32 ``[out, d_model]`` array (the ``(in, out)`` store
    transposed)."""
    consts = [graph.constant(name) for name in node.input[:2]]
    weights = [c for c in consts if c is not None and c.ndim == 2]
    if len(weights) != 1:
        raise ExtractionError(f"MatMul {node.name!r} does not have exactly one constant 2-D weight input")
    weight = weights[0]
    _check_elements(weight, node)
    if not np.issubdtype(weight.dtype, np.floating) and weight.dtype.name != "bfloat16":
        raise ExtractionError(f"weight of {node.name!r} has non-float dtype {weight.dtype} in a float MatMul")
    return np.ascontiguousarray(weight.astype(np.float32).T)


def _check_elements(weight: np.ndarray, node: onnx.NodeProto) -> None:
    if 0 in weight.shape:
        raise ExtractionError(f"the weight of MatMul {node.name!r} has shape {list(weight.shape)}, with no elements")


def _per_column(value: np.ndarray | None, columns: int, what: str, node: onnx.NodeProto) -> np.ndarray:
    """A scalar or ``[columns]`` quantisation parameter as a ``[columns]`` vector (broadcast along ``[in, out]``)."""
    if value is None:
        raise ExtractionError(f"the {what} of {node.name!r} is not a constant")
    if not (value.size == 1 or (value.size == columns and value.shape[-1] == columns)):
        raise ExtractionError(
            f"the {what} of {node.name!r} has shape {list(value.shape)}: neither one value (per tensor) nor one per "
            f"output channel ({columns})"
        )
    return np.broadcast_to(value.reshape(-1), (columns,))


def _integer_matmul(graph: _Graph, node: onnx.NodeProto) -> tuple[np.ndarray, str]:
    """``(W [out, d_model] float32, name of the dequantised output)`` of an int8 projection of onnxruntime's
    ``quantize_dynamic`` (module docstring): ``W = (W_q - w_zero_point) * w_scale``, transposed."""
    refused = (
        f"MatMulInteger {node.name!r} is not dequantised as onnxruntime's quantize_dynamic writes it "
        "(DynamicQuantizeLinear input; Cast, then Mul by the activation scale times a constant weight scale)"
    )
    quantise = graph.producer.get(node.input[0])
    if quantise is None or quantise.op_type != "DynamicQuantizeLinear" or len(node.input) < 2:
        raise ExtractionError(refused)
    w_q = graph.constant(node.input[1])
    if w_q is None or w_q.ndim != 2 or w_q.dtype not in (np.int8, np.uint8):
        raise ExtractionError(f"MatMulInteger {node.name!r} has no constant 2-D int8 or uint8 weight")
    _check_elements(w_q, node)
    columns = w_q.shape[1]
    has_zero = len(node.input) > 3 and node.input[3]
    zero = _per_column(graph.constant(node.input[3]), columns, "weight zero point", node) if has_zero else 0
    cast = _only_consumer(graph, node.output[0], "Cast")
    mul = _only_consumer(graph, cast.output[0], "Mul") if cast is not None else None
    if mul is None or len(graph.consumers[node.output[0]]) != 1 or len(graph.consumers[cast.output[0]]) != 1:
        raise ExtractionError(refused)
    scales = graph.producer.get(next((name for name in mul.input if name != cast.output[0]), ""))
    if scales is None or scales.op_type != "Mul" or len(quantise.output) < 2 or quantise.output[1] not in scales.input:
        raise ExtractionError(refused)
    others = [name for name in scales.input if name != quantise.output[1]]
    if len(others) != 1:
        raise ExtractionError(refused)
    scale = _per_column(graph.constant(others[0]), columns, "weight scale", node)
    weight = (w_q.astype(np.float64) - zero.astype(np.float64) if has_zero else w_q.astype(np.float64)) * scale
    return np.ascontiguousarray(weight.astype(np.float32).T), mul.output[0]


def _only_consumer(graph: _Graph, name: str, op_type: str) -> onnx.NodeProto | None:
    """The single node of type ``op_type`` that consumes ``name``, or None."""
    nodes = [n for n in graph.consumers.get(name, []) if n.op_type == op_type]
    return nodes[0] if len(nodes) == 1 else None


def _bias(graph: _Graph, output: str, out_features: int) -> tuple[np.ndarray | None, str]:
    """``(bias [out], value name after the bias)`` from the Add that consumes the projection's float ``output``, or
    ``(None, output)``."""
    add = _only_consumer(graph, output, "Add")
    if add is None:
        return None, output
    others = [name for name in add.input if name != output]
    bias = graph.constant(others[0]) if len(others) == 1 else None
    if bias is None or bias.ndim == 0 or bias.size != out_features or bias.shape[-1] != out_features:
        return None, output
    return np.ascontiguousarray(bias.astype(np.float32).reshape(out_features)), add.output[0]


def _head_split(graph: _Graph, value: str, out_features: int) -> tuple[int, int] | None:
    """``(heads, d_head)`` from the Reshape consuming ``value`` (the projection output), or None.

    Only the last two entries of the target shape are used: ``[..., heads, d_head]`` with at most one -1.
    """
    reshape = _only_consumer(graph, value, "Reshape")
    if reshape is None or len(reshape.input) < 2:
        return None
    tail = graph.shape_vector(reshape.input[1])[-2:]
    if len(tail) != 2 or _UNKNOWN in tail:
        return None
    heads, d_head = tail
    if heads == -1 and d_head > 0 and out_features % d_head == 0:
        heads = out_features // d_head
    elif d_head == -1 and heads > 0 and out_features % heads == 0:
        d_head = out_features // heads
    if heads > 0 and d_head > 0 and heads * d_head == out_features:
        return heads, d_head
    return None


def _projection(graph: _Graph, node: onnx.NodeProto) -> _Projection:
    """Weight, bias and head split of one projection MatMul (float, or int8 dequantised)."""
    if node.op_type == "MatMulInteger":
        weight, output = _integer_matmul(graph, node)
    else:
        weight, output = _matmul_weight(graph, node), node.output[0]
    bias, value = _bias(graph, output, weight.shape[0])
    return _Projection(node.name, weight, bias, _head_split(graph, value, weight.shape[0]))


def _head_count(layer: int, q: _Projection, k: _Projection, n_heads: int | None) -> int:
    """Head count of one layer: from the graph (query Reshape, else key Reshape), else ``n_heads``."""
    split = q.split or k.split
    if split is not None:
        if n_heads is not None and n_heads != split[0]:
            raise ExtractionError(
                f"layer {layer}: the graph splits {split[0]} heads of {split[1]} but n_heads={n_heads} was given"
            )
        return split[0]
    if n_heads is None:
        raise ExtractionError(
            f"cannot determine the head count of layer {layer} ({q.node_name!r}): no head-splitting"
            " Reshape with a constant [..., heads, d_head] shape; pass n_heads"
        )
    if n_heads < 1 or q.weight.shape[0] % n_heads:
        raise ExtractionError(f"n_heads={n_heads} does not divide the projection width {q.weight.shape[0]}")
    return n_heads


SWIN_EXTRAS = ("relative_position", "windows")


def _layer_projections(model: onnx.ModelProto, path) -> list[tuple[int, _Projection, _Projection, tuple[str, ...]]]:
    """``[(layer, query, key, extras)]`` in layer order, with matching query/key shapes checked; ``extras`` the
    family's terms (:data:`SWIN_EXTRAS` for blocks named by stage and block)."""
    graph = _Graph(model.graph)
    found = _find_attention_matmuls(graph)
    result = []
    for layer, key in enumerate(_check_layers(found, path)):
        q, k = _projection(graph, found[key]["q"]), _projection(graph, found[key]["k"])
        if q.weight.shape != k.weight.shape:
            raise ExtractionError(
                f"layer {layer}: query weight {q.weight.shape} and key weight {k.weight.shape} "
                "differ (grouped-query ONNX exports are not supported)"
            )
        result.append((layer, q, k, SWIN_EXTRAS if len(key) == 2 else ()))
    return result


def _per_head(array: np.ndarray, n_heads: int, name: str) -> torch.Tensor:
    """``[out, ...] -> [n_heads, d_head, ...]`` float32 tensor, checked finite."""
    tensor = torch.from_numpy(np.ascontiguousarray(array, dtype=np.float32))
    return check_finite(tensor.reshape(n_heads, -1, *tensor.shape[1:]), name)


def onnx_blocks(path, n_heads: int | None = None) -> Iterator[AttentionBlock]:
    """Yield one encoder :class:`AttentionBlock` per layer, in layer order, from an encoder's ONNX export (float, or
    int8 from onnxruntime's ``quantize_dynamic``, dequantised; module docstring).

    Args:
        path: the ``.onnx`` file (external data, if any, next to it).
        n_heads: head count, used only when the graph has no head-splitting Reshape with a constant shape; if the
            graph has one and ``n_heads`` disagrees, :class:`ExtractionError` is raised.

    Yields:
        blocks with ``w_q``, ``w_k`` ``[n_heads, d_head, d_model]`` float32 (``nn.Linear`` layout, unscaled; Swin's
        layers ``0..n-1`` over its (stage, block) pairs, ``d_model`` and heads those of the block's stage),
        ``b_q``, ``b_k`` ``[n_heads, d_head]`` when the graph adds a constant bias, ``stack="encoder"``,
        ``causal=False`` and ``source_name`` the query MatMul node name.

    Raises:
        ExtractionError: missing, invalid or truncated file; no recognisable attention MatMuls; undeterminable
            head count; NaN or inf in a weight or bias.
    """
    model = _load(path)
    for layer, q, k, family_extras in _layer_projections(model, path):
        heads = _head_count(layer, q, k, n_heads)
        b_q = None if q.bias is None else _per_head(q.bias, heads, f"{q.node_name} bias")
        b_k = None if k.bias is None else _per_head(k.bias, heads, f"{k.node_name} bias")
        extras = (*family_extras, *bias_extras(b_q, b_k))
        yield AttentionBlock(
            stack="encoder",
            layer=layer,
            w_q=_per_head(q.weight, heads, f"{q.node_name} weight"),
            w_k=_per_head(k.weight, heads, f"{k.node_name} weight"),
            causal=False,
            n_kv_heads=heads,
            b_q=b_q,
            b_k=b_k,
            extras=extras,
            source_name=q.node_name,
        )


def onnx_info(path, n_heads: int | None = None) -> dict:
    """``{"n_layers", "n_heads", "d_model", "d_head"}`` of an encoder's ONNX export (those of layer 0: head count from
    the graph or else ``n_heads``); raises :class:`ExtractionError` like :func:`onnx_blocks`."""
    model = _load(path)
    layers = _layer_projections(model, path)
    _, q, k, _ = layers[0]
    heads = _head_count(0, q, k, n_heads)
    out_features, d_model = q.weight.shape
    return {"n_layers": len(layers), "n_heads": heads, "d_model": d_model, "d_head": out_features // heads}
