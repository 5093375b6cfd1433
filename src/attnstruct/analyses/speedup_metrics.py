"""The speed-up metrics of notebook 06: the paper's, a robust one, and the paper's reported values.

The paper's claim (section 4, the symmetric-initialisation table): a symmetric initialisation lets encoders
reach the baseline's final loss up to 73% sooner. Its metric, reproduced by :func:`paper_speedup`:

1. take the baseline's *last logged training loss* (no smoothing);
2. find the first logged row where the treated run's training loss is below it;
3. speed-up ``= 1 - index / n_rows`` (0-based index; their rows are logged every 200 steps, 1000 rows, so row
   ``index`` is step ``200 (index + 1)``).

If the treated run never gets below, the authors' ``idxmax`` returns 0 and their notebook prints 100%; here the
result is NaN.

:func:`robust_speedup` uses held-out loss and smoothing instead: the first step at which the treated run's
smoothed validation loss reaches the baseline's final smoothed validation loss, as a fraction of the run,
``1 - step / steps``. Both return NaN when the level is never reached; a negative value is not possible (at the
last step the speed-up is 0 if the level is reached exactly there).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import reference
from ..report import prose


def _finite_series(steps, values, what: str) -> tuple[np.ndarray, np.ndarray]:
    steps, values = np.asarray(steps, dtype=float), np.asarray(values, dtype=float)
    if steps.shape != values.shape or steps.ndim != 1:
        raise ValueError(
            f"{what}: steps and values must be 1-D of the same length, got {steps.shape} and {values.shape}"
        )
    keep = np.isfinite(values)
    steps, values = steps[keep], values[keep]
    if len(values) == 0:
        raise ValueError(f"{what}: no finite values")
    if np.any(np.diff(steps) <= 0):
        raise ValueError(f"{what}: steps must increase")
    return steps, values


def trailing_mean(values, window: int) -> np.ndarray:
    """Mean of each value and the ``window - 1`` before it (fewer at the start): ``[n] -> [n]``."""
    if not isinstance(window, int) or window < 1:
        raise ValueError(f"window must be a positive integer, got {window!r}")
    values = np.asarray(values, dtype=float)
    sums = np.cumsum(np.insert(values, 0, 0.0))
    index = np.arange(1, len(values) + 1)
    start = np.maximum(index - window, 0)
    return (sums[index] - sums[start]) / (index - start)


def robust_speedup(steps, treated, baseline, total_steps: int, window: int = 3) -> tuple[float, float]:
    """``(speed-up, step)``: first step where the treated smoothed loss <= the baseline's final smoothed loss.

    Args:
        steps: ``[n]`` the steps of the evaluations (NaN losses between evaluations are dropped).
        treated, baseline: ``[n]`` validation losses of the two runs at those steps.
        total_steps: length of the run; the speed-up is ``1 - step / total_steps``.
        window: evaluations in the trailing mean.

    Returns ``(nan, nan)`` if the treated run never reaches the level.
    """
    steps_t, treated = _finite_series(steps, treated, "treated")
    steps_b, baseline = _finite_series(steps, baseline, "baseline")
    target = trailing_mean(baseline, window)[-1]
    reached = np.nonzero(trailing_mean(treated, window) <= target)[0]
    if len(reached) == 0:
        return float("nan"), float("nan")
    step = float(steps_t[reached[0]])
    return 1.0 - step / total_steps, step


def paper_speedup(treated, baseline) -> float:
    """The authors' metric on logged training losses ``[n]`` of both runs (same logging grid); NaN if never reached.

    ``1 - i / n`` with ``i`` the first 0-based index where ``treated < baseline[-1]``; rows with NaN loss (step 0)
    are dropped first.
    """
    treated = np.asarray(treated, dtype=float)
    baseline = np.asarray(baseline, dtype=float)
    if treated.shape != baseline.shape or treated.ndim != 1:
        raise ValueError("treated and baseline must be 1-D logs of the same length")
    keep = np.isfinite(treated) & np.isfinite(baseline)
    treated, baseline = treated[keep], baseline[keep]
    if len(treated) == 0:
        raise ValueError("no finite training losses")
    below = np.nonzero(treated < baseline[-1])[0]
    if len(below) == 0:
        return float("nan")
    return 1.0 - below[0] / len(treated)


def describe_reported(table: pd.DataFrame | None = None) -> str:
    """The paper's speed-ups of its encoders (:func:`reported`), 4-layer then 12-layer, and the datasets on which
    the symmetric run never reached the baseline's final loss."""
    table = reference.symmetric_init() if table is None else table
    encoders = table[table["mode"] == "encoder"]
    four, twelve = (encoders[encoders.n_layers == n] for n in (4, 12))
    never = twelve[twelve.speedup.isna()]

    def listed(rows: pd.DataFrame) -> str:
        return ", ".join(f"{prose.percent(r.speedup, 1)} ({r.dataset})" for r in rows.itertuples())

    tail = (
        f", and none on {', '.join(never.dataset)}: that symmetric run ended above the baseline's final loss "
        "(the authors' notebook printed it as a speed-up of 100%)."
        if len(never)
        else "."
    )
    return (
        "**The paper's speed-ups** (authors' result files, their rule on the training loss, one seed each): 4-layer "
        f"encoders {listed(four)}; 12-layer encoders {listed(twelve.dropna(subset=['speedup']))}{tail}"
    )
