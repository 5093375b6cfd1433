"""The course book (``attnstruct.teaching.book``): one offline static site built from the executed notebooks.

A module fixture runs every notebook through the session's ``executed_build`` (the tests' small parameters)
and builds the book once; the tests then read the site as a browser would: pages, links, timings, exercises,
datasets, and that nothing is loaded from the web.
"""

from __future__ import annotations

import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import nbformat
import pytest

from attnstruct.teaching import book, book_contents

pytestmark = pytest.mark.notebook

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = [p.stem for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py"))]
PAGES = ("index", "lecture-path", "exercises", "data", "citation")
GUIDES = (
    "command-line",
    "training",
    "teaching",
    "architecture",
    "performance",
    "statistics",
    "testing",
    "paper-notes",
    "calibration",
)


class Page(HTMLParser):
    """Tags with their attributes, the ids, and the rows of every table (cell texts) of one HTML page."""

    def __init__(self, path: Path):
        super().__init__(convert_charrefs=True)
        self.path, self.tags, self.ids, self.rows = path, [], set(), []
        self._cell: list[str] | None = None
        self.feed(path.read_text(encoding="utf-8"))

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append((tag, attrs))
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self.rows:
            self.rows[-1].append(" ".join("".join(self._cell).split()))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)

    def resolve(self, href: str) -> tuple[Path, str]:
        """The file an ``href`` of this page points at, and its fragment."""
        parts = urlsplit(href)
        return (self.path.parent / unquote(parts.path)).resolve(), parts.fragment


@pytest.fixture(scope="module")
def built(built_book, executed_build):
    """(site folder, build folder): the session's book and the executed notebooks it was built from."""
    return built_book, executed_build.build_dir


def _executed(build: Path, name: str):
    return nbformat.read(build / "notebooks" / f"{name}.ipynb", as_version=4)


def test_every_page_exists(built):
    site, _ = built
    for page in PAGES:
        assert (site / f"{page}.html").is_file(), page
    for guide in GUIDES:
        assert (site / "guides" / f"{guide}.html").is_file(), guide
    for name in NOTEBOOKS:
        assert (site / "notebooks" / f"{name}.html").is_file(), name
        assert name in {
            a.get("href", "").split("/")[-1].removesuffix(".html") for _, a in Page(site / "index.html").tags
        }


def test_landing_page_shows_the_main_figure(built):
    site, _ = built
    page = Page(site / "index.html")
    images = [a["src"] for tag, a in page.tags if tag == "img" and "03_encoders_vs_decoders" in a.get("src", "")]
    assert images, "the landing page has no 03_encoders_vs_decoders figure"
    assert page.resolve(images[0])[0].is_file()


def test_lecture_path_timings_are_the_papermill_durations(built):
    site, build = built
    page = Page(site / "lecture-path.html")
    text = (site / "lecture-path.html").read_text(encoding="utf-8")
    summary = {row[0]: row for row in page.rows if row and row[0] in NOTEBOOKS}
    assert set(summary) == set(NOTEBOOKS)
    for name in NOTEBOOKS:
        duration = float(_executed(build, name).metadata["papermill"]["duration"])  # recomputed here
        assert summary[name][2] == f"{duration:.1f} s", (name, summary[name])
        assert f"ran in {duration:.1f} s." in text, name
    slowest = max(
        float(c.metadata["papermill"]["duration"] or 0)
        for name in NOTEBOOKS
        for c in _executed(build, name).cells
        if c.cell_type == "code"
    )
    if slowest > book_contents.LIVE_LIMIT_S:
        assert "show the stored output" in text
    assert "run live" in text


def test_exercises_page_has_one_dropdown_per_solution_cell(built):
    site, build = built
    solutions = 0
    for name in NOTEBOOKS:
        cells = [c for c in _executed(build, name).cells if c.metadata.get("nbgrader", {}).get("solution") is True]
        solutions += len(cells)
        code = sum(c.cell_type == "code" for c in cells)
        tags = Page(site / "notebooks" / f"{name}.html").tags
        folded = sum(t == "details" and {"hide", "above-input"} <= set(a.get("class", "").split()) for t, a in tags)
        assert folded >= code, f"{name}: {code} solution cells, {folded} folded inputs"
    page = Page(site / "exercises.html")
    dropdowns = [
        a for tag, a in page.tags if tag == "details" and {"solution", "dropdown"} <= set(a.get("class", "").split())
    ]
    assert len(dropdowns) == solutions
    assert not any("open" in a for a in dropdowns), "solutions must start folded"
    for href in {a["href"] for tag, a in page.tags if tag == "a" and "notebooks/" in a.get("href", "")}:
        target, fragment = page.resolve(href)
        assert target.is_file(), href
        assert not fragment or fragment in Page(target).ids, href


def test_dataset_links_resolve_to_files_in_the_site(built):
    site, build = built
    linked = set()
    for name in ("index", "data"):
        page = Page(site / f"{name}.html")
        for href in [a["href"] for tag, a in page.tags if tag == "a" and a.get("href", "").endswith(".nc")]:
            target, _ = page.resolve(href)
            assert target.is_file() and site in target.parents, href
            linked.add(target.name)
    assert linked == {p.name for p in (build / "results").glob("*.nc")}


def test_nothing_is_loaded_from_the_web(built):
    site, _ = built
    assert book.external_urls(site) == []
    for path in site.rglob("*.html"):
        for tag, attrs in Page(path).tags:
            url = attrs.get("src") if tag == "script" else attrs.get("href") if tag == "link" else None
            assert not url or not url.startswith(("http:", "https:", "//")), f"{path}: {tag} {url}"
    for path in site.rglob("*.css"):
        css = path.read_text(encoding="utf-8", errors="replace").lower()
        for marker in ("url(http", "url('http", 'url("http', "url(//", "@import 'http", '@import "http'):
            assert marker not in css, f"{path}: {marker}"


def test_mathjax_is_local(built):
    site, _ = built
    page = Page(site / "notebooks" / f"{NOTEBOOKS[0]}.html")
    sources = [a["src"] for tag, a in page.tags if tag == "script" and "MathJax.js" in a.get("src", "")]
    assert len(sources) == 1
    target, _ = page.resolve(sources[0])
    assert target.is_file() and site in target.parents
    config = urlsplit(sources[0]).query.removeprefix("config=")
    assert (target.parent / "config" / f"{config}.js").is_file()
    assert 'class="math notranslate nohighlight"' in (site / "index.html").read_text(encoding="utf-8")


def test_a_notebook_missing_from_the_build_is_left_out(built, tmp_path):
    _, build = built
    partial = tmp_path / "partial"
    (partial / "notebooks").mkdir(parents=True)
    for name in NOTEBOOKS[:2]:
        (partial / "notebooks" / f"{name}.ipynb").write_bytes((build / "notebooks" / f"{name}.ipynb").read_bytes())
    messages = []
    books, _ = book._collect(partial, ROOT, messages.append)
    assert [b.name for b in books] == NOTEBOOKS and [b.ran for b in books].count(True) == 2
    assert len(messages) == len(NOTEBOOKS) - 2 and all("\n" not in m and "left out" in m for m in messages)
    table = book_contents.notebook_table(books)
    assert table.count("not run") >= len(NOTEBOOKS) - 2


def test_no_executed_notebooks_is_a_one_line_error_and_no_site(tmp_path):
    empty = tmp_path / "empty"
    (empty / "notebooks").mkdir(parents=True)
    out = empty / "book"
    proc = subprocess.run(
        [sys.executable, "-m", "attnstruct.teaching.book", "--build-dir", str(empty), "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "no executed notebooks" in proc.stderr
    assert not out.exists() and sorted(p.name for p in empty.iterdir()) == ["notebooks"]
    with pytest.raises(book.BookError, match="no executed notebooks"):
        book.build_book(tmp_path / "nowhere")


def test_exercises_are_read_with_and_without_nbgrader_cells():
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

    solution = {"nbgrader": {"solution": True, "grade": False}}
    check = {"nbgrader": {"solution": False, "grade": True}}
    nb = new_notebook(
        cells=[
            new_markdown_cell("# 09 · A title"),
            new_code_cell("x = 1"),
            new_markdown_cell("## Exercises\n\nIntro.\n\n### Exercise 09.1: first\n\nDo $x^2$."),
            new_code_cell("### BEGIN SOLUTION\ny = 2\n### END SOLUTION", metadata=solution),
            new_code_cell("assert y == 2", metadata=check),
            new_markdown_cell("### Exercise 09.2: second\nMore."),
            new_code_cell("z = 3", metadata=solution),
            new_markdown_cell("## What to take away\n\n* a point"),
        ]
    )
    found = book_contents.exercises("09_x", nb)
    assert [(e.number, e.title, e.prompt) for e in found] == [
        ("09.1", "first", "Do $x^2$."),
        ("09.2", "second", "More."),
    ]
    assert found[0].solutions == [("code", "y = 2")] and found[0].checks == ["assert y == 2"] and not found[1].checks
    page = book_contents.for_site(nb, found)
    assert page.cells[3].metadata["tags"] == ["hide-input"] and "(nb-ex-09-1)=" in page.cells[2].source
    assert "hide-input" not in nb.cells[3].metadata.get("tags", [])  # the executed notebook is left as it was
    assert book_contents.exercises("09_x", new_notebook(cells=[new_markdown_cell("# 09"), new_code_cell("1")])) == []
