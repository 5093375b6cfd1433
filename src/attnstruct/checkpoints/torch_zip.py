"""Where the tensors of a ``torch.save`` file lie, read from byte ranges; nothing of the pickle but tensors runs.

Since torch 1.6 ``torch.save`` writes a ZIP archive whose members are stored, not compressed::

    <prefix>/data.pkl        the pickled object (a state dict: {name: tensor})
    <prefix>/byteorder       "little" or "big" (absent in files from before torch 1.10: little)
    <prefix>/data/<key>      the raw bytes of one storage, in the byte order above
    <prefix>/version, <prefix>/.data/serialization_id, ...
    central directory        one entry per member: name, method, flags, sizes, offset of its local header
    [ZIP64 end record and locator]  when offsets, sizes or the entry count outgrow the 32/16-bit fields
    end of central directory (22 bytes, then the archive comment)

A member's data starts after its *local* header: ``header_offset + 30 + name_len + extra_len``, where the local
extra field holds the padding that aligns the data (``.storage_alignment``, 64 bytes) and differs from the central
directory's extra field, so it is read from the local header itself (:func:`local_header_length`).

In ``data.pkl`` a tensor is ``torch._utils._rebuild_tensor_v2(storage, storage_offset, size, stride,
requires_grad, backward_hooks[, metadata])`` with the storage a persistent id ``('storage', torch.FloatStorage,
key, location, numel)``; a parameter wraps it in ``torch._utils._rebuild_parameter``; containers are
``collections.OrderedDict`` and plain dicts, lists and tuples. :class:`_MetadataUnpickler` maps exactly these
globals to stand-ins that record the metadata (a storage's key, dtype and length; a tensor's storage offset, shape
and stride, in elements) and never read a storage byte; any other global or persistent id is refused.

A file that is not a ZIP archive (the legacy pickle format of torch before 1.6) raises :class:`NotAZipArchive`.
Other problems raise :class:`~attnstruct.checkpoints.extract.blocks.ExtractionError` with one line.
"""

from __future__ import annotations

import io
import pickle
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import torch

from ..untrusted import one_line
from .extract.blocks import ExtractionError, check_view

Read = Callable[[int, int], bytes]  # read(start, end) -> bytes [start, end) of the file

LOCAL_HEADER = struct.Struct("<IHHHHHIIIHH")  # signature, version, flags, method, time, date, crc, sizes, n, m
CENTRAL_HEADER = struct.Struct("<IHHHHHHIIIHHHHHII")
END_RECORD = struct.Struct("<IHHHHIIH")  # signature, disks, entries (disk, total), size, offset, comment length
ZIP64_LOCATOR = struct.Struct("<IIQI")  # signature, disk, offset of the ZIP64 end record, disks
ZIP64_END_RECORD = struct.Struct("<IQHHIIQQQQ")  # ..., entries (disk, total), size, offset
LOCAL_SIGNATURE, CENTRAL_SIGNATURE = 0x04034B50, 0x02014B50
END_SIGNATURE, ZIP64_LOCATOR_SIGNATURE, ZIP64_END_SIGNATURE = 0x06054B50, 0x07064B50, 0x06064B50
ZIP64_EXTRA = 0x0001
TAIL_BYTES = 8192  # read first from the end: the end records, and the central directory of a small archive
MAX_COMMENT = 0xFFFF
LOCAL_EXTRA_SLACK = 128  # room assumed for a local extra field (torch's alignment padding is at most 67 bytes)
MAX_PICKLE_BYTES = 1 << 30

STORAGE_DTYPES = {
    "DoubleStorage": torch.float64,
    "FloatStorage": torch.float32,
    "HalfStorage": torch.float16,
    "BFloat16Storage": torch.bfloat16,
    "LongStorage": torch.int64,
    "IntStorage": torch.int32,
    "ShortStorage": torch.int16,
    "CharStorage": torch.int8,
    "ByteStorage": torch.uint8,
    "BoolStorage": torch.bool,
    "UntypedStorage": torch.uint8,
}


class NotAZipArchive(ExtractionError):
    """The file is not a ZIP archive: a ``torch.save`` file in the legacy format, to be read by ``torch.load``."""


@dataclass(frozen=True)
class ZipMember:
    """One member of the archive, from its central directory entry; ``size`` in bytes (stored: as compressed)."""

    name: str
    header_offset: int
    size: int
    method: int
    flags: int

    @property
    def header_bound(self) -> int:
        """An upper bound, not a promise, of the local header's length: ``30 + name + LOCAL_EXTRA_SLACK``."""
        return LOCAL_HEADER.size + len(self.name.encode()) + LOCAL_EXTRA_SLACK


@dataclass(frozen=True)
class ZipTensor:
    """A tensor of the pickle: a view ``(storage_offset, shape, stride)``, in elements, into storage ``member``,
    whose data torch's writer puts at ``member.header_offset + header_guess`` (:func:`torch_header_length`)."""

    member: ZipMember
    dtype: torch.dtype
    storage_offset: int
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    header_guess: int


def torch_header_length(member: ZipMember, alignment: int) -> int:
    """The local header length torch's writer gives ``member``: its extra field (a 4-byte ``FB`` field header, and
    a ZIP64 field first when the size or the offset passes 4 GiB) pads the data start up to a multiple of
    ``alignment``. Other writers differ: it is a guess to check against the header itself."""
    start = member.header_offset + LOCAL_HEADER.size + len(member.name.encode()) + 4
    if member.size >= 0xFFFFFFFF or member.header_offset >= 0xFFFFFFFF:
        start += 4 + (16 if member.size >= 0xFFFFFFFF else 0) + (8 if member.header_offset >= 0xFFFFFFFF else 0)
    return -(-start // alignment) * alignment - member.header_offset


class _Storage(NamedTuple):  # tuples: a crafted BUILD opcode cannot rewrite their fields
    key: str
    dtype: torch.dtype
    numel: int


class _Tensor(NamedTuple):
    storage: _Storage
    storage_offset: int
    shape: tuple[int, ...]
    stride: tuple[int, ...]


class _StorageType(NamedTuple):
    name: str
    dtype: torch.dtype


class _PickledDict(dict):
    """Stands in for ``collections.OrderedDict`` (a dict subclass, so a state dict's ``_metadata`` may be set)."""


def _indices(value, what: str) -> tuple[int, ...]:
    if not isinstance(value, (tuple, list)) or not all(isinstance(v, int) and v >= 0 for v in value):
        raise ExtractionError(f"{what}: a tensor's size or stride is not a tuple of non-negative integers")
    return tuple(value)


def _stand_ins(what: str) -> dict[str, object]:
    def rebuild_tensor(storage, storage_offset, size, stride, requires_grad=False, hooks=None, metadata=None):
        if not isinstance(storage, _Storage) or not isinstance(storage_offset, int) or storage_offset < 0:
            raise ExtractionError(f"{what}: _rebuild_tensor_v2 is not given a storage and an offset")
        shape, strides = _indices(size, what), _indices(stride, what)
        if len(shape) != len(strides):
            raise ExtractionError(f"{what}: a tensor has {len(shape)} sizes and {len(strides)} strides")
        return _Tensor(storage, storage_offset, shape, strides)

    def rebuild_parameter(tensor, requires_grad=False, hooks=None):
        if not isinstance(tensor, _Tensor):
            raise ExtractionError(f"{what}: _rebuild_parameter is not given a tensor")
        return tensor

    allowed: dict[str, object] = {
        "torch._utils._rebuild_tensor_v2": rebuild_tensor,
        "torch._utils._rebuild_parameter": rebuild_parameter,
        "collections.OrderedDict": _PickledDict,
    }
    allowed.update({f"torch.{name}": _StorageType(name, dtype) for name, dtype in STORAGE_DTYPES.items()})
    return allowed


class _MetadataUnpickler(pickle.Unpickler):
    """Unpickles tensors as metadata (:class:`_Tensor`) and plain containers; refuses every other global."""

    def __init__(self, data: bytes, what: str):
        super().__init__(io.BytesIO(data))
        self.what, self.allowed = what, _stand_ins(what)

    def find_class(self, module: str, name: str):
        found = self.allowed.get(f"{module}.{name}")
        if found is None:
            raise ExtractionError(
                f"{self.what}: refuses to unpickle {module}.{name} (only tensors and plain containers are allowed)"
            )
        return found

    def persistent_load(self, pid):
        if (
            isinstance(pid, tuple)
            and len(pid) == 5
            and pid[0] == "storage"
            and isinstance(pid[1], _StorageType)
            and isinstance(pid[2], str)
            and isinstance(pid[4], int)
            and pid[4] >= 0
        ):
            return _Storage(pid[2], pid[1].dtype, pid[4])
        shown = pid[0] if isinstance(pid, tuple) and pid and isinstance(pid[0], str) else type(pid).__name__
        raise ExtractionError(f"{self.what}: refuses the persistent id {shown!r} (only tensor storages are allowed)")


def unpickle_state_dict(data: bytes, what: str) -> dict[str, tuple[_Storage, int, tuple[int, ...], tuple[int, ...]]]:
    """``{name: (storage, storage_offset, shape, stride)}`` of the tensors at the top level of a pickled state
    dict; other values (numbers, strings) are left out. Nothing but the stand-ins of :func:`_stand_ins` is called."""
    try:
        state = _MetadataUnpickler(data, what).load()
    except ExtractionError:
        raise
    except Exception as err:
        raise ExtractionError(f"{what}: unreadable data.pkl ({one_line(err)})") from None
    if not isinstance(state, dict):
        raise ExtractionError(f"{what}: data.pkl holds a {type(state).__name__}, not a state dict")
    return {str(name): tensor for name, tensor in state.items() if isinstance(tensor, _Tensor)}


def _end_records(read: Read, size: int, what: str) -> tuple[int, int, int, bytes, int]:
    """``(entries, directory size, directory offset, tail, tail start)`` from the end of the file, ZIP64 if present."""
    start = max(0, size - TAIL_BYTES)
    tail = read(start, size)
    at = _find_end_record(tail)
    if at is None:
        if (tail[:4] if start == 0 else read(0, 4)) != struct.pack("<I", LOCAL_SIGNATURE):
            raise NotAZipArchive(f"{what} is not a ZIP archive (a torch.save file from before torch 1.6)")
        if start > 0:  # a long archive comment
            start = max(0, size - TAIL_BYTES - MAX_COMMENT - END_RECORD.size)
            tail = read(start, size)
            at = _find_end_record(tail)
    if at is None:
        raise ExtractionError(f"{what}: a ZIP archive without its end record (truncated?)", "truncated")
    _, _, _, _, entries, cd_size, cd_offset, _ = END_RECORD.unpack_from(tail, at)
    locator = at - ZIP64_LOCATOR.size
    if locator >= 0 and struct.unpack_from("<I", tail, locator)[0] == ZIP64_LOCATOR_SIGNATURE:
        record_offset = ZIP64_LOCATOR.unpack_from(tail, locator)[2]
        if start <= record_offset and record_offset + ZIP64_END_RECORD.size <= start + len(tail):
            record = tail[record_offset - start : record_offset - start + ZIP64_END_RECORD.size]
        else:
            record = read(record_offset, record_offset + ZIP64_END_RECORD.size)
        fields = ZIP64_END_RECORD.unpack(record)
        if fields[0] != ZIP64_END_SIGNATURE:
            raise ExtractionError(f"{what}: the ZIP64 locator points at no ZIP64 end record (truncated?)", "truncated")
        entries, cd_size, cd_offset = fields[7], fields[8], fields[9]
    elif entries == 0xFFFF or 0xFFFFFFFF in (cd_size, cd_offset):
        raise ExtractionError(f"{what}: a ZIP64 archive without its ZIP64 end record (truncated?)", "truncated")
    if cd_offset + cd_size > start + at:
        raise ExtractionError(
            f"{what}: the central directory lies past the end of the archive (truncated?)", "truncated"
        )
    return entries, cd_size, cd_offset, tail, start


def _find_end_record(tail: bytes) -> int | None:
    """Position in ``tail`` of the end record whose comment ends exactly at the end of the file."""
    at = tail.rfind(struct.pack("<I", END_SIGNATURE))
    while at >= 0:
        if at + END_RECORD.size <= len(tail):
            comment = END_RECORD.unpack_from(tail, at)[7]
            if at + END_RECORD.size + comment == len(tail):
                return at
        at = tail.rfind(struct.pack("<I", END_SIGNATURE), 0, at)
    return None


def _zip64_values(extra: bytes, wanted: list[bool], what: str) -> list[int]:
    """The 8-byte values of the ZIP64 extra field for the 32-bit fields that overflowed (``wanted``), in order."""
    pos = 0
    while pos + 4 <= len(extra):
        tag, length = struct.unpack_from("<HH", extra, pos)
        if tag == ZIP64_EXTRA:
            count = sum(wanted)
            if length < 8 * count:
                break
            return list(struct.unpack_from(f"<{count}Q", extra, pos + 4))
        pos += 4 + length
    raise ExtractionError(f"{what}: a ZIP64 entry without its ZIP64 extra field")


def _reusing(read: Read, data: bytes, data_start: int) -> Read:
    """``read``, answering from ``data`` (file bytes from ``data_start`` on) the ranges that lie inside it."""

    def reuse(start: int, end: int) -> bytes:
        if data_start <= start and end <= data_start + len(data):
            return data[start - data_start : end - data_start]
        return read(start, end)

    return reuse


def read_central_directory(read: Read, size: int, what: str) -> tuple[dict[str, ZipMember], Read]:
    """The members of the archive by name (one or two reads: the tail, and the directory if the tail misses it),
    and ``read`` that answers from the tail what lies in it."""
    entries, cd_size, cd_offset, tail, tail_start = _end_records(read, size, what)
    if cd_offset >= tail_start:
        directory = tail[cd_offset - tail_start : cd_offset - tail_start + cd_size]
    else:  # only the part the tail lacks is read again
        directory = read(cd_offset, tail_start) + tail[: cd_offset + cd_size - tail_start]
    members, pos = {}, 0
    for _ in range(entries):
        if pos + CENTRAL_HEADER.size > len(directory):
            raise ExtractionError(f"{what}: the central directory ends early (truncated?)", "truncated")
        fields = CENTRAL_HEADER.unpack_from(directory, pos)
        if fields[0] != CENTRAL_SIGNATURE:
            raise ExtractionError(f"{what}: a malformed central directory entry at byte {cd_offset + pos}")
        flags, method, compressed, n, m, k = fields[3], fields[4], fields[8], fields[10], fields[11], fields[12]
        name_bytes = directory[pos + CENTRAL_HEADER.size : pos + CENTRAL_HEADER.size + n]
        extra = directory[pos + CENTRAL_HEADER.size + n : pos + CENTRAL_HEADER.size + n + m]
        sizes_and_offset = [fields[9], compressed, fields[16]]  # the order of the ZIP64 extra field
        wanted = [value == 0xFFFFFFFF for value in sizes_and_offset]
        if any(wanted):
            values = iter(_zip64_values(extra, wanted, what))
            sizes_and_offset = [next(values) if w else v for w, v in zip(wanted, sizes_and_offset)]
        uncompressed, compressed, offset = sizes_and_offset
        name = name_bytes.decode("utf-8" if flags & 0x800 else "cp437")
        if name in members:  # torch.load reads the first copy; a reader keeping another would score other weights
            raise ExtractionError(f"{what}: the ZIP archive holds member {name} twice")
        members[name] = ZipMember(name, offset, compressed if method == 0 else uncompressed, method, flags)
        pos += CENTRAL_HEADER.size + n + m + k
    return members, _reusing(read, tail, tail_start)


def _check_stored(member: ZipMember, what: str) -> None:
    if member.flags & 0x1:
        raise ExtractionError(f"{what}: member {member.name} is encrypted", "unsupported architecture")
    if member.method != 0:
        raise ExtractionError(
            f"{what}: member {member.name} is compressed (method {member.method}); torch.save stores members "
            "uncompressed, and only those can be read by byte ranges",
            "unsupported architecture",
        )


def local_header_length(head: bytes, name: str) -> int:
    """Length of the local header at the start of ``head`` (``30 + name_len + extra_len``), checked against the
    member ``name`` it must announce; the member's data start right after it."""
    if len(head) < LOCAL_HEADER.size or LOCAL_HEADER.unpack_from(head)[0] != LOCAL_SIGNATURE:
        raise ExtractionError(f"no local ZIP header where member {name} should start (truncated?)", "truncated")
    n, m = LOCAL_HEADER.unpack_from(head)[9:11]
    if head[LOCAL_HEADER.size : LOCAL_HEADER.size + n] not in (name.encode(), name.encode("cp437", "replace")):
        raise ExtractionError(f"the local ZIP header of member {name} names another file")
    return LOCAL_HEADER.size + n + m


def read_members(read: Read, size: int, members: list[ZipMember], what: str) -> dict[str, bytes]:
    """The bytes of a few members lying close together (``data.pkl`` and ``byteorder``), local headers included,
    in one read when they are near: ``[first header, last header + bound + size)``."""
    for member in members:
        _check_stored(member, what)
    first = min(m.header_offset for m in members)
    end = min(size, max(m.header_offset + m.header_bound + m.size for m in members))
    spread = end - first - sum(m.header_bound + m.size for m in members)
    chunk = read(first, end) if spread <= TAIL_BYTES else None
    found = {}
    for member in members:
        if chunk is None:
            head = read(member.header_offset, min(size, member.header_offset + member.header_bound + member.size))
        else:
            head = chunk[member.header_offset - first :]
        start = local_header_length(head, member.name)
        data = head[start : start + member.size]
        if len(data) < member.size:  # a local extra field longer than the slack: read the rest
            data_end = member.header_offset + start + member.size
            data += read(data_end - (member.size - len(data)), data_end)
        found[member.name] = data
    return found


def torch_zip_index(read: Read, size: int, what: str) -> dict[str, ZipTensor]:
    """``{tensor name: ZipTensor}`` of a ``torch.save`` ZIP archive of ``size`` bytes read through ``read``.

    Two or three reads: the tail (end records, and the central directory when it fits), the directory otherwise,
    then ``data.pkl`` with ``.storage_alignment`` and ``byteorder``. Raises :class:`NotAZipArchive` for a legacy
    file; ExtractionError (one line) for a compressed or encrypted member, a member named twice, a big-endian file, a
    forbidden pickle, or a view that is not inside its storage or claims more elements than it holds.
    """
    members, read = read_central_directory(read, size, what)
    pickles = [name for name in members if re.fullmatch(r"[^/]+/data\.pkl", name)]
    if len(pickles) != 1:
        raise ExtractionError(f"{what}: a ZIP archive, but not one torch.save wrote (no single <prefix>/data.pkl)")
    prefix = pickles[0][: -len("data.pkl")]
    small = [members[prefix + name] for name in (".storage_alignment", "byteorder") if prefix + name in members]
    wanted = [members[pickles[0]], *small]
    if members[pickles[0]].size > MAX_PICKLE_BYTES:
        raise ExtractionError(f"{what}: data.pkl holds {members[pickles[0]].size} bytes, too many for a state dict")
    found = read_members(read, size, wanted, what)
    byteorder = found.get(prefix + "byteorder", b"little").decode("ascii", "replace").strip()
    alignment = found.get(prefix + ".storage_alignment", b"64").decode("ascii", "replace").strip()
    alignment = int(alignment) if alignment.isdigit() and int(alignment) > 0 else 64
    if byteorder != "little":
        raise ExtractionError(
            f"{what}: written on a {byteorder}-endian machine; attnstruct reads little-endian files only",
            "unsupported architecture",
        )
    tensors = {}
    for name, (storage, offset, shape, stride) in unpickle_state_dict(found[pickles[0]], what).items():
        member = members.get(f"{prefix}data/{storage.key}")
        if member is None:
            raise ExtractionError(f"{what}: tensor {name} names storage {storage.key}, which the archive lacks")
        _check_stored(member, what)
        itemsize = torch.empty((), dtype=storage.dtype).element_size()
        if member.size != storage.numel * itemsize:
            raise ExtractionError(
                f"{what}: storage {storage.key} holds {member.size} bytes, not {storage.numel} x {itemsize}"
            )
        check_view(shape, stride, offset, storage.numel, f"{what}: tensor {name} (storage {storage.key})")
        tensors[name] = ZipTensor(member, storage.dtype, offset, shape, stride, torch_header_length(member, alignment))
    return tensors
