"""The exercises: nbgrader markup complete, every check passes solved and fails unsolved, the student copy runs."""

import jupytext
import nbformat
import pytest

from attnstruct import notebooks
from attnstruct.teaching import course_notebooks, exercises

from conftest import ROOT
from student_facing import as_papermill_leaves_it, leaks, solution_lines

NOTEBOOKS = [p.stem for p in notebooks.list_notebooks(ROOT)]
SOLUTION = 'nbgrader={"grade": false, "grade_id": "ex-01-1", "locked": false, "schema_version": 3, "solution": true}'
CHECK = (
    'nbgrader={"grade": true, "grade_id": "ex-01-1-check", "locked": true, "points": 1, "schema_version": 3, '
    '"solution": false}'
)


HEADER = "> **Difficulty** 1/5 · **Importance** 3/5 · **About** 5 min"
EXPLAIN = (
    'nbgrader={"grade": true, "grade_id": "ex-01-1-explain", "locked": false, "points": 1, "schema_version": 3, '
    '"solution": true}'
)


def toy(prompt="### Exercise 01.1: double it", solution=SOLUTION, check=CHECK, markers=True, header=HEADER):
    body = "    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION" if markers else "    return 2 * x"
    text = (
        f"# %%\nbefore = 1\n\n# %% [markdown]\n# {prompt}\n#\n# {header}\n\n# %% {solution}\ndef ex_double(x):\n"
        f"{body}\n\n# %% {check}\nassert ex_double(2) == 4\n"
    )
    return jupytext.reads(text, "py:percent")


def toy_named(explain=True):
    """An exercise whose answer is a top-level name, with a hand-graded explanation after its check."""
    text = (
        f"# %% [markdown]\n# ### Exercise 01.1: two numbers\n#\n# {HEADER}\n\n"
        f"# %% {SOLUTION}\n### BEGIN SOLUTION\nex_a, ex_b = 1, 2\nex_c = 3\n### END SOLUTION\n\n"
        f"# %% {CHECK}\nassert (ex_a, ex_b) == (1, 2)\n"
    )
    if explain:
        text += f"\n# %% [markdown] {EXPLAIN}\n# Because one and two are the first numbers.\n"
    return jupytext.reads(text, "py:percent")


def test_an_exercise_is_its_prompt_solution_and_check():
    (one,) = exercises.exercises(toy(), "01_toy")
    assert (one.grade_id, one.number, one.title, one.cells) == ("ex-01-1", "01.1", "double it", (1, 2, 3))
    assert "return 2 * x" in one.solution and one.check == "assert ex_double(2) == 4"
    assert (one.difficulty, one.importance, one.minutes, one.explain) == (1, 3, 5, None)


def test_an_explanation_cell_after_the_check_belongs_to_its_exercise():
    (one,) = exercises.exercises(toy_named(), "01_toy")
    assert one.explain == "Because one and two are the first numbers." and one.explain_cell == 3


def test_a_check_worth_other_points_than_the_rule_is_a_one_line_error():
    nb = toy(check=CHECK.replace('"points": 1', '"points": 2'))
    with pytest.raises(exercises.ExerciseError, match="worth 2 points, the rule gives 1"):
        exercises.exercises(nb, "01_toy")


def test_the_points_rule_weighs_a_check_by_its_difficulty():
    assert [exercises.check_points(d) for d in (1, 3, 5)] == [1, 3, 5]


def test_a_top_level_answer_is_stubbed_with_the_names_the_check_needs():
    student = exercises.student_version(toy_named())
    assert student.cells[1].source == "\n".join(f"ex_{n} = ...  # YOUR CODE HERE" for n in "abc")
    assert "raise NotImplementedError" not in student.cells[1].source


def test_the_explanation_is_cleared_for_the_student_and_left_unlocked():
    student = exercises.student_version(toy_named())
    assert student.cells[3].source == "YOUR ANSWER HERE" and not student.cells[3].metadata.nbgrader["locked"]


@pytest.mark.parametrize(
    "nb, missing",
    [
        (toy(prompt="Some text"), "no Markdown prompt"),
        (toy(markers=False), "no '### BEGIN SOLUTION'"),
        (toy(check=CHECK.replace("ex-01-1-check", "ex-01-2-check")), "no check cell with grade_id 'ex-01-1-check'"),
        (toy(header="Some text"), "no header '> \\*\\*Difficulty\\*\\*"),
    ],
)
def test_incomplete_markup_is_a_one_line_error(nb, missing):
    with pytest.raises(exercises.ExerciseError, match=missing) as err:
        exercises.exercises(nb, "01_toy")
    assert "\n" not in str(err.value) and "01_toy" in str(err.value)


def test_the_student_version_stubs_the_solution_and_leaves_the_source_alone():
    nb = toy()
    student = exercises.student_version(nb)
    assert "return 2 * x" in nb.cells[2].source  # the solution version is untouched
    assert "return 2 * x" not in student.cells[2].source and "raise NotImplementedError()" in student.cells[2].source
    assert student.cells[3].source == nb.cells[3].source and student.cells[3].metadata.nbgrader["locked"]


def test_the_student_version_of_an_executed_notebook_keeps_nothing_of_its_run(tmp_path):
    """papermill records the input notebook whole (solutions in) and the run's paths; a student copy made from an
    executed notebook keeps neither, nor the injected parameters cell."""
    build = tmp_path / "build"
    executed = as_papermill_leaves_it(toy(), {"before": 2, "results_dir": str(build / "results")}, build / "x.ipynb")
    assert "return 2 * x" in nbformat.writes(executed) and str(build) in nbformat.writes(executed)  # what it had
    student = exercises.student_version(executed)
    text = nbformat.writes(student)
    assert "return 2 * x" not in text and str(build) not in text
    assert "papermill" not in student.metadata and not [c for c in student.cells if "papermill" in c.metadata]
    assert not [c for c in student.cells if exercises.INJECTED in c.metadata.get("tags", [])]
    assert [c.source for c in student.cells][:1] == ["before = 1"]  # papermill's cell went in before it


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_every_notebook_has_its_exercises(name):
    found = exercises.exercises(notebooks.read_notebook(ROOT / "notebooks" / f"{name}.py"), name)
    assert len(found) >= exercises.required_exercises(name), f"{name} has {len(found)} exercises"
    assert all(e.number.startswith(name[:2] + ".") for e in found), [e.number for e in found]


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_every_exercise_says_its_difficulty_importance_and_minutes(name):
    for found in exercises.exercises(notebooks.read_notebook(ROOT / "notebooks" / f"{name}.py"), name):
        assert 1 <= found.difficulty <= 5 and 1 <= found.importance <= 5 and 1 <= found.minutes <= 60, found.number


EXPLAIN_WHY = ("01.2", "01.3", "01.4", "04.3", "04.4")  # the prompts that ask for a reason, not only a result


def test_every_explain_why_part_has_a_hand_graded_answer():
    found = {
        e.number: e
        for name in NOTEBOOKS
        for e in exercises.exercises(notebooks.read_notebook(ROOT / "notebooks" / f"{name}.py"), name)
    }
    for number in EXPLAIN_WHY:
        assert found[number].explain, f"Exercise {number} has no answered explanation cell"


@pytest.mark.notebook
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_every_check_passes_on_the_solution_version(name, executed_build):
    run, _ = executed_build(name)
    nb = nbformat.read(run.executed, as_version=4)
    checks = [c for c in nb.cells if exercises.is_check(c)]
    assert checks, f"{name}: no check cell ran"
    for cell in checks:
        assert cell.execution_count is not None, cell.metadata.nbgrader["grade_id"]
        assert not [o for o in cell.outputs if o.output_type == "error"], cell.metadata.nbgrader["grade_id"]


def errors(cell):
    return [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]


@pytest.mark.notebook
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_no_check_passes_unsolved(name, student_runs):
    nb, _ = student_runs(name)
    checks = [c for c in nb.cells if exercises.is_check(c)]
    assert checks
    passing = [c.metadata.nbgrader["grade_id"] for c in checks if not errors(c)]
    assert not passing, f"{name}: these checks pass without a solution: {passing}"


@pytest.mark.notebook
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_the_student_version_runs_the_story_up_to_the_first_exercise(name, student_runs):
    nb, _ = student_runs(name)
    first = next(i for i, c in enumerate(nb.cells) if exercises.is_solution(c))
    failed = [i for i, c in enumerate(nb.cells[:first]) if errors(c)]
    assert not failed, f"{name}: cells {failed} fail before the first exercise"


def test_make_exercises_writes_one_student_notebook_per_notebook(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert course_notebooks.main(["--out", str(tmp_path / "students")]) == 0
    written = sorted(p.stem for p in (tmp_path / "students").glob("*.ipynb"))
    assert written == NOTEBOOKS
    for path in (tmp_path / "students").glob("*.ipynb"):
        text = path.read_text()
        assert exercises.BEGIN not in text and "# YOUR CODE HERE" in text
    lines = set().union(*solution_lines(ROOT).values())
    assert leaks(tmp_path / "students", lines, (str(ROOT),)) == []


def test_a_markup_error_writes_nothing_and_exits_2(tmp_path, monkeypatch, capsys):
    root = tmp_path / "project"
    (root / "notebooks").mkdir(parents=True)
    (root / "params").mkdir()
    good = jupytext.writes(toy(), "py:percent")
    (root / "notebooks" / "01_good.py").write_text(good)
    (root / "notebooks" / "02_bad.py").write_text(jupytext.writes(toy(markers=False), "py:percent"))
    monkeypatch.chdir(root)
    assert course_notebooks.main(["--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: 02_bad: exercise ex-01-1") and "\n" not in err
    assert not (tmp_path / "out").exists()
