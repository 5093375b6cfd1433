"""The tiny text runs of the exercises of notebooks 05 and 06: fixed settings, so that an answer does not change
with a notebook's parameters or profile, and a few seconds per run on one thread.

``EXERCISE`` is a 2-layer, 2-head model of width 32 trained 20 steps on 16 sequences of 32 tokens with a constant
learning rate after a short warm-up; :func:`exercise_config` adds the objective, initialisation and seed, and
:func:`exercise_run` trains it (or reuses it) in a folder of its own, as :func:`attnstruct.text.train` does.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import xarray as xr

from . import text

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
