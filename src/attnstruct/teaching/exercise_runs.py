"""The tiny fixed runs and models of the exercises of notebooks 04 to 07: fixed settings, so that an answer
does not change with a notebook's parameters or profile, and a few seconds per run on one thread.

Copy task (04): ``COPY_EXERCISE`` is notebook 04's one-layer model on a small copy task, trained with plain SGD and
half of the tokens masked (settings section 3b of the notebook does not run, so the exercise's outcome is printed
nowhere before it); :func:`copy_exercise_symmetry` trains it under both objectives.

Text (05, 06): ``EXERCISE`` is a 2-layer, 2-head model of width 32 trained 20 steps on 16 sequences of 32 tokens
with a constant learning rate after a short warm-up; :func:`exercise_config` adds the objective, initialisation and
seed, and :func:`exercise_run` trains it (or reuses it) in a folder of its own, as :func:`attnstruct.tasks.text.train`
does. Vision (07): ``VISION_EXERCISE`` is a 2-block, 2-head vision Transformer of width 32 on batches of 4 digit
images (:func:`vision_exercise_config`, :func:`vision_exercise_images`); its exercises train nothing.

Stored quick runs (05): at the course profile a notebook trains one tiny seed, too few for Exercise 05.3's "seed by
seed". ``make course`` ships the quick profile's dataset into the work folder
(:func:`attnstruct.teaching.course_notebooks.ship_quick_data`), and :func:`quick_dataset` hands it to the exercise.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import xarray as xr

from ..tasks import images, text, text_config, toy_tasks, vision_config

QUICK_FOLDER = "quick"  # <work folder>/quick/results/NN_topic.nc: the quick profile's datasets a course ships


def quick_dataset(name: str, own: xr.Dataset) -> xr.Dataset:
    """The quick profile's dataset of notebook ``name`` shipped in the work folder
    (``<work>/quick/results/<name>.nc``), else ``own`` (the notebook's own runs); prints which, with its seeds."""
    from ..results import load_dataset
    from ..work import work_dir

    path = work_dir() / QUICK_FOLDER / "results" / f"{name}.nc"
    if path.is_file():
        stored = load_dataset(path)
        print(f"The quick profile's stored runs, shipped with the course: {stored.sizes.get('seed', 1)} seeds.")
        return stored
    print(f"No quick-profile runs in the work folder: this notebook's own, {own.sizes.get('seed', 1)} seed(s).")
    return own


COPY_EXERCISE = {
    "vocab": 16,
    "seq_len": 8,
    "d_model": 16,
    "steps": 150,
    "batch": 32,
    "optimizer": "sgd",
    "lr": 0.1,
    "mask_rate": 0.5,
    "every": 150,
}
COPY_OBJECTIVES = ("bidirectional", "causal")


def copy_exercise_symmetry(seed: int = 0) -> dict[str, float]:
    """Final symmetry of ``W_qk`` of the copy-task exercise run of ``seed``, ``{objective: score}`` for masked LM
    (``"bidirectional"``) and next-token prediction (``"causal"``): two runs of about a second each."""
    return {
        objective: float(
            toy_tasks.train(toy_tasks.CopyTaskConfig(objective=objective, seed=seed, **COPY_EXERCISE), "copy")[
                "symmetry"
            ][-1]
        )
        for objective in COPY_OBJECTIVES
    }


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


def exercise_config(objective: str, init: str = "bert", seed: int = 0) -> text_config.TextConfig:
    """A tiny exercise run: the settings of ``EXERCISE`` with this objective, initialisation and seed."""
    return text_config.TextConfig(objective=objective, init=init, seed=seed, **EXERCISE)


def exercise_run(config: text_config.TextConfig, folder: str | os.PathLike, cache=None) -> xr.Dataset:
    """Train a tiny run in ``folder/<run name>-<digest>`` (or reuse it there) and return its records over
    ``step`` and ``layer``."""
    return text.train(config, Path(folder) / f"{config.run_name()}-{config.digest()}", cache=cache)


def median_symmetry(run: xr.Dataset) -> np.ndarray:
    """A run's median symmetry over layers at each record step, ``[step]``."""
    return run.symmetry.median("layer").values


def sign_of(change: float) -> int:
    """+1, 0 or -1 (0 for a change below 1e-9 in size)."""
    return 0 if abs(change) < 1e-9 else int(np.sign(change))


def copy_exercise_sign(seed: int = 0) -> int:
    """Exercise 04.4's outcome: the sign of (final symmetry under next-token prediction) minus (final symmetry
    under masked LM) on the copy task, :data:`COPY_EXERCISE` settings."""
    final = copy_exercise_symmetry(seed)
    return sign_of(final["causal"] - final["bidirectional"])


def encoder_change_sign(folder: str | os.PathLike, seed: int = 0, cache=None) -> int:
    """Exercise 05.1's outcome: the sign of the change of a tiny masked-LM encoder's median symmetry over layers,
    from step 0 to its last step (BERT's initialisation, :data:`EXERCISE` settings)."""
    curve = median_symmetry(exercise_run(exercise_config("mlm", init="bert", seed=seed), folder, cache))
    return sign_of(curve[-1] - curve[0])


def symmetric_start_gap_sign(folder: str | os.PathLike, seed: int = 0, cache=None) -> int:
    """Exercise 05.2's outcome: from a symmetric start (``init="symmetric-matched"``), the sign of the encoder's
    final median symmetry minus the decoder's (:data:`EXERCISE` settings)."""
    final = {
        objective: median_symmetry(exercise_run(exercise_config(objective, "symmetric-matched", seed), folder, cache))[
            -1
        ]
        for objective in ("mlm", "next-token")
    }
    return sign_of(final["mlm"] - final["next-token"])


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


def vision_exercise_config(objective: str, seed: int = 0) -> vision_config.VisionConfig:
    """A tiny exercise model of notebook 07: the settings of ``VISION_EXERCISE`` with this objective and seed."""
    return vision_config.VisionConfig(objective=objective, seed=seed, **VISION_EXERCISE)


def vision_exercise_images() -> images.ImageData:
    """The images of ``VISION_EXERCISE`` (its source, count and split)."""
    e = VISION_EXERCISE
    return images.load_images(e["source"], e["n_images"], e["val_fraction"])


def tied_start_change_sign(folder: str | os.PathLike, seed: int = 0, cache=None) -> int:
    """Exercise 06.1's outcome: the sign of the change of a tiny masked-LM encoder's median symmetry over layers
    from a tied start (``init="symmetric-matched"``, every layer at +1) to its last step."""
    curve = median_symmetry(exercise_run(exercise_config("mlm", "symmetric-matched", seed), folder, cache))
    return sign_of(curve[-1] - curve[0])


def scale_confound_sign(folder: str | os.PathLike, seed: int = 0, cache=None) -> int:
    """Exercise 06.2's outcome: the sign of the final median symmetry of the paper's ``symmetric`` encoder minus
    that of the ``symmetric-matched`` one (the same tied start at BERT's scale)."""
    final = {
        init: median_symmetry(exercise_run(exercise_config("mlm", init, seed), folder, cache))[-1]
        for init in ("symmetric", "symmetric-matched")
    }
    return sign_of(final["symmetric"] - final["symmetric-matched"])


SIGN_OUTCOMES = {  # exercise: (its graded outcome as a function of (folder, seed, cache), the solution's answer)
    "05.1": (encoder_change_sign, +1),
    "05.2": (symmetric_start_gap_sign, +1),
    "06.1": (tied_start_change_sign, -1),
    "06.2": (scale_confound_sign, +1),
}
