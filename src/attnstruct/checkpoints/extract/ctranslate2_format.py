"""The CTranslate2 ``model.bin`` container, with numpy only: its header, and its variables as memory-map views.

The binary format (version 6, little-endian), as written by ``ctranslate2.specs.ModelSpec._serialize``::

    u32 version | string spec_name | u32 revision | u32 n_vars
    n_vars x (string name | u8 rank | u32 dims[rank] | u8 dtype | u32 nbytes | nbytes of raw data)
    u32 n_aliases | n_aliases x (string alias | string target)

where a string is a u16 length (counting a trailing NUL) followed by that many bytes, and dtype is 0 float32,
1 int8, 2 int16, 3 int32, 4 float16, 5 bfloat16. Variables are stored without padding, so they are read through
one read-only ``numpy.memmap`` of the file: the header is parsed with seeks and no variable is copied until used.
Weights quantized by the converter (int8 or int16 with a sibling ``weight_scale``) are dequantized as
``weight / scale`` (:meth:`ModelFile.float_rows`). Which variables make up a model is the business of the layout
readers (:mod:`attnstruct.checkpoints.extract.ctranslate2_reader` for Whisper).
"""

from __future__ import annotations

import math
import os
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .blocks import ExtractionError

BINARY_VERSION = 6
MODEL_FILE = "model.bin"

# dtype id -> (name, numpy storage dtype); bfloat16 is stored as uint16 and widened on conversion.
DTYPES = {
    0: ("float32", np.dtype("<f4")),
    1: ("int8", np.dtype("i1")),
    2: ("int16", np.dtype("<i2")),
    3: ("int32", np.dtype("<i4")),
    4: ("float16", np.dtype("<f2")),
    5: ("bfloat16", np.dtype("<u2")),
}
BFLOAT16 = 5
MAX_RANK = 8
_MAX_ALIAS_DEPTH = 64


@dataclass(frozen=True)
class VariableInfo:
    """Where one variable lies in the file: ``shape``, dtype id, byte ``offset`` of its data and ``nbytes``."""

    name: str
    shape: tuple[int, ...]
    dtype_id: int
    offset: int
    nbytes: int

    @property
    def dtype_name(self) -> str:
        return DTYPES[self.dtype_id][0]


@dataclass(frozen=True)
class Header:
    """The parsed header: spec name and revision, variables by name, and aliases (alias -> target name)."""

    path: Path
    version: int
    spec: str
    revision: int
    variables: dict[str, VariableInfo]
    aliases: dict[str, str]


# ---------------------------------------------------------------------------------------------- header parsing


class _Reader:
    """Sequential little-endian reads from an open file that raise :class:`ExtractionError` when the file ends."""

    def __init__(self, handle, path: Path, size: int):
        self.handle, self.path, self.size = handle, path, size

    def take(self, n: int, what: str) -> bytes:
        data = self.handle.read(n)
        if len(data) != n:
            raise ExtractionError(f"CTranslate2 file {self.path} ends inside {what}", "truncated")
        return data

    def u8(self, what: str) -> int:
        return self.take(1, what)[0]

    def u16(self, what: str) -> int:
        return struct.unpack("<H", self.take(2, what))[0]

    def u32(self, what: str) -> int:
        return struct.unpack("<I", self.take(4, what))[0]

    def string(self, what: str) -> str:
        """A u16 length (including the trailing NUL) and that many bytes, returned without the NUL."""
        length = self.u16(what)
        if length == 0:
            raise ExtractionError(f"malformed CTranslate2 file {self.path}: {what} has length 0")
        raw = self.take(length, what)
        try:
            return raw.rstrip(b"\0").decode("utf-8")
        except UnicodeDecodeError as err:
            raise ExtractionError(f"malformed CTranslate2 file {self.path}: {what} is not UTF-8 ({err})") from None

    def skip(self, n: int, what: str) -> int:
        """Skip ``n`` bytes of data and return their offset; raise if the file is shorter than declared."""
        offset = self.handle.tell()
        if offset + n > self.size:
            raise ExtractionError(
                f"CTranslate2 file {self.path}: {what} declares {n} bytes at offset {offset} but the file has "
                f"{self.size}",
                "truncated",
            )
        self.handle.seek(n, os.SEEK_CUR)
        return offset


def resolve_model_file(path: str | os.PathLike) -> Path:
    """The ``model.bin`` for ``path``, a model directory or the file itself; raise if it does not exist."""
    path = Path(path)
    if path.is_dir():
        path = path / MODEL_FILE
    if not path.is_file():
        raise ExtractionError(f"no CTranslate2 model file at {path}", "not found")
    return path


def _read_variable(reader: _Reader, index: int) -> VariableInfo:
    name = reader.string(f"the name of variable {index}")
    rank = reader.u8(f"the rank of {name}")
    if rank > MAX_RANK:
        raise ExtractionError(f"malformed CTranslate2 file {reader.path}: variable {name} has rank {rank}")
    shape = tuple(reader.u32(f"the shape of {name}") for _ in range(rank))
    dtype_id = reader.u8(f"the dtype of {name}")
    if dtype_id not in DTYPES:
        raise ExtractionError(f"dtype id {dtype_id} of variable {name} in {reader.path}", "unsupported architecture")
    nbytes = reader.u32(f"the size of {name}")
    expected = math.prod(shape) * DTYPES[dtype_id][1].itemsize  # Python integers: dims of 2^16 cannot wrap to 0
    if nbytes != expected:
        raise ExtractionError(
            f"malformed CTranslate2 file {reader.path}: variable {name} of shape {list(shape)} "
            f"and dtype {DTYPES[dtype_id][0]} declares {nbytes} bytes, expected {expected}"
        )
    offset = reader.skip(nbytes, f"variable {name}")
    return VariableInfo(name, shape, dtype_id, offset, nbytes)


def read_header(path: str | os.PathLike) -> Header:
    """Parse the header of a ``model.bin`` (or the one in a model directory) without reading variable data."""
    path = resolve_model_file(path)
    size = path.stat().st_size
    with open(path, "rb") as handle:
        reader = _Reader(handle, path, size)
        version = reader.u32("the version number")
        if version != BINARY_VERSION:
            raise ExtractionError(
                f"CTranslate2 binary version {version} in {path} (expected {BINARY_VERSION}); not a CTranslate2 "
                "model.bin?",
                "unsupported architecture",
            )
        spec = reader.string("the spec name")
        revision = reader.u32("the spec revision")
        n_vars = reader.u32("the variable count")
        variables = {}
        for index in range(n_vars):
            info = _read_variable(reader, index)
            variables[info.name] = info
        n_aliases = reader.u32("the alias count")
        aliases = {}
        for index in range(n_aliases):
            alias = reader.string(f"the name of alias {index}")
            aliases[alias] = reader.string(f"the target of alias {alias}")
    return Header(path, version, spec, revision, variables, aliases)


# ---------------------------------------------------------------------------------------------- variable access


def _bfloat16_to_float32(raw: np.ndarray) -> np.ndarray:
    """uint16 bit patterns of bfloat16 -> float32 (the same bits in float32's upper half)."""
    return (raw.astype(np.uint32) << 16).view(np.float32)


class ModelFile:
    """A parsed header plus a lazily opened memory map; variables are views until converted."""

    def __init__(self, path: str | os.PathLike):
        self.header = read_header(path)
        self._mmap: np.memmap | None = None

    @property
    def path(self) -> Path:
        return self.header.path

    def resolve(self, name: str) -> str:
        """Follow aliases to a stored variable name; raise if the name (or an alias target) is missing."""
        seen = name
        for _ in range(_MAX_ALIAS_DEPTH):
            if name in self.header.variables:
                return name
            if name not in self.header.aliases:
                target = "" if name == seen else f" (alias target of {seen})"
                raise ExtractionError(f"variable {name}{target} missing from {self.path}")
            name = self.header.aliases[name]
        raise ExtractionError(f"alias cycle at {seen} in {self.path}")

    def has(self, name: str) -> bool:
        return name in self.header.variables or name in self.header.aliases

    def info(self, name: str) -> VariableInfo:
        return self.header.variables[self.resolve(name)]

    def raw(self, name: str) -> np.ndarray:
        """The stored array (read-only memmap view; bfloat16 as uint16 bits), shaped as declared."""
        info = self.info(name)
        if self._mmap is None:
            self._mmap = np.memmap(self.path, dtype=np.uint8, mode="r")
        data = self._mmap[info.offset : info.offset + info.nbytes]
        return data.view(DTYPES[info.dtype_id][1]).reshape(info.shape)

    def array(self, name: str) -> np.ndarray:
        """The variable as numpy: a memmap view, except bfloat16, which is converted to a float32 copy."""
        raw = self.raw(name)
        return _bfloat16_to_float32(raw) if self.info(name).dtype_id == BFLOAT16 else raw

    def float_rows(self, name: str, start: int = 0, stop: int | None = None) -> np.ndarray:
        """Rows ``start:stop`` of a weight or bias as a float32 copy, dequantized if stored as int8/int16.

        A weight ``[out, in]`` gives ``[stop - start, in]``; a bias ``[out]`` gives ``[stop - start]``.
        """
        info = self.info(name)
        rows = self.raw(name)[start:stop]
        if info.dtype_id == BFLOAT16:
            return _bfloat16_to_float32(rows)
        if rows.dtype.kind == "f":
            return np.array(rows, dtype=np.float32)
        scale_name = f"{name}_scale"
        if info.dtype_id in (1, 2) and self.has(scale_name):
            scale = np.asarray(self.array(scale_name), dtype=np.float32)
            if scale.ndim == 1 and scale.shape[0] == info.shape[0] and len(info.shape) == 2:
                scale = scale[start:stop, None]
            elif scale.size != 1:
                raise ExtractionError(
                    f"{scale_name} in {self.path} has shape {list(scale.shape)}: neither one scale nor one per row of "
                    f"{list(info.shape)}"
                )
            if not np.all(np.isfinite(scale) & (scale != 0)):
                raise ExtractionError(f"{scale_name} in {self.path} holds a scale of zero, NaN or inf")
            return rows.astype(np.float32) / scale
        raise ExtractionError(f"variable {name} in {self.path} has dtype {info.dtype_name} and no float conversion")

    def scalar(self, name: str) -> int | None:
        """An integer scalar variable (such as ``encoder/num_heads``), or None if absent."""
        if not self.has(name):
            return None
        value = self.array(name)
        if value.size != 1 or value.dtype.kind not in "iu":
            raise ExtractionError(
                f"variable {name} in {self.path} should be an integer scalar, has shape {list(value.shape)} and "
                f"dtype {self.info(name).dtype_name}"
            )
        return int(value.reshape(()))


def read_ctranslate2(path: str | os.PathLike) -> tuple[str, dict[str, np.ndarray]]:
    """Spec name and all variables of a CTranslate2 ``model.bin`` (or model directory), aliases resolved.

    Arrays have their stored shape and dtype and are read-only views of one memory map (nothing is copied),
    except bfloat16 variables, which are converted to float32 copies. Rank-0 arrays are scalars.
    """
    checkpoint = ModelFile(path)
    names = list(checkpoint.header.variables) + list(checkpoint.header.aliases)
    return checkpoint.header.spec, {name: checkpoint.array(name) for name in names}
