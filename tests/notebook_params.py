"""The one set of parameters the tests run the notebooks with: smaller than the quick profile, every cell executed.

The shared build (``conftest.executed_build``), the student versions (``conftest.student_runs``), the stored claim
notebooks (``tests/claims/``, written by ``tests/claims/refresh.py``), the book and the browser tests all use
:func:`parameters`, so each notebook is executed once for all of them. Tests that need other parameters say why
(the paper's shapes in ``params/smoke.yaml``; a bad value in ``test_bad_parameter_fails_without_writing_results``).
"""

from __future__ import annotations

import os
from pathlib import Path

# Training notebooks: one seed (05), two (06, 07: the fewest that give an interval), a few dozen steps.
TRAINING_SMALL = {
    "seeds": [0],
    "steps": 40,
    "batch_size": 8,
    "seq_len": 32,
    "d_model": 32,
    "n_layers": 2,
    "n_heads": 2,
    "warmup": 10,
    "log_every": 10,
    "eval_every": 20,
    "eval_batches": 1,
    "checkpoint_every": 20,
}
SYMMETRIC_INIT_SMALL = {
    **TRAINING_SMALL,
    "seeds": [0, 1],
    "steps": 30,
    "eval_every": 10,
    "checkpoint_every": 30,
    "warmup": 5,
}
TEST_PARAMETERS: dict[str, dict] = {
    "01_bilinear_form": {"d_model": 16, "n_heads": 2, "n_layers": 1, "seq_len": 5, "example_dim": 12},
    "02_scores": {
        "d_models": [16, 32],
        "n_heads": [1, 2],
        "n_draws": 4,
        "num_stds": [1.0, 2.0],
        "sweep_d_model": 32,
        "tying_heads": 2,
        "tying_d_model": 16,
    },
    # 03 and 08 score the packaged checkpoints at the quick profile: they take seconds.
    "04_gradient_structure": {"n_seeds": 1, "steps": 100, "every": 50, "n_sequences": 32, "batch": 16},
    "05_training_dynamics": TRAINING_SMALL,
    "06_symmetric_init": SYMMETRIC_INIT_SMALL,
    "07_vision": {
        "n_seeds": 2,
        "steps": 60,
        "log_every": 20,
        "eval_every": 60,
        "d_model": 32,
        "n_layers": 2,
        "n_heads": 2,
        "batch_size": 16,
        "n_images": 300,
    },
}

# One BLAS/OpenMP thread per kernel and per subprocess: two pytest-xdist workers share the two cores, and the
# stored claims (tests/claims/) were computed with the same setting.
KERNEL_ENVIRONMENT = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def parameters(root: Path, name: str) -> dict:
    """The quick profile of notebook ``name`` with the tests' small values over it."""
    from attnstruct import notebooks

    return {**notebooks.load_profile(root, "quick").get(name, {}), **TEST_PARAMETERS.get(name, {})}


def pin_kernel_threads() -> None:
    """Set :data:`KERNEL_ENVIRONMENT` in this process's environment (kernels and subprocesses inherit it)."""
    os.environ.update(KERNEL_ENVIRONMENT)
