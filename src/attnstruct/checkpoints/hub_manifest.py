"""What a hub says a repository holds, checked before it is used: a model's file list, a shard index, a cached pin.

A hub's answer, a shard index and the cache are untrusted (docs/security.md). Each reader here returns only what
passes :mod:`attnstruct.untrusted`'s checks: a commit id of 40 hexadecimal digits, file names that are relative names
inside the repository, sizes that are byte counts, sha256 digests of 64 lowercase hexadecimal digits, shards that are
files the repository lists. Anything else is an
:class:`~attnstruct.checkpoints.extract.blocks.ExtractionError` in one line naming where it was read, raised before
the name becomes a path or a URL.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Collection
from pathlib import Path
from typing import NamedTuple

from ..untrusted import UnsafeName, commit_id, one_line, relative_file
from .extract import local_files
from .extract.blocks import ExtractionError

SHA256 = re.compile(r"[0-9a-f]{64}")


class Listing(NamedTuple):
    """What a model info answer says of one commit: its id, its files, each file's size in bytes and each LFS file's
    sha256 (the digest of its content, which the hub keeps for every file stored by Git LFS: weights)."""

    commit: str
    files: list[str]
    sizes: dict[str, int]
    sha256: dict[str, str]


def _size(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 63


def _checked(check, *args):
    try:
        return check(*args)
    except UnsafeName as err:
        raise ExtractionError(str(err)) from None


def _digest(value, name: str, what: str) -> str:
    if not (isinstance(value, str) and SHA256.fullmatch(value)):
        raise ExtractionError(f"{what} gives {str(value)[:80]!r} as the sha256 of {name}, not 64 lowercase hex digits")
    return value


def listing(answer, what: str) -> Listing:
    """The :class:`Listing` of a model info answer (``GET /api/models/REPO/revision/REV?blobs=true``, what
    ``huggingface_hub.HfApi.model_info(files_metadata=True)`` asks: ``sha`` and ``siblings``, each ``{"rfilename",
    "size", "lfs": {"size", "sha256"}}``; an LFS file's size is its ``lfs.size``, its digest ``lfs.sha256``).
    ``what`` names the answer in errors."""
    if not isinstance(answer, dict):
        raise ExtractionError(f"{what} is not a model's info (a JSON object)")
    commit = _checked(commit_id, answer.get("sha"), what)
    siblings = answer.get("siblings") or []
    if not isinstance(siblings, list) or not all(isinstance(sibling, dict) for sibling in siblings):
        raise ExtractionError(f"{what} lists its files as {type(siblings).__name__}, not as a list of objects")
    files, sizes, digests = set(), {}, {}
    for sibling in siblings:
        name = _checked(relative_file, sibling.get("rfilename"), what)
        lfs = sibling.get("lfs")
        size = lfs.get("size") if isinstance(lfs, dict) else sibling.get("size")
        if size is not None and not _size(size):
            raise ExtractionError(f"{what} gives {size!r} as the size of {name}, which is not a number of bytes")
        files.add(name)
        if size is not None:
            sizes[name] = size
        if isinstance(lfs, dict) and lfs.get("sha256") is not None:
            digests[name] = _digest(lfs["sha256"], name, what)
    return Listing(commit, sorted(files), sizes, digests)


def weights_digest(files: Collection[str], sha256: dict[str, str] | None) -> str | None:
    """One digest of a checkpoint's weight ``files``: the single file's sha256, or for several (shards) the sha256 of
    their sorted ``name:sha256`` lines (each ending in a newline); None when a file's sha256 is not known. Two
    checkpoints with one digest hold byte-identical weights."""
    if not files or sha256 is None or any(name not in sha256 for name in files):
        return None
    if len(files) == 1:
        return sha256[next(iter(files))]
    lines = sorted(f"{name}:{sha256[name]}\n" for name in set(files))
    return hashlib.sha256("".join(lines).encode()).hexdigest()


def shard_names(data: bytes, what: str, files: Collection[str] | None = None) -> list[str]:
    """The shard files the shard index ``data`` (its bytes) names, by the rule a local folder's index is held to
    (:func:`attnstruct.checkpoints.extract.local_files.shard_names`): sorted, relative file names, and, when
    ``files`` is given, files of the repository. ``what`` names the index."""
    try:
        index = json.loads(data)
    except (ValueError, RecursionError) as err:  # not UTF-8, not JSON, or nested without end
        raise ExtractionError(f"{what} is not JSON ({one_line(err)})") from None
    return local_files.shard_names(index, what, files)


def stored_commit(path: Path, what: str) -> str:
    """The commit a pin file of a cache holds (``refs/REV``: the commit id alone)."""
    try:
        text = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as err:
        raise ExtractionError(f"cannot read {path} ({what}): {one_line(err)}") from None
    return _checked(commit_id, text, f"{path} ({what})")


def manifest_json(found: Listing) -> str:
    """The manifest of ``found`` that attnstruct's cache keeps (its commit is the file's name)."""
    return json.dumps({"files": found.files, "sizes": found.sizes, "sha256": found.sha256})


def stored_manifest(path: Path) -> tuple[list[str], dict[str, int] | None, dict[str, str] | None]:
    """``(files, sizes, sha256)`` of a manifest attnstruct's cache keeps (``{"files": [...], "sizes": {file: bytes},
    "sha256": {file: digest}}``; ``sizes`` None in one written before sizes were kept, ``sha256`` None in one
    written before digests were), checked as the answer it was made from."""
    try:
        manifest = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError) as err:
        raise ExtractionError(f"cannot read the manifest {path}: {one_line(err)}; remove it") from None
    fields = ("files", "sizes", "sha256")
    files, sizes, digests = (manifest.get(k) if isinstance(manifest, dict) else None for k in fields)
    if not isinstance(files, list) or not all(v is None or isinstance(v, dict) for v in (sizes, digests)):
        raise ExtractionError(f"{path} is not a manifest (files, sizes and digests of a commit); remove it")
    what = f"the manifest {path}"
    files = [_checked(relative_file, name, what) for name in files]
    for name, size in (sizes or {}).items():
        if name not in files or not _size(size):
            raise ExtractionError(f"{what} gives {size!r} as the size of {name!r}; remove it")
    for name, digest in (digests or {}).items():
        if name not in files:
            raise ExtractionError(f"{what} gives a sha256 of {name!r}, not one of its files; remove it")
        _digest(digest, name, f"{what} (remove it)")
    return files, sizes, digests
