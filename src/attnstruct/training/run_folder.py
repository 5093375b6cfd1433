"""A run's folder: its checkpoint, its finished dataset, and the key that says whether a finished run may be reused.

``<run_dir>/checkpoint.pt`` holds the model, optimiser, schedule and records of the last checkpoint step;
``<run_dir>/run.nc`` the finished run's dataset. Both carry the run's *key*: the package version, a digest of the
code that determines the run (:func:`code_modules`, :func:`code_digest`) and a digest of the configuration
(:func:`run_key`). A finished run is reused only when its key is today's key, with a notice that says so; a run made
by other code is trained again (also with a notice), so a stale result is never reused silently. A folder that holds
a run of *other parameters* is an error: that is a second run pointed at the same folder, not a stale one.

A run folder may have come from anywhere (a copy, an archive, a colleague: docs/security.md), so what it holds is
data: the checkpoint is read by the weights-only unpickler and checked against the run before anything of it is
used (:mod:`attnstruct.training.resume_state`), a ``run.nc`` that would read other files (HDF5 external links or
storage) is refused before it is opened as a dataset, and no file read there (nor a snapshot folder written there)
may be a link out of the folder (:func:`attnstruct.untrusted.inside`; an atomic write replaces a link, never follows
it). Each refusal is one ValueError line that says what to do.

The code that determines a run is :data:`TRAINING_CODE` (the loop, the model, what is recorded, the scores) and the
task's own modules: the module that defines the run's configuration class, the task module it names
(``TASK_MODULE``: the batches and the loss, kept apart from the configuration so that reading a configuration needs no
torch) and the modules of ``attnstruct.tasks`` they import (its data). The digest reads their syntax trees without
docstrings, so an edit of prose, comments or layout keeps every finished run, and an edit of any other module (a
notebook's analysis, the teaching aids) too.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path

import torch
import xarray as xr

from .. import results
from .._version import __version__
from ..untrusted import UnsafeName, inside
from . import resume_state
from .records import Records

RUN_FILE = "run.nc"
CHECKPOINT_FILE = "checkpoint.pt"


PACKAGE = Path(__file__).resolve().parents[1]
TRAINING_CODE = (
    "attnstruct._checks",
    "attnstruct.conventions",
    "attnstruct.scores",
    "attnstruct.training.config",
    "attnstruct.training.engine",
    "attnstruct.training.model",
    "attnstruct.training.model_config",
    "attnstruct.training.records",
    "attnstruct.training.run_config",
    "attnstruct.training.run_folder",
    "attnstruct.training.step",
)
TASKS = "attnstruct.tasks"


def _path(module: str, root: Path) -> Path:
    return root.joinpath(*module.split(".")[1:]).with_suffix(".py")


def _tasks_imported(module: str, root: Path) -> set[str]:
    """The modules of ``attnstruct.tasks`` that ``module`` (one of them) imports, as ``from . import x`` or
    ``from .x import y``."""
    found = set()
    for node in ast.walk(ast.parse(_path(module, root).read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            names = [node.module] if node.module else [a.name for a in node.names]
            found |= {f"{TASKS}.{n}" for n in names if _path(f"{TASKS}.{n}", root).is_file()}
    return found


def code_modules(config, root: Path = PACKAGE) -> tuple[str, ...]:
    """The modules whose code determines a run of ``config``: :data:`TRAINING_CODE`, the module of the
    configuration's class, the task's module the configuration names in ``TASK_MODULE`` (its batches and loss: the
    configuration lives apart, without torch), and (for modules of ``attnstruct.tasks``) the task modules they
    import, and those they import in turn; sorted."""
    own = {type(config).__module__, getattr(config, "TASK_MODULE", None) or type(config).__module__}
    modules = {*TRAINING_CODE, *own}
    if any(module.startswith(TASKS + ".") for module in own):
        pending = [module for module in own if module.startswith(TASKS + ".")]
        while pending:
            found = _tasks_imported(pending.pop(), root) - modules
            modules |= found
            pending.extend(found)
    return tuple(sorted(modules))


def _without_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            if isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return tree


@functools.lru_cache(maxsize=256)
def _tree(path: Path, mtime_ns: int, size: int) -> str:
    """``ast.dump`` of the file without docstrings (no line numbers), cached per version of the file."""
    return ast.dump(_without_docstrings(ast.parse(path.read_text())))


def code_digest(modules: tuple[str, ...], root: Path = PACKAGE) -> str:
    """sha256 (hex, 16 characters) over each module's name and syntax tree without docstrings (``ast.dump``,
    no line numbers): prose, comments and layout do not change it, code does."""
    digest = hashlib.sha256()
    for module in sorted(modules):
        path = _path(module, root)
        stat = path.stat()
        digest.update(module.encode())
        digest.update(_tree(path, stat.st_mtime_ns, stat.st_size).encode())
    return digest.hexdigest()[:16]


def run_key(config) -> str:
    """The reuse key of a run (JSON): attnstruct version, digest of the code that determines it, configuration
    digest."""
    code = code_digest(code_modules(config, PACKAGE), PACKAGE)
    return json.dumps({"attnstruct_version": __version__, "code": code, "config": config.digest()}, sort_keys=True)


def _recorded(config) -> dict:
    """The configuration as a record reads it back: its JSON (a path as its text)."""
    return json.loads(json.dumps(config.to_dict(), default=str))


def _other_parameters(config, recorded) -> list[str]:
    current = _recorded(config)
    if not isinstance(recorded, dict):
        return ["all"]
    return sorted(k for k in set(current) | set(recorded) if recorded.get(k) != current.get(k))


def check_run_dir(run_dir) -> None:
    """Raise ValueError unless ``run_dir`` is None, a folder, or a path where one can be made (no empty text, no
    file, no file among its parents)."""
    if run_dir is None:
        return
    if not isinstance(run_dir, (str, os.PathLike)) or not str(run_dir).strip():
        raise ValueError(f"run_dir must name a folder, got {run_dir!r}")
    try:
        results.check_folder(run_dir)
    except results.OutputError as err:
        raise ValueError(f"run_dir: {err}") from None


def _in_folder(run_dir, name: str) -> Path:
    """``run_dir/name``, refused (ValueError, one line) when a link there leads out of the run folder."""
    try:
        return inside(run_dir, name)
    except UnsafeName as err:
        raise ValueError(f"run folder {run_dir}: {err}") from None


def read_run(path: Path) -> xr.Dataset:
    """The finished run's dataset at ``path``, refused in one line (ValueError) when it cannot be read, reads
    other files (HDF5 external links or storage) or lacks its record of parameters."""
    try:
        done = results.load_dataset(path)  # refuses a file whose values would come from others (HDF5 links, storage)
        json.loads(done.attrs["parameters"])
    except Exception as err:  # noqa: BLE001  (whatever the file holds, one line)
        reason = "no parameters attribute" if isinstance(err, KeyError) else " ".join(str(err).split())[:300]
        raise ValueError(
            f"{path} is not a run attnstruct can read ({reason}); delete it to train the run again"
        ) from None
    return done


def finished_run(config, run_dir: str | Path | None, log: Callable[[str], None] = print) -> xr.Dataset | None:
    """The dataset of the finished run in ``run_dir`` when it may be reused, else None (no run, or a stale one).

    Raises ValueError when the folder holds a run with other parameters, or a ``run.nc`` that cannot be read.
    """
    if run_dir is None:
        return None
    final = _in_folder(run_dir, RUN_FILE)
    if not final.is_file():
        return None
    done = read_run(final)
    changed = _other_parameters(config, json.loads(done.attrs["parameters"]))
    if changed:
        raise ValueError(
            f"{final} holds a run with other parameters ({', '.join(changed)}); remove it or choose another folder"
        )
    if done.attrs.get("run_key") == run_key(config):
        where = Path(final.parent.parent.name, final.parent.name)  # not the machine's absolute path
        log(f"notice: reusing the finished run {where} (same parameters, same attnstruct code)")
        return done
    log(f"notice: {final} was made by other attnstruct code or another version; training it again")
    return None


def save_checkpoint(run_dir: Path, config, step: int, model, optimizer, scheduler, records: Records) -> None:
    """Write ``checkpoint.pt`` atomically (:mod:`attnstruct.training.resume_state`): model, optimiser, schedule,
    records, the step and the run key."""
    state = resume_state.checkpoint_state(
        _recorded(config), run_key(config), step, model, optimizer, scheduler, records
    )
    results.write_atomically(Path(run_dir) / CHECKPOINT_FILE, lambda temporary: torch.save(state, temporary))


def read_checkpoint(
    run_dir, config, evaluations=(), log: Callable[[str], None] = print
) -> resume_state.Checkpoint | None:
    """The checkpoint of ``run_dir`` to resume this run (of ``config``, its task recording ``evaluations``) from,
    read without running any of it, or None (no checkpoint, or one written by other code: set aside with a notice,
    the run starts again).

    Raises ValueError, one line ending in what to do, for a checkpoint that cannot be read safely, one of an older
    format, of other parameters or whose records do not fit the run (:func:`resume_state.read`).
    """
    if run_dir is None:
        return None
    path = _in_folder(run_dir, CHECKPOINT_FILE)
    if not path.is_file():
        return None
    found = resume_state.read(path, config, evaluations)
    changed = _other_parameters(config, found.config)
    if changed:
        raise ValueError(
            f"{path} belongs to a run with other parameters ({', '.join(changed)}); remove it or change run_dir"
        )
    if found.run_key != run_key(config):
        log(f"notice: {path} was written by other attnstruct code or another version; starting the run again")
        return None
    return found


def resume(checkpoint, model, optimizer, scheduler) -> tuple[int, Records]:
    """Load ``checkpoint`` (:func:`read_checkpoint`; None: start from step 0 with empty records) into the model,
    optimiser and schedule; return (its step, its records). ValueError, one line, when its tensors do not fit."""
    if checkpoint is None:
        return 0, Records()
    return resume_state.load_into(checkpoint, model, optimizer, scheduler)


def remove_checkpoint(run_dir) -> None:
    if run_dir is not None:
        (Path(run_dir) / CHECKPOINT_FILE).unlink(missing_ok=True)
