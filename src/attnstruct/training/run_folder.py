"""A run's folder: its checkpoint, its finished dataset, and the key that says whether a finished run may be reused.

``<run_dir>/checkpoint.pt`` holds the model, optimiser, schedule and records of the last checkpoint step;
``<run_dir>/run.nc`` the finished run's dataset. Both carry the run's *key*: the package version, a digest of the
code that determines the run (:func:`code_modules`, :func:`code_digest`) and a digest of the configuration
(:func:`run_key`). A finished run is reused only when its key is today's key, with a notice that says so; a run made
by other code is trained again (also with a notice), so a stale result is never reused silently. A folder that holds
a run of *other parameters* is an error: that is a second run pointed at the same folder, not a stale one.

The code that determines a run is :data:`TRAINING_CODE` (the loop, the model, what is recorded, the scores) and the
task's own modules: the module that defines the run's configuration class and the modules of ``attnstruct.tasks``
it imports (its data). The digest reads their syntax trees without docstrings, so an edit of prose, comments or
layout keeps every finished run, and an edit of any other module (a notebook's analysis, the teaching aids) too.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import torch
import xarray as xr

from .. import results
from .._version import __version__
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
    "attnstruct.training.records",
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
    configuration's class, and (for a task of ``attnstruct.tasks``) the task modules it imports, and those they
    import in turn; sorted."""
    task = type(config).__module__
    modules = {*TRAINING_CODE, task}
    if task.startswith(TASKS + "."):
        pending = [task]
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
        where = Path(final.parent.parent.name, final.parent.name)  # not the machine's absolute path
        log(f"notice: reusing the finished run {where} (same parameters, same attnstruct code)")
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
