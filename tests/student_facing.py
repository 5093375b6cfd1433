"""What no student-facing file may hold: a line of a solution, or a path of the machine that built it.

The solutions are defined by their source of truth, the regions between ``### BEGIN SOLUTION`` and
``### END SOLUTION`` of the notebook sources (``notebooks/NN_topic.py``, read with jupytext), and the answers of
their hand-graded explanation cells (:func:`attnstruct.teaching.exercises.is_explanation`). A *solution line* is a
line of such a region that appears nowhere in what a student is given anyway (the student version of every notebook,
:func:`attnstruct.teaching.exercises.student_version` of its course version): ``pass``, a blank line or a line the
story also holds gives nothing away, and counting it would make the search meaningless.

:func:`leaks` reads every file of a folder the way a reader or a program could: its raw text, the text of an HTML
page (the highlighted code of a page is split into spans, so a line is whole only once the tags are gone), and
every string of a JSON document (a notebook, or the JSON that Sphinx's ``searchindex.js`` wraps), where quotes and
newlines are escaped.
"""

from __future__ import annotations

import html
import json
from html.parser import HTMLParser
from pathlib import Path

from attnstruct import notebooks
from attnstruct.teaching import course_notebooks, exercises

MIN_LENGTH = 4  # shorter lines (`)`, `x`, `[]`) are syntax, not an answer


def solution_regions(source: str) -> list[str]:
    """The text between each ``### BEGIN SOLUTION`` and its ``### END SOLUTION`` in ``source``."""
    regions = []
    for piece in source.split(exercises.BEGIN)[1:]:
        regions.append(piece.split(exercises.END, 1)[0])
    return regions


def solution_lines(root: Path) -> dict[str, set[str]]:
    """Per notebook of ``root``, the stripped lines of its solution regions that a student is not given anyway
    (none of the lines of every notebook's student version)."""
    sources = notebooks.list_notebooks(root)
    given = set()
    for source in sources:
        student = exercises.student_version(course_notebooks.course_notebook(root, source))
        given |= {line.strip() for cell in student.cells for line in cell.source.splitlines()}
    found = {}
    for source in sources:
        cells = notebooks.read_notebook(source).cells
        regions = [r for cell in cells for r in solution_regions(cell.source)]
        regions += [cell.source for cell in cells if exercises.is_explanation(cell)]
        lines = {line.strip() for region in regions for line in region.splitlines()}
        found[source.stem] = {line for line in lines if len(line) >= MIN_LENGTH and line not in given}
    return found


class _Text(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.pieces: list[str] = []

    def handle_data(self, data):
        self.pieces.append(data)


def _strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def readings(path: Path) -> list[str]:
    """The texts of the file ``path``: raw, and as its HTML text and its JSON strings where it parses as such."""
    raw = path.read_bytes().decode("utf-8", errors="replace")
    texts = [raw, html.unescape(raw)]
    if path.suffix in (".html", ".htm"):
        parser = _Text()
        parser.feed(raw)
        texts.append("".join(parser.pieces))
    start = raw.find("{")
    for document in (raw, raw[start : raw.rfind("}") + 1] if start >= 0 else ""):
        try:
            texts += _strings(json.loads(document))
        except ValueError:
            continue
    return texts


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file())


def _held(texts: list[str], lines: set[str]) -> set[str]:
    return {line.strip() for text in texts for line in text.splitlines()} & lines


def held_lines(folder: Path, lines: set[str]) -> set[str]:
    """The lines of ``lines`` that some file under ``folder`` holds, whole (leading and trailing blanks aside)."""
    return {line for path in _files(folder) for line in _held(readings(path), lines)}


def leaks(folder: Path, lines: set[str], paths: tuple[str, ...] = ()) -> list[str]:
    """Every file under ``folder`` that holds a line of ``lines`` (a whole line, leading and trailing blanks
    aside) or any of ``paths``: ``"FILE: what"``, one for each file and finding."""
    found = []
    for path in _files(folder):
        name = path.relative_to(folder)
        texts = readings(path)
        held = _held(texts, lines)
        if held:
            found.append(f"{name}: {len(held)} solution lines, such as {sorted(held)[0]!r}")
        found += [f"{name}: the path {p}" for p in paths if any(p in text for text in texts)]
    return found


def as_papermill_leaves_it(nb, parameters: dict, output: Path):
    """``nb`` as papermill writes it after a run: prepared by papermill itself (``execute_notebook`` with
    ``prepare_only``: the injected parameters cell and ``metadata.papermill``, with the input notebook whole, as
    :func:`attnstruct.notebooks.run_notebook` hands it over in memory), then given the times papermill's engine
    records once every cell has run (a duration, no exception). Written to ``output`` too; returned."""
    import nbformat
    import papermill

    output.parent.mkdir(parents=True, exist_ok=True)
    ran = papermill.execute_notebook(
        nb, str(output), parameters=parameters, prepare_only=True, kernel_name="python3", language="python"
    )
    ran.metadata.papermill.update(duration=1.5, exception=None, end_time="2026-01-01T00:00:01")
    for cell in ran.cells:
        cell.metadata.papermill = {"duration": 0.1, "exception": False, "status": "completed"}
    nbformat.write(ran, output)
    return ran
