"""A small vision Transformer trained three ways on 8x8 digit images, logging the scores of ``W_qk``.

The vision counterpart of :mod:`attnstruct.training` (``paper-digest.md`` section 4.4: vision encoders such as
ViT, BEiT and DINO score symmetric, the autoregressive iGPT does not). One architecture, one data set, one
initialisation; only the objective (and with it the attention mask) differs:

* ``"classify"``: supervised classification from a ``[CLS]`` token, bidirectional attention (as ViT, DeiT);
* ``"masked"``: masked patch prediction, bidirectional attention (as BEiT, MAE). A ``mask_rate`` share of
  the patches (at least one per image) is replaced by a learned ``[MASK]`` embedding; the loss is the
  cross-entropy of the masked patches' pixels, quantised to ``levels`` grey levels (BEiT predicts discrete
  tokens);
* ``"next-patch"``: next-patch prediction with a causal mask (as iGPT; ``patch_size=1`` is iGPT's
  next-pixel task). Position 0 holds a start token, position ``t`` sees the patches before patch ``t`` and
  predicts patch ``t``'s quantised pixels.

The model is :class:`attnstruct.transformer.Encoder` (pre-LN blocks, as ViT, BEiT and iGPT) over a linear
patch embedding, with one learned token at position 0 that serves as ``[CLS]`` (classification) or start of
image (the other two objectives) and a head for the objective. The sequence is the same ``1 + n_patches``
long in all three, and the trunk (patch embedding, special tokens, encoder) is initialised from the seed alone,
so that runs with the same seed start from the same weights.

Images: ``"sklearn-digits"`` (default) is scikit-learn's ``load_digits`` (1,797 handwritten digits, 8x8 pixels,
17 grey levels, shipped inside the scikit-learn wheel). ``"synthetic-digits"`` renders the digits 0-9 from a 5x7
bitmap font with a random affine distortion, stroke width, contrast and noise, at the same size and grey levels.
The image set and its train/validation split are fixed (:data:`DATA_SEED`), whatever the run's seed.

Reproducibility: the batch of step ``s`` (images, masks, dropout) is drawn from generators seeded with
``(seed, s)`` only, so a run is a pure function of its :class:`VisionConfig` (on a CPU, with a fixed number of
threads). :func:`train_many` runs several configurations side by side in spawned processes of one thread each.
"""

from __future__ import annotations

import functools
import json
import math
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import xarray as xr
from torch import nn
from torch.nn import functional as F

from . import results
from .training import Records, config_from_dict, record_scores, run_in_processes, seeded_generator
from .transformer import Encoder, TransformerConfig, count_parameters, init_bert_

OBJECTIVES = ("classify", "masked", "next-patch")
CAUSAL = {"classify": False, "masked": False, "next-patch": True}
DESCRIPTIONS = {
    "classify": "supervised classification from [CLS], bidirectional (as ViT, DeiT)",
    "masked": "masked patch prediction, bidirectional (as BEiT, MAE)",
    "next-patch": "next-patch prediction, causal (as iGPT)",
}
SOURCES = ("synthetic-digits", "sklearn-digits")
DATA_SEED = 20250215  # the image set and its split are the same for every run
VAL_SEED = 20250216  # the validation masks are the same at every evaluation
IMAGE_SIZE = 8
GREY_LEVELS = 16  # load_digits stores 0..16; the synthetic images are quantised the same way


# ---------------------------------------------------------------------------------------------- configuration


@dataclass(frozen=True)
class VisionConfig:
    """Everything that determines a run. Defaults: the quick profile of notebook 07."""

    objective: str = "classify"
    seed: int = 0
    steps: int = 1500
    batch_size: int = 64
    lr: float = 1e-3
    warmup: int = 100
    weight_decay: float = 0.05
    clip: float = 1.0
    mask_rate: float = 0.4
    log_every: int = 50
    eval_every: int = 250
    d_model: int = 64
    n_layers: int = 4
    n_heads: int = 4
    ffn_mult: int = 4
    dropout: float = 0.0
    norm: str = "pre"
    patch_size: int = 2
    levels: int = 4
    source: str = "sklearn-digits"
    n_images: int = 1797
    val_fraction: float = 0.2
    device: str = "cpu"

    def __post_init__(self):
        if self.objective not in OBJECTIVES:
            raise ValueError(f"unknown objective {self.objective!r}; choose one of {', '.join(OBJECTIVES)}")
        if self.source not in SOURCES:
            raise ValueError(f"unknown image source {self.source!r}; choose one of {', '.join(SOURCES)}")
        for name in (
            "steps",
            "batch_size",
            "log_every",
            "eval_every",
            "d_model",
            "n_layers",
            "n_heads",
            "ffn_mult",
            "patch_size",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool) or self.seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {self.seed!r}")
        if self.eval_every % self.log_every:
            raise ValueError(f"eval_every ({self.eval_every}) must be a multiple of log_every ({self.log_every})")
        if IMAGE_SIZE % self.patch_size:
            raise ValueError(f"patch_size {self.patch_size} does not divide the image size {IMAGE_SIZE}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model {self.d_model} is not a multiple of n_heads {self.n_heads}")
        if not isinstance(self.levels, int) or isinstance(self.levels, bool) or not 2 <= self.levels <= 17:
            raise ValueError(f"levels must be an integer in [2, 17], got {self.levels!r}")
        if not 0.0 < self.mask_rate < 1.0:
            raise ValueError(f"mask_rate must be in (0, 1), got {self.mask_rate!r}")
        if not 0.0 < self.val_fraction < 1.0:
            raise ValueError(f"val_fraction must be in (0, 1), got {self.val_fraction!r}")
        if not (isinstance(self.lr, (int, float)) and self.lr > 0 and math.isfinite(self.lr)):
            raise ValueError(f"lr must be a positive number, got {self.lr!r}")
        if not isinstance(self.n_images, int) or self.n_images < 20:
            raise ValueError(f"n_images must be an integer >= 20, got {self.n_images!r}")
        if self.warmup < 0 or self.clip <= 0 or self.weight_decay < 0:
            raise ValueError("warmup and weight_decay must be >= 0 and clip > 0")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout!r}")
        if self.norm not in ("pre", "post"):
            raise ValueError(f"norm must be 'pre' or 'post', got {self.norm!r}")

    @property
    def causal(self) -> bool:
        return CAUSAL[self.objective]

    @property
    def n_patches(self) -> int:
        return (IMAGE_SIZE // self.patch_size) ** 2

    def model_config(self) -> TransformerConfig:
        return TransformerConfig(
            vocab_size=1,  # unused: the Encoder takes embeddings
            max_len=self.n_patches + 1,
            d_model=self.d_model,
            n_layers=self.n_layers,
            n_heads=self.n_heads,
            ffn_mult=self.ffn_mult,
            dropout=self.dropout,
            norm=self.norm,
        )

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> VisionConfig:
        return config_from_dict(cls, values, "vision training")

    def run_name(self) -> str:
        return f"{self.objective}-seed{self.seed}"


# ---------------------------------------------------------------------------------------------- images

_FONT = {  # 5x7 bitmap digits
    0: (".###.", "#...#", "#..##", "#.#.#", "##..#", "#...#", ".###."),
    1: ("..#..", ".##..", "..#..", "..#..", "..#..", "..#..", ".###."),
    2: (".###.", "#...#", "....#", "...#.", "..#..", ".#...", "#####"),
    3: ("#####", "...#.", "..#..", "...#.", "....#", "#...#", ".###."),
    4: ("...#.", "..##.", ".#.#.", "#..#.", "#####", "...#.", "...#."),
    5: ("#####", "#....", "####.", "....#", "....#", "#...#", ".###."),
    6: ("..##.", ".#...", "#....", "####.", "#...#", "#...#", ".###."),
    7: ("#####", "....#", "...#.", "..#..", ".#...", ".#...", ".#..."),
    8: (".###.", "#...#", "#...#", ".###.", "#...#", "#...#", ".###."),
    9: (".###.", "#...#", "#...#", ".####", "....#", "...#.", ".##.."),
}


def _glyphs(supersample: int = 4) -> torch.Tensor:
    """The ten digits at ``supersample`` times 8x8 resolution, centred: ``[10, 1, 8s, 8s]`` in {0, 1}."""
    glyphs = torch.tensor([[[c == "#" for c in row] for row in _FONT[d]] for d in range(10)], dtype=torch.float32)
    big = glyphs.repeat_interleave(supersample, 1).repeat_interleave(supersample, 2)  # [10, 7s, 5s]
    size = IMAGE_SIZE * supersample
    top, left = (size - big.shape[1]) // 2, (size - big.shape[2]) // 2
    canvas = torch.zeros(10, 1, size, size)
    canvas[:, 0, top : top + big.shape[1], left : left + big.shape[2]] = big
    return canvas


def synthetic_digits(n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` rendered digits ``[n, 8, 8]`` in ``[0, 1]`` (17 grey levels) and their labels ``[n]``.

    Each image is a bitmap digit under a random affine map (rotation up to 15 degrees, scale 0.8-1.05 with
    separate aspect, shear up to 0.25, shift up to one pixel), drawn at 4x resolution, thickened or thinned
    at random, averaged down to 8x8, with random contrast (0.7-1) and Gaussian noise (std 0.04).
    """
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    supersample = 4
    labels = torch.arange(n) % 10
    labels = labels[torch.randperm(n, generator=generator)]
    u = lambda low, high: low + (high - low) * torch.rand(n, generator=generator)  # noqa: E731
    angle = u(-15, 15) * math.pi / 180
    scale = u(0.8, 1.05)
    aspect = u(0.85, 1.15)
    shear = u(-0.25, 0.25)
    shift = torch.stack([u(-0.25, 0.25), u(-0.25, 0.25)], 1)  # in units of half the image: 1 pixel = 0.25
    cos, sin = torch.cos(angle), torch.sin(angle)
    rotation = torch.stack([torch.stack([cos, -sin], 1), torch.stack([sin, cos], 1)], 1)
    shape = torch.stack(
        [torch.stack([scale * aspect, scale * shear], 1), torch.stack([torch.zeros(n), scale / aspect], 1)], 1
    )
    forward = rotation @ shape  # glyph coordinates -> image coordinates; grid_sample needs the inverse
    inverse = torch.linalg.inv(forward)
    theta = torch.cat([inverse, -(inverse @ shift[:, :, None])], 2)
    size = IMAGE_SIZE * supersample
    grid = F.affine_grid(theta, [n, 1, size, size], align_corners=False)
    drawn = F.grid_sample(_glyphs(supersample)[labels], grid, mode="bilinear", align_corners=False)
    stroke = torch.randint(0, 3, (n,), generator=generator)  # 0 thin, 1 as drawn, 2 thick
    thick = F.max_pool2d(drawn, 3, 1, 1)
    thin = -F.max_pool2d(-drawn, 3, 1, 1)
    drawn = torch.where((stroke == 2)[:, None, None, None], thick, drawn)
    drawn = torch.where((stroke == 0)[:, None, None, None], thin, drawn)
    small = F.avg_pool2d(drawn, supersample)[:, 0]  # [n, 8, 8]
    small = small / small.amax((1, 2), keepdim=True).clamp_min(1e-6) * u(0.7, 1.0)[:, None, None]
    small = small + 0.04 * torch.randn(small.shape, generator=generator)
    return (small.clamp(0, 1) * GREY_LEVELS).round() / GREY_LEVELS, labels


@dataclass(frozen=True)
class ImageData:
    """A fixed image set split into training and validation images (``[N, 8, 8]`` in [0, 1]) and labels."""

    train_images: torch.Tensor
    train_labels: torch.Tensor
    val_images: torch.Tensor
    val_labels: torch.Tensor
    source: str
    n_classes: int = 10


@functools.lru_cache(maxsize=8)
def load_images(source: str = "sklearn-digits", n_images: int = 1797, val_fraction: float = 0.2) -> ImageData:
    """The image set of ``source`` and its train/validation split, both fixed by :data:`DATA_SEED`.

    ``n_images`` is used by the synthetic source only (``load_digits`` has 1,797 images).
    """
    if source not in SOURCES:
        raise ValueError(f"unknown image source {source!r}; choose one of {', '.join(SOURCES)}")
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction!r}")
    generator = torch.Generator().manual_seed(DATA_SEED)
    if source == "synthetic-digits":
        images, labels = synthetic_digits(n_images, generator)
        label = f"synthetic-digits ({n_images} rendered 8x8 digits, attnstruct.vision.synthetic_digits)"
    else:
        try:
            from sklearn.datasets import load_digits
        except ImportError:
            raise ValueError("source 'sklearn-digits' needs scikit-learn, which is not installed") from None
        digits = load_digits()
        images = torch.tensor(digits.images, dtype=torch.float32) / GREY_LEVELS
        labels = torch.tensor(digits.target, dtype=torch.long)
        label = "sklearn-digits (sklearn.datasets.load_digits, 1797 8x8 images)"
    order = torch.randperm(len(images), generator=generator)
    n_val = max(1, round(len(images) * val_fraction))
    val, train = order[:n_val], order[n_val:]
    return ImageData(images[train], labels[train], images[val], labels[val], label)


def patchify(images: torch.Tensor, patch_size: int) -> torch.Tensor:
    """``[B, H, W]`` -> ``[B, (H/p)(W/p), p*p]``: non-overlapping patches in raster order, pixels row-major."""
    if images.ndim != 3:
        raise ValueError(f"images must be [batch, height, width], got shape {tuple(images.shape)}")
    batch, height, width = images.shape
    p = patch_size
    if not isinstance(p, int) or p < 1 or height % p or width % p:
        raise ValueError(f"patch_size {p!r} does not divide the image size {height}x{width}")
    return images.reshape(batch, height // p, p, width // p, p).permute(0, 1, 3, 2, 4).reshape(batch, -1, p * p)


def unpatchify(patches: torch.Tensor, patch_size: int, height: int, width: int) -> torch.Tensor:
    """The inverse of :func:`patchify`: ``[B, (H/p)(W/p), p*p]`` -> ``[B, H, W]``."""
    p = patch_size
    if not isinstance(p, int) or p < 1 or height % p or width % p:
        raise ValueError(f"patch_size {p!r} does not divide the image size {height}x{width}")
    expected = ((height // p) * (width // p), p * p)
    if patches.ndim != 3 or tuple(patches.shape[1:]) != expected:
        raise ValueError(f"patches must be [batch, {expected[0]}, {expected[1]}], got shape {tuple(patches.shape)}")
    batch = patches.shape[0]
    return patches.reshape(batch, height // p, width // p, p, p).permute(0, 1, 3, 2, 4).reshape(batch, height, width)


def quantise(values: torch.Tensor, levels: int) -> torch.Tensor:
    """Pixel values in ``[0, 1]`` -> integer levels ``0 .. levels-1`` (equal-width bins), the targets of the
    masked and next-patch objectives."""
    if not isinstance(levels, int) or levels < 2:
        raise ValueError(f"levels must be an integer >= 2, got {levels!r}")
    return (values * levels).floor().clamp(0, levels - 1).long()


# ---------------------------------------------------------------------------------------------- the model


class VisionTransformer(nn.Module):
    """Patch embedding, a special token at position 0, :class:`Encoder`, and the objective's head.

    ``hidden(patches [B, T, p*p], mask [B, T] | None, causal) -> [B, 1 + T, d_model]``; the patches are pixel
    values in [0, 1]. ``head`` maps hidden states to 10 class logits (``classify``) or ``p*p*levels`` pixel-level
    logits (``masked``, ``next-patch``).
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
        n_out = n_classes if config.objective == "classify" else self.patch_dim * config.levels
        self.head_transform = nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.LayerNorm(d, eps=1e-12))
        self.head_out = nn.Linear(d, n_out)
        self._initialise(config)

    def _initialise(self, config: VisionConfig) -> None:
        """BERT's initialisation: everything but the last linear layer from ``seed`` alone (the same for every
        objective), then that layer, whose shape depends on the objective."""
        std = 0.02
        with torch.no_grad():
            torch.manual_seed(config.seed)
            for module in (self.patch, self.encoder, self.head_transform):
                module.apply(lambda m: init_bert_(m, std))
            self.special.normal_(0.0, std)
            self.mask_token.normal_(0.0, std)
            torch.manual_seed(config.seed * 1_000_003 + 1 + OBJECTIVES.index(config.objective))
            self.head_out.apply(lambda m: init_bert_(m, std))

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
    """The model of a run; its trunk depends on ``config.seed`` only."""
    return VisionTransformer(config, n_classes)


# ---------------------------------------------------------------------------------------------- batches and losses


@dataclass(frozen=True)
class Batch:
    """Patches ``[B, T, p*p]`` in [0, 1], labels ``[B]`` and the masked patches ``[B, T]`` (bool, or None)."""

    patches: torch.Tensor
    labels: torch.Tensor
    mask: torch.Tensor | None

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
    generator = seeded_generator(config.seed, step)
    index = torch.randint(0, len(data.train_images), (config.batch_size,), generator=generator)
    return make_batch(config, data.train_images[index], data.train_labels[index], generator)


def validation_batches(config: VisionConfig, data: ImageData, size: int = 512) -> list[Batch]:
    """All validation images in batches of ``size``, with masks fixed by :data:`VAL_SEED`."""
    generator = seeded_generator(VAL_SEED)
    return [
        make_batch(config, data.val_images[i : i + size], data.val_labels[i : i + size], generator)
        for i in range(0, len(data.val_images), size)
    ]


def logits_and_targets(model: VisionTransformer, batch: Batch, objective: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The objective's logits ``[n, classes or levels]`` and targets ``[n]`` for a batch."""
    causal = CAUSAL[objective]
    hidden = model.hidden(batch.patches, batch.mask, causal)
    if objective == "classify":
        return model.head(hidden[:, 0]), batch.labels
    targets = quantise(batch.patches, model.levels)  # [B, T, p*p]
    if objective == "masked":
        logits = model.head(hidden[:, 1:][batch.mask])
        targets = targets[batch.mask]
    else:  # next-patch: position t (the start token, then patches < t) predicts patch t
        logits = model.head(hidden[:, :-1])
    return logits.reshape(-1, model.levels), targets.reshape(-1)


def batch_loss(model: VisionTransformer, batch: Batch, objective: str) -> torch.Tensor:
    """Mean cross-entropy of the objective over the batch's targets."""
    logits, targets = logits_and_targets(model, batch, objective)
    return F.cross_entropy(logits.float(), targets)


@torch.no_grad()
def evaluate(model: VisionTransformer, config: VisionConfig, batches: Sequence[Batch], device) -> tuple[float, float]:
    """Mean validation loss per target and, for ``classify``, accuracy (NaN otherwise)."""
    was_training = model.training
    model.eval()
    total, correct, count = 0.0, 0, 0
    for batch in batches:
        logits, targets = logits_and_targets(model, batch.to(device), config.objective)
        total += float(F.cross_entropy(logits.float(), targets, reduction="sum"))
        correct += int((logits.argmax(-1) == targets).sum())
        count += len(targets)
    model.train(was_training)
    accuracy = correct / count if config.objective == "classify" else float("nan")
    return total / count, accuracy


def build_optimizer(config: VisionConfig, model: nn.Module):
    """AdamW (no weight decay on biases, LayerNorm and the special tokens), linear warm-up then cosine decay to 0."""
    decay, no_decay = [], []
    for name, parameter in model.named_parameters():
        (no_decay if parameter.ndim < 2 or "norm" in name else decay).append(parameter)
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=config.lr,
    )

    def factor(step: int) -> float:
        if step < config.warmup:
            return (step + 1) / config.warmup
        progress = (step - config.warmup) / max(1, config.steps - config.warmup)
        return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))

    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


# ---------------------------------------------------------------------------------------------- one run


def to_dataset(config: VisionConfig, records: Records, accuracy: list[float], data: ImageData, n_params: int):
    """One run's records as a dataset with dims ``step``, ``layer``, ``head`` (float64)."""
    ds = records.to_dataset(config.n_layers, config.n_heads)
    ds["val_accuracy"] = ("step", np.asarray(accuracy, dtype=float))
    ds["val_loss"].attrs["long_name"] = "mean loss per target on the validation images (NaN between evaluations)"
    ds["val_accuracy"].attrs["long_name"] = "classification accuracy on the validation images (classify only)"
    ds.attrs.update(
        results.provenance_attrs(
            parameters=config.to_dict(),
            scored_matrix="W_qk = sum_h W_q^h^T W_k^h per layer (and per head), nn.Linear layout, biases left out",
            objective=config.objective,
            seed=config.seed,
            images=data.source,
            images_split=f"{len(data.train_images)} train / {len(data.val_images)} validation",
            n_params=n_params,
        )
    )
    return ds


def train(
    config: VisionConfig,
    run_dir: str | os.PathLike | None = None,
    *,
    progress: bool = False,
    callback: Callable[[int, nn.Module], None] | None = None,
) -> xr.Dataset:
    """Train one run and return its dataset; with ``run_dir``, save it as ``run_dir/run.nc`` (atomically) and
    return that file's dataset instead of training again when it holds the same parameters.

    ``callback(step, model)`` is called after every optimiser step (the tests use it).
    """
    final = Path(run_dir) / "run.nc" if run_dir is not None else None
    if final is not None and final.is_file():
        done = results.load_dataset(final)
        if json.loads(done.attrs["parameters"]) == config.to_dict():
            return done
        raise ValueError(f"{final} holds a run with other parameters; remove it or choose another folder")
    if config.device == "auto":
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        device = torch.device(config.device)
    data = load_images(config.source, config.n_images, config.val_fraction)
    model = build_model(config, data.n_classes).to(device)
    optimizer, scheduler = build_optimizer(config, model)
    val_batches = validation_batches(config, data)
    records, accuracy = Records(), []

    def log(step: int, train_loss: float) -> None:
        records.step.append(step)
        record_scores(model, records)
        records.train_loss.append(train_loss)
        records.lr.append(float(scheduler.get_last_lr()[0]))
        if step % config.eval_every == 0 or step == config.steps:
            loss, acc = evaluate(model, config, val_batches, device)
        else:
            loss, acc = float("nan"), float("nan")
        records.val_loss.append(loss)
        accuracy.append(acc)

    log(0, float("nan"))
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=config.steps, desc=config.run_name(), unit="step", file=sys.stderr)
    running = torch.zeros((), device=device)
    model.train()
    for step in range(1, config.steps + 1):
        batch = training_batch(config, data, step).to(device)
        torch.manual_seed(seeded_generator(config.seed, step, 1).initial_seed())  # dropout of this step
        loss = batch_loss(model, batch, config.objective)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.clip)
        optimizer.step()
        scheduler.step()
        running += loss.detach()
        if callback is not None:
            callback(step, model)
        if step % config.log_every == 0 or step == config.steps:
            since = step - records.step[-1]
            log(step, float(running) / since)
            running.zero_()
            if bar is not None:
                bar.set_postfix(
                    loss=f"{records.train_loss[-1]:.3f}", sym=f"{np.median(records.symmetry_layer[-1]):+.2f}"
                )
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    ds = to_dataset(config, records, accuracy, data, count_parameters(model))
    if final is not None:
        results.save_dataset(ds, final)
    return ds


# ---------------------------------------------------------------------------------------------- many runs


def _train_in_worker(config_dict: dict, run_dir: str | None) -> xr.Dataset:
    return train(VisionConfig(**config_dict), run_dir)


def train_many(
    configs: Sequence[VisionConfig],
    out_dir: str | os.PathLike | None = None,
    *,
    workers: int = 2,
    threads_per_worker: int = 1,
    progress: bool = True,
) -> xr.Dataset:
    """Train several runs side by side in ``workers`` spawned processes of ``threads_per_worker`` threads each,
    and :func:`combine` them. With ``out_dir``, run ``r`` is saved to (and reused from) ``out_dir/<run_name>/``.
    ``workers=1`` trains in this process, one run after the other.
    """
    if not configs:
        raise ValueError("no runs to train")
    names = [c.run_name() for c in configs]
    if len(set(names)) != len(names):
        raise ValueError("two runs have the same objective and seed")
    for c in configs:
        load_images(c.source, c.n_images, c.val_fraction)  # a bad source fails here, before any process starts
    dirs = [str(Path(out_dir) / name) if out_dir is not None else None for name in names]
    if workers == 1:
        runs = [train(c, d, progress=progress) for c, d in zip(configs, dirs)]
    else:
        arguments = [(c.to_dict(), d) for c, d in zip(configs, dirs)]
        runs = run_in_processes(_train_in_worker, arguments, workers, threads_per_worker, progress)
    return combine(runs)


def combine(runs: Sequence[xr.Dataset]) -> xr.Dataset:
    """Stack runs into one dataset with dims ``objective``, ``seed``, ``step``, ``layer``, ``head``.

    The runs must share the step grid and the model shape. Objectives keep the order of :data:`OBJECTIVES`.
    The attrs keep the first run's provenance; ``runs`` lists every run's parameters (JSON).
    """
    if not runs:
        raise ValueError("no runs to combine")
    keyed = [ds.expand_dims(objective=[ds.attrs["objective"]], seed=[int(ds.attrs["seed"])]) for ds in runs]
    merged = xr.combine_by_coords([ds.drop_attrs() for ds in keyed], combine_attrs="drop")
    present = [o for o in OBJECTIVES if o in merged.objective.values]
    merged = merged.sel(objective=present)
    merged = merged.assign_coords(causal=("objective", [CAUSAL[o] for o in present]))
    first = dict(runs[0].attrs)
    for key in ("objective", "seed", "parameters", "created"):
        first.pop(key, None)
    merged.attrs.update(first)
    merged.attrs["runs"] = json.dumps([json.loads(ds.attrs["parameters"]) for ds in runs], sort_keys=True)
    merged.attrs["parameters"] = merged.attrs["runs"]
    merged.attrs["created"] = max(ds.attrs["created"] for ds in runs)
    return merged


# ---------------------------------------------------------------------------------------------- summaries


def final_summary(ds: xr.Dataset, last: int = 1) -> pd.DataFrame:
    """Per objective and seed: median and quartiles over layers of the scores at the last ``last`` records
    (averaged over those records), the final validation loss and accuracy."""
    tail = ds.isel(step=slice(-last, None)).mean("step")
    rows = []
    for objective in ds.objective.values:
        for seed in ds.seed.values:
            cell = tail.sel(objective=objective, seed=seed)
            row = {"objective": str(objective), "seed": int(seed), "causal": CAUSAL[str(objective)]}
            for var in ("symmetry", "directionality"):
                values = cell[var].values
                row[f"{var}_median"] = float(np.median(values))
                row[f"{var}_q25"], row[f"{var}_q75"] = (float(q) for q in np.percentile(values, [25, 75]))
            final = ds.sel(objective=objective, seed=seed).isel(step=-1)
            row["val_loss"] = float(final["val_loss"])
            row["val_accuracy"] = float(final["val_accuracy"])
            rows.append(row)
    return pd.DataFrame(rows)


def compare_objectives(summary: pd.DataFrame) -> tuple[bool, str]:
    """Whether every bidirectional run ends with a higher median symmetry than every causal run, and plain
    sentences saying so: overall, then for each bidirectional objective, with the ranges over seeds."""
    bidirectional = summary[~summary.causal]
    causal = summary[summary.causal]
    if bidirectional.empty or causal.empty:
        raise ValueError("the comparison needs at least one bidirectional and one causal objective")
    highest = causal.symmetry_median.max()
    n_seeds = summary.seed.nunique()

    def spread(rows: pd.DataFrame) -> str:
        low, high = rows.symmetry_median.min(), rows.symmetry_median.max()
        return f"{low:+.3f}" if len(rows) == 1 else f"{low:+.3f} to {high:+.3f}"

    causal_names = " and ".join(causal.objective.unique())
    ranges = "; ".join(f"{name} {spread(group)}" for name, group in summary.groupby("objective", sort=False))
    ordered = bool(bidirectional.symmetry_median.min() > highest)
    seeds = f"{n_seeds} seed{'s' * (n_seeds > 1)}"
    if ordered:
        lines = [f"Yes: every bidirectional run ends more symmetric than every {causal_names} run ({seeds})."]
    else:
        below = int((bidirectional.symmetry_median <= highest).sum())
        lines = [
            f"No: the bidirectional runs do not all end more symmetric than the {causal_names} runs ({seeds}); "
            f"{below} of {len(bidirectional)} bidirectional runs end at or below the most symmetric {causal_names} run."
        ]
    for name, group in bidirectional.groupby("objective", sort=False):
        below = int((group.symmetry_median <= highest).sum())
        if below:
            lines.append(f"  {name}: {below} of {len(group)} runs at or below the most symmetric {causal_names} run.")
        else:
            lines.append(f"  {name}: every run above every {causal_names} run.")
    lines.append(f"Final median symmetry over layers, range over seeds: {ranges}.")
    return ordered, "\n".join(lines)


# The authors' vision models grouped by how they were trained (the reference table's names).
REPORTED_GROUPS = (
    ("supervised (ViT, DeiT)", "classify", ("google/vit-", "facebook/deit-")),
    ("masked image modelling (BEiT, MAE, DiT)", "masked", ("microsoft/beit-", "facebook/vit-mae-", "microsoft/dit-")),
    ("autoregressive (iGPT)", "next-patch", ("openai/imagegpt-",)),
    ("other encoders (DINO, DINOv2, GIT, DETR)", None, ("facebook/dino", "microsoft/git-", "facebook/detr-")),
)


def reported_vision(reference: pd.DataFrame) -> pd.DataFrame:
    """The vision rows of the authors' reported table without caveats, with a ``group`` and the matching
    ``objective`` of this module (None for encoders trained otherwise). These are the paper's numbers."""
    vision = reference[(reference.family == "vision") & reference.caveats.isna()].copy()
    group, objective = [], []
    for model in vision.model:
        match = next((g for g in REPORTED_GROUPS if model.startswith(g[2])), ("other", None, ()))
        group.append(match[0])
        objective.append(match[1])
    vision["group"], vision["objective"] = group, objective
    return vision.reset_index(drop=True)


def score_local_checkpoints(entries: Sequence) -> xr.Dataset | None:
    """Scores of local checkpoints (``pretrained.combine`` of ``pretrained.score_checkpoint``), None if none.

    Each entry is a checkpoint path (named after its folder) or a ``[name, path]`` pair; any source that
    :func:`attnstruct.extract.iter_blocks` reads works (for vision: ViT, DeiT, BEiT, DINOv2, ViT-MAE folders).
    The role is ``decoder`` if any block is causal, else ``encoder``. Nothing is downloaded.
    """
    from . import pretrained
    from .extract import iter_blocks

    if isinstance(entries, (str, os.PathLike)):
        raise ValueError("local_models must be a list of paths or [name, path] pairs, not one path")
    scored = []
    for entry in entries:
        if isinstance(entry, (list, tuple)) and len(entry) == 2:
            name, path = str(entry[0]), Path(entry[1])
        elif isinstance(entry, (str, os.PathLike)):
            name, path = Path(entry).name, Path(entry)
        else:
            raise ValueError(f"a local model must be a path or a [name, path] pair, got {entry!r}")
        blocks = list(iter_blocks(path))
        role = "decoder" if any(b.causal for b in blocks) else "encoder"
        scored.append(pretrained.score_checkpoint(path, name=name, role=role, blocks=blocks))
    names = [ds.model.item() for ds in scored]
    if len(set(names)) != len(names):
        raise ValueError(f"two local models have the same name: {names}; name them with [name, path] pairs")
    return pretrained.combine(scored) if scored else None
