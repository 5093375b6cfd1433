"""The null ensembles (analyses.null_ensembles): shapes, determinism, cells independent of each other."""

import numpy as np
import xarray as xr

from attnstruct.analyses import null_ensembles as null


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
