"""The one training loop of the project: any task, one process or many, resumable, logging the scores of ``W_qk``.

In the spirit of minGPT's task-free trainer: the loop knows nothing of text or images. A *task*
(:class:`Task`; :mod:`attnstruct.tasks.text` and :mod:`attnstruct.tasks.vision` hold the project's) supplies

* ``config``: a :class:`~attnstruct.training.run_config.RunConfig` (the fields every run shares, validated once,
  plus the task's own);
* ``prepare()``: load its data once, in the parent process, failing early on bad input;
* ``build_model()``: the model, initialised from ``config.seed`` alone (the global RNG is not reseeded);
* ``batch(step)``: the global batch of ``step``, a pure function of ``(config.seed, step)``, with ``.to(device)``
  and ``.rows(rank, world)`` (one process's share);
* ``loss(model, batch) -> (total, count)``: the summed loss over the batch's targets and their number;
* ``evaluate(model, device) -> dict``: the evaluations named by ``EVALUATIONS`` (name -> description);
* ``attrs()``: what the run's dataset should record about the data.

The loop (:func:`train`) draws ``batch(step)``, reseeds dropout from ``(seed, step)``, takes an AdamW step on
``total / count`` (:class:`attnstruct.training.step.Step`, in ``accumulate`` micro-batches), records the scores
every ``log_every`` steps and at the last step (:mod:`attnstruct.training.records`), evaluates every
``eval_every`` steps and at the last step, and writes a checkpoint at the first record step past each multiple of
``checkpoint_every`` (:mod:`attnstruct.training.run_folder`), so that a resumed run ends with the dataset of an
uninterrupted one.

Scale-out: under ``torchrun`` (an initialised process group) every rank draws the same global batch and takes
rows ``rank::world``; the model and the task's loss are wrapped in DistributedDataParallel once
(:class:`~attnstruct.training.step.Objective`), and the loss is divided by the global number of targets over the
number of processes, so that DDP's gradient average is the one-process gradient. ``accumulate=k`` splits each
process's rows again into ``k`` micro-batches with one optimiser step (the maths: :mod:`attnstruct.training.step`).

On a GPU: ``amp=True`` runs the forward pass under bfloat16 autocast, ``compile=True`` compiles the model and its
loss with ``torch.compile``, AdamW is fused, and batches (drawn on the CPU) reach the device from pinned memory
without blocking. The model's attention is :func:`torch.nn.functional.scaled_dot_product_attention`.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar, Protocol

import numpy as np
import torch
import xarray as xr
from torch import nn

from .. import interrupts, results, work
from ..checkpoints.extract import count_parameters
from ..devices import resolve_device
from . import run_folder, snapshots
from .records import SCORED_MATRIX, Records, record_scores
from .run_config import RunConfig
from .step import Objective, Step, build_optimizer, distributed, runner, seeded_generator, transfer

__all__ = [
    "Objective",
    "Step",
    "Task",
    "build_optimizer",
    "distributed",
    "evaluation_mode",
    "mean_loss",
    "seeded_generator",
    "to_dataset",
    "train",
]


class Task(Protocol):
    """What a task gives the loop (module docstring)."""

    config: RunConfig
    EVALUATIONS: ClassVar[Mapping[str, str]]

    def prepare(self) -> None: ...
    def build_model(self) -> nn.Module: ...
    def batch(self, step: int) -> Any: ...
    def loss(self, model: nn.Module, batch) -> tuple[torch.Tensor, int | torch.Tensor]: ...
    def evaluate(self, model: nn.Module, device: torch.device) -> dict[str, float]: ...
    def attrs(self) -> dict: ...


def _record(task: Task, model, records: Records, step: int, train_loss: float, scheduler, device) -> None:
    config = task.config
    start = time.perf_counter()
    records.step.append(step)
    record_scores(model, records)
    records.score_seconds += time.perf_counter() - start
    records.train_loss.append(train_loss)
    records.lr.append(float(scheduler.get_last_lr()[0]))
    evaluate = step % config.eval_every == 0 or step == config.steps
    records.add_evaluation(task.EVALUATIONS, task.evaluate(model, device) if evaluate else None)


@contextlib.contextmanager
def evaluation_mode(model: nn.Module):
    """``model.eval()`` and no gradients inside, the previous mode restored after."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield model
    finally:
        model.train(was_training)


def mean_loss(task: Task, model: nn.Module, batches, device, parts: int = 1) -> float:
    """Mean loss per target over ``batches`` (summed in float64 over the batches), in evaluation mode; each batch
    in ``parts`` pieces of rows ``i::parts`` (a run's ``accumulate``: no more activations than a training step)."""
    total, count = 0.0, 0
    with evaluation_mode(model):
        for batch in batches:
            for i in range(parts):
                batch_total, batch_count = task.loss(model, batch.rows(i, parts).to(device))
                total += float(batch_total)
                count += int(batch_count)
    return total / count


def to_dataset(task: Task, records: Records, model: nn.Module, **attrs) -> xr.Dataset:
    """One run's records as a dataset over ``step``, ``layer``, ``head`` (float64), with provenance attrs."""
    config = task.config
    ds = records.to_dataset(config.n_layers, config.n_heads, task.EVALUATIONS)
    keys = {key: getattr(config, key) for key in config.RUN_KEYS}
    ds.attrs.update(
        results.provenance_attrs(
            parameters=config.to_dict(),
            scored_matrix=SCORED_MATRIX,
            **keys,
            n_params=count_parameters(model),
            run_key=run_folder.run_key(config),
            **task.attrs(),
            **attrs,
        )
    )
    return ds


def _progress_bar(config: RunConfig, start: int, show: bool):
    from ..report.progress import bar_disabled

    if bar_disabled(show):
        return None
    from tqdm.auto import tqdm

    return tqdm(total=config.steps, initial=start, desc=config.run_name(), unit="step", file=sys.stderr)


def train(
    task: Task,
    run_dir: str | os.PathLike | None = None,
    *,
    progress: bool = False,
    callback: Callable[[int, nn.Module], None] | None = None,
    snapshot_every: int | None = None,
    save_final: bool = False,
    weights: str = snapshots.WEIGHTS,
) -> xr.Dataset:
    """Train one run of ``task`` and return its dataset.

    With ``run_dir``: resume from ``run_dir/checkpoint.pt`` if present, save ``run_dir/run.nc`` atomically at
    the end, and reuse a finished run made by the same code with the same parameters (a notice says so;
    :func:`attnstruct.training.run_folder.finished_run`). ``callback(step, model)`` runs after every optimiser step
    (tests use it to interrupt). Ctrl-C under :func:`attnstruct.interrupts.handled` stops the loop after the step it
    is taking (:class:`~attnstruct.interrupts.Interrupted`, naming the step and the checkpoint a rerun resumes
    from). ``snapshot_every`` (a multiple of ``log_every``) keeps the weights at step 0, every that many steps and at
    the end as checkpoint folders under ``run_dir/snapshots/`` (:mod:`attnstruct.training.snapshots`);
    ``save_final`` keeps the last step's weights in ``run_dir/final/``; a finished run without them is trained again
    to take them. ``weights`` names the snapshots' weight file (``pytorch_model.bin`` or ``model.safetensors``). A
    resumed run says so in one line (its step). Under ``torchrun`` only rank 0 writes files. The global RNG state is
    the same after the call as before.
    """
    config = task.config
    rank, world = distributed()
    if config.batch_size % (world * config.accumulate):
        raise ValueError(
            f"batch_size {config.batch_size} is not divisible by the {world} processes x {config.accumulate} "
            "micro-batches"
        )
    snapshots.check_every(snapshot_every, config.log_every)
    if (snapshot_every or save_final) and run_dir is None:
        raise ValueError("snapshots need a run folder (run_dir)")
    run_folder.check_run_dir(run_dir)
    if snapshot_every:
        snapshots.folder(run_dir, 0)  # refuses a snapshots folder that leads out of the run folder
    if save_final:
        snapshots.final_folder(run_dir)
    log = print if rank == 0 else lambda _: None
    done = run_folder.finished_run(config, run_dir, log=log)
    if done is not None and snapshots.has_every_snapshot(run_dir, config.steps, snapshot_every, save_final):
        return done
    if done is not None:
        lacking = f"its snapshots every {snapshot_every} steps" if snapshot_every else "its final weights"
        log(f"notice: {Path(run_dir).name} lacks {lacking}; training it again")
    checkpoint = run_folder.read_checkpoint(run_dir, config, tuple(task.EVALUATIONS), log=log)
    work.refuse_to_compute(f"the run {config.run_name()}" + (f" in {run_dir}" if run_dir is not None else ""))
    device = resolve_device(config.device)
    with _memory_refused(config, device):
        task.prepare()
        devices = [device.index or 0] if device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices):
            keep = (snapshot_every, save_final, weights)
            return _train(task, run_dir, device, rank, world, progress, callback, keep, checkpoint)


@contextlib.contextmanager
def _memory_refused(config: RunConfig, device):
    """An allocation that fails inside (the CPU's allocator, CUDA's, Python's) becomes one ValueError line."""
    try:
        yield
    except (MemoryError, RuntimeError) as err:
        if not isinstance(err, (MemoryError, torch.OutOfMemoryError)) and "can't allocate memory" not in str(err):
            raise
        asked = re.search(r"allocate ([0-9.]+ ?[KMGTP]?i?B|[0-9]+ bytes)", str(err))
        detail = f" (it asked for {asked[1]} at once)" if asked else ""
        raise ValueError(f"the run {config.run_name()} does not fit in the memory of {device}{detail}") from None


def _resume_from(run_dir, saved: int) -> str:
    """What the same command does after Ctrl-C stopped a run whose last checkpoint is at step ``saved``."""
    if run_dir is None:
        return ""
    if saved == 0:
        return "run the same command to start again (no checkpoint yet)"
    return f"run the same command to resume from the checkpoint at step {saved}"


def _train(task: Task, run_dir, device, rank, world, progress, callback, kept, checkpoint) -> xr.Dataset:
    config = task.config
    snapshot_every, save_final, weights = kept
    keep = set(snapshots.snapshot_steps(config.steps, snapshot_every)) if rank == 0 else set()
    tokens = getattr(task, "tokens_per_step", None)

    def snapshot(step: int) -> None:
        if step in keep:
            snapshots.save(run_dir, config, model, step, tokens, weights=weights)
        if step == config.steps and save_final and rank == 0:
            snapshots.save(run_dir, config, model, step, tokens, weights=weights, final=True)

    model = task.build_model().to(device)
    optimizer, scheduler = build_optimizer(config, model)
    start, records = run_folder.resume(checkpoint, model, optimizer, scheduler)
    if start:
        log = print if rank == 0 else lambda _: None
        log(f"resuming {config.run_name()} from step {start} of {config.steps} ({checkpoint.path.name})")
    if run_dir is not None:
        Path(run_dir).mkdir(parents=True, exist_ok=True)
    step_once = Step(runner(task, model, config, device, world), model, optimizer, scheduler, config, device, world)
    if start == 0:
        _record(task, model, records, 0, float("nan"), scheduler, device)
        snapshot(0)
    running_loss = torch.zeros((), device=device)
    saved = start  # the step of the checkpoint a resume starts from
    bar = _progress_bar(config, start, progress and rank == 0)
    model.train()
    for step in range(start + 1, config.steps + 1):
        running_loss += step_once(transfer(task.batch(step).rows(rank, world), device), step)
        if callback is not None:
            callback(step, model)
        if step % config.log_every == 0 or step == config.steps:
            previous = records.step[-1]
            train_loss = running_loss / (step - previous)
            if world > 1:
                torch.distributed.all_reduce(train_loss)
                train_loss /= world
            _record(task, model, records, step, float(train_loss), scheduler, device)
            snapshot(step)
            running_loss.zero_()
            if bar is not None:
                bar.set_postfix(loss=f"{float(train_loss):.3f}", sym=f"{np.median(records.symmetry_layer[-1]):+.2f}")
            crossed = step // config.checkpoint_every > previous // config.checkpoint_every
            if run_dir is not None and crossed and step < config.steps:
                saved = step
                if rank == 0:
                    run_folder.save_checkpoint(run_dir, config, step, model, optimizer, scheduler, records)
        if bar is not None:
            bar.update(1)
        if step < config.steps:
            interrupts.check(f"after step {step} of {config.steps}", _resume_from(run_dir, saved))
    if bar is not None:
        bar.close()
    ds = to_dataset(task, records, model, processes=world, device=str(device))
    if rank == 0 and run_dir is not None:
        results.save_dataset(ds, Path(run_dir) / run_folder.RUN_FILE)
        run_folder.remove_checkpoint(run_dir)
    return ds
