"""Corpora on the Hugging Face Hub: the named ones (:data:`CORPORA`), ``hf://datasets/...`` sources, and the pins.

A hub source is ``hf://datasets/ORG/NAME[@REVISION][/PATH]``, the URL form of ``datasets``, pandas and
``HfFileSystem`` (a revision with a slash is written ``refs%2Fconvert%2Fparquet`` or as is, ``refs/convert/parquet``;
``PATH`` is a file, a folder or a glob of data files, which then replaces the config and split). It is resolved
with the settings of :class:`attnstruct.checkpoints.hub.HubSettings` (``HF_ENDPOINT``, ``HF_TOKEN``,
``HF_HUB_CACHE``, ``HF_HUB_OFFLINE``, read at call time), every request made by
:mod:`attnstruct.hub_client.client` (its waits and reads bounded, whatever the server does):

1. the revision's commit: a 40-digit revision is one; otherwise the pins file ``<cache>/corpora/pins.json``
   (``{"datasets": {"ORG/NAME@REV": commit}, "models": {...}}``) holds the commit it had at its first use, which
   every later use reads (checked to be a commit id);
2. the commit's listing (:mod:`attnstruct.tasks.hub_datasets`: its files and sizes, its card's configs, whether it
   is gated), kept in the cache, else asked for (the info, the tree's pages, the card); pins and listing are written
   only once a preparation begins;
3. the data files of the config and split (:func:`attnstruct.tasks.data_files.select_files`), each read from the hub
   cache when a snapshot of ``huggingface-cli download`` holds it (a path inside the hub cache), else by Range
   requests to ``/datasets/ORG/NAME/resolve/<commit>/<file>`` (a parquet row group's column chunk, a JSON-lines
   chunk; nothing else). A server that ignores ``Range`` is followed no further than :data:`MOST_SKIPPED` bytes
   before the range asked for.

So a second use makes no request, and with ``HF_HUB_OFFLINE=1`` works from what the first left; offline with
nothing cached, a dataset that does not exist, a gated one without a token, an answer that breaks the rules of
:mod:`attnstruct.tasks.hub_datasets`: :class:`CorpusError`, one line. ``datasets`` itself is not used: no loading
script runs, nothing goes to the dataset viewer or counts downloads.
"""

from __future__ import annotations

import io
import json
import re
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, unquote

from ..checkpoints.hub import repo_folder
from ..untrusted import COMMIT, UnsafeName, commit_id, inside
from .data_files import CorpusError, glob_regex, is_data_file, select_files
from .hub_datasets import (
    checked,
    corpora_dir,
    fetch_listing,
    keep_listing,
    listing_path,
    stored_listing,
    write_json,
)
from .source_documents import Source

HF_URL = re.compile(
    r"^hf://datasets/(?P<repo>[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*)"
    r"(?:@(?P<revision>refs/(?:convert|pr)/[^/]+|[^/]+))?(?:/(?P<path>.+))?$"
)
MOST_SKIPPED = 16 << 20  # bytes of a whole-file answer read to reach a range (a server that ignores Range)


@dataclass(frozen=True)
class NamedCorpus:
    """A corpus by name: a hub dataset, its config, split and text field, a revision (a commit, or None: pinned at
    first use), the data files when they are not found by config (a glob), its licence and what it is."""

    name: str
    dataset: str
    config: str | None
    split: str
    field: str
    revision: str | None
    files: str | None
    licence: str
    description: str

    @property
    def spec(self) -> str:
        where = f"/{self.files}" if self.files else ""
        return f"hf://datasets/{self.dataset}{'@' + self.revision if self.revision else ''}{where}"


CORPORA = {
    corpus.name: corpus
    for corpus in (
        NamedCorpus(
            "wikipedia-en",
            "wikimedia/wikipedia",
            "20231101.en",
            "train",
            "text",
            None,
            None,
            "CC BY-SA 3.0 and GFDL (Wikipedia's text)",
            "English Wikipedia of 1 November 2023, one cleaned article per row (parquet). The paper's "
            "wikipedia 20220301.en is a script-based dataset (a loading script, no data files) that current "
            "datasets refuses to run; this is its closest parquet successor.",
        ),
        NamedCorpus(
            "wikitext-103",
            "Salesforce/wikitext",
            "wikitext-103-raw-v1",
            "train",
            "text",
            "b08601e04326c79dfdd32d625aee71d232d685c3",
            None,
            "CC BY-SA 3.0 and GFDL (Wikipedia's text)",
            "WikiText-103, raw: Wikipedia's Good and Featured articles, one row per line of text (the blank lines "
            "are skipped, so a document is a paragraph or a heading). Pinned: later commits lack files.",
        ),
        NamedCorpus(
            "fineweb-edu-10bt",
            "HuggingFaceFW/fineweb-edu",
            "sample-10BT",
            "train",
            "text",
            None,
            None,
            "ODC-By 1.0, and Common Crawl's terms of use",
            "FineWeb-Edu's 10-billion-token sample: Common Crawl pages kept by a classifier of educational value.",
        ),
        NamedCorpus(
            "redpajama-sample",
            "togethercomputer/RedPajama-Data-1T-Sample",
            None,
            "train",
            "text",
            None,
            "*.jsonl",
            "each subset under its source's terms (Common Crawl, C4, GitHub, books, arXiv, Wikipedia, StackExchange)",
            "RedPajama-1T's 1-billion-token sample, one JSON-lines file per subset; the repository's loading "
            "script is bypassed: its .jsonl files are read directly.",
        ),
        NamedCorpus(
            "jigsaw-toxic",
            "tcapelle/jigsaw-toxic-comment-classification-challenge",
            None,
            "train",
            "comment_text",
            None,
            None,
            "CC0 for the dataset (TFDS catalogue), the comments CC BY-SA 3.0 (Wikipedia); the re-upload's "
            "provenance and licence are the uploader's claim",
            "Jigsaw's toxic comment classification challenge (Kaggle): Wikipedia talk-page comments, an ungated "
            "parquet re-upload. The official google/jigsaw_toxicity_pred needs a manual download from Kaggle.",
        ),
    )
}


def pins_path(cache=None) -> Path:
    return corpora_dir(cache) / "pins.json"


def read_pins(cache=None) -> dict[str, dict]:
    """``{"datasets": {"ORG/NAME@REV": commit}, "models": {...}}`` from the pins file (empty when there is none, or
    it is not such an object); the commits are checked where they are used (:func:`pinned`)."""
    try:
        pins = json.loads(pins_path(cache).read_text())
    except (OSError, ValueError, RecursionError):
        pins = {}
    pins = pins if isinstance(pins, dict) else {}
    return {kind: dict(pins[kind]) if isinstance(pins.get(kind), dict) else {} for kind in ("datasets", "models")}


def pinned(kind: str, key: str, cache=None) -> str | None:
    """The commit the pins file holds for ``key`` (``ORG/NAME@REV``) of ``kind``, or None; CorpusError when it holds
    something else than a commit id."""
    commit = read_pins(cache)[kind].get(key)
    if commit is None:
        return None
    try:
        return commit_id(commit, f"the pins file {pins_path(cache)} ({key})")
    except UnsafeName as err:
        raise CorpusError(f"{err}; remove that entry") from None


def record_pin(kind: str, key: str, commit: str, cache=None) -> None:
    """Keep ``key`` (``ORG/NAME@REV``) -> ``commit`` in the pins file (``kind``: ``datasets`` or ``models``)."""
    pins = read_pins(cache)
    if pins[kind].get(key) != commit:
        pins[kind][key] = commit
        write_json(pins_path(cache), pins)


def hub_settings(settings=None):
    from ..checkpoints.hub import HubSettings

    return settings or HubSettings.from_env()


class RangeFile(io.RawIOBase):
    """A read-only, seekable file whose bytes come from ``read(start, end)`` (a hub file read by Range requests)."""

    def __init__(self, read: Callable[[int, int], bytes], size: int):
        super().__init__()
        self._read, self.size, self._pos = read, size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        self._pos = offset if whence == 0 else self._pos + offset if whence == 1 else self.size + offset
        return self._pos

    def readinto(self, buffer) -> int:
        end = min(self.size, self._pos + len(buffer))
        data = self._read(self._pos, end) if end > self._pos else b""
        buffer[: len(data)] = data
        self._pos += len(data)
        return len(data)


def parquet_by_ranges(read: Callable[[int, int], bytes], size: int, what: str):
    """A ``pyarrow.parquet.ParquetFile`` over ranges of a remote file: its footer in two reads (the last 8 bytes,
    then the metadata), then only what is asked for (a row group's column chunk per read)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    tail = read(max(0, size - 8), size) if size >= 12 else b""
    if len(tail) != 8 or tail[4:] != b"PAR1":
        raise CorpusError(f"{what} is not a parquet file (no PAR1 footer)")
    length = struct.unpack("<I", tail[:4])[0]
    if length + 12 > size:
        raise CorpusError(f"{what} is not a parquet file (a footer of {length} bytes in {size})")
    footer = read(size - 8 - length, size - 8)
    metadata = pq.read_metadata(pa.BufferReader(b"PAR1" + footer + tail))
    return pq.ParquetFile(RangeFile(read, size), metadata=metadata)


class HubFiles:
    """The files of one commit of a hub dataset (those of its checked listing): from the hub cache when a snapshot
    holds them, else by Range requests."""

    def __init__(self, settings, repo: str, commit: str, sizes: dict[str, int]):
        self.settings, self.repo, self.commit, self.sizes = settings, repo, commit, sizes
        self.bytes_read = 0

    def _cached(self, name: str) -> Path | None:
        """The file in the hub cache's snapshot of the commit (laid out as ``huggingface_hub`` lays it out), if it is
        there and leads nowhere out of the hub cache."""
        folder = f"datasets--{repo_folder(self.repo)}"
        path = checked(inside, self.settings.hub_cache, folder, "snapshots", self.commit, *name.split("/"))
        return path if path.is_file() else None

    def size(self, name: str) -> int:
        return self.sizes[name]

    def read(self, name: str, start: int, end: int) -> bytes:
        local = self._cached(name)
        if local is not None:
            with open(local, "rb") as handle:
                handle.seek(start)
                return handle.read(max(0, end - start))
        what = f"hf://datasets/{self.repo}/{name}"
        if self.settings.offline:
            raise CorpusError(f"offline: {what} is not in the cache and HF_HUB_OFFLINE is set")
        from ..hub_client.client import get_range
        from .hub_datasets import from_hub

        url = f"{self.settings.endpoint}/datasets/{self.repo}/resolve/{self.commit}/{quote(name)}"
        token = self.settings.token
        data = from_hub(get_range, url, start, end, token=token, what=what, most_skipped=MOST_SKIPPED)
        self.bytes_read += len(data)
        return data

    def parquet(self, name: str):
        local = self._cached(name)
        if local is not None:
            import pyarrow.parquet as pq

            return pq.ParquetFile(local)
        return parquet_by_ranges(lambda a, b: self.read(name, a, b), self.sizes[name], f"{self.repo}/{name}")


def parse_hf_url(spec: str) -> tuple[str, str, str | None]:
    """``hf://datasets/ORG/NAME@REV/PATH`` -> ``(ORG/NAME, REV, PATH)``; the revision defaults to ``main``."""
    match = HF_URL.match(spec)
    if not match or ".." in spec:
        raise CorpusError(f"{spec!r} is not a hub dataset (hf://datasets/ORG/NAME[@REVISION][/PATH])")
    return match["repo"], unquote(match["revision"] or "main"), match["path"]


def hub_source(
    spec: str, config: str | None, split: str | None, field: str | None, settings=None, cache=None
) -> Source:
    """A named corpus or an ``hf://datasets/...`` URL as a :class:`Source` (module docstring). ``config``,
    ``split`` and ``field`` default to the named corpus's; a URL's field defaults to ``text``."""
    named = CORPORA.get(spec)
    if named is not None:
        config, split, field = config or named.config, split or named.split, field or named.field
    repo, revision, path = parse_hf_url(named.spec if named else spec)
    settings = hub_settings(settings)
    key = f"{repo}@{revision}"
    commit = revision if COMMIT.fullmatch(revision) else pinned("datasets", key, cache)
    stored = listing_path(repo, commit, cache) if commit else None
    if stored is not None and stored.is_file():
        listing, new = stored_listing(stored, commit), False
    elif settings.offline:
        raise CorpusError(f"offline: hf://datasets/{key} is not in the cache and HF_HUB_OFFLINE is set")
    else:
        listing, new = fetch_listing(settings, repo, commit or revision, cache), True
    commit, sizes = listing["commit"], listing["files"]
    if listing.get("gated") and not settings.token and not settings.offline:
        raise CorpusError(f"gated: hf://datasets/{repo} needs an accepted licence and a token (HF_TOKEN)")
    what = f"hf://datasets/{repo}"
    if path:
        if (named is None and config) or (named is None and split):
            raise CorpusError(f"{spec} names its files; --config and --split do not apply to it")
        pattern = glob_regex(path.rstrip("/"))
        files = sorted(
            n for n in sizes if is_data_file(n) and (pattern.match(n) or n.startswith(path.rstrip("/") + "/"))
        )
        if not files:
            raise CorpusError(f"no data files match {path!r} in {what}@{commit[:12]}")
        config, split = None, None
    else:
        config, split, files = select_files(list(sizes), listing.get("configs"), config, split, what)

    def remember() -> None:
        if new:
            keep_listing(listing, repo, cache)
        if not COMMIT.fullmatch(revision):
            record_pin("datasets", key, commit, cache)

    return Source(
        spec=spec,
        dataset=repo,
        config=config,
        split=split,
        field=field or "text",
        revision=revision,
        commit=commit,
        files=tuple(files),
        sizes=tuple(int(sizes[name]) for name in files),
        reader=HubFiles(settings, repo, commit, sizes),
        remember=remember,
    )


def describe_corpora(cache=None) -> str:
    """The table ``attnstruct prepare-corpus --list`` prints: each named corpus, its dataset, config, field, commit
    (pinned in the table, pinned at first use, or not used yet), licence and what it is."""
    pins = read_pins(cache)["datasets"]
    lines = []
    for corpus in CORPORA.values():
        if corpus.revision:
            commit = f"{corpus.revision[:12]} (pinned here)"
        else:
            pin = pins.get(f"{corpus.dataset}@main")
            known = isinstance(pin, str) and COMMIT.fullmatch(pin)
            commit = f"{pin[:12]} (pinned at first use)" if known else "main, pinned at first use"
        where = f"config {corpus.config}" if corpus.config else f"files {corpus.files or 'all'}"
        lines += [
            f"{corpus.name}: hf://datasets/{corpus.dataset} ({where}, split {corpus.split}, field {corpus.field})",
            f"    commit: {commit}",
            f"    licence: {corpus.licence}",
            f"    {corpus.description}",
        ]
    return "\n".join(lines)
