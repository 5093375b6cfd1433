"""The text a prepared corpus is made of: a source's data files, the units they are read in, and their documents.

A :class:`Source` is a list of data files (``.parquet``; ``.jsonl`` or ``.json`` with one JSON object per line;
``.txt``) read through a backend (:class:`LocalFiles` here, the hub's in :mod:`attnstruct.tasks.hub_sources`) and
the name of the field that holds the text. Its files are read in **units**, in file order, each read whole and
never split further:

* a parquet file: one unit per row group, only the field's column chunk of it (``read_row_group(columns=[field])``;
  the footer is read once per file), so the first ``N`` tokens cost the first row groups, not whole files;
* a JSON-lines file: one unit per :data:`JSONL_CHUNK` bytes, holding the lines that *start* in that byte range
  (read a little past its end, to the end of its last line);
* a text file: one unit, split into documents at lines that start with ``# `` (a heading), as
  :func:`attnstruct.tasks.plays_and_text_files.read_documents` splits a user's file, its light Markdown dropped the
  same way.

A document is one row (one line of JSON, one part of a text file); it carries an identity fixed by where it lies in
its file, ``"{file}:{row}"`` for a parquet row, ``"{file}@{byte offset}"`` for a JSON line, ``"{file}#{i}"`` for the
``i``-th part of a text file, which decides its split (:mod:`attnstruct.tasks.prepared_corpus`). A row whose field
is null, empty or only whitespace is skipped (wikitext's blank lines).

Which files make a config and split is decided as ``datasets`` decides it
(:func:`attnstruct.tasks.data_files.select_files`). Bad input raises :class:`CorpusError` (of
:mod:`attnstruct.tasks.data_files`) with one line.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .data_files import DATA_SUFFIXES, CorpusError, is_data_file, names_list, readme_configs, select_files

JSONL_CHUNK = 32 << 20  # bytes of JSON lines per unit
_LINE_READ = 1 << 16  # bytes read at a time past a chunk's end, to the end of its last line
_HEADING = re.compile(r"(?m)^(?=# (?![A-Z ]+$))")  # plays_and_text_files.read_documents's split of a user's text file


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
    reader: object  # LocalFiles or hub_sources.HubFiles: size, read, parquet
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
                # one thread: pyarrow's pool, reading a Python file object, can outlive a Ctrl-C and abort the
                # interpreter's exit ("terminate called without an active exception", apache/arrow#50482)
                parquet = self._parquet_file(unit.file)
                table = parquet.read_row_group(unit.part, columns=[self.field], use_threads=False)
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
        from .plays_and_text_files import clean_markdown

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
    elif path.exists():
        raise CorpusError(f"{spec!r} is neither a regular file nor a folder (a device, a pipe or a socket)")
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


def _local_configs(root: Path) -> list[dict] | None:
    readme = root / "README.md"
    return readme_configs(readme.read_text(encoding="utf-8", errors="replace")) if readme.is_file() else None
