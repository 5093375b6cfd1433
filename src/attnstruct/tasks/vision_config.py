"""The configuration of a vision run (:class:`VisionConfig`), its objectives and image sources, without torch.

The task's code (the model, batches, losses) is :mod:`attnstruct.tasks.vision`, named by
``VisionConfig.TASK_MODULE``, so that a run's reuse key covers it (:func:`attnstruct.training.run_folder.code_modules`);
``attnstruct train --task vision --help`` reads the fields here without loading it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..training.config import one_of, positive_integers
from ..training.model_config import TransformerConfig
from ..training.run_config import RunConfig

OBJECTIVES = ("classify", "classify-mean", "masked", "next-patch")
CAUSAL = {"classify": False, "classify-mean": False, "masked": False, "next-patch": True}
SOURCES = ("synthetic-digits", "sklearn-digits")  # the image sets of attnstruct.tasks.images
IMAGE_SIZE = 8  # pixels of an image's side


@dataclass(frozen=True)
class VisionConfig(RunConfig):
    """Everything that determines a vision run. Defaults: notebook 07's quick profile (the shared fields of
    :class:`attnstruct.training.run_config.RunConfig` that notebook 07 sets otherwise are overridden here)."""

    KIND: ClassVar[str] = "vision training"
    TASK_MODULE: ClassVar[str] = "attnstruct.tasks.vision"  # its batches and loss: in the run's reuse key
    CAUSAL: ClassVar[dict[str, bool]] = CAUSAL
    FIXED: ClassVar[dict[str, tuple[str, ...]]] = {**RunConfig.FIXED, "objective": OBJECTIVES, "source": SOURCES}

    objective: str = "classify"
    steps: int = 800
    batch_size: int = 32
    lr: float = 0.001
    warmup: int = 100
    schedule: str = "cosine"
    log_every: int = 50
    eval_every: int = 250
    checkpoint_every: int = 500
    weight_decay: float = 0.05
    mask_rate: float = 0.4
    d_model: int = 64
    norm: str = "pre"
    ffn_mult: int = 4
    patch_size: int = 2
    levels: int = 4
    source: str = "sklearn-digits"
    n_images: int = 1797
    val_fraction: float = 0.2

    def validate_task(self) -> None:
        one_of(self.source, self.FIXED["source"], "image source")
        positive_integers(self, ("ffn_mult", "patch_size"))
        if IMAGE_SIZE % self.patch_size:
            raise ValueError(f"patch_size {self.patch_size} does not divide the image size {IMAGE_SIZE}")
        if not isinstance(self.levels, int) or isinstance(self.levels, bool) or not 2 <= self.levels <= 17:
            raise ValueError(f"levels must be an integer in [2, 17], got {self.levels!r}")
        if not 0.0 < self.val_fraction < 1.0:
            raise ValueError(f"val_fraction must be in (0, 1), got {self.val_fraction!r}")
        if not isinstance(self.n_images, int) or self.n_images < 20:
            raise ValueError(f"n_images must be an integer >= 20, got {self.n_images!r}")

    @property
    def n_patches(self) -> int:
        return (IMAGE_SIZE // self.patch_size) ** 2

    def model_config(self) -> TransformerConfig:
        # vocab_size is unused: the Encoder takes embeddings
        return self.transformer_config(vocab_size=1, max_len=self.n_patches + 1, ffn_mult=self.ffn_mult)
