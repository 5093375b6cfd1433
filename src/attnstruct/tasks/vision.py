"""A small vision Transformer trained four ways on 8x8 digit images, logging the scores of ``W_qk``.

The vision counterpart of :mod:`attnstruct.tasks.text` (the paper's vision models, section 4: encoders such as ViT,
BEiT and DINO score symmetric, the autoregressive iGPT does not). One architecture, one image set
(:mod:`attnstruct.tasks.images`), one initialisation; only the objective (and with it the attention mask) differs:

* ``"classify"``: supervised classification from a ``[CLS]`` token, bidirectional attention (as ViT, DeiT). The
  loss reads the last layer's output at position 0 only, so in the last layer one query (``[CLS]``) carries
  the gradient of ``W_qk`` (:mod:`attnstruct.analyses.nb07_vision` says what the theory predicts from that);
* ``"classify-mean"``: the same classification from the mean of all ``1 + n_patches`` outputs of the last layer
  (global average pooling, as ViT-GAP variants), bidirectional: the loss reaches every token's output;
* ``"masked"``: masked patch prediction, bidirectional attention (as BEiT, MAE). A ``mask_rate`` share of
  the patches (at least one per image) is replaced by a learned ``[MASK]`` embedding; the loss is the
  cross-entropy of the masked patches' pixels, quantised to ``levels`` grey levels (BEiT predicts discrete
  tokens);
* ``"next-patch"``: next-patch prediction with a causal mask (as iGPT; ``patch_size=1`` is iGPT's
  next-pixel task). Position 0 holds a start token, position ``t`` sees the patches before patch ``t`` and
  predicts patch ``t``'s quantised pixels.

The model is :class:`attnstruct.training.model.Encoder` (pre-LN blocks, as ViT, BEiT and iGPT) over a linear
patch embedding, with one learned token at position 0 that serves as ``[CLS]`` (``classify``) or start of
image (the others; ``classify-mean`` pools it with the patches) and a head for the objective. The sequence is
the same ``1 + n_patches`` long in all four, and the trunk (patch embedding, special tokens, encoder) is
initialised from the seed alone, so that runs with the same seed start from the same weights.

The loop is :func:`attnstruct.training.engine.train`: the batch of step ``s`` (images, masks) is a pure function of
``(seed, s)``, so a run is a pure function of its :class:`VisionConfig` (on a CPU, with a fixed number of
threads).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import torch
import xarray as xr
from torch import nn
from torch.nn import functional as F

from ..training import engine
from ..training import processes as many_runs
from ..training.model import Encoder, init_bert_
from .images import ImageData, load_images, patchify, quantise
from .vision_config import CAUSAL, VisionConfig

CLASSIFIERS = ("classify", "classify-mean")  # objectives with a 10-class head
DESCRIPTIONS = {
    "classify": "supervised classification from [CLS], bidirectional (as ViT, DeiT)",
    "classify-mean": "supervised classification from the mean of all tokens, bidirectional (as ViT with pooling)",
    "masked": "masked patch prediction, bidirectional (as BEiT, MAE)",
    "next-patch": "next-patch prediction, causal (as iGPT)",
}
VAL_SEED = 20250216  # the validation masks are the same at every evaluation
_HEAD_STREAMS = ("classify", "masked", "next-patch", "classify-mean")  # the head's seed offset (added last)


# ---------------------------------------------------------------------------------------------- the model


class VisionTransformer(nn.Module):
    """Patch embedding, a special token at position 0, :class:`Encoder`, and the objective's head.

    ``hidden(patches [B, T, p*p], mask [B, T] | None, causal) -> [B, 1 + T, d_model]``; the patches are pixel
    values in [0, 1]. ``head`` maps hidden states to 10 class logits (``classify``, ``classify-mean``) or
    ``p*p*levels`` pixel-level logits (``masked``, ``next-patch``).
    """

    def __init__(self, config: VisionConfig, n_classes: int = 10):
        super().__init__()
        d = config.d_model
        self.objective = config.objective
        self.patch_dim = config.patch_size**2
        self.levels = config.levels
        self.patch = nn.Linear(self.patch_dim, d)
        self.special = nn.Parameter(torch.zeros(d))  # [CLS] (classify) or start of image (the others)
        self.mask_token = nn.Parameter(torch.zeros(d))  # [MASK]; only the masked objective uses it
        self.encoder = Encoder(config.model_config())
        n_out = n_classes if config.objective in CLASSIFIERS else self.patch_dim * config.levels
        self.head_transform = nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.LayerNorm(d, eps=1e-12))
        self.head_out = nn.Linear(d, n_out)
        self._initialise(config)

    def _initialise(self, config: VisionConfig) -> None:
        """BERT's initialisation: everything but the last linear layer from ``seed`` alone (the same for every
        objective), then that layer, whose shape depends on the objective. The global RNG is not reseeded."""
        std = 0.02
        trunk = torch.Generator().manual_seed(config.seed)
        head = torch.Generator().manual_seed(config.seed * 1_000_003 + 1 + _HEAD_STREAMS.index(config.objective))
        with torch.no_grad():
            for module in (self.patch, self.encoder, self.head_transform):
                module.apply(lambda m: init_bert_(m, std, trunk))
            self.special.normal_(0.0, std, generator=trunk)
            self.mask_token.normal_(0.0, std, generator=trunk)
            self.head_out.apply(lambda m: init_bert_(m, std, head))

    def hidden(self, patches: torch.Tensor, mask: torch.Tensor | None, causal: bool) -> torch.Tensor:
        if patches.ndim != 3 or patches.shape[-1] != self.patch_dim:
            raise ValueError(f"patches must be [batch, n_patches, {self.patch_dim}], got shape {tuple(patches.shape)}")
        x = self.patch(2.0 * patches - 1.0)
        if mask is not None:
            x = torch.where(mask[..., None], self.mask_token.to(x.dtype), x)
        start = self.special.to(x.dtype).expand(len(x), 1, -1)
        return self.encoder(torch.cat([start, x], 1), causal)

    def head(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.head_out(self.head_transform(hidden))

    def forward(self, patches: torch.Tensor, mask: torch.Tensor | None = None, causal: bool = False) -> torch.Tensor:
        return self.head(self.hidden(patches, mask, causal))


def build_model(config: VisionConfig, n_classes: int = 10) -> VisionTransformer:
    """The model of a run; its trunk depends on ``config.seed`` only, and the global RNG is left as it was (the
    modules' own construction draws from it before :meth:`VisionTransformer._initialise` overwrites them)."""
    with torch.random.fork_rng(devices=[]):
        return VisionTransformer(config, n_classes)


# ---------------------------------------------------------------------------------------------- batches and losses


@dataclass(frozen=True)
class Batch:
    """Patches ``[B, T, p*p]`` in [0, 1], labels ``[B]`` and the masked patches ``[B, T]`` (bool, or None)."""

    patches: torch.Tensor
    labels: torch.Tensor
    mask: torch.Tensor | None

    def rows(self, start: int, step: int) -> Batch:
        """The images ``start::step`` (one process's share of a global batch)."""
        if step == 1:
            return self
        mask = self.mask[start::step] if self.mask is not None else None
        return Batch(self.patches[start::step], self.labels[start::step], mask)

    def to(self, device) -> Batch:
        mask = self.mask.to(device) if self.mask is not None else None
        return Batch(self.patches.to(device), self.labels.to(device), mask)


def random_patch_mask(batch: int, n_patches: int, rate: float, generator: torch.Generator) -> torch.Tensor:
    """Each patch masked with probability ``rate``, at least one per image: ``[batch, n_patches]`` bool."""
    draws = torch.rand(batch, n_patches, generator=generator)
    mask = draws < rate
    mask[torch.arange(batch), draws.argmin(1)] = True
    return mask


def make_batch(config: VisionConfig, images: torch.Tensor, labels: torch.Tensor, generator: torch.Generator) -> Batch:
    """Patches of ``images`` (and a patch mask for the masked objective), drawing the mask from ``generator``."""
    patches = patchify(images, config.patch_size)
    mask = None
    if config.objective == "masked":
        mask = random_patch_mask(len(patches), patches.shape[1], config.mask_rate, generator)
    return Batch(patches, labels, mask)


def training_batch(config: VisionConfig, data: ImageData, step: int) -> Batch:
    """The batch of ``step``: ``batch_size`` training images drawn with replacement, a pure function of
    ``(seed, step)``."""
    generator = engine.seeded_generator(config.seed, step)
    index = torch.randint(0, len(data.train_images), (config.batch_size,), generator=generator)
    return make_batch(config, data.train_images[index], data.train_labels[index], generator)


def validation_batches(config: VisionConfig, data: ImageData, size: int = 512) -> list[Batch]:
    """All validation images in batches of ``size``, with masks fixed by :data:`VAL_SEED`."""
    generator = engine.seeded_generator(VAL_SEED)
    return [
        make_batch(config, data.val_images[i : i + size], data.val_labels[i : i + size], generator)
        for i in range(0, len(data.val_images), size)
    ]


def logits_and_targets(model: VisionTransformer, batch: Batch, objective: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The objective's logits ``[n, classes or levels]`` and targets ``[n]`` for a batch."""
    causal = CAUSAL[objective]
    hidden = model.hidden(batch.patches, batch.mask, causal)
    if objective == "classify":  # the last layer's output at position 0 only
        return model.head(hidden[:, 0]), batch.labels
    if objective == "classify-mean":  # the mean of every position's output
        return model.head(hidden.mean(1)), batch.labels
    targets = quantise(batch.patches, model.levels)  # [B, T, p*p]
    if objective == "masked":
        logits = model.head(hidden[:, 1:][batch.mask])
        targets = targets[batch.mask]
    else:  # next-patch: position t (the start token, then patches < t) predicts patch t
        logits = model.head(hidden[:, :-1])
    return logits.reshape(-1, model.levels), targets.reshape(-1)


def summed_loss(model: VisionTransformer, batch: Batch, objective: str) -> tuple[torch.Tensor, int]:
    """Sum of the objective's cross-entropies over the batch's targets, and their number."""
    logits, targets = logits_and_targets(model, batch, objective)
    return F.cross_entropy(logits.float(), targets, reduction="sum"), len(targets)


def accuracy(model: VisionTransformer, batches: Sequence[Batch], device, objective: str = "classify") -> float:
    """Share of images whose class logit (from ``[CLS]`` or the mean of the tokens, by ``objective``) is highest
    for the right digit, in evaluation mode."""
    if objective not in CLASSIFIERS:
        raise ValueError(f"accuracy needs a classification objective ({', '.join(CLASSIFIERS)}), got {objective!r}")
    correct, count = 0, 0
    with engine.evaluation_mode(model):
        for batch in batches:
            logits, targets = logits_and_targets(model, batch.to(device), objective)
            correct += int((logits.argmax(-1) == targets).sum())
            count += len(targets)
    return correct / count


# ---------------------------------------------------------------------------------------------- the task


class VisionTask:
    """The engine's task for one vision run (:class:`attnstruct.training.engine.Task`)."""

    EVALUATIONS: ClassVar[dict[str, str]] = {
        "val_loss": "mean loss per target on the validation images (NaN between evaluations)",
        "val_accuracy": "classification accuracy on the validation images (classify and classify-mean only)",
    }

    def __init__(self, config: VisionConfig):
        self.config = config

    def __getstate__(self) -> dict:  # a spawned worker draws the (fixed) validation batches itself
        return {"config": self.config}

    @property
    def data(self) -> ImageData:
        return load_images(self.config.source, self.config.n_images, self.config.val_fraction)

    @functools.cached_property
    def validation(self) -> list[Batch]:
        return validation_batches(self.config, self.data)

    def prepare(self) -> None:
        self.data  # noqa: B018  (a bad source fails here, before any process starts)

    def build_model(self) -> VisionTransformer:
        return build_model(self.config, self.data.n_classes)

    def batch(self, step: int) -> Batch:
        return training_batch(self.config, self.data, step)

    def loss(self, model: VisionTransformer, batch: Batch) -> tuple[torch.Tensor, int]:
        return summed_loss(model, batch, self.config.objective)

    def evaluate(self, model: VisionTransformer, device) -> dict[str, float]:
        values = {"val_loss": engine.mean_loss(self, model, self.validation, device), "val_accuracy": float("nan")}
        if self.config.objective in CLASSIFIERS:
            values["val_accuracy"] = accuracy(model, self.validation, device, self.config.objective)
        return values

    def attrs(self) -> dict:
        data = self.data
        split = f"{len(data.train_images)} train / {len(data.val_images)} validation"
        return {"images": data.source, "images_split": split}


def train(config: VisionConfig, run_dir: str | os.PathLike | None = None, *, progress=False, callback=None):
    """:func:`attnstruct.training.engine.train` of one :class:`VisionTask` (in memory without ``run_dir``)."""
    return engine.train(VisionTask(config), run_dir, progress=progress, callback=callback)


def train_many(
    configs: Sequence[VisionConfig],
    out_dir: str | os.PathLike | None = None,
    *,
    workers: int = 2,
    threads_per_worker: int = 1,
    progress: bool = True,
) -> xr.Dataset:
    """:func:`attnstruct.training.processes.train_many` of one :class:`VisionTask` per configuration."""
    tasks = [VisionTask(config) for config in configs]
    return many_runs.train_many(
        tasks, out_dir, workers=workers, threads_per_worker=threads_per_worker, progress=progress
    )


def combine(runs: Sequence[xr.Dataset]) -> xr.Dataset:
    """:func:`attnstruct.training.processes.combine` for vision runs (dims ``objective``, ``seed``, ``step``, ...)."""
    return many_runs.combine(runs, VisionConfig)


# ---------------------------------------------------------------------------------------------- summaries
