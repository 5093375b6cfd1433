"""The notebooks' exercises in nbgrader's markup, and the student version generated from them.

An exercise is three consecutive cells of a notebook source (``notebooks/NN_topic.py``)::

    ### Exercise NN.k: title          Markdown: the prompt, with its header line (below)
    nbgrader.solution, grade_id ex-NN-k       code: the solution between ### BEGIN SOLUTION / ### END SOLUTION
    nbgrader.grade,    grade_id ex-NN-k-check code: the autograder check (asserts)

and, for an exercise that asks for a reason, a fourth: a Markdown cell ``ex-NN-k-explain`` right after the check,
``grade`` and ``solution`` both true, holding the instructor's answer; nbgrader leaves it to be graded by hand.

**The header** is one line of the prompt, ARENA's difficulty, importance and time in a form read back here::

    > **Difficulty** 2/5 · **Importance** 4/5 · **About** 10 min

**Points by weight**: a check is worth its exercise's difficulty (:func:`check_points`, 1 to 5 points), an
explanation :data:`EXPLAIN_POINTS`; :func:`exercises` refuses a check cell whose ``points`` differ.

The notebook as committed is the solution version: ``make reproduce`` runs every check against its solution.
:func:`student_version` applies nbgrader's own preprocessors (``ClearSolutions``, ``ClearHiddenTests``,
``ClearOutput``, ``LockCells``), so the student copy is generated, never kept by hand. Its ``ClearSolutions`` is
:class:`NamedStubs`: a solution region at the top level of a cell becomes one ``name = ...  # YOUR CODE HERE``
line per name it binds (what the check reads), one inside a function nbgrader's ``raise NotImplementedError()``;
the course's ``nbgrader_config.py`` uses the same class. A Markdown explanation becomes ``YOUR ANSWER HERE``.
``make exercises`` writes one student copy per notebook from the course version of the notebook
(:func:`attnstruct.teaching.course_notebooks.write_student_notebooks`); ``make course`` builds an nbgrader course
from the same versions (:mod:`attnstruct.teaching.course`).
"""

from __future__ import annotations

import ast
import copy
import functools
import re
from dataclasses import dataclass

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
INJECTED = "injected-parameters"  # papermill's tag on the cell it adds: a run's parameters, paths included
PROMPT = re.compile(r"^#{2,4}\s+Exercise\s+(\d{2})\.(\d+)\s*:\s*(.+)$", re.M)
THEORY_NOTEBOOKS = ("01", "02", "04")  # the bilinear form, the scores, the gradient: at least three exercises each
MIN_EXERCISES = {"theory": 3, "other": 1}
HEADER = re.compile(
    r"^>\s*\*\*Difficulty\*\*\s+([1-5])/5\s+·\s+\*\*Importance\*\*\s+([1-5])/5\s+·\s+\*\*About\*\*\s+(\d+)\s+min\s*$",
    re.M,
)
HEADER_FORM = "> **Difficulty** D/5 · **Importance** I/5 · **About** M min"
EXPLAIN_POINTS = 1
STUB_LINE = "{name} = ...  # YOUR CODE HERE"


def check_points(difficulty: int) -> int:
    """The points of an exercise's check: its difficulty (1 to 5)."""
    return difficulty


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
    difficulty: int = 1  # 1 to 5, the header's
    importance: int = 1  # 1 to 5
    minutes: int = 0  # the time a student should spend
    explain: str | None = None  # the instructor's answer of the hand-graded explanation, if the exercise has one
    explain_cell: int | None = None

    @property
    def auto_points(self) -> int:
        """The points its check gives when it passes (autograded)."""
        return check_points(self.difficulty)

    @property
    def manual_points(self) -> int:
        """The points of its explanation, graded by hand (0 without one)."""
        return EXPLAIN_POINTS if self.explain is not None else 0


def _nbgrader(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def is_explanation(cell) -> bool:
    """A Markdown answer graded by hand: nbgrader's ``grade`` and ``solution`` both set."""
    meta = _nbgrader(cell)
    return cell.get("cell_type") == "markdown" and bool(meta.get("solution")) and bool(meta.get("grade"))


def is_solution(cell) -> bool:
    """A code cell to complete (an explanation is not one: :func:`is_explanation`)."""
    return bool(_nbgrader(cell).get("solution")) and not is_explanation(cell)


def is_check(cell) -> bool:
    return bool(_nbgrader(cell).get("grade")) and cell.get("cell_type") == "code"


def exercises(nb, name: str = "notebook") -> list[Exercise]:
    """The exercises of ``nb`` in order, each validated: a prompt heading ``Exercise NN.k: title`` right before
    its solution cell with its header line (:data:`HEADER_FORM`), the solution region's markers, a check cell
    ``<grade_id>-check`` right after it worth :func:`check_points`, and the explanation ``<grade_id>-explain``
    after the check when there is one.

    Raises :class:`ExerciseError` (one line) for a solution without prompt, header, markers or check, or a check
    or explanation worth other points than the rule's.
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
        header = HEADER.search(prompt.source)
        if header is None:
            raise ExerciseError(f"{where}: no header '{HEADER_FORM}' in the prompt")
        difficulty, importance, minutes = (int(header.group(k)) for k in (1, 2, 3))
        points = _nbgrader(check).get("points")
        if points != check_points(difficulty):
            raise ExerciseError(
                f"{where}: the check is worth {points} points, the rule gives {check_points(difficulty)}"
            )
        after = cells[i + 2] if i + 2 < len(cells) else None
        explained = after is not None and is_explanation(after)
        if explained and (
            _nbgrader(after).get("grade_id") != f"{grade_id}-explain"
            or _nbgrader(after).get("points") != EXPLAIN_POINTS
        ):
            raise ExerciseError(f"{where}: its explanation needs grade_id '{grade_id}-explain', {EXPLAIN_POINTS} point")
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
                difficulty,
                importance,
                minutes,
                after.source if explained else None,
                i + 2 if explained else None,
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


def _named_stub(region: list[str]) -> str | None:
    """``name = ...  # YOUR CODE HERE`` per name a top-level region binds (those starting ``ex_`` when there are
    some: the names a check reads), in order; None when it binds none."""
    try:
        tree = ast.parse("\n".join(region))
    except SyntaxError:
        return None
    names = []
    for node in tree.body:
        for target in [n for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]:
            if target.id not in names:
                names.append(target.id)
    answers = [name for name in names if name.startswith("ex_")] or names  # a student's names start with ex_
    return "\n".join(STUB_LINE.format(name=name) for name in answers) or None


@functools.cache
def _named_stubs():
    """The class ``NamedStubs``, defined on first use: nbgrader (a development dependency) is imported only by what
    builds a student copy or a course (``from attnstruct.teaching.exercises import NamedStubs``)."""
    from nbgrader.preprocessors import ClearSolutions

    class _NamedStubs(ClearSolutions):
        """nbgrader's ``ClearSolutions``, except that a solution region at the top level of a code cell becomes
        ``name = ...  # YOUR CODE HERE`` for each name it binds: the student sees what the check needs."""

        def _replace_solution_region(self, cell, language):
            lines = cell.source.split("\n")
            begins = [k for k, ln in enumerate(lines) if self.begin_solution_delimeter in ln]
            ends = [k for k, ln in enumerate(lines) if self.end_solution_delimeter in ln]
            paired = len(begins) == len(ends) and all(b < e for b, e in zip(begins, ends))
            paired = paired and all(e < b for e, b in zip(ends, begins[1:]))
            if cell.cell_type != "code" or not begins or not paired:
                return super()._replace_solution_region(cell, language)  # nbgrader's stubs, and its errors
            default = self.code_stub[language].split("\n")
            new, last = [], 0
            for begin, end in zip(begins, ends):
                indent = re.match(r"\s*", lines[begin]).group(0)
                named = None if indent else _named_stub(lines[begin + 1 : end])
                new += lines[last:begin] + (named.split("\n") if named else [indent + ln for ln in default])
                last = end + 1
            cell.source = "\n".join(new + lines[last:])
            return True

    _NamedStubs.__name__ = _NamedStubs.__qualname__ = "NamedStubs"
    _NamedStubs.__module__ = __name__
    return _NamedStubs


def assignment_preprocessors() -> list:
    """nbgrader's ``generate_assignment`` preprocessors with ``ClearSolutions`` replaced by ``NamedStubs``: the
    course's ``nbgrader_config.py`` sets them, so its release stubs as :func:`student_version` does."""
    from nbgrader.converters import GenerateAssignment
    from nbgrader.preprocessors import ClearSolutions

    return [_named_stubs() if step is ClearSolutions else step for step in GenerateAssignment().preprocessors]


def __getattr__(name: str):
    if name == "NamedStubs":
        return _named_stubs()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def student_version(nb):
    """A copy of ``nb`` with every solution region replaced by a stub, hidden tests and outputs removed and the
    prompt and check cells locked, by nbgrader's preprocessors, and without the record of any papermill run
    (:func:`without_run_record`); the solution version is left untouched."""
    from nbgrader.preprocessors import ClearHiddenTests, ClearOutput, LockCells

    student = without_run_record(copy.deepcopy(nb))
    resources = {"language": "python"}
    for step in (_named_stubs()(enforce_metadata=True), ClearHiddenTests(), ClearOutput(), LockCells()):
        student, resources = step.preprocess(student, resources)
    return student
