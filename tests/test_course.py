"""The nbgrader course (``make course``): the course version of a notebook, the course folder, and the round trip
through nbgrader itself (generate the assignments, autograde a solved and an unsolved submission)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from attnstruct import notebooks
from attnstruct.teaching import course, course_notebooks, exercises

from student_facing import held_lines, leaks, solution_lines

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = [p.stem for p in notebooks.list_notebooks(ROOT)]


def _solution(grade_id: str, source: str):
    meta = {"grade": False, "grade_id": grade_id, "locked": False, "schema_version": 3, "solution": True}
    return new_code_cell(f"### BEGIN SOLUTION\n{source}\n### END SOLUTION", metadata={"nbgrader": meta})


def _check(grade_id: str, source: str):
    meta = {"grade": True, "grade_id": f"{grade_id}-check", "locked": True, "points": 1, "schema_version": 3}
    return new_code_cell(source, metadata={"nbgrader": {**meta, "solution": False}})


def toy(exercise_reads: str) -> nbformat.NotebookNode:
    """A story with one slow cell (binds ``runs``), a cell drawing it, then one exercise reading ``exercise_reads``."""
    return new_notebook(
        cells=[
            new_markdown_cell("# 09 · Toy"),
            new_code_cell("steps = 1000", metadata={"tags": ["parameters"]}),
            new_markdown_cell("## 1. Training"),
            new_code_cell("runs = [steps] * 3\nstart = 0", metadata={"tags": ["slow"]}),
            new_markdown_cell("## 2. Figure"),
            new_code_cell("for run in runs:\n    print(run)"),
            new_code_cell("other = 2"),
            new_markdown_cell("## Exercises"),
            new_markdown_cell(
                "### Exercise 09.1: read it\n\n> **Difficulty** 1/5 · **Importance** 1/5 · **About** 5 min\n\nDo it."
            ),
            _solution("ex-09-1", f"answer = len({exercise_reads})"),
            _check("ex-09-1", "assert answer == 3"),
        ]
    )


def test_an_exercise_that_reads_the_slow_cells_result_needs_it():
    nb = toy("runs")
    assert course_notebooks.exercises_needing(nb, 3, "09_toy") == ["09.1"]
    assert course_notebooks.slow_cell_note(nb, 3, "09_toy").startswith("**Slow cell, needed by Exercise 09.1**")


def test_a_slow_cell_no_exercise_reads_is_marked_to_skip_with_the_cells_that_draw_it():
    nb = toy("[other, other, other]")
    assert course_notebooks.dependent_cells(nb, 3)[0] == [5]
    note = course_notebooks.slow_cell_note(nb, 3, "09_toy")
    assert note.startswith("**Slow cell, no exercise needs it**") and "Skip the 1 later cell " in note
    assert "*2. Figure*" in note


def test_a_name_bound_in_the_reading_cell_is_not_read_from_before():
    assert course_notebooks.loaded_names("for runs in range(3):\n    print(runs)") == {"print", "range"}
    assert course_notebooks.loaded_names("def f(runs):\n    return runs\nf(x)") == {"x"}


def test_the_course_version_injects_the_course_parameters_after_the_parameters_cell():
    source = ROOT / "notebooks" / "05_training_dynamics.py"
    nb = course_notebooks.course_notebook(ROOT, source)
    at = next(i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", []))
    injected = nb.cells[at + 2]
    assert course_notebooks.COURSE_TAG in injected.metadata["tags"]
    namespace: dict = {}
    exec(injected.source, namespace)  # noqa: S102 - the cell is ours: name = repr(value) lines
    wanted = notebooks.load_profile(ROOT, "course")["05_training_dynamics"]
    assert {k: namespace[k] for k in wanted} == wanted


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_every_prompt_of_the_course_version_is_read_only(name):
    nb = course_notebooks.course_notebook(ROOT, ROOT / "notebooks" / f"{name}.py")
    for exercise in exercises.exercises(nb, name):
        meta = nb.cells[exercise.cells[0]].metadata["nbgrader"]
        assert meta["locked"] and not meta["solution"] and not meta["grade"], exercise.number
    locked = [c for c in exercises.student_version(nb).cells if c.metadata.get("deletable") is False]
    assert len(locked) >= 2 * len(exercises.exercises(nb, name))  # prompts and checks


def test_the_cell_timeout_is_four_times_the_slowest_cell_and_at_least_a_minute():
    def executed(*seconds):
        cells = [new_code_cell("x", metadata={"papermill": {"duration": s}}) for s in seconds]
        return new_notebook(cells=cells)

    assert course.cell_timeout({"a": executed(1.0, 2.0)}) == (60, "a cell 1, 2.0 s")
    assert course.cell_timeout({"a": executed(1.0), "b": executed(30.2, 3)})[0] == 121


def test_a_work_folder_not_run_at_the_course_profile_is_a_one_line_error_and_writes_nothing(tmp_path, capsys):
    assert course.main(["--out", str(tmp_path / "course"), "--work", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("attnstruct course: error: ") and "course profile" in err and "\n" not in err
    assert not (tmp_path / "course" / "source").exists() and not (tmp_path / "course" / "release").exists()


# The round trip through nbgrader: a course built around the tests' build (executed at the course profile), its
# assignments autograded for a student who submits the solutions and for one who submits the release untouched.
# Two assignments stand for the eight (each autograde re-runs a whole notebook twice): 01, whose exercises are all
# computations, and 05, whose Exercise 05.3 needs a slow cell that must find its runs stored, not train. Every
# notebook's checks also pass on its solution version and fail on its student version (tests/test_exercises.py).
ROUND_TRIP = ("01_bilinear_form", "05_training_dynamics")


def _score(course_dir: Path, assignment: str, student: str) -> tuple[float, float]:
    """(score, max score) of a submission, from nbgrader's gradebook."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course_dir / 'gradebook.db'}") as gradebook:
        submission = gradebook.find_submission(assignment, student)
        return float(submission.score), float(submission.max_score)


@pytest.fixture(scope="module")
def graded_course(executed_build, tmp_path_factory):
    """The course of :data:`ROUND_TRIP`, built around a copy of the tests' build, both submissions autograded."""
    for name in ROUND_TRIP:
        executed_build(name)
    tmp = tmp_path_factory.mktemp("course")
    work = tmp / "course" / "work"
    shutil.copytree(executed_build.build_dir / "notebooks", work / "notebooks")
    shutil.copytree(executed_build.build_dir / "results", work / "results")
    course_dir = course.build_course(ROOT, work, tmp / "course", only=list(ROUND_TRIP), log=lambda message: None)
    for name in ROUND_TRIP:
        for student, folder in (("solved", "source"), ("unsolved", "release")):
            target = course_dir / "submitted" / student / name / f"{name}.ipynb"
            target.parent.mkdir(parents=True)
            shutil.copy2(course_dir / folder / name / f"{name}.ipynb", target)
        done = subprocess.run(
            [sys.executable, "-m", "nbgrader", "autograde", name, "--force"],
            cwd=course_dir,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr[-3000:]
    return course_dir


@pytest.mark.notebook
def test_make_course_writes_the_nbgrader_layout(graded_course):
    config = (graded_course / "nbgrader_config.py").read_text()
    assert 'ATTNSTRUCT_STORED_RUNS_ONLY"] = "1"' in config and "c.Execute.timeout = " in config
    assert sorted(p.name for p in (graded_course / "source").iterdir()) == sorted(ROUND_TRIP)
    for name in ROUND_TRIP:
        released = nbformat.read(graded_course / "release" / name / f"{name}.ipynb", as_version=4)
        assert exercises.BEGIN not in nbformat.writes(released), name
        checks = [c for c in released.cells if c.metadata.get("nbgrader", {}).get("grade")]
        assert checks and all(c.metadata["nbgrader"].get("checksum") for c in checks), name
        assert "papermill" not in released.metadata, name
    released = nbformat.writes(
        nbformat.read(graded_course / "release" / "01_bilinear_form" / "01_bilinear_form.ipynb", 4)
    )
    assert "ex_w_q = ...  # YOUR CODE HERE" in released and "YOUR ANSWER HERE" in released


def test_the_course_release_uses_the_named_stubs_of_the_student_version():
    from nbgrader.preprocessors import ClearSolutions

    steps = exercises.assignment_preprocessors()
    assert exercises.NamedStubs in steps and ClearSolutions not in steps
    assert "c.GenerateAssignment.preprocessors = assignment_preprocessors()" in course.config_text(60, "none")


@pytest.mark.notebook
def test_no_file_of_the_release_holds_a_solution_line_or_a_build_path(graded_course):
    lines = set().union(*solution_lines(ROOT).values())
    assert lines & held_lines(graded_course / "source", lines)  # the reader finds them where they are meant to be
    assert leaks(graded_course / "release", lines, (str(graded_course), str(ROOT))) == []


@pytest.mark.notebook
@pytest.mark.parametrize("name", ROUND_TRIP)
def test_autograde_gives_full_points_to_the_solutions_and_none_to_the_release(graded_course, name):
    """Full autograded points solved (the explanations wait for a hand), none unsolved; the most counts both."""
    found = exercises.exercises(notebooks.read_notebook(ROOT / "notebooks" / f"{name}.py"), name)
    auto, manual = sum(e.auto_points for e in found), sum(e.manual_points for e in found)
    score, most = _score(graded_course, name, "solved")
    assert most == auto + manual
    assert score == auto, f"{name}: the solutions score {score} of {auto} autograded points"
    assert _score(graded_course, name, "unsolved") == (0.0, most)


@pytest.mark.notebook
def test_feedback_typesets_its_maths_with_the_mathjax_in_the_course_folder(graded_course):
    done = subprocess.run(
        [sys.executable, "-m", "nbgrader", "generate_feedback", "01_bilinear_form", "--force"],
        cwd=graded_course,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    page = graded_course / "feedback" / "solved" / "01_bilinear_form" / "01_bilinear_form.html"
    html = page.read_text(encoding="utf-8")
    assert "cdnjs" not in html and "cloudflare" not in html
    (src,) = re.findall(r'<script[^>]*src="([^"]*MathJax\.js[^"]*)"', html)
    assert (page.parent / src.split("?")[0]).resolve().is_file()  # the copy a page opened offline finds


def _in_class_exercises() -> list[tuple[str, str]]:
    from attnstruct.teaching import lecture_path

    return [
        (step["notebook"], step["section"].removeprefix("Exercise "))
        for session in lecture_path.sessions_of(ROOT)
        for step in session["steps"]
        if step["mode"] == "exercise"
    ]


@pytest.mark.parametrize("name, number", _in_class_exercises())
def test_every_in_class_exercise_that_reads_runs_sees_at_least_three_seeds_at_the_course_profile(name, number):
    seeds = course_notebooks.exercise_seeds(ROOT, name, number)
    assert seeds is None or seeds >= 3, f"Exercise {number} reads {seeds} seed(s) at the course profile"


def test_exercise_05_3_reads_runs_and_so_the_count_is_not_vacuous():
    assert course_notebooks.exercise_seeds(ROOT, "05_training_dynamics", "05.3") == 5
    assert course_notebooks.exercise_seeds(ROOT, "01_bilinear_form", "01.2") is None  # reads no runs


def test_the_course_version_points_an_exercise_at_the_shipped_quick_runs():
    nb = course_notebooks.course_notebook(ROOT, ROOT / "notebooks" / "05_training_dynamics.py")
    (found,) = [e for e in exercises.exercises(nb, "05_training_dynamics") if e.number == "05.3"]
    before = nb.cells[found.cells[0] - 1]
    assert course_notebooks.QUICK_TAG in before.metadata["tags"]
    assert "quick_dataset('05_training_dynamics', dataset)" in before.source


def test_shipping_copies_the_quick_datasets_the_in_class_exercises_read(tmp_path):
    quick = tmp_path / "quick" / "results"
    quick.mkdir(parents=True)
    (quick / "05_training_dynamics.nc").write_bytes(b"stored runs")
    (quick / "03_pretrained_models.nc").write_bytes(b"not read by an in-class exercise")
    shipped = course_notebooks.ship_quick_data(quick, tmp_path / "work")
    assert shipped == [tmp_path / "work" / "quick" / "results" / "05_training_dynamics.nc"]
    assert shipped[0].read_bytes() == b"stored runs"
    assert course_notebooks.ship_quick_data(tmp_path / "nowhere", tmp_path / "work2") == []


def test_quick_dataset_reads_the_shipped_runs_and_else_keeps_the_notebooks_own(tmp_path, monkeypatch):
    import numpy as np
    import xarray as xr

    from attnstruct.teaching import exercise_runs

    monkeypatch.setenv("ATTNSTRUCT_WORK", str(tmp_path))
    own = xr.Dataset({"symmetry": ("seed", np.zeros(1))}, coords={"seed": [0]})
    assert exercise_runs.quick_dataset("05_training_dynamics", own) is own
    shipped = xr.Dataset({"symmetry": ("seed", np.zeros(5))}, coords={"seed": list(range(5))})
    (tmp_path / "quick" / "results").mkdir(parents=True)
    shipped.to_netcdf(tmp_path / "quick" / "results" / "05_training_dynamics.nc")
    assert exercise_runs.quick_dataset("05_training_dynamics", own).sizes["seed"] == 5
