"""A run's folder: its checkpoint, its finished dataset, and the key that says whether a finished run may be reused.

``<run_dir>/checkpoint.pt`` holds the model, optimiser, schedule and records of the last checkpoint step;
``<run_dir>/run.nc`` the finished run's dataset. Both carry the run's *key*: the package version, a digest of
the package's Python sources and a digest of the configuration (:func:`run_key`). A finished run is reused only
when its key is today's key, with a notice that says so; a run made by other code is trained again (also with
a notice), so a stale result is never reused silently. A folder that holds a run of *other parameters* is an
error: that is a second run pointed at the same folder, not a stale one.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import torch
import xarray as xr

from . import results
from ._version import __version__
from .records import Records

RUN_FILE = "run.nc"
CHECKPOINT_FILE = "checkpoint.pt"


@functools.cache
def code_digest() -> str:
    """sha256 (hex, 16 characters) over the relative paths and bytes of the package's ``.py`` files, sorted."""
    root = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def run_key(config) -> str:
    """The reuse key of a run (JSON): attnstruct version, code digest, configuration digest."""
    return json.dumps(
        {"attnstruct_version": __version__, "code": code_digest(), "config": config.digest()}, sort_keys=True
    )


def _other_parameters(config, recorded: dict) -> list[str]:
    current = config.to_dict()
    return sorted(k for k in set(current) | set(recorded) if recorded.get(k) != current.get(k))


def finished_run(config, run_dir: str | Path | None, log: Callable[[str], None] = print) -> xr.Dataset | None:
    """The dataset of the finished run in ``run_dir`` when it may be reused, else None (no run, or a stale one).

    Raises ValueError when the folder holds a run with other parameters.
    """
    if run_dir is None:
        return None
    final = Path(run_dir) / RUN_FILE
    if not final.is_file():
        return None
    done = results.load_dataset(final)
    changed = _other_parameters(config, json.loads(done.attrs["parameters"]))
    if changed:
        raise ValueError(
            f"{final} holds a run with other parameters ({', '.join(changed)}); remove it or choose another folder"
        )
    if done.attrs.get("run_key") == run_key(config):
        log(f"notice: reusing the finished run {final} (same parameters, same attnstruct code)")
        return done
    log(f"notice: {final} was made by other attnstruct code or another version; training it again")
    return None


def save_checkpoint(run_dir: Path, config, step: int, model, optimizer, scheduler, records: Records) -> None:
    """Write ``checkpoint.pt`` atomically: model, optimiser, schedule, records, the step and the run key."""
    state = {
        "config": config.to_dict(),
        "run_key": run_key(config),
        "step": step,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "records": asdict(records),
    }
    results.write_atomically(Path(run_dir) / CHECKPOINT_FILE, lambda temporary: torch.save(state, temporary))


def resume(run_dir, config, model, optimizer, scheduler, log: Callable[[str], None] = print) -> tuple[int, Records]:
    """Load ``checkpoint.pt`` into the model, optimiser and schedule; return (its step, its records).

    No checkpoint (or none in memory-only runs): step 0 and empty records. A checkpoint of other parameters
    raises ValueError; one written by other code is set aside with a notice (the run starts again).
    """
    path = Path(run_dir) / CHECKPOINT_FILE if run_dir is not None else None
    if path is None or not path.is_file():
        return 0, Records()
    state = torch.load(path, map_location="cpu", weights_only=False)
    changed = _other_parameters(config, state["config"])
    if changed:
        raise ValueError(
            f"{path} belongs to a run with other parameters ({', '.join(changed)}); remove it or change run_dir"
        )
    if state.get("run_key") != run_key(config):
        log(f"notice: {path} was written by other attnstruct code or another version; starting the run again")
        return 0, Records()
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    return state["step"], Records(**state["records"])


def remove_checkpoint(run_dir) -> None:
    if run_dir is not None:
        (Path(run_dir) / CHECKPOINT_FILE).unlink(missing_ok=True)
