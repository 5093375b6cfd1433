"""Safetensors checkpoints on a model hub, read by HTTP Range requests: headers, then only the tensors asked for.

A safetensors file is ``[8-byte little-endian header length n][n bytes of JSON header][tensor data]``; the header
maps each tensor name to ``dtype``, ``shape`` and ``data_offsets [begin, end)`` relative to the data start
``8 + n``. So one tensor is one byte range, and a checkpoint's query/key weights can be read without the
embeddings or the MLPs. Every range read is stored on disk under ``cache/<repo>/<commit>/<file>/``, keyed by the
commit, which never changes: a second read of the same tensor does no network I/O.

:class:`RemoteSafetensors` is a :class:`~attnstruct.checkpoints.extract.hf.TensorSource`, so
:func:`attnstruct.checkpoints.extract.hf.hf_blocks`
reads it like a local folder. :meth:`RemoteSafetensors.prefetch` fetches a list of tensors in background threads,
in order, so that the network works on the next layers while the current one is scored.
"""

from __future__ import annotations

import json
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote

import torch

from ..results import write_atomically
from .extract.blocks import ExtractionError, one_line
from .extract.hf import JsonConfig
from .extract.parameters import count_parameters

DTYPES = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
}
MAX_HEADER_BYTES = 100_000_000  # the safetensors library's own limit
REQUEST_TIMEOUT_S = 120  # huggingface_hub's client has none: a stalled server would hang the sweep


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
        from huggingface_hub import get_session
        from huggingface_hub.utils import build_hf_headers, hf_raise_for_status

        url = f"{self.endpoint}/{self.repo}/resolve/{self.commit}/{quote(file)}"
        headers = {**build_hf_headers(token=self.token), "Range": f"bytes={start}-{end - 1}"}
        try:
            response = get_session().get(url, headers=headers, timeout=REQUEST_TIMEOUT_S)
            hf_raise_for_status(response)
            data = response.content
        except ExtractionError:
            raise
        except Exception as err:
            raise hub_error(err, f"{self.repo}/{file}") from None
        if response.status_code != 206 and len(data) > end - start:
            data = data[start:end]  # a server that ignores Range sends the whole file
        with self._lock:
            self.bytes_fetched += len(data)
        if len(data) != end - start:
            raise ExtractionError(
                f"{self.repo}/{file} sent {len(data)} of the {end - start} bytes asked for at offset {start}",
                "truncated",
            )
        return data


def hub_error(err: BaseException, what: str) -> ExtractionError:
    """The :class:`ExtractionError` of a failed hub request, its kind read from the error's type and HTTP status:
    gated, not found (repository, revision, file), rate limited (429), truncated (a transfer that broke off), or
    error (unreachable, anything else)."""
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError

    name = type(err).__name__
    status = getattr(getattr(err, "response", None), "status_code", None)
    if isinstance(err, GatedRepoError):
        return ExtractionError(f"{what} needs an accepted licence and a token (HF_TOKEN)", "gated")
    if isinstance(err, RepositoryNotFoundError):
        return ExtractionError(f"{what} (no such repository, or private: set HF_TOKEN)", "not found")
    if isinstance(err, RevisionNotFoundError):
        return ExtractionError(f"{what} (no such revision)", "not found")
    if "EntryNotFound" in name and "Local" not in name:
        return ExtractionError(f"{what} (no such file in the repository)", "not found")
    if status == 429:
        return ExtractionError(f"the hub refused {what} for now (HTTP 429): try again later", "rate limited")
    if "RemoteProtocol" in name or "ReadError" in name or "IncompleteRead" in name:
        return ExtractionError(f"the transfer of {what} broke off ({one_line(err)})", "truncated")
    return ExtractionError(f"cannot read {what} from the hub: {one_line(err)}")


class RemoteSafetensors:
    """The safetensors shards of a hub repository as a tensor source (names, one tensor at a time, config).

    Args:
        reader: where the bytes come from.
        files: the shard names (``model.safetensors``, or the values of the index's ``weight_map``).
        config: the repository's ``config.json`` as a :class:`~attnstruct.checkpoints.extract.hf.JsonConfig`.
        workers: threads for :meth:`prefetch`.
    """

    def __init__(self, reader: RangeReader, files: list[str], config: JsonConfig, *, workers: int = 4):
        self.reader, self.config = reader, config
        self.description = f"{reader.repo}@{reader.commit[:12]}"
        self._where: dict[str, tuple[str, dict, int]] = {}
        self.headers: dict[str, dict] = {}
        for file in files:
            header, data_start = self._header(file)
            self.headers[file] = header
            for name, info in header.items():
                if name != "__metadata__":
                    self._where[name] = (file, info, data_start)
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="attnstruct-range")
        self._pending: dict[str, Future] = {}
        self._queue: list[tuple[str, ...]] = []
        self._window = 2 * workers

    def _header(self, file: str) -> tuple[dict, int]:
        size = int.from_bytes(self.reader.read(file, 0, 8), "little")
        if not 2 <= size <= MAX_HEADER_BYTES:
            raise ExtractionError(f"{self.reader.repo}/{file} is not a safetensors file (header length {size})")
        try:
            header = json.loads(self.reader.read(file, 8, 8 + size))
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise ExtractionError(f"{self.reader.repo}/{file}: unreadable safetensors header ({err})") from None
        if not isinstance(header, dict):
            raise ExtractionError(f"{self.reader.repo}/{file}: the safetensors header is not a JSON object")
        return header, 8 + size

    def names(self) -> list[str]:
        return list(self._where)

    def _tensor(self, name: str, data: bytes) -> torch.Tensor:
        """Tensor ``name`` from its bytes, checked against its dtype and shape."""
        info = self._where[name][1]
        dtype = DTYPES.get(info["dtype"])
        if dtype is None:
            raise ExtractionError(f"tensor {name} has dtype {info['dtype']}, which attnstruct cannot read")
        shape = [int(n) for n in info["shape"]]
        expected = torch.Size(shape).numel() * torch.empty((), dtype=dtype).element_size()
        if len(data) != expected:
            raise ExtractionError(f"tensor {name}: {len(data)} bytes for shape {shape} {info['dtype']}")
        if not data:
            return torch.empty(shape, dtype=dtype)
        return torch.frombuffer(bytearray(data), dtype=dtype).reshape(shape)

    def _load(self, names: tuple[str, ...]) -> dict[str, torch.Tensor]:
        """Tensors that lie next to each other in one file (:meth:`_groups`), in one range read."""
        file, _, data_start = self._where[names[0]]
        offsets = {n: self._where[n][1]["data_offsets"] for n in names}
        start, end = min(b for b, _ in offsets.values()), max(e for _, e in offsets.values())
        data = self.reader.read(file, data_start + start, data_start + end)
        return {n: self._tensor(n, data[b - start : e - start]) for n, (b, e) in offsets.items()}

    def _groups(self, names: list[str]) -> list[tuple[str, ...]]:
        """``names`` in order, consecutive ones merged when their bytes touch in the same file (a bias and its
        weight, say): one request and one cache file for each group."""
        groups: list[list[str]] = []
        span = None  # (file, begin, end) of the last group
        for name in names:
            file, info, _ = self._where[name]
            begin, end = info["data_offsets"]
            if span and span[0] == file and (begin == span[2] or end == span[1]):
                groups[-1].append(name)
                span = (file, min(begin, span[1]), max(end, span[2]))
            else:
                groups.append([name])
                span = (file, begin, end)
        return [tuple(g) for g in groups]

    def prefetch(self, names: list[str]) -> None:
        """Read ``names`` in the background, in this order, at most ``2 * workers`` tensors ahead of :meth:`get`
        (so memory holds a few layers, not the model)."""
        self._queue = self._groups([n for n in dict.fromkeys(names) if n in self._where])
        self._refill()

    def _refill(self) -> None:
        while self._queue and len(self._pending) < self._window:
            group = self._queue.pop(0)
            future = self._pool.submit(self._load, group)
            self._pending.update(dict.fromkeys(group, future))

    def get(self, name: str) -> torch.Tensor:
        """One tensor, from a prefetch when one was started."""
        future = self._pending.pop(name, None)
        if future is None:
            self._queue = [g for g in self._queue if name not in g]
        self._refill()
        return future.result()[name] if future is not None else self._load((name,))[name]

    def close(self) -> None:
        self._queue.clear()
        for future in self._pending.values():
            future.cancel()
        self._pool.shutdown(wait=True)
        self._pending.clear()

    def n_params(self) -> int:
        """Parameters as ``model.num_parameters()`` counts them, from the headers alone
        (:func:`attnstruct.checkpoints.extract.count_parameters`)."""
        return count_parameters(self.headers.values(), config=self.config)
