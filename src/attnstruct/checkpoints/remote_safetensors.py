"""Safetensors checkpoints on a model hub, read by HTTP Range requests: headers, then only the tensors asked for.

A safetensors file is ``[8-byte little-endian header length n][n bytes of JSON header][tensor data]``; the header
maps each tensor name to ``dtype``, ``shape`` and ``data_offsets [begin, end)`` relative to the data start
``8 + n``. So one tensor is one byte range, and a checkpoint's query/key weights can be read without the
embeddings or the MLPs. :class:`RangeReader` stores every range read on disk under
``cache/<repo>/<commit>/<file>/``, keyed by the commit, which never changes: a second read of the same tensor does
no network I/O (:mod:`attnstruct.checkpoints.remote_torch_bin` reads ``pytorch_model.bin`` through it too).

:class:`RemoteSafetensors` builds the index of tensor locations from the headers; reading, prefetching in
background threads (so that the network works on the next layers while the current one is scored) and counting
parameters are :class:`~attnstruct.checkpoints.remote_tensors.RangeTensorSource`'s, a
:class:`~attnstruct.checkpoints.extract.hf.TensorSource` that :func:`attnstruct.checkpoints.extract.hf.hf_blocks`
reads like a local folder.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from urllib.parse import quote

import torch

from ..results import write_atomically
from .extract.blocks import ExtractionError
from .extract.hf import JsonConfig
from .hub_client import get_range
from .remote_tensors import RangeTensorSource, TensorLocation, contiguous_strides

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
MAX_HEADER_BYTES = 100_000_000  # the safetensors library's own limit


class RangeReader:
    """Byte ranges of one repository's files at one commit, from the disk cache or by HTTP Range requests.

    Thread-safe; ``bytes_fetched`` counts the body bytes that came over the network.
    """

    def __init__(self, repo: str, commit: str, *, endpoint: str, token: str | None, cache: Path, offline: bool):
        self.repo, self.commit, self.endpoint, self.token, self.offline = repo, commit, endpoint, token, offline
        self.folder = cache / repo.replace("/", "--") / commit
        self.bytes_fetched = 0
        self._lock = threading.Lock()

    def _path(self, file: str, start: int, end: int) -> Path:
        return self.folder / file.replace("/", "--") / f"{start}-{end}.bin"

    def read(self, file: str, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of ``file``."""
        if end <= start:
            return b""
        path = self._path(file, start, end)
        if path.is_file():
            return path.read_bytes()
        if self.offline:
            raise ExtractionError(
                f"bytes {start}-{end} of {self.repo}/{file} are not in the cache and HF_HUB_OFFLINE is set", "offline"
            )
        data = self._fetch(file, start, end)
        write_atomically(path, lambda tmp: Path(tmp).write_bytes(data))
        return data

    def _fetch(self, file: str, start: int, end: int) -> bytes:
        """One range from the hub, through the retrying client (:func:`attnstruct.checkpoints.hub_client.get_range`:
        redirects, rate limits, transient failures)."""
        url = f"{self.endpoint}/{self.repo}/resolve/{self.commit}/{quote(file)}"
        data = get_range(url, start, end, token=self.token, what=f"{self.repo}/{file}")
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
        workers: threads for :meth:`prefetch`.
    """

    def __init__(self, reader: RangeReader, files: list[str], config: JsonConfig, *, workers: int = 4):
        self.headers: dict[str, dict] = {}
        index = {}
        for file in files:
            header, data_start = _header(reader, file)
            self.headers[file] = header
            for name, info in header.items():
                if name != "__metadata__":
                    index[name] = _location(f"{reader.repo}/{file}", file, name, info, data_start)
        super().__init__(reader, index, config, description=f"{reader.repo}@{reader.commit[:12]}", workers=workers)


def _header(reader: RangeReader, file: str) -> tuple[dict, int]:
    """The JSON header of one shard and the offset of its data."""
    size = int.from_bytes(reader.read(file, 0, 8), "little")
    if not 2 <= size <= MAX_HEADER_BYTES:
        raise ExtractionError(f"{reader.repo}/{file} is not a safetensors file (header length {size})")
    try:
        header = json.loads(reader.read(file, 8, 8 + size))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ExtractionError(f"{reader.repo}/{file}: unreadable safetensors header ({err})") from None
    if not isinstance(header, dict):
        raise ExtractionError(f"{reader.repo}/{file}: the safetensors header is not a JSON object")
    return header, 8 + size


def _location(what: str, file: str, name: str, info, data_start: int) -> TensorLocation:
    """A header entry ``{"dtype", "shape", "data_offsets": [begin, end)}`` as a row-major location."""
    try:
        shape = tuple(int(n) for n in info["shape"])
        begin, end = (int(n) for n in info["data_offsets"])
        dtype_name = str(info["dtype"])
    except (KeyError, TypeError, ValueError):
        raise ExtractionError(f"{what}: the header entry of tensor {name} lacks dtype, shape or data_offsets") from None
    return TensorLocation(
        file=file,
        dtype=DTYPES.get(dtype_name),
        dtype_name=dtype_name,
        shape=shape,
        stride=contiguous_strides(shape),
        storage=name,
        storage_offset=0,
        storage_bytes=end - begin,
        data_start=data_start + begin,
    )
