"""Work that several pytest-xdist workers need, done once per test session.

Each worker is its own process, so a session-scoped fixture would run once per worker. :class:`SharedWork` keeps
one folder for the whole session (the parent of the workers' temporary folders under xdist, the session's own
without it): the first process to ask for ``key`` does the work under a file lock and writes its JSON result
(or its error) beside the lock; every later caller, in any worker, waits for the lock and reads that file. A
failure is recorded once and raised again for every caller, not retried.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from filelock import FileLock


class SharedWorkFailed(RuntimeError):
    """The work of one key failed in the process that did it; the message is that process's error."""


def session_folder(tmp_path_factory) -> Path:
    """The folder every worker of this session sees: the parent of the worker's base folder under xdist."""
    base = tmp_path_factory.getbasetemp()
    folder = base.parent / "shared" if os.environ.get("PYTEST_XDIST_WORKER") else base / "shared"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


class SharedWork:
    """``once(key, make)``: ``make(folder)`` done once per session, its JSON-able result returned to every caller.

    ``folder`` (``root / key``) is where the work writes its files; it lives as long as the session's temporary
    folders.
    """

    def __init__(self, root: Path):
        self.root = Path(root)

    def folder(self, key: str) -> Path:
        return self.root / key

    def once(self, key: str, make: Callable[[Path], object]):
        record = self.root / f"{key}.json"
        with FileLock(self.root / f"{key}.lock"):
            if not record.is_file():
                try:
                    folder = self.folder(key)
                    folder.mkdir(parents=True, exist_ok=True)
                    state = {"value": make(folder)}
                except Exception as err:  # noqa: BLE001 - recorded for every later caller, then raised
                    state = {"error": f"{type(err).__name__}: {err}"}
                    record.write_text(json.dumps(state))
                    raise
                record.write_text(json.dumps(state))
            state = json.loads(record.read_text())
        if "error" in state:
            raise SharedWorkFailed(f"{key} failed earlier in this session: {state['error']}")
        return state["value"]
