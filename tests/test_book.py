"""The course books (``attnstruct.teaching.book``): two offline static sites built from the executed notebooks.

A module fixture runs every notebook through the session's ``executed_build`` (the tests' small parameters)
and builds the instructor's and the student's book once; the tests then read the sites as a browser would:
pages, links, timings, exercises, datasets, that the student book holds no solution and no lecture path, and
that nothing is loaded from the web. A synthetic notebook checks what the site copy of a notebook hides.
"""

from __future__ import annotations

import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import nbformat
import pytest

from attnstruct.teaching import book, book_contents, book_pages, exercises

from student_facing import as_papermill_leaves_it, held_lines, leaks, readings, solution_lines

pytestmark = pytest.mark.notebook

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = [p.stem for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py"))]
AUDIENCES = ("instructor", "student")
PAGES = {"instructor": ("index", "lecture-path", "exercises", "data", "citation")}
PAGES["student"] = ("index", "before-session-1", "exercises", "data", "citation")
GUIDES = (
    "command-line",
    "series",
    "training",
    "teaching",
    "architecture",
    "performance",
    "statistics",
    "testing",
    "security",
    "paper-notes",
    "calibration",
)
STUDENT_GUIDES = ("performance", "statistics", "paper-notes", "calibration")  # what the notebooks are read with


class Page(HTMLParser):
    """Tags with their attributes, the ids, and the rows of every table (cell texts) of one HTML page."""

    def __init__(self, path: Path):
        super().__init__(convert_charrefs=True)
        self.path, self.tags, self.ids, self.rows, self.texts = path, [], set(), [], []
        self._cell: list[str] | None = None
        self.feed(path.read_text(encoding="utf-8"))
        self.text = "".join(self.texts)

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
        self.texts.append(data)
        if self._cell is not None:
            self._cell.append(data)

    def resolve(self, href: str) -> tuple[Path, str]:
        """The file an ``href`` of this page points at, and its fragment."""
        parts = urlsplit(href)
        return (self.path.parent / unquote(parts.path)).resolve(), parts.fragment


@pytest.fixture(scope="module")
def books(built_book, executed_build):
    """(books folder, build folder): the session's two books and the executed notebooks they were built from."""
    return built_book, executed_build.build_dir


@pytest.fixture(params=AUDIENCES)
def built(request, books):
    """(site folder, build folder) of one book, each book in turn (the site folder is named after its audience)."""
    folder, build = books
    return folder / request.param, build


def _audience(site: Path) -> str:
    return site.name


def _html_pages(site: Path) -> list[Path]:
    """The HTML pages of a site, outside Sphinx's own folders (``_static``, ``_sources``, ...)."""
    return [p for p in sorted(site.rglob("*.html")) if not any(x.startswith("_") for x in p.relative_to(site).parts)]


def _executed(build: Path, name: str):
    return nbformat.read(build / "notebooks" / f"{name}.ipynb", as_version=4)


def test_every_page_exists(built):
    site, _ = built
    audience = _audience(site)
    for page in PAGES[audience]:
        assert (site / f"{page}.html").is_file(), page
    guides = GUIDES if audience == "instructor" else STUDENT_GUIDES
    assert sorted(p.stem for p in (site / "guides").glob("*.html")) == sorted(guides)
    for name in NOTEBOOKS:
        assert (site / "notebooks" / f"{name}.html").is_file(), name
        assert name in {
            a.get("href", "").split("/")[-1].removesuffix(".html") for _, a in Page(site / "index.html").tags
        }


def test_the_books_index_links_both_books(books):
    folder, _ = books
    page = Page(folder / "index.html")
    links = [a["href"] for tag, a in page.tags if tag == "a"]
    assert sorted(links) == [f"{a}/index.html" for a in AUDIENCES]
    assert all(page.resolve(link)[0].is_file() for link in links)
    assert not [t for t, a in page.tags if t in ("script", "link")]


def _role_medians(build: Path) -> dict[str, float]:
    """Notebook 03's median over stacks of each role's median symmetry, recomputed from its dataset."""
    from attnstruct.analyses import paper_comparison, pretrained_scores
    from attnstruct.results import load_dataset

    summary = pretrained_scores.stack_summary(load_dataset(build / "results" / "03_pretrained_models.nc"))
    groups = paper_comparison.group_medians(summary).set_index("stack")
    return {role: float(groups.loc[role, "symmetry_median"]) for role in ("encoder", "decoder")}


def test_landing_page_shows_the_main_figure_under_its_message(built):
    from attnstruct.report import prose

    site, build = built
    page = Page(site / "index.html")
    images = [a for tag, a in page.tags if tag == "img" and "03_encoders_vs_decoders" in a.get("src", "")]
    assert images, "the landing page has no 03_encoders_vs_decoders figure"
    assert page.resolve(images[0]["src"])[0].is_file()
    assert "book-main-figure" in " ".join(a.get("class", "") for tag, a in page.tags if tag == "figure")
    medians = _role_medians(build)
    relation = "more" if medians["encoder"] > medians["decoder"] else "less"
    title = (
        f"Encoder stacks are {relation} symmetric than decoder stacks: median symmetry "
        f"{prose.signed(medians['encoder'])} against {prose.signed(medians['decoder'])}"
    )
    assert title in page.text


def test_lecture_path_timings_are_the_papermill_durations(books):
    folder, build = books
    site = folder / "instructor"
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


def _folded(tags) -> int:
    return sum(t == "details" and {"hide", "above-input"} <= set(a.get("class", "").split()) for t, a in tags)


def _solution_dropdowns(page: Page) -> list[dict]:
    return [a for t, a in page.tags if t == "details" and {"solution", "dropdown"} <= set(a.get("class", "").split())]


def test_exercises_page_has_one_dropdown_per_solution_cell(books):
    folder, build = books
    site = folder / "instructor"
    solutions = 0
    for name in NOTEBOOKS:
        cells = [c for c in _executed(build, name).cells if c.metadata.get("nbgrader", {}).get("solution") is True]
        solutions += len(cells)
        code = sum(c.cell_type == "code" for c in cells)
        folded = _folded(Page(site / "notebooks" / f"{name}.html").tags)
        assert folded >= code, f"{name}: {code} solution cells, {folded} folded inputs"
    page = Page(site / "exercises.html")
    dropdowns = _solution_dropdowns(page)
    assert len(dropdowns) == solutions
    assert not any("open" in a for a in dropdowns), "solutions must start folded"
    for href in {a["href"] for tag, a in page.tags if tag == "a" and "notebooks/" in a.get("href", "")}:
        target, fragment = page.resolve(href)
        assert target.is_file(), href
        assert not fragment or fragment in Page(target).ids, href


def test_no_file_of_the_student_book_holds_a_solution_line_or_a_build_path(books):
    """Every file of the student book, the pages' ``.ipynb`` downloads (``_sources/``) and the search index
    included, read as raw text, as HTML and as JSON: no line of a solution, no path of the build machine."""
    folder, build = books
    lines = solution_lines(ROOT)  # from the notebook sources
    assert all(lines.values()), "a notebook without solution lines to look for"
    paths = (str(build), str(folder), str(ROOT))
    assert leaks(folder / "student", set().union(*lines.values()), paths) == []
    assert (folder / "student" / "searchindex.js").is_file()
    for name in NOTEBOOKS:  # the same reader finds every line where it is meant to be
        assert held_lines(folder / "instructor", lines[name]) == lines[name], name
        assert (folder / "student" / "_sources" / "notebooks" / f"{name}.ipynb").is_file(), name


def test_no_file_of_the_instructor_book_holds_a_path_of_the_build_machine(books):
    folder, build = books
    assert leaks(folder / "instructor", set(), (str(build), str(folder), str(ROOT))) == []


def test_the_download_of_a_notebook_page_keeps_nothing_of_its_run(built):
    """A page's ``.ipynb`` download is the page's notebook: no papermill record (it holds the input notebook whole
    and the run's paths), no injected parameters cell; in the student book, nbgrader's stub for each solution."""
    site, build = built
    for name in NOTEBOOKS:
        download = nbformat.read(site / "_sources" / "notebooks" / f"{name}.ipynb", as_version=4)
        assert "papermill" not in download.metadata, name
        assert not [c for c in download.cells if "papermill" in c.metadata], name
        assert not [c for c in download.cells if exercises.INJECTED in c.metadata.get("tags", [])], name
        stubs = sum("# YOUR CODE HERE" in c.source for c in download.cells)  # named or nbgrader's stub
        wanted = len(exercises.exercises(_executed(build, name), name)) if _audience(site) == "student" else 0
        assert stubs == wanted, name


def test_the_student_book_holds_no_solution(books):
    folder, build = books
    for path in _html_pages(folder / "student"):
        text = Page(path).text
        assert exercises.BEGIN not in text and exercises.END not in text, path
    page = Page(folder / "student" / "exercises.html")
    assert not _solution_dropdowns(page)
    for name in NOTEBOOKS:
        for ex in exercises.exercises(_executed(build, name), name):
            assert f"Exercise {ex.number}: " in page.text, ex.grade_id  # the prompts and checks are listed
            assert ex.check.strip().splitlines()[0] in page.text, ex.grade_id
        stubs = Page(folder / "student" / "notebooks" / f"{name}.html").text.count("# YOUR CODE HERE")
        assert stubs >= len(exercises.exercises(_executed(build, name), name)), name


def _article(path: Path) -> str:
    """The text of a page's article (its content, without the navigation)."""
    text = path.read_text(encoding="utf-8")
    match = re.search(r"<article\b.*?</article>", text, re.S)
    parser = HTMLParser(convert_charrefs=True)
    pieces: list[str] = []
    parser.handle_data = pieces.append
    parser.feed(match.group(0) if match else text)
    return "\n".join(pieces)


def test_the_student_book_has_no_lecture_path_or_answer_key(books):
    folder, _ = books
    student, instructor = folder / "student", folder / "instructor"
    assert not (student / "lecture-path.html").exists()
    elsewhere = "\n".join(Page(p).text for p in _html_pages(instructor) if p.name != "lecture-path.html")
    lecture = [s.strip() for s in _article(instructor / "lecture-path.html").split("\n")]
    answer_key = [s for s in lecture if len(s) >= 60 and s not in elsewhere]  # the text only the lecture path has
    assert answer_key
    for path in _html_pages(student):
        page = Page(path)
        assert not [a for t, a in page.tags if t == "a" and "lecture-path" in a.get("href", "")], path
        shown = [s for s in answer_key if s in page.text]
        assert not shown, f"{path.name} shows the lecture path: {shown[:2]}"


def test_the_injected_parameters_cell_is_not_shown(built):
    site, build = built
    for name in NOTEBOOKS:
        nb = _executed(build, name)
        injected = [c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])]
        nb.cells = [c for c in nb.cells if c not in injected]
        rest = book_pages.notebook_text(nb)  # a line the notebook also holds elsewhere may be shown from there
        lines = [ln.strip() for c in injected for ln in c.source.splitlines() if "=" in ln and ln.strip() not in rest]
        assert injected, name  # papermill injected the profile's parameters
        text = Page(site / "notebooks" / f"{name}.html").text
        for line in lines:
            assert line not in text, f"{name}: {line}"


def test_every_docs_page_mentioned_is_a_linked_page_of_the_book(built):
    site, build = built
    for path in _html_pages(site):
        page = Page(path)
        for name in set(re.findall(r"docs/([\w-]+)\.md", page.text)):
            assert (site / "guides" / f"{name}.html").is_file(), f"{path.name} mentions docs/{name}.md"
        for href in [a["href"] for t, a in page.tags if t == "a" and "guides/" in a.get("href", "")]:
            assert page.resolve(href)[0].is_file(), f"{path.name}: {href}"
    for name in NOTEBOOKS:  # a mention in a notebook's Markdown is a link to the guide
        prose = "\n".join(c.source for c in _executed(build, name).cells if c.cell_type == "markdown")
        page = Page(site / "notebooks" / f"{name}.html")
        linked = {a.get("href", "").split("#")[0] for t, a in page.tags if t == "a"}
        for guide in set(re.findall(r"docs/([\w-]+)\.md", prose)):
            assert f"../guides/{guide}.html" in linked, f"{name}: docs/{guide}.md is not a link"


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


def test_a_notebook_missing_from_the_build_is_left_out(books, tmp_path):
    _, build = books
    partial = tmp_path / "partial"
    (partial / "notebooks").mkdir(parents=True)
    for name in NOTEBOOKS[:2]:
        (partial / "notebooks" / f"{name}.ipynb").write_bytes((build / "notebooks" / f"{name}.ipynb").read_bytes())
    messages = []
    found, _ = book._collect(partial, ROOT, messages.append)
    assert [b.name for b in found] == NOTEBOOKS and [b.ran for b in found].count(True) == 2
    assert len(messages) == len(NOTEBOOKS) - 2 and all("\n" not in m and "left out" in m for m in messages)
    table = book_contents.notebook_table(found)
    assert table.count("not run") >= len(NOTEBOOKS) - 2


def test_no_executed_notebooks_is_a_one_line_error_and_no_site(tmp_path):
    empty = tmp_path / "empty"
    (empty / "notebooks").mkdir(parents=True)
    out = empty / "book"
    for audience in ("both", "student"):
        proc = subprocess.run(
            [sys.executable, "-m", "attnstruct.teaching.book", "--build-dir", str(empty), "--out", str(out)]
            + ["--audience", audience],
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        assert proc.returncode == 2
        assert len(proc.stderr.strip().splitlines()) == 1 and "no executed notebooks" in proc.stderr
        assert not out.exists() and sorted(p.name for p in empty.iterdir()) == ["notebooks"]
    with pytest.raises(book.BookError, match="no executed notebooks"):
        book.build_book(tmp_path / "nowhere", audience="student")
    with pytest.raises(book.BookError, match="no executed notebooks"):
        book.build_books(tmp_path / "nowhere")


SOLUTION = {"nbgrader": {"solution": True, "grade": False, "grade_id": "ex-09-1", "locked": False}}
CHECK = {"nbgrader": {"solution": False, "grade": True, "grade_id": "ex-09-1-check", "locked": True, "points": 1}}


SECRET = "return x * x  # the secret"


def _exercise_notebook():
    """A notebook with an exercise, a draw-only cell and a mention of a guide."""
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

    printed = [new_output("stream", name="stdout", text="drawn\n")]
    return new_notebook(
        cells=[
            new_markdown_cell("# 09 · A title\n\nThe numbers are in `docs/paper-notes.md`; see docs/training.md."),
            new_code_cell("results_dir = None", metadata={"tags": ["parameters"]}),
            new_code_cell("print('drawn')  # draw only", metadata={"tags": ["hide-input"]}, outputs=printed),
            new_markdown_cell("## Exercises\n\n### Exercise 09.1: first\n\nDo $x^2$."),
            new_code_cell(
                f"def f(x):\n    ### BEGIN SOLUTION\n    {SECRET}\n    ### END SOLUTION",
                metadata=SOLUTION,
                outputs=[new_output("stream", name="stdout", text="the secret output\n")],
            ),
            new_code_cell(
                "assert f(3) == 9\nprint('right:', f(3))",
                metadata=CHECK,
                outputs=[new_output("stream", name="stdout", text="right: 9\n")],
            ),
            new_markdown_cell("## What to take away\n\n* a point"),
        ],
        metadata={
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
            "language_info": {"name": "python", "pygments_lexer": "ipython3"},
        },
    )


def _executed_notebook(build: Path):
    """:func:`_exercise_notebook` as papermill leaves it in ``build/notebooks/09_synthetic.ipynb``: with the
    injected parameters cell (after the parameters cell, with the build's path) and papermill's record."""
    target = build / "notebooks" / "09_synthetic.ipynb"
    return as_papermill_leaves_it(_exercise_notebook(), {"results_dir": str(build / "results")}, target)


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
    page = book_pages.for_site(nb, found)
    assert page.cells[3].metadata["tags"] == ["hide-input"] and "(nb-ex-09-1)=" in page.cells[2].source
    assert "hide-input" not in nb.cells[3].metadata.get("tags", [])  # the executed notebook is left as it was
    assert book_contents.exercises("09_x", new_notebook(cells=[new_markdown_cell("# 09"), new_code_cell("1")])) == []


def test_the_site_copy_of_a_notebook_hides_what_a_reader_should_not_see(tmp_path):
    nb = _executed_notebook(tmp_path / "build")
    found = book_contents.exercises("09_x", nb)
    guides = ["paper-notes", "training"]
    for audience in AUDIENCES:
        page = book_pages.for_site(nb, found, audience=audience, guides=guides, prefix="../guides/")
        text = nbformat.writes(page)  # also the page's download
        assert str(tmp_path) not in text and "papermill" not in text, audience  # no record of the run
        assert len(page.cells) == len(nb.cells) - 1 and page.cells[2].source == nb.cells[3].source  # injected: gone
        assert [c.metadata.get("tags", []) for c in page.cells][2] == ["hide-input"], audience
        assert "[`docs/paper-notes.md`](../guides/paper-notes.md)" in page.cells[0].source
        assert "[docs/training.md](../guides/training.md)" in page.cells[0].source
        solution, check = page.cells[4], page.cells[5]
        if audience == "instructor":
            assert "hide-input" in solution.metadata["tags"] and SECRET in solution.source
            assert solution.outputs and check.outputs
        else:
            assert SECRET not in text and "raise NotImplementedError()" in solution.source
            assert not solution.outputs and not check.outputs and check.source == nb.cells[6].source
            assert page.cells[2].outputs  # every other output stays
    assert exercises.INJECTED in nb.cells[2].metadata["tags"] and "papermill" in nb.metadata  # left as it was


def test_docs_mentions_become_links_outside_code():
    text = "\n".join(
        [
            "See `docs/training.md`, docs/paper-notes.md and `docs/unknown.md`;",
            "a [link](docs/training.md) and `cat docs/training.md` stay.",
            "```bash",
            "less docs/training.md",
            "```",
            "```{note}",
            "In a note: docs/training.md.",
            "```",
        ]
    )
    lines = book_pages.link_docs(text, "guides/", ["training", "paper-notes"]).split("\n")
    assert lines[0] == (
        "See [`docs/training.md`](guides/training.md), [docs/paper-notes.md](guides/paper-notes.md) and "
        "`docs/unknown.md`;"
    )
    assert lines[1:5] == text.split("\n")[1:5]
    assert lines[6] == "In a note: [docs/training.md](guides/training.md)."
    assert book_pages.cited_docs(text) == {"training", "paper-notes", "unknown"}


def _synthetic_build(folder: Path) -> Path:
    """A build folder with one executed notebook (:func:`_executed_notebook`)."""
    _executed_notebook(folder)
    return folder


def test_the_student_book_of_a_synthetic_build_holds_no_solution_line_or_build_path(tmp_path):
    """The executed notebook holds its solution twice (in its cell and in papermill's copy of the input notebook)
    and the build's path; no file of the student book, the page's download included, holds either."""
    build = _synthetic_build(tmp_path / "build")
    assert held_lines(build / "notebooks", {SECRET}) == {SECRET}
    site = book.build_book(build, audience="student", log=lambda message: None)
    assert leaks(site, {SECRET}, (str(build), str(ROOT))) == []
    download = nbformat.read(site / "_sources" / "notebooks" / "09_synthetic.ipynb", as_version=4)
    assert "raise NotImplementedError()" in download.cells[4].source and "papermill" not in download.metadata


def test_both_books_of_a_synthetic_build(tmp_path):
    """Sphinx folds the ``hide-input`` cells, drops the injected parameters and keeps the solution out of the
    student book; the books land next to the page that links them."""
    build = _synthetic_build(tmp_path / "build")
    messages = []
    out = book.build_books(build, log=messages.append)
    assert out == build / "book" and (out / "index.html").is_file()
    assert not [p.name for p in out.iterdir() if p.name not in ("index.html", *AUDIENCES)]
    for audience in AUDIENCES:
        page = Page(out / audience / "notebooks" / "09_synthetic.html")
        assert str(build) not in page.text and "drawn" in page.text
        folded = [a for t, a in page.tags if t == "details" and "above-input" in a.get("class", "")]
        assert len(folded) == (3 if audience == "instructor" else 2), audience  # draw, check (and the solution)
        assert (SECRET in page.text) == (audience == "instructor")
        assert ("right: 9" in page.text) == (audience == "instructor")  # a check's output follows the solution
        linked = {a.get("href") for t, a in page.tags if t == "a"}
        assert {"../guides/paper-notes.html", "../guides/training.html"} <= linked
    assert (out / "instructor" / "lecture-path.html").is_file() and not (out / "student" / "lecture-path.html").exists()
    rebuilt = book.build_books(build, audiences=["student"], log=messages.append)  # the other book is kept
    assert (rebuilt / "instructor" / "lecture-path.html").is_file() and (rebuilt / "student" / "index.html").is_file()
    assert all("\n" not in m for m in messages)


# What leads a student from the student book to the solution version: the sources, their commands, the other book.
ROUTES = {
    "a notebook source": re.compile(r"notebooks/(?:\d\d_\w+|NN_topic|NN_\*|\[0-9\])[^\s\"'<>]*\.py\b"),
    "the instructor book": re.compile(r"(?:\.\./)+instructor\b|instructor/index\.html"),
    "make reproduce or make lab": re.compile(r"\bmake\s+(?:reproduce|lab|sync|notebook)\b"),
}


def _routes(site: Path) -> list[str]:
    """Every route of :data:`ROUTES` in a page or download of ``site``; a guide (the reference pages of
    ``docs/``) is held to the first two and to no command block running the sources."""
    found = []
    for path in sorted(p for p in site.rglob("*") if p.suffix in (".html", ".ipynb", ".md", ".txt")):
        name = path.relative_to(site).as_posix()
        guide = name.startswith(("guides/", "_sources/guides/"))
        for text in readings(path):
            for what, pattern in ROUTES.items():
                if what.startswith("make") and guide:
                    blocks = re.findall(r"<pre>(.*?)</pre>", text, re.S) if path.suffix == ".html" else []
                    text = "\n".join(re.sub(r"<[^>]+>", "", b) for b in blocks)
                match = pattern.search(text)
                if match:
                    found.append(f"{name}: {what} ({match.group(0)!r})")
    return sorted(set(found))


def test_the_student_book_has_no_route_to_the_solution_sources_or_the_instructor_book(tmp_path):
    """The student book says how to open the student notebooks (``build/exercises/``, the nbgrader release, a
    launch link) and has a checklist for the day before; no page, guide or download points at the sources, their
    commands or the instructor's book, and no download holds a solution."""
    mentioned = set().union(*(book_pages.cited_docs(p.read_text()) for p in (ROOT / "notebooks").glob("*.py")))
    assert mentioned <= set(book_pages.STUDENT_GUIDES)  # the guides the notebooks mention are the student's
    build = _synthetic_build(tmp_path / "build")
    nb = nbformat.read(build / "notebooks" / "09_synthetic.ipynb", as_version=4)
    nb.cells[0].source = nb.cells[0].source.replace("docs/training.md", "docs/statistics.md")
    nbformat.write(nb, build / "notebooks" / "09_synthetic.ipynb")
    out = book.build_books(build, log=lambda message: None)
    site = out / "student"
    assert _routes(site) == []
    assert _routes(out / "instructor")  # the instructor book does show the sources' route: the test can see one
    index = Page(site / "index.html")
    assert "build/exercises" in index.text and "before-session-1.html" in {a.get("href") for t, a in index.tags}
    assert "Before session 1" in Page(site / "before-session-1.html").text
    assert leaks(site / "_sources", {SECRET}) == []


def test_the_exercise_pages_title_exercises_without_brackets_and_fold_their_checks(tmp_path):
    site = book.build_book(_synthetic_build(tmp_path / "build"), audience="student", log=lambda message: None)
    page = Page(site / "exercises.html")
    assert "Exercise 09.1: first" in page.text and "Exercise (" not in page.text
    folded = [a for t, a in page.tags if t == "details" and "book-check" in a.get("class", "")]
    assert len(folded) == 1 and "assert f(3) == 9" in page.text


def test_the_site_copy_folds_the_checks_and_drops_the_jupytext_metadata(tmp_path):
    nb = _executed_notebook(tmp_path / "build")
    nb.metadata["jupytext"] = {"text_representation": {"extension": ".py", "format_name": "percent"}}
    found = book_contents.exercises("09_x", nb)
    for audience in AUDIENCES:
        page = book_pages.for_site(nb, found, audience=audience)
        check = next(c for c in page.cells if exercises.is_check(c))
        assert "hide-input" in check.metadata["tags"] and "jupytext" not in page.metadata, audience
