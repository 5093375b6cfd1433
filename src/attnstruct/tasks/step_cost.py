"""What the text runs of a notebook will cost, said before any of them starts.

:func:`measure` times one optimiser step of a :class:`~attnstruct.tasks.text_config.TextConfig` on a device
(:func:`attnstruct.training.budget.time_steps`: the configuration's micro-batches, autocast and compilation) with
uniform random token ids of the run's vocabulary, so the paper's shapes can be timed before their corpus is
prepared, and :func:`describe_cost` turns the timing into the lines a notebook prints: the tokens of each run, the
passes over the training tokens, the step time with its tokens per second and model-FLOPs utilisation, and the
projected time of every run. Each run's step time is the timed one scaled by the ratio of their FLOPs per token
(:func:`attnstruct.training.budget.flops_per_token`), so runs of other objectives or shapes are not taken at the
timed one's cost.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ..report.prose import count
from ..training import budget
from . import plays_and_text_files, text, text_config


@dataclass(frozen=True)
class RandomTokens:
    """Uniform random token ids standing in for a corpus (``train`` and ``val``: int64 ``[n]``), with the
    vocabulary, the mask id and the range of BERT's random replacements that batches need."""

    train: torch.Tensor
    val: torch.Tensor
    vocab_size: int
    mask_id: int

    @classmethod
    def draw(cls, vocab_size: int, mask_id: int | None, length: int, seed: int = 0) -> RandomTokens:
        generator = torch.Generator().manual_seed(seed)
        ids = torch.randint(0, vocab_size, (2 * length,), generator=generator)
        return cls(ids[:length], ids[length:], vocab_size, vocab_size - 1 if mask_id is None else mask_id)

    @property
    def random_tokens(self) -> tuple[int, int]:
        """``[low, high)`` of BERT's random replacements: the whole vocabulary (there are no special tokens)."""
        return 0, self.vocab_size

    @property
    def source(self) -> str:
        return f"uniform random ids of a {self.vocab_size:,}-token vocabulary"

    def unigram_entropy(self) -> float:
        """``-sum_v p_v log p_v`` (nats) of the training ids: close to ``log vocab_size`` when ``train`` is much
        longer than the vocabulary, lower otherwise (ids never drawn contribute 0)."""
        return plays_and_text_files.unigram_entropy(self.train, self.vocab_size)


class RandomTokenTask(text.TextTask):
    """A :class:`~attnstruct.tasks.text.TextTask` whose corpus is :class:`RandomTokens`: the same model, batches,
    masking and loss, for timing only."""

    def __init__(self, config: text_config.TextConfig, vocab_size: int, mask_id: int | None):
        super().__init__(dataclasses.replace(config, init_from=None))
        self.vocab_size, self.mask_id = vocab_size, mask_id

    @functools.cached_property
    def data(self) -> RandomTokens:
        return RandomTokens.draw(self.vocab_size, self.mask_id, 4 * (self.config.seq_len + 1))


def measure(
    config: text_config.TextConfig, device, vocab_size: int, mask_id: int | None, *, steps: int = 1, warmup: int = 1
) -> budget.StepTiming:
    """One optimiser step of ``config`` (the median of ``steps``, after ``warmup``) on ``device``, with random ids of
    a ``vocab_size`` vocabulary."""
    return budget.time_steps(RandomTokenTask(config, vocab_size, mask_id), device, steps=steps, warmup=warmup)


def flops_per_token(config: text_config.TextConfig, vocab_size: int) -> float:
    """Training FLOPs per token of a run of ``config`` with a ``vocab_size`` vocabulary: the language-model head on
    every position for next-token prediction, on the ``mask_rate`` share of them for the masked objectives."""
    head = 1.0 if config.objective == "next-token" else config.mask_rate
    return budget.flops_per_token(config.model_config(vocab_size), config.seq_len, head)


def describe_cost(
    configs: Sequence[text_config.TextConfig],
    timing: budget.StepTiming,
    vocab_size: int,
    train_tokens: int | None = None,
    parallel: int = 1,
) -> list[str]:
    """The cost lines of ``configs`` (module docstring); ``timing`` is :func:`measure` of ``configs[0]``,
    ``vocab_size`` the model's vocabulary, ``train_tokens`` the corpus's training tokens (None: not prepared yet),
    ``parallel`` the runs trained side by side."""
    if not configs or parallel < 1:
        raise ValueError(f"no runs to cost, or fewer than one side by side ({len(configs)} runs, {parallel})")
    first = configs[0]
    tokens = [c.steps * c.batch_size * c.seq_len for c in configs]
    lines = [
        f"each run: {first.steps:,} steps x {first.batch_size:,} sequences x {first.seq_len:,} tokens = "
        f"{tokens[0]:,} tokens"
        + ("" if len(set(tokens)) == 1 else f" (the runs differ: {sum(tokens):,} tokens in all)"),
    ]
    if train_tokens:
        lines.append(f"passes over the {train_tokens:,} training tokens: {tokens[0] / train_tokens:,.2f} per run")
    else:
        lines.append("passes over the training tokens: not known until the corpus is prepared")
    flops = flops_per_token(first, vocab_size)
    utilisation = budget.mfu(flops, timing.tokens_per_second, budget.peak_flops(timing.device))
    unknown = f"not known (no peak FLOP/s known for {timing.device})"
    lines += [
        f"one optimiser step timed on {timing.device}: {budget.duration(timing.seconds)}",
        f"tokens per second: {timing.tokens_per_second:,.0f}",
        f"training FLOPs per token: {flops / 1e6:,.1f} million",
        f"model-FLOPs utilisation: {unknown if utilisation is None else f'{utilisation:.0%}'}",
    ]
    seconds = [timing.seconds * flops_per_token(c, vocab_size) / flops * c.steps for c in configs]
    rounds = -(-len(configs) // parallel)
    projected = budget.project_runs(seconds, parallel)
    side_by_side = min(parallel, len(configs))
    lines.append(
        f"projected: {count(len(configs), 'run')}, {side_by_side} side by side ({rounds} after one another): "
        f"{budget.duration(projected)} at that step time"
    )
    return lines
