"""A check never tells the answer it checks: when a prediction is compared with a measured outcome, the failure
message may show the student's own answer and nothing measured, so a student cannot read the answer off a failed
check and retry until it passes."""

import ast

import pytest

from attnstruct import notebooks
from attnstruct.teaching import exercises

from conftest import ROOT

NOTEBOOKS = [p.stem for p in notebooks.list_notebooks(ROOT)]


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def leaking_checks(source: str) -> list[str]:
    """The asserts of ``source`` that compare an ``ex_`` answer with something measured (any expression naming a
    variable that is not an ``ex_`` answer) and whose message formats anything but ``ex_`` answers."""
    leaks = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare) and node.msg is not None):
            continue
        sides = [node.test.left, *node.test.comparators]
        answers = [s for s in sides if isinstance(s, ast.Name) and s.id.startswith("ex_")]
        measured = [s for s in sides if s not in answers and _names(s) - {"sign_of"}]
        if not answers or not measured:
            continue
        shown = {
            name
            for value in ast.walk(node.msg)
            if isinstance(value, ast.FormattedValue)
            for name in _names(value.value)
        }
        if shown - {a.id for a in answers}:
            leaks.append(ast.unparse(node)[:160])
    return leaks


def test_the_rule_finds_a_message_that_shows_the_measured_value():
    assert leaking_checks('assert ex_sign == sign_of(gap), f"you said {ex_sign}; the gap is {gap}"')
    assert not leaking_checks('assert ex_sign == sign_of(gap), f"ex_sign = {ex_sign} is not the sign"')
    assert not leaking_checks('assert ex_n == 3, f"ex_n = {ex_n}"')  # a constant: nothing measured


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_no_check_shows_the_measured_answer_it_compares_with(name):
    nb = notebooks.read_notebook(notebooks.resolve_notebook(ROOT, name))
    checks = [c for c in nb.cells if exercises.is_check(c)]
    assert checks, f"{name} has no check cell"
    leaks = [leak for cell in checks for leak in leaking_checks(cell.source)]
    assert not leaks, "\n".join(leaks)
