"""Per-head query/key weights from GGUF checkpoints (the llama.cpp format), read one layer at a time.

A GGUF file stores each matrix with its dimensions reversed (``ne0`` is the input size), and
:mod:`~attnstruct.checkpoints.extract.gguf_header` gives them back in numpy order, so ``blk.N.attn_q.weight``
dequantizes to
``[n_heads * d_head, d_model]``: the ``nn.Linear`` layout of Hugging Face's ``q_proj.weight``. Only the metadata
values used here are decoded (not the vocabulary), and tensor data is read only when a layer is used. Two conversions
are undone here:

* llama.cpp's converter permutes the rows of Q (with ``n_heads``) and K (with ``n_kv_heads``) of the ``llama``
  architecture for its RoPE kernel: inside each head, the halves ``[0, d/2)`` and ``[d/2, d)`` are interleaved.
  :func:`undo_rope_permutation` restores Hugging Face's order (``gemma3`` and ``qwen2`` files are not permuted).
  The per-head form ``W_q[h]^T W_k[h]`` is the same either way, since Q and K rows move together within a head.
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

from ...untrusted import one_line
from .blocks import AttentionBlock, ExtractionError, bias_extras, check_finite, expand_kv_heads
from .gguf_header import GGUFHeader, read_gguf_header

SUPPORTED_GGUF_ARCHITECTURES = ("llama", "qwen2", "gemma3")
ROPE_PERMUTED_ARCHITECTURES = frozenset({"llama"})

_MISSING = object()
_GENERAL_KEYS = frozenset({"general.architecture", "general.name"})
_ARCH_KEYS = frozenset(
    {"block_count", "embedding_length", "attention.head_count", "attention.head_count_kv", "attention.key_length"}
)


def gguf_info(path: str | os.PathLike) -> dict:
    """Architecture and attention shape of a GGUF checkpoint, from its metadata.

    Returns:
        dict with ``architecture`` (str), ``name`` (``general.name`` or None), ``n_layers``, ``n_heads``,
        ``n_kv_heads``, ``d_model``, ``d_head`` (ints), ``q_type`` and ``k_type`` (the GGML type names of layer 0's
        query and key weights, e.g. ``"Q4_1"``; None when the tensor is absent) and ``rope_permuted`` (bool).
    """
    header = _open(path)
    info = _read_header(header, path)
    for key, name in (("q_type", "blk.0.attn_q.weight"), ("k_type", "blk.0.attn_k.weight")):
        info[key] = header.tensors[name].ggml_type.name if name in header.tensors else None
    return info


def gguf_blocks(path: str | os.PathLike) -> Iterator[AttentionBlock]:
    """One decoder self-attention :class:`AttentionBlock` per layer, dequantized one layer at a time as iterated.

    ``w_q`` and ``w_k`` are float32 ``[n_heads, d_head, d_model]``; key heads are expanded so that query head ``h``
    uses key head ``h // (n_heads / n_kv_heads)``. Biases are ``[n_heads, d_head]`` when the file has them.

    Raises:
        ExtractionError: on the call, for a missing, truncated or non-GGUF file or an unsupported architecture;
            while iterating, for a missing or misshapen tensor or NaN/inf in a weight.
    """
    header = _open(path)
    info = _read_header(header, path)
    return (_layer_block(header, info, layer, path) for layer in range(info["n_layers"]))


def undo_rope_permutation(w: np.ndarray, n_heads: int) -> np.ndarray:
    """Invert llama.cpp's RoPE row permutation: ``[n_heads * d_head, ...] -> [n_heads * d_head, ...]``.

    The converter maps row ``h*d + 2i + j`` (its layout) from row ``h*d + j*d/2 + i`` (Hugging Face's), ``j`` in
    {0, 1}; this is the inverse, for weights ``[rows, d_model]`` and biases ``[rows]`` alike.
    """
    half = w.shape[0] // n_heads // 2
    return w.reshape(n_heads, half, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _wanted_key(key: str) -> bool:
    """Whether :func:`_read_header` may need metadata ``key`` (``{arch}.`` keys are kept for every ``arch``)."""
    return key in _GENERAL_KEYS or key.partition(".")[2] in _ARCH_KEYS


def _open(path: str | os.PathLike) -> GGUFHeader:
    """Parse ``path``'s header and the metadata values :func:`_read_header` uses; tensor data stays on disk."""
    file = Path(path)
    if not file.is_file():
        raise ExtractionError(f"GGUF file {file}", "not found")
    return read_gguf_header(file, keep=_wanted_key)


def _field(header: GGUFHeader, key: str, path, default=_MISSING):
    """The value of metadata ``key`` (scalar, string or list), ``default`` when absent, else an error."""
    value = header.metadata.get(key, _MISSING)
    if value is _MISSING:
        if default is _MISSING:
            raise ExtractionError(f"{path}: GGUF metadata key {key} is missing")
        return default
    return value


def _count(header: GGUFHeader, key: str, path, default=_MISSING) -> int:
    """A positive integer field; per-layer arrays are accepted when all their entries agree."""
    value = _field(header, key, path, default)
    values = value if isinstance(value, list) else [value]
    if not values or len(set(values)) != 1:
        raise ExtractionError(f"{path}: GGUF metadata {key} varies across layers ({values}), which is not supported")
    number = values[0]
    if isinstance(number, bool) or not isinstance(number, int) or number < 1:
        raise ExtractionError(f"{path}: GGUF metadata {key} must be a positive integer, got {number!r}")
    return number


def _read_header(header: GGUFHeader, path) -> dict:
    """Architecture and attention sizes from the metadata, checked for consistency."""
    arch = _field(header, "general.architecture", path)
    if arch not in SUPPORTED_GGUF_ARCHITECTURES:
        raise ExtractionError(
            f"{path}: GGUF architecture {arch!r}; supported: {', '.join(SUPPORTED_GGUF_ARCHITECTURES)}",
            "unsupported architecture",
        )
    n_layers = _count(header, f"{arch}.block_count", path)
    d_model = _count(header, f"{arch}.embedding_length", path)
    n_heads = _count(header, f"{arch}.attention.head_count", path)
    n_kv_heads = _count(header, f"{arch}.attention.head_count_kv", path, default=n_heads)
    if n_heads % n_kv_heads:
        raise ExtractionError(f"{path}: {n_heads} query heads cannot share {n_kv_heads} key heads evenly")
    d_head = _count(header, f"{arch}.attention.key_length", path, default=d_model // n_heads)
    return {
        "architecture": arch,
        "name": _field(header, "general.name", path, default=None),
        "n_layers": n_layers,
        "n_heads": n_heads,
        "n_kv_heads": n_kv_heads,
        "d_model": d_model,
        "d_head": d_head,
        "rope_permuted": arch in ROPE_PERMUTED_ARCHITECTURES,
    }


def _tensor(header: GGUFHeader, name: str, shape: tuple[int, ...], path, required: bool = True) -> np.ndarray | None:
    """Dequantize tensor ``name`` to a float32 array of ``shape`` (numpy order), checked finite; None if optional."""
    if name not in header.tensors:
        if required:
            raise ExtractionError(f"{path}: tensor {name} is missing")
        return None
    try:
        values = np.array(header.dequantize(name), dtype=np.float32)
    except Exception as exc:
        type_name = header.tensors[name].ggml_type.name
        raise ExtractionError(f"{path}: cannot dequantize {name} ({type_name}): {one_line(exc)}") from exc
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


def _layer_block(header: GGUFHeader, info: dict, layer: int, path) -> AttentionBlock:
    """Read, dequantize and reshape the query/key tensors of one layer."""
    n_heads, n_kv, d_head, d_model = info["n_heads"], info["n_kv_heads"], info["d_head"], info["d_model"]
    permuted = info["rope_permuted"]
    prefix = f"blk.{layer}."
    q = _tensor(header, prefix + "attn_q.weight", (n_heads * d_head, d_model), path)
    k = _tensor(header, prefix + "attn_k.weight", (n_kv * d_head, d_model), path)
    b_q = _tensor(header, prefix + "attn_q.bias", (n_heads * d_head,), path, required=False)
    b_k = _tensor(header, prefix + "attn_k.bias", (n_kv * d_head,), path, required=False)
    has_qk_norm = prefix + "attn_q_norm.weight" in header.tensors or prefix + "attn_k_norm.weight" in header.tensors
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
