"""The tiny fixed runs and models of the exercises of notebooks 05, 06 and 07: fixed settings, so that an answer
does not change with a notebook's parameters or profile, and a few seconds per run on one thread.

Text (05, 06): ``EXERCISE`` is a 2-layer, 2-head model of width 32 trained 20 steps on 16 sequences of 32 tokens
with a constant learning rate after a short warm-up; :func:`exercise_config` adds the objective, initialisation and
seed, and :func:`exercise_run` trains it (or reuses it) in a folder of its own, as :func:`attnstruct.tasks.text.train`
does. Vision (07): ``VISION_EXERCISE`` is a 2-block, 2-head vision Transformer of width 32 on batches of 4 digit
images (:func:`vision_exercise_config`, :func:`vision_exercise_images`); its exercises train nothing.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import xarray as xr

from ..tasks import images, text, vision

EXERCISE = {
    "steps": 20,
    "batch_size": 16,
    "seq_len": 32,
    "d_model": 32,
    "n_layers": 2,
    "n_heads": 2,
    "lr": 0.002,
    "warmup": 5,
    "schedule": "constant",
    "weight_decay": 0.01,
    "clip": 1.0,
    "mask_rate": 0.15,
    "dropout": 0.0,
    "norm": "pre",
    "vocab_size": 500,
    "corpus": "shakespeare",
    "val_fraction": 0.05,
    "log_every": 5,
    "eval_every": 20,
    "eval_batches": 1,
    "checkpoint_every": 20,
    "device": "cpu",
    "amp": False,
}


def exercise_config(objective: str, init: str = "bert", seed: int = 0) -> text.TextConfig:
    """A tiny exercise run: the settings of ``EXERCISE`` with this objective, initialisation and seed."""
    return text.TextConfig(objective=objective, init=init, seed=seed, **EXERCISE)


def exercise_run(config: text.TextConfig, folder: str | os.PathLike, cache=None) -> xr.Dataset:
    """Train a tiny run in ``folder/<run name>-<digest>`` (or reuse it there) and return its records over
    ``step`` and ``layer``."""
    return text.train(config, Path(folder) / f"{config.run_name()}-{config.digest()}", cache=cache)


def median_symmetry(run: xr.Dataset) -> np.ndarray:
    """A run's median symmetry over layers at each record step, ``[step]``."""
    return run.symmetry.median("layer").values


def sign_of(change: float) -> int:
    """+1, 0 or -1 (0 for a change below 1e-9 in size)."""
    return 0 if abs(change) < 1e-9 else int(np.sign(change))


VISION_EXERCISE = {
    "steps": 20,
    "batch_size": 4,
    "lr": 0.001,
    "warmup": 5,
    "schedule": "constant",
    "weight_decay": 0.05,
    "clip": 1.0,
    "mask_rate": 0.4,
    "log_every": 20,
    "eval_every": 20,
    "checkpoint_every": 20,
    "d_model": 32,
    "n_layers": 2,
    "n_heads": 2,
    "ffn_mult": 4,
    "norm": "pre",
    "patch_size": 2,
    "levels": 4,
    "dropout": 0.0,
    "source": "sklearn-digits",
    "n_images": 1797,
    "val_fraction": 0.2,
    "device": "cpu",
    "amp": False,
}


def vision_exercise_config(objective: str, seed: int = 0) -> vision.VisionConfig:
    """A tiny exercise model of notebook 07: the settings of ``VISION_EXERCISE`` with this objective and seed."""
    return vision.VisionConfig(objective=objective, seed=seed, **VISION_EXERCISE)


def vision_exercise_images() -> images.ImageData:
    """The images of ``VISION_EXERCISE`` (its source, count and split)."""
    e = VISION_EXERCISE
    return images.load_images(e["source"], e["n_images"], e["val_fraction"])
