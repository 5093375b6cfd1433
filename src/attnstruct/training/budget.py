"""What a training run costs: its FLOPs per token, a timed optimiser step, the utilisation and a projected time.

**FLOPs per token** (:func:`flops_per_token`): a matrix product ``[m, k] @ [k, n]`` costs ``2 m k n`` FLOPs, and a
training step costs three forward passes (the backward pass computes the gradients of both operands of every
product: twice the forward), the usual accounting (Kaplan et al. 2020, section 2.1; the PaLM paper's appendix B).
Per token of a sequence of ``T`` tokens, in a model of width ``d``, ``L`` layers and an FFN ``f d`` wide, the
forward pass costs

* ``2 (4 d^2 + 2 f d^2)`` per layer for the query, key, value and output projections and the two FFN matrices;
* ``2 (2 T d)`` per layer for attention's ``Q K^T`` and ``A V`` over the whole sequence (the causal mask is
  not subtracted, as fused kernels do not skip the masked half either);
* ``2 (d^2 + d V)`` for the language-model head (its dense transform and the tied decoder to ``V`` tokens), but
  only on the share ``head_fraction`` of positions that carry a loss (the masked LM's selected positions).

Left out: layer norms, softmax, GELU, dropout, embedding look-ups and the optimiser, each linear in ``d`` per
token. **Model-FLOPs utilisation** (:func:`mfu`) is these FLOPs per second over the device's dense bf16 peak
(:data:`PEAK_BF16_FLOPS`, from the vendors' data sheets, without sparsity); None where the peak is not known, as
on a CPU.

**A timed step** (:func:`time_steps`): the task's own model, optimiser and :class:`~attnstruct.training.step.Step`
(micro-batches, autocast, ``torch.compile`` as the configuration says) on the task's own batches; ``warmup`` steps
first (a compiled model compiles in them), then ``steps`` timed ones, CUDA synchronised before each reading of
the clock. The global random state is the same after it as before.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ..devices import resolve_device
from .step import Step, build_optimizer, runner, transfer

PEAK_BF16_FLOPS = {  # dense bf16 tensor-core peak, FLOP/s, by a part of the name torch reports (first match wins)
    "H200": 989e12,  # also the GH200
    "H100 PCIe": 756e12,
    "H100 NVL": 835e12,
    "H100": 989e12,
    "A100": 312e12,
    "L40S": 362e12,
    "L4": 121e12,
    "A10G": 70e12,
    "RTX 4090": 165e12,
    "V100": 125e12,  # fp16: the V100 has no bf16
}


def flops_per_token(model_config, seq_len: int, head_fraction: float = 1.0) -> float:
    """Training FLOPs per token (module docstring) of a model of ``model_config``
    (:class:`~attnstruct.training.model_config.TransformerConfig`: ``d_model``, ``n_layers``, ``ffn_mult``,
    ``vocab_size``) on sequences of ``seq_len`` tokens, the head on ``head_fraction`` of the positions."""
    if not 0.0 <= head_fraction <= 1.0:
        raise ValueError(f"head_fraction must be in [0, 1], got {head_fraction!r}")
    d, layers, wide = model_config.d_model, model_config.n_layers, model_config.ffn_mult
    per_layer = 2 * (4 * d * d + 2 * wide * d * d) + 2 * (2 * seq_len * d)
    head = 2 * (d * d + d * model_config.vocab_size)
    return 3.0 * (layers * per_layer + head_fraction * head)


def peak_flops(device) -> float | None:
    """The dense bf16 peak of ``device`` (a CUDA device or its name), or None (a CPU, an unknown GPU)."""
    if isinstance(device, str) and device.split(":")[0] in ("cpu", "cuda", "auto"):
        device = resolve_device(device)
    if isinstance(device, torch.device):
        if device.type != "cuda":
            return None
        device = torch.cuda.get_device_name(device)
    return next((peak for part, peak in PEAK_BF16_FLOPS.items() if part in str(device)), None)


def mfu(flops_per_token: float, tokens_per_second: float, peak: float | None) -> float | None:
    """Model-FLOPs utilisation ``flops_per_token * tokens_per_second / peak``, or None without a peak."""
    return None if not peak else flops_per_token * tokens_per_second / peak


@dataclass(frozen=True)
class StepTiming:
    """Seconds per optimiser step (the median of the timed ones), the tokens of a step, the first (warm-up) steps'
    seconds together (compilation shows there), and the device."""

    seconds: float
    tokens: int
    warmup_seconds: float
    device: str

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds


def _synchronise(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_steps(task, device="auto", steps: int = 3, warmup: int = 1) -> StepTiming:
    """Time ``steps`` optimiser steps of ``task`` (an :class:`~attnstruct.training.engine.Task`) after ``warmup``
    untimed ones, on ``device`` (module docstring)."""
    if steps < 1 or warmup < 0:
        raise ValueError(f"steps must be positive and warmup not negative, got {steps} and {warmup}")
    device = resolve_device(device)
    config = task.config
    task.prepare()
    with torch.random.fork_rng(devices=[device.index or 0] if device.type == "cuda" else []):
        model = task.build_model().to(device)
        optimizer, scheduler = build_optimizer(config, model)
        step_once = Step(runner(task, model, config, device, 1), model, optimizer, scheduler, config, device, 1)
        model.train()
        seconds, start = [], time.perf_counter()
        for step in range(1, warmup + steps + 1):
            if step == warmup + 1:
                _synchronise(device)
                warmup_seconds = time.perf_counter() - start
            batch = transfer(task.batch(step), device)
            _synchronise(device)
            begin = time.perf_counter()
            step_once(batch, step)
            _synchronise(device)
            if step > warmup:
                seconds.append(time.perf_counter() - begin)
    return StepTiming(
        seconds=statistics.median(seconds),
        tokens=config.batch_size * config.seq_len,
        warmup_seconds=warmup_seconds,
        device=torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
    )


def project(step_seconds: float, steps: int, runs: int, parallel: int = 1) -> float:
    """Seconds for ``runs`` runs of ``steps`` steps, ``parallel`` of them side by side at ``step_seconds`` each:
    ``ceil(runs / parallel) * steps * step_seconds`` (:func:`project_runs` of equal runs)."""
    if min(steps, runs, parallel) < 1 or step_seconds < 0:
        raise ValueError("steps, runs and parallel must be positive and step_seconds not negative")
    return project_runs([steps * step_seconds] * runs, parallel)


def project_runs(run_seconds: Sequence[float], parallel: int = 1) -> float:
    """Seconds for runs of ``run_seconds`` each, ``parallel`` of them side by side, longest first: the sum of the
    longest run of each round of ``parallel`` (side by side on one device, each run is slower than alone: this is
    the fastest such a plan can be)."""
    if parallel < 1 or not run_seconds or min(run_seconds) < 0:
        raise ValueError("parallel must be positive, and the runs' seconds given and not negative")
    return sum(sorted(run_seconds, reverse=True)[::parallel])


def duration(seconds: float) -> str:
    """A duration in words a reader takes in at once: ``42 s``, ``7 min 05 s``, ``1 h 23 min``, ``3.2 d``."""
    if seconds < 60:
        return f"{seconds:.0f} s" if seconds >= 9.5 else f"{seconds:.1f} s"
    if round(seconds) < 3600:
        minutes, rest = divmod(round(seconds), 60)
        return f"{minutes} min {rest:02d} s"
    if seconds < 2 * 86400:
        hours, rest = divmod(round(seconds / 60), 60)
        return f"{hours} h {rest:02d} min"
    return f"{seconds / 86400:.1f} d"
