"""Every sentence template of a notebook names only fields of the facts it is filled with, read from the source.

A notebook states a result as ``prose.say("template", facts)`` or ``prose.fill("template", facts)``: the template a
string literal (or a conditional expression of two), ``facts`` a name the notebook assigned from a call
``alias.function(...)`` of a module it imported, or the loop variable of ``for facts in alias.function(...)``. The
function's return annotation names the record class (``-> ScoredFacts``, ``-> list[PairFacts]``), so every
``{name}`` of the template can be checked against the record's fields before the notebook runs. A call whose
template or facts cannot be traced so is reported, never skipped.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import re
import string
import typing
from pathlib import Path

import pytest

from attnstruct import notebooks

from conftest import ROOT

NOTEBOOKS = notebooks.list_notebooks(ROOT)
FILLERS = {"say", "fill"}


def _module_of(node: ast.Import | ast.ImportFrom) -> dict[str, object]:
    """Alias -> module object, for the imports of ``node`` that name a module."""
    found = {}
    for alias in node.names:
        name = alias.asname or alias.name
        if isinstance(node, ast.Import):
            if alias.asname:
                found[name] = importlib.import_module(alias.name)
            continue
        try:
            found[name] = importlib.import_module(f"{node.module}.{alias.name}")
        except ImportError:
            value = getattr(importlib.import_module(node.module), alias.name, None)
            if isinstance(value, type(typing)):
                found[name] = value
    return found


def _fields(template: str) -> list[str]:
    names = (field for _, field, _, _ in string.Formatter().parse(template) if field)
    return list(dict.fromkeys(re.split(r"[.\[]", name)[0] for name in names))


def _templates(node: ast.expr) -> list[str] | None:
    """The template literals of a call's first argument: a literal, or a conditional expression of literals."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.IfExp):
        body, orelse = _templates(node.body), _templates(node.orelse)
        return None if body is None or orelse is None else body + orelse
    return None


def _producer(call: ast.expr, modules: dict[str, object]):
    """The function of a call ``alias.function(...)`` of an imported module, or None."""
    if (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and isinstance(call.func.value, ast.Name)
        and call.func.value.id in modules
    ):
        return getattr(modules[call.func.value.id], call.func.attr, None)
    return None


def _record(function, element: bool):
    """The record class a function's return annotation names (its element type when ``element``), or a problem."""
    try:
        returned = typing.get_type_hints(function).get("return")
    except Exception as error:  # an annotation that does not resolve is a problem to report
        return f"{function.__qualname__}'s return annotation does not resolve ({error})"
    if element:
        args = typing.get_args(returned)
        if typing.get_origin(returned) not in (list, tuple) or len(args) < 1:
            return f"{function.__qualname__} is looped over but returns {returned!r}, not a list of records"
        returned = args[0]
    if not (isinstance(returned, type) and dataclasses.is_dataclass(returned)):
        return f"{function.__qualname__} returns {returned!r}, not a facts record (a dataclass)"
    return returned


def template_problems(source: str) -> list[str]:
    """Every problem of the ``prose.say`` / ``prose.fill`` calls of ``source`` (a notebook's code, cells joined):
    a template field the record lacks, a template that is not a literal, facts that cannot be traced to a record."""
    modules: dict[str, object] = {}
    produced: dict[str, tuple[object, bool]] = {}  # name -> (function, is the loop variable over its result)
    problems: list[str] = []

    def check(call: ast.Call) -> None:
        where = f"line {call.lineno}"
        if len(call.args) != 2:
            problems.append(f"{where}: prose.{call.func.attr} takes a template and facts")
            return
        templates = _templates(call.args[0])
        if templates is None:
            problems.append(f"{where}: the template is not a string literal (or a conditional expression of two)")
            return
        facts = call.args[1]
        function, element = (_producer(facts, modules), False)
        if function is None and isinstance(facts, ast.Name) and facts.id in produced:
            function, element = produced[facts.id]
        if function is None:
            problems.append(f"{where}: cannot trace the facts {ast.unparse(facts)!r} to a call of an imported module")
            return
        record = _record(function, element)
        if isinstance(record, str):
            problems.append(f"{where}: {record}")
            return
        known = {field.name for field in dataclasses.fields(record)}
        for template in templates:
            missing = [name for name in _fields(template) if name not in known]
            if missing:
                problems.append(f"{where}: {record.__name__} has no field {', '.join(missing)} for {template!r}")

    class Reader(ast.NodeVisitor):
        def visit_Import(self, node):
            modules.update(_module_of(node))

        visit_ImportFrom = visit_Import

        def visit_Assign(self, node):
            self.visit(node.value)
            function = _producer(node.value, modules)
            for target in node.targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        produced.pop(name.id, None)
                if isinstance(target, ast.Name) and function is not None:
                    produced[target.id] = (function, False)

        def visit_For(self, node):
            self.visit(node.iter)
            function = _producer(node.iter, modules)
            if isinstance(node.target, ast.Name) and function is not None:
                produced[node.target.id] = (function, True)
            else:
                for name in ast.walk(node.target):
                    if isinstance(name, ast.Name):
                        produced.pop(name.id, None)
            for statement in [*node.body, *node.orelse]:
                self.visit(statement)

        def visit_comprehension_node(self, node):
            for generator in node.generators:
                self.visit(generator.iter)
                function = _producer(generator.iter, modules)
                if isinstance(generator.target, ast.Name) and function is not None:
                    produced[generator.target.id] = (function, True)
            for part in (getattr(node, "elt", None), getattr(node, "key", None), getattr(node, "value", None)):
                if part is not None:
                    self.visit(part)

        visit_ListComp = visit_SetComp = visit_GeneratorExp = visit_DictComp = visit_comprehension_node

        def visit_Call(self, node):
            func = node.func
            if (
                isinstance(func, ast.Attribute)
                and func.attr in FILLERS
                and isinstance(func.value, ast.Name)
                and func.value.id == "prose"
            ):
                check(node)
            self.generic_visit(node)

    Reader().visit(ast.parse(source))
    return problems


def notebook_code(path) -> str:
    """The code cells of a notebook, joined in order (IPython magics and shell lines left out)."""
    cells = notebooks.read_notebook(path).cells
    lines = [
        line
        for cell in cells
        if cell.cell_type == "code"
        for line in cell.source.splitlines()
        if not line.lstrip().startswith(("%", "!"))
    ]
    return "\n".join(lines)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_template_field_is_a_field_of_the_facts_it_is_filled_with(path):
    problems = template_problems(notebook_code(path))
    assert not problems, f"{path.name}: " + "; ".join(problems)


# Made-up records and the functions that return them, for the made-up notebook sources below.
@dataclasses.dataclass(frozen=True)
class ScoredDemo:
    checkpoints: str
    all_scored: bool


@dataclasses.dataclass(frozen=True)
class PairDemo:
    series: str
    more: str


def scored_demo() -> ScoredDemo:
    return ScoredDemo("4 checkpoints", True)


def pairs_demo() -> list[PairDemo]:
    return [PairDemo("ettin", "5")]


def not_a_record() -> str:
    return "a sentence"


HEADER = "from attnstruct.report import prose\nimport test_templates as demo\n"


def test_a_template_that_names_only_the_records_fields_passes():
    source = HEADER + (
        "scored = demo.scored_demo()\n"
        'prose.say("{checkpoints} scored." if scored.all_scored else "{checkpoints}, some left out.", scored)\n'
        "for pair in demo.pairs_demo():\n"
        '    prose.say("**{series}:** {more}", pair)\n'
        'title = prose.fill("{checkpoints}", demo.scored_demo())\n'
    )
    assert template_problems(source) == []


def test_a_template_field_the_record_lacks_is_reported_with_the_record():
    source = HEADER + 'scored = demo.scored_demo()\nprose.say("{checkpoints} of {units}", scored)\n'
    (problem,) = template_problems(source)
    assert "ScoredDemo has no field units" in problem


def test_a_loop_variables_template_is_checked_against_the_lists_record():
    source = HEADER + 'for pair in demo.pairs_demo():\n    prose.say("{series}: {checkpoints}", pair)\n'
    (problem,) = template_problems(source)
    assert "PairDemo has no field checkpoints" in problem


def test_a_comprehensions_variable_is_checked_against_the_lists_record():
    source = HEADER + 'title = ", ".join(prose.fill("{series} {units}", pair) for pair in demo.pairs_demo())\n'
    (problem,) = template_problems(source)
    assert "PairDemo has no field units" in problem


def test_facts_that_cannot_be_traced_to_a_record_are_reported_not_skipped():
    source = HEADER + 'facts = {"checkpoints": "4"}\nprose.say("{checkpoints}", facts)\n'
    (problem,) = template_problems(source)
    assert "cannot trace the facts 'facts'" in problem


def test_a_function_that_returns_no_record_is_reported():
    source = HEADER + 'words = demo.not_a_record()\nprose.say("{checkpoints}", words)\n'
    (problem,) = template_problems(source)
    assert "not a facts record" in problem


def test_a_template_that_is_not_a_literal_is_reported():
    source = HEADER + 'scored = demo.scored_demo()\ntemplate = "{checkpoints}"\nprose.say(template, scored)\n'
    (problem,) = template_problems(source)
    assert "not a string literal" in problem


# ------------------------------------------------------------------ tests check facts, not wording (issue 37)
# Words that are facts, not wording: the verdicts of stats.decide and the reason "the runs did not learn".
FACT_WORDS = {"holds", "does not hold", "cannot tell at this scale", "the runs did not learn"}
ENGLISH_WORDS = 3  # a fragment of at least three words made of letters is English prose
MAX_ENGLISH_FRAGMENTS = 40
# Test files left out, each group for a reason: the issue counts the text the package writes for a reader of a
# result (facts fields that hold sentences, sentences, titles, Markdown, plan descriptions, effect lines).
NOT_RESULT_TEXT = {
    # error messages (one line naming the problem, which the project requires), of the CLI and of exceptions
    "test_errors.py",
    "test_results.py",
    "test_parameters.py",
    "test_score_cli.py",
    "test_prepare_corpus.py",
    "test_interrupts.py",
    "test_hostile_corpora.py",
    "test_hostile_hub.py",
    "test_hostile_runs.py",
    # what a service did: hub requests, retries, quotas, costs, a sweep's progress (status lines, not results)
    "test_hub_client.py",
    "test_hub_quota.py",
    "test_hub_costs.py",
    "test_standin_hub.py",
    "test_sweep.py",
    "test_budget.py",
    "test_zoo.py",
    "test_train_cli.py",
    "test_notebooks.py",
    # help text, docs, README, the Makefile and the book/course machinery around the notebooks
    "test_help.py",
    "test_readme_examples.py",
    "test_tiers.py",
    "test_book.py",
    "test_course.py",
    "test_pages.py",
    "test_exercises.py",
    # the shared formatters themselves, run on the test's own made-up templates and values: the words are the test's
    "test_prose.py",
}
# An assertion is left out too when the text it checks is an error or help (its other side names one), or one of the
# fields the issue itself calls facts in words: an effect's verdict and reason (stats.decide, or a no-finding reason),
# its claim (the plan's key for it) and its family (the plan's label for it).
FACT_FIELDS = re.compile(r"(\.|\b)(reason|claims?|family|verdict)\b|\bdecide\(")
ERROR_OR_HELP = re.compile(
    r"\b(str\(|\w*err\w*|\w*exc\w*|raises|warn\w*|help|usage|capsys|caplog|problem\w*|message)", re.I
)


def _literal_texts(node: ast.expr) -> list[str]:
    """The string literals of ``node`` (an f-string by its literal parts; a tuple, list or set by its elements)."""
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [text for element in node.elts for text in _literal_texts(element)]
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        return [" ".join(v.value for v in node.values if isinstance(v, ast.Constant))]
    return []


def _is_english(text: str) -> bool:
    """At least :data:`ENGLISH_WORDS` words of letters between spaces (a path, a name or code has fewer), and not a
    fact word."""
    words = [token for token in text.split() if re.fullmatch(r"[(\"'*]*[A-Za-z][A-Za-z'-]*[.,;:!?)\"'*]*", token)]
    return len(words) >= ENGLISH_WORDS and text.strip() not in FACT_WORDS


def _compared(node: ast.expr) -> list[tuple[str, ast.expr]]:
    """(literal, what it is compared with) of a comparison by ==, !=, in, not in, or of a startswith/endswith."""
    if isinstance(node, ast.Compare) and all(isinstance(o, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for o in node.ops):
        sides = [node.left, *node.comparators]
        return [
            (text, other)
            for i, side in enumerate(sides)
            for text in _literal_texts(side)
            for other in sides[:i] + sides[i + 1 :]
        ]
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("startswith", "endswith")
        and node.args
    ):
        return [(text, node.func.value) for text in _literal_texts(node.args[0])]
    return []


def english_fragment_assertions(folder) -> list[str]:
    """``file:line`` of every ``assert`` of ``folder/*.py`` (but :data:`NOT_RESULT_TEXT`) that compares an English
    fragment (:func:`_is_english`) with text the package writes, by ==, !=, in, not in, startswith or endswith,
    unless what it is compared with is an error or help text (:data:`ERROR_OR_HELP`) or a fact field in words
    (:data:`FACT_FIELDS`)."""
    found = []
    for path in sorted(Path(folder).glob("*.py")):
        if path.name in NOT_RESULT_TEXT:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Assert) and any(
                _is_english(text)
                and not ERROR_OR_HELP.search(ast.unparse(other))
                and not FACT_FIELDS.search(ast.unparse(other))
                for part in ast.walk(node.test)
                for text, other in _compared(part)
            ):
                found.append(f"{path.name}:{node.lineno}")
    return found


def test_few_assertions_pin_english_fragments():
    found = english_fragment_assertions(ROOT / "tests")
    assert len(found) < MAX_ENGLISH_FRAGMENTS, f"{len(found)} assertions compare English fragments: {found}"


def test_the_count_sees_an_english_fragment_but_not_a_fact_word_or_an_error(tmp_path):
    (tmp_path / "test_demo.py").write_text(
        "def test_a():\n"
        '    assert "the encoder ends more symmetric" in facts.sentence\n'
        '    assert facts.verdict == "cannot tell at this scale"\n'
        '    assert "needs a licence here" in str(error)\n'
        '    assert facts.count == "4 checkpoints"\n'
        '    assert line.startswith("the stacks cannot reach")\n'
        '    assert effect.reason == "with 2 seeds the smallest attainable p is 0.25"\n'
    )
    assert english_fragment_assertions(tmp_path) == ["test_demo.py:2", "test_demo.py:6"]
