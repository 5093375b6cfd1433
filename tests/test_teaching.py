"""Every notebook is a lesson: learning goals at the top, exercises, what to take away and knobs at the end."""

import re

import pytest

from attnstruct import notebooks
from attnstruct.teaching import exercises

from conftest import ROOT

SOURCES = notebooks.list_notebooks(ROOT)


def markdown(nb):
    return [(i, c.source) for i, c in enumerate(nb.cells) if c.cell_type == "markdown"]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.stem)
def test_learning_goals_open_the_notebook_before_any_code(path):
    nb = notebooks.read_notebook(path)
    goals = [i for i, text in markdown(nb) if text.startswith("**Learning goals.**")]
    assert len(goals) == 1, "one Markdown cell starting '**Learning goals.**'"
    (i,) = goals
    code_before = [c for c in nb.cells[:i] if c.cell_type == "code"]
    assert not code_before, "the learning goals open the notebook"
    bullets = [line for line in nb.cells[i].source.splitlines() if line.startswith(("- ", "* "))]
    assert len(bullets) >= 3, "at least three goals, one bullet each"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.stem)
def test_it_ends_with_what_to_take_away_and_knobs_to_try(path):
    nb = notebooks.read_notebook(path)
    last_two = [c.source.split("\n", 1)[0] for c in nb.cells[-2:]]
    assert last_two == ["## What to take away", "## Knobs to try"], last_two
    declared = notebooks.declared_parameters(nb)
    knobs = nb.cells[-1].source
    named = [name for name in declared if re.search(rf"`{name}(`|\s*=)", knobs)]
    assert len(named) >= 2, f"the knobs name at least two parameters of the parameters cell: {named}"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.stem)
def test_exercises_come_after_the_story_in_their_own_section(path):
    nb = notebooks.read_notebook(path)
    found = exercises.exercises(nb, path.stem)
    assert found
    (section,) = [i for i, text in markdown(nb) if text.startswith("## Exercises")]
    assert section <= found[0].cells[0] and found[-1].cells[2] < len(nb.cells) - 2
    later = {i for e in found for i in e.cells}
    story_after = [
        i for i in range(found[0].cells[0], len(nb.cells) - 2) if i not in later and nb.cells[i].cell_type == "code"
    ]
    assert not story_after, f"code cells of the story between or after the exercises: {story_after}"
