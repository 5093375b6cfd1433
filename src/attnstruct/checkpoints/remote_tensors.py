"""Tensors of a checkpoint read lazily by byte ranges, whatever the file format: one index of where each tensor's
bytes lie, and the reads, prefetching and rebuilding that only need that index.

A format (:mod:`.remote_safetensors`, :mod:`.remote_torch_bin`) builds ``{name: TensorLocation}``. A location is a
strided view into a storage: element ``(i_0, ..., i_{n-1})`` of the tensor is element
``storage_offset + sum_k i_k stride_k`` of the storage, whose first byte is byte ``data_start`` of ``file``. With
``e`` bytes per element, the smallest span covering the view is, relative to the storage,

    [storage_offset * e, (storage_offset + sum_k (shape_k - 1) stride_k + 1) * e)

and only it is read; the tensor is rebuilt from it with ``torch.as_strided`` (a transpose or a slice of a larger
storage reads its own bytes, not the storage). A storage whose data follow a header of variable length (a ZIP
member's local header) has ``data_start`` None: its span is then read from ``header_start`` to
``header_start + header_guess + hi`` (``header_guess``: the length the format's writer gives such a header), and
``header_length(first header_min bytes, storage)`` tells where the data really begin; a wrong guess costs a
second request for the bytes still missing. So a tensor costs one request, not a header request and a data
request, and no byte past its view is read.

:meth:`RangeTensorSource.get_rows` reads only some rows (dim 0) of a row-major tensor, the others left zero: the
query and key rows of a fused QKV weight, its value rows left out unless reading them is cheaper than the requests
they save. Reads that touch in one file, or lie at most ``MERGE_GAP`` bytes apart (the cost model at the top of the
module: the bytes between two reads against a request's round trip), are merged into one request. ``reader`` is a
:class:`~attnstruct.checkpoints.remote_safetensors.RangeReader` (hub, disk cache) or a :class:`LocalFileReader`;
both have ``read(file, start, end)`` and count ``bytes_fetched``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import NamedTuple

import torch

from .extract.blocks import ExtractionError, check_view
from .extract.parameters import count_named

# The cost model of merging: one more request costs about a round trip to the hub's CDN (REQUEST_SECONDS), a byte read
# in vain 1 / LINK_BYTES_PER_SECOND; two reads of one file are merged when the bytes between them cost less than the
# request they save. At 0.1 s and 100 Mbit/s that is MERGE_GAP = 1.25 MB: a fused per-head QKV weight's value rows
# between one head's key rows and the next head's query rows (98 KB a head for Pythia-160m: one request a layer for
# 1.5 times the bytes, instead of one a head) are read, Pythia-6.9b's (1.05 MB a head) too, Pythia-12b's (1.3 MB) not;
# a ZIP member's data descriptor and local header, a bias beside its weight, always.
REQUEST_SECONDS = 0.1
LINK_BYTES_PER_SECOND = 12.5e6
MERGE_GAP = int(REQUEST_SECONDS * LINK_BYTES_PER_SECOND)
RowRanges = tuple[tuple[int, int], ...]  # [start, end) row ranges of dim 0, sorted, merged
ReadKey = tuple[str, RowRanges | None]  # a tensor, whole (None) or some of its rows


@dataclass(frozen=True)
class TensorLocation:
    """Where one tensor's bytes lie (module docstring). ``dtype`` is None for a dtype attnstruct cannot read
    (``dtype_name`` names it); ``storage`` names the storage the tensor views (tensors of one storage share it),
    ``storage_bytes`` its length; offsets and strides count elements, ``data_start`` and ``header_*`` bytes
    (``header_start``: where the header before the storage's data starts when ``data_start`` is None;
    ``header_guess``: its expected length; ``header_min``: how many of its bytes tell its length)."""

    file: str
    dtype: torch.dtype | None
    dtype_name: str
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    storage: str
    storage_offset: int
    storage_bytes: int
    data_start: int | None = None
    header_start: int = 0
    header_guess: int = 0
    header_min: int = 0

    def __post_init__(self):
        """Every location, of any format, is a view inside its storage (:func:`check_view`) at bytes the file has."""
        if min(self.storage_bytes, self.header_start, 0 if self.data_start is None else self.data_start) < 0:
            raise ExtractionError(f"{self.file}: storage {self.storage} lies at negative bytes")
        if self.dtype is not None:
            elements = self.storage_bytes // self.itemsize
            check_view(self.shape, self.stride, self.storage_offset, elements, f"{self.file}: storage {self.storage}")

    @property
    def itemsize(self) -> int:
        return torch.empty((), dtype=self.dtype).element_size()

    def span(self) -> tuple[int, int]:
        """Bytes ``[lo, hi)`` of the storage that cover the view (empty for a tensor without elements)."""
        first = self.storage_offset * self.itemsize
        if math.prod(self.shape) == 0:
            return first, first
        last = self.storage_offset + sum((n - 1) * s for n, s in zip(self.shape, self.stride))
        return first, (last + 1) * self.itemsize

    @property
    def row_major(self) -> bool:
        """Whether the view is C-contiguous, so that consecutive rows of dim 0 are consecutive bytes."""
        expected = 1
        for n, s in zip(reversed(self.shape), reversed(self.stride)):
            if n != 1 and s != expected:
                return False
            expected *= n
        return True


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """Row-major strides of ``shape``, in elements: ``stride_k = prod(shape[k+1:])``."""
    return tuple(math.prod(shape[k + 1 :]) for k in range(len(shape)))


class _Piece(NamedTuple):
    """Bytes ``[lo, hi)`` of a tensor's storage, relative to the storage's first byte."""

    location: TensorLocation
    lo: int
    hi: int


def _row_ranges(rows: Iterable[tuple[int, int]], n_rows: int) -> RowRanges:
    """``rows`` sorted, checked against ``n_rows`` and merged where they touch: ``[(0, 8), (8, 16)] -> ((0, 16),)``."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted((int(a), int(b)) for a, b in rows):
        if not 0 <= start < end <= n_rows:
            raise ValueError(f"row range [{start}, {end}) is not inside the {n_rows} rows")
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return tuple(merged)


def _only_rows(tensor: torch.Tensor, rows: RowRanges) -> torch.Tensor:
    """``tensor`` with every row of dim 0 outside ``rows`` set to zero."""
    out = torch.zeros_like(tensor)
    for start, end in rows:
        out[start:end] = tensor[start:end]
    return out


class RangeTensorSource:
    """A lazy tensor source (:class:`~attnstruct.checkpoints.extract.hf.TensorSource`) over an index of locations.

    Args:
        reader: ``read(file, start, end) -> bytes`` and ``bytes_fetched``.
        index: ``{tensor name: TensorLocation}``.
        config: the checkpoint's ``config.json`` (a :class:`~attnstruct.checkpoints.extract.hf.JsonConfig`).
        description: what the messages call the checkpoint.
        workers: threads for :meth:`prefetch` (started by the first prefetch).
        file_sizes: ``{file: bytes}``; reads that start at a header are clipped to them.
        header_length: ``(first bytes, storage) -> header length`` for locations without ``data_start``.
    """

    def __init__(
        self,
        reader,
        index: Mapping[str, TensorLocation],
        config,
        *,
        description: str,
        workers: int = 4,
        file_sizes: Mapping[str, int] | None = None,
        header_length: Callable[[bytes, str], int] | None = None,
    ):
        self.reader, self.config, self.description = reader, config, description
        self._index = dict(index)
        self._sizes = dict(file_sizes or {})
        self._header_length = header_length
        self._workers = workers
        self._pool: ThreadPoolExecutor | None = None
        self._pending: dict[ReadKey, Future] = {}
        self._queue: list[tuple[ReadKey, ...]] = []
        self._window = 2 * workers

    def names(self) -> list[str]:
        return list(self._index)

    def location(self, name: str) -> TensorLocation:
        return self._index[name]

    def shape(self, name: str) -> tuple[int, ...]:
        """The shape of tensor ``name``, from the index (nothing is read)."""
        return self._index[name].shape

    def _key(self, read: str | tuple[str, Iterable[tuple[int, int]] | None]) -> ReadKey:
        if isinstance(read, str):
            return read, None
        name, rows = read
        return name, None if rows is None else _row_ranges(rows, self._index[name].shape[0])

    def _pieces(self, key: ReadKey) -> list[_Piece]:
        name, rows = key
        loc = self._index[name]
        if loc.dtype is None:
            raise ExtractionError(f"tensor {name} has dtype {loc.dtype_name}, which attnstruct cannot read")
        lo, hi = loc.span()
        if rows is None or not loc.row_major:
            return [_Piece(loc, lo, hi)]
        row = loc.itemsize * math.prod(loc.shape[1:])
        return [_Piece(loc, lo + start * row, lo + end * row) for start, end in rows]

    def _data_start(self, loc: TensorLocation, known: dict) -> int | None:
        return loc.data_start if loc.data_start is not None else known.get((loc.file, loc.storage))

    def _clip(self, file: str, end: int) -> int:
        return min(end, self._sizes[file]) if file in self._sizes else end

    def _planned_span(self, piece: _Piece, known: dict) -> tuple[int, int] | None:
        """Bytes of the file to read for ``piece``: its own when its storage's data start is known, from the
        storage's header when the piece starts the storage, else None (the header must be read first)."""
        loc = piece.location
        begin = self._data_start(loc, known)
        if begin is not None:
            return begin + piece.lo, begin + piece.hi
        if piece.lo == 0:
            return loc.header_start, self._clip(loc.file, loc.header_start + loc.header_guess + piece.hi)
        return None

    def _read_header(self, loc: TensorLocation) -> int:
        head = self.reader.read(loc.file, loc.header_start, self._clip(loc.file, loc.header_start + loc.header_min))
        return loc.header_start + self._header_length(head, loc.storage)

    def _cut(self, piece: _Piece, data: bytes, start: int, known: dict) -> bytes:
        """The bytes of ``piece`` out of ``data``, file bytes from ``start`` on (the rest read when ``data`` ends
        early: a header longer than its guess)."""
        loc = piece.location
        begin = self._data_start(loc, known)
        if begin is None:
            at = loc.header_start - start
            begin = loc.header_start + self._header_length(data[at : at + loc.header_min], loc.storage)
            known[(loc.file, loc.storage)] = begin
        a, b = begin + piece.lo, begin + piece.hi
        chunk = data[a - start : b - start]
        if len(chunk) < b - a:
            chunk += self.reader.read(loc.file, a + len(chunk), b)
        return chunk

    def _read_pieces(self, pieces: list[_Piece]) -> list[bytes]:
        """The bytes of each piece, in order; pieces whose spans touch (or nearly) in one file come in one read. A
        storage whose data start is not known yet is planned from its header's guessed length (``header_guess``)
        while its header is in the read being planned, so its rows come in that read too."""
        known: dict[tuple[str, str], int] = {}  # data starts learnt from headers in this call
        guessed: dict[tuple[str, str], int] = {}  # data starts guessed for headers in the read being planned
        chunks = [b""] * len(pieces)
        run: list[int] = []
        span = (0, 0)

        def flush():
            if run:
                data = self.reader.read(pieces[run[0]].location.file, *span)
                for i in run:
                    chunks[i] = self._cut(pieces[i], data, span[0], known)
                run.clear()
            guessed.clear()

        def joins(planned: tuple[int, int], file: str) -> bool:
            same_file = run and pieces[run[0]].location.file == file
            return bool(same_file) and planned[0] <= span[1] + MERGE_GAP and planned[1] + MERGE_GAP >= span[0]

        for i, piece in enumerate(pieces):
            loc = piece.location
            storage = (loc.file, loc.storage)
            planned = self._planned_span(piece, known)
            if planned is None and storage in guessed:
                planned = guessed[storage] + piece.lo, guessed[storage] + piece.hi
                if not joins(planned, loc.file):
                    flush()  # the header is read, and the data start known
                    planned = self._planned_span(piece, known)
            if planned is None:
                flush()
                planned = self._planned_span(piece, known)
            if planned is None:
                begin = self._read_header(loc)
                known[storage] = begin
                planned = begin + piece.lo, begin + piece.hi
            if joins(planned, loc.file):
                span = (min(span[0], planned[0]), max(span[1], planned[1]))
            else:
                flush()
                span = planned
            if self._data_start(loc, known) is None and piece.lo == 0:
                guessed[storage] = loc.header_start + loc.header_guess
            run.append(i)
        flush()
        return chunks

    def _tensor(self, loc: TensorLocation, data: bytes, lo: int) -> torch.Tensor:
        """The view of ``loc`` rebuilt from the storage bytes ``[lo, lo + len(data))``."""
        flat = torch.frombuffer(bytearray(data), dtype=loc.dtype) if data else torch.empty(0, dtype=loc.dtype)
        view = flat.as_strided(loc.shape, loc.stride, loc.storage_offset - lo // loc.itemsize)
        return view if view.is_contiguous() else view.contiguous()

    def _load(self, keys: tuple[ReadKey, ...]) -> dict[ReadKey, torch.Tensor]:
        """The tensors of ``keys``, their pieces read together (:meth:`_read_pieces`)."""
        pieces = [self._pieces(key) for key in keys]
        chunks = iter(self._read_pieces([p for key_pieces in pieces for p in key_pieces]))
        found = {}
        for (name, rows), key_pieces in zip(keys, pieces):
            loc = key_pieces[0].location
            if len(key_pieces) == 1 and (rows is None or not loc.row_major):
                tensor = self._tensor(loc, next(chunks), key_pieces[0].lo)
                found[name, rows] = tensor if rows is None else _only_rows(tensor, rows)
                continue
            tensor = torch.zeros(loc.shape, dtype=loc.dtype)
            for (start, end), _ in zip(rows, key_pieces):
                data = bytearray(next(chunks))
                tensor[start:end] = torch.frombuffer(data, dtype=loc.dtype).view(end - start, *loc.shape[1:])
            found[name, rows] = tensor
        return found

    def _jobs(self, keys: list[ReadKey]) -> list[tuple[ReadKey, ...]]:
        """``keys`` in order, consecutive ones joined when their bytes touch in one file (a bias and its weight):
        one request for each job."""
        jobs: list[list[ReadKey]] = []
        span = None  # (file, start, end) of the last job's planned reads
        for key in keys:
            try:
                pieces = self._pieces(key)
            except ExtractionError:
                jobs.append([key])  # raised again when it is read
                span = None
                continue
            first = self._planned_span(pieces[0], {})
            file = pieces[0].location.file
            if (
                span
                and first
                and span[0] == file
                and first[0] <= span[2] + MERGE_GAP
                and first[1] + MERGE_GAP >= span[1]
            ):
                jobs[-1].append(key)
            else:
                jobs.append([key])
                span = (file, *first) if first else None
            last = self._planned_span(pieces[-1], {})
            span = (file, min(span[1], last[0]), max(span[2], last[1])) if span and last else None
        return [tuple(job) for job in jobs]

    def prefetch(self, reads: Iterable[str | tuple[str, Iterable[tuple[int, int]] | None]]) -> None:
        """Read ``reads`` (tensor names, or ``(name, row ranges)`` as :meth:`get_rows` will ask) in the background,
        in this order, at most ``2 * workers`` ahead of :meth:`get` (so memory holds a few layers, not the model)."""
        keys = [self._key(read) for read in reads if (read if isinstance(read, str) else read[0]) in self._index]
        self._queue = self._jobs(list(dict.fromkeys(keys)))
        self._refill()

    def _refill(self) -> None:
        while self._queue and len(self._pending) < self._window:
            job = self._queue.pop(0)
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self._workers, thread_name_prefix="attnstruct-range")
            future = self._pool.submit(self._load, job)
            self._pending.update(dict.fromkeys(job, future))

    def _take(self, key: ReadKey) -> torch.Tensor:
        future = self._pending.pop(key, None)
        if future is None:
            self._queue = [job for job in self._queue if key not in job]
        self._refill()
        return future.result()[key] if future is not None else self._load((key,))[key]

    def get(self, name: str) -> torch.Tensor:
        """One tensor, from a prefetch when one was started."""
        return self._take((name, None))

    def get_rows(self, name: str, rows: Iterable[tuple[int, int]]) -> torch.Tensor:
        """Tensor ``name`` in its full shape with only the rows ``[start, end)`` of dim 0 in ``rows`` read (one
        request per run of touching rows) and every other row zero. A view whose rows are not consecutive bytes
        is read whole and masked."""
        return self._take(self._key((name, rows)))

    def close(self) -> None:
        self._queue.clear()
        for future in self._pending.values():
            future.cancel()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        self._pending.clear()

    def n_params(self) -> int:
        """Parameters as ``model.num_parameters()`` counts them, from the index alone: floating-point tensors,
        the same view of one storage under several names once, by the rules of
        :func:`attnstruct.checkpoints.extract.parameters.count_named`."""
        seen, named = set(), []
        for name, loc in self._index.items():
            view = (loc.file, loc.storage, loc.storage_offset, loc.shape, loc.stride)
            if loc.dtype is not None and loc.dtype.is_floating_point and view not in seen:
                seen.add(view)
                named.append((name, loc.shape))
        return count_named(named, self.config)
