"""The speed-up of notebook 06 on curves with known answers: the metrics, the placebo, the verdicts, the sentences
and the dataset."""

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from attnstruct import reference, stats
from attnstruct.analyses import symmetric_init as speedup


def test_trailing_mean():
    np.testing.assert_allclose(speedup.trailing_mean([1, 2, 3, 4], 2), [1, 1.5, 2.5, 3.5])
    np.testing.assert_allclose(speedup.trailing_mean([5.0], 3), [5.0])
    with pytest.raises(ValueError, match="window"):
        speedup.trailing_mean([1.0], 0)


def test_robust_speedup_on_shifted_curves():
    steps = np.arange(0, 1001, 50.0)
    baseline = 2 + 3 * np.exp(-steps / 300)
    treated = 2 + 3 * np.exp(-(steps * 2) / 300)  # the same curve at twice the speed
    value, step = speedup.robust_speedup(steps, treated, baseline, 1000, window=1)
    assert step == 500 and value == pytest.approx(0.5)
    value, step = speedup.robust_speedup(steps, baseline, baseline, 1000, window=3)
    assert step == 1000 and value == 0
    value, step = speedup.robust_speedup(steps, baseline + 0.1, baseline, 1000)
    assert np.isnan(value) and np.isnan(step)


def test_robust_speedup_drops_missing_evaluations_and_refuses_bad_input():
    steps = np.array([0, 10, 20, 30, 40])
    baseline = np.array([5, np.nan, 4, np.nan, 3.0])
    treated = np.array([5, np.nan, 3, np.nan, 2.0])
    assert speedup.robust_speedup(steps, treated, baseline, 40, window=1) == (0.5, 20.0)
    with pytest.raises(ValueError, match="no finite values"):
        speedup.robust_speedup(steps, np.full(5, np.nan), baseline, 40)
    with pytest.raises(ValueError, match="increase"):
        speedup.robust_speedup(steps[::-1], treated, baseline, 40)


def test_paper_speedup_reproduces_the_authors_rule():
    """Row index i (0-based) of 1000 rows: 1 - i/1000; the digest's 4-layer Jigsaw row is index 741 -> 25.9%."""
    baseline = np.linspace(4, 2.7822, 1000)
    treated = np.full(1000, 3.0)
    treated[741:] = 2.75
    assert speedup.paper_speedup(treated, baseline) == pytest.approx(0.259)
    assert np.isnan(speedup.paper_speedup(np.full(1000, 3.0), baseline))  # never below: NaN, not the 100% artifact
    logged = np.concatenate([[np.nan], treated])  # our logs start with NaN at step 0
    assert speedup.paper_speedup(logged, np.concatenate([[np.nan], baseline])) == pytest.approx(0.259)


def test_the_reported_speedups_follow_the_authors_rule_on_their_own_rows():
    table = reference.symmetric_init()
    encoders = table[table["mode"] == "encoder"]
    assert len(encoders) == 6 and encoders["speedup"].max() == pytest.approx(0.729)
    reached = encoders.dropna(subset=["first_step_below"])
    # their rule: row index i = step / 200 - 1 of 1000 rows, speed-up 1 - i / 1000
    assert np.allclose(1 - (reached["first_step_below"] / 200 - 1) / 1000, reached["speedup"], atol=6e-4)
    never = encoders[encoders["first_step_below"].isna()]
    assert (never["symmetric_final_loss"] > never["baseline_final_loss"]).all() and never["speedup"].isna().all()


def test_never_reaching_the_level_counts_as_no_speedup():
    placebo = [0.02, -0.01, 0.0, 0.01, -0.02]
    with_nan = speedup.speedup_against_placebo([0.5, np.nan, 0.4, 0.6, 0.5], placebo, claim="x")
    with_zero = speedup.speedup_against_placebo([0.5, 0.0, 0.4, 0.6, 0.5], placebo, claim="x")
    assert with_nan == with_zero and with_nan.estimate == pytest.approx(0.4)
    assert speedup.speedup_against_placebo([0.5], [np.nan], claim="s").verdict == "cannot tell at this scale"


# ---------------------------------------------------------------------------------------------- notebook 06's runs

STEPS = np.arange(0, 1001, 50)


def curve(speed: float) -> np.ndarray:
    """A loss curve that goes ``speed`` times as fast as the baseline's (speed 1)."""
    return 2 + 3 * np.exp(-STEPS * speed / 300)


def baseline_runs(speeds=(1, 1, 1, 1)) -> xr.Dataset:
    """Baselines ``[objective, seed, step]`` of one objective, seed ``k`` at ``speeds[k]``."""
    losses = np.array([[curve(s) for s in speeds]])
    dims = ("objective", "seed", "step")
    coords = {"objective": ["mlm"], "seed": range(len(speeds)), "step": STEPS}
    return xr.Dataset({"val_loss": (dims, losses), "train_loss": (dims, losses)}, coords=coords)


def treated_runs(speeds: dict) -> xr.Dataset:
    """Treated runs ``[objective, init, seed, step]``: ``bert`` at speed 1, every init of ``speeds`` at its
    per-seed speeds."""
    inits = {"bert": [1] * len(next(iter(speeds.values())))} | speeds
    losses = np.array([[[curve(s) for s in per_seed] for per_seed in inits.values()]])
    dims = ("objective", "init", "seed", "step")
    coords = {"objective": ["mlm"], "init": list(inits), "seed": range(losses.shape[2]), "step": STEPS}
    return xr.Dataset({"val_loss": (dims, losses), "train_loss": (dims, losses)}, coords=coords)


def test_speedups_pair_each_treated_run_with_its_seeds_baseline_and_add_the_placebo():
    table = speedup.speedups(baseline_runs(), treated_runs({"symmetric": [2, 2]}), steps=1000, smoothing=1)
    assert list(zip(table["init"], table["seed"])) == [("symmetric", 0), ("symmetric", 1)] + [
        ("bert", s) for s in range(4)
    ]
    np.testing.assert_allclose(table["robust"], [0.5, 0.5, 0, 0, 0, 0])  # twice as fast: half the steps
    assert table["paper"].iloc[0] == pytest.approx(1 - 11 / 21)  # first logged row below: step 550, index 11
    assert table.loc[table["init"] == "bert", "paper"].isna().all()  # the same curve is never strictly below


def test_the_placebo_is_the_next_seeds_baseline_and_the_last_seed_wraps_to_the_first():
    baselines = baseline_runs(speeds=(1, 1, 1, 2))
    table = speedup.speedups(baselines, treated_runs({"symmetric": [1]}), steps=1000, smoothing=1)
    placebo = table[table["init"] == "bert"].set_index("seed")["robust"]
    assert placebo[2] == pytest.approx(0.5)  # seed 3's baseline, twice as fast, against seed 2's
    assert np.isnan(placebo[3])  # seed 0's against seed 3's: never reaches the faster run's final loss
    assert placebo[0] == 0 and placebo[1] == 0


def test_one_baseline_seed_gives_no_placebo_and_no_effect():
    table = speedup.speedups(baseline_runs(speeds=(1,)), treated_runs({"symmetric": [2]}), steps=1000)
    assert set(table["init"]) == {"symmetric"} and speedup.speedup_effects(table) == []
    assert "no placebo" in speedup.describe_speedups(table, [])


def long_table(symmetric, matched, placebo) -> pd.DataFrame:
    rows = [("mlm", "bert", s, v) for s, v in enumerate(placebo)]
    rows += [("mlm", "symmetric", s, v) for s, v in enumerate(symmetric)]
    rows += [("mlm", "symmetric-matched", s, v) for s, v in enumerate(matched)]
    table = pd.DataFrame(rows, columns=["objective", "init", "seed", "robust"])
    return table.assign(paper=table["robust"])


TABLE = long_table([0.5, 0.55, 0.45, 0.52, 0.48], [0.0, 0.03, np.nan, 0.02, 0.01], [0.02, -0.0, 0.05, np.nan, 0.01])


def test_speedups_are_read_against_the_placebo():
    effects = speedup.speedup_effects(TABLE)
    assert [e.claim for e in effects] == [
        "mlm: speed-up of symmetric minus the placebo's",
        "mlm: speed-up of symmetric-matched minus the placebo's",
    ]
    assert [e.verdict for e in effects] == ["holds", "cannot tell at this scale"]


def targets_where(missed: set) -> pd.DataFrame:
    """Loss targets of every run of ``TABLE`` (baselines as init ``bert``), met except the ``(init, seed)`` in
    ``missed``."""
    index = pd.MultiIndex.from_tuples(
        [("mlm", i, s) for i, s in zip(TABLE["init"], TABLE["seed"])], names=["objective", "init", "seed"]
    )
    return pd.DataFrame({"met": [(i, s) not in missed for _, i, s in index]}, index=index)


def test_a_speedup_of_a_treated_run_that_did_not_learn_is_not_judged():
    effects = speedup.speedup_effects(TABLE, targets=targets_where({("symmetric", 3)}))
    assert [e.reason for e in effects][0] == stats.NOT_LEARNED and effects[1].reason != stats.NOT_LEARNED


def test_a_baseline_that_did_not_learn_gates_every_speedup_of_its_objective():
    effects = speedup.speedup_effects(TABLE, targets=targets_where({("bert", 4)}))
    assert [e.reason for e in effects] == [stats.NOT_LEARNED] * 2


def test_spread_is_the_median_and_range_of_the_seeds_that_reached_the_level():
    assert speedup.spread([0.2, 0.5, 0.3]) == "30% [20%, 50%]"
    assert speedup.spread([0.2, np.nan, 0.4]) == "30% [20%, 40%], 1 seed(s) never"
    assert speedup.spread([np.nan, np.nan]) == "never (0/2 seeds)"


def test_the_summary_has_one_row_per_init_and_the_placebo_last():
    summary = speedup.speedup_summary(TABLE)
    assert list(summary.index) == [("mlm", "bert (placebo)"), ("mlm", "symmetric"), ("mlm", "symmetric-matched")]
    assert summary.loc[("mlm", "symmetric"), "robust speed-up, median [min, max] over seeds"] == "50% [45%, 55%]"


def test_the_speedup_paragraph_words_each_verdict_and_says_whether_the_design_can_decide():
    effects = speedup.speedup_effects(TABLE)
    paragraph = speedup.describe_speedups(TABLE, effects)
    assert f"- **symmetric** (encoder (masked LM)): {speedup.SPEEDUP_WORDS['holds']} (robust speed-up 50%" in paragraph
    assert f"- **symmetric-matched** (encoder (masked LM)): {speedup.SPEEDUP_WORDS['cannot tell at this scale']}" in (
        paragraph
    )
    assert "With 5 seeds against 5 placebo pairs" in paragraph and "the design can reach a verdict" in paragraph
    few = long_table([0.5, 0.5], [0.1, 0.1], [0.0, 0.0])
    assert "not below alpha" in speedup.describe_speedups(few, speedup.speedup_effects(few))


def test_the_speedup_paragraph_of_one_treated_seed_has_no_interval():
    one = long_table([0.5], [0.1], [0.0, 0.0])
    paragraph = speedup.describe_speedups(one, speedup.speedup_effects(one))
    assert "one treated seed, no interval" in paragraph and "nan" not in paragraph


def test_the_placebo_curves_are_each_next_seeds_loss_minus_its_own():
    losses = baseline_runs(speeds=(1, 2, 3)).val_loss.sel(objective="mlm")
    losses[:, 1::2] = np.nan  # evaluated every other record
    curves = speedup.placebo_curves(losses)
    assert curves.sizes == {"pair": 3, "step": 11}
    np.testing.assert_allclose(curves.isel(pair=2), (losses.sel(seed=0) - losses.sel(seed=2)).dropna("step"))
    assert speedup.placebo_curves(losses.sel(seed=[0])) is None


def test_loss_differences_are_against_the_baseline_of_the_same_seed():
    treated = treated_runs({"symmetric": [2, 3]})
    difference = speedup.loss_differences(treated, "mlm", "symmetric")
    np.testing.assert_allclose(difference.sel(seed=1), curve(3) - curve(1))


def test_the_dataset_holds_both_speedups_per_treated_seed_and_the_placebos():
    treated = treated_runs({"symmetric": [2, 2], "symmetric-matched": [1, 1]}).assign_attrs(
        scored_matrix="W", runs="[]"
    )
    table = speedup.speedups(baseline_runs(), treated, steps=1000, smoothing=1)
    out = speedup.result_dataset(
        treated, table, baseline_seeds=range(4), effects=[], parameters={}, unigram_entropy=5.0, learned=True
    )
    assert out.robust_speedup.dims == ("objective", "treated_init", "seed")
    assert list(out.treated_init.values) == ["symmetric", "symmetric-matched"]
    np.testing.assert_allclose(out.robust_speedup.sel(objective="mlm"), [[0.5, 0.5], [0, 0]])
    np.testing.assert_allclose(out.placebo_robust_speedup.sel(objective="mlm"), [0, 0, 0, 0])
    assert out.placebo_paper_speedup.dims == ("objective", "baseline_seed") and out.attrs["verdicts"] == "{}"
    assert out.attrs["loss_targets_met"] == "yes" and "long_name" in out.placebo_robust_speedup.attrs


def test_without_a_placebo_the_placebo_variables_are_missing_values():
    treated = treated_runs({"symmetric": [2]}).assign_attrs(scored_matrix="W", runs="[]")
    table = speedup.speedups(baseline_runs(speeds=(1,)), treated, steps=1000, smoothing=1)
    variables = speedup.speedup_variables(table, treated, baseline_seeds=[0])
    assert np.isnan(variables.placebo_robust_speedup).all() and variables.robust_speedup.item() == 0.5


def test_the_reported_sentence_lists_the_papers_encoders():
    table = pd.DataFrame(
        {
            "n_layers": [4, 12, 12, 4],
            "mode": ["encoder", "encoder", "encoder", "decoder"],
            "dataset": ["a", "b", "c", "d"],
            "speedup": [0.259, 0.2, np.nan, 0.5],
        }
    )
    sentence = speedup.describe_reported(table)
    assert "4-layer encoders 25.9% (a); 12-layer encoders 20.0% (b), and none on c:" in sentence
    assert "(d)" not in sentence


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"inits": ["symmetric", "bert"]}, "must start with the baseline"),
        ({"treated_seeds": [7]}, "must be among seeds"),
        ({"treated_objectives": ["next-token"]}, "must be among objectives"),
        ({"smoothing": 0}, "smoothing"),
    ],
)
def test_a_design_notebook_06_cannot_read_is_refused(change, message):
    design = {
        "inits": ["bert", "symmetric"],
        "objectives": ["mlm"],
        "treated_objectives": ["mlm"],
        "seeds": [0, 1],
        "treated_seeds": [0],
        "smoothing": 3,
    }
    with pytest.raises(ValueError, match=message):
        speedup.check_design(**(design | change))
