"""Notebook 06's final encoder-decoder ordering: the verdict on the baselines, and the schedules described."""

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from attnstruct import stats
from attnstruct.analyses import final_ordering
from attnstruct.analyses.training_dynamics import Shape

SHAPE = Shape(d_model=64, n_heads=4, n_layers=4)
COLUMNS = "purpose,objective,d_model,n_layers,steps,batch_size,seed,met,final_symmetry"


def calibration(root, rows: list[str]) -> None:
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "calibration.csv").write_text("\n".join([COLUMNS, *rows]) + "\n")


SCHEDULE_ROWS = [
    "grid,mlm,64,4.0,800,32,0,True,0.9",
    "schedule,mlm,64,4.0,600,64,0,True,0.01",
    "schedule,next-token,64,4.0,600,64,0,True,0.04",
    "schedule,mlm,64,4.0,600,64,0,True,0.08",
    "schedule,next-token,64,4.0,600,64,0,False,0.06",
]


def schedules(tmp_path) -> pd.DataFrame:
    calibration(tmp_path, SCHEDULE_ROWS)
    rows = final_ordering.schedule_runs(tmp_path)
    return rows.assign(schedule=["constant", "constant", "linear", "linear"])


def test_the_schedule_runs_are_the_calibration_rows_of_that_purpose(tmp_path):
    calibration(tmp_path, SCHEDULE_ROWS)
    rows = final_ordering.schedule_runs(tmp_path)
    assert len(rows) == 4 and set(rows["purpose"]) == {"schedule"}
    assert final_ordering.schedule_runs(tmp_path / "elsewhere").empty


def test_the_schedules_are_described_value_by_value(tmp_path):
    sentence = final_ordering.describe_schedules(schedules(tmp_path))
    assert "`constant`: mlm +0.01, next-token +0.04; `linear`: mlm +0.08, next-token +0.06." in sentence
    assert "Encoder minus decoder: `constant` -0.03, `linear` +0.02." in sentence
    assert "(width 64, 4 layers, 600 steps, 64 sequences per step; 1 run per schedule and objective, seed 0)" in (
        sentence
    )
    assert "3 of 4 runs met their loss targets" in sentence


def test_the_schedule_description_reaches_no_verdict(tmp_path):
    sentence = final_ordering.describe_schedules(schedules(tmp_path)).lower()
    for word in ("holds", "does not hold", "cannot tell", "depends", "ordering"):
        assert word not in sentence


def test_without_calibration_runs_the_description_says_so():
    assert "No calibration runs" in final_ordering.describe_schedules(pd.DataFrame())


def baselines(encoder: float, decoder: float, n_seeds: int = 6) -> xr.Dataset:
    rng = np.random.default_rng(0)
    symmetry = np.zeros((2, n_seeds, 2, 4))
    symmetry[:, :, 1] = (np.array([[encoder], [decoder]]) + 0.02 * rng.standard_normal((2, n_seeds)))[..., None]
    dims = ("objective", "seed", "step", "layer")
    coords = {"objective": ["mlm", "next-token"], "seed": range(n_seeds), "step": [0, 10], "layer": range(4)}
    return xr.Dataset({"symmetry": (dims, symmetry), "directionality": (dims, np.zeros_like(symmetry))}, coords)


def test_the_ordering_is_the_encoder_decoder_gap_of_the_baselines():
    (effect,) = final_ordering.ordering_effects(baselines(0.5, 0.0), SHAPE, n_draws=100)
    assert effect.claim == "encoder minus decoder, final median symmetry" and effect.verdict == stats.HOLDS


@pytest.mark.parametrize("objective", ["mlm", "next-token"])
def test_an_ordering_of_baselines_that_did_not_learn_is_not_judged(objective):
    index = pd.MultiIndex.from_product([["mlm", "next-token"], ["bert"], range(6)], names=["objective", "init", "seed"])
    targets = pd.DataFrame({"met": [key[0] != objective for key in index]}, index=index)
    (effect,) = final_ordering.ordering_effects(baselines(0.5, 0.0), SHAPE, targets=targets, n_draws=100)
    assert effect.reason == stats.NOT_LEARNED


def test_with_one_objective_there_is_no_ordering():
    assert final_ordering.ordering_effects(baselines(0.5, 0.0).sel(objective=["mlm"]), SHAPE) == []
