"""The notebooks tell the story and the package states the results: no hand-typed result number in any Markdown
cell (math included), no verdict word built by a notebook, and more explanation than code in the story part.

Numbers that state a result, ours or the paper's, are printed by a code cell (a Markdown display of a string computed
from the dataset, or from the paper's reference tables in ``attnstruct.reference``). A Markdown cell may name settings
(integers such as "4 layers") and code (backticks: ``mask_rate = 0.15``); a decimal number or a percentage anywhere
else, formulas included, is a typed result.

A verdict (*holds*, *does not hold*, *cannot tell at this scale*) comes from :func:`attnstruct.stats.decide` through a
notebook's analysis module. So in notebooks 03-09 no string literal of a code cell holds a verdict word, no code cell
names the verdicts' constants, and a Markdown cell uses a verdict word only as the name of a verdict, emphasised.
"""

import ast
import re

import pytest

from attnstruct import notebooks

from conftest import ROOT

NOTEBOOKS = notebooks.list_notebooks(ROOT)
VERDICT_NOTEBOOKS = [p for p in NOTEBOOKS if "03" <= p.stem[:2] <= "09"]
CODE = re.compile(r"`[^`\n]+`|arXiv:\d+\.\d+|Exercise \d{2}\.\d+")
TYPED_NUMBER = re.compile(r"(?<![\w.])[+\-−]?\d+\.\d+|\d+(?:\.\d+)?\s?%")
INTERVAL_LEVEL = "95%"  # the level of every interval, a setting of attnstruct.stats, not a result
VERDICT_WORD = re.compile(r"\b(?:holds|does\s+not\s+hold|cannot\s+tell)\b", re.IGNORECASE)
VERDICT_NAME = re.compile(r"\*(?:holds|does\s+not\s+hold|cannot\s+tell(?:\s+at\s+this\s+scale)?)\*")
VERDICT_CONSTANTS = {"VERDICTS", "HOLDS", "DOES_NOT_HOLD", "CANNOT_TELL"}
EXERCISES = "## Exercises"


def typed_numbers(markdown: str) -> list[str]:
    """The decimal numbers and percentages of a Markdown cell, outside code spans, arXiv ids and exercise names, math
    included (the interval level excepted)."""
    return [n for n in TYPED_NUMBER.findall(CODE.sub(" ", markdown)) if n != INTERVAL_LEVEL]


def verdict_words_in_markdown(markdown: str) -> list[str]:
    """Verdict words of a Markdown cell that are not the emphasised name of a verdict (code spans aside)."""
    return VERDICT_WORD.findall(VERDICT_NAME.sub(" ", CODE.sub(" ", markdown)))


def verdict_words_in_code(source: str) -> list[str]:
    """The verdict words in the string literals (f-string parts included) of a code cell, sorted, and the verdict
    constants it names."""
    tree = ast.parse(source)
    literals = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    names |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    return sorted(w for text in literals for w in VERDICT_WORD.findall(text)) + sorted(names & VERDICT_CONSTANTS)


def story(path) -> list:
    """The cells of a notebook before its ``## Exercises`` heading."""
    cells = notebooks.read_notebook(path).cells
    end = next((i for i, c in enumerate(cells) if c.cell_type == "markdown" and c.source.startswith(EXERCISES)), None)
    return cells[:end]


def characters(cells, kind: str) -> int:
    """The non-blank characters of the cells of ``kind``; a figure's drawing (a ``hide-input`` cell, folded in the
    books) is not code the story asks a reader to follow, so it does not count."""
    shown = [c for c in cells if c.cell_type == kind and "hide-input" not in c.metadata.get("tags", [])]
    return sum(len("".join(c.source.split())) for c in shown)


def test_the_number_detector_reads_math_and_skips_code_settings_and_names():
    assert typed_numbers("median +0.35 to 66% of runs, gap -3.1") == ["+0.35", "66%", "-3.1"]
    assert typed_numbers("$\\mathcal N(0, 0.02)$ and $$s = 0.5$$") == ["0.02", "0.5"]
    assert typed_numbers("4 layers, `lr = 1e-3`, 1,000 steps, arXiv:2502.10927, a 95% interval") == []
    assert typed_numbers("### Exercise 02.1: as in Exercise 01.3, 0.25") == ["0.25"]


def test_the_verdict_detectors_tell_a_name_from_a_claim():
    assert verdict_words_in_markdown("A verdict reads *holds*, *does not hold* or *cannot tell at this scale*.") == []
    assert verdict_words_in_markdown("a verdict of *cannot tell at\nthis scale* across a line break") == []
    assert verdict_words_in_markdown("The encoder claim holds here; we cannot tell the rest.") == [
        "holds",
        "cannot tell",
    ]
    assert verdict_words_in_markdown("thresholds, `effect.verdict == 'holds'`") == []
    assert verdict_words_in_code('print(f"{x}: holds")\nwords = {"does not hold": 1}') == ["does not hold", "holds"]
    assert verdict_words_in_code("if e.verdict == stats.HOLDS:\n    pass") == ["HOLDS"]
    assert verdict_words_in_code('print(prose.effect_line(effect), "thresholds")') == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_markdown_cell_holds_a_typed_result_number(path):
    cells = notebooks.read_notebook(path).cells
    found = {i: n for i, c in enumerate(cells) if c.cell_type == "markdown" and (n := typed_numbers(c.source))}
    assert not found, f"{path.name}: typed numbers in Markdown cells {found}"


@pytest.mark.parametrize("path", VERDICT_NOTEBOOKS, ids=lambda p: p.stem)
def test_no_notebook_builds_a_verdict_word_itself(path):
    found = {}
    for i, cell in enumerate(notebooks.read_notebook(path).cells):
        words = verdict_words_in_markdown(cell.source) if cell.cell_type == "markdown" else []
        if cell.cell_type == "code":
            words = verdict_words_in_code(cell.source)
        if words:
            found[i] = words
    assert not found, f"{path.name}: verdict words built by the notebook, by cell: {found}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_story_explains_more_than_it_computes(path):
    cells = story(path)
    markdown, code = characters(cells, "markdown"), characters(cells, "code")
    assert markdown >= code, (
        f"{path.name}: {markdown} characters of Markdown against {code} of code before the exercises"
    )
