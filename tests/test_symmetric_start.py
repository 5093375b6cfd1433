"""Notebook 06's symmetric start: the initialisations at step 0, and whether their symmetry persists."""

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from attnstruct import stats
from attnstruct.analyses import symmetric_start
from attnstruct.tasks import text_config


def test_the_initial_state_shows_each_initialisations_scale_and_symmetry():
    configs = [
        text_config.TextConfig(init=init, seed=seed, d_model=48, n_layers=1, n_heads=2, seq_len=8)
        for init in ("bert", "symmetric", "symmetric-matched")
        for seed in (0, 1)
    ]
    table = symmetric_start.initial_state(configs, vocab_size=300)
    assert list(table.index) == ["bert", "symmetric", "symmetric-matched"]  # the first config of each init
    assert table.loc["bert", "std W_q"] == pytest.approx(0.02, rel=0.1) and table.loc["bert", "max |bias q,k,v|"] == 0
    assert table.loc["symmetric", "std W_k"] == pytest.approx(1 / np.sqrt(3 * 48), rel=0.1)
    assert table.loc["symmetric", "max |bias q,k,v|"] > 0
    assert table.loc["symmetric-matched", "std W_q"] == table.loc["symmetric-matched", "std W_k"]
    assert list(table["head symmetry (min..max)"])[1:] == ["+1.00 .. +1.00"] * 2
    assert table.loc["bert", "head symmetry (min..max)"] != "+1.00 .. +1.00"


def test_the_scale_line_gives_the_default_standard_deviation_at_this_width():
    assert symmetric_start.describe_scales(32) == (
        "PyTorch's default U(±1/√d) has std 1/√(3d) = 0.1021 at d = 32; BERT's is 0.02"
    )


def runs(ends: dict, n_seeds: int = 5, noise: float = 0.02) -> xr.Dataset:
    """Treated runs whose final median symmetry over layers is ``ends[init]`` plus noise per seed; +1 at step 0."""
    rng = np.random.default_rng(0)
    symmetry = np.ones((1, len(ends), n_seeds, 2, 3))
    symmetry[0, :, :, 1] = np.array(list(ends.values()))[:, None, None] + noise * rng.standard_normal((1, n_seeds, 1))
    dims = ("objective", "init", "seed", "step", "layer")
    coords = {"objective": ["mlm"], "init": list(ends), "seed": range(n_seeds), "step": [0, 30], "layer": range(3)}
    return xr.Dataset({"symmetry": (dims, symmetry)}, coords=coords)


def targets(met: dict) -> pd.DataFrame:
    """Loss targets of runs ``(init, seed)``, met unless ``met`` says otherwise (baselines have seeds 0 to 6)."""
    keys = [("mlm", "bert", s) for s in range(7)] + [("mlm", "symmetric", s) for s in range(5)]
    index = pd.MultiIndex.from_tuples(keys, names=["objective", "init", "seed"])
    return pd.DataFrame({"met": [met.get(k[1:], True) for k in keys]}, index=index)


def test_a_symmetric_start_that_persists_holds_and_one_that_is_lost_does_not():
    kept = symmetric_start.persistence_effects(runs({"bert": 0.1, "symmetric": 0.8}), "mlm")
    lost = symmetric_start.persistence_effects(runs({"bert": 0.5, "symmetric": 0.1}), "mlm")
    assert [e.claim for e in kept] == ["symmetric minus bert, final median symmetry (mlm)"]
    assert kept[0].verdict == stats.HOLDS and kept[0].estimate == pytest.approx(0.7, abs=0.05)
    assert lost[0].verdict == stats.DOES_NOT_HOLD


def test_persistence_of_runs_that_did_not_learn_is_not_judged():
    ds = runs({"bert": 0.1, "symmetric": 0.8})
    (effect,) = symmetric_start.persistence_effects(ds, "mlm", targets=targets({("symmetric", 2): False}))
    assert effect.verdict == stats.CANNOT_TELL and effect.reason == stats.NOT_LEARNED


def test_persistence_is_gated_only_on_the_seeds_it_compares():
    ds = runs({"bert": 0.1, "symmetric": 0.8})
    (effect,) = symmetric_start.persistence_effects(ds, "mlm", targets=targets({("bert", 6): False}))
    assert effect.verdict == stats.HOLDS


def test_the_persistence_paragraph_states_the_ends_and_what_three_seeds_can_reach():
    ds = runs({"bert": 0.1, "symmetric": 0.8}, n_seeds=3, noise=0.0)
    effects = symmetric_start.persistence_effects(ds, "mlm")
    paragraph = symmetric_start.describe_persistence(ds, effects, "mlm")
    assert paragraph.startswith("**Persistence (encoder (masked LM)):** after 30 steps the median symmetry over")
    assert "ends at +0.10 (bert), +0.80 (symmetric) (mean over seeds)" in paragraph
    assert (
        f"symmetric minus bert: +0.70, {stats.CANNOT_TELL}" in paragraph
        and "can reach is 0.125, not below" in paragraph
    )


def test_the_persistence_table_is_the_mean_final_median_per_objective_and_init():
    table = symmetric_start.persistence_table(runs({"bert": 0.1, "symmetric": 0.8}, noise=0.0))
    assert list(table.columns) == ["bert", "symmetric"] and list(table.index) == ["mlm"]
    np.testing.assert_allclose(table.to_numpy(), [[0.1, 0.8]])
