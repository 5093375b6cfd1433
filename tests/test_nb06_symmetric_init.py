"""Notebook 06 on curves and runs with known answers: the speed-up metrics, the placebo, the verdicts, the
symmetric start and whether it persists, the facts the notebook states, and the dataset."""

import dataclasses

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from attnstruct import reference, stats
from attnstruct.analyses import nb06_symmetric_init as init_study
from attnstruct.analyses import text_runs
from attnstruct.tasks import text_config


def test_trailing_mean():
    np.testing.assert_allclose(init_study.trailing_mean([1, 2, 3, 4], 2), [1, 1.5, 2.5, 3.5])
    np.testing.assert_allclose(init_study.trailing_mean([5.0], 3), [5.0])
    with pytest.raises(ValueError, match="window"):
        init_study.trailing_mean([1.0], 0)


def test_robust_speedup_on_shifted_curves():
    steps = np.arange(0, 1001, 50.0)
    baseline = 2 + 3 * np.exp(-steps / 300)
    treated = 2 + 3 * np.exp(-(steps * 2) / 300)  # the same curve at twice the speed
    value, step = init_study.robust_speedup(steps, treated, baseline, 1000, window=1)
    assert step == 500 and value == pytest.approx(0.5)
    value, step = init_study.robust_speedup(steps, baseline, baseline, 1000, window=3)
    assert step == 1000 and value == 0
    value, step = init_study.robust_speedup(steps, baseline + 0.1, baseline, 1000)
    assert np.isnan(value) and np.isnan(step)


def test_robust_speedup_drops_missing_evaluations_and_refuses_bad_input():
    steps = np.array([0, 10, 20, 30, 40])
    baseline = np.array([5, np.nan, 4, np.nan, 3.0])
    treated = np.array([5, np.nan, 3, np.nan, 2.0])
    assert init_study.robust_speedup(steps, treated, baseline, 40, window=1) == (0.5, 20.0)
    with pytest.raises(ValueError, match="no finite values"):
        init_study.robust_speedup(steps, np.full(5, np.nan), baseline, 40)
    with pytest.raises(ValueError, match="increase"):
        init_study.robust_speedup(steps[::-1], treated, baseline, 40)


def test_paper_speedup_reproduces_the_authors_rule():
    """Row index i (0-based) of 1000 rows: 1 - i/1000; the digest's 4-layer Jigsaw row is index 741 -> 25.9%."""
    baseline = np.linspace(4, 2.7822, 1000)
    treated = np.full(1000, 3.0)
    treated[741:] = 2.75
    assert init_study.paper_speedup(treated, baseline) == pytest.approx(0.259)
    assert np.isnan(init_study.paper_speedup(np.full(1000, 3.0), baseline))  # never below: NaN, not the 100% artifact
    logged = np.concatenate([[np.nan], treated])  # our logs start with NaN at step 0
    assert init_study.paper_speedup(logged, np.concatenate([[np.nan], baseline])) == pytest.approx(0.259)


def test_the_reported_speedups_follow_the_authors_rule_on_their_own_rows():
    table = reference.symmetric_init()
    encoders = table[table["mode"] == "encoder"]
    assert len(encoders) == 6 and encoders["speedup"].max() == pytest.approx(0.729)
    reached = encoders.dropna(subset=["first_step_below"])
    # their rule: row index i = step / 200 - 1 of 1000 rows, speed-up 1 - i / 1000
    assert np.allclose(1 - (reached["first_step_below"] / 200 - 1) / 1000, reached["speedup"], atol=6e-4)
    never = encoders[encoders["first_step_below"].isna()]
    assert (never["symmetric_final_loss"] > never["baseline_final_loss"]).all() and never["speedup"].isna().all()


# ---------------------------------------------------------------------------------------------- notebook 06's runs

STEPS = np.arange(0, 1001, 50)


def curve(speed: float, floor: float = 2.0) -> np.ndarray:
    """A loss curve that goes ``speed`` times as fast as the baseline's (speed 1), towards ``floor``."""
    return floor + 3 * np.exp(-STEPS * speed / 300)


def runs_of(arms: dict, bert: list | None = None) -> xr.Dataset:
    """Runs ``[objective, init, seed, step]`` of one objective: ``bert`` at ``bert``'s per-seed (speed, floor)
    (default speed 1, floor 2), every arm of ``arms`` at its per-seed (speed, floor) pairs."""
    n = len(bert) if bert else len(next(iter(arms.values())))
    inits = {"bert": bert or [(1, 2.0)] * n} | arms
    losses = np.array([[[curve(*sf) for sf in per_seed] for per_seed in inits.values()]])
    dims = ("objective", "init", "seed", "step")
    coords = {"objective": ["mlm"], "init": list(inits), "seed": range(n), "step": STEPS}
    return xr.Dataset({"val_loss": (dims, losses), "train_loss": (dims, losses)}, coords=coords)


def placebo_of(per_seed: list) -> xr.Dataset:
    """Placebo runs at ``per_seed`` (speed, floor), as :func:`init_study.as_placebo` gives them."""
    return init_study.as_placebo(runs_of({}, bert=per_seed).sel(init=["bert"]))


SAME = [(1, 2.0)] * 4


def test_every_arm_and_the_placebo_are_paired_with_the_baseline_of_their_seed():
    runs = runs_of({"symmetric": [(2, 2.0)] * 4})
    table = init_study.speedups(runs, placebo_of(SAME), steps=1000, smoothing=1)
    assert list(zip(table["init"], table["seed"])) == [("symmetric", s) for s in range(4)] + [
        ("placebo", s) for s in range(4)
    ]
    np.testing.assert_allclose(table["robust"], [0.5] * 4 + [0] * 4)  # twice as fast: half the steps
    assert table["paper"].iloc[0] == pytest.approx(1 - 11 / 21)  # first logged row below: step 550, index 11
    assert table.loc[table["init"] == "placebo", "paper"].isna().all()  # the same curve is never strictly below
    gain = curve(1)[-1] - curve(2)[-1]  # the faster arm ends lower, the placebo where the baseline does
    np.testing.assert_allclose(table["baseline_final_loss"] - table["final_loss"], [gain] * 4 + [0] * 4)


def test_the_placebo_is_compared_with_the_baseline_of_its_own_seed_only():
    bert = [(1, 2.0), (1, 2.1), (1, 2.2), (1, 2.3)]
    placebo = placebo_of([(1, 2.0), (1, 2.0), (1, 2.0), (1, 2.0)])
    table = init_study.speedups(runs_of({"symmetric": SAME}, bert=bert), placebo, steps=1000, smoothing=1)
    gains = table[table["init"] == "placebo"].eval("baseline_final_loss - final_loss").to_numpy()
    np.testing.assert_allclose(gains, [0.0, 0.1, 0.2, 0.3], atol=1e-3)


def test_the_placebo_runs_must_be_baseline_runs():
    with pytest.raises(ValueError, match="must be 'bert' runs"):
        init_study.as_placebo(runs_of({"symmetric": SAME}))


def table_of(symmetric, matched, placebo, gains=None) -> pd.DataFrame:
    """A speed-up table of one objective: per-seed robust speed-ups of two arms and the placebo (the paper column
    equal), and final-loss gains (arm minus nothing: the baseline at 3.0, the arm at 3.0 - gain)."""
    gains = gains or {}
    rows = []
    for init, values in (("symmetric", symmetric), ("symmetric-matched", matched), ("placebo", placebo)):
        for s, v in enumerate(values):
            gain = gains.get(init, [0.0] * len(values))[s]
            rows.append(("mlm", init, s, v, v, 3.0 - gain, 3.0))
    return pd.DataFrame(rows, columns=init_study.COLUMNS)


TABLE = table_of(
    [0.5, 0.55, 0.45, 0.52, 0.48],
    [0.0, 0.03, np.nan, 0.02, 0.01],
    [0.02, -0.0, 0.05, np.nan, 0.01],
    gains={"symmetric": [0.05, 0.04, 0.06, 0.05, 0.03], "symmetric-matched": [0.01, -0.02, 0.0, 0.02, -0.01]},
)


def test_the_final_loss_gain_is_the_primary_claim_and_is_decided_by_a_paired_sign_flip_test():
    effects = init_study.loss_effects(TABLE)
    assert [e.claim for e in effects] == [
        "mlm: final validation loss, placebo minus symmetric",
        "mlm: final validation loss, placebo minus symmetric-matched",
    ]
    assert [e.verdict for e in effects] == ["holds", "cannot tell at this scale"]
    assert effects[0].estimate == pytest.approx(0.046) and effects[0].p_value == pytest.approx(1 / 32)
    assert effects[0].family.startswith("primary") and effects[1].family.startswith("secondary")
    assert 0 < effects[0].detectable < np.inf  # the smallest gain 5 seeds detect, from their spread


def test_speedups_are_paired_with_the_placebo_of_the_same_seed_and_never_counts_as_none():
    effects = init_study.speedup_effects(TABLE)
    assert [e.claim for e in effects] == [
        "mlm: speed-up of symmetric minus the placebo's",
        "mlm: speed-up of symmetric-matched minus the placebo's",
    ]
    assert [e.verdict for e in effects] == ["holds", "cannot tell at this scale"]
    paired = np.array([0.5, 0.55, 0.45, 0.52, 0.48]) - np.array([0.02, 0.0, 0.05, 0.0, 0.01])
    assert effects[0].estimate == pytest.approx(paired.mean()) and effects[0].test == "sign-flip"


def targets_where(missed: set) -> pd.DataFrame:
    """Loss targets of every run of ``TABLE`` (and the baselines, init ``bert``), met except the ``(init, seed)``
    in ``missed``."""
    keys = [("mlm", i, s) for i, s in zip(TABLE["init"], TABLE["seed"])] + [("mlm", "bert", s) for s in range(5)]
    index = pd.MultiIndex.from_tuples(keys, names=["objective", "init", "seed"])
    return pd.DataFrame({"met": [(i, s) not in missed for _, i, s in index]}, index=index)


@pytest.mark.parametrize("effects_of", [init_study.loss_effects, init_study.speedup_effects])
def test_an_arm_that_did_not_learn_is_not_judged_and_a_baseline_or_placebo_gates_every_arm(effects_of):
    effects = effects_of(TABLE, targets=targets_where({("symmetric", 3)}))
    assert effects[0].reason == stats.NOT_LEARNED and effects[1].reason != stats.NOT_LEARNED
    for missed in ("bert", "placebo"):
        effects = effects_of(TABLE, targets=targets_where({(missed, 4)}))
        assert [e.reason for e in effects] == [stats.NOT_LEARNED] * 2


def test_spread_is_the_median_and_range_of_the_seeds_that_reached_the_level():
    assert init_study.spread([0.2, 0.5, 0.3]) == "30% [20%, 50%]"
    assert init_study.spread([0.2, np.nan, 0.4]) == "30% [20%, 40%], 1 seed(s) never"
    assert init_study.spread([np.nan, np.nan]) == "never (0/2 seeds)"


def test_the_summary_has_one_row_per_arm_and_the_placebo_last():
    summary = init_study.speedup_summary(TABLE)
    assert list(summary.index) == [("mlm", "symmetric"), ("mlm", "symmetric-matched"), ("mlm", "placebo")]
    assert summary.loc[("mlm", "symmetric"), "robust speed-up, median [min, max]"] == "50% [45%, 55%]"
    assert summary.loc[("mlm", "symmetric"), "final loss, baseline minus arm: mean [min, max]"] == (
        "+0.046 [+0.030, +0.060]"
    )


def test_the_arm_facts_give_each_verdict_beside_the_placebo():
    symmetric, matched = init_study.arm_verdicts(TABLE, init_study.loss_effects(TABLE), digits=3)
    assert (symmetric.init, symmetric.objective, symmetric.holds, symmetric.fails) == (
        "symmetric",
        text_runs.label("mlm"),
        True,
        False,
    )
    assert not (matched.holds or matched.fails) and symmetric.baseline_gains == "+0.000 [+0.000, +0.000]"
    speeds = init_study.arm_verdicts(TABLE, init_study.speedup_effects(TABLE))
    assert speeds[0].holds and speeds[0].robust == "50% [45%, 55%]"
    with pytest.raises(ValueError, match="1 effects for 2"):
        init_study.arm_verdicts(TABLE, init_study.loss_effects(TABLE)[:1])


def test_loss_gains_are_the_control_minus_the_arm_of_the_same_seed():
    runs = runs_of({"symmetric": [(2, 2.0), (3, 2.0)]})
    gain = init_study.loss_gains(runs, "mlm", "symmetric", control="bert")
    np.testing.assert_allclose(gain.sel(seed=1), curve(1) - curve(3))


def test_the_final_loss_gain_over_the_placebo_is_the_primary_estimate():
    runs, placebo = (
        runs_of({"symmetric": [(2, 1.9), (2, 1.95), (3, 1.8)]}),
        placebo_of([(1, 2.0), (1.1, 2.1), (1, 2.05)]),
    )
    both = xr.concat([runs[["val_loss"]], placebo[["val_loss"]]], "init")
    (effect,) = init_study.loss_effects(init_study.speedups(runs, placebo, steps=int(STEPS[-1])))
    gain = init_study.loss_gains(both, "mlm", "symmetric").isel(step=-1).mean()
    assert float(gain) == pytest.approx(effect.estimate)


def test_the_dataset_holds_the_gains_and_speedups_per_arm_and_seed_and_the_placebos():
    runs = runs_of({"symmetric": [(2, 1.9)] * 4, "symmetric-matched": SAME}).assign_attrs(
        scored_matrix="W", runs='[{"seed": 0}]'
    )
    placebo = placebo_of(SAME).assign_attrs(runs='[{"seed": 1}]')
    table = init_study.speedups(runs, placebo, steps=1000, smoothing=1)
    out = init_study.result_dataset(runs, placebo, table, effects=[], parameters={}, unigram_entropy=5.0, learned=True)
    assert out.robust_speedup.dims == ("objective", "treated_init", "seed")
    assert list(out.treated_init.values) == ["symmetric", "symmetric-matched"]
    gain = curve(1)[-1] - curve(2, 1.9)[-1]
    np.testing.assert_allclose(out.final_loss_gain.sel(objective="mlm"), [[gain] * 4, [0] * 4])
    np.testing.assert_allclose(out.placebo_robust_speedup.sel(objective="mlm"), [0, 0, 0, 0])
    assert out.placebo_val_loss.dims == ("objective", "seed", "step") and out.attrs["verdicts"] == "{}"
    assert out.attrs["loss_targets_met"] == "yes" and "long_name" in out.placebo_final_loss_gain.attrs
    assert out.attrs["runs"] == '[{"seed": 0}, {"seed": 1}]'


def test_the_reported_facts_list_the_papers_encoders():
    table = pd.DataFrame(
        {
            "n_layers": [4, 12, 12, 4],
            "mode": ["encoder", "encoder", "encoder", "decoder"],
            "dataset": ["a", "b", "c", "d"],
            "speedup": [0.259, 0.2, np.nan, 0.5],
        }
    )
    reported = init_study.reported_speedups(table)
    assert (reported.four, reported.twelve) == ("25.9% (a)", "20.0% (b)")
    assert reported.any_never and reported.never == "c" and reported.printed == "100%"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"inits": ["symmetric", "bert"]}, "must start with the baseline"),
        ({"objectives": []}, "at least one objective"),
        ({"seeds": [0, 0]}, "distinct"),
        ({"smoothing": 0}, "smoothing"),
        ({"placebo_offset": 1}, "takes no seed to another seed"),
        ({"placebo_offset": 0}, "placebo_offset"),
    ],
)
def test_a_design_notebook_06_cannot_read_is_refused(change, message):
    design = {"inits": ["bert", "symmetric"], "objectives": ["mlm"], "seeds": [0, 1], "smoothing": 3}
    with pytest.raises(ValueError, match=message):
        init_study.check_design(**(design | {"placebo_offset": 100} | change))


def toy_starts(seeds=5):
    """Notebook 06's runs: one objective, the baseline, one treated start and the placebo, ``seeds`` seeds."""
    dims = ("objective", "init", "seed", "step", "layer")
    symmetry = np.zeros((1, 2, seeds, 2, 1))
    symmetry[0, 1, :, 0], symmetry[0, 1, :, 1] = 1.0, 0.5  # the symmetric start fades to +0.50
    symmetry[0, 0, :, 1] = 0.2
    symmetry[0, 1, 0, 1] = 0.1  # seed 0 ends below its baseline
    loss = np.zeros((1, 3, seeds, 2))
    loss[0, 1, :, 1] = -0.05  # the treated start ends ahead of the baseline
    loss[0, 2, :, 1] = np.linspace(-0.01, 0.01, seeds)  # the placebo
    coords = {"objective": ["mlm"], "seed": list(range(seeds)), "step": [0, 10]}
    runs = xr.Dataset({"symmetry": (dims, symmetry)}, coords=coords | {"init": ["bert", "symmetric"], "layer": [0]})
    both = xr.Dataset(
        {"val_loss": (("objective", "init", "seed", "step"), loss + 4.0)},
        coords=coords | {"init": ["bert", "symmetric", "placebo"]},
    )
    return runs, both


def test_the_loss_title_quotes_each_arms_estimate_and_verdict_against_the_placebo():
    _, both = toy_starts()
    gains = both.val_loss.sel(init="placebo") - both.val_loss.sel(init="symmetric")
    claim = "mlm: final validation loss, placebo minus symmetric"
    effect = dataclasses.replace(stats.paired_effect(gains.values[0, :, -1], np.zeros(5), claim=claim), verdict="holds")
    (arm,) = init_study.losses_against_placebo(both, [effect])
    assert arm.can_tell and arm.any_ahead and (arm.ahead, arm.verb) == ("symmetric", "ends")
    # the verdict lines' statistic and sign: the placebo's final loss minus the arm's, positive is ahead
    assert (arm.ends, arm.baseline) == ("symmetric +0.050 (holds)", "+0.000")
    (few,) = init_study.losses_against_placebo(toy_starts(seeds=2)[1], [])
    assert not few.can_tell and few.reason == "2 seeds, too few to compare" and few.ends == "symmetric +0.050"


def test_the_persistence_title_reads_each_start_against_the_placebo():
    runs, _ = toy_starts()
    placebo = runs.sel(init=["bert"]).assign_coords(init=["placebo"])
    (start,) = init_study.symmetry_against_placebo(runs, placebo, [])
    # the symmetric start ends at +0.50 (+0.10 for seed 0: +0.42 on average), the placebo (the baseline here) at +0.20
    assert start.against == "symmetric +0.22" and start.placebo == "+0.20" and not start.several
    (few,) = init_study.symmetry_against_placebo(toy_starts(seeds=2)[0], placebo.isel(seed=[0, 1]), [])
    assert not few.can_tell


# ---------------------------------------------------------------------------------------------- the symmetric start


def test_the_initial_state_shows_each_initialisations_scale_and_symmetry():
    configs = [
        text_config.TextConfig(init=init, seed=seed, d_model=48, n_layers=1, n_heads=2, seq_len=8)
        for init in ("bert", "symmetric", "symmetric-matched")
        for seed in (0, 1)
    ]
    table = init_study.initial_state(configs, vocab_size=300)
    assert list(table.index) == ["bert", "symmetric", "symmetric-matched"]  # the first config of each init
    assert table.loc["bert", "std W_q"] == pytest.approx(0.02, rel=0.1) and table.loc["bert", "max |bias q,k,v|"] == 0
    assert table.loc["symmetric", "std W_k"] == pytest.approx(1 / np.sqrt(3 * 48), rel=0.1)
    assert table.loc["symmetric", "max |bias q,k,v|"] > 0
    assert table.loc["symmetric-matched", "std W_q"] == table.loc["symmetric-matched", "std W_k"]
    assert list(table["head symmetry (min..max)"])[1:] == ["+1.00 .. +1.00"] * 2
    assert table.loc["bert", "head symmetry (min..max)"] != "+1.00 .. +1.00"


def test_the_scale_facts_give_the_default_standard_deviation_at_this_width():
    assert init_study.initial_scales(32) == init_study.ScaleFacts("32", "0.1021", "0.02")


def starts(ends: dict, n_seeds: int = 5, noise: float = 0.02) -> xr.Dataset:
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


def placebo_ending(end: float, n_seeds: int = 5) -> xr.Dataset:
    """Placebo runs (:func:`as_placebo`) whose final median symmetry over layers is ``end`` plus noise per seed."""
    return init_study.as_placebo(starts({"bert": end}, n_seeds=n_seeds, noise=0.02))


def test_a_symmetric_start_that_persists_holds_and_one_that_is_lost_does_not():
    kept = init_study.persistence_effects(starts({"bert": 0.1, "symmetric": 0.8}), placebo_ending(0.1), "mlm")
    lost = init_study.persistence_effects(starts({"bert": 0.5, "symmetric": 0.1}), placebo_ending(0.5), "mlm")
    assert [e.claim for e in kept] == ["symmetric minus placebo, final median symmetry (mlm)"]
    assert kept[0].verdict == stats.HOLDS and kept[0].estimate == pytest.approx(0.7, abs=0.05)
    assert lost[0].verdict == stats.DOES_NOT_HOLD


def test_persistence_of_runs_that_did_not_learn_is_not_judged():
    ds = starts({"bert": 0.1, "symmetric": 0.8})
    (effect,) = init_study.persistence_effects(
        ds, placebo_ending(0.1), "mlm", targets=targets({("symmetric", 2): False})
    )
    assert effect.verdict == stats.CANNOT_TELL and effect.reason == stats.NOT_LEARNED


def test_persistence_is_gated_only_on_the_seeds_it_compares():
    ds = starts({"bert": 0.1, "symmetric": 0.8})
    (effect,) = init_study.persistence_effects(ds, placebo_ending(0.1), "mlm", targets=targets({("bert", 6): False}))
    assert effect.verdict == stats.HOLDS


def test_the_persistence_facts_state_the_ends_and_each_verdict():
    ds = starts({"bert": 0.1, "symmetric": 0.8}, n_seeds=3, noise=0.0)
    placebo = init_study.as_placebo(starts({"bert": 0.1}, n_seeds=3, noise=0.0))
    effects = init_study.persistence_effects(ds, placebo, "mlm")
    assert init_study.persistence(ds, "mlm") == init_study.PersistenceFacts(
        "encoder (masked LM)", "30", "+0.10 (bert), +0.80 (symmetric)"
    )
    (arm,) = init_study.persistence_verdicts(effects)
    assert (arm.arm, arm.estimate, arm.verdict) == ("symmetric minus placebo", "+0.70", stats.CANNOT_TELL)


def test_the_persistence_table_is_the_mean_final_median_per_objective_and_init():
    table = init_study.persistence_table(starts({"bert": 0.1, "symmetric": 0.8}, noise=0.0))
    assert list(table.columns) == ["bert", "symmetric"] and list(table.index) == ["mlm"]
    np.testing.assert_allclose(table.to_numpy(), [[0.1, 0.8]])


def lucky_baseline_table() -> pd.DataFrame:
    """One objective, five seeds: the baseline drew lucky (final loss 2.90), the placebo did not (3.00 +- 0.01);
    ``symmetric-matched`` ends where the placebo does, ``symmetric`` 0.05 below it."""
    placebo = [3.00, 3.01, 2.99, 3.00, 3.01]
    matched = [3.00, 2.99, 3.00, 3.01, 3.00]
    symmetric = [p - 0.05 for p in placebo]
    rows = [
        ("mlm", init, s, 0.0, 0.0, final[s], 2.90)
        for init, final in (("symmetric", symmetric), ("symmetric-matched", matched), ("placebo", placebo))
        for s in range(5)
    ]
    return pd.DataFrame(rows, columns=init_study.COLUMNS)


def test_every_final_loss_is_read_against_the_placebo_of_its_seed_not_a_lucky_baseline():
    table = lucky_baseline_table()
    symmetric, matched = init_study.loss_effects(table)
    assert symmetric.verdict == stats.HOLDS and symmetric.estimate == pytest.approx(0.05)
    placebo, arm = (table[table.init == i].final_loss.to_numpy() for i in ("placebo", "symmetric-matched"))
    assert matched.estimate == pytest.approx(np.mean(placebo - arm)) and matched.verdict == stats.CANNOT_TELL
    (facts,) = init_study.arm_verdicts(table[table.init != "symmetric"], [matched], digits=2)
    assert facts.baseline_gains == "+0.102 [+0.090, +0.110]"  # the baseline's luck, beside the arm's estimate


def test_persistence_is_read_against_the_placebo_of_its_seed_not_a_lucky_baseline():
    treated = starts({"bert": 0.10, "symmetric": 0.45})
    (effect,) = init_study.persistence_effects(treated, placebo_ending(0.50), "mlm")
    assert effect.verdict == stats.DOES_NOT_HOLD and effect.estimate == pytest.approx(-0.05, abs=0.03)


def test_the_dataset_holds_the_final_loss_gain_over_the_placebo_per_arm_and_seed():
    runs = runs_of({"symmetric": [(2, 1.9)] * 4, "symmetric-matched": SAME}).assign_attrs(
        scored_matrix="W", runs='[{"seed": 0}]'
    )
    placebo = placebo_of([(3, 1.8)] * 4).assign_attrs(runs='[{"seed": 1}]')
    table = init_study.speedups(runs, placebo, steps=1000, smoothing=1)
    out = init_study.result_dataset(runs, placebo, table, effects=[], parameters={}, unigram_entropy=5.0, learned=True)
    gain = curve(3, 1.8)[-1] - curve(2, 1.9)[-1]
    np.testing.assert_allclose(
        out.final_loss_gain_over_placebo.sel(objective="mlm", treated_init="symmetric"), [gain] * 4
    )
    assert "long_name" in out.final_loss_gain_over_placebo.attrs
