"""The files of a checkpoint folder that name other things: ``config.json`` and shard indexes, read as untrusted.

A folder may come from anywhere (docs/security.md): its ``config.json`` may hold any JSON, and the ``weight_map`` of a
shard index (``model.safetensors.index.json``, ``pytorch_model.bin.index.json``) may name any path.
:func:`read_json_object` turns every way such a file can be wrong into one :class:`ExtractionError` naming it;
:func:`shard_names` reads an index's shard names (a hub repository's index too), and :func:`listed_files` accepts only
plain relative names of regular files that resolve inside the folder.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from pathlib import Path

from ...untrusted import UnsafeName, inside, one_line, relative_file
from .blocks import ExtractionError


def read_json_object(path: Path) -> dict:
    """The JSON object in ``path`` (a ``config.json``, a shard index), or :class:`ExtractionError` naming the file:
    not a regular file, unreadable, not JSON (or nested past the parser's depth), or not an object."""
    if not path.is_file():
        raise ExtractionError(f"{path} is not a regular file", "not found")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as err:
        raise ExtractionError(f"cannot read {path}: {one_line(err)}") from None
    if not isinstance(data, dict):
        raise ExtractionError(f"{path} holds a JSON {type(data).__name__}, not an object")
    return data


def _hub_cache_root(folder: Path) -> Path:
    """The folder a checkpoint's files must resolve inside: ``folder``, or for a snapshot of the Hugging Face hub
    cache (``models--ORG--NAME/snapshots/REVISION``, whose files link to ``../../blobs/HASH``, as huggingface_hub
    documents its cache layout) the repository's cache folder."""
    repo = folder.parent.parent
    if folder.parent.name == "snapshots" and repo.name.startswith("models--") and (repo / "blobs").is_dir():
        return repo
    return folder


def listed_files(folder: Path, index_name: str) -> list[str]:
    """The shard names of the index ``folder/index_name`` (its ``weight_map``'s values), each a plain relative name
    (:func:`attnstruct.untrusted.relative_file`) of a regular file that resolves inside ``folder``
    (:func:`attnstruct.untrusted.inside`; a hub cache snapshot's links into its ``blobs`` are inside). Anything else
    raises :class:`ExtractionError` naming the index."""
    index = folder / index_name
    names = shard_names(read_json_object(index), str(index))
    for name in names:
        file_inside(folder, name, f"{index} names")
    return names


def shard_names(index: object, what: str, files: Collection[str] | None = None) -> list[str]:
    """The shard files a parsed shard index (``{"weight_map": {tensor: file}, ...}``, as ``transformers`` writes it)
    names, sorted, each a relative file name (:func:`attnstruct.untrusted.relative_file`) and, when ``files`` is
    given, one of them; else :class:`ExtractionError` naming the index (``what``). A folder's index and a hub
    repository's are held to this one rule."""
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise ExtractionError(f"{what} is not a shard index (an object whose weight_map maps tensor names to files)")
    try:
        shards = sorted({relative_file(name, what) for name in weight_map.values()})
    except UnsafeName as err:
        raise ExtractionError(str(err)) from None
    for shard in shards:
        if files is not None and shard not in files:
            raise ExtractionError(f"{what} names {shard!r}, which is not a file of the repository")
    return shards


def file_inside(folder: Path, name: str, what: str) -> Path:
    """``folder/name`` if it is a regular file that resolves inside ``folder`` (a hub cache snapshot's links into its
    ``blobs`` are inside), else :class:`ExtractionError` starting with ``what`` (who named the file): a symbolic link
    of a shared folder may lead anywhere, as an index's name may."""
    root = _hub_cache_root(folder)
    try:
        path = inside(root, *folder.relative_to(root).parts, *name.split("/"))
    except UnsafeName as err:  # a link out of the folder
        raise ExtractionError(f"{what} {name}: {err}") from None
    except (OSError, RuntimeError) as err:  # a symbolic link loop
        raise ExtractionError(f"{what} {name}, which cannot be resolved: {one_line(err)}") from None
    if not path.is_file():
        raise ExtractionError(f"{what} {name}, which is not a regular file in {folder}", "not found")
    return path
