"""A GGUF file's header, parsed only as far as asked: chosen metadata values, tensor infos, raw tensor views.

Layout of GGUF versions 2 and 3 (llama.cpp's ``docs/gguf.md``), little-endian, with no padding before the data::

    magic b"GGUF" | version uint32 | n_tensors uint64 | n_kv uint64
    n_kv      x  key string | value_type uint32 | value
    n_tensors x  name string | n_dims uint32 | dims uint64[n_dims] | ggml_type uint32 | offset uint64
    zero padding to a multiple of ``general.alignment`` (a uint32 key; 32 when absent), then the tensor data

    string = length uint64, then that many UTF-8 bytes
    value  = scalar (value types 0-7 and 10-12: 1 to 8 bytes) | string (8) |
             array (9) = item_type uint32, count uint64, count items (items may be arrays)

``dims`` are ``[ne0, ne1, ...]``, innermost first, so a tensor is ``[..., ne1, ne0]`` in numpy order:
``blk.N.attn_q.weight`` is ``[n_heads * d_head, d_model]``. Its data starts ``offset`` bytes after the data start; a
quantized row is ``ne0 / block_size`` blocks of ``type_size`` bytes (``gguf.constants.GGML_QUANT_SIZES``).

Metadata values not asked for are skipped by their sizes without building Python objects (a 150k-token vocabulary
costs one walk over its string lengths), which is what makes this faster to open than ``gguf.GGUFReader``.
"""

from __future__ import annotations

import math
import mmap
import os
import struct
from collections.abc import Callable, Collection
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFValueType
from gguf.quants import dequantize

from .blocks import ExtractionError

# struct codes of the scalar value types: UINT8 INT8 UINT16 INT16 UINT32 INT32 FLOAT32 BOOL, UINT64 INT64 FLOAT64
_SCALARS = {vtype: struct.Struct("<" + code) for vtype, code in zip((*range(8), 10, 11, 12), "BbHhIif?Qqd")}
_U32, _U64, _MAGIC = _SCALARS[GGUFValueType.UINT32], _SCALARS[GGUFValueType.UINT64], struct.Struct("4s")
_PLAIN = dict(F32="<f4", F16="<f2", F64="<f8", I8="i1", I16="<i2", I32="<i4", I64="<i8")
_PLAIN_DTYPES = {GGMLQuantizationType[name]: np.dtype(code) for name, code in _PLAIN.items()}
ALIGNMENT_KEY, DEFAULT_ALIGNMENT, MAX_DIMS = "general.alignment", 32, 4


class _Malformed(ValueError):
    """A problem found while parsing; turned into a one-line :class:`ExtractionError` naming the file (of kind
    ``truncated`` when ``truncated`` is set)."""

    def __init__(self, message: str, *, truncated: bool = False):
        super().__init__(message)
        self.truncated = truncated


@dataclass(frozen=True)
class TensorInfo:
    """Where a tensor lies: ``shape`` in numpy order (``dims`` reversed), ``offset`` from the start of the file."""

    name: str
    shape: tuple[int, ...]
    ggml_type: GGMLQuantizationType
    offset: int
    n_bytes: int

    @property
    def n_elements(self) -> int:
        return math.prod(self.shape)


@dataclass(frozen=True)
class GGUFHeader:
    """The kept ``metadata`` values and every tensor's :class:`TensorInfo`, over a read-only map of the file."""

    path: Path
    version: int
    metadata: dict[str, Any]
    tensors: dict[str, TensorInfo]
    alignment: int
    data_offset: int
    buffer: Any = field(repr=False)

    def raw(self, name: str) -> np.ndarray:
        """Read-only view of tensor ``name``'s bytes, as ``gguf.GGUFReader``'s ``tensor.data``.

        Float and integer types: their dtype, ``shape``. Quantized types: uint8 ``[..., ne1, ne0 / block * size]``.
        """
        info = self.tensors[name]
        if info.ggml_type in _PLAIN_DTYPES:
            dtype = _PLAIN_DTYPES[info.ggml_type]
            return np.frombuffer(self.buffer, dtype, info.n_bytes // dtype.itemsize, info.offset).reshape(info.shape)
        block, size = GGML_QUANT_SIZES[info.ggml_type]
        row = info.shape[-1] // block * size
        return np.frombuffer(self.buffer, np.uint8, info.n_bytes, info.offset).reshape(*info.shape[:-1], row)

    def dequantize(self, name: str) -> np.ndarray:
        """Tensor ``name`` as float32 ``shape`` (F32 tensors: a read-only view on the file)."""
        return dequantize(self.raw(name), self.tensors[name].ggml_type)


def read_gguf_header(path: str | os.PathLike, keep: Callable[[str], bool] | Collection[str] = ()) -> GGUFHeader:
    """Parse ``path``'s header, keeping the values of the metadata keys in ``keep`` (or for which it is true).

    Raises:
        ExtractionError: one line naming the problem: unreadable, truncated, not GGUF, big-endian, a version other
            than 2 or 3, an unknown value or GGML type, or tensor data past the end of the file.
    """
    path = Path(path)
    wanted = keep if callable(keep) else frozenset(keep).__contains__
    cursor = _Cursor(_map(path))
    try:
        version, n_tensors, n_kv = _read_fixed(cursor, path)
        metadata, alignment = _read_metadata(cursor, n_kv, wanted)
        infos = _read_tensor_infos(cursor, n_tensors)
        data_offset = -(-cursor.pos // alignment) * alignment
        cursor.where = "in the tensor data"
        tensors = _place_tensors(infos, data_offset, len(cursor.buf))
    except struct.error:
        raise ExtractionError(
            f"{path} is not a readable GGUF file: it ends at byte {len(cursor.buf)}, {cursor.where}", "truncated"
        ) from None
    except (_Malformed, UnicodeDecodeError, RecursionError) as exc:
        kind = "truncated" if getattr(exc, "truncated", False) else "error"
        raise ExtractionError(f"{path} is not a readable GGUF file: {exc} ({cursor.where})", kind) from None
    return GGUFHeader(path, version, metadata, tensors, alignment, data_offset, cursor.buf)


def _map(path: Path) -> mmap.mmap | bytes:
    """A read-only memory map of the file (``b""`` for an empty one, which cannot be mapped)."""
    try:
        with open(path, "rb") as handle:
            if os.fstat(handle.fileno()).st_size == 0:
                return b""
            return mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as exc:
        raise ExtractionError(f"cannot read GGUF file {path}: {exc.strerror or exc}") from None


class _Cursor:
    """Reads little-endian values from ``buf`` at ``pos`` and moves past them; ``where`` names the part for errors."""

    def __init__(self, buf: mmap.mmap | bytes):
        self.buf, self.pos, self.where = buf, 0, "in the header"

    def take(self, fmt: struct.Struct) -> Any:
        value = fmt.unpack_from(self.buf, self.pos)[0]
        self.pos += fmt.size
        return value

    def skip(self, n_bytes: int) -> int:
        """Move ``n_bytes`` on; return where they start."""
        start, self.pos = self.pos, self.pos + n_bytes
        if self.pos > len(self.buf):
            raise struct.error("past the end")
        return start

    def string(self) -> str:
        start = self.skip(self.take(_U64))
        return str(self.buf[start : self.pos], "utf-8")

    def value(self, vtype: int) -> Any:
        """A scalar, a str, or a list of them (nested lists for arrays of arrays)."""
        if vtype in _SCALARS:
            return self.take(_SCALARS[vtype])
        if vtype == GGUFValueType.STRING:
            return self.string()
        item, count = self._array_head(vtype)
        if item in _SCALARS:
            dtype = np.dtype(_SCALARS[item].format)
            return np.frombuffer(self.buf, dtype, count, self.skip(count * dtype.itemsize)).tolist()
        return [self.value(item) for _ in range(count)]

    def skip_value(self, vtype: int) -> None:
        if vtype in _SCALARS:
            self.skip(_SCALARS[vtype].size)
        elif vtype == GGUFValueType.STRING:
            self.skip(self.take(_U64))
        else:
            item, count = self._array_head(vtype)
            if item in _SCALARS:
                self.skip(count * _SCALARS[item].size)
            elif item == GGUFValueType.STRING:
                self.skip(_skip_strings(self.buf, self.pos, count) - self.pos)
            else:
                for _ in range(count):
                    self.skip_value(item)

    def _array_head(self, vtype: int) -> tuple[int, int]:
        if vtype != GGUFValueType.ARRAY:
            raise _Malformed(f"unknown value type {vtype}")
        return self.take(_U32), self.take(_U64)


def _skip_strings(buf: mmap.mmap | bytes, pos: int, count: int) -> int:
    """End of ``count`` strings from ``pos``: a loop over ``unpack_from`` (on a 151k vocabulary, 24 ms; numpy: 130)."""
    unpack = _U64.unpack_from
    for _ in range(count):
        pos += 8 + unpack(buf, pos)[0]
    return pos


def _read_fixed(cursor: _Cursor, path: Path) -> tuple[int, int, int]:
    """Magic and version, checked; the tensor and key/value counts."""
    magic = cursor.take(_MAGIC)
    if magic != b"GGUF":
        raise _Malformed(f"bad magic {magic!r}, expected b'GGUF'")
    version = cursor.take(_U32)
    if version and not version & 0xFFFF:
        raise ExtractionError(f"{path} is a GGUF file of the other byte order, which is not supported")
    if version not in (2, 3):
        raise _Malformed(f"GGUF version {version} is not supported (2 and 3 are)")
    return version, cursor.take(_U64), cursor.take(_U64)


def _read_metadata(cursor: _Cursor, n_kv: int, wanted: Callable[[str], bool]) -> tuple[dict[str, Any], int]:
    """The wanted key/values, other values skipped; and the data alignment."""
    metadata, seen, alignment = {}, set(), DEFAULT_ALIGNMENT
    for index in range(n_kv):
        cursor.where = f"in the metadata, key/value {index} of {n_kv}"
        key = cursor.string()
        cursor.where = f"in the value of metadata key {key!r}"
        if key in seen:
            raise _Malformed("a repeated key")
        seen.add(key)
        vtype, keep = cursor.take(_U32), wanted(key)
        if not (keep or key == ALIGNMENT_KEY):
            cursor.skip_value(vtype)
            continue
        value = cursor.value(vtype)
        if key == ALIGNMENT_KEY:
            if vtype != GGUFValueType.UINT32 or value < 1 or value & (value - 1):
                raise _Malformed(f"the alignment must be a uint32 power of two, got {value!r}")
            alignment = value
        if keep:
            metadata[key] = value
    return metadata, alignment


def _read_tensor_infos(cursor: _Cursor, n_tensors: int) -> dict[str, TensorInfo]:
    """:class:`TensorInfo` by name, ``offset`` from the data start; checked: unique, known type, whole blocks."""
    infos = {}
    for index in range(n_tensors):
        cursor.where = f"in the tensor infos, tensor {index} of {n_tensors}"
        name = cursor.string()
        cursor.where = f"in the tensor info of {name!r}"
        n_dims = cursor.take(_U32)
        if name in infos or n_dims > MAX_DIMS:
            raise _Malformed("a repeated name" if name in infos else f"{n_dims} dimensions (at most {MAX_DIMS})")
        dims = struct.unpack_from(f"<{n_dims}Q", cursor.buf, cursor.skip(8 * n_dims))
        raw_type, offset = cursor.take(_U32), cursor.take(_U64)
        if raw_type not in GGMLQuantizationType._value2member_map_:
            raise _Malformed(f"unknown GGML type {raw_type}")
        ggml_type = GGMLQuantizationType(raw_type)
        block, size = GGML_QUANT_SIZES[ggml_type]
        if not dims or dims[0] % block:
            raise _Malformed(f"dims {list(dims)} are not whole rows of {ggml_type.name} blocks of {block}")
        infos[name] = TensorInfo(name, dims[::-1], ggml_type, offset, math.prod(dims) // block * size)
    return infos


def _place_tensors(infos: dict[str, TensorInfo], data_offset: int, file_size: int) -> dict[str, TensorInfo]:
    """``infos`` with offsets from the start of the file, checked to end inside it."""
    tensors = {name: replace(info, offset=data_offset + info.offset) for name, info in infos.items()}
    for name, info in tensors.items():
        if (end := info.offset + info.n_bytes) > file_size:
            raise _Malformed(f"tensor {name!r} ends at byte {end} of {file_size}", truncated=True)
    return tensors
