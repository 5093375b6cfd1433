"""Safetensors checkpoints on a model hub, read by HTTP Range requests: headers, then only the tensors asked for.

A safetensors file is ``[8-byte little-endian header length n][n bytes of JSON header][tensor data]``; the header
maps each tensor name to ``dtype``, ``shape`` and ``data_offsets [begin, end)`` relative to the data start
``8 + n``, held to the format's rules (:func:`attnstruct.checkpoints.safetensors_header.parse_header`, with the
file's size from the hub's file list) before any tensor is read by it. So one tensor is one byte range, and a
checkpoint's query/key weights can be read without the embeddings or the MLPs. :class:`RangeReader` stores every
range read on disk under ``cache/<repo>/<commit>/<file>/``, keyed by the commit, which never changes: a second read
of the same tensor does no network I/O (:mod:`attnstruct.checkpoints.remote_torch_bin` reads ``pytorch_model.bin``
through it too). The repository, commit and file name come from the hub and are checked before they become a path
or a URL (:mod:`attnstruct.untrusted`).

:class:`RemoteSafetensors` builds the index of tensor locations from the headers; reading, prefetching in
background threads (so that the network works on the next layers while the current one is scored) and counting
parameters are :class:`~attnstruct.checkpoints.remote_tensors.RangeTensorSource`'s, a
:class:`~attnstruct.checkpoints.extract.hf.TensorSource` that :func:`attnstruct.checkpoints.extract.hf.hf_blocks`
reads like a local folder.
"""

from __future__ import annotations

import threading
from pathlib import Path
from urllib.parse import quote

import torch

from ..hub_client.client import CallCounter, get_range
from ..results import write_atomically
from ..untrusted import UnsafeName, commit_id, inside, relative_file
from .extract.blocks import ExtractionError, hub_failures_as_extraction_errors
from .extract.hf import JsonConfig
from .remote_tensors import RangeTensorSource, TensorLocation, contiguous_strides
from .safetensors_header import HeaderEntry, header_length, parse_header

DTYPES = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "F8_E4M3": torch.float8_e4m3fn,
    "F8_E5M2": torch.float8_e5m2,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
}


class RangeReader:
    """Byte ranges of one repository's files at one commit, from the disk cache or by HTTP Range requests.

    Thread-safe; ``bytes_fetched`` counts the body bytes that came over the network, ``calls`` the requests to the hub
    by bucket (:class:`~attnstruct.hub_client.quota.CallCounter`). ``sizes``: ``{file: bytes}`` as the hub lists
    them, so that a CDN's spurious 416 is told from a range past a file's end.
    """

    def __init__(
        self,
        repo: str,
        commit: str,
        *,
        endpoint: str,
        token: str | None,
        cache: Path,
        offline: bool,
        sizes: dict[str, int] | None = None,
    ):
        self.repo, self.commit, self.endpoint, self.token, self.offline = repo, commit, endpoint, token, offline
        self.sizes = dict(sizes or {})
        self.calls = CallCounter()
        try:
            self.folder = inside(cache, repo.replace("/", "--"), commit_id(commit, f"the hub's answer for {repo}"))
        except UnsafeName as err:
            raise ExtractionError(str(err)) from None
        self.bytes_fetched = 0
        self._lock = threading.Lock()

    def _path(self, file: str, start: int, end: int) -> Path:
        """Where the cache keeps bytes ``[start, end)`` of ``file`` (a relative name inside the repository)."""
        try:
            name = relative_file(file, f"a read of {self.repo}").replace("/", "--")
            return inside(self.folder, name, f"{int(start)}-{int(end)}.bin")
        except UnsafeName as err:
            raise ExtractionError(str(err)) from None

    def read(self, file: str, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of ``file``."""
        if end <= start:
            return b""
        path = self._path(file, start, end)
        if path.is_file() and path.stat().st_size == end - start:  # else not in the cache: read again
            return path.read_bytes()
        if self.offline:
            raise ExtractionError(
                f"bytes {start}-{end} of {self.repo}/{file} are not in the cache and HF_HUB_OFFLINE is set", "offline"
            )
        data = self._fetch(file, start, end)
        write_atomically(path, lambda tmp: Path(tmp).write_bytes(data))
        return data

    def _fetch(self, file: str, start: int, end: int) -> bytes:
        """One range from the hub, through the retrying client (:func:`attnstruct.hub_client.client.get_range`:
        redirects, rate limits, transient failures)."""
        url = f"{self.endpoint}/{self.repo}/resolve/{self.commit}/{quote(file)}"
        what, size = f"{self.repo}/{file}", self.sizes.get(file)
        with hub_failures_as_extraction_errors():
            data = get_range(url, start, end, token=self.token, what=what, size=size, calls=self.calls)
        with self._lock:
            self.bytes_fetched += len(data)
        return data


class RemoteSafetensors(RangeTensorSource):
    """The safetensors shards of a hub repository as a tensor source (names, shapes, one tensor or some of its
    rows at a time, config): :class:`~attnstruct.checkpoints.remote_tensors.RangeTensorSource` over the headers.

    Args:
        reader: where the bytes come from.
        files: the shard names (``model.safetensors``, or the values of the index's ``weight_map``).
        config: the repository's ``config.json`` as a :class:`~attnstruct.checkpoints.extract.hf.JsonConfig`.
        sizes: ``{file: bytes}`` as the hub lists them; a shard's size, when known, is where its tensors must end.
        workers: threads for :meth:`prefetch`.
    """

    def __init__(
        self,
        reader: RangeReader,
        files: list[str],
        config: JsonConfig,
        *,
        sizes: dict[str, int] | None = None,
        workers: int = 4,
    ):
        self.metadata: dict[str, dict[str, str]] = {}
        index = {}
        for file in files:
            what = f"{reader.repo}/{file}"
            entries, data_start, self.metadata[file] = _header(reader, file, (sizes or {}).get(file), what)
            for name, entry in entries.items():
                if name in index:
                    raise ExtractionError(f"{what} holds tensor {name!r}, which another shard holds too")
                index[name] = _location(file, name, entry, data_start)
        super().__init__(reader, index, config, description=f"{reader.repo}@{reader.commit[:12]}", workers=workers)


def _header(reader: RangeReader, file: str, size: int | None, what: str) -> tuple[dict, int, dict[str, str]]:
    """The checked header entries of one shard, the offset of its data, and its ``__metadata__``."""
    n = header_length(reader.read(file, 0, 8), size, what)
    entries, metadata = parse_header(reader.read(file, 8, 8 + n), None if size is None else size - 8 - n, what)
    return entries, 8 + n, metadata


def _location(file: str, name: str, entry: HeaderEntry, data_start: int) -> TensorLocation:
    """A checked header entry as a row-major location."""
    return TensorLocation(
        file=file,
        dtype=DTYPES.get(entry.dtype),
        dtype_name=entry.dtype,
        shape=entry.shape,
        stride=contiguous_strides(entry.shape),
        storage=name,
        storage_offset=0,
        storage_bytes=entry.end - entry.begin,
        data_start=data_start + entry.begin,
    )
