"""Result datasets: provenance attrs, atomic netCDF writes (``engine="h5netcdf"``), loading.

Every dataset the project writes carries these attrs (README, "Use the package"), all plain strings or numbers
because netCDF attrs cannot hold dicts, booleans or None:

``score_convention``  ``"paper"`` or ``"raw"`` and ``score_convention_definition``, the formulas;
``scored_matrix``     which matrix was scored, e.g. ``"W_qk = sum_h W_q^h W_k^h^T per layer (d_model x d_model)"``;
``directionality_num_std``  the threshold of the directionality score;
``attnstruct_version``, ``git_commit``, ``library_versions`` (JSON), ``parameters`` (JSON), ``created`` (UTC ISO).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import subprocess
import tempfile
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


def write_atomically(path: str | os.PathLike, write) -> Path:
    """Call ``write(temporary_path)``, then rename the file to ``path``.

    On any error nothing is left at ``path`` (an older file there stays untouched) and no temporary file remains.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600; a result file is readable like any other the user makes
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def save_dataset(ds: xr.Dataset, path: str | os.PathLike) -> Path:
    """Write ``ds`` to ``path`` as netCDF4 (h5netcdf) atomically (:func:`write_atomically`)."""
    check_dataset(ds)
    return write_atomically(path, lambda tmp: ds.to_netcdf(tmp, engine=ENGINE))


def load_dataset(path: str | os.PathLike) -> xr.Dataset:
    """Read a dataset written by :func:`save_dataset` fully into memory and close the file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no result dataset at {path}")
    with xr.open_dataset(path, engine=ENGINE) as ds:
        return ds.load()
