"""Null distributions and sweeps: shapes, determinism, expected behaviour, input checks."""

import numpy as np
import pytest
import xarray as xr

from attnstruct.analyses import score_nulls as null
from attnstruct.report import prose


def test_null_distribution_shapes_and_determinism():
    a = null.null_distribution([8, 12], [1, 4], n_draws=5, seed=3)
    b = null.null_distribution([8, 12], [1, 4], n_draws=5, seed=3)
    xr.testing.assert_identical(a, b)
    assert a.symmetry.dims == ("ensemble", "d_model", "draw")
    assert list(a.ensemble.values) == [
        "gaussian",
        "factors H=1, layer",
        "factors H=1, head",
        "factors H=4, layer",
        "factors H=4, head",
    ]
    # 8 and 12 are divisible by 1 and 4, so every cell is filled
    assert bool(np.isfinite(a.symmetry).all())
    # one head is the whole layer
    np.testing.assert_array_equal(
        a.symmetry.sel(ensemble="factors H=1, layer"), a.symmetry.sel(ensemble="factors H=1, head")
    )
    c = null.null_distribution([8, 12], [1, 4], n_draws=5, seed=4)
    assert not np.array_equal(a.symmetry.values, c.symmetry.values)


def test_null_cells_do_not_depend_on_other_cells():
    small = null.null_distribution([16], [2], n_draws=4, seed=0)
    large = null.null_distribution([8, 16], [2, 4], n_draws=4, seed=0)
    xr.testing.assert_equal(small.sel(d_model=16, ensemble="gaussian"), large.sel(d_model=16, ensemble="gaussian"))


def test_indivisible_cells_are_nan():
    ds = null.null_distribution([10], [4], n_draws=2, seed=0)
    assert bool(ds.symmetry.sel(ensemble="factors H=4, layer").isnull().all())
    assert bool(ds.symmetry.sel(ensemble="gaussian").notnull().all())


def test_null_symmetry_is_centred():
    ds = null.null_distribution([256], [4], n_draws=20, seed=0)
    assert abs(float(ds.symmetry.median())) < 0.02


def test_num_std_sweep_planted_signs():
    ds = null.num_std_sweep(64, [1.0, 2.0], n_draws=8, seed=0, gains=(8.0,))
    assert float(ds.directionality.sel(ensemble="columns x8", num_std=2.0).median()) < -0.5
    assert float(ds.directionality.sel(ensemble="rows x8", num_std=2.0).median()) > 0.5


def test_tying_sweep_endpoints():
    ds = null.tying_sweep([0.0, np.pi / 2], n_heads=2, d_model=32, n_draws=6, seed=0)
    np.testing.assert_allclose(ds.symmetry.sel(theta=0.0), 1.0, atol=1e-12)
    np.testing.assert_allclose(ds.head_symmetry.sel(theta=0.0), 1.0, atol=1e-12)
    assert abs(float(ds.symmetry.isel(theta=1).median())) < 0.2


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: null.null_distribution([64], [4], n_draws=1, seed=0), "n_draws"),
        (lambda: null.null_distribution([0, 64], [4], n_draws=3, seed=0), "d_models"),
        (lambda: null.null_distribution([64], [], n_draws=3, seed=0), "n_heads"),
        (lambda: null.null_distribution([64.5], [4], n_draws=3, seed=0), "d_models"),
        (lambda: null.num_std_sweep(1, [2.0], n_draws=3, seed=0), "d_model"),
        (lambda: null.num_std_sweep(16, [], n_draws=3, seed=0), "num_stds"),
        (lambda: null.tying_sweep([0.0], n_heads=3, d_model=16, n_draws=3, seed=0), "multiple"),
    ],
)
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_the_two_conventions_of_one_matrix():
    table = null.conventions(seed=0)
    paper, raw = table["paper (default)"], table["raw (authors' storage)"]
    assert paper["symmetry"] == pytest.approx(2 * raw["symmetry"] - 1, abs=1e-12)
    assert paper["directionality"] == pytest.approx(-raw["directionality"], abs=1e-12)
    assert paper["directionality"] < 0  # three dominant columns


def test_the_invariants_of_the_scores():
    table = null.invariants(seed=0, d=32)
    assert list(table.index) == list(null.TRANSFORMS)
    assert null.unchanged(table, "symmetry", table.index)
    assert null.unchanged(table, "directionality", ["3 M", "-0.5 M", "P M P^T (permutation)"])
    assert null.unchanged(table, "directionality", ["M^T"], sign=-1.0)
    assert not null.unchanged(table, "directionality", ["Q M Q^T (rotation)"])


def test_unchanged_compares_with_the_untransformed_matrix():
    import pandas as pd

    table = pd.DataFrame({"symmetry": [0.5, 0.5, 0.4]}, index=["M", "a", "b"])
    assert null.unchanged(table, "symmetry", ["a"]) and not null.unchanged(table, "symmetry", ["a", "b"])


def test_the_quartile_table_and_the_spread_at_one_width():
    ds = null.null_distribution([8, 16], [2], n_draws=8, seed=1)
    table = null.null_quartiles(ds)
    assert table.shape == (3 * 2, 6)  # ensembles x widths, two scores x three quantiles
    q = ds.directionality.sel(ensemble="gaussian", d_model=16).quantile([0.25, 0.75]).values
    spread = null.directionality_spread(ds, 16)
    np.testing.assert_allclose(spread.loc["gaussian"].to_numpy(float), q)


def test_the_spread_sentence_says_the_measured_ranges():
    ds = null.null_distribution([8, 16], [2], n_draws=8, seed=1)
    sentence = null.describe_spread(ds)
    q = ds.directionality.sel(ensemble="gaussian").quantile([0.25, 0.75], dim="draw")
    gaussian = f"{prose.signed(q.sel(d_model=8)[0])} to {prose.signed(q.sel(d_model=8)[1])} at $d$ = 8"
    assert "(8 draws per cell)" in sentence and "H = 2" in sentence and gaussian in sentence


def test_the_layer_against_its_heads_and_the_dataset():
    tying = null.tying_sweep([0.0, np.pi / 2], n_heads=2, d_model=8, n_draws=4, seed=0)
    gap = null.layer_minus_head(tying)
    assert gap.dims == ("theta",) and gap.sel(theta=0.0) == pytest.approx(0.0, abs=1e-12)  # tied: all +1
    ds = null.dataset(
        null.null_distribution([8], [2], 4, 0),
        null.num_std_sweep(8, [1.0, 2.0], 4, 0),
        tying,
        null.invariants(seed=0, d=16),
    )
    for name in ("symmetry", "sweep_directionality", "tying_head_symmetry", "invariant_symmetry"):
        assert name in ds
    assert list(ds.transform.values) == list(null.TRANSFORMS) and "planted" in ds.dims
