"""The header of a safetensors file, held to the format's rules before any tensor is located by it.

A safetensors file is ``[8-byte little-endian n][n bytes of JSON header][data]``. The format (the ``safetensors``
README, "Format", and the library's ``Metadata::validate``) asks, and the ``safetensors`` library refuses a file
otherwise:

* ``n`` at most 100 000 000, and the header inside the file; the header UTF-8 JSON, one object, no name twice;
* each entry but ``__metadata__`` (an object of strings, or null) ``{"dtype", "shape", "data_offsets"}``: a dtype
  of the format's (:data:`BITS`), a shape of non-negative integers, and offsets ``[begin, end)`` of non-negative
  integers with ``end - begin = prod(shape) * bits / 8`` (whole bytes);
* the entries, ordered by their offsets, follow one another from byte 0 of the data without a gap or an overlap,
  and the last one ends where the file does.

:func:`parse_header` applies them all, so a file the library would refuse is refused here too, in one line naming the
file and the entry: overlapping offsets would read one tensor's bytes as another's (two equal matrices: a symmetry
of +1), a negative offset the header's own bytes as weights. It is stricter than the library in one place, which the
format allows it: a name given twice is refused even when both entries agree (the library keeps the last).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

from .extract.blocks import ExtractionError

MAX_HEADER_BYTES = 100_000_000  # the safetensors library's own limit
BITS = {  # bits per element of each dtype the format (safetensors 0.8) knows
    "BOOL": 8,
    "F4": 4,
    "F6_E2M3": 6,
    "F6_E3M2": 6,
    "U8": 8,
    "I8": 8,
    "F8_E5M2": 8,
    "F8_E4M3": 8,
    "F8_E8M0": 8,
    "F8_E4M3FNUZ": 8,
    "F8_E5M2FNUZ": 8,
    "I16": 16,
    "U16": 16,
    "F16": 16,
    "BF16": 16,
    "I32": 32,
    "U32": 32,
    "F32": 32,
    "C64": 64,
    "F64": 64,
    "I64": 64,
    "U64": 64,
}
_USIZE = 1 << 64  # offsets and dimensions are unsigned 64-bit integers in the library


@dataclass(frozen=True)
class HeaderEntry:
    """One tensor of the header: its dtype name, shape, and data offsets ``[begin, end)`` (relative to the data)."""

    dtype: str
    shape: tuple[int, ...]
    begin: int
    end: int


def header_length(first: bytes, file_size: int | None, what: str) -> int:
    """``n``, the header's length, from the file's first 8 bytes; ``file_size`` (None when unknown) bounds it."""
    n = int.from_bytes(first, "little")
    if len(first) != 8 or n < 2 or n > MAX_HEADER_BYTES:
        raise ExtractionError(f"{what} is not a safetensors file (header length {n})")
    if file_size is not None and 8 + n > file_size:
        raise ExtractionError(f"{what}: a header of {n} bytes does not fit in the file's {file_size} bytes")
    return n


def _unique(pairs: list[tuple[str, object]]) -> dict:
    found = {}
    for key, value in pairs:
        for text in (key, value) if isinstance(value, str) else (key,):
            text.encode("utf-8")  # a lone surrogate (\ud800) is valid to Python's json, not to UTF-8
        if key in found:
            raise ValueError(f"the name {key!r} is given twice")
        found[key] = value
    return found


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def _count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < _USIZE


def _entry(name: str, info, what: str) -> HeaderEntry:
    if not isinstance(info, dict):
        raise ExtractionError(f"{what}: the header entry of {name!r} is not an object")
    dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
    if not isinstance(dtype, str) or dtype not in BITS:
        raise ExtractionError(f"{what}: tensor {name!r} has dtype {dtype!r}, which is not one of the format's")
    if not isinstance(shape, list) or not all(_count(n) for n in shape):
        raise ExtractionError(f"{what}: tensor {name!r} has shape {shape!r}, not a list of non-negative integers")
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(_count(n) for n in offsets):
        raise ExtractionError(f"{what}: tensor {name!r} has data_offsets {offsets!r}, not two non-negative integers")
    begin, end = offsets
    bits = math.prod(shape) * BITS[dtype]
    if end < begin or bits % 8 or bits // 8 != end - begin:
        raise ExtractionError(
            f"{what}: tensor {name!r} has data_offsets [{begin}, {end}), not the {bits / 8:g} bytes of shape "
            f"{shape} in {dtype}"
        )
    return HeaderEntry(dtype, tuple(shape), begin, end)


def parse_header(text: bytes, data_length: int | None, what: str) -> tuple[dict[str, HeaderEntry], dict[str, str]]:
    """``(entries, metadata)`` of a header's ``text`` (the ``n`` bytes after the length), held to the format's
    rules (module docstring); ``data_length``, the bytes after the header (None when the file's size is unknown),
    must be what the entries cover. ``what`` names the file in the one-line
    :class:`~attnstruct.checkpoints.extract.blocks.ExtractionError` of a header that breaks one."""
    try:
        header = json.loads(text.decode("utf-8"), object_pairs_hook=_unique, parse_constant=_no_constant)
    except (ValueError, RecursionError) as err:  # not UTF-8, not JSON, a name twice, nested without end
        raise ExtractionError(f"{what}: unreadable safetensors header ({' '.join(str(err).split())})") from None
    if not isinstance(header, dict):
        raise ExtractionError(f"{what}: the safetensors header is not a JSON object")
    metadata = header.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict) or not all(isinstance(value, str) for value in metadata.values()):
        raise ExtractionError(f"{what}: the header's __metadata__ is not an object of strings")
    entries = {name: _entry(name, info, what) for name, info in header.items()}
    position = 0
    for name, entry in sorted(entries.items(), key=lambda item: (item[1].begin, item[1].end)):
        if entry.begin != position:
            said = "overlaps the tensor before it" if entry.begin < position else "leaves a gap before it"
            raise ExtractionError(f"{what}: tensor {name!r} begins at byte {entry.begin} of the data and {said}")
        position = entry.end
    if data_length is not None and position != data_length:
        raise ExtractionError(f"{what}: the tensors cover {position} bytes of data, the file holds {data_length}")
    return entries, metadata
