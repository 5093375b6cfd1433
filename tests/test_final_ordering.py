"""Notebook 05's schedules: the calibration runs of two learning-rate schedules, described and never judged."""

import pandas as pd

from attnstruct.analyses import final_ordering

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
