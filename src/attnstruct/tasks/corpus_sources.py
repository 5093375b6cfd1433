"""The text a prepared corpus is made of: a source's data files, the units they are read in, and their documents.

A :class:`Source` is a list of data files (``.parquet``; ``.jsonl`` or ``.json`` with one JSON object per line;
``.txt``) read through a backend (:class:`LocalFiles` here, the hub's in :mod:`attnstruct.tasks.hub_corpora`) and
the name of the field that holds the text. Its files are read in **units**, in file order, each read whole and
never split further:

* a parquet file: one unit per row group, only the field's column chunk of it (``read_row_group(columns=[field])``;
  the footer is read once per file), so the first ``N`` tokens cost the first row groups, not whole files;
* a JSON-lines file: one unit per :data:`JSONL_CHUNK` bytes, holding the lines that *start* in that byte range
  (read a little past its end, to the end of its last line);
* a text file: one unit, split into documents at lines that start with ``# `` (a heading), as
  :func:`attnstruct.tasks.corpus.read_documents` splits a user's file, its light Markdown dropped the same way.

A document is one row (one line of JSON, one part of a text file); it carries an identity fixed by where it lies in
its file, ``"{file}:{row}"`` for a parquet row, ``"{file}@{byte offset}"`` for a JSON line, ``"{file}#{i}"`` for the
``i``-th part of a text file, which decides its split (:mod:`attnstruct.tasks.prepared_corpus`). A row whose field
is null, empty or only whitespace is skipped (wikitext's blank lines).

Which files make a config and split is decided as ``datasets`` decides it (:func:`select_files`): the ``configs:``
of the README's YAML header (``config_name``, ``data_files`` as a pattern, a list, or ``split``/``path`` entries,
``default``), else the conventional layouts: shards ``[data/]{split}-NNNNN-of-NNNNN*``, a split's name as a folder
or in a file name (``train``/``training``, ``validation``/``valid``/``dev``/``val``, ``test``/``testing``/``eval``),
else every data file is ``train``; a ``--config`` without YAML configs names a top-level folder. Patterns follow
fsspec's glob: ``*`` and ``?`` stay within one path segment, ``**`` crosses them. Bad input raises
:class:`CorpusError` with one line.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

DATA_SUFFIXES = (".parquet", ".jsonl", ".json", ".txt")
JSONL_CHUNK = 32 << 20  # bytes of JSON lines per unit
_LINE_READ = 1 << 16  # bytes read at a time past a chunk's end, to the end of its last line
SPLIT_KEYWORDS = {
    "train": ("train", "training"),
    "validation": ("validation", "valid", "dev", "val"),
    "test": ("test", "testing", "eval", "evaluation"),
}
_SEP = r"[-._ 0-9]"
_SHARDED = re.compile(r"^(?:data/)?(?P<split>[^/]+?)-\d{5}-of-\d{5}[^/]*$")
_HEADING = re.compile(r"(?m)^(?=# (?![A-Z ]+$))")  # corpus.read_documents's split of a user's text file


class CorpusError(ValueError):
    """Bad input to a corpus preparation (a source, a config, a field, a tokenizer): one line."""

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))


def names_list(names, limit: int = 12) -> str:
    """``a, b, c`` (the first ``limit`` names, then ``... (N in all)``), or ``none``."""
    names = list(names)
    if not names:
        return "none"
    shown = ", ".join(names[:limit])
    return shown if len(names) <= limit else f"{shown}, ... ({len(names)} in all)"


def glob_regex(pattern: str) -> re.Pattern:
    """The regex of an fsspec glob over ``/``-separated paths: ``**`` any run of characters, ``*`` and ``?`` within
    one segment, ``[...]`` a character class; ``**/`` also matches no folder at all."""
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        elif pattern[i] == "[" and "]" in pattern[i + 1 :]:
            end = pattern.index("]", i + 1)
            body = pattern[i + 1 : end]
            out += "[" + ("^" + body[1:] if body.startswith("!") else body).replace("\\", "\\\\") + "]"
            i = end + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(f"^{out}$")


def is_data_file(name: str) -> bool:
    return name.lower().endswith(DATA_SUFFIXES) and not any(part.startswith(".") for part in name.split("/"))


def _data_files_of(entry) -> dict[str, list[str]]:
    """``data_files`` of a YAML config (a pattern, a list of them, ``split``/``path`` entries, or a mapping) as
    ``{split: [patterns]}``."""
    if isinstance(entry, str):
        return {"train": [entry]}
    if isinstance(entry, dict):
        return {str(k): [v] if isinstance(v, str) else list(v) for k, v in entry.items()}
    splits: dict[str, list[str]] = {}
    for item in entry or []:
        if isinstance(item, str):
            splits.setdefault("train", []).append(item)
        elif isinstance(item, dict) and "path" in item:
            paths = item["path"]
            splits.setdefault(str(item.get("split", "train")), []).extend([paths] if isinstance(paths, str) else paths)
    return splits


def _infer_splits(names: list[str]) -> dict[str, list[str]]:
    """``{split: files}`` of files laid out by convention (module docstring), relative to the config's folder."""
    sharded: dict[str, list[str]] = {}
    for name in names:
        if match := _SHARDED.match(name):
            sharded.setdefault(match["split"], []).append(name)
    if sharded:
        return sharded
    for in_folders in (True, False):
        found: dict[str, list[str]] = {}
        for split, words in SPLIT_KEYWORDS.items():
            word = re.compile(rf"^(?:.*{_SEP})?(?:{'|'.join(words)})(?:{_SEP}.*)?$")
            for name in names:
                parts = name.split("/")
                if any(word.match(part) for part in (parts[:-1] if in_folders else parts[-1:])):
                    found.setdefault(split, []).append(name)
        if found:
            return found
    return {"train": list(names)}


def select_files(
    names: list[str], configs: list[dict] | None, config: str | None, split: str | None, what: str
) -> tuple[str | None, str, list[str]]:
    """``(config, split, files)``: the data files among ``names`` (paths relative to the dataset's root) of the
    config and split asked for (``split`` None: ``train``), under the README's ``configs`` or the conventions."""
    data = sorted(n for n in names if is_data_file(n))
    split = split or "train"
    if configs:
        by_name = {str(c.get("config_name", "default")): c for c in configs}
        if config is None:
            chosen = [n for n, c in by_name.items() if c.get("default")] or [n for n in by_name if n == "default"]
            if not chosen and len(by_name) == 1:
                chosen = list(by_name)
            if not chosen:
                raise CorpusError(f"{what} has {len(by_name)} configs; choose one with --config: {names_list(by_name)}")
            config = chosen[0]
        if config not in by_name:
            raise CorpusError(f"config {config!r} is not in {what}; its configs: {names_list(by_name)}")
        splits = {
            s: sorted({n for p in patterns for n in data if glob_regex(p.lstrip("/")).match(n)})
            for s, patterns in _data_files_of(by_name[config].get("data_files", "**")).items()
        }
    else:
        base = ""
        if config not in (None, "default"):
            base = f"{config}/"
            folders = sorted({n.split("/")[0] for n in data if "/" in n})
            if not any(n.startswith(base) for n in data):
                raise CorpusError(
                    f"config {config!r} is not in {what}: its README declares no configs and no folder "
                    f"{config}/ holds data files; folders: {names_list(folders)}"
                )
        inner = _infer_splits([n[len(base) :] for n in data if n.startswith(base)])
        splits = {s: sorted(base + n for n in files) for s, files in inner.items()}
    if split not in splits:
        raise CorpusError(f"split {split!r} is not in {what}{_of(config)}; its splits: {names_list(sorted(splits))}")
    if not splits[split]:
        raise CorpusError(f"split {split!r} of {what}{_of(config)} matches no {', '.join(DATA_SUFFIXES)} file")
    return config, split, splits[split]


def _of(config: str | None) -> str:
    return f" (config {config})" if config else ""


class LocalFiles:
    """Data files under a local folder, by their ``/``-separated path relative to it."""

    def __init__(self, root: Path):
        self.root, self.bytes_read = root, 0

    def size(self, name: str) -> int:
        return (self.root / name).stat().st_size

    def read(self, name: str, start: int, end: int) -> bytes:
        with open(self.root / name, "rb") as handle:
            handle.seek(start)
            data = handle.read(max(0, end - start))
        self.bytes_read += len(data)
        return data

    def parquet(self, name: str):
        import pyarrow.parquet as pq

        return pq.ParquetFile(self.root / name)


@dataclass(frozen=True)
class Unit:
    """One unit of a source (module docstring): file ``file_index`` (``file``), part ``part`` (a row group, a
    chunk), whose first row (parquet) or byte (JSON lines) is ``start``."""

    file_index: int
    file: str
    part: int
    start: int

    @property
    def name(self) -> str:
        """``FFFFF-PPPPPP``: the file's and the part's numbers, the name of the unit's shard."""
        return f"{self.file_index:05d}-{self.part:06d}"


def kind_of(name: str) -> str:
    suffix = name.lower().rsplit(".", 1)[-1]
    return {"parquet": "parquet", "jsonl": "jsonl", "json": "jsonl", "txt": "text"}[suffix]


@dataclass
class Source:
    """A source's identity (what :func:`identity` records), its data files and the backend that reads them."""

    spec: str
    dataset: str
    config: str | None
    split: str | None
    field: str
    revision: str | None
    commit: str | None
    files: tuple[str, ...]
    sizes: tuple[int, ...]
    reader: object  # LocalFiles or hub_corpora.HubFiles: size, read, parquet
    fingerprint: str = ""  # what else identifies the bytes (a local file's modification times)
    remember: Callable[[], None] = field(default=lambda: None, repr=False)  # keep the pins and the listing
    _parquet: dict = field(default_factory=dict, repr=False)

    def identity(self) -> dict:
        """The ``source`` entry of a prepared corpus's ``meta.json``."""
        keys = ("spec", "dataset", "config", "split", "field", "revision", "commit")
        return {**{k: getattr(self, k) for k in keys}, "files": list(self.files)}

    def digest(self) -> str:
        """sha256 (16 hex digits) of everything that fixes the source's bytes and rows."""
        text = json.dumps([self.identity(), list(self.sizes), self.fingerprint, JSONL_CHUNK], sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def where(self, name: str) -> str:
        return f"{self.dataset.rstrip('/')}/{name}"

    def _parquet_file(self, name: str):
        if name not in self._parquet:
            self._parquet.clear()  # one footer held at a time
            try:
                parquet = self.reader.parquet(name)
            except CorpusError:
                raise
            except Exception as err:  # pyarrow's errors, an unreadable file
                raise CorpusError(f"{self.where(name)} is not a readable parquet file ({err})") from None
            fields = parquet.schema_arrow.names
            if self.field not in fields:
                raise CorpusError(
                    f"field {self.field!r} is not in the rows of {self.where(name)}; its fields: {names_list(fields)}"
                )
            import pyarrow as pa

            kind = parquet.schema_arrow.field(self.field).type
            if not (pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind)):
                raise CorpusError(f"field {self.field!r} of {self.where(name)} holds {kind}, not text")
            self._parquet[name] = parquet
        return self._parquet[name]

    def check_field(self) -> None:
        """CorpusError (one line) when the first data file's rows lack :attr:`field` or it holds no text: its parquet
        footer (kept for the read that follows), or its first JSON line."""
        name = self.files[0]
        if kind_of(name) == "parquet":
            self._parquet_file(name)
        elif kind_of(name) == "jsonl":
            line = b""
            while b"\n" not in line and len(line) < self.sizes[0]:
                line += self.reader.read(name, len(line), min(self.sizes[0], len(line) + _LINE_READ))
            if line.split(b"\n", 1)[0].strip():
                self._json_text(line.split(b"\n", 1)[0], name, 0)

    def units(self) -> Iterator[Unit]:
        """Every unit of the source, in order (a parquet file's footer is read when its turn comes)."""
        for index, (name, size) in enumerate(zip(self.files, self.sizes)):
            kind = kind_of(name)
            if kind == "parquet":
                metadata, row = self._parquet_file(name).metadata, 0
                for group in range(metadata.num_row_groups):
                    yield Unit(index, name, group, row)
                    row += metadata.row_group(group).num_rows
            elif kind == "jsonl":
                for part in range(max(1, -(-size // JSONL_CHUNK))):
                    yield Unit(index, name, part, part * JSONL_CHUNK)
            else:
                yield Unit(index, name, 0, 0)

    def read(self, unit: Unit) -> tuple[list[str | None], list[str]]:
        """``(texts, identities)`` of the unit's rows (a text None where the row's field is null)."""
        kind = kind_of(unit.file)
        if kind == "parquet":
            try:
                table = self._parquet_file(unit.file).read_row_group(unit.part, columns=[self.field])
            except CorpusError:
                raise
            except Exception as err:
                raise CorpusError(f"cannot read row group {unit.part} of {self.where(unit.file)} ({err})") from None
            texts = table.column(0).to_pylist()
            return texts, [f"{unit.file}:{unit.start + i}" for i in range(len(texts))]
        if kind == "jsonl":
            return self._json_lines(unit)
        try:
            text = self.reader.read(unit.file, 0, self.sizes[unit.file_index]).decode("utf-8")
        except UnicodeDecodeError as err:
            raise CorpusError(f"{self.where(unit.file)} is not UTF-8 ({err.reason} at byte {err.start})") from None
        from .corpus import clean_markdown

        parts = [clean_markdown(part) for part in _HEADING.split(text)]
        return parts, [f"{unit.file}#{i}" for i in range(len(parts))]

    def _json_lines(self, unit: Unit) -> tuple[list[str | None], list[str]]:
        name, size = unit.file, self.sizes[unit.file_index]
        start, end = unit.start, min(size, unit.start + JSONL_CHUNK)
        origin = max(0, start - 1)
        data = self.reader.read(name, origin, end)
        while origin + len(data) < size and b"\n" not in data[end - 1 - origin :]:  # to the end of the last line
            data += self.reader.read(name, origin + len(data), min(size, origin + len(data) + _LINE_READ))
        if start > 0:  # the line that began in the previous chunk is that chunk's
            data, start = data[data.index(b"\n") + 1 :] if b"\n" in data else b"", start + data.find(b"\n")
        texts, identities, offset = [], [], start
        for line in data.split(b"\n"):
            here, offset = offset, offset + len(line) + 1
            if here >= end:
                break
            if not line.strip():
                continue
            texts.append(self._json_text(line, name, here))
            identities.append(f"{name}@{here}")
        return texts, identities

    def _json_text(self, line: bytes, name: str, offset: int) -> str | None:
        try:
            row = json.loads(line)
        except ValueError as err:
            raise CorpusError(f"the line at byte {offset} of {self.where(name)} is not JSON ({err})") from None
        if not isinstance(row, dict):
            raise CorpusError(f"{self.where(name)} holds {type(row).__name__}s, not one JSON object per line")
        if self.field not in row:
            raise CorpusError(
                f"field {self.field!r} is not in the rows of {self.where(name)} (byte {offset}); "
                f"its fields: {names_list(row)}"
            )
        text = row[self.field]
        if text is not None and not isinstance(text, str):
            raise CorpusError(f"field {self.field!r} of {self.where(name)} holds {type(text).__name__}, not text")
        return text


def local_source(spec: str, config: str | None, split: str | None, field: str | None) -> Source:
    """A local folder (its data files, by config and split) or one data file, as a :class:`Source`."""
    path = Path(spec).expanduser().resolve()
    if path.is_file():
        if not is_data_file(path.name):
            raise CorpusError(f"{spec!r} is not a {', '.join(DATA_SUFFIXES)} file")
        root, files, config, split = path.parent, [path.name], None, None
    elif path.is_dir():
        root = path
        names = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
        configs = _local_configs(root)
        config, split, files = select_files(names, configs, config, split, str(path))
    else:
        raise CorpusError(
            f"no such file or folder {spec!r} (a hub dataset is hf://datasets/ORG/NAME; named corpora: "
            "attnstruct prepare-corpus --list)"
        )
    stats = [(root / name).stat() for name in files]
    return Source(
        spec=str(path),
        dataset=str(root),
        config=config,
        split=split,
        field=field or "text",
        revision=None,
        commit=None,
        files=tuple(files),
        sizes=tuple(s.st_size for s in stats),
        reader=LocalFiles(root),
        fingerprint=json.dumps([s.st_mtime_ns for s in stats]),
    )


def readme_configs(text: str) -> list[dict] | None:
    """The ``configs`` of a dataset card's YAML header, or None when it declares none."""
    import yaml

    if not text.startswith("---"):
        return None
    header = text[3:].split("\n---", 1)[0]
    try:
        card = yaml.safe_load(header)
    except yaml.YAMLError:
        return None
    configs = card.get("configs") if isinstance(card, dict) else None
    return [c for c in configs if isinstance(c, dict)] if isinstance(configs, list) else None


def _local_configs(root: Path) -> list[dict] | None:
    readme = root / "README.md"
    return readme_configs(readme.read_text(encoding="utf-8", errors="replace")) if readme.is_file() else None
