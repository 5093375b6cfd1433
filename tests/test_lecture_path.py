"""The lecture path's teaching plan (``book/lecture-plan.yaml``, :mod:`attnstruct.teaching.lecture_path`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from attnstruct.teaching import lecture_path
from attnstruct.teaching.book_contents import BookError, Notebook

ROOT = Path(__file__).resolve().parents[1]
PLAN = ROOT / "book" / "lecture-plan.yaml"


@pytest.fixture(scope="module")
def sessions():
    return lecture_path.sessions_of(ROOT)


@pytest.fixture(scope="module")
def sections():
    return lecture_path.notebook_sections(ROOT)


def test_every_step_names_a_section_or_exercise_the_notebook_has(sessions, sections):
    lecture_path.check_plan(sessions, sections)


@pytest.mark.parametrize("index", [0, 1])
def test_a_session_fits_its_90_minutes_with_a_break_and_an_exercise_slot(sessions, index):
    steps = sessions[index]["steps"]
    assert sessions[index]["minutes"] == 90
    assert sum(s["minutes"] for s in steps) <= 90
    modes = [s["mode"] for s in steps]
    assert "break" in modes and "exercise" in modes
    assert 0 < modes.index("break") < len(modes) - 1, "the break falls inside the session"
    assert any(s.get("cut") for s in steps), "the session says what to cut when time is short"


def test_an_unknown_section_or_a_session_too_long_is_refused(sessions, sections):
    wrong = [{**sessions[0], "steps": [{"notebook": "01_bilinear_form", "section": "9. Nowhere", "minutes": 1,
                                         "mode": "show", "what": "x"}]}]  # fmt: skip
    with pytest.raises(BookError, match="no section or exercise '9. Nowhere'"):
        lecture_path.check_plan(wrong, sections)
    long = [{"title": "t", "minutes": 10, "steps": [{"minutes": 11, "mode": "break", "what": "x"}]}]
    with pytest.raises(BookError, match="takes 11 min, more than 10"):
        lecture_path.check_plan(long, sections)


def test_the_table_keeps_the_clock_and_links_the_sections_of_notebooks_that_ran(sessions):
    table = lecture_path.plan_table(sessions[1], {"05_training_dynamics"})
    assert '<a href="notebooks/05_training_dynamics.html#the-verdicts">' in table
    assert "04 · 1. The gradient, written out (not run in this build)" in table
    total = sum(s["minutes"] for s in sessions[1]["steps"])
    assert f"| {total // 60}:{total % 60:02d} | **{total}** | end of the session |" in table
    assert "**When time is short**" in table


def test_a_heading_anchor_is_the_id_sphinx_gives_it():
    assert lecture_path.anchor("1. The identity on a real attention layer") == "the-identity-on-a-real-attention-layer"


def test_a_fact_of_a_notebook_missing_from_the_build_says_so(tmp_path):
    assert "not in this build" in lecture_path.fact(tmp_path, "05_transient")
    with pytest.raises(BookError, match="unknown fact"):
        lecture_path.fact(tmp_path, "nope")


def test_an_exercise_step_takes_its_minutes_from_the_exercise_header():
    plan = [{"title": "t", "minutes": 90, "steps": [{"notebook": "05_x", "section": "Exercise 05.3", "mode": "exercise",
                                                     "what": "x"}]}]  # fmt: skip
    (session,) = lecture_path.with_exercise_minutes(plan, {"05.3": 12})
    assert session["steps"][0]["minutes"] == 12
    with pytest.raises(BookError, match="takes the minutes of its header"):
        lecture_path.with_exercise_minutes([{**plan[0], "steps": [{**plan[0]["steps"][0], "minutes": 3}]}], {})


def test_an_exercise_is_never_run_live_by_the_lecturer(sections):
    live = [{"title": "t", "minutes": 90, "steps": [{"notebook": "01_bilinear_form", "section": "Exercise 01.2",
                                                     "minutes": 8, "mode": "live", "what": "x"}]}]  # fmt: skip
    with pytest.raises(BookError, match="an exercise is students' work"):
        lecture_path.check_plan(live, sections)


def test_a_break_row_says_break_once(sessions):
    table = lecture_path.plan_table(sessions[0], set())
    (row,) = [ln for ln in table.splitlines() if "*break*" in ln]
    assert row.count("reak") == 1, row


def _ran(name: str, seconds_by_section: dict[str, float]) -> Notebook:
    import nbformat.v4 as v4

    cells = []
    for title, took in seconds_by_section.items():
        cells += [v4.new_markdown_cell(f"## {title}"), v4.new_code_cell("x = 1")]
        cells[-1].metadata["papermill"] = {"duration": took}
    nb = v4.new_notebook(cells=cells, metadata={"papermill": {"duration": sum(seconds_by_section.values())}})
    return Notebook(name, name, nb, "quick")


def test_the_budget_sums_the_plan_by_mode_and_measures_the_live_steps():
    session = {"title": "t", "minutes": 90, "steps": [
        {"notebook": "01_x", "section": "1. A", "minutes": 8, "mode": "live", "what": "x"},
        {"notebook": "01_x", "section": "2. B", "minutes": 7, "mode": "show", "what": "x"},
        {"notebook": "01_x", "section": "Exercise 01.2", "minutes": 8, "mode": "exercise", "what": "x"},
        {"minutes": 10, "mode": "break"},
    ]}  # fmt: skip
    books = {"01_x": _ran("01_x", {"1. A": 1.5, "2. B": 30.0})}
    assert lecture_path.minutes_by_mode(session) == {"show": 7, "live": 8, "exercise": 8, "discuss": 0, "break": 10}
    assert lecture_path.live_compute(session, books) == (1.5, 0)
    assert lecture_path.live_compute(session, {}) == (0.0, 1)


def test_the_timing_table_takes_what_happens_in_class_from_the_plan(sessions):
    assert lecture_path.section_modes(sessions, "01_bilinear_form")["Exercise 01.2"] == (1, "exercise")
    nb = _ran("01_bilinear_form", {"2. Symmetric and skew-symmetric parts": 0.5, "Exercises": 2.0})
    rows = lecture_path.timing_table(nb, "01_bilinear_form", sessions).splitlines()[-2:]
    assert lecture_path.MODES["show"] in rows[0] and lecture_path.MODES["live"] not in rows[1]


def test_the_lecture_path_page_types_no_budget_of_its_own():
    template = (ROOT / "book" / "lecture-path.md").read_text(encoding="utf-8")
    assert "{{session:" not in template and "{{budget:1}}" in template and "{{budget:2}}" in template
