"""The rule every hostile input is held to, and the inputs' common parts (the ``hostile`` tier, docs/security.md).

A hostile input is anything the project does not trust: a file or answer from a hub, a run folder, a checkpoint
folder, an index. Whatever it is, the command that meets it ends in

* **one line** on stderr naming the problem (``attnstruct: error: <what>``, the one prefix of every command,
  something after it), and **exit status 2**;
* **nothing written** outside the command's own output (and no partial output in it);
* **no code run**: a code-carrying payload (:func:`code_running_pickle`) would create a canary file, which must
  stay absent.

:func:`assert_refused` checks the first for a command run in this process (``cli.main`` with ``capsys``) or in a
subprocess (:func:`run_attnstruct`, for inputs that could crash the interpreter); :class:`TreeWatch` the second;
:func:`canary` and :func:`code_running_pickle` the third. :func:`full_disk` and :func:`read_only_folder` mount a
tiny tmpfs (root only; skipped with the reason otherwise).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def assert_refused(status: int, err: str, *naming: str) -> str:
    """``status`` is 2 and ``err`` is one line ``attnstruct: error: DETAIL`` with a non-empty DETAIL that contains each
    of ``naming`` (case-sensitive). Returns the line."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert status == 2, f"exit status {status}, not 2; stderr:\n{err[-3000:]}"
    assert len(lines) == 1, f"{len(lines)} lines on stderr, not one:\n{err[-3000:]}"
    (line,) = lines
    assert "Traceback" not in line, line
    prog, sep, detail = line.partition(": error: ")
    assert sep and prog == "attnstruct", f"not 'attnstruct: error: ...': {line}"
    assert detail.strip(" :"), f"nothing after the colon: {line}"
    for name in naming:
        assert name in detail, f"{name!r} is not named in: {line}"
    return line


MEMORY_LIMIT = 3 << 30  # bytes of address space: enough for torch and a tiny model, not for what a bomb claims


def run_attnstruct(
    *argv: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 120, memory: int | None = None
):
    """``python -m attnstruct ARGV`` in a subprocess (one torch thread), for inputs that could crash the interpreter:
    the :class:`subprocess.CompletedProcess`, text mode. ``memory`` caps its address space in bytes
    (:data:`MEMORY_LIMIT` is enough for torch and a tiny model), so that an input that would take the machine's
    memory fails in the subprocess instead."""
    import resource

    environment = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", **(env or {})}
    limit = None if memory is None else (lambda: resource.setrlimit(resource.RLIMIT_AS, (memory, memory)))
    return subprocess.run(
        [sys.executable, "-m", "attnstruct", *argv],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=limit,
    )


def assert_process_refused(done: subprocess.CompletedProcess, *naming: str) -> str:
    """:func:`assert_refused` for a finished subprocess (a crash shows as a negative status or 134/139)."""
    return assert_refused(done.returncode, done.stderr, *naming)


def canary(folder: Path) -> Path:
    """A path that only code run from a hostile input would create; assert ``not canary.exists()`` at the end."""
    return Path(folder) / f"canary-{uuid.uuid4().hex}"


class _Touch:
    """Unpickled by a general unpickler, this runs ``open(path, "w")``: the canary appears."""

    def __init__(self, path: Path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def code_running_pickle(canary_path: Path, protocol: int = pickle.DEFAULT_PROTOCOL) -> bytes:
    """A pickle whose loading by ``pickle.load`` (or ``torch.load(weights_only=False)``) creates ``canary_path``."""
    return pickle.dumps({"state": _Touch(canary_path)}, protocol=protocol)


class TreeWatch:
    """What changed under ``root`` between entering and :meth:`changed`: paths (relative, as strings) created,
    removed or modified (size or mtime). ``with TreeWatch(tmp_path) as watch: ...; assert watch.changed() <= {...}``.
    """

    def __init__(self, root: Path):
        self.root = Path(root)
        self.before: dict[str, tuple[int, int]] = {}

    def _state(self) -> dict[str, tuple[int, int]]:
        state = {}
        for path in self.root.rglob("*"):
            with contextlib.suppress(FileNotFoundError):
                stat = path.lstat()
                state[str(path.relative_to(self.root))] = (stat.st_size, stat.st_mtime_ns)
        return state

    def __enter__(self) -> TreeWatch:
        self.before = self._state()
        return self

    def __exit__(self, *exc) -> None:
        return None

    def changed(self) -> set[str]:
        after = self._state()
        return {path for path in self.before.keys() | after.keys() if self.before.get(path) != after.get(path)}


def _mount_tmpfs(folder: Path, options: str) -> None:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tiny file system needs root and mount(8); not available here")
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {' '.join(done.stderr.split())}")


@contextlib.contextmanager
def full_disk(folder: Path, size_kib: int = 64, room_kib: int = 0):
    """``folder`` on a tmpfs of ``size_kib`` KiB filled up to ``room_kib`` KiB of free space; unmounted on exit."""
    _mount_tmpfs(folder, f"size={size_kib}k")
    try:
        filler = folder / ".filler"
        with open(filler, "wb", buffering=0) as handle, contextlib.suppress(OSError):
            while handle.write(b"\0" * 4096):
                pass
        stat = os.statvfs(folder)
        free = stat.f_bavail * stat.f_frsize
        if room_kib:
            with open(filler, "r+b") as handle:
                handle.truncate(max(0, filler.stat().st_size - (room_kib * 1024 - free)))
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


@contextlib.contextmanager
def read_only_folder(folder: Path):
    """``folder`` as an empty, read-only tmpfs (root ignores permission bits, so a mode would not do); unmounted on
    exit."""
    _mount_tmpfs(folder, "size=64k,ro")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)
