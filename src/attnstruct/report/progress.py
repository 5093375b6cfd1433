"""Progress bars that a batch run can switch off: ``TQDM_DISABLE=1`` wins over a caller's ``progress=True``.

tqdm lets the environment override only the arguments a caller leaves out; the package passes ``disable``
explicitly, so :func:`bar_disabled` folds the variable in. The pipeline sets it for the kernels of executed notebooks,
so a stored notebook holds no bar: a static page (HTML, the course book) could not draw a widget offline.
"""

from __future__ import annotations

import os

OFF = {"1", "true", "yes", "on"}


def bar_disabled(progress: bool) -> bool:
    """``disable=`` for tqdm: true when the caller asked for no bar or ``TQDM_DISABLE`` is set (1/true/yes/on)."""
    return not progress or os.environ.get("TQDM_DISABLE", "").strip().lower() in OFF
