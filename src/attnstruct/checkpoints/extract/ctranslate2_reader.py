"""Query/key weights from CTranslate2 Whisper models (as used by faster-whisper), with numpy only.

The container (header, variables, aliases, dtypes, dequantization) is read by
:mod:`attnstruct.checkpoints.extract.ctranslate2_format`; its public names are importable from here too. This module
knows
the Whisper layout. Whisper's converter fuses the projections row-wise (the ``nn.Linear`` out x in layout):
self-attention ``{encoder,decoder}/layer_{i}/self_attention/linear_0`` is [W_q; W_k; W_v] with bias
[b_q; 0; b_v], and the decoder cross-attention has ``attention/linear_0`` = W_q and ``attention/linear_1`` =
[W_k; W_v] with bias [0; b_v]. The head counts are the int16 scalars ``encoder/num_heads`` and
``decoder/num_heads`` (else ``config.json``, else the caller's ``n_heads``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator

import numpy as np
import torch

from .blocks import AttentionBlock, ExtractionError, bias_extras, check_finite
from .ctranslate2_format import (  # noqa: F401  (re-exported: callers import the container readers from here)
    BFLOAT16,
    BINARY_VERSION,
    DTYPES,
    MODEL_FILE,
    Header,
    ModelFile,
    VariableInfo,
    read_ctranslate2,
    read_header,
    resolve_model_file,
)

CONFIG_FILE = "config.json"
SUPPORTED_SPECS = ("WhisperSpec",)

# Per scope: config.json keys that may hold the head count when the file does not.
_CONFIG_HEAD_KEYS = {
    "encoder": ("encoder_attention_heads", "num_encoder_heads", "num_heads"),
    "decoder": ("decoder_attention_heads", "num_decoder_heads", "num_heads"),
}


def _check_spec(checkpoint: ModelFile) -> None:
    spec = checkpoint.header.spec
    if spec not in SUPPORTED_SPECS:
        raise ExtractionError(
            f"CTranslate2 spec {spec!r} in {checkpoint.path} (supported: {', '.join(SUPPORTED_SPECS)})",
            "unsupported architecture",
        )


def _count_layers(checkpoint: ModelFile, scope: str) -> int:
    """Number of ``{scope}/layer_{i}/`` layers; raise unless they are numbered 0..n-1 and n > 0."""
    pattern = re.compile(rf"^{re.escape(scope)}/layer_(\d+)/")
    names = list(checkpoint.header.variables) + list(checkpoint.header.aliases)
    indices = {int(m.group(1)) for m in map(pattern.match, names) if m}
    if not indices:
        raise ExtractionError(f"no {scope} layers ({scope}/layer_0/...) in {checkpoint.path}")
    if max(indices) != len(indices) - 1:  # numbered from 0 without a gap; nothing is sized by the largest number
        raise ExtractionError(
            f"the {len(indices)} {scope} layers of {checkpoint.path} are not numbered 0 to {len(indices) - 1}: "
            f"it names layer {max(indices)}"
        )
    return len(indices)


def _config_heads(checkpoint: ModelFile, scope: str) -> int | None:
    config_path = checkpoint.path.parent / CONFIG_FILE
    if not config_path.is_file():
        return None
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    for key in _CONFIG_HEAD_KEYS[scope] if isinstance(config, dict) else ():
        if isinstance(config.get(key), int) and not isinstance(config[key], bool):
            return config[key]
    return None


def _head_count(checkpoint: ModelFile, scope: str, n_heads: int | None) -> int | None:
    """Heads of ``scope`` from the file's ``{scope}/num_heads``, else config.json, else ``n_heads``.

    Raise if ``n_heads`` is given and contradicts the value stored with the model.
    """
    stored = checkpoint.scalar(f"{scope}/num_heads")
    if stored is None:
        stored = _config_heads(checkpoint, scope)
    if stored is not None and n_heads is not None and stored != n_heads:
        raise ExtractionError(f"n_heads={n_heads} given but {checkpoint.path} stores {stored} {scope} heads")
    found = stored if stored is not None else n_heads
    if found is not None and found < 1:
        raise ExtractionError(f"invalid {scope} head count {found} for {checkpoint.path}")
    return found


def _require_heads(checkpoint: ModelFile, scope: str, n_heads: int | None) -> int:
    found = _head_count(checkpoint, scope, n_heads)
    if found is None:
        raise ExtractionError(
            f"no {scope}/num_heads in {checkpoint.path} and no {CONFIG_FILE} head count; pass n_heads"
        )
    return found


def _split_heads(rows: np.ndarray, n_heads: int, name: str) -> torch.Tensor:
    """``[n_heads * d_head, d_model]`` -> ``[n_heads, d_head, d_model]`` (or a bias ``[n_heads, d_head]``)."""
    if rows.shape[0] % n_heads:
        raise ExtractionError(f"{name}: {rows.shape[0]} rows do not split into {n_heads} heads")
    tensor = torch.from_numpy(np.ascontiguousarray(rows, dtype=np.float32))
    return check_finite(tensor.reshape(n_heads, rows.shape[0] // n_heads, *rows.shape[1:]), name)


def _fused_rows(checkpoint: ModelFile, prefix: str, parts: int) -> tuple[int, int]:
    """``(rows per part, d_model)`` of the fused weight ``{prefix}/weight`` made of ``parts`` equal blocks."""
    shape = checkpoint.info(f"{prefix}/weight").shape
    if len(shape) != 2 or shape[0] % parts or 0 in shape:
        raise ExtractionError(
            f"{prefix}/weight in {checkpoint.path} has shape {list(shape)}, expected [{parts} x inner, d_model]"
        )
    return shape[0] // parts, shape[1]


def _projection(checkpoint: ModelFile, prefix: str, part: int, parts: int, n_heads: int, label: str):
    """Part ``part`` of ``parts`` of the fused linear ``prefix``: weight ``[n_heads, d_head, d_model]`` and bias
    ``[n_heads, d_head]`` (None when the file has no bias)."""
    inner, _ = _fused_rows(checkpoint, prefix, parts)
    start, stop = part * inner, (part + 1) * inner
    weight_name, bias_name = f"{prefix}/weight", f"{prefix}/bias"
    weight = _split_heads(checkpoint.float_rows(weight_name, start, stop), n_heads, f"{weight_name} ({label} rows)")
    bias = None
    if checkpoint.has(bias_name):
        bias_shape = checkpoint.info(bias_name).shape
        if bias_shape != (parts * inner,):
            raise ExtractionError(
                f"{bias_name} in {checkpoint.path} has shape {list(bias_shape)}, expected [{parts * inner}]"
            )
        bias = _split_heads(checkpoint.float_rows(bias_name, start, stop), n_heads, f"{bias_name} ({label} part)")
    return weight, bias


def _block(stack: str, layer: int, causal: bool, query, key, source_name: str) -> AttentionBlock:
    (w_q, b_q), (w_k, b_k) = query, key
    if w_q.shape != w_k.shape:
        raise ExtractionError(f"{source_name}: query {list(w_q.shape)} and key {list(w_k.shape)} shapes differ")
    extras = bias_extras(b_q, b_k)
    return AttentionBlock(
        stack=stack,
        layer=layer,
        w_q=w_q,
        w_k=w_k,
        causal=causal,
        n_kv_heads=w_q.shape[0],
        b_q=b_q,
        b_k=b_k,
        extras=extras,
        source_name=source_name,
    )


def _self_attention(checkpoint: ModelFile, stack: str, layer: int, n_heads: int) -> AttentionBlock:
    prefix = f"{stack}/layer_{layer}/self_attention/linear_0"
    query = _projection(checkpoint, prefix, 0, 3, n_heads, "query")
    key = _projection(checkpoint, prefix, 1, 3, n_heads, "key")
    return _block(stack, layer, stack == "decoder", query, key, f"{prefix}/weight")


def _cross_attention(checkpoint: ModelFile, layer: int, n_heads: int) -> AttentionBlock:
    prefix = f"decoder/layer_{layer}/attention"
    query = _projection(checkpoint, f"{prefix}/linear_0", 0, 1, n_heads, "query")
    key = _projection(checkpoint, f"{prefix}/linear_1", 0, 2, n_heads, "key")
    return _block("cross", layer, False, query, key, f"{prefix}/linear_0/weight")


def ctranslate2_blocks(path: str | os.PathLike, n_heads: int | None = None) -> Iterator[AttentionBlock]:
    """Attention blocks of a CTranslate2 Whisper model (directory or ``model.bin``), layer by layer.

    For each layer ``i``: encoder self-attention (``causal=False``), then decoder self-attention (``causal=True``)
    and cross-attention (``causal=False``), as far as each stack has layer ``i``. ``w_q``/``w_k`` are float32
    ``[n_heads, d_head, d_model]``; biases ``[n_heads, d_head]`` (the key bias is kept even though Whisper's is 0).
    The head count comes from the file (``{encoder,decoder}/num_heads``), else ``config.json``, else ``n_heads``.
    """
    checkpoint = ModelFile(path)
    _check_spec(checkpoint)
    n_encoder, n_decoder = _count_layers(checkpoint, "encoder"), _count_layers(checkpoint, "decoder")
    heads = {scope: _require_heads(checkpoint, scope, n_heads) for scope in ("encoder", "decoder")}
    for layer in range(max(n_encoder, n_decoder)):
        if layer < n_encoder:
            yield _self_attention(checkpoint, "encoder", layer, heads["encoder"])
        if layer < n_decoder:
            yield _self_attention(checkpoint, "decoder", layer, heads["decoder"])
            yield _cross_attention(checkpoint, layer, heads["decoder"])


def ctranslate2_info(path: str | os.PathLike, n_heads: int | None = None) -> dict:
    """Summary of a CTranslate2 Whisper model from its header (no weights are read).

    Keys: ``spec``, ``revision``, ``n_encoder_layers``, ``n_decoder_layers``, ``n_heads`` (encoder heads; None if
    neither the file, its config.json nor ``n_heads`` gives it), ``n_decoder_heads``, ``d_model``, ``dtype`` (storage
    type of the attention weights) and ``n_variables``.
    """
    checkpoint = ModelFile(path)
    _check_spec(checkpoint)
    weight = checkpoint.info("encoder/layer_0/self_attention/linear_0/weight")
    return {
        "spec": checkpoint.header.spec,
        "revision": checkpoint.header.revision,
        "n_encoder_layers": _count_layers(checkpoint, "encoder"),
        "n_decoder_layers": _count_layers(checkpoint, "decoder"),
        "n_heads": _head_count(checkpoint, "encoder", n_heads),
        "n_decoder_heads": _head_count(checkpoint, "decoder", n_heads),
        "d_model": weight.shape[-1],
        "dtype": weight.dtype_name,
        "n_variables": len(checkpoint.header.variables),
    }
