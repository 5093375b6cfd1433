"""The one set of parameters the tests run the notebooks with: the course profile (``params/course.yaml``), smaller
than the quick profile, every cell executed, and what students and nbgrader's autograding run.

The shared build (``conftest.executed_build``), the student versions (``conftest.student_runs``), the stored claim
notebooks (``tests/claims/``, written by ``tests/claims/refresh.py``), the book and the browser tests all use
:func:`parameters`, so each notebook is executed once for all of them. Tests that need other parameters say why
(the paper's shapes in ``params/smoke.yaml``; a bad value in ``test_bad_parameter_fails_without_writing_results``).
"""

from __future__ import annotations

import os
from pathlib import Path

COURSE_PROFILE = "course"  # params/course.yaml: what students and nbgrader run, a minute or so per notebook

# One BLAS/OpenMP thread per kernel and per subprocess: two pytest-xdist workers share the two cores, and the
# stored claims (tests/claims/) were computed with the same setting.
KERNEL_ENVIRONMENT = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def parameters(root: Path, name: str) -> dict:
    """The quick profile of notebook ``name`` with the course profile's small values over it."""
    from attnstruct import notebooks

    quick, course = (notebooks.load_profile(root, profile).get(name, {}) for profile in ("quick", COURSE_PROFILE))
    return {**quick, **course}


def pin_kernel_threads() -> None:
    """Set :data:`KERNEL_ENVIRONMENT` in this process's environment (kernels and subprocesses inherit it)."""
    os.environ.update(KERNEL_ENVIRONMENT)
