"""What a hub dataset holds at a commit, asked for through the hub client and checked: the commit, the files and their
sizes, the configs of its card; kept in attnstruct's cache.

A listing, ``{"commit": COMMIT, "files": {path: bytes}, "configs": [...] or None, "gated": bool}``, takes three
requests, each made by :mod:`attnstruct.hub_client.client` (its waits bounded, its answers read no further than
their bounds) as ``huggingface_hub`` 2.4 makes it:

1. the dataset's info, ``GET /api/datasets/ORG/NAME/revision/REV`` (``HfApi.dataset_info``): ``sha``, the commit of
   the revision, and ``gated``;
2. its tree at that commit, ``GET /api/datasets/ORG/NAME/tree/COMMIT?recursive=true&expand=false``
   (``HfApi.list_repo_tree``), page after page as each page's ``Link`` header names the next
   (:func:`~attnstruct.hub_client.client.get_json_pages`: on the hub's origin, at most
   :data:`~attnstruct.hub_client.client.MAX_PAGES` pages): each file's path and size (an LFS file's
   ``lfs.size``);
3. its card, ``README.md``, when it has one: whole (at most :data:`MAX_CARD_BYTES`) into
   ``<cache>/corpora/files/ORG--NAME/COMMIT/README.md``, and the configs of its YAML header
   (:func:`attnstruct.tasks.data_files.readme_configs`).

What the hub answers is not trusted (docs/security.md): the commit must be 40 hexadecimal digits (the one asked for,
when a commit was), each file's name a relative name inside the dataset (:func:`attnstruct.untrusted.relative_file`),
each size a number of bytes, at most :data:`MAX_FILES` files. What breaks a rule is a
:class:`~attnstruct.tasks.data_files.CorpusError` in one line, before the name is used for anything. The listing is
kept as ``<cache>/corpora/manifests/ORG--NAME/COMMIT.json`` (:func:`keep_listing`, once a preparation begins), and
:func:`stored_listing` reads it back under the same checks. Every cache path is made by
:func:`attnstruct.untrusted.inside`.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote

from ..checkpoints.hub import repo_folder
from ..hub_client.client import get_file, get_json, get_json_pages
from ..hub_client.failures import HubError
from ..results import write_atomically
from ..untrusted import COMMIT, UnsafeName, commit_id, inside, one_line, relative_file
from .data_files import CorpusError, checked_configs, readme_configs

MAX_FILES = 1_000_000  # files of one dataset's listing
MAX_CARD_BYTES = 8 << 20  # a dataset card's README.md


def corpora_dir(cache=None) -> Path:
    """``<attnstruct cache>/corpora``: the pins, listings, cards and prepared corpora."""
    from ..cache_folder import cache_dir

    return cache_dir(cache) / "corpora"


def checked(check, *args):
    """``check(*args)`` (a check of :mod:`attnstruct.untrusted`), its UnsafeName as a CorpusError."""
    try:
        return check(*args)
    except UnsafeName as err:
        raise CorpusError(str(err)) from None


def from_hub(request, *args, **kwargs):
    """``request(*args, **kwargs)`` (a request of the hub client), its :class:`~attnstruct.hub_client.failures.HubError`
    as a CorpusError of the same line, its kind first."""
    try:
        return request(*args, **kwargs)
    except HubError as err:
        raise CorpusError(str(err)) from None


def write_json(path: Path, value) -> None:
    text = json.dumps(value, indent=1, sort_keys=True) + "\n"
    write_atomically(path, lambda tmp: Path(tmp).write_text(text))


def listing_path(repo: str, commit: str, cache=None) -> Path:
    """Where the listing of ``repo`` at ``commit`` is kept."""
    folder = corpora_dir(cache) / "manifests"
    return checked(inside, folder, repo_folder(repo), f"{checked(commit_id, commit)}.json")


def _size(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 63


def tree_files(pages, what: str) -> dict[str, int]:
    """``{path: bytes}`` of the files of a tree listing's pages (each a list of ``{"type": "file", "path", "size",
    "lfs": {"size"}}`` or ``{"type": "directory", ...}`` entries), checked (module docstring)."""
    files: dict[str, int] = {}
    for page in pages:
        if not isinstance(page, list) or not all(isinstance(entry, dict) for entry in page):
            raise CorpusError(f"{what} is not a tree listing (pages of entries)")
        for entry in page:
            if entry.get("type") != "file":
                continue  # a folder
            name = checked(relative_file, entry.get("path"), what)
            lfs = entry.get("lfs")
            size = lfs.get("size") if isinstance(lfs, dict) else entry.get("size")
            if not _size(size):
                raise CorpusError(f"{what} gives {size!r} as the size of {name}, which is not a number of bytes")
            files[name] = size
            if len(files) > MAX_FILES:
                raise CorpusError(f"{what} lists more than {MAX_FILES:,} files")
    return files


def fetch_listing(settings, repo: str, revision: str, cache=None) -> dict:
    """The listing of ``repo`` at ``revision`` (a branch, a tag or a commit) from the hub (module docstring)."""
    what = f"hf://datasets/{repo}@{revision}"
    api = f"{settings.endpoint}/api/datasets/{repo}"
    info = from_hub(get_json, f"{api}/revision/{quote(revision, safe='')}", token=settings.token, what=what)
    if not isinstance(info, dict):
        raise CorpusError(f"the hub's answer for {what} is not a dataset's info (a JSON object)")
    commit = checked(commit_id, info.get("sha"), f"the hub's answer for {what}")
    if COMMIT.fullmatch(revision) and commit != revision:
        raise CorpusError(f"the hub answered {what} with another commit, {commit}")
    gated = bool(info.get("gated"))
    if gated and not settings.token:
        raise CorpusError(f"gated: hf://datasets/{repo} needs an accepted licence and a token (HF_TOKEN)")
    pages = get_json_pages(f"{api}/tree/{commit}?recursive=true&expand=false", token=settings.token, what=what)
    files = from_hub(tree_files, pages, f"the hub's tree of {what}")
    configs = _card_configs(settings, repo, commit, files.get("README.md"), cache)
    return {"commit": commit, "files": files, "configs": configs, "gated": gated}


def _card_configs(settings, repo: str, commit: str, size: int | None, cache) -> list[dict] | None:
    """The configs of the card of ``repo`` at ``commit`` (``size`` bytes; None: it has none), read into the cache
    unless it is there already."""
    if size is None:
        return None
    what = f"hf://datasets/{repo}/README.md"
    if size > MAX_CARD_BYTES:
        raise CorpusError(f"{what} is {size:,} bytes, more than the {MAX_CARD_BYTES:,} read of a dataset card")
    path = checked(inside, corpora_dir(cache) / "files", repo_folder(repo), commit, "README.md")
    if not (path.is_file() and path.stat().st_size == size):
        url = f"{settings.endpoint}/datasets/{repo}/resolve/{commit}/README.md"
        from_hub(get_file, url, path, token=settings.token, what=what, size=size)
    return readme_configs(path.read_bytes().decode("utf-8", errors="replace"), what)


def keep_listing(listing: dict, repo: str, cache=None) -> None:
    write_json(listing_path(repo, listing["commit"], cache), listing)


def stored_listing(path: Path, commit: str) -> dict:
    """The listing kept at ``path`` for ``commit``, held to the checks of an answer of the hub (module docstring):
    another process, or an older attnstruct, may have written it."""
    what = f"the listing {path}"
    try:
        listing = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError) as err:
        raise CorpusError(f"cannot read {what} ({one_line(err)}); remove it") from None
    files = listing.get("files") if isinstance(listing, dict) else None
    configs = listing.get("configs") if isinstance(listing, dict) else None
    if not isinstance(files, dict) or listing.get("commit") != commit or not isinstance(configs, (list, type(None))):
        raise CorpusError(f"{what} is not a listing of commit {commit}; remove it")
    if len(files) > MAX_FILES:
        raise CorpusError(f"{what} lists more than {MAX_FILES:,} files; remove it")
    for name, size in files.items():
        checked(relative_file, name, what)
        if not _size(size):
            raise CorpusError(f"{what} gives {size!r} as the size of {name}; remove it")
    configs = None if configs is None else checked_configs(configs, what)
    return {"commit": commit, "files": files, "configs": configs, "gated": listing.get("gated") is True}
