"""The prose of the result notebooks states no hand-typed number: results are rendered from the data.

In notebooks 02-07, a Markdown cell may name settings (integers such as "4 layers") and hold formulas (``$...$``)
and code (backticks); a decimal number or a percentage outside those is a typed result, and fails this test
(a setting such as a rate goes in code: ``mask_rate = 0.15``).
Numbers that state a result, ours or the paper's, are printed by a code cell (a Markdown display of a string
computed from the dataset, or from the paper's reference tables in ``attnstruct.reference``).
"""

import re

import pytest

from attnstruct import pipeline

from conftest import ROOT

RESULT_NOTEBOOKS = [p for p in pipeline.list_notebooks(ROOT) if "02" <= p.stem[:2] <= "07"]
MATH_OR_CODE = re.compile(r"\$\$.*?\$\$|\$[^$\n]+\$|`[^`\n]+`|arXiv:\d+\.\d+|Exercise \d{2}\.\d+", re.S)
TYPED_NUMBER = re.compile(r"(?<![\w.])[+\-−]?\d+\.\d+|\d+(?:\.\d+)?\s?%")


INTERVAL_LEVEL = "95%"  # the level of every interval, a setting of attnstruct.evidence, not a result


def typed_numbers(markdown: str) -> list[str]:
    """The decimal numbers and percentages of a Markdown cell, outside math, code and arXiv ids (the interval
    level excepted)."""
    return [n for n in TYPED_NUMBER.findall(MATH_OR_CODE.sub(" ", markdown)) if n != INTERVAL_LEVEL]


def test_the_detector_finds_typed_results_and_ignores_math_code_and_settings():
    assert typed_numbers("median +0.35 to 66% of runs, gap -3.1") == ["+0.35", "66%", "-3.1"]
    assert typed_numbers("4 layers, $\\mathcal N(0, 0.02)$, `lr = 1e-3`, 1,000 steps, arXiv:2502.10927") == []
    assert typed_numbers("a 95% interval") == []
    assert typed_numbers("### Exercise 02.1: as in Exercise 01.3, 0.25") == ["0.25"]  # exercise numbers are names


@pytest.mark.parametrize("path", RESULT_NOTEBOOKS, ids=lambda p: p.stem)
def test_no_markdown_cell_holds_a_typed_result_number(path):
    nb = pipeline.read_notebook(path)
    found = {
        i: numbers
        for i, cell in enumerate(nb.cells)
        if cell.cell_type == "markdown" and (numbers := typed_numbers(cell.source))
    }
    assert not found, f"{path.name}: typed numbers in Markdown cells {found}"
