"""The fields every training run shares (:class:`RunConfig`), checked once, without torch: a task's configuration
subclasses it (:mod:`attnstruct.tasks.text_config`, :mod:`attnstruct.tasks.vision_config`), the loop
(:mod:`attnstruct.training.engine`) trains it, and ``attnstruct train --help`` lists its fields without loading
either."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from ..conventions import DEVICES
from .config import Settings, at_most, non_negative_integer, one_of, positive_integers
from .model_config import ATTENTIONS, TransformerConfig

SCHEDULES = ("constant", "linear", "cosine")
NORMS = ("post", "pre")


def _real(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True)
class RunConfig(Settings):
    """The fields every training run shares, with one validation. Tasks subclass it and add their own.

    The defaults are notebook 05's quick profile (a test checks it);
    :class:`attnstruct.tasks.vision_config.VisionConfig` overrides those that notebook 07 sets otherwise. Subclasses
    name their objectives in ``FIXED["objective"]``, which attend causally in ``CAUSAL``, the fields that tell
    runs apart in ``RUN_KEYS``, check their own fields in :meth:`validate_task`, and name the module of the task's
    code (batches, loss) in ``TASK_MODULE``: it enters the run's reuse key
    (:func:`attnstruct.training.run_folder.code_modules`).

    Fields added after runs were first recorded are named in ``OMITTED_AT_DEFAULT``: at their default they are
    left out of the record (:meth:`to_dict`, hence of the digest and the run folder's name), so a run recorded
    before they existed keeps its folder and its parameters; any other value is recorded.
    """

    TASK_MODULE: ClassVar[str | None] = None  # the module of the task's code, when not the configuration's own
    CAUSAL: ClassVar[Mapping[str, bool]] = {}  # objective: does it attend causally
    RUN_KEYS: ClassVar[tuple[str, ...]] = ("objective", "seed")
    FIXED: ClassVar[Mapping[str, tuple[str, ...]]] = {  # the only values allowed
        "schedule": SCHEDULES,
        "norm": NORMS,
        "attention": ATTENTIONS,
    }
    PER_RUN: ClassVar[tuple[str, ...]] = ("attention",)  # a run's attention normalisation: softmax unless given
    OMITTED_AT_DEFAULT: ClassVar[tuple[str, ...]] = ("accumulate", "compile", "attention")
    LIMITS: ClassVar[Mapping[str, int]] = {  # beyond any run (config.at_most); other integer fields: 2**62
        "steps": 10**9,
        "warmup": 10**9,
        "log_every": 10**9,
        "eval_every": 10**9,
        "checkpoint_every": 10**9,
        "batch_size": 2**20,
        "accumulate": 2**20,
        "d_model": 2**16,
        "n_layers": 2**10,
        "n_heads": 2**16,
    }

    objective: str = ""
    seed: int = 0
    steps: int = 600
    batch_size: int = 64
    lr: float = 0.002
    warmup: int = 100
    schedule: str = "linear"
    weight_decay: float = 0.01
    clip: float = 1.0
    mask_rate: float = 0.15
    log_every: int = 25
    eval_every: int = 25
    checkpoint_every: int = 300
    d_model: int = 64
    n_layers: int = 4
    n_heads: int = 4
    dropout: float = 0.0
    norm: str = "pre"
    attention: str = "softmax"  # TransformerConfig.attention: softmax, sigmoid, softmax-null-slot
    device: str = "cpu"
    amp: bool = False
    accumulate: int = 1  # micro-batches per step: batch_size rows in accumulate parts, one optimiser step
    compile: bool = False  # torch.compile the model and its loss

    def __post_init__(self):
        one_of(self.objective, self.FIXED["objective"], "objective")
        at_most(self, self.LIMITS)
        positive_integers(self, ("steps", "batch_size", "log_every", "eval_every", "checkpoint_every", "accumulate"))
        if self.batch_size % self.accumulate:
            raise ValueError(f"batch_size {self.batch_size} is not divisible into {self.accumulate} micro-batches")
        positive_integers(self, ("d_model", "n_layers", "n_heads"))
        non_negative_integer(self, "seed")
        if self.eval_every % self.log_every:
            raise ValueError(f"eval_every ({self.eval_every}) must be a multiple of log_every ({self.log_every})")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model {self.d_model} is not a multiple of n_heads {self.n_heads}")
        if not (_real(self.lr) and self.lr > 0 and math.isfinite(self.lr)):
            raise ValueError(f"lr must be a positive number, got {self.lr!r}")
        one_of(self.schedule, self.FIXED["schedule"], "schedule")
        if not isinstance(self.warmup, int) or self.warmup < 0:
            raise ValueError(f"warmup must be an integer >= 0, got {self.warmup!r}")
        for name, least in (("clip", "> 0"), ("weight_decay", ">= 0")):
            value = getattr(self, name)
            if not (_real(value) and math.isfinite(value) and (value > 0 if name == "clip" else value >= 0)):
                raise ValueError(f"{name} must be a finite number {least}, got {value!r}")
        if not 0.0 < self.mask_rate < 1.0:
            raise ValueError(f"mask_rate must be in (0, 1), got {self.mask_rate!r}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout!r}")
        one_of(self.norm, self.FIXED["norm"], "norm")
        one_of(self.attention, self.FIXED["attention"], "attention")
        if not isinstance(self.device, str) or self.device.split(":")[0] not in DEVICES:
            raise ValueError(f"device must be 'cpu', 'cuda', 'cuda:N' or 'auto', got {self.device!r}")
        for name in ("amp", "compile"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be true or false, got {getattr(self, name)!r}")
        self.validate_task()

    def to_dict(self) -> dict[str, Any]:
        """The record of the configuration: every field, but those of ``OMITTED_AT_DEFAULT`` at their default."""
        record = super().to_dict()
        defaults = {f.name: f.default for f in fields(self)}
        return {k: v for k, v in record.items() if k not in self.OMITTED_AT_DEFAULT or v != defaults[k]}

    @classmethod
    def run_key_choices(cls) -> dict[str, tuple[str, ...]]:
        """The values each run key with fixed choices takes (``objective``, ``init``), in the order combined runs
        list them."""
        return {key: cls.FIXED[key] for key in cls.RUN_KEYS if key in cls.FIXED}

    def validate_task(self) -> None:
        """The task's own checks (raise ValueError with one line)."""

    @property
    def causal(self) -> bool:
        return self.CAUSAL[self.objective]

    def transformer_config(self, **shape) -> TransformerConfig:
        """The model's :class:`~attnstruct.training.model.TransformerConfig`: this run's width, depth, heads,
        dropout, norm and attention, with the task's ``vocab_size``, ``max_len`` (and ``ffn_mult``) in ``shape``."""
        return TransformerConfig(
            d_model=self.d_model,
            n_layers=self.n_layers,
            n_heads=self.n_heads,
            dropout=self.dropout,
            norm=self.norm,
            attention=self.attention,
            **shape,
        )

    def run_name(self) -> str:
        """The run keys' values joined by ``-`` (``mlm-bert-seed0``), then the attention when it is not softmax
        (``next-token-bert-seed0-sigmoid``), so that runs that differ only in it have their own names."""
        name = "-".join(f"seed{self.seed}" if key == "seed" else str(getattr(self, key)) for key in self.RUN_KEYS)
        return name if self.attention == "softmax" else f"{name}-{self.attention}"
