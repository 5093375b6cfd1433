"""What the course book reads from the executed notebooks, and its generated pages (MyST Markdown).

``attnstruct.teaching.book`` builds the site; this module holds what its pages say, the parts a test can check
without Sphinx: the measured
run times (papermill's ``metadata.papermill.duration`` of each notebook and cell), the nbgrader exercises of a
notebook (a ``### Exercise NN.k: title`` prompt, ``nbgrader.solution`` cells, ``nbgrader.grade`` check cells),
and the pages filled into the templates of ``book/`` (``{{name}}`` or ``{{name:argument}}`` placeholders). What
differs between the instructor's and the student's book, and the notebook copied for a page, is in
``attnstruct.teaching.book_pages``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

LIVE_LIMIT_S = 60.0  # a cell that took longer is shown from its stored output in class
SOLUTION_MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION")
EXERCISE_HEADING = re.compile(r"^#{2,4}\s*Exercise\s+([0-9][\w.]*)\s*[:.]?\s*(.*)$")
PLACEHOLDER = re.compile(r"\{\{([a-z_]+)(?::([^{}]*))?\}\}")


class BookError(Exception):
    """Bad input to the book: no executed notebooks, a missing template, a failed Sphinx build."""


@dataclass
class Exercise:
    """One exercise: its prompt, its solution cells (code or Markdown) and its graded check cells."""

    notebook: str
    index: int
    number: str
    title: str
    prompt: str
    solutions: list[tuple[str, str]] = field(default_factory=list)  # (cell_type, text)
    checks: list[str] = field(default_factory=list)
    heading: bool = True  # False for solution cells found without a prompt before them

    @property
    def label(self) -> str:
        return f"ex-{self.notebook[:2]}-{self.index}"

    @property
    def target(self) -> str:
        """The MyST target put before the prompt in the notebook's page."""
        return f"nb-{self.label}"


@dataclass
class Notebook:
    """A notebook of the reading order: its executed node (``None`` when it was not run) and what goes with it."""

    name: str
    title: str
    nb: Any | None = None
    profile: str = ""
    datasets: list[Path] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)  # parameters that differ from the profile

    @property
    def ran(self) -> bool:
        return self.nb is not None

    @property
    def duration(self) -> float | None:
        return notebook_duration(self.nb) if self.nb is not None else None


def _nbgrader(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {}) or {}


def is_solution(cell) -> bool:
    return _nbgrader(cell).get("solution") is True


def is_check(cell) -> bool:
    return _nbgrader(cell).get("grade") is True and not is_solution(cell)


def notebook_duration(nb) -> float:
    """The notebook's run time in seconds as papermill recorded it (``metadata.papermill.duration``)."""
    return float(nb.metadata["papermill"]["duration"])


def cell_duration(cell) -> float:
    return float(cell.get("metadata", {}).get("papermill", {}).get("duration") or 0.0)


def seconds(value: float) -> str:
    """How every measured time is printed (the tests format their recomputed values with this too)."""
    return f"{value:.1f} s"


def minutes(value: float) -> str:
    whole = int(round(value))
    return f"{whole // 60} min {whole % 60:02d} s" if whole >= 60 else seconds(value)


def title_of(nb) -> str:
    """The first ``# `` heading of the notebook's Markdown cells."""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return ""


def source_title(path: Path) -> str:
    """The ``# # `` title line of a jupytext percent source (for a notebook that was not run)."""
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("# # "):
            return line[4:].strip()
    return path.stem


def sections(nb) -> list[dict]:
    """The notebook cut at its ``## `` headings: code cells, measured seconds and the slowest cell of each."""
    out = [{"title": "Introduction and parameters", "cells": 0, "seconds": 0.0, "slow": []}]
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            headings = [ln[3:].strip() for ln in cell.source.splitlines() if ln.startswith("## ")]
            if headings:  # the code cells that follow belong to the cell's last section
                out.append({"title": headings[-1], "cells": 0, "seconds": 0.0, "slow": []})
        elif cell.cell_type == "code":
            took = cell_duration(cell)
            out[-1]["cells"] += 1
            out[-1]["seconds"] += took
            if took > LIVE_LIMIT_S:
                out[-1]["slow"].append((cell.get("execution_count"), _first_line(cell.source), took))
    return [s for s in out if s["cells"]]


def _first_line(source: str) -> str:
    line = next((ln.strip() for ln in source.splitlines() if ln.strip() and not ln.startswith("#")), "")
    line = line.replace("`", "'")
    return line if len(line) <= 48 else line[:45] + "..."


def _strip_markers(text: str) -> str:
    return "\n".join(ln for ln in text.splitlines() if ln.strip() not in SOLUTION_MARKERS).strip("\n")


def _prompts(source: str) -> tuple[list[tuple[str, str, str]], bool]:
    """The ``### Exercise NN.k: title`` prompts of one Markdown cell as (number, title, body), and whether a
    later ``## `` heading of the cell ends the exercises before it."""
    found, closed = [], False
    for line in source.splitlines():
        match = EXERCISE_HEADING.match(line)
        if match:
            found.append([match.group(1).rstrip("."), match.group(2).strip(), []])
            closed = False
        elif re.match(r"^#{1,3}\s", line):
            closed = True
        elif found and not closed:
            found[-1][2].append(line)
    return [(n, t, "\n".join(body).strip()) for n, t, body in found], closed


def exercises(name: str, nb) -> list[Exercise]:
    """The exercises of notebook ``name``, in order; a solution cell without a prompt gets an exercise of its own."""
    found: list[Exercise] = []
    current: Exercise | None = None
    for cell in nb.cells:
        if cell.cell_type == "markdown" and not is_solution(cell):
            prompts, closed = _prompts(cell.source)
            for number, title, body in prompts:
                found.append(Exercise(name, len(found) + 1, number, title, body))
            current = None if closed else (found[-1] if prompts else current)
        elif is_solution(cell):
            if current is None:
                current = Exercise(name, len(found) + 1, f"{name[:2]}.{len(found) + 1}", "", "", heading=False)
                found.append(current)
            current.solutions.append((cell.cell_type, _strip_markers(cell.source)))
        elif is_check(cell) and current is not None:
            current.checks.append(cell.source)
    return found


def fill(template: str, values: dict[str, Callable[[str | None], str]], where: str) -> str:
    """Replace every ``{{name}}`` / ``{{name:arg}}`` of ``template`` with ``values[name](arg)``."""

    def one(match: re.Match) -> str:
        if match.group(1) not in values:
            raise BookError(f"template {where} has an unknown placeholder {match.group(0)}")
        return values[match.group(1)](match.group(2))

    return PLACEHOLDER.sub(one, template)


def fence(text: str, info: str = "", *, colons: bool = False) -> tuple[str, str]:
    """An opening and closing fence longer than any run of backticks (or colons) inside ``text``."""
    mark = ":" if colons else "`"
    longest = max((len(run) for run in re.findall(re.escape(mark) + "+", text)), default=0)
    bar = mark * max(3, longest + 1)
    return f"{bar}{info}", bar


def code_block(text: str, language: str = "python") -> str:
    opening, closing = fence(text, language)
    return f"{opening}\n{text}\n{closing}"


def cell(text: str) -> str:
    """A Markdown table cell: no pipes or line breaks."""
    return " ".join(str(text).replace("|", "\\|").split())


def link(nb: Notebook) -> str:
    return f"[{cell(nb.title)}](notebooks/{nb.name}.ipynb)" if nb.ran else f"{cell(nb.title)} (not run)"


def data_link(path: Path, prefix: str = "") -> str:
    return f'<a class="dataset" href="{prefix}data/{path.name}">{path.name}</a>'


def human_size(n: int) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return ""


def notebook_table(books: list[Notebook]) -> str:
    rows = ["| | notebook | run time (profile) | dataset |", "|---|---|---|---|"]
    for nb in books:
        when = f"{seconds(nb.duration)} ({cell(nb.profile)})" if nb.ran else "not run"
        data = ", ".join(data_link(p) for p in nb.datasets) or ("none" if nb.ran else "not run")
        rows.append(f"| {nb.name[:2]} | {link(nb)} | {when} | {data} |")
    return "\n".join(rows)


def timing_summary(books: list[Notebook]) -> str:
    rows = [
        "| notebook | profile | measured run time | cells over the live limit |",
        "|---|---|---|---|",
    ]
    for nb in books:
        if not nb.ran:
            rows.append(f"| `{nb.name}` | not run | not run | |")
            continue
        slow = [s for sec in sections(nb.nb) for s in sec["slow"]]
        rows.append(f"| `{nb.name}` | {cell(nb.profile)} | {seconds(nb.duration)} | {len(slow) or 'none'} |")
    return "\n".join(rows)


def exercise_page(books: list[Notebook], found: dict[str, list[Exercise]], *, solutions: bool = True) -> str:
    """Every exercise: the prompt, the solution folded in a dropdown (only with ``solutions``), the check code, a
    link to the notebook."""
    intro = (
        "Every exercise of every notebook, in reading order. Try it in the notebook first; the solution is "
        "folded (click it to open), and the check below it is the cell nbgrader grades."
        if solutions
        else "Every exercise of every notebook, in reading order, with the check that nbgrader grades it by: a "
        "check passes once your code in the notebook is right."
    )
    out = ["# Exercises", "", intro]
    for nb in books:
        if not nb.ran or not found.get(nb.name):
            continue
        out += ["", f"## {nb.title}", ""]
        for ex in found[nb.name]:
            title = f"{ex.number}: {ex.title}" if ex.title else ex.number
            opening, closing = fence(ex.prompt)
            out += [f"{opening}{{exercise}} {title}", f":label: {ex.label}", ":nonumber:", "", ex.prompt, closing]
            for i, (kind, text) in enumerate(ex.solutions if solutions else [], 1):
                body = text if kind == "markdown" else code_block(text)
                opening, closing = fence(body)
                out += ["", f"{opening}{{solution}} {ex.label}", f":label: sol-{ex.notebook[:2]}-{ex.index}-{i}"]
                out += [":class: dropdown", "", body, closing]
            for check in ex.checks:  # folded: a check is 15-25 lines, read on demand
                summary = '<details class="book-check">\n<summary>Check (the graded cell)</summary>'
                out += ["", summary, "", code_block(check), "", "</details>"]
            back = f"{{ref}}`in notebook {nb.name[:2]} <{ex.target}>`" if ex.heading else ""
            out += ["", f"Back to the notebook: {back or f'[{nb.name}](notebooks/{nb.name}.ipynb)'}", ""]
    if len(out) == 3:
        out += ["", "*No notebook of this build has exercises yet.*"]
    return "\n".join(out) + "\n"


def data_page(books: list[Notebook], others: list[Path], read: Callable[[Path], dict]) -> str:
    """Each dataset of the build: a link, its size and its provenance attrs (``read(path)`` gives the attrs)."""
    out = [
        "# Data",
        "",
        "Every dataset the notebooks of this build wrote (`results/*.nc`: netCDF4 through h5netcdf), copied into "
        "this site under `data/`. Read one with `attnstruct.results.load_dataset(path)` or `xarray.open_dataset(path, "
        'engine="h5netcdf")`; the provenance below is read from each file\'s attrs.',
    ]
    owners = [(nb, p) for nb in books for p in nb.datasets] + [(None, p) for p in others]
    for nb, path in owners:
        attrs = read(path)
        profile = attrs.get("profile") or (f"{nb.profile} (from the notebook's parameters)" if nb else "unknown")
        rows = {
            "file": f"{data_link(path)} ({human_size(path.stat().st_size)})",
            "notebook": link(nb) if nb else "none (written outside the numbered notebooks)",
            "title": cell(attrs.get("title", "not recorded")),
            "profile": cell(profile),
            "git commit": cell(attrs.get("git_commit", "not recorded")),
            "created": cell(attrs.get("created", "not recorded")),
            "attnstruct version": cell(attrs.get("attnstruct_version", "not recorded")),
        }
        if "error" in attrs:
            rows["could not be read"] = cell(attrs["error"])
        out += ["", f"## {path.name}", "", "| | |", "|---|---|", *(f"| {k} | {v} |" for k, v in rows.items())]
        if attrs.get("parameters"):
            try:
                text = json.dumps(json.loads(attrs["parameters"]), indent=1, sort_keys=True)
            except (TypeError, ValueError):
                text = str(attrs["parameters"])
            out += ["", "Parameters recorded in the dataset:", "", code_block(text, "json")]
    if not owners:
        out += ["", "*This build has no datasets.*"]
    return "\n".join(out) + "\n"
