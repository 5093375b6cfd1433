"""Readings of one layer matrix that a figure draws: mirror pairs, the diagonal, outlying norms (notebooks 01, 03).

:func:`mirror_correlation` is what a mirror-pairs panel shows for symmetry (:func:`attnstruct.report.plotting.
mirror_pairs`), :func:`diagonal_share` the part of the matrix that is its own mirror, and :func:`outlying_norms` the
column and row norms that directionality weighs (:func:`attnstruct.scores.row_column_excess`), which a norm profile
draws (:func:`attnstruct.report.plotting.norm_profile`).
"""

from __future__ import annotations

import numpy as np

from ..conventions import DEFAULT_NUM_STD
from ..scores import row_column_excess


def mirror_correlation(m) -> float:
    """Pearson correlation of the off-diagonal entries ``M[i, j]`` (``i < j``) with their mirrors ``M[j, i]``; ``m``
    ``[d, d]``. +1 for a symmetric matrix, -1 for a skew-symmetric one, near 0 for an unstructured one (what
    :func:`attnstruct.report.plotting.mirror_pairs` draws)."""
    m = np.asarray(m, dtype=float)
    upper = np.triu_indices(len(m), 1)
    return float(np.corrcoef(m[upper], m.T[upper])[0, 1])


def diagonal_share(m) -> float:
    """``sum_i M_ii^2 / ||M||_F^2``: the part of the squared norm on the diagonal, which counts fully towards
    symmetry (a diagonal entry is its own mirror)."""
    m = np.asarray(m, dtype=float)
    return float((np.diag(m) ** 2).sum() / (m**2).sum())


def outlying_norms(m, num_std: float = DEFAULT_NUM_STD) -> dict[str, float]:
    """The column and row norms of ``m`` ``[d, d]`` that directionality reads: how many lie above their threshold
    ``mean + num_std * std`` (unbiased; ``columns_over``, ``rows_over``), the summed excess ``C`` and ``R``
    (:func:`attnstruct.scores.row_column_excess`), and the largest norm over the mean norm (``column_ratio``,
    ``row_ratio``)."""
    m = np.asarray(m, dtype=float)
    cols, rows = np.linalg.norm(m, axis=0), np.linalg.norm(m, axis=1)
    r_excess, c_excess = (float(v) for v in row_column_excess(m, num_std=num_std))
    over = [int((v > v.mean() + num_std * v.std(ddof=1)).sum()) for v in (cols, rows)]
    return {
        "columns_over": over[0],
        "rows_over": over[1],
        "C": c_excess,
        "R": r_excess,
        "column_ratio": float(cols.max() / cols.mean()),
        "row_ratio": float(rows.max() / rows.mean()),
    }
