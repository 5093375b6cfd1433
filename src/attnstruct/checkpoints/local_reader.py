"""Byte ranges of a local checkpoint's files, read as a hub repository's are: the reader a local ``pytorch_model.bin``
is indexed and read through (:class:`~attnstruct.checkpoints.remote_tensors.RangeTensorSource`), so that what a local
reading costs is what the same reading from the hub would transfer."""

from __future__ import annotations

import stat
import threading
from pathlib import Path

from ..untrusted import one_line
from .extract.blocks import ExtractionError


class LocalFileReader:
    """Byte ranges of the files of a local folder, as :class:`~attnstruct.checkpoints.remote_safetensors.RangeReader`
    reads a hub repository's: ``read(file, start, end)``; ``bytes_fetched`` counts the bytes read from disk.
    Thread-safe."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        self.bytes_fetched = 0
        self._lock = threading.Lock()

    def size(self, file: str) -> int:
        """The length of ``file``, which must be a regular file (reading a pipe or a device would never end)."""
        path = self.folder / file
        try:
            found = path.stat()
        except FileNotFoundError:
            raise ExtractionError(f"checkpoint file {path}", "not found") from None
        except OSError as err:
            raise ExtractionError(f"cannot read {path}: {one_line(err)}") from None
        if not stat.S_ISREG(found.st_mode):
            raise ExtractionError(f"checkpoint file {path} is not a regular file")
        return found.st_size

    def read(self, file: str, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of ``file``."""
        if end <= start:
            return b""
        path = self.folder / file
        try:
            with open(path, "rb") as handle:
                handle.seek(start)
                data = handle.read(end - start)
        except FileNotFoundError:
            raise ExtractionError(f"checkpoint file {path}", "not found") from None
        except OSError as err:
            raise ExtractionError(f"cannot read {path}: {one_line(err)}") from None
        with self._lock:
            self.bytes_fetched += len(data)
        if len(data) != end - start:
            raise ExtractionError(f"{path} ends at byte {start + len(data)}, before byte {end}", "truncated")
        return data
