"""The lecture path's teaching plan (``book/lecture-plan.yaml``, :mod:`attnstruct.teaching.lecture_path`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from attnstruct.teaching import lecture_path
from attnstruct.teaching.book_contents import BookError

ROOT = Path(__file__).resolve().parents[1]
PLAN = ROOT / "book" / "lecture-plan.yaml"


@pytest.fixture(scope="module")
def sessions():
    return lecture_path.load_plan(PLAN)


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
