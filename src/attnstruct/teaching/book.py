"""The course books: two offline static sites built from the executed notebooks of a build (``make book``).

``python -m attnstruct.teaching.book --build-dir build/quick [--out build/quick/book] [--audience both]`` reads
``<build-dir>/notebooks/``, ``figures/`` and ``results/`` (as ``make reproduce`` writes them), never executes a
notebook again (myst-nb with ``nb_execution_mode = "off"``), and writes ``<build-dir>/book/``::

    index.html                      a small page linking the two books
    instructor/ and student/        one book each:
      index.html           the paper in five sentences, the main figure, the notebooks in reading order
      lecture-path.html    two 90-minute sessions, with the run times measured in this build (instructor only)
      before-session-1.html  the student's checklist for the day before the course (student only)
      exercises.html       every nbgrader exercise: prompt, folded solution (instructor only), check
      data.html            every dataset (copied under data/) with its size and provenance
      citation.html        BibTeX of the paper (from CITATION.cff) and of this companion
      notebooks/NN_x.html  each executed notebook (student: solutions replaced by nbgrader's stub)
      _sources/notebooks/NN_x.ipynb   its download: the page's notebook, without papermill's record of the run
      guides/NAME.html     the repository's guides (``docs/NAME.md``), and every one a page mentions

What differs between the books is in :mod:`attnstruct.teaching.book_pages`. Everything is local: MathJax 2.7
comes from the ``jupyter_server_mathjax`` package, the theme adds no web fonts, and the build fails if any
``<script src>``, ``<link href>`` or CSS ``url(``/``@import`` points at the web. The books are built in a
temporary folder (the two Sphinx runs side by side) and moved into place only when complete. The Sphinx
configuration is ``book/conf.py`` with the local ``mathjax_path`` appended; this module is also one of its
extensions (:func:`setup`: the solutions of sphinx-exercise as closed ``<details>``).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from ..report import pages as page_assets
from . import book_contents as contents
from . import book_pages as pages
from . import lecture_path
from .book_contents import BookError

ROOT = Path(__file__).resolve().parents[3]  # the checkout holding src/attnstruct
MAIN_FIGURE = pages.MAIN_FIGURE
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
MATHJAX_CONFIG = page_assets.MATHJAX_CONFIG  # the combined configuration jupyter_server_mathjax ships (conf.py)
EXTERNAL = re.compile(
    r"""<script\b[^>]*\bsrc\s*=\s*["']?\s*(?:https?:)?//[^"'\s>]+"""
    r"""|<link\b[^>]*\bhref\s*=\s*["']?\s*(?:https?:)?//[^"'\s>]+"""
    r"""|@import\s+(?:url\()?\s*["']?\s*(?:https?:)?//[^"')\s;]+"""
    r"""|url\(\s*["']?\s*(?:https?:)?//[^"')\s]+""",
    re.IGNORECASE,
)


def _visit_solution(self, node) -> None:
    """sphinx-exercise's solution as a folded ``<details>``: its title (math included) becomes the ``<summary>``."""
    from docutils import nodes

    title = next((c for c in node.children if isinstance(c, nodes.title)), None)
    self.body.append(self.starttag(node, "details", CLASS="admonition"))
    self.body.append('<summary class="admonition-title">')
    if title is None:
        self.body.append("Solution")
    else:
        node.remove(title)
        for child in title.children:
            child.walkabout(self)
    self.body.append("</summary>\n")


def _unbracket_title(title) -> None:
    """``Exercise (01.1: title)``, as sphinx-exercise titles an unnumbered exercise with a title, made
    ``Exercise 01.1: title`` (the notebook's own heading)."""
    from docutils import nodes

    parts = title.children
    if len(parts) >= 3 and isinstance(parts[1], nodes.Text) and isinstance(parts[-1], nodes.Text):
        if str(parts[1]) == " (" and str(parts[-1]) == ")":
            title.replace(parts[1], nodes.Text(" "))
            title.remove(parts[-1])


def _exercise_titles():
    """A post-transform that runs after sphinx-exercise's titles (its priority 20): :func:`_unbracket_title`."""
    from docutils import nodes
    from sphinx.transforms.post_transforms import SphinxPostTransform
    from sphinx_exercise.nodes import exercise_node

    class UnbracketExerciseTitles(SphinxPostTransform):
        default_priority = 21

        def run(self):
            for node in self.document.findall(exercise_node):
                if node.children and isinstance(node.children[0], nodes.title):
                    _unbracket_title(node.children[0])

    return UnbracketExerciseTitles


def setup(app):
    """Sphinx extension: sphinx-exercise solutions of class ``dropdown`` as closed ``<details>``, exercise titles
    without brackets; MathJax on every page."""
    from sphinx_exercise.nodes import solution_node

    def visit(self, node):
        if "dropdown" in node.get("classes", []):
            return _visit_solution(self, node)
        self.body.append(self.starttag(node, "div", CLASS="admonition"))

    def depart(self, node):
        self.body.append("</details>\n" if "dropdown" in node.get("classes", []) else "</div>\n")

    app.add_node(solution_node, override=True, html=(visit, depart), singlehtml=(visit, depart))
    app.add_post_transform(_exercise_titles())
    app.set_html_assets_policy("always")  # MathJax on every page: the sidebar's titles hold math too
    return {"parallel_read_safe": True, "parallel_write_safe": True}


def _attrs(path: Path) -> dict:
    from ..results import load_dataset

    try:
        return {k: v for k, v in load_dataset(path).attrs.items()}
    except Exception as err:  # noqa: BLE001 - an unreadable dataset is listed, not fatal
        return {"error": " ".join(f"{type(err).__name__}: {err}".split())}


def _collect(build_dir: Path, root: Path | None, log) -> tuple[list[contents.Notebook], list[Path]]:
    """The notebooks in reading order (run or not) and the datasets no notebook claims."""
    import nbformat

    from ..notebooks import list_notebooks

    nb_dir = build_dir / "notebooks"
    executed = {p.stem: p for p in sorted(nb_dir.glob("[0-9][0-9]_*.ipynb"))} if nb_dir.is_dir() else {}
    if not executed:
        raise BookError(f"no executed notebooks in {nb_dir}; run `make reproduce` (or `attnstruct reproduce`) first")
    sources = {p.stem: p for p in list_notebooks(root)} if root is not None else {}
    datasets = sorted((build_dir / "results").glob("*.nc")) if (build_dir / "results").is_dir() else []
    books = []
    for name in sorted({*sources, *executed}):
        if name not in executed:
            log(f"warning: notebook {name} has no executed copy in {nb_dir}; left out of the book (not run)")
            books.append(contents.Notebook(name, contents.source_title(sources[name])))
            continue
        try:
            nb = nbformat.read(executed[name], as_version=4)
        except Exception as err:  # noqa: BLE001 - any unreadable file is bad input, named in one line
            raise BookError(f"executed notebook {executed[name]} cannot be read: {type(err).__name__}") from None
        meta = nb.metadata.get("papermill", {})
        if meta.get("duration") is None or meta.get("exception"):
            why = "failed when it ran" if meta.get("exception") else "has no papermill duration (still running?)"
            log(f"warning: notebook {name} {why}; left out of the book (not run)")
            books.append(contents.Notebook(name, contents.title_of(nb) or name))
            continue
        params = dict(nb.metadata.get("papermill", {}).get("parameters", {}))
        mine = [p for p in datasets if p.stem.split("_", 1)[0] == name[:2]]
        profile, changed = pages.profile_of(name, params, root, build_dir)
        books.append(contents.Notebook(name, contents.title_of(nb) or name, nb, profile, mine, changed))
    claimed = {p for b in books for p in b.datasets}
    return books, [p for p in datasets if p not in claimed]


def _template(name: str) -> str:
    path = ROOT / "book" / name
    if not path.is_file():
        raise BookError(f"no book template {path}; the book is built from a checkout of the repository")
    return path.read_text(encoding="utf-8")


def _mathjax(static: Path) -> None:
    try:
        page_assets.copy_mathjax(static)
    except page_assets.PageError as err:
        raise BookError(str(err)) from None


def _guides(audience: str, books, log) -> list[str]:
    """The guides of the ``audience`` book: :data:`GUIDES` and every ``docs/NAME.md`` its pages mention."""
    texts = [pages.notebook_text(b.nb) for b in books if b.ran]
    templates = ("landing", f"how-to-run-{audience}", "citation")
    templates += tuple(p for p in pages.pages(audience) if p in ("lecture-path", *pages.STUDENT_PAGES))
    texts += [_template(f"{name}.md") for name in templates]
    return pages.guides_for(audience, GUIDES, texts, ROOT / "docs", log)


def _write_common(src: Path, build_dir: Path, books, others, guides: list[str]) -> None:
    """What both books hold: conf.py, the guides, the datasets and MathJax."""
    (src / "notebooks").mkdir(parents=True)
    (src / "guides").mkdir()
    for guide in guides:
        text = (ROOT / "docs" / f"{guide}.md").read_text(encoding="utf-8")
        (src / "guides" / f"{guide}.md").write_text(pages.link_docs(text, "", guides), encoding="utf-8")
    (src / "_extra" / "data").mkdir(parents=True)
    _mathjax(src / "_static")
    shutil.copy2(ROOT / "book" / "custom.css", src / "_static" / "book.css")
    mathjax = f"mathjax/MathJax.js?config={MATHJAX_CONFIG}"
    conf = (
        f"{_template('conf.py')}\n# Written by attnstruct.teaching.book for {build_dir}.\nmathjax_path = {mathjax!r}\n"
    )
    (src / "conf.py").write_text(conf, encoding="utf-8")
    for path in [p for nb in books for p in nb.datasets] + list(others):
        shutil.copy2(path, src / "_extra" / "data" / path.name)


def _landing(src: Path, build_dir: Path, books, audience: str, guides: list[str]) -> str:
    ran = [b for b in books if b.ran]
    title, shown = pages.main_figure(src, build_dir, books)
    profiles = ", ".join(sorted({b.profile for b in ran}))
    other = "student" if audience == "instructor" else "instructor"
    landing = {
        "figure_title": lambda _: title,
        "figure": lambda _: shown,
        "notebook_table": lambda _: contents.notebook_table(books),
        "course_links": lambda _: pages.course_paragraph(audience, guides),
        "build_dir": lambda _: pages.shown_folder(build_dir, ROOT),
        "profiles": lambda _: f"{len(ran)} of {len(books)} notebooks run; profile {profiles}",
        "other_book": lambda _: (
            f"This is the {audience}'s book; `make book` writes the {other}'s beside it, in `../{other}/`."
        ),
    }
    landing["how_to_run"] = lambda _: contents.fill(_template(f"how-to-run-{audience}.md"), landing, "how-to-run")
    course = "\n".join(p for p in pages.pages(audience) if p in pages.COURSE_PAGES)
    tocs = [
        ("Course", course),
        ("Notebooks", "\n".join(f"notebooks/{b.name}" for b in ran)),
        ("Guides", "\n".join(f"guides/{g}" for g in guides)),
        ("Reference", "data\ncitation"),
    ]
    return contents.fill(_template("landing.md"), landing, "landing.md") + "".join(
        f"\n```{{toctree}}\n:hidden:\n:caption: {caption}\n\n{entries}\n```\n" for caption, entries in tocs
    )


def _citation(root: Path | None) -> str:
    cites = pages.citations(root or ROOT)
    citation = {
        "paper_bibtex": lambda _: cites["paper"],
        "software_bibtex": lambda _: cites["software"],
        "source_note": lambda _: cites["source"],
    }
    return contents.fill(_template("citation.md"), citation, "citation.md")


def _write_sources(src: Path, build_dir: Path, books, others, root: Path | None, audience: str, log) -> None:
    """The Sphinx source tree of the ``audience`` book: conf.py, the pages, the notebooks (copied for the site,
    :func:`attnstruct.teaching.book_pages.for_site`), the figure, the datasets and MathJax."""
    import nbformat

    guides = _guides(audience, books, log)
    _write_common(src, build_dir, books, others, guides)
    found = {}
    for nb in books:
        if nb.ran:
            found[nb.name] = contents.exercises(nb.name, nb.nb)
            page = pages.for_site(nb.nb, found[nb.name], audience=audience, guides=guides, prefix="../guides/")
            nbformat.write(page, src / "notebooks" / f"{nb.name}.ipynb")
    texts = {
        "index": lambda: _landing(src, build_dir, books, audience, guides),
        "lecture-path": lambda: lecture_path.page(books, ROOT, build_dir, _template("lecture-path.md")),
        "exercises": lambda: contents.exercise_page(books, found, solutions=audience == "instructor"),
        "data": lambda: contents.data_page(books, others, _attrs),
        "citation": lambda: _citation(root),
        "before-session-1": lambda: _template("before-session-1.md"),
    }
    for name in pages.pages(audience):
        text = pages.link_docs(texts[name](), "guides/", guides)
        (src / f"{name}.md").write_text(text, encoding="utf-8")


def external_urls(site: Path) -> list[str]:
    """Every web URL that a page or stylesheet of ``site`` would load (script src, link href, CSS url/@import)."""
    found = []
    for path in sorted(site.rglob("*")):
        if path.suffix in (".html", ".css") and path.is_file():
            for match in EXTERNAL.finditer(path.read_text(encoding="utf-8", errors="replace")):
                found.append(f"{path.relative_to(site)}: {match.group(0)[:120]}")
    return found


def _start_sphinx(src: Path, out: Path, doctrees: Path, log_path: Path) -> subprocess.Popen:
    """sphinx-build of ``src`` into ``out``, running; its output goes to ``log_path``."""
    cmd = [sys.executable, "-m", "sphinx", "-b", "html", "-W", "--keep-going", "-q", "-d", str(doctrees)]
    with open(log_path, "w", encoding="utf-8") as log:
        return subprocess.Popen([*cmd, str(src), str(out)], stdout=log, stderr=subprocess.STDOUT, cwd=src)


def _sphinx_error(proc: subprocess.Popen, src: Path, log_path: Path) -> str | None:
    """Wait for a sphinx-build; ``None`` when it succeeded, else its first warning or error in one line."""
    if not proc.wait():
        return None
    text = log_path.read_text(encoding="utf-8", errors="replace")
    lines = [ln for ln in text.splitlines() if "WARNING" in ln or "ERROR" in ln]
    first = lines[0] if lines else (text.strip().splitlines() or ["no output"])[-1]
    first = " ".join(first.replace(str(src) + os.sep, "").split())
    count = f"{len(lines)} warning{'' if len(lines) == 1 else 's'}"
    return f"sphinx-build failed ({count}, log: {log_path}): {first}"


def _check_site(site: Path, audience: str) -> None:
    bad = external_urls(site)
    if bad:
        raise BookError(f"the {audience} book would load {len(bad)} files from the web, first {bad[0]}")
    if not (site / "_static" / "mathjax" / "MathJax.js").is_file():
        raise BookError(f"the {audience} book has no local MathJax (_static/mathjax/MathJax.js)")


def _root() -> Path | None:
    """The checkout whose notebook sources and profiles the book reads, when it has them."""
    return ROOT if (ROOT / "notebooks").is_dir() and (ROOT / "params").is_dir() else None


def _build_sites(build_dir: Path, collected, audiences, staging: Path, logs: dict[str, Path], log) -> dict:
    """Build the book of each of ``audiences`` from ``collected`` (:func:`_collect`) into
    ``staging/<audience>/html``: every source tree is written first, then the Sphinx runs go side by side, each
    with its own myst-nb ``jupyter_execute`` beside its site. The sites' paths; raises :class:`BookError` (one
    line) on bad input or a failed build."""
    books, others = collected
    sites = {a: staging / a / "html" for a in audiences}
    with tempfile.TemporaryDirectory(prefix="attnstruct-book-") as tmp:
        sources = {a: Path(tmp) / a / "src" for a in audiences}
        for audience, src in sources.items():
            _write_sources(src, build_dir, books, others, _root(), audience, log)
        running = {a: _start_sphinx(sources[a], sites[a], Path(tmp) / a / "doctrees", logs[a]) for a in audiences}
        errors = [_sphinx_error(proc, sources[a], logs[a]) for a, proc in running.items()]
    failed = [e for e in errors if e]
    if failed:
        raise BookError(failed[0])
    for audience, site in sites.items():
        _check_site(site, audience)
    return sites


def _swap(new: Path, out: Path, staging: Path) -> None:
    """Put the finished folder ``new`` in the place of ``out`` (any older one goes into ``staging``)."""
    if out.exists():
        os.replace(out, staging / "old")
    os.replace(new, out)


def _logger(log):
    return log or (lambda msg: print(msg, file=sys.stderr, flush=True))


def build_book(build_dir: Path, out: Path | None = None, *, audience: str = "instructor", log=None) -> Path:
    """Build the ``audience`` book (``instructor`` or ``student``) of ``build_dir``'s executed notebooks into
    ``out`` (default ``build_dir/book/<audience>``); its path.

    Raises :class:`BookError` (one line) on bad input or a failed build, leaving any older site untouched.
    """
    pages.check_audience(audience)
    log, build_dir = _logger(log), Path(build_dir).resolve()
    out = Path(out).resolve() if out is not None else build_dir / "book" / audience
    collected = _collect(build_dir, _root(), log)
    books = collected[0]
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        logs = {audience: out.parent / f"{out.name}.log"}
        sites = _build_sites(build_dir, collected, [audience], staging, logs, log)
        _swap(sites[audience], out, staging)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    log(f"book ({audience}): {sum(b.ran for b in books)} of {len(books)} notebooks -> {out / 'index.html'}")
    return out


def build_books(build_dir: Path, out: Path | None = None, *, audiences=pages.AUDIENCES, log=None) -> Path:
    """Build the books of ``audiences`` into ``out/<audience>/`` (default ``build_dir/book``) with ``out/index.html``
    linking them; the path of ``out``. A book not rebuilt is kept from an older ``out``.

    Raises :class:`BookError` (one line) on bad input or a failed build, leaving any older books untouched.
    """
    audiences = [pages.check_audience(a) for a in dict.fromkeys(audiences)]
    log, build_dir = _logger(log), Path(build_dir).resolve()
    out = Path(out).resolve() if out is not None else build_dir / "book"
    collected = _collect(build_dir, _root(), log)
    books = collected[0]
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        logs = {a: out.parent / f"{out.name}.{a}.log" for a in audiences}
        sites = _build_sites(build_dir, collected, audiences, staging, logs, log)
        new = staging / "books"
        new.mkdir()
        for audience, site in sites.items():
            os.replace(site, new / audience)
        for kept in [a for a in pages.AUDIENCES if a not in audiences]:
            if (out / kept / "index.html").is_file():
                os.replace(out / kept, new / kept)
        present = [a for a in pages.AUDIENCES if (new / a / "index.html").is_file()]
        (new / "index.html").write_text(pages.books_index(present), encoding="utf-8")
        _swap(new, out, staging)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    ran = sum(b.ran for b in books)
    for audience in audiences:
        log(f"book ({audience}): {ran} of {len(books)} notebooks -> {out / audience / 'index.html'}")
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m attnstruct.teaching.book``: exit 0 with the books built, 2 with one line on stderr for bad
    input."""
    parser = argparse.ArgumentParser(prog="python -m attnstruct.teaching.book", description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", type=Path, default=Path("build/quick"), help="folder of a make reproduce")
    parser.add_argument("--out", type=Path, default=None, help="folder of the books (default: BUILD_DIR/book)")
    parser.add_argument(
        "--audience", choices=("both", *pages.AUDIENCES), default="both", help="which book to build (default: both)"
    )
    args = parser.parse_args(argv)
    audiences = pages.AUDIENCES if args.audience == "both" else (args.audience,)
    try:
        build_books(args.build_dir, args.out, audiences=audiences)
    except BookError as err:
        print(f"attnstruct book: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
