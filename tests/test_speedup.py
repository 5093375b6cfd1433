"""The speed-up metrics of notebook 06 on curves with known answers."""

import numpy as np
import pytest

from attnstruct import speedup


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
    table = speedup.reported()
    encoders = table[table["mode"] == "encoder"]
    assert len(encoders) == 6 and encoders["speedup"].max() == pytest.approx(0.729)
    reached = encoders.dropna(subset=["first_step_below"])
    # their rule: row index i = step / 200 - 1 of 1000 rows, speed-up 1 - i / 1000
    assert np.allclose(1 - (reached["first_step_below"] / 200 - 1) / 1000, reached["speedup"], atol=6e-4)
    never = encoders[encoders["first_step_below"].isna()]
    assert (never["symmetric_final_loss"] > never["baseline_final_loss"]).all() and never["speedup"].isna().all()
