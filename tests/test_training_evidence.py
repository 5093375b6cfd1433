"""The training notebooks' verdicts on made-up runs with a known answer, and their reductions by brute force."""

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from attnstruct import training_evidence as te

SHAPE = te.Shape(d_model=64, n_heads=4, n_layers=4)


def runs(encoder_symmetry: float, decoder_symmetry: float, n_seeds: int = 6, noise: float = 0.02, seed: int = 0):
    """Runs whose final median symmetry is the given value per objective (plus noise), peaking mid-run at +0.6;
    directionality: encoder 0, decoder -0.9."""
    rng = np.random.default_rng(seed)
    steps, layers = [0, 10, 20], range(4)
    sym = np.zeros((2, n_seeds, len(steps), len(layers)))
    sym[:, :, 1] = 0.6
    sym[0, :, 2] = encoder_symmetry
    sym[1, :, 2] = decoder_symmetry
    sym[:, :, 2] += noise * rng.standard_normal((2, n_seeds, 1))
    direc = np.zeros_like(sym)
    direc[1] = -0.9 + noise * rng.standard_normal((n_seeds, len(steps), 4))
    dims = ("objective", "seed", "step", "layer")
    coords = {"objective": ["mlm", "next-token"], "seed": np.arange(n_seeds), "step": steps, "layer": list(layers)}
    return xr.Dataset({"symmetry": (dims, sym), "directionality": (dims, direc)}, coords=coords)


def test_a_large_encoder_decoder_gap_holds_and_none_cannot_be_told():
    large = te.objective_effects(runs(0.5, 0.0), SHAPE, n_draws=100)
    assert [e.verdict for e in large][0] == "holds"
    assert large[0].estimate == pytest.approx(0.5, abs=0.05) and large[0].n == 6
    none = te.objective_effects(runs(0.2, 0.2, noise=0.05), SHAPE, n_draws=100)
    assert none[0].verdict == "cannot tell at this scale"


def test_directionality_is_judged_against_the_null_of_its_width():
    narrow, wide = te.Shape(d_model=256, n_heads=4, n_layers=4), SHAPE
    at_256 = te.objective_effects(runs(0.5, 0.0), narrow, n_draws=50)
    at_64 = te.objective_effects(runs(0.5, 0.0), wide, n_draws=100)
    assert [e.verdict for e in at_256[1:]] == ["holds", "holds"]
    assert [e.verdict for e in at_64[1:]] == ["cannot tell at this scale"] * 2  # an untrained d = 64 layer
    assert all("null" in e.reason for e in at_64[1:])  # scores -0.9 often enough


def test_a_decoder_more_symmetric_than_the_encoder_does_not_hold():
    assert te.objective_effects(runs(0.0, 0.5), SHAPE, n_draws=100)[0].verdict == "does not hold"


def test_three_seeds_cannot_tell_however_large_the_gap():
    effect = te.objective_effects(runs(0.5, 0.0, n_seeds=3), SHAPE, n_draws=100)[0]
    assert effect.verdict == "cannot tell at this scale" and "0.125" in effect.reason


def test_final_median_and_transient_match_a_loop():
    ds = runs(0.3, 0.1)
    final = te.final_median(ds, "symmetry")
    table = te.transient(ds)
    for objective in ("mlm", "next-token"):
        for seed in range(6):
            values = ds.symmetry.sel(objective=objective, seed=seed).values  # [step, layer]
            medians = np.median(values, axis=1)
            assert float(final.sel(objective=objective, seed=seed)) == pytest.approx(medians[-1])
            row = table.loc[(objective, seed)]
            assert row["peak"] == pytest.approx(medians.max()) and row["peak_step"] == 10
            assert row["decay"] == pytest.approx(medians.max() - medians[-1])
    assert {e.verdict for e in te.decay_effects(ds)} == {"holds"}


def test_speedups_are_read_against_the_placebo():
    rows = [("mlm", "bert", s, v) for s, v in enumerate([0.02, -0.0, 0.05, np.nan, 0.01])]
    rows += [("mlm", "symmetric", s, v) for s, v in enumerate([0.5, 0.55, 0.45, 0.52, 0.48])]
    rows += [("mlm", "symmetric-matched", s, v) for s, v in enumerate([0.0, 0.03, np.nan, 0.02, 0.01])]
    table = pd.DataFrame(rows, columns=["objective", "init", "seed", "speedup"])
    effects = te.speedup_effects(table)
    assert [e.claim for e in effects] == [
        "mlm: speed-up of symmetric minus the placebo's",
        "mlm: speed-up of symmetric-matched minus the placebo's",
    ]
    assert [e.verdict for e in effects] == ["holds", "cannot tell at this scale"]


def test_an_objective_missing_from_the_runs_is_named():
    with pytest.raises(ValueError, match="objective 'next-token' is not in the runs"):
        te.objective_effects(runs(0.5, 0.0).sel(objective=["mlm"]), SHAPE)
