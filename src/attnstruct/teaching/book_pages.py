"""What differs between the two course books, and the copies of the notebooks and guides made for them.

``attnstruct.teaching.book`` builds an **instructor** book (solutions folded on the notebook pages and on the
exercises page, the lecture path with its answer key) and a **student** book (solution cells replaced by
nbgrader's stub, their outputs and the checks' outputs removed, the exercises page without solutions, no page
meant for the instructor only) from the same executed notebooks. This module holds what a test can check
without Sphinx: the notebook copied for a page (:func:`for_site`), the guides a book needs
(:func:`guides_for`) and the ``docs/NAME.md`` mentions turned into links to them (:func:`link_docs`), the
landing page's course paragraph and main-figure title, and the small page that links the two books.
"""

from __future__ import annotations

import copy
import html
import re
import shutil
from collections.abc import Iterable
from pathlib import Path

from .book_contents import EXERCISE_HEADING, Exercise, Notebook, code_block, is_check, is_solution
from .book_contents import cell as table_cell
from .exercises import without_run_record

AUDIENCES = ("instructor", "student")
INSTRUCTOR_PAGES = ("lecture-path",)  # the lecture path holds the answer key to the lecturer's questions
STUDENT_PAGES = ("before-session-1",)  # the checklist for the day before the course
COURSE_PAGES = ("before-session-1", "lecture-path", "exercises")  # the landing page's Course section, in order
# The student book's guides: what the notebooks are read with. The others explain how to run, test and build the
# project from its sources (the solution version), which is the instructor's route, not the student's.
STUDENT_GUIDES = ("statistics", "paper-notes", "calibration", "performance")
MAIN_FIGURE = "03_encoders_vs_decoders.png"  # the landing page's figure
MAIN_DATASET = "03_pretrained_models.nc"  # its data, for its title
DOCS_MENTION = re.compile(r"(?<![\w./\[(-])docs/([A-Za-z0-9_-]+)\.md(?![\w\]-])")
DOCS_CODE = re.compile(r"^docs/([A-Za-z0-9_-]+)\.md$")
DOCS_LINK = re.compile(r"\]\((?!https?:|/)(?:\./)?([A-Za-z0-9_-]+)\.md(?:#[^)]*)?\)")  # a guide's link to a sibling
INLINE_CODE = re.compile(r"(`+)(.+?)\1")
FENCE = re.compile(r"^\s*(`{3,}|~{3,})\s*(\{[^}]*\}|[^`\s]*)")
LITERAL_DIRECTIVES = {"{code-block}", "{code}", "{code-cell}", "{literalinclude}", "{toctree}", "{math}"}
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
GUIDE_LABELS = {  # how the landing page names each guide it links, in this order
    "command-line": "the command line",
    "training": "training from scratch",
    "teaching": "teaching with the notebooks",
    "architecture": "the package's architecture",
    "performance": "its performance",
    "statistics": "the statistics",
    "testing": "its tests",
}


def check_audience(audience: str) -> str:
    if audience not in AUDIENCES:
        raise ValueError(f"audience must be one of {', '.join(AUDIENCES)}, not {audience!r}")
    return audience


def pages(audience: str) -> tuple[str, ...]:
    """The generated top-level pages of a book (``index`` and the Course, Reference sections)."""
    every = ("index", "before-session-1", "lecture-path", "exercises", "data", "citation")
    mine = STUDENT_PAGES if audience == "student" else INSTRUCTOR_PAGES
    return tuple(p for p in every if p in mine or p not in (*INSTRUCTOR_PAGES, *STUDENT_PAGES))


# Mentions of docs/NAME.md.


def cited_docs(text: str) -> set[str]:
    """The names of the ``docs/NAME.md`` files that ``text`` mentions."""
    return set(re.findall(r"docs/([A-Za-z0-9_-]+)\.md", text))


def notebook_text(nb) -> str:
    """Every source and text output of a notebook, for :func:`cited_docs`."""
    parts = []
    for cell in nb.cells:
        parts.append(cell.source)
        for out in cell.get("outputs", []):
            parts.append(str(out.get("text", "")))
            parts += [str(v) for k, v in out.get("data", {}).items() if k.startswith("text/")]
    return "\n".join(parts)


def guides_for(audience: str, base: Iterable[str], texts: Iterable[str], docs: Path, log=None) -> list[str]:
    """The guides of a book: ``base`` (in the student book only those of :data:`STUDENT_GUIDES`), every
    ``docs/NAME.md`` that ``texts`` (the book's pages) mention, and every guide those guides mention or link, in
    ``base``'s order and then by name. A mentioned file missing from ``docs`` is logged and left out."""
    chosen = [g for g in base if audience == "instructor" or g in STUDENT_GUIDES]
    pending = set(chosen).union(*(cited_docs(t) for t in texts))
    found: set[str] = set()
    missing: set[str] = set()
    while pending:
        name = pending.pop()
        path = docs / f"{name}.md"
        if not path.is_file():
            if log is not None and name not in missing:
                log(f"warning: a page mentions docs/{name}.md, which is not in {docs}; left out of the book")
            missing.add(name)
            continue
        found.add(name)
        text = path.read_text(encoding="utf-8")
        pending |= (cited_docs(text) | set(DOCS_LINK.findall(text))) - found - missing
    return [g for g in chosen if g in found] + sorted(found - set(chosen))


def _link_line(line: str, prefix: str, guides: set[str]) -> str:
    """One line of Markdown with its ``docs/NAME.md`` mentions (bare or as the whole of a code span) as links."""

    def bare(text: str) -> str:
        return DOCS_MENTION.sub(
            lambda m: f"[{m.group(0)}]({prefix}{m.group(1)}.md)" if m.group(1) in guides else m.group(0), text
        )

    out, last = [], 0
    for match in INLINE_CODE.finditer(line):
        out.append(bare(line[last : match.start()]))
        name = DOCS_CODE.match(match.group(2).strip())
        linked = name and name.group(1) in guides and not line[: match.start()].endswith("[")
        out.append(f"[{match.group(0)}]({prefix}{name.group(1)}.md)" if linked else match.group(0))
        last = match.end()
    out.append(bare(line[last:]))
    return "".join(out)


def link_docs(text: str, prefix: str, guides: Iterable[str]) -> str:
    """``text`` (MyST Markdown) with each mention of ``docs/NAME.md``, NAME one of ``guides``, made a link to
    ``{prefix}NAME.md`` (its page in the book); code blocks and literal directives are left as they are."""
    guides, lines, stack = set(guides), [], []
    for line in text.split("\n"):
        fence = FENCE.match(line)
        if fence:
            mark, info = fence.group(1), fence.group(2)
            if stack and mark[0] == stack[-1][0][0] and len(mark) >= len(stack[-1][0]) and not info:
                stack.pop()
            else:
                literal = not info.startswith("{") or info in LITERAL_DIRECTIVES
                stack.append((mark, literal))
            lines.append(line)
        elif any(literal for _, literal in stack):
            lines.append(line)
        else:
            lines.append(_link_line(line, prefix, guides))
    return "\n".join(lines)


# The notebook copied for a page.


def _add_tag(cell, tag: str) -> None:
    tags = cell.metadata.setdefault("tags", [])
    if tag not in tags:
        tags.append(tag)


def stub_solutions(nb):
    """``nb`` with every solution region replaced by nbgrader's stub (``ClearSolutions``, as the student
    notebooks of :func:`attnstruct.teaching.exercises.student_version`), and the outputs of the solution and
    check cells removed (they were computed from the solution). Every other output stays."""
    from nbgrader.preprocessors import ClearSolutions

    nb, _ = ClearSolutions(enforce_metadata=False).preprocess(copy.deepcopy(nb), {"language": "python"})
    for cell in nb.cells:
        if cell.cell_type == "code" and (is_solution(cell) or is_check(cell)):
            cell.outputs, cell.execution_count = [], None
    return nb


def _link_outputs(cell, prefix: str, guides: Iterable[str]) -> None:
    for out in cell.get("outputs", []):
        data = out.get("data", {})
        if "text/markdown" in data:
            data["text/markdown"] = link_docs(str(data["text/markdown"]), prefix, guides)


def for_site(nb, found: list[Exercise], *, audience: str = "instructor", guides: Iterable[str] = (), prefix=""):
    """A copy of ``nb`` for its page in the ``audience`` book.

    The copy is also the page's download (Sphinx copies it to ``_sources/``), so it carries no record of the
    papermill run (:func:`attnstruct.teaching.exercises.without_run_record`: papermill's metadata, which holds the
    whole input notebook, and its injected parameters cell, which holds the build machine's paths) and no jupytext
    metadata. A cell tagged ``hide-input`` keeps its tag (folded input); the check cells are folded too (shown on
    demand), and in the instructor book the solution inputs, in the student book they are nbgrader's stub
    (:func:`stub_solutions`); a target is put before each exercise prompt,
    and the ``docs/NAME.md`` mentions of Markdown become links to ``{prefix}NAME.md`` (:func:`link_docs`).
    """
    check_audience(audience)
    nb = without_run_record(stub_solutions(nb) if audience == "student" else copy.deepcopy(nb))
    nb.metadata.pop("jupytext", None)  # a download saved in Jupyter must not write a paired .py beside it
    targets = iter([ex.target for ex in found if ex.heading])  # the prompts' headings, in order
    guides = list(guides)
    for cell in nb.cells:
        if cell.cell_type == "code" and (is_check(cell) or (is_solution(cell) and audience == "instructor")):
            _add_tag(cell, "hide-input")
        elif cell.cell_type == "markdown" and not is_solution(cell):
            lines = []
            for line in cell.source.splitlines():
                if EXERCISE_HEADING.match(line):
                    lines += ["", f"({next(targets)})="]
                lines.append(line)
            cell.source = link_docs("\n".join(lines), prefix, guides)
        _link_outputs(cell, prefix, guides)
    return nb


# The landing page.


def shown_folder(folder: Path, root: Path) -> str:
    """How a page names a folder of the build: relative to the checkout ``root`` when inside it (``build/quick``),
    else by its own name. A page never holds an absolute path of the machine that built it."""
    folder, root = Path(folder).resolve(), Path(root).resolve()
    return folder.relative_to(root).as_posix() if folder.is_relative_to(root) else folder.name


def course_paragraph(audience: str, guides: Iterable[str]) -> str:
    """The landing page's paragraph on the course pages, the reference pages and the guides of this book."""
    if audience == "instructor":
        course = (
            "The [lecture path](lecture-path.md) turns notebooks 01 to 07 into two 90-minute sessions, with the run "
            "times measured in this build and the answers to its questions; the [exercises](exercises.md) of every "
            "notebook are collected on one page, each with its folded solution and its check"
        )
    else:
        course = (
            "The [exercises](exercises.md) of every notebook are collected on one page, each with the check that "
            "grades it (the solutions are not in this book)"
        )
    named = [f"[{label}](guides/{name}.md)" for name, label in GUIDE_LABELS.items() if name in set(guides)]
    listed = ", ".join(named[:-1]) + f" and {named[-1]}" if len(named) > 1 else "".join(named)
    tail = f". The guides explain {listed}." if named else "."
    return (
        f"{course}; the [data](data.md) page lists each dataset with its provenance, and "
        f"[citation](citation.md) says how to cite the paper and this companion{tail}"
    )


def main_figure_title(dataset: Path) -> tuple[str, str] | None:
    """The main figure's message (encoders against decoders, median symmetry) and a sentence on what it is
    computed from, both from notebook 03's dataset with the functions the notebook uses; ``None`` when the
    dataset is missing or has no stack of each role."""
    from ..analyses import paper_comparison, pretrained_scores
    from ..report import prose
    from ..results import load_dataset

    if not dataset.is_file():
        return None
    try:
        summary = pretrained_scores.stack_summary(load_dataset(dataset))
        groups = paper_comparison.group_medians(summary).set_index("stack")
    except Exception:  # noqa: BLE001 - an unreadable dataset leaves the figure without a computed title
        return None
    enc, dec = groups.loc["encoder"], groups.loc["decoder"]
    if not enc["n"] or not dec["n"]:
        return None
    a, b = float(enc["symmetry_median"]), float(dec["symmetry_median"])
    relation = "more symmetric than" if a > b else "less symmetric than" if a < b else "as symmetric as"
    title = f"Encoder stacks are {relation} decoder stacks: median symmetry {prose.signed(a)} against {prose.signed(b)}"
    basis = (
        f"The medians in the title are over the {prose.count(int(enc['n']), 'encoder stack')} and the "
        f"{prose.count(int(dec['n']), 'decoder stack')} scored in this build (`results/{dataset.name}`), each "
        "stack's own value being its median over layers"
    )
    return title, basis


def main_figure(src: Path, build_dir: Path, books: list[Notebook]) -> tuple[str, str]:
    """The landing page's figure section: its title, the message computed from notebook 03's dataset, and the
    figure at the full content width (copied into the sources), or a line saying it is not in this build."""
    computed = main_figure_title(build_dir / "results" / MAIN_DATASET)
    title = computed[0] if computed else "The main figure: encoder stacks against decoder stacks"
    figure = build_dir / "figures" / MAIN_FIGURE
    if not figure.is_file():
        return title, f"*`figures/{MAIN_FIGURE}` is not in this build: notebook 03 was not run in it.*"
    (src / "_figures").mkdir(exist_ok=True)
    shutil.copy2(figure, src / "_figures" / MAIN_FIGURE)
    owner = next((b for b in books if b.name[:2] == MAIN_FIGURE[:2] and b.ran), None)
    where = f" (profile {table_cell(owner.profile)})" if owner else ""
    caption = (
        "Each self-attention stack's median symmetry (left) and directionality (right) over its layers, with "
        "bars from the first to the third quartile, against its number of parameters: encoder stacks in navy, "
        "decoder stacks in purple; the small pale dots are the values the paper reports for its models. "
        + (f"{computed[1]}. " if computed else "")
        + f"From notebook 03 of this build{where}: `figures/{MAIN_FIGURE}`."
    )
    alt = "Encoders against decoders: median symmetry and directionality over layers against model size"
    body = (
        f"```{{figure}} _figures/{MAIN_FIGURE}\n:alt: {alt}\n:width: 100%\n:figwidth: 100%\n"
        f":figclass: book-main-figure\n:name: main-figure\n\n{caption}\n```"
    )
    return title, body


# The page that links the two books.


def books_index(present: Iterable[str]) -> str:
    """A small self-contained HTML page (no script, no style sheet) that links the books in ``present``."""
    about = {
        "instructor": "solutions, the exercises with their solutions, the lecture path with its answer key",
        "student": "the same notebooks and exercises with the solutions replaced by stubs; no lecture path",
    }
    items = "\n".join(f'<li><a href="{a}/index.html">The {a} book</a>: {html.escape(about[a])}.</li>' for a in present)
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        "<title>attnstruct course books</title>\n</head>\n"
        '<body style="font-family: sans-serif; max-width: 40rem; margin: 2rem auto; line-height: 1.5">\n'
        "<h1>attnstruct course books</h1>\n<p>Two books are built from the same executed notebooks:</p>\n"
        f"<ul>\n{items}\n</ul>\n</body>\n</html>\n"
    )


# The citation page.


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
        "paper": code_block(_bibtex("inproceedings", key, paper), "bibtex"),
        "software": code_block(_bibtex("software", "attnstruct", software), "bibtex"),
        "source": f"*These entries are built from {source}.*",
    }


def profile_of(name: str, params: dict, root: Path | None, build_dir: Path) -> tuple[str, list[str]]:
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
