"""One optimiser step of a run: the optimiser and its schedule, the batch's way to the device, the step itself.

:class:`Step` is what :func:`attnstruct.training.engine.train` calls once per step and what
``benchmarks/train_throughput.py`` and ``benchmarks/gpu_check.py`` time. For a batch of ``n`` targets in total
(over every process) whose summed loss is ``L = sum_j l_j``, the step descends ``L / n``, the mean over the global
batch's targets, whatever the number of processes and micro-batches:

* **one process, one micro-batch** (``accumulate=1``): ``(L / n).backward()``.
* **``world`` processes** (DDP): rank ``r`` holds rows ``r::world`` with summed loss ``L_r``; it back-propagates
  ``L_r / (n / world)`` and DDP averages the gradients over the ranks, so the gradient is
  ``(1 / world) sum_r grad L_r * world / n = grad L / n``.
* **``accumulate=k`` micro-batches**: a process's rows are split again, micro-batch ``i`` taking rows ``i::k`` of
  its share, processed one after another; each summed loss ``L_{r,i}`` is back-propagated as it is, the gradients
  add up in ``.grad`` (DDP synchronises only after the last micro-batch: :meth:`DistributedDataParallel.no_sync`),
  and the sum is divided by ``n / world`` before clipping, so the gradient is again ``grad L / n`` and one
  optimiser step follows. Only one micro-batch's activations are alive at a time. With dropout 0 the step equals
  the one-micro-batch step to float32 rounding (``tests/test_accumulate.py``); with dropout the masks differ,
  since the micro-batches draw them one after another from the step's seed.

On CUDA the rows of a batch go to the device from pinned host memory without blocking (:func:`transfer`), AdamW is
the fused kernel when every parameter is on CUDA (:func:`adamw_options`), and ``amp`` runs the forward passes under
bfloat16 autocast. On the CPU none of this changes anything.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn


def seeded_generator(*seeds: int) -> torch.Generator:
    """A CPU generator seeded by a fixed mix of the integers (e.g. ``(seed, step)``): same seeds, same draws."""
    mixed = 0
    for value in seeds:
        mixed = (mixed * 1_000_003 + int(value)) % (2**63 - 1)
    return torch.Generator().manual_seed(mixed)


def adamw_options(parameters: Iterable[torch.Tensor]) -> dict:
    """``{"fused": True}`` when every parameter is on CUDA (one fused kernel per step), else ``{}``: PyTorch's
    default implementation, unchanged on the CPU."""
    parameters = list(parameters)
    return {"fused": True} if parameters and all(p.is_cuda for p in parameters) else {}


def build_optimizer(config, model: nn.Module):
    """AdamW (no weight decay on biases, LayerNorms and other 1-D parameters, as BERT) and the learning-rate
    schedule: a linear warm-up over ``warmup`` steps, then ``constant``, ``linear`` decay to 0 at the last step
    (Hugging Face's default), or ``cosine`` decay to 0 at the last step. A short run with ``constant`` sees the
    rate of the first steps of a long run. Build it after the model is on its device (fused AdamW on CUDA)."""
    decay, no_decay = [], []
    for name, parameter in model.named_parameters():
        (no_decay if parameter.ndim < 2 or "norm" in name else decay).append(parameter)
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=config.lr,
        **adamw_options(model.parameters()),
    )

    def factor(step: int) -> float:
        if step < config.warmup:
            return (step + 1) / config.warmup
        if config.schedule == "constant":
            return 1.0
        if config.schedule == "linear":
            return max(0.0, (config.steps - step) / max(1, config.steps - config.warmup))
        progress = (step - config.warmup) / max(1, config.steps - config.warmup)
        return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))

    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


class Objective(nn.Module):
    """A model and its task's loss as one module: ``forward(batch) -> (total, count)``.

    DistributedDataParallel wraps this once, so the task's loss may call any part of the model (e.g. a head
    applied to the masked positions only) and the model itself is never unwrapped; ``torch.compile`` compiles
    this module's forward, the model's methods and the loss together.
    """

    def __init__(self, task, model: nn.Module):
        super().__init__()
        self.model = model
        self.loss = task.loss

    def forward(self, batch):
        return self.loss(self.model, batch)


def runner(task, model: nn.Module, config, device: torch.device, world: int) -> nn.Module:
    """The :class:`Objective` of ``task`` and ``model`` as the step calls it: compiled with ``torch.compile`` when
    ``config.compile``, then wrapped in DistributedDataParallel when ``world > 1`` (DDP outside, so that its
    gradient hooks and ``no_sync`` stay plain Python). ``model`` itself stays unwrapped: its state dict, scores and
    evaluation are the uncompiled module's."""
    objective = Objective(task, model)
    if config.compile:
        objective = torch.compile(objective)
    if world > 1:
        objective = nn.parallel.DistributedDataParallel(
            objective, **({"device_ids": [device.index]} if device.type == "cuda" else {})
        )
    return objective


def distributed() -> tuple[int, int]:
    """(rank, world size) of an initialised process group, else (0, 1)."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1


def transfer(batch, device: torch.device):
    """``batch`` on ``device``. On CUDA a dataclass batch's tensors are copied from pinned host memory with
    ``non_blocking=True`` (the copy overlaps the work already queued; the next kernel on the stream waits for it);
    otherwise, and for any other batch, ``batch.to(device)``."""
    if device.type != "cuda" or not dataclasses.is_dataclass(batch):
        return batch.to(device)
    moved = {
        f.name: value.pin_memory().to(device, non_blocking=True)
        for f in dataclasses.fields(batch)
        if isinstance(value := getattr(batch, f.name), torch.Tensor)
    }
    return dataclasses.replace(batch, **moved)


@dataclass
class Step:
    """One optimiser step of a run (module docstring): ``step(batch, step_number) -> loss`` (0-d, detached).

    ``runner(batch) -> (total, count)`` is an :class:`Objective`, possibly compiled or inside DDP; ``batch`` is this
    process's rows of the global batch, on the device; ``config.accumulate`` micro-batches are taken from it with
    ``batch.rows(i, accumulate)``.
    """

    runner: Callable
    model: nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: Any
    config: Any
    device: torch.device
    world: int = 1

    def __call__(self, batch, step: int) -> torch.Tensor:
        torch.manual_seed(seeded_generator(self.config.seed, step, 1).initial_seed())  # dropout of this step
        self.optimizer.zero_grad(set_to_none=True)
        parts = self.config.accumulate
        if parts == 1:
            total, count = self._forward(batch)
            loss = total / self._share(count)
            loss.backward()
        else:
            totals, counts = [], 0
            for i in range(parts):
                with self._synchronised(i == parts - 1):
                    total, count = self._forward(batch.rows(i, parts))
                    total.backward()
                totals.append(total.detach().double())
                counts += int(count)
            share = self._share(counts)
            for parameter in self.model.parameters():
                if parameter.grad is not None:
                    parameter.grad.div_(share)
            loss = (torch.stack(totals).sum() / share).float()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.clip)
        self.optimizer.step()
        self.scheduler.step()
        return loss.detach()

    def _forward(self, batch):
        autocast = (
            torch.autocast(self.device.type, dtype=torch.bfloat16)
            if self.config.amp and self.device.type == "cuda"
            else contextlib.nullcontext()
        )
        with autocast:
            return self.runner(batch)

    def _share(self, count) -> float | int | torch.Tensor:
        """``n / world``: the global number of targets over the number of processes (``count`` when alone)."""
        if self.world == 1:
            return count
        count = torch.as_tensor(count, device=self.device, dtype=torch.float64)
        torch.distributed.all_reduce(count)
        return float(count) / self.world

    def _synchronised(self, last: bool):
        """DDP's gradient all-reduce only in the backward pass of the last micro-batch."""
        if last or not hasattr(self.runner, "no_sync"):
            return contextlib.nullcontext()
        return self.runner.no_sync()
