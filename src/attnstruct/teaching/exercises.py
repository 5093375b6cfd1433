"""The notebooks' exercises in nbgrader's markup, and the student version generated from them.

An exercise is three consecutive cells of a notebook source (``notebooks/NN_topic.py``)::

    ### Exercise NN.k: title          Markdown: the prompt
    nbgrader.solution, grade_id ex-NN-k       code: the solution between ### BEGIN SOLUTION / ### END SOLUTION
    nbgrader.grade,    grade_id ex-NN-k-check code: the autograder check (asserts)

The notebook as committed is the solution version: ``make reproduce`` runs every check against its solution.
:func:`student_version` applies nbgrader's own preprocessors (``ClearSolutions`` replaces each solution region
with ``raise NotImplementedError()``, ``ClearHiddenTests``, ``ClearOutput``, ``LockCells``), so the student copy
is generated, never kept by hand; ``make exercises`` writes one per notebook from the course version of the notebook
(:func:`attnstruct.teaching.course_notebooks.write_student_notebooks`); ``make course`` builds an nbgrader course
from the same versions (:mod:`attnstruct.teaching.course`).
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
INJECTED = "injected-parameters"  # papermill's tag on the cell it adds: a run's parameters, paths included
PROMPT = re.compile(r"^#{2,4}\s+Exercise\s+(\d{2})\.(\d+)\s*:\s*(.+)$", re.M)
THEORY_NOTEBOOKS = ("01", "02", "04")  # the bilinear form, the scores, the gradient: at least three exercises each
MIN_EXERCISES = {"theory": 3, "other": 1}


class ExerciseError(ValueError):
    """A notebook's exercise markup is incomplete: names the notebook, the exercise and what is missing."""


@dataclass(frozen=True)
class Exercise:
    """One exercise of a notebook: its cells' indices and sources."""

    notebook: str
    grade_id: str
    number: str  # "NN.k"
    title: str
    prompt: str
    solution: str
    check: str
    cells: tuple[int, int, int]  # (prompt, solution, check) indices in the notebook


def _nbgrader(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def is_solution(cell) -> bool:
    return bool(_nbgrader(cell).get("solution"))


def is_check(cell) -> bool:
    return bool(_nbgrader(cell).get("grade")) and cell.get("cell_type") == "code"


def exercises(nb, name: str = "notebook") -> list[Exercise]:
    """The exercises of ``nb`` in order, each validated: a prompt heading ``Exercise NN.k: title`` right before
    its solution cell, the solution region's markers, and a check cell ``<grade_id>-check`` right after it.

    Raises :class:`ExerciseError` (one line) for a solution without prompt, markers or check.
    """
    found = []
    cells = nb.cells
    for i, cell in enumerate(cells):
        if not is_solution(cell):
            continue
        grade_id = _nbgrader(cell).get("grade_id", "")
        where = f"{name}: exercise {grade_id or f'at cell {i}'}"
        if cell.cell_type != "code" or BEGIN not in cell.source or END not in cell.source:
            raise ExerciseError(f"{where}: the solution cell has no '{BEGIN}' ... '{END}' region")
        prompt = cells[i - 1] if i > 0 else None
        heading = PROMPT.search(prompt.source) if prompt is not None and prompt.cell_type == "markdown" else None
        if heading is None:
            raise ExerciseError(f"{where}: no Markdown prompt '### Exercise NN.k: title' right before the solution")
        check = cells[i + 1] if i + 1 < len(cells) else None
        if check is None or not is_check(check) or _nbgrader(check).get("grade_id") != f"{grade_id}-check":
            raise ExerciseError(f"{where}: no check cell with grade_id '{grade_id}-check' right after the solution")
        number = f"{heading.group(1)}.{heading.group(2)}"
        found.append(
            Exercise(
                name,
                grade_id,
                number,
                heading.group(3).strip(),
                prompt.source,
                cell.source,
                check.source,
                (i - 1, i, i + 1),
            )
        )
    ids = [e.grade_id for e in found]
    if len(set(ids)) != len(ids):
        raise ExerciseError(f"{name}: grade_ids repeat: {sorted(g for g in ids if ids.count(g) > 1)}")
    return found


def required_exercises(name: str) -> int:
    """The least number of exercises notebook ``name`` must hold (three for the theory notebooks, else one)."""
    return MIN_EXERCISES["theory" if name[:2] in THEORY_NOTEBOOKS else "other"]


def without_run_record(nb):
    """``nb``, changed in place, without what papermill recorded of the run that executed it: the notebook's
    ``metadata.papermill`` (the input notebook itself when it was handed over in memory, solutions included; the
    parameters and the output path, absolute paths of the build machine), each cell's, and the injected parameters
    cell (tagged :data:`INJECTED`, those paths again). What a reader is handed carries none of them."""
    nb.metadata.pop("papermill", None)
    nb.cells = [cell for cell in nb.cells if INJECTED not in cell.get("metadata", {}).get("tags", [])]
    for cell in nb.cells:
        cell.metadata.pop("papermill", None)
    return nb


def student_version(nb):
    """A copy of ``nb`` with every solution region replaced by a stub, hidden tests and outputs removed and the
    prompt and check cells locked, by nbgrader's preprocessors, and without the record of any papermill run
    (:func:`without_run_record`); the solution version is left untouched."""
    from nbgrader.preprocessors import ClearHiddenTests, ClearOutput, ClearSolutions, LockCells

    student = without_run_record(copy.deepcopy(nb))
    resources = {"language": "python"}
    for step in (ClearSolutions(enforce_metadata=True), ClearHiddenTests(), ClearOutput(), LockCells()):
        student, resources = step.preprocess(student, resources)
    return student
