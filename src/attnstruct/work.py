"""Where a notebook writes, whatever folder it was opened from, and the switch that forbids training.

A notebook's ``results_dir`` and ``figures_dir`` default to ``None``: :func:`output_dirs` resolves them to
``results/`` and ``figures/`` of the **work folder** (:func:`work_dir`), which does not depend on the working
directory, so a notebook opened from a read-only course folder, or from ``build/exercises/``, writes to the same
writable place:

1. ``$ATTNSTRUCT_WORK``, when set (``make lab`` sets it to ``build/quick``, where ``make reproduce`` wrote, so the
   stored runs and datasets are found again);
2. else ``work/`` in the attnstruct cache (``$ATTNSTRUCT_CACHE``, else ``~/.cache/attnstruct``).

The slow computations of the notebooks store their results there, keyed by their parameters and code (training
runs in run folders, :mod:`attnstruct.training.run_folder`), and reuse them when present. With
``ATTNSTRUCT_STORED_RUNS_ONLY=1`` (:func:`refuse_to_compute`) a computation that finds nothing stored stops with one
line instead of training: a lecturer who runs a notebook live in class, or a test that asserts a notebook retrains
nothing after a build, sets it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import xarray as xr

WORK_ENV = "ATTNSTRUCT_WORK"
STORED_ONLY_ENV = "ATTNSTRUCT_STORED_RUNS_ONLY"


class NotStored(RuntimeError):
    """A slow computation found no stored result while :data:`STORED_ONLY_ENV` forbids computing it."""


def work_dir() -> Path:
    """The work folder (module docstring), absolute; not created here."""
    if os.environ.get(WORK_ENV):
        return Path(os.environ[WORK_ENV]).expanduser().resolve()
    from .cache_folder import cache_dir

    return (cache_dir() / "work").resolve()


def output_dirs(results_dir: str | os.PathLike | None, figures_dir: str | os.PathLike | None) -> tuple[Path, Path]:
    """A notebook's ``(results_dir, figures_dir)`` as paths: each given one as it is, each ``None`` as ``results/``
    or ``figures/`` of :func:`work_dir`."""
    work = work_dir()
    return (
        Path(results_dir).expanduser() if results_dir is not None else work / "results",
        Path(figures_dir).expanduser() if figures_dir is not None else work / "figures",
    )


def stored_only() -> bool:
    """Whether :data:`STORED_ONLY_ENV` is set to a true value (``1``, ``true``, ``yes``)."""
    return os.environ.get(STORED_ONLY_ENV, "").strip().lower() in ("1", "true", "yes")


def refuse_to_compute(what: str) -> None:
    """Raise :class:`NotStored` naming ``what`` when :func:`stored_only`; return otherwise."""
    if stored_only():
        raise NotStored(f"{what} is not stored, and {STORED_ONLY_ENV} forbids computing it: run the notebook first")


def stored_dataset(path: str | os.PathLike, compute: Callable[[], xr.Dataset], what: str) -> xr.Dataset:
    """The dataset stored at ``path`` if there is one, else ``compute()`` written there atomically (netCDF) and
    returned; :func:`refuse_to_compute` (naming ``what``) comes before computing. ``path`` should name the
    parameters and code the dataset depends on (a digest), so a stored result is never one of other settings."""
    from . import results

    path = Path(path)
    if path.is_file():
        print(f"notice: reusing {what} stored in {path}")
        return results.load_dataset(path)
    refuse_to_compute(what)
    ds = compute()
    results.write_netcdf(ds, path)
    return ds
