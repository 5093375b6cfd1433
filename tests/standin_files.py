"""The files a stand-in hub serves: bytes, or a :class:`SparseFile` (a large file of which only some segments are
stored, zeros elsewhere), and what the Hub reports about each (:class:`HubFile`: size, LFS or not, ETag, git blob id).

:func:`sparse_safetensors` builds a safetensors file as a :class:`SparseFile` with the safetensors library's own
layout, so a 7B-shaped checkpoint costs only the bytes of the tensors a test reads.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import struct

__all__ = ["DTYPE_SIZES", "HubFile", "SparseFile", "sparse_safetensors"]

LFS_MIN_SIZE = 10 << 20  # the Hub stores files from 10 MiB on with LFS (ETag = sha256)
LFS_SUFFIXES = (
    ".safetensors",
    ".bin",
    ".pt",
    ".pth",
    ".ckpt",
    ".h5",
    ".msgpack",
    ".onnx",
    ".gguf",
    ".npz",
    ".model",
    ".parquet",
    ".arrow",
)

# safetensors dtypes: bytes per element, in the order the safetensors library sorts tensors by (ascending; the
# library writes the largest first, then by name).
DTYPE_SIZES = {"BOOL": 1, "U8": 1, "I8": 1, "I16": 2, "F16": 2, "BF16": 2, "I32": 4, "F32": 4, "F64": 8, "I64": 8}
_DTYPE_RANK = {name: rank for rank, name in enumerate(DTYPE_SIZES)}


class SparseFile:
    """A large file that is not held in memory: ``size`` bytes, of which only ``segments`` are stored.

    Args:
        size: total length in bytes.
        segments: ``{offset: bytes}``; segments must lie inside the file and must not overlap. Every byte outside
            them reads as zero.
    """

    def __init__(self, size: int, segments: dict[int, bytes]):
        self.size = int(size)
        self._offsets = sorted(segments)
        self._data = [bytes(segments[o]) for o in self._offsets]
        end = 0
        for offset, data in zip(self._offsets, self._data):
            if offset < end:
                raise ValueError(f"segment at {offset} overlaps the previous one (which ends at {end})")
            end = offset + len(data)
        if end > self.size:
            raise ValueError(f"segments end at {end}, past the file size {self.size}")

    def __len__(self) -> int:
        return self.size

    def read(self, start: int = 0, end: int | None = None) -> bytes:
        """Bytes ``[start, end)`` (``end`` defaults to the size), zeros where no segment is stored."""
        end = self.size if end is None else min(end, self.size)
        start = max(0, start)
        if end <= start:
            return b""
        out = bytearray(end - start)
        # The last segment starting at or before `start` may overlap the range; then every one starting before `end`.
        first = max(0, bisect.bisect_right(self._offsets, start) - 1)
        for i in range(first, len(self._offsets)):
            offset, data = self._offsets[i], self._data[i]
            if offset >= end:
                break
            lo, hi = max(start, offset), min(end, offset + len(data))
            if lo < hi:
                out[lo - start : hi - start] = data[lo - offset : hi - offset]
        return bytes(out)

    def fingerprint(self) -> str:
        """A stable sha256 of the size and the stored segments (not of the content: it never reads the zeros)."""
        digest = hashlib.sha256(f"sparse:{self.size}".encode())
        for offset, data in zip(self._offsets, self._data):
            digest.update(f":{offset}:{len(data)}:".encode())
            digest.update(hashlib.sha256(data).digest())
        return digest.hexdigest()


def sparse_safetensors(
    tensors: dict[str, tuple[str, list[int]]],
    stored: dict[str, bytes],
    *,
    metadata: dict[str, str] | None = None,
) -> SparseFile:
    """A safetensors file as a :class:`SparseFile`: a real header, the ``stored`` tensors' bytes, zeros elsewhere.

    The layout is the safetensors library's own (``safetensors.torch.save`` writes the same bytes for the same tensors):
    8-byte little-endian header length, compact JSON header (``__metadata__`` first, then each tensor's ``dtype``,
    ``shape``, ``data_offsets``), padded with spaces to a multiple of 8, then the data, tensors ordered by dtype size
    (largest first) then by name.

    Args:
        tensors: ``{name: (dtype, shape)}``, dtype one of ``DTYPE_SIZES`` (``"F32"``, ``"BF16"``, ``"F16"``, ...).
        stored: ``{name: raw little-endian bytes}`` for the tensors whose values matter (e.g. query/key weights);
            each must have exactly the tensor's size.
        metadata: the ``__metadata__`` entry; ``{"format": "pt"}`` (what transformers writes) when None; ``{}`` omits
            it.
    """
    unknown = set(stored) - set(tensors)
    if unknown:
        raise KeyError(f"stored tensors not in `tensors`: {sorted(unknown)}")
    header: dict = {}
    meta = {"format": "pt"} if metadata is None else metadata
    if meta:
        header["__metadata__"] = meta
    segments: dict[int, bytes] = {}
    offset = 0
    for name in sorted(tensors, key=lambda n: (-_DTYPE_RANK[tensors[n][0]], n)):
        dtype, shape = tensors[name]
        count = 1
        for dim in shape:
            count *= int(dim)
        nbytes = count * DTYPE_SIZES[dtype]
        header[name] = {"dtype": dtype, "shape": [int(d) for d in shape], "data_offsets": [offset, offset + nbytes]}
        if name in stored:
            if len(stored[name]) != nbytes:
                raise ValueError(f"{name}: {len(stored[name])} bytes stored, {nbytes} expected for {dtype}{shape}")
            segments[offset] = bytes(stored[name])
        offset += nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    start = 8 + len(text)
    return SparseFile(
        start + offset, {0: struct.pack("<Q", len(text)) + text, **{start + o: d for o, d in segments.items()}}
    )


class HubFile:
    """One file of a commit, with what the Hub reports about it."""

    def __init__(self, name: str, content: bytes | SparseFile):
        if isinstance(content, SparseFile):
            self.content, self.size, self.lfs = content, content.size, True
            self.sha256 = content.fingerprint()
        else:
            self.content, self.size = bytes(content), len(content)
            self.lfs = self.size >= LFS_MIN_SIZE or name.endswith(LFS_SUFFIXES)
            self.sha256 = hashlib.sha256(self.content).hexdigest()
        if self.lfs:  # git stores the LFS pointer file
            pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{self.sha256}\nsize {self.size}\n"
            git = pointer.encode()
        else:
            git = self.content
        self.blob_id = hashlib.sha1(b"blob %d\0" % len(git) + git).hexdigest()
        self.pointer_size = len(git)
        self.etag = self.sha256 if self.lfs else self.blob_id

    def read(self, start: int, end: int) -> bytes:
        if isinstance(self.content, SparseFile):
            return self.content.read(start, end)
        return self.content[start:end]
