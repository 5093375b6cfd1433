"""Notebook 05: the final state under two learning-rate schedules.

The final state of a run whose learning rate decays linearly to zero is where the decay froze the weights.
:func:`describe_schedules` prints the calibration runs of ``docs/calibration.csv`` that trained notebook 05's model
with a constant rate after warm-up and with the linear decay. Those are one seed per schedule and objective, so
they are described (their values), never judged.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from .. import notebooks
from ..report import prose
from .training_dynamics import DECODER, ENCODER

SETTINGS = {"d_model": "width {}", "n_layers": "{} layers", "steps": "{} steps", "batch_size": "{} sequences per step"}


def schedule_runs(root: str | os.PathLike | None = None) -> pd.DataFrame:
    """The calibration runs that compare learning-rate schedules (rows of ``docs/calibration.csv`` under the
    project root ``root``, default :func:`attnstruct.notebooks.find_root`, whose ``purpose`` is ``schedule``);
    empty when the file is not there (an installed package without the repository)."""
    try:
        path = Path(root or notebooks.project_root()) / "docs" / "calibration.csv"
    except notebooks.PipelineError:
        return pd.DataFrame()
    if not path.is_file():
        return pd.DataFrame()
    table = pd.read_csv(path, comment="#")
    return table[table["purpose"] == "schedule"].reset_index(drop=True)


def _setting(rows: pd.DataFrame, column: str) -> str:
    values = sorted({int(v) for v in rows[column]})
    return " or ".join(f"{v:,}" for v in values)


def describe_schedules(rows: pd.DataFrame) -> str:
    """The calibration runs' final median symmetry per schedule and objective, the encoder minus the decoder per
    schedule, their settings and seeds, and whether they met their loss targets: values of single runs, stated
    as such, with no verdict."""
    if rows.empty:
        return "No calibration runs of the schedules are recorded with this copy of the project."
    table = rows.pivot_table(index="schedule", columns="objective", values="final_symmetry", sort=False)
    per_schedule = "; ".join(
        f"`{schedule}`: " + ", ".join(f"{o} {prose.signed(v)}" for o, v in values.dropna().items())
        for schedule, values in table.iterrows()
    )
    gaps = ""
    if {ENCODER, DECODER} <= set(table.columns):
        gap = table[ENCODER] - table[DECODER]
        gaps = " Encoder minus decoder: " + ", ".join(f"`{s}` {prose.signed(v)}" for s, v in gap.items()) + "."
    settings = ", ".join(words.format(_setting(rows, column)) for column, words in SETTINGS.items())
    runs_per_cell = int(rows.groupby(["schedule", "objective"]).size().max())
    seeds = ", ".join(str(int(s)) for s in sorted(set(rows["seed"])))
    met = int(rows["met"].astype(bool).sum())
    return (
        f"Final median symmetry by schedule in the calibration runs ({settings}; "
        f"{prose.count(runs_per_cell, 'run')} per schedule and objective, seed {seeds}): {per_schedule}.{gaps} "
        f"{met} of {prose.count(len(rows), 'run')} met {'its' if len(rows) == 1 else 'their'} loss targets. Each "
        "value is that of a single run, with no interval: these numbers describe the runs and test nothing."
    )
