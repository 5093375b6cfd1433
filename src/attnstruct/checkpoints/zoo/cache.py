"""Where fetched entries live in the cache, whether they are fetched, and rehashing them.

Layout, under the cache folder (:func:`attnstruct.cache_folder.cache_dir`): ``<cache>/models/<name>/`` for
checkpoints, ``<cache>/corpora/<name>/`` for text corpora; each folder holds the entry's files and, after a
verified fetch, the marker ``.zoo-fetched.json`` (name, sha256, size, files, distributions, UTC time, and each
file's identity: size, modification and change times in nanoseconds, inode number).

Every use asks :func:`is_fetched`, which compares each file's identity with the marker's (a ``stat`` per file,
microseconds) and rehashes only where one differs: a file written, truncated, replaced or copied since the
verified fetch is rehashed, and either matches its pinned sha256 (the marker is written again with its new
identity) or is not used (the marker is dropped, so ``attnstruct fetch-models NAME`` fetches it again). A
rehash at every use would cost 0.26 s for the core set's 334 MB and 1.2 s for all 1.6 GB (sha256 at 1.3 GB/s on
one core, measured), paid by every score and notebook run; the identity check catches every change made through
the file system, since any write moves a file's change time, which only a change of the system clock sets back.
:func:`verify` rehashes on demand (``fetch-models --verify``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from datetime import datetime, timezone
from pathlib import Path
from stat import S_ISREG

from ...cache_folder import cache_dir
from ...results import write_atomically
from .registry import FOLDER_FORMATS, Entry, FetchError, resolve

MARKER = ".zoo-fetched.json"
CHUNK = 1 << 20


def model_dir(name: str | Entry, cache: str | os.PathLike | None = None) -> Path:
    """The folder ``<cache>/models/<name>/`` that holds one checkpoint's files (``corpora/`` for text corpora)."""
    entry = resolve(name)
    return cache_dir(cache) / ("corpora" if entry.is_corpus else "models") / entry.name


def path(name: str | Entry, cache: str | os.PathLike | None = None) -> Path:
    """Where the fetched entry is: the folder for folder formats, the payload file otherwise (``gguf``, ``onnx``,
    a corpus's ``text``).

    This is what to pass to :func:`attnstruct.checkpoints.extract.iter_blocks`. It does not check that it was fetched.
    """
    entry = resolve(name)
    folder = model_dir(entry, cache)
    return folder if entry.format in FOLDER_FORMATS else folder / entry.payload


def read_marker(folder: Path) -> dict | None:
    """The marker of ``folder`` as a dict, or None if it is missing or unreadable."""
    try:
        return json.loads((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _pinned(entry: Entry) -> list[tuple[str, str, int]]:
    """``(file name, sha256, size)`` of each file the entry installs, the payload first."""
    return [(entry.payload, entry.sha256, entry.size), *((x.dest, x.sha256, x.size) for x in entry.extra_files)]


def identities(entry: Entry, folder: Path) -> dict[str, list[int]] | None:
    """Each file's ``[size, mtime_ns, ctime_ns, inode]``; None if one is missing or not a regular file."""
    found = {}
    for name, _, _ in _pinned(entry):
        try:
            stat = (folder / name).stat()
        except OSError:
            return None
        if not S_ISREG(stat.st_mode):
            return None
        found[name] = [stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino]
    return found


def intact_files(entry: Entry, folder: Path) -> set[str]:
    """The entry's files in ``folder`` whose size and sha256 are the pinned ones (a file of another size is not
    read)."""
    intact = set()
    for name, sha256, size in _pinned(entry):
        file = folder / name
        if file.is_file() and file.stat().st_size == size and file_sha256(file) == (sha256, size):
            intact.add(name)
    return intact


def rehash(entry: Entry, folder: Path) -> tuple[set[str], dict[str, list[int]] | None]:
    """The entry's files in ``folder`` that match their pinned size and sha256 (:func:`intact_files`), and their
    identities (:func:`identities`) when all do and none changed while hashed, else None."""
    seen = identities(entry, folder)
    intact = intact_files(entry, folder)
    unchanged = seen is not None and intact == set(entry.files) and identities(entry, folder) == seen
    return intact, seen if unchanged else None


def write_marker(entry: Entry, folder: Path, seen: dict[str, list[int]] | None = None) -> None:
    """Record a verified fetch of ``entry`` in ``folder`` (atomically: a reader sees no marker or a whole one), with
    the files' identities ``seen`` before they were hashed (default: as they are now)."""
    marker = {
        "name": entry.name,
        "sha256": entry.sha256,
        "size": entry.size,
        "files": list(entry.files),
        "distributions": list(entry.distributions),
        "fetched": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "identities": seen if seen is not None else identities(entry, folder),
    }
    text = json.dumps(marker, indent=1) + "\n"
    write_atomically(folder / MARKER, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def is_fetched(name: str | Entry, cache: str | os.PathLike | None = None) -> bool:
    """True when a verified fetch of this entry's current hash left its marker and its files are as it left them
    (module docstring: their identities match the marker's, or a rehash matches the pinned sha256 and the marker
    is renewed). A file changed since drops the marker: False, and the next fetch replaces it."""
    entry = resolve(name)
    folder = model_dir(entry, cache)
    marker = read_marker(folder)
    if not marker or marker.get("sha256") != entry.sha256:
        return False
    seen = identities(entry, folder)
    if seen is None:
        return False
    if marker.get("identities") == seen:
        return True
    _, verified = rehash(entry, folder)
    if verified is None:
        with contextlib.suppress(OSError):
            (folder / MARKER).unlink(missing_ok=True)
        return False
    with contextlib.suppress(OSError):  # a read-only cache: verified now, and again at the next use
        write_marker(entry, folder, verified)
    return True


def why_not_fetched(name: str | Entry, cache: str | os.PathLike | None = None) -> str:
    """Why :func:`is_fetched` says no, in words that follow the entry's name: ``is not fetched yet``; when its payload
    is there but files the registry lists are not, which (a file listed after the fetch, or one removed since);
    else, when its files are there, that they do not match their pinned sha256 (changed since a fetch, or a fetch
    cut short)."""
    entry = resolve(name)
    folder = model_dir(entry, cache)
    present = [file for file, _, _ in _pinned(entry) if (folder / file).exists()]
    missing = [file for file, _, _ in _pinned(entry) if file not in present]
    if entry.payload in present and missing:
        lacking = ", ".join(missing)
        return f"in {folder} lacks {lacking} (listed in the registry after it was fetched, or removed since)"
    if present:
        return f"in {folder} does not match its pinned sha256 (changed since it was fetched, or its fetch did not end)"
    return "is not fetched yet"


def file_sha256(file: str | os.PathLike) -> tuple[str, int]:
    """(sha256 hex digest, size in bytes) of a file, read in 1 MiB chunks."""
    digest, size = hashlib.sha256(), 0
    with open(file, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def verify(name: str | Entry, cache: str | os.PathLike | None = None) -> Path:
    """Rehash the fetched payload and extra files; raise FetchError on a mismatch (and drop the marker, so the next
    fetch downloads again) or if the entry was not fetched. Return :func:`path`."""
    entry = resolve(name)
    folder = model_dir(entry, cache)
    marker = read_marker(folder)
    if not marker or marker.get("sha256") != entry.sha256 or identities(entry, folder) is None:
        raise FetchError(f"{entry.name}: not fetched into {folder}")
    for dest, sha256, size in _pinned(entry):
        actual, actual_size = file_sha256(folder / dest)
        if actual != sha256 or actual_size != size:
            (folder / MARKER).unlink(missing_ok=True)
            raise FetchError(
                f"{entry.name}: sha256 mismatch for {folder / dest}: expected {sha256}, got {actual} "
                f"({actual_size} bytes, expected {size}); run attnstruct fetch-models {entry.name} to replace it"
            )
    return path(entry, cache)
