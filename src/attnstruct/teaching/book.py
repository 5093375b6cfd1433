"""The course book: one offline static site built from the executed notebooks of a build (``make book``).

``python -m attnstruct.teaching.book --build-dir build/quick [--out build/quick/book]`` reads
``<build-dir>/notebooks/``,
``figures/`` and ``results/`` (as ``make reproduce`` writes them), never executes a notebook again (myst-nb with
``nb_execution_mode = "off"``), and writes ``<build-dir>/book/``::

    index.html           the paper in five sentences, the main figure, the notebooks in reading order
    lecture-path.html    two 90-minute sessions, with the run times measured in this build
    exercises.html       every nbgrader exercise: prompt, folded solution, check
    data.html            every dataset (copied under data/) with its size and provenance
    citation.html        BibTeX of the paper (from CITATION.cff) and of this companion
    notebooks/NN_x.html  each executed notebook
    guides/NAME.html     the repository's guides (``docs/NAME.md``: the command line, training, teaching, ...)

Everything is local: MathJax 2.7 comes from the ``jupyter_server_mathjax`` package, the theme adds no web fonts,
and the build fails if any ``<script src>``, ``<link href>`` or CSS ``url(``/``@import`` points at the web.
The site is built in a temporary folder and moved into place only when complete. The Sphinx configuration is
``book/conf.py`` with the local ``mathjax_path`` appended; this module is also one of its extensions
(:func:`setup`: the solutions of sphinx-exercise as closed ``<details>``).
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

from . import book_contents as contents
from .book_contents import BookError

ROOT = Path(__file__).resolve().parents[3]  # the checkout holding src/attnstruct
MAIN_FIGURE = "03_encoders_vs_decoders.png"
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
MATHJAX_CONFIG = "TeX-AMS-MML_HTMLorMML-full"  # the combined configuration jupyter_server_mathjax ships (conf.py)
MATHJAX_PARTS = ("MathJax.js", f"config/{MATHJAX_CONFIG}.js", "extensions", "jax/input", "jax/element",
                 "jax/output/HTML-CSS", "fonts/HTML-CSS/STIX-Web", "LICENSE")  # fmt: skip
EXTERNAL = re.compile(
    r"""<script\b[^>]*\bsrc\s*=\s*["']?\s*(?:https?:)?//[^"'\s>]+"""
    r"""|<link\b[^>]*\bhref\s*=\s*["']?\s*(?:https?:)?//[^"'\s>]+"""
    r"""|@import\s+(?:url\()?\s*["']?\s*(?:https?:)?//[^"')\s;]+"""
    r"""|url\(\s*["']?\s*(?:https?:)?//[^"')\s]+""",
    re.IGNORECASE,
)
PAPER = {  # the paper's metadata, used when CITATION.cff lacks a preferred citation
    "title": "The underlying structures of self-attention: symmetry, directionality, and emergent dynamics in "
    "Transformer training",
    "authors": [
        ("Matteo", "Saponati"),
        ("Pascal", "Sager"),
        ("Pau", "Vilimelis Aceituno"),
        ("Thilo", "Stadelmann"),
        ("Benjamin", "Grewe"),
    ],  # fmt: skip
    "collection-title": "Proceedings of the 42nd International Conference on Machine Learning (ICML 2025)",
    "year": 2025,
    "url": "https://arxiv.org/abs/2502.10927",
}
ARXIV = "2502.10927"


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


def setup(app):
    """Sphinx extension: sphinx-exercise solutions of class ``dropdown`` as closed ``<details>``; MathJax on every
    page."""
    from sphinx_exercise.nodes import solution_node

    def visit(self, node):
        if "dropdown" in node.get("classes", []):
            return _visit_solution(self, node)
        self.body.append(self.starttag(node, "div", CLASS="admonition"))

    def depart(self, node):
        self.body.append("</details>\n" if "dropdown" in node.get("classes", []) else "</div>\n")

    app.add_node(solution_node, override=True, html=(visit, depart), singlehtml=(visit, depart))
    app.set_html_assets_policy("always")  # MathJax on every page: the sidebar's titles hold math too
    return {"parallel_read_safe": True, "parallel_write_safe": True}


def _cff(root: Path) -> dict:
    import yaml

    path = root / "CITATION.cff"
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return {}


def _bibtex(kind: str, key: str, fields: list[tuple[str, object]]) -> str:
    width = max(len(k) for k, _ in fields)
    body = ",\n".join(f"  {k.ljust(width)} = {{{' '.join(str(v).split())}}}" for k, v in fields if v)
    return f"@{kind}{{{key},\n{body}\n}}"


def citations(root: Path) -> dict[str, str]:
    """BibTeX of the paper (CITATION.cff's preferred citation, else :data:`PAPER`) and of the software."""
    cff = _cff(root)
    pref = cff.get("preferred-citation") or {}
    if pref.get("title") and pref.get("authors"):
        authors = [(a.get("given-names", ""), a.get("family-names", a.get("name", ""))) for a in pref["authors"]]
        source = "`CITATION.cff` of the repository (its preferred citation)"
    else:
        pref, authors = PAPER, PAPER["authors"]
        source = "the paper's metadata (`CITATION.cff` has no preferred citation)"
    ids = [str(i.get("value", "")) for i in pref.get("identifiers", [])]
    eprint = next((v.split(":", 1)[1] for v in ids if v.startswith("arXiv:")), ARXIV)
    title, year = " ".join(str(pref["title"]).split()), pref.get("year", "")
    word = next((w for w in re.findall(r"[a-z]+", title.lower()) if w not in {"the", "a", "an", "on", "of"}), "")
    key = f"{re.sub(r'[^a-z]', '', authors[0][1].lower())}{year}{word}"
    paper = [
        ("title", title.replace("Transformer", "{Transformer}")),
        ("author", " and ".join(f"{family}, {given}" for given, family in authors)),
        ("booktitle", pref.get("collection-title", "")),
        ("year", year),
        ("url", pref.get("url", "")),
        ("eprint", eprint),
        ("archivePrefix", "arXiv"),
    ]
    people = [
        a.get("name") or f"{a.get('family-names', '')}, {a.get('given-names', '')}" for a in cff.get("authors", [])
    ]
    software = [
        ("title", cff.get("title", "attnstruct")),
        ("author", "{" + (" and ".join(people) or "attnstruct contributors") + "}"),
        ("version", cff.get("version", "")),
        ("license", cff.get("license", "")),
        ("url", cff.get("repository-code", "")),
        ("note", f"Companion to {authors[0][1]} et al., ICML 2025 (arXiv:{eprint})"),
    ]
    return {
        "paper": contents.code_block(_bibtex("inproceedings", key, paper), "bibtex"),
        "software": contents.code_block(_bibtex("software", "attnstruct", software), "bibtex"),
        "source": f"*These entries are built from {source}.*",
    }


def _profile(name: str, params: dict, root: Path | None, build_dir: Path) -> tuple[str, list[str]]:
    """The profile of ``params/`` that the notebook's papermill parameters are (and no changes), or the nearest
    one and the names of the parameters that differ from it."""
    from ..notebooks import PATH_PARAMETERS, PipelineError, load_profile

    params = {k: v for k, v in params.items() if k not in PATH_PARAMETERS}
    if "profile" in params:
        return str(params["profile"]), []
    diffs = {}
    for path in sorted((root / "params").glob("*.yaml")) if root is not None else []:
        try:
            wanted = load_profile(root, path.stem).get(name, {})
        except PipelineError:
            continue
        diffs[path.stem] = sorted(k for k in {*wanted, *params} if wanted.get(k, "<unset>") != params.get(k, "<unset>"))
    if not diffs:
        return build_dir.name, []
    near = min(diffs, key=lambda p: (len(diffs[p]), p != build_dir.name))
    return (f"{near} + {len(diffs[near])} changes" if diffs[near] else near), diffs[near]


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
        profile, changed = _profile(name, params, root, build_dir)
        books.append(contents.Notebook(name, contents.title_of(nb) or name, nb, profile, mine, changed))
    claimed = {p for b in books for p in b.datasets}
    return books, [p for p in datasets if p not in claimed]


def _template(name: str) -> str:
    path = ROOT / "book" / name
    if not path.is_file():
        raise BookError(f"no book template {path}; the book is built from a checkout of the repository")
    return path.read_text(encoding="utf-8")


def _mathjax(static: Path) -> None:
    import jupyter_server_mathjax

    src = Path(jupyter_server_mathjax.__file__).parent / "static"
    if not (src / "MathJax.js").is_file():
        raise BookError(f"no MathJax.js in {src}; install jupyter-server-mathjax")
    for part in MATHJAX_PARTS:
        dest = static / "mathjax" / part
        dest.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if (src / part).is_dir() else shutil.copy2)(src / part, dest)


def _figure(src: Path, build_dir: Path, books: list[contents.Notebook]) -> str:
    """The landing page's figure (copied into the sources), or a line saying it is not in this build."""
    figure = build_dir / "figures" / MAIN_FIGURE
    if not figure.is_file():
        return f"*`figures/{MAIN_FIGURE}` is not in this build: run notebook 03 (`make notebook NB=03`).*"
    (src / "_figures").mkdir()
    shutil.copy2(figure, src / "_figures" / MAIN_FIGURE)
    owner = next((b for b in books if b.name[:2] == MAIN_FIGURE[:2] and b.ran), None)
    where = f" (profile {contents.cell(owner.profile)})" if owner else ""
    alt = "Encoders against decoders: median symmetry and directionality over layers"
    return f"![{alt}](_figures/{MAIN_FIGURE})\n\n*From notebook 03 of this build{where}: `figures/{MAIN_FIGURE}`.*"


def _write_sources(src: Path, build_dir: Path, books, others, root: Path | None) -> None:
    """The Sphinx source tree: conf.py, the pages, the notebooks, the figure, the datasets and MathJax."""
    import nbformat

    (src / "notebooks").mkdir(parents=True)
    (src / "guides").mkdir()
    for guide in GUIDES:
        shutil.copy2(ROOT / "docs" / f"{guide}.md", src / "guides" / f"{guide}.md")
    (src / "_extra" / "data").mkdir(parents=True)
    _mathjax(src / "_static")
    shutil.copy2(ROOT / "book" / "custom.css", src / "_static" / "book.css")
    mathjax = f"mathjax/MathJax.js?config={MATHJAX_CONFIG}"
    conf = (
        f"{_template('conf.py')}\n# Written by attnstruct.teaching.book for {build_dir}.\nmathjax_path = {mathjax!r}\n"
    )
    (src / "conf.py").write_text(conf, encoding="utf-8")
    found = {}
    for nb in books:
        if nb.ran:
            found[nb.name] = contents.exercises(nb.name, nb.nb)
            nbformat.write(contents.for_site(nb.nb, found[nb.name]), src / "notebooks" / f"{nb.name}.ipynb")
    for path in [p for nb in books for p in nb.datasets] + list(others):
        shutil.copy2(path, src / "_extra" / "data" / path.name)
    by_name, ran = {b.name: b for b in books}, [b for b in books if b.ran]
    shown, profiles = _figure(src, build_dir, books), ", ".join(sorted({b.profile for b in ran}))
    landing = {
        "figure": lambda _: shown,
        "notebook_table": lambda _: contents.notebook_table(books),
        "build_dir": lambda _: str(build_dir),
        "profiles": lambda _: f"{len(ran)} of {len(books)} notebooks run; profile {profiles}",
    }
    toc = "\n".join(f"notebooks/{b.name}" for b in ran)
    guides = "\n".join(f"guides/{g}" for g in GUIDES)
    tocs = [
        ("Course", "lecture-path\nexercises"),
        ("Notebooks", toc),
        ("Guides", guides),
        ("Reference", "data\ncitation"),
    ]
    index = contents.fill(_template("landing.md"), landing, "landing.md") + "".join(
        f"\n```{{toctree}}\n:hidden:\n:caption: {caption}\n\n{entries}\n```\n" for caption, entries in tocs
    )
    lecture = {
        "live_limit": lambda _: f"{contents.LIVE_LIMIT_S:g} s",
        "summary": lambda _: contents.timing_summary(books),
        "session": lambda spec: contents.session_block(by_name, spec or ""),
        "timing": lambda name: contents.timing_block(by_name.get(name or ""), name or ""),
    }
    cites = citations(root or ROOT)
    citation = {
        "paper_bibtex": lambda _: cites["paper"],
        "software_bibtex": lambda _: cites["software"],
        "source_note": lambda _: cites["source"],
    }
    for name, text in (
        ("index", index),
        ("lecture-path", contents.fill(_template("lecture-path.md"), lecture, "lecture-path.md")),
        ("exercises", contents.exercise_page(books, found)),
        ("data", contents.data_page(books, others, _attrs)),
        ("citation", contents.fill(_template("citation.md"), citation, "citation.md")),
    ):
        (src / f"{name}.md").write_text(text, encoding="utf-8")


def external_urls(site: Path) -> list[str]:
    """Every web URL that a page or stylesheet of ``site`` would load (script src, link href, CSS url/@import)."""
    found = []
    for path in sorted(site.rglob("*")):
        if path.suffix in (".html", ".css") and path.is_file():
            for match in EXTERNAL.finditer(path.read_text(encoding="utf-8", errors="replace")):
                found.append(f"{path.relative_to(site)}: {match.group(0)[:120]}")
    return found


def _sphinx(src: Path, out: Path, doctrees: Path, log_path: Path) -> None:
    cmd = [sys.executable, "-m", "sphinx", "-b", "html", "-W", "--keep-going", "-q", "-d", str(doctrees)]
    proc = subprocess.run([*cmd, str(src), str(out)], capture_output=True, text=True, cwd=src)
    log_path.write_text(proc.stdout + proc.stderr, encoding="utf-8")
    if proc.returncode:
        lines = [ln for ln in (proc.stderr + proc.stdout).splitlines() if "WARNING" in ln or "ERROR" in ln]
        first = lines[0] if lines else (proc.stderr.strip().splitlines() or ["no output"])[-1]
        first = " ".join(first.replace(str(src) + os.sep, "").split())
        count = f"{len(lines)} warning{'' if len(lines) == 1 else 's'}"
        raise BookError(f"sphinx-build failed ({count}, log: {log_path}): {first}")


def build_book(build_dir: Path, out: Path | None = None, *, log=None) -> Path:
    """Build the site of ``build_dir``'s executed notebooks into ``out`` (default ``build_dir/book``); its path.

    Raises :class:`BookError` (one line) on bad input or a failed build, leaving any older site untouched.
    """
    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    build_dir = Path(build_dir).resolve()
    out = Path(out).resolve() if out is not None else build_dir / "book"
    root = ROOT if (ROOT / "notebooks").is_dir() and (ROOT / "params").is_dir() else None
    books, others = _collect(build_dir, root, log)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        with tempfile.TemporaryDirectory(prefix="attnstruct-book-") as tmp:
            src = Path(tmp) / "src"
            _write_sources(src, build_dir, books, others, root)
            _sphinx(src, staging / "site", Path(tmp) / "doctrees", out.parent / f"{out.name}.log")
        site = staging / "site"
        bad = external_urls(site)
        if bad:
            raise BookError(f"the site would load {len(bad)} files from the web, first {bad[0]}")
        if not (site / "_static" / "mathjax" / "MathJax.js").is_file():
            raise BookError("the site has no local MathJax (_static/mathjax/MathJax.js)")
        old = staging / "old"
        if out.exists():
            os.replace(out, old)
        os.replace(site, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    log(f"book: {sum(b.ran for b in books)} of {len(books)} notebooks -> {out / 'index.html'}")
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m attnstruct.teaching.book``: exit 0 with the site built, 2 with one line on stderr for bad input."""
    parser = argparse.ArgumentParser(prog="python -m attnstruct.teaching.book", description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", type=Path, default=Path("build/quick"), help="folder of a make reproduce")
    parser.add_argument("--out", type=Path, default=None, help="site folder (default: BUILD_DIR/book)")
    args = parser.parse_args(argv)
    try:
        build_book(args.build_dir, args.out)
    except BookError as err:
        print(f"attnstruct book: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
