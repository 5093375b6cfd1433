"""The readings of one layer matrix that a figure draws: mirror correlation, diagonal share, outlying norms."""

import numpy as np
import pytest

from attnstruct.analyses import matrix_readings
from attnstruct.scores import row_column_excess


def test_the_mirror_correlation_of_symmetric_skew_and_unstructured_matrices():
    a = np.random.default_rng(0).standard_normal((40, 40))
    assert matrix_readings.mirror_correlation(a + a.T) == pytest.approx(1.0)
    assert matrix_readings.mirror_correlation(a - a.T) == pytest.approx(-1.0)
    assert abs(matrix_readings.mirror_correlation(a)) < 0.2


def test_the_diagonal_share_of_the_squared_norm():
    assert matrix_readings.diagonal_share(np.diag([3.0, 4.0])) == 1.0
    assert matrix_readings.diagonal_share(np.array([[1.0, 1.0], [1.0, 1.0]])) == 0.5


def test_outlying_norms_count_the_norms_above_threshold_and_their_excess():
    m = np.eye(10)
    m[:, 0] = 5.0  # one dominant column
    n = matrix_readings.outlying_norms(m)
    assert (n["columns_over"], n["rows_over"]) == (1, 0)
    r_excess, c_excess = row_column_excess(m)
    assert (n["R"], n["C"]) == (pytest.approx(float(r_excess)), pytest.approx(float(c_excess)))
    cols = np.linalg.norm(m, axis=0)
    assert n["column_ratio"] == pytest.approx(cols.max() / cols.mean())
