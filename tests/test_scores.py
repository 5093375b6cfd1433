"""Scores against brute-force definitions, their invariants, conventions and edge cases."""

import numpy as np
import pytest
import torch

import attnstruct as at
from attnstruct.scores import excess_tolerance

from reference import directionality_paper, symmetry_paper, symmetry_raw

SIZES = [1, 2, 3, 7, 64, 257, 1024]


def structured(rng, d, kind):
    m = rng.standard_normal((d, d))
    if kind == "columns" and d > 4:
        m[:, rng.choice(d, 3, replace=False)] *= 10
    elif kind == "rows" and d > 4:
        m[rng.choice(d, 3, replace=False), :] *= 10
    elif kind == "partly symmetric":
        m = m + 0.7 * m.T
    return m


@pytest.mark.parametrize("d", SIZES)
@pytest.mark.parametrize("kind", ["gaussian", "columns", "rows", "partly symmetric"])
def test_scores_match_direct_definitions(rng, d, kind):
    m = structured(rng, d, kind)
    assert at.symmetry_score(m) == pytest.approx(symmetry_paper(m), abs=1e-6)
    assert at.symmetry_score(m, convention="raw") == pytest.approx(symmetry_raw(m), abs=1e-6)
    assert at.directionality_score(m) == pytest.approx(directionality_paper(m), abs=1e-6)
    assert at.directionality_score(m, convention="raw") == pytest.approx(-directionality_paper(m), abs=1e-6)


@pytest.mark.parametrize("num_std", [0.0, 0.5, 1.0, 3.0])
def test_directionality_threshold_matches_definition(rng, num_std):
    m = structured(rng, 50, "columns")
    assert at.directionality_score(m, num_std=num_std) == pytest.approx(directionality_paper(m, num_std), abs=1e-6)


def test_planted_structure_has_the_documented_sign(rng):
    assert at.directionality_score(structured(rng, 128, "columns")) < -0.5
    assert at.directionality_score(structured(rng, 128, "rows")) > 0.5
    assert at.symmetry_score(structured(rng, 128, "partly symmetric")) > 0.5


def test_scores_stay_in_range(rng):
    for _ in range(20):
        d = int(rng.integers(2, 40))
        m = rng.standard_normal((d, d)) * rng.exponential(1, (1, d)) * rng.exponential(1, (d, 1))
        assert -1 <= at.symmetry_score(m) <= 1
        assert -1 <= at.directionality_score(m) <= 1


def test_known_values(rng):
    g = rng.standard_normal((30, 30))
    assert at.symmetry_score(g + g.T) == pytest.approx(1.0, abs=1e-12)
    assert at.symmetry_score(g - g.T) == pytest.approx(-1.0, abs=1e-12)
    assert at.directionality_score(g + g.T) == 0.0
    assert at.directionality_score(g - g.T) == 0.0  # skew: row norms equal column norms
    assert at.symmetry_score(np.eye(5)) == 1.0
    q, _ = np.linalg.qr(rng.standard_normal((60, 60)))
    assert at.directionality_score(q) == 0.0  # equal norms up to rounding: no spurious outliers
    assert at.symmetry_score([[3.0]]) == 1.0 and at.directionality_score([[3.0]]) == 0.0


def test_invariants(rng):
    m = structured(rng, 96, "columns")
    s, d = at.symmetry_score(m), at.directionality_score(m)
    q, _ = np.linalg.qr(rng.standard_normal((96, 96)))
    p = np.eye(96)[rng.permutation(96)]
    for c in (3.0, -0.25, 1e-6):
        assert at.symmetry_score(c * m) == pytest.approx(s, abs=1e-10)
        assert at.directionality_score(c * m) == pytest.approx(d, abs=1e-10)
    assert at.symmetry_score(m.T) == pytest.approx(s, abs=1e-12)
    assert at.directionality_score(m.T) == pytest.approx(-d, abs=1e-12)
    assert at.symmetry_score(q @ m @ q.T) == pytest.approx(s, abs=1e-10)
    assert at.symmetry_score(p @ m @ p.T) == pytest.approx(s, abs=1e-12)
    assert at.directionality_score(p @ m @ p.T) == pytest.approx(d, abs=1e-12)


def test_batched_equals_loop_and_types(rng):
    batch = rng.standard_normal((3, 4, 20, 20))
    sym = at.symmetry_score(batch)
    direc = at.directionality_score(batch)
    assert sym.shape == direc.shape == (3, 4)
    for i in range(3):
        for j in range(4):
            assert sym[i, j] == pytest.approx(symmetry_paper(batch[i, j]), abs=1e-12)
            assert direc[i, j] == pytest.approx(directionality_paper(batch[i, j]), abs=1e-12)
    t = at.symmetry_score(torch.from_numpy(batch).float())
    assert isinstance(t, torch.Tensor) and t.dtype == torch.float64 and t.shape == (3, 4)
    np.testing.assert_allclose(t.numpy(), sym, atol=1e-6)
    assert isinstance(at.symmetry_score(batch[0, 0]), float)
    both = at.scores(batch)
    np.testing.assert_array_equal(both.symmetry, sym)
    np.testing.assert_array_equal(both.directionality, direc)


def test_zero_matrix():
    with pytest.raises(ValueError, match="zero matrix"):
        at.symmetry_score(np.zeros((4, 4)))
    assert at.directionality_score(np.zeros((4, 4))) == 0.0


@pytest.mark.parametrize(
    "bad, match",
    [
        (np.ones((3, 4)), "square"),
        (np.ones(5), "square"),
        (np.array([[1.0, np.nan], [0.0, 1.0]]), "NaN or inf"),
        (np.array([[1.0, np.inf], [0.0, 1.0]]), "NaN or inf"),
        (np.zeros((0, 0)), "empty"),
        (np.eye(2, dtype=complex), "complex"),
        (np.eye(2, dtype=bool), "boolean"),
    ],
)
def test_bad_input_gives_one_line_error(bad, match):
    for fn in (at.symmetry_score, at.directionality_score):
        with pytest.raises(ValueError, match=match) as err:
            fn(bad)
        assert "\n" not in str(err.value)


def test_bad_keywords():
    with pytest.raises(ValueError, match="convention"):
        at.symmetry_score(np.eye(2), convention="authors")
    with pytest.raises(ValueError, match="num_std"):
        at.directionality_score(np.eye(2), num_std=float("nan"))


def test_row_column_excess_builds_directionality(rng):
    m = structured(rng, 40, "columns")
    r, c = at.row_column_excess(m)
    assert c > 0
    assert (r - c) / (r + c) == pytest.approx(at.directionality_score(m), abs=1e-12)
    norms = np.linalg.norm(m, axis=0)
    tau = norms.mean() + 2 * norms.std(ddof=1)
    assert c == pytest.approx(np.clip(norms - tau, 0, None).sum(), abs=1e-10)


def _orthogonal(d: int, seed: int) -> torch.Tensor:
    q, _ = torch.linalg.qr(torch.randn(d, d, dtype=torch.float64, generator=torch.Generator().manual_seed(seed)))
    return q


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("d", [64, 384])
def test_orthogonal_matrix_in_low_precision_has_no_direction(dtype, d):
    """Row and column norms of an orthogonal matrix are equal up to the rounding of the type it is stored in."""
    q = _orthogonal(d, seed=d).to(dtype)
    assert float(at.directionality_score(q)) == 0.0
    if dtype == torch.float32:
        assert at.directionality_score(q.numpy()) == 0.0
    identity = torch.eye(d, dtype=dtype)
    for precision in ("float64", "float32"):
        s = at.factor_scores(q, identity, precision=precision, method="matrix")
        assert float(s.directionality) == 0.0
    r, c = at.row_column_excess(q)
    assert float(r) == float(c) == 0.0


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_low_precision_tolerance_keeps_a_real_outlier_column(dtype):
    q = _orthogonal(128, seed=1)
    q[:, 5] *= 1.5  # one column 50% longer than the rest: far above any rounding
    _, columns = at.row_column_excess(q.to(dtype))
    assert float(columns) == pytest.approx(float(at.row_column_excess(q)[1]), rel=0.01)
    assert float(at.directionality_score(q.to(dtype))) < -0.75


def test_float64_input_keeps_the_float64_tolerance():
    assert excess_tolerance(torch.float64) == 64 * torch.finfo(torch.float64).eps
    assert excess_tolerance(torch.float64, torch.finfo(torch.bfloat16).eps) == torch.finfo(torch.bfloat16).eps
