"""A run's resume state in ``checkpoint.pt``: written by ``torch.save``, read back with ``weights_only=True`` only.

A run folder may come from anywhere (a colleague, a copy, an archive: docs/security.md), so its checkpoint is read
as data: nothing in it runs, and nothing in it is trusted until it fits the run that resumes from it. The file is
a ``torch.save`` of a dict that PyTorch's weights-only unpickler rebuilds (tensors and plain values only)::

    {"format": FORMAT,
     "run": JSON text: {"config": {...}, "run_key": "...", "step": N, "records": {...}},
     "model": state dict, "optimizer": state dict, "scheduler": state dict}

The configuration, the run key, the step and the records are JSON (NaN as JSON's ``NaN``; a float's text is its
shortest exact form, so records come back bit for bit). :func:`read` refuses, in one line that ends in what to do
(delete the file to start the run over), a file that the weights-only unpickler refuses (a pickle that asks for
any other object, one that could run code), one of another format (the ``weights_only=False`` checkpoints of
earlier versions among them), and records that do not fit the run; :func:`load_into` refuses tensors and
optimiser or schedule state that do not fit the model being resumed, before any of it is loaded.
"""

from __future__ import annotations

import json
import math
import pickle
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np
import torch

from ..untrusted import load_weights_only
from .records import Records

FORMAT = "attnstruct-run-checkpoint/2"
TOP_KEYS = {"format", "run", "model", "optimizer", "scheduler"}
RUN_KEYS = {"config", "run_key", "step", "records"}
OPTIMIZER_STATE = {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"}  # AdamW's per-parameter state
START_OVER = "delete it to start the run over"


@dataclass(frozen=True)
class Checkpoint:
    """What :func:`read` found: the run's recorded configuration (JSON), run key, step and records, and the state
    dicts to load (checked against the model by :func:`load_into`)."""

    path: Path
    config: dict
    run_key: str
    step: int
    records: Records
    model: dict
    optimizer: dict
    scheduler: dict


def checkpoint_state(config: dict, run_key: str, step: int, model, optimizer, scheduler, records: Records) -> dict:
    """The dict ``torch.save`` writes (module docstring); ``config`` is the configuration's JSON record."""
    run = {"config": config, "run_key": run_key, "step": step, "records": asdict(records)}
    return {
        "format": FORMAT,
        "run": json.dumps(run, sort_keys=True),
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
    }


def _refused(path: Path, why: str) -> ValueError:
    return ValueError(f"{path} {why}; {START_OVER}")


def _load(path: Path):
    try:
        return load_weights_only(path, map_location="cpu")
    except pickle.UnpicklingError:
        raise _refused(
            path, "holds objects other than tensors and plain values (loading it in general could run code)"
        ) from None
    except Exception as err:  # noqa: BLE001  (a damaged file fails in many ways; each is one line)
        reason = " ".join(str(err).split())[:200] or type(err).__name__
        raise _refused(path, f"cannot be read as a checkpoint ({reason})") from None


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _records(raw, step: int, config, evaluations, path: Path) -> Records:
    """The records of ``raw`` (their JSON), refused unless they are a run's records up to ``step``."""
    names = {f.name for f in fields(Records)}
    if not isinstance(raw, dict) or set(raw) != names:
        raise _refused(path, "holds records of another kind")
    steps = raw["step"]
    if not (isinstance(steps, list) and steps and all(isinstance(s, int) and not isinstance(s, bool) for s in steps)):
        raise _refused(path, "holds records without their steps")
    if steps[0] != 0 or steps[-1] != step or any(b <= a for a, b in zip(steps, steps[1:])):
        raise _refused(path, f"holds records whose steps do not run from 0 to its step {step}")
    count, layers, heads = len(steps), config.n_layers, config.n_heads
    shapes = {
        "symmetry_layer": (count, layers),
        "directionality_layer": (count, layers),
        "head_symmetry": (count, layers, heads),
        "head_directionality": (count, layers, heads),
        "train_loss": (count,),
        "lr": (count,),
    }
    evaluations_found = raw["evaluations"]
    if not isinstance(evaluations_found, dict) or set(evaluations_found) != set(evaluations):
        raise _refused(path, f"holds evaluations other than this run's ({', '.join(evaluations)})")
    shapes.update({f"evaluations {name}": (count,) for name in evaluations})
    values = {
        **{k: raw[k] for k in shapes if k in raw},
        **{f"evaluations {k}": v for k, v in evaluations_found.items()},
    }
    for name, shape in shapes.items():
        if not _numbers_of_shape(values[name], shape):
            raise _refused(path, f"holds records whose {name} is not {' x '.join(map(str, shape))} numbers")
    if not _number(raw["score_seconds"]):
        raise _refused(path, "holds records whose score_seconds is not a number")
    return Records(**raw)


def _numbers_of_shape(value, shape: tuple[int, ...]) -> bool:
    def numbers(item, depth: int) -> bool:
        if depth == len(shape):
            return _number(item)
        return isinstance(item, list) and len(item) == shape[depth] and all(numbers(x, depth + 1) for x in item)

    return numbers(value, 0) and np.asarray(value, dtype=float).shape == shape


def read(path: str | Path, config, evaluations=()) -> Checkpoint:
    """Read ``checkpoint.pt`` at ``path`` without running any of it (module docstring) for a run of ``config``
    whose task records ``evaluations`` (names); ValueError, one line ending in what to do, for anything else."""
    path = Path(path)
    state = _load(path)
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        earlier = isinstance(state, dict) and "format" not in state and "config" in state
        what = (
            "was written by an earlier attnstruct, in a format no longer read"
            if earlier
            else "is not a run's checkpoint"
        )
        raise _refused(path, what)
    if set(state) != TOP_KEYS:
        raise _refused(path, f"holds entries other than {', '.join(sorted(TOP_KEYS))}")
    try:
        run = json.loads(state["run"]) if isinstance(state["run"], str) else None
    except ValueError:
        run = None
    if not isinstance(run, dict) or set(run) != RUN_KEYS:
        raise _refused(path, "holds no record of its run (configuration, run key, step, records)")
    step = run["step"]
    if not (isinstance(run["config"], dict) and isinstance(run["run_key"], str)):
        raise _refused(path, "holds no record of its configuration and run key")
    if not (isinstance(step, int) and not isinstance(step, bool) and 0 < step < config.steps):
        raise _refused(path, f"was written at step {step!r}, which is not a step inside this run's {config.steps}")
    records = _records(run["records"], step, config, tuple(evaluations), path)
    for name in ("model", "optimizer", "scheduler"):
        if not isinstance(state[name], dict):
            raise _refused(path, f"holds no {name} state")
    return Checkpoint(
        path, run["config"], run["run_key"], step, records, state["model"], state["optimizer"], state["scheduler"]
    )


def _fits(ours, theirs) -> bool:
    """Whether ``theirs`` has the structure of ``ours``: the same keys, lengths and kinds of value, tensors of the
    same shape and dtype (dense, finite), numbers finite."""
    if ours is None or isinstance(ours, (bool, str)):
        return type(theirs) is type(ours)
    if _number(ours):
        return _number(theirs) and math.isfinite(theirs)
    if isinstance(ours, (list, tuple)):
        return type(theirs) is type(ours) and len(theirs) == len(ours) and all(map(_fits, ours, theirs))
    if isinstance(ours, dict):
        return isinstance(theirs, dict) and set(theirs) == set(ours) and all(_fits(ours[k], theirs[k]) for k in ours)
    if isinstance(ours, torch.Tensor):
        return _dense_finite(theirs) and theirs.shape == ours.shape and theirs.dtype == ours.dtype
    return False


def _dense_finite(tensor) -> bool:
    if type(tensor) is not torch.Tensor or tensor.layout != torch.strided or tensor.is_quantized:
        return False
    return not tensor.is_floating_point() or bool(torch.isfinite(tensor).all())


def _optimizer_fits(optimizer, theirs) -> bool:
    ours = optimizer.state_dict()
    if not isinstance(theirs, dict) or set(theirs) != {"state", "param_groups"}:
        return False
    if not _fits(ours["param_groups"], theirs["param_groups"]) or not isinstance(theirs["state"], dict):
        return False
    if [group["params"] for group in theirs["param_groups"]] != [group["params"] for group in ours["param_groups"]]:
        return False
    parameters = dict(enumerate(p for group in optimizer.param_groups for p in group["params"]))
    for index, state in theirs["state"].items():
        if index not in parameters or not isinstance(state, dict) or not set(state) <= OPTIMIZER_STATE:
            return False
        for name, value in state.items():
            shape = () if name == "step" else parameters[index].shape
            if not (_dense_finite(value) and value.is_floating_point() and value.numel() == math.prod(shape)):
                return False
            if name != "step" and value.shape != shape:
                return False
    return True


def load_into(checkpoint: Checkpoint, model, optimizer, scheduler) -> tuple[int, Records]:
    """Load the checkpoint's state dicts into ``model``, ``optimizer`` and ``scheduler`` once each fits them
    (:func:`_fits`: nothing is loaded otherwise); return (its step, its records)."""
    path = checkpoint.path
    if not _fits(model.state_dict(), checkpoint.model):
        raise _refused(path, "holds weights of another model shape than this run's (or weights that are not finite)")
    if not _optimizer_fits(optimizer, checkpoint.optimizer):
        raise _refused(path, "holds optimiser state that does not fit this run's model")
    if not _fits(scheduler.state_dict(), checkpoint.scheduler):
        raise _refused(path, "holds a learning-rate schedule state that does not fit this run's")
    model.load_state_dict(checkpoint.model)
    optimizer.load_state_dict(checkpoint.optimizer)
    scheduler.load_state_dict(checkpoint.scheduler)
    return checkpoint.step, checkpoint.records


def recorded_config(path: str | Path) -> dict:
    """The configuration recorded in the checkpoint at ``path`` (its JSON record), read without loading its tensors
    (memory-mapped) nor running any of it; ValueError (one line, :func:`read`'s) for a file that holds none."""
    path = Path(path)
    try:
        state = load_weights_only(path, map_location="cpu", mmap=True)
    except Exception:  # noqa: BLE001  (not a torch ZIP file: the whole reader says why)
        state = _load(path)
    if isinstance(state, dict) and "format" not in state and "config" in state:
        raise _refused(path, "was written by an earlier attnstruct, in a format no longer read")
    try:
        config = json.loads(state["run"])["config"] if state.get("format") == FORMAT else None
    except (TypeError, ValueError, KeyError, AttributeError):
        config = None
    if not isinstance(config, dict):
        raise _refused(path, "holds no record of its run's configuration")
    return config
