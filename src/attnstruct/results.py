"""Result datasets: provenance attrs, atomic netCDF writes (``engine="h5netcdf"``), loading; the one writer of every
output file (:func:`write_atomically`: a full or read-only disk is one :class:`OutputError`), an output folder's
lock (:func:`output_lock`) and the leftovers of killed writes (:func:`remove_leftovers`).

Every dataset the project writes carries these attrs (README, "Use the package"), all plain strings or numbers
because netCDF attrs cannot hold dicts, booleans or None:

``score_convention``  ``"paper"`` or ``"raw"`` and ``score_convention_definition``, the formulas;
``scored_matrix``     which matrix was scored, e.g. ``"W_qk = sum_h W_q^h W_k^h^T per layer (d_model x d_model)"``;
``directionality_num_std``  the threshold of the directionality score;
``attnstruct_version``, ``git_commit``, ``library_versions`` (JSON), ``parameters`` (JSON), ``created`` (UTC ISO).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import fcntl
import json
import os
import re
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any, Mapping

import xarray as xr

from ._version import __version__
from .conventions import CONVENTION_DESCRIPTIONS, DEFAULT_NUM_STD

ENGINE = "h5netcdf"
REQUIRED_ATTRS = (
    "score_convention",
    "scored_matrix",
    "attnstruct_version",
    "git_commit",
    "library_versions",
    "parameters",
    "created",
)
TRACKED_LIBRARIES = ("torch", "numpy", "xarray", "h5netcdf", "transformers", "matplotlib", "papermill")


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def library_versions() -> dict[str, str]:
    """Installed versions of the libraries whose behaviour can change a result."""
    import platform

    return {"python": platform.python_version(), **{lib: _version(lib) for lib in TRACKED_LIBRARIES}}


def git_commit(start: str | os.PathLike | None = None) -> str:
    """``HEAD`` of the checkout holding ``start`` (default: this package), ``-dirty`` if modified, else ``unknown``."""
    where = Path(start) if start is not None else Path(__file__).resolve().parent
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True, check=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=where,
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{sha}-dirty" if dirty else sha


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"parameter value {value!r} of type {type(value).__name__} cannot be recorded as JSON")


def provenance_attrs(
    *,
    parameters: Mapping[str, Any],
    scored_matrix: str,
    convention: str = "paper",
    num_std: float = DEFAULT_NUM_STD,
    **extra: str | int | float,
) -> dict[str, str | int | float]:
    """The attrs every result dataset carries (see the module docstring)."""
    if convention not in CONVENTION_DESCRIPTIONS:
        raise ValueError(f"unknown score convention {convention!r}")
    return {
        "score_convention": convention,
        "score_convention_definition": CONVENTION_DESCRIPTIONS[convention],
        "scored_matrix": scored_matrix,
        "directionality_num_std": float(num_std),
        "attnstruct_version": __version__,
        "git_commit": git_commit(),
        "library_versions": json.dumps(library_versions(), sort_keys=True),
        "parameters": json.dumps(_jsonable(parameters), sort_keys=True),
        "created": _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
        **extra,
    }


def check_dataset(ds: xr.Dataset) -> None:
    """Refuse a dataset without the required provenance attrs or with attrs netCDF cannot store."""
    missing = [a for a in REQUIRED_ATTRS if a not in ds.attrs]
    if missing:
        raise ValueError(f"dataset lacks the provenance attrs {missing}; build attrs with provenance_attrs()")
    bad = [k for k, v in ds.attrs.items() if isinstance(v, bool) or not isinstance(v, (str, int, float))]
    if bad:
        raise ValueError(f"dataset attrs {bad} are not str, int or float (netCDF cannot store them)")


def _read_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _read_umask()  # read once: os.umask is process-wide, and reading it from worker threads would race
_TEMPORARY = re.compile(r"\..+\.[a-z0-9_]{8}\.tmp")  # tempfile.mkstemp's names, as write_atomically asks for them
LOCK_FILE = ".attnstruct.lock"


class OutputError(OSError):
    """An output that could not be written (a full or read-only disk, no permission, a quota, a name too long, a
    folder where the file should go); ``str`` is one line naming the file and the reason."""

    def __init__(self, path: str | os.PathLike, reason: str, code: int | None = None):
        super().__init__(code, reason, os.fspath(path))

    def __str__(self) -> str:
        return f"cannot write {self.filename}: {self.strerror}"


class FolderInUse(OutputError):
    """An output folder whose lock another process holds (:func:`output_lock`)."""

    def __init__(self, folder: str | os.PathLike, holder: str):
        super().__init__(folder, f"in use by {holder}", errno.EBUSY)

    def __str__(self) -> str:
        return f"{self.filename} is {self.strerror}; wait for it to end or choose another folder"


def _reason(err: OSError) -> str:
    """The operating system's words for ``err`` (``No space left on device``), not the library's whole message."""
    if err.errno:
        return os.strerror(err.errno)
    return " ".join(str(err).split()) or type(err).__name__


def _output_error(path: Path, err: OSError) -> OutputError:
    return err if isinstance(err, OutputError) else OutputError(path, _reason(err), err.errno)


def _check_target(path: Path, *, folder: bool = False) -> None:
    """Refuse a folder at ``path`` (with ``folder``: anything else there) and a file where one of its folders should
    be, before anything is written."""
    try:
        if folder and path.exists() and not path.is_dir():
            raise OutputError(path, "it is not a folder", errno.ENOTDIR)
        if not folder and path.is_dir():
            raise OutputError(path, "it is a folder", errno.EISDIR)
        for parent in path.parents:
            if parent.exists():
                if not parent.is_dir():
                    raise OutputError(path, f"{parent} is not a folder", errno.ENOTDIR)
                return
    except OSError as err:  # a name too long to look up, a folder that cannot be searched
        raise _output_error(path, err) from None


def check_folder(path: str | os.PathLike) -> Path:
    """Refuse (:class:`OutputError`) a path that is no folder and cannot be made one: a file there, or a file where
    one of its folders should be. Writes nothing."""
    path = Path(path)
    _check_target(path, folder=True)
    return path


def check_writable(path: str | os.PathLike) -> Path:
    """Refuse, before any long work, an output file that could not be written: :class:`OutputError` for a folder at
    ``path``, a file where one of its folders should be, a name longer than the file system takes, and a folder
    that takes no file (read-only, no permission; tried with a temporary file, removed at once). Writes nothing
    else; a full disk is found only by the write itself (:func:`write_atomically`)."""
    path = Path(path)
    _check_target(path)
    existing = next(parent for parent in path.parents if parent.exists())
    try:
        longest = os.pathconf(existing, "PC_NAME_MAX")
    except (OSError, ValueError):
        longest = 255
    if any(len(os.fsencode(part)) > longest for part in path.relative_to(existing).parts):
        raise OutputError(path, os.strerror(errno.ENAMETOOLONG), errno.ENAMETOOLONG)
    try:
        fd, tmp = tempfile.mkstemp(prefix=".probe.", suffix=".tmp", dir=existing)
    except OSError as err:
        raise _output_error(path, err) from None
    os.close(fd)
    os.unlink(tmp)
    return path


def write_atomically(path: str | os.PathLike, write) -> Path:
    """Call ``write(temporary_path)``, then rename the file to ``path``.

    On any error nothing is left at ``path`` (an older file there stays untouched) and no temporary file remains;
    an ``OSError`` (full or read-only disk, no permission, name too long, ``path`` a folder) is raised as
    :class:`OutputError`, one line naming ``path`` and the reason. The temporary file is ``.NAME.XXXXXXXX.tmp``
    beside ``path`` (``NAME`` cut to 40 characters, so that a name the file system takes is never refused for its
    temporary's length); one left by a killed process is removed by :func:`remove_leftovers`.
    """
    path = Path(path)
    try:
        _check_target(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:40]}.", suffix=".tmp", dir=path.parent)
    except OSError as err:
        raise _output_error(path, err) from None
    os.close(fd)
    try:
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600; a result file is readable like any other the user makes
        write(tmp)
        os.replace(tmp, path)
    except BaseException as err:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(err, OSError):
            raise _output_error(path, err) from None
        raise
    return path


def save_dataset(ds: xr.Dataset, path: str | os.PathLike) -> Path:
    """Write ``ds`` to ``path`` as netCDF4 (h5netcdf) atomically (:func:`write_atomically`).

    The file is made in memory and only its bytes go to the disk: HDF5 crashes the interpreter (segmentation fault)
    when the disk fails under it (a full disk), where Python's own write raises an ``OSError``. The copy costs
    about nothing: 20 ms for a 6 MB sweep, 0.6 s for 116 MB (a file written by HDF5 directly: 30 ms, 0.5 s).
    """
    check_dataset(ds)
    return write_netcdf(ds, path)


def write_netcdf(ds: xr.Dataset, path: str | os.PathLike) -> Path:
    """Write ``ds`` to ``path`` as netCDF4 (h5netcdf) atomically, its provenance unchecked (a stored intermediate):
    made in memory, then its bytes written (:func:`save_dataset` says why)."""
    data = ds.to_netcdf(engine=ENGINE)
    return write_atomically(path, lambda tmp: Path(tmp).write_bytes(data))


def remove_leftovers(folder: str | os.PathLike) -> list[Path]:
    """Remove the temporary files of :func:`write_atomically` in ``folder`` (left by a killed process: call this only
    while holding the folder's :func:`output_lock`, when no write of another process can be under way); returns the
    files removed. Other files, hidden ones and ``*.tmp`` of other names included, stay."""
    removed = []
    for path in sorted(Path(folder).glob(".*.tmp")):
        if _TEMPORARY.fullmatch(path.name) and stat.S_ISREG(path.lstat().st_mode):
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


def _holder(fd: int) -> str:
    """Who holds the lock, as its holder wrote it (``PID COMMAND``), read a few times while it is still empty."""
    for _ in range(20):
        written = re.fullmatch(r"(\d{1,10}) ([a-z -]{1,40})\n", os.pread(fd, 64, 0).decode("ascii", "replace"))
        if written:
            return f"attnstruct {written[2]} (pid {written[1]})"
        time.sleep(0.01)
    return "another attnstruct process"


@contextlib.contextmanager
def output_lock(folder: str | os.PathLike, command: str) -> Iterator[Path]:
    """Hold the output folder ``folder`` (created if need be) for this process until the block ends.

    An exclusive, non-blocking ``flock`` on ``folder/.attnstruct.lock``, which holds ``PID COMMAND``: a second process
    is refused at once with :class:`FolderInUse` naming the folder and the holder's pid. The kernel drops the lock
    when its holder ends, killed (``kill -9``) or not, so a dead holder never blocks the next run. The file is
    removed when the block ends; a process that opened it just before then finds, once it holds the lock, that the
    path names another file (or none) and starts again, so two holders never overlap. Raises :class:`OutputError`
    when the folder cannot be made or written.
    """
    folder = Path(folder)
    lock = folder / LOCK_FILE
    try:
        _check_target(folder, folder=True)
        folder.mkdir(parents=True, exist_ok=True)
        while True:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o666)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _holder(fd)
                os.close(fd)
                raise FolderInUse(folder, holder) from None
            try:
                current = os.path.samestat(os.fstat(fd), os.stat(lock, follow_symlinks=False))
            except FileNotFoundError:
                current = False
            if current:
                break
            os.close(fd)
    except OSError as err:
        raise _output_error(folder, err) from None
    try:
        with contextlib.suppress(OSError):  # the holder's name is for another run's message; a full disk may refuse it
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()} {command}\n".encode("ascii"), 0)
        yield folder
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lock)
        os.close(fd)


class UnsafeDataset(ValueError):
    """A netCDF file whose values would be read from outside it (:func:`check_self_contained`)."""


def check_self_contained(path: str | os.PathLike) -> None:
    """Refuse (:class:`UnsafeDataset`, naming the file and the variable) a netCDF file that is not flat and
    self-contained: HDF5 lets a variable's bytes live in another file (external storage, a virtual dataset) and a name
    point into another file (an external link), and a reader follows them, so a file from elsewhere could bring any
    file's bytes in as its values. What :func:`save_dataset` writes has variables alone, at its root."""
    import h5py

    path = Path(path)
    with h5py.File(path, "r") as f:
        for name in f:
            shown = repr(name[:60])
            link = f.get(name, getlink=True)
            if not isinstance(link, h5py.HardLink):
                raise UnsafeDataset(
                    f"{path} reads other files: {shown} is a link ({type(link).__name__}), not a variable"
                )
            item = f[name]
            if not isinstance(item, h5py.Dataset):
                raise UnsafeDataset(f"{path}: {shown} is a group; a result dataset has variables alone")
            if item.external or item.is_virtual:
                raise UnsafeDataset(f"{path} reads other files: the values of {shown} would be read from another one")


def load_dataset(path: str | os.PathLike) -> xr.Dataset:
    """Read a dataset written by :func:`save_dataset` fully into memory and close the file; a file whose values would
    come from another file is refused first (:func:`check_self_contained`)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no result dataset at {path}")
    check_self_contained(path)
    with xr.open_dataset(path, engine=ENGINE) as ds:
        return ds.load()
