"""Per-head query/key weights from GGUF checkpoints (the llama.cpp format), read one layer at a time.

A GGUF file stores each matrix with its dimensions reversed (``ne0`` is the input size), and ``gguf``'s reader gives
them back in numpy order, so ``blk.N.attn_q.weight`` dequantizes to ``[n_heads * d_head, d_model]``: the
``nn.Linear`` layout of Hugging Face's ``q_proj.weight``. Two conversions are undone here:

* llama.cpp's converter permutes the rows of Q (with ``n_heads``) and K (with ``n_kv_heads``) of the ``llama``
  architecture for its RoPE kernel: inside each head, the halves ``[0, d/2)`` and ``[d/2, d)`` are interleaved.
  :func:`undo_rope_permutation` restores Hugging Face's order (``gemma3`` and ``qwen2`` files are not permuted).
  The per-head form ``W_q^h^T W_k^h`` is the same either way, since Q and K rows move together within a head.
* Key heads are expanded to pair with query heads (grouped-query and multi-query attention).

The ``attn_q_norm``/``attn_k_norm`` gains of QK-norm models (gemma3) are not part of :class:`AttentionBlock`; the
GGUF holds the effective gain ``1 + w`` where Hugging Face stores ``w``. Blocks of such models carry ``"qk_norm"``
in ``extras``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch
from gguf import GGUFReader
from gguf.quants import dequantize

from .blocks import AttentionBlock, ExtractionError, bias_extras, check_finite, expand_kv_heads

SUPPORTED_GGUF_ARCHITECTURES = ("llama", "qwen2", "gemma3")
ROPE_PERMUTED_ARCHITECTURES = frozenset({"llama"})

_MISSING = object()


def gguf_info(path: str | os.PathLike) -> dict:
    """Architecture and attention shape of a GGUF checkpoint, from its metadata.

    Returns:
        dict with ``architecture`` (str), ``name`` (``general.name`` or None), ``n_layers``, ``n_heads``,
        ``n_kv_heads``, ``d_model``, ``d_head`` (ints), ``q_type`` and ``k_type`` (the GGML type names of layer 0's
        query and key weights, e.g. ``"Q4_1"``; None when the tensor is absent) and ``rope_permuted`` (bool).
    """
    reader = _open(path)
    info = _read_header(reader, path)
    tensors = {t.name: t for t in reader.tensors}
    for key, name in (("q_type", "blk.0.attn_q.weight"), ("k_type", "blk.0.attn_k.weight")):
        info[key] = tensors[name].tensor_type.name if name in tensors else None
    return info


def gguf_blocks(path: str | os.PathLike) -> Iterator[AttentionBlock]:
    """One decoder self-attention :class:`AttentionBlock` per layer, dequantized one layer at a time as iterated.

    ``w_q`` and ``w_k`` are float32 ``[n_heads, d_head, d_model]``; key heads are expanded so that query head ``h``
    uses key head ``h // (n_heads / n_kv_heads)``. Biases are ``[n_heads, d_head]`` when the file has them.

    Raises:
        ExtractionError: on the call, for a missing, truncated or non-GGUF file or an unsupported architecture;
            while iterating, for a missing or misshapen tensor or NaN/inf in a weight.
    """
    reader = _open(path)
    info = _read_header(reader, path)
    tensors = {t.name: t for t in reader.tensors}
    return (_layer_block(tensors, info, layer, path) for layer in range(info["n_layers"]))


def undo_rope_permutation(w: np.ndarray, n_heads: int) -> np.ndarray:
    """Invert llama.cpp's RoPE row permutation: ``[n_heads * d_head, ...] -> [n_heads * d_head, ...]``.

    The converter maps row ``h*d + 2i + j`` (its layout) from row ``h*d + j*d/2 + i`` (Hugging Face's), ``j`` in
    {0, 1}; this is the inverse, for weights ``[rows, d_model]`` and biases ``[rows]`` alike.
    """
    half = w.shape[0] // n_heads // 2
    return w.reshape(n_heads, half, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _open(path: str | os.PathLike) -> GGUFReader:
    """Open ``path`` with ``gguf``'s memory-mapped reader (tensor data is read only when a tensor is used)."""
    file = Path(path)
    if not file.is_file():
        raise ExtractionError(f"GGUF file not found: {file}")
    try:
        reader = GGUFReader(file)
    except Exception as exc:
        raise ExtractionError(f"{file} is not a readable GGUF file (not GGUF or truncated): {_one_line(exc)}") from exc
    if reader.byte_order != "I":
        raise ExtractionError(f"{file} is a GGUF file of the other byte order, which is not supported")
    return reader


def _field(reader: GGUFReader, key: str, path, default=_MISSING):
    """The value of metadata ``key`` (scalar, string or list), ``default`` when absent, else an error."""
    field = reader.get_field(key)
    if field is None:
        if default is _MISSING:
            raise ExtractionError(f"{path}: GGUF metadata key {key} is missing")
        return default
    try:
        return field.contents()
    except Exception as exc:
        raise ExtractionError(f"{path}: cannot read GGUF metadata key {key}: {_one_line(exc)}") from exc


def _count(reader: GGUFReader, key: str, path, default=_MISSING) -> int:
    """A positive integer field; per-layer arrays are accepted when all their entries agree."""
    value = _field(reader, key, path, default)
    values = value if isinstance(value, list) else [value]
    if not values or len(set(values)) != 1:
        raise ExtractionError(f"{path}: GGUF metadata {key} varies across layers ({values}), which is not supported")
    number = values[0]
    if isinstance(number, bool) or not isinstance(number, int) or number < 1:
        raise ExtractionError(f"{path}: GGUF metadata {key} must be a positive integer, got {number!r}")
    return number


def _read_header(reader: GGUFReader, path) -> dict:
    """Architecture and attention sizes from the metadata, checked for consistency."""
    arch = _field(reader, "general.architecture", path)
    if arch not in SUPPORTED_GGUF_ARCHITECTURES:
        raise ExtractionError(
            f"{path}: unsupported GGUF architecture {arch!r}; supported: {', '.join(SUPPORTED_GGUF_ARCHITECTURES)}"
        )
    n_layers = _count(reader, f"{arch}.block_count", path)
    d_model = _count(reader, f"{arch}.embedding_length", path)
    n_heads = _count(reader, f"{arch}.attention.head_count", path)
    n_kv_heads = _count(reader, f"{arch}.attention.head_count_kv", path, default=n_heads)
    if n_heads % n_kv_heads:
        raise ExtractionError(f"{path}: {n_heads} query heads cannot share {n_kv_heads} key heads evenly")
    d_head = _count(reader, f"{arch}.attention.key_length", path, default=d_model // n_heads)
    return {
        "architecture": arch,
        "name": _field(reader, "general.name", path, default=None),
        "n_layers": n_layers,
        "n_heads": n_heads,
        "n_kv_heads": n_kv_heads,
        "d_model": d_model,
        "d_head": d_head,
        "rope_permuted": arch in ROPE_PERMUTED_ARCHITECTURES,
    }


def _tensor(tensors: dict, name: str, shape: tuple[int, ...], path, required: bool = True) -> np.ndarray | None:
    """Dequantize tensor ``name`` to a float32 array of ``shape`` (numpy order), checked finite; None if optional."""
    if name not in tensors:
        if required:
            raise ExtractionError(f"{path}: tensor {name} is missing")
        return None
    tensor = tensors[name]
    try:
        values = np.array(dequantize(tensor.data, tensor.tensor_type), dtype=np.float32)
    except Exception as exc:
        raise ExtractionError(
            f"{path}: cannot dequantize {name} ({tensor.tensor_type.name}): {_one_line(exc)}"
        ) from exc
    if values.shape != shape:
        raise ExtractionError(f"{path}: tensor {name} has shape {values.shape}, expected {shape}")
    check_finite(torch.from_numpy(values), name)
    return values


def _heads(values: np.ndarray | None, n_heads: int, n_kv: int, d_head: int, permuted: bool) -> torch.Tensor | None:
    """``[n_kv * d_head, ...] -> [n_heads, d_head, ...]``: undo the RoPE permutation, split heads, expand to queries."""
    if values is None:
        return None
    if permuted:
        values = undo_rope_permutation(values, n_kv)
    heads = torch.from_numpy(np.ascontiguousarray(values)).reshape(n_kv, d_head, *values.shape[1:])
    return expand_kv_heads(heads, n_heads)


def _layer_block(tensors: dict, info: dict, layer: int, path) -> AttentionBlock:
    """Read, dequantize and reshape the query/key tensors of one layer."""
    n_heads, n_kv, d_head, d_model = info["n_heads"], info["n_kv_heads"], info["d_head"], info["d_model"]
    permuted = info["rope_permuted"]
    prefix = f"blk.{layer}."
    q = _tensor(tensors, prefix + "attn_q.weight", (n_heads * d_head, d_model), path)
    k = _tensor(tensors, prefix + "attn_k.weight", (n_kv * d_head, d_model), path)
    b_q = _tensor(tensors, prefix + "attn_q.bias", (n_heads * d_head,), path, required=False)
    b_k = _tensor(tensors, prefix + "attn_k.bias", (n_kv * d_head,), path, required=False)
    has_qk_norm = prefix + "attn_q_norm.weight" in tensors or prefix + "attn_k_norm.weight" in tensors
    b_q, b_k = _heads(b_q, n_heads, n_heads, d_head, permuted), _heads(b_k, n_heads, n_kv, d_head, permuted)
    return AttentionBlock(
        stack="decoder",
        layer=layer,
        causal=True,
        n_kv_heads=n_kv,
        w_q=_heads(q, n_heads, n_heads, d_head, permuted),
        w_k=_heads(k, n_heads, n_kv, d_head, permuted),
        b_q=b_q,
        b_k=b_k,
        extras=("rotary", *bias_extras(b_q, b_k)) + ("qk_norm",) * has_qk_norm,
        source_name=prefix + "attn_q.weight",
    )
