"""Brute-force score definitions, written independently of attnstruct (as in the authors' utils/scores.py)."""

import numpy as np


def symmetry_raw(m):
    """||M_s||_F^2 / ||M||_F^2 with M_s formed explicitly."""
    s = 0.5 * (m + m.T)
    return (s**2).sum() / (m**2).sum()


def symmetry_paper(m):
    """(||M_s||^2 - ||M_n||^2) / ||M||^2 with both parts formed explicitly."""
    s, n = 0.5 * (m + m.T), 0.5 * (m - m.T)
    return ((s**2).sum() - (n**2).sum()) / (m**2).sum()


def directionality_paper(m, num_std=2.0):
    """(R - C)/(R + C) from explicit row/column norms, loops over the outliers."""
    r = np.linalg.norm(m, axis=1)
    c = np.linalg.norm(m, axis=0)
    if len(r) < 2:
        return 0.0
    tr = r.mean() + num_std * r.std(ddof=1)
    tc = c.mean() + num_std * c.std(ddof=1)
    row_excess = sum(x - tr for x in r if x > tr)
    col_excess = sum(x - tc for x in c if x > tc)
    if row_excess + col_excess == 0:
        return 0.0
    return (row_excess - col_excess) / (row_excess + col_excess)
