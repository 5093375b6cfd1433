"""What a hub says a repository holds, checked before it is used: a model's file list, a shard index, a cached pin.

A hub's answer, a shard index and the cache are untrusted (docs/security.md). Each reader here returns only what
passes :mod:`attnstruct.untrusted`'s checks: a commit id of 40 hexadecimal digits, file names that are relative names
inside the repository, sizes that are byte counts, shards that are files the repository lists. Anything else is an
:class:`~attnstruct.checkpoints.extract.blocks.ExtractionError` in one line naming where it was read, raised before
the name becomes a path or a URL.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from pathlib import Path

from ..untrusted import UnsafeName, commit_id, relative_file
from .extract import local_files
from .extract.blocks import ExtractionError, one_line


def _size(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 63


def _checked(check, *args):
    try:
        return check(*args)
    except UnsafeName as err:
        raise ExtractionError(str(err)) from None


def listing(answer, what: str) -> tuple[str, list[str], dict[str, int]]:
    """``(commit, files, sizes)`` of a model info answer (``GET /api/models/REPO/revision/REV?blobs=true``: ``sha``
    and ``siblings``, each ``{"rfilename", "size", "lfs": {"size"}}``; an LFS file's size is its ``lfs.size``).
    ``what`` names the answer in errors."""
    if not isinstance(answer, dict):
        raise ExtractionError(f"{what} is not a model's info (a JSON object)")
    commit = _checked(commit_id, answer.get("sha"), what)
    siblings = answer.get("siblings") or []
    if not isinstance(siblings, list) or not all(isinstance(sibling, dict) for sibling in siblings):
        raise ExtractionError(f"{what} lists its files as {type(siblings).__name__}, not as a list of objects")
    files, sizes = set(), {}
    for sibling in siblings:
        name = _checked(relative_file, sibling.get("rfilename"), what)
        lfs = sibling.get("lfs")
        size = lfs.get("size") if isinstance(lfs, dict) else sibling.get("size")
        if size is not None and not _size(size):
            raise ExtractionError(f"{what} gives {size!r} as the size of {name}, which is not a number of bytes")
        files.add(name)
        if size is not None:
            sizes[name] = size
    return commit, sorted(files), sizes


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


def stored_manifest(path: Path) -> tuple[list[str], dict[str, int] | None]:
    """``(files, sizes)`` of a manifest attnstruct's cache keeps (``{"files": [...], "sizes": {file: bytes}}``;
    ``sizes`` None in one written before sizes were kept), checked as the answer it was made from."""
    try:
        manifest = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError) as err:
        raise ExtractionError(f"cannot read the manifest {path}: {one_line(err)}; remove it") from None
    files = manifest.get("files") if isinstance(manifest, dict) else None
    sizes = manifest.get("sizes") if isinstance(manifest, dict) else None
    if not isinstance(files, list) or not (sizes is None or isinstance(sizes, dict)):
        raise ExtractionError(f"{path} is not a manifest (files and sizes of a commit); remove it")
    what = f"the manifest {path}"
    files = [_checked(relative_file, name, what) for name in files]
    for name, size in (sizes or {}).items():
        if name not in files or not _size(size):
            raise ExtractionError(f"{what} gives {size!r} as the size of {name!r}; remove it")
    return files, sizes
