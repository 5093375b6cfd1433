"""Notebook 02's analysis (analyses.nb02_scores): the sweeps, the conventions and invariants, and the facts its
sentences and titles state, on small draws with known answers."""

import numpy as np
import pytest
import xarray as xr

from attnstruct.analyses import nb02_scores as two_scores
from attnstruct.analyses import null_ensembles
from attnstruct.report import prose


def test_num_std_sweep_planted_signs():
    ds = two_scores.num_std_sweep(64, [1.0, 2.0], n_draws=8, seed=0, gains=(8.0,))
    assert float(ds.directionality.sel(ensemble="columns x8", num_std=2.0).median()) < -0.5
    assert float(ds.directionality.sel(ensemble="rows x8", num_std=2.0).median()) > 0.5


def test_tying_sweep_endpoints():
    ds = two_scores.tying_sweep([0.0, np.pi / 2], n_heads=2, d_model=32, n_draws=6, seed=0)
    np.testing.assert_allclose(ds.symmetry.sel(theta=0.0), 1.0, atol=1e-12)
    np.testing.assert_allclose(ds.head_symmetry.sel(theta=0.0), 1.0, atol=1e-12)
    assert abs(float(ds.symmetry.isel(theta=1).median())) < 0.2


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: null_ensembles.null_distribution([64], [4], n_draws=1, seed=0), "n_draws"),
        (lambda: null_ensembles.null_distribution([0, 64], [4], n_draws=3, seed=0), "d_models"),
        (lambda: null_ensembles.null_distribution([64], [], n_draws=3, seed=0), "n_heads"),
        (lambda: null_ensembles.null_distribution([64.5], [4], n_draws=3, seed=0), "d_models"),
        (lambda: two_scores.num_std_sweep(1, [2.0], n_draws=3, seed=0), "d_model"),
        (lambda: two_scores.num_std_sweep(16, [], n_draws=3, seed=0), "num_stds"),
        (lambda: two_scores.tying_sweep([0.0], n_heads=3, d_model=16, n_draws=3, seed=0), "multiple"),
    ],
)
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_the_two_conventions_of_one_matrix():
    table = two_scores.conventions(seed=0)
    paper, raw = table["paper (default)"], table["raw (authors' storage)"]
    assert paper["symmetry"] == pytest.approx(2 * raw["symmetry"] - 1, abs=1e-12)
    assert paper["directionality"] == pytest.approx(-raw["directionality"], abs=1e-12)
    assert paper["directionality"] < 0  # three dominant columns


def test_the_invariants_of_the_scores():
    table = two_scores.invariants(seed=0, d=32)
    assert list(table.index) == list(two_scores.TRANSFORMS)
    assert two_scores.unchanged(table, "symmetry", table.index)
    assert two_scores.unchanged(table, "directionality", ["3 M", "-0.5 M", "P M P^T (permutation)"])
    assert two_scores.unchanged(table, "directionality", ["M^T"], sign=-1.0)
    assert not two_scores.unchanged(table, "directionality", ["Q M Q^T (rotation)"])


def test_unchanged_compares_with_the_untransformed_matrix():
    import pandas as pd

    table = pd.DataFrame({"symmetry": [0.5, 0.5, 0.4]}, index=["M", "a", "b"])
    assert two_scores.unchanged(table, "symmetry", ["a"]) and not two_scores.unchanged(table, "symmetry", ["a", "b"])


def test_the_quartile_table_and_the_spread_at_one_width():
    ds = null_ensembles.null_distribution([8, 16], [2], n_draws=8, seed=1)
    table = null_ensembles.null_quartiles(ds)
    assert table.shape == (3 * 2, 6)  # ensembles x widths, two scores x three quantiles
    q = ds.directionality.sel(ensemble="gaussian", d_model=16).quantile([0.25, 0.75]).values
    spread = two_scores.directionality_spread(ds, 16)
    np.testing.assert_allclose(spread.loc["gaussian"].to_numpy(float), q)


def test_the_spread_facts_are_the_measured_ranges():
    ds = null_ensembles.null_distribution([8, 16], [2], n_draws=8, seed=1)
    spread = two_scores.spread_by_width(ds)
    q = ds.directionality.sel(ensemble="gaussian").quantile([0.25, 0.75], dim="draw")
    first = f"{prose.signed(q.sel(d_model=8)[0])} to {prose.signed(q.sel(d_model=8)[1])} at $d$ = 8"
    assert (spread.draws, spread.heads) == ("8 draws", "2")
    assert spread.gaussian_directionality.split("; ")[0] == first
    assert len(spread.layer_symmetry.split("; ")) == 2  # one range per width


DIMS = ("ensemble", "d_model", "draw")


def test_the_widest_spread_is_read_at_the_largest_width():
    values = np.zeros((2, 2, 4))
    values[1, 1] = [0.0, 0.0, 1.0, 1.0]  # the second ensemble at the larger width: IQR 1.0
    null = xr.Dataset(
        {
            "symmetry": (("ensemble", "d_model", "draw"), values),
            "directionality": (("ensemble", "d_model", "draw"), 2 * values),
        },
        coords={"ensemble": ["gaussian", "factors H=1, layer"], "d_model": [8, 16]},
    )
    facts = two_scores.widest_spread(null)
    assert (facts.width, facts.symmetry_iqr, facts.directionality_iqr) == ("16", "1.000", "2.00")


def test_the_threshold_extremes_bound_the_planted_medians():
    values = np.zeros((3, 2, 4))
    values[1], values[2] = -0.5, 0.6
    values[1, 0] = -0.2  # the columns' weakest threshold
    sweep = xr.Dataset(
        {"directionality": (("ensemble", "num_std", "draw"), values)},
        coords={"ensemble": ["gaussian", "columns x2", "rows x2"], "num_std": [1.0, 2.0]},
    )
    assert two_scores.threshold_extremes(sweep) == two_scores.ThresholdFacts("-0.20", "+0.60", "+0.00")


def _tying(gap: float) -> xr.Dataset:
    layer = np.full((3, 2), gap)
    layer[0] = 0.0
    return xr.Dataset(
        {"symmetry": (("theta", "draw"), layer), "head_symmetry": (("theta", "draw", "head"), np.zeros((3, 2, 2)))},
        coords={"theta": [0.0, 0.5, 1.0]},
    )


def test_the_head_layer_gap_says_whether_the_layer_leads():
    assert two_scores.head_layer_gap(_tying(0.12)) == two_scores.HeadLayerFacts("+0.12", True)
    assert two_scores.head_layer_gap(_tying(-0.12)) == two_scores.HeadLayerFacts("+0.00", False)


def test_the_layer_against_its_heads_and_the_dataset():
    tying = two_scores.tying_sweep([0.0, np.pi / 2], n_heads=2, d_model=8, n_draws=4, seed=0)
    gap = two_scores.layer_minus_head(tying)
    assert gap.dims == ("theta",) and gap.sel(theta=0.0) == pytest.approx(0.0, abs=1e-12)  # tied: all +1
    ds = two_scores.result_dataset(
        null_ensembles.null_distribution([8], [2], 4, 0),
        two_scores.num_std_sweep(8, [1.0, 2.0], 4, 0),
        tying,
        two_scores.invariants(seed=0, d=16),
    )
    for name in ("symmetry", "sweep_directionality", "tying_head_symmetry", "invariant_symmetry"):
        assert name in ds
    assert list(ds.transform.values) == list(two_scores.TRANSFORMS) and "planted" in ds.dims
