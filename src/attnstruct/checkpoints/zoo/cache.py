"""Where fetched entries live in the cache, whether they are fetched, and rehashing them.

Layout: ``<cache>/models/<name>/`` for checkpoints, ``<cache>/corpora/<name>/`` for text corpora; each folder
holds the entry's files and, after a verified fetch, the marker ``.zoo-fetched.json`` (name, sha256, size,
files, distributions, UTC time). :func:`is_fetched` trusts the marker without rehashing; :func:`verify`
rehashes.
"""

from __future__ import annotations

import hashlib
import json
import os
from datetime import datetime, timezone
from pathlib import Path

from ...results import write_atomically
from .registry import FOLDER_FORMATS, Entry, FetchError, resolve

CACHE_ENV = "ATTNSTRUCT_CACHE"
MARKER = ".zoo-fetched.json"
CHUNK = 1 << 20


def cache_dir(override: str | os.PathLike | None = None) -> Path:
    """The cache root: ``override``, else ``$ATTNSTRUCT_CACHE``, else ``$XDG_CACHE_HOME/attnstruct`` or
    ``~/.cache/attnstruct``."""
    if override is not None and str(override) != "":
        return Path(override).expanduser()
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "attnstruct"


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


def write_marker(entry: Entry, folder: Path) -> None:
    """Record a verified fetch of ``entry`` in ``folder`` (atomically: a reader sees no marker or a whole one)."""
    marker = {
        "name": entry.name,
        "sha256": entry.sha256,
        "size": entry.size,
        "files": list(entry.files),
        "distributions": list(entry.distributions),
        "fetched": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    text = json.dumps(marker, indent=1) + "\n"
    write_atomically(folder / MARKER, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def is_fetched(name: str | Entry, cache: str | os.PathLike | None = None) -> bool:
    """True when a verified fetch of this entry's current hash left its marker and files (no rehashing)."""
    entry = resolve(name)
    folder = model_dir(entry, cache)
    marker = read_marker(folder)
    if not marker or marker.get("sha256") != entry.sha256:
        return False
    payload = folder / entry.payload
    return (
        payload.is_file()
        and payload.stat().st_size == entry.size
        and all((folder / extra.dest).is_file() for extra in entry.extra_files)
    )


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
    if not is_fetched(entry, cache):
        raise FetchError(f"{entry.name}: not fetched into {folder}")
    checks = [(entry.payload, entry.sha256, entry.size)]
    checks += [(extra.dest, extra.sha256, extra.size) for extra in entry.extra_files]
    for dest, sha256, size in checks:
        actual, actual_size = file_sha256(folder / dest)
        if actual != sha256 or actual_size != size:
            (folder / MARKER).unlink(missing_ok=True)
            raise FetchError(
                f"{entry.name}: sha256 mismatch for {folder / dest}: expected {sha256}, got {actual} "
                f"({actual_size} bytes, expected {size}); fetch again to replace it"
            )
    return path(entry, cache)
