"""The images of notebook 07: 8x8 grey-level digits, their fixed train/validation split, patches and targets.

Sources: ``"sklearn-digits"`` (default) is scikit-learn's ``load_digits`` (1,797 handwritten digits, 8x8 pixels,
17 grey levels, shipped inside the scikit-learn wheel). ``"synthetic-digits"`` renders the digits 0-9 from a 5x7
bitmap font with a random affine distortion, stroke width, contrast and noise, at the same size and grey levels.
The image set and its train/validation split are fixed (:data:`DATA_SEED`), whatever the run's seed.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch
from torch.nn import functional as F

from ..training.config import one_of
from .vision_config import IMAGE_SIZE, SOURCES

DATA_SEED = 20250215  # the image set and its split are the same for every run
GREY_LEVELS = 16  # load_digits stores 0..16; the synthetic images are quantised the same way


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
    one_of(source, SOURCES, "image source")
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction!r}")
    generator = torch.Generator().manual_seed(DATA_SEED)
    if source == "synthetic-digits":
        images, labels = synthetic_digits(n_images, generator)
        label = f"synthetic-digits ({n_images} rendered 8x8 digits, attnstruct.tasks.images.synthetic_digits)"
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
