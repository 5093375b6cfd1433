"""Handouts for a lecture, generated from a build (``make handouts``): slides, a one-page cheat sheet and a quiz.

``python -m attnstruct.teaching.handouts --build-dir build/quick [--out build/quick/handouts]`` reads the executed
notebooks, figures and datasets that ``make reproduce`` wrote (never runs a notebook) and writes two folders::

    students/            the folder a lecturer shares
      slides.html        the equation slides (the bilinear form, the two scores, the gradient sum; MathML, typeset
                         by the browser), then one slide per notebook: a message title computed from its dataset, the
                         key figure, the numbers it shows and their source (arrow keys, Page Up/Down, Home/End, a
                         click to move)
      cheat-sheet.html   one A4 page: the definitions, what the paper claims and what this build finds
      quiz.html          about eight questions for students (no answers)
      figures/*.png      the figures the slides and the cheat sheet show
      slides.pdf, cheat-sheet.pdf   printed by the system Chromium through Playwright, when both are there
    instructor/          kept by the lecturer
      slides.html        the same deck with the speaker notes (reveal.js's convention: ``<aside class="notes">`` in
                         each slide; the S key shows them under the slide)
      quiz-answers.html  the quiz with its answer key
      figures/*.png

Every signed number on a figure slide is the statistic its figure draws (:class:`handout_contents.Slide`'s
``values``); a verdict is the word the notebook stored.

The pages load nothing from the web (no script, style sheet or font from elsewhere; checked before anything is
moved into place). The content (:mod:`attnstruct.teaching.handout_contents`) is computed from the build's datasets
by the package's functions; its verdicts are the ones the notebooks stored. The handouts are written in a
temporary folder and moved into place only when complete.
"""

from __future__ import annotations

import argparse
import html
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

from . import handout_contents as contents
from . import quiz
from .handout_contents import HandoutError

PAPER = (
    "Saponati, Sager, Vilimelis Aceituno, Stadelmann &amp; Grewe, <i>The underlying structures of self-attention: "
    "symmetry, directionality, and emergent dynamics in Transformer training</i>, ICML 2025 (arXiv:2502.10927)"
)
CHEAT_FIGURE = "03_encoders_vs_decoders"
CHEAT_SCALES = (1.0, 0.95, 0.9, 0.85, 0.8, 0.75)  # print scales tried until the cheat sheet fits one page
PAGE = re.compile(rb"/Type\s*/Page(?![a-zA-Z])")
SUPERSCRIPT = re.compile(r"\^(\([^()]*\)|[A-Za-z0-9]+)")
SUBSCRIPT = re.compile(r"((?<![\w<])[A-Za-zβτΣ]|‖)_(\([^()]*\)|[A-Za-z0-9]+)")

BASE_CSS = """
* { box-sizing: border-box; }
body { margin: 0; font-family: "DejaVu Sans", "Liberation Sans", Arial, Helvetica, sans-serif; color: #1d1d2b; }
h1, h2, h3 { color: #1f2a6b; }
.source, .meta { color: #555; }
code { font-family: "DejaVu Sans Mono", "Liberation Mono", monospace; }
"""
SLIDES_CSS = """
@page { size: A4 landscape; margin: 0; }
.slide { display: flex; flex-direction: column; min-height: 100vh; padding: 4vh 5vw 3vh; }
.slide h2 { font-size: 2.6vh; margin: 0 0 2vh; line-height: 1.3; }
.slide figure { flex: 1; margin: 0; display: flex; align-items: center; justify-content: center; min-height: 0; }
.slide img { max-width: 100%; max-height: 62vh; object-fit: contain; }
.number { font-size: 2.3vh; margin: 1.5vh 0 0.5vh; }
.source, .counter { font-size: 1.6vh; margin: 0.3vh 0; }
.counter { text-align: right; color: #888; }
.missing { font-size: 2.4vh; padding: 3vh; border: 2px dashed #b55; color: #822; }
.title-slide { justify-content: center; }
.title-slide h1 { font-size: 4.5vh; margin-bottom: 3vh; }
.title-slide p { font-size: 2.2vh; }
.equations { flex: 1; display: flex; flex-direction: column; justify-content: center; font-size: 4vh; }
.equations math { margin: 1.5vh 0; }
.explain { font-size: 2.4vh; }
aside.notes { display: none; font-size: 2vh; border-top: 2px solid #c8cbe0; margin-top: 1vh; padding-top: 1vh; }
body.notes-shown aside.notes { display: block; }
body.deck .slide { display: none; }
body.deck .slide.active { display: flex; }
@media print {
  body.deck .slide { display: flex; }
  .slide { height: 209mm; min-height: 0; overflow: hidden; padding: 10mm 14mm 6mm; break-after: page; }
  .slide:last-of-type { break-after: auto; }
  .slide h2 { font-size: 17pt; margin-bottom: 5mm; }
  .slide img { max-height: 125mm; }
  .number { font-size: 14pt; margin-top: 4mm; }
  .source, .counter { font-size: 10pt; }
  .missing { font-size: 16pt; }
  .title-slide h1 { font-size: 28pt; }
  .title-slide p { font-size: 14pt; }
  .equations { font-size: 20pt; }
  .explain { font-size: 13pt; }
  aside.notes, body.notes-shown aside.notes { display: none; }
}
"""
SLIDES_JS = """
(function () {
  var slides = Array.prototype.slice.call(document.querySelectorAll('.slide'));
  if (!slides.length) return;
  document.body.classList.add('deck');
  var at = 0;
  function show(n) {
    at = Math.max(0, Math.min(slides.length - 1, n));
    slides.forEach(function (s, k) { s.classList.toggle('active', k === at); });
    try { history.replaceState(null, '', '#' + (at + 1)); } catch (e) { /* a file URL may refuse it */ }
  }
  var next = ['ArrowRight', 'ArrowDown', 'PageDown', ' '], back = ['ArrowLeft', 'ArrowUp', 'PageUp'];
  document.addEventListener('keydown', function (e) {
    if (next.indexOf(e.key) >= 0) { show(at + 1); e.preventDefault(); }
    else if (back.indexOf(e.key) >= 0) { show(at - 1); e.preventDefault(); }
    else if (e.key === 'Home') show(0);
    else if (e.key === 'End') show(slides.length - 1);
    else if (e.key === 's' || e.key === 'S') document.body.classList.toggle('notes-shown');
  });
  document.addEventListener('click', function (e) {
    if (!e.target.closest('a')) show(at + (e.clientX > window.innerWidth / 3 ? 1 : -1));
  });
  var start = parseInt(location.hash.slice(1), 10);
  show(isNaN(start) ? 0 : start - 1);
})();
"""
SHEET_CSS = """
@page { size: A4; margin: 8mm 9mm; }
body { font-size: 9pt; line-height: 1.3; max-width: 192mm; margin: 0 auto; }
h1 { font-size: 12.5pt; margin: 0 0 1mm; }
h2 { font-size: 9.6pt; margin: 2.2mm 0 0.8mm; border-bottom: 1px solid #c8cbe0; }
p, ul { margin: 0.6mm 0; } ul { padding-left: 4mm; } li { margin: 0.3mm 0; }
.cols { display: grid; grid-template-columns: 1fr 1fr; gap: 5mm; }
.formula { margin: 0.8mm 0 0.8mm 3mm; font-family: "DejaVu Serif", "Liberation Serif", serif; font-size: 8.8pt; }
table { border-collapse: collapse; width: 100%; } td, th { border-top: 1px solid #dde; padding: 0.5mm 1mm;
  vertical-align: top; text-align: left; } th { font-size: 7.8pt; color: #444; }
.holds { color: #176b2c; font-weight: bold; } .not { color: #9a1c1c; font-weight: bold; }
img { width: 100%; max-height: 40mm; object-fit: contain; margin-top: 2mm; }
.meta { font-size: 7.4pt; }
"""
QUIZ_CSS = """
@page { size: A4; margin: 15mm; }
body { max-width: 180mm; margin: 0 auto; padding: 8mm; font-size: 11pt; line-height: 1.4; }
.question { margin-bottom: 5mm; break-inside: avoid; }
.topic { font-size: 8.5pt; text-transform: uppercase; color: #777; letter-spacing: 0.05em; }
ol.options { list-style: lower-alpha; }
.answer { margin-top: 2mm; padding: 2mm 3mm; background: #eef5ee; border-left: 3px solid #2d7a3d; }
.space { height: 18mm; border-bottom: 1px dotted #bbb; }
"""


def _math(text: str) -> str:
    """Escaped text with the handouts' plain notation typeset: ``W_qk^h`` as W<sub>qk</sub><sup>h</sup>,
    ``ℝ^(d×d_h)`` with the parenthesised group raised (the parentheses dropped)."""
    text = SUPERSCRIPT.sub(lambda m: f"<sup>{m.group(1).removeprefix('(').removesuffix(')')}</sup>", text)
    for _ in range(2):  # twice: a subscript inside a parenthesised group, Σ_(j ∈ D_i)
        text = SUBSCRIPT.sub(lambda m: f"{m.group(1)}<sub>{m.group(2).removeprefix('(').removesuffix(')')}</sub>", text)
    return text


def _page(title: str, css: str, body: str, script: str = "") -> str:
    """A complete HTML page with inline style and script only."""
    js = f"<script>{script}</script>\n" if script else ""
    return (
        f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>{html.escape(title)}</title>\n'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">\n<style>{BASE_CSS}{css}</style>\n'
        f"</head>\n<body>\n{body}\n{js}</body>\n</html>\n"
    )


def provenance(build: contents.Build) -> str:
    """``build quick: 8 of 8 notebooks executed, code e75b8b5``: what these handouts were computed from."""
    ran = sum(build.ran.values())
    commit = next(
        (str(ds.attrs.get("git_commit", "")) for nb in build.ran if (ds := build.notebook_dataset(nb)) is not None), ""
    )
    code = f", code {html.escape(commit[:12])}" if commit else ""
    return f"build <code>{html.escape(build.root.name)}</code>: {ran} of {len(build.ran)} notebooks executed{code}"


def _notes(notes: contents.Notes) -> str:
    """Speaker notes as reveal.js marks them: ``<aside class="notes">``, each question with its answer."""
    e = html.escape
    items = "".join(f"<li><b>{_math(e(q))}</b> {_math(e(a))}</li>" for q, a in notes)
    return f'<aside class="notes"><p>Students ask:</p><ul>{items}</ul></aside>'


def render_slides(deck: list[contents.Slide | contents.Equation], build: contents.Build, notes: bool = False) -> str:
    """The deck: a title slide, then one ``<section class="slide">`` per :class:`Equation` or :class:`Slide` (its
    figure from ``figures/``, relative); with ``notes`` each slide carries its speaker notes (the S key shows
    them)."""
    n = len(deck) + 1
    e = html.escape
    keys = "Arrow keys or Page Up/Down move; Home and End jump" + ("; S shows the speaker notes." if notes else ".")
    parts = [
        '<section class="slide title-slide" id="slide-1"><h1>Symmetry and directionality of self-attention</h1>'
        f"<p>{PAPER}</p><p>Figures and numbers of {provenance(build)}.</p>"
        f'<p class="meta">{keys}</p>'
        + (_notes(contents.TITLE_NOTES) if notes else "")
        + f'<p class="counter">1 / {n}</p></section>'
    ]
    for k, slide in enumerate(deck, start=2):
        if isinstance(slide, contents.Equation):
            body = f'<div class="equations">{slide.math}</div><p class="explain">{_math(e(slide.text))}</p>'
        elif slide.missing:
            body = f'<p class="missing">{e(slide.missing)}</p>'
        else:
            number = f'<p class="number"><b>{_math(e(slide.number))}</b></p>' if slide.number else ""
            body = (
                f'<figure><img src="figures/{e(slide.image.name)}" alt="{e(slide.title)}"></figure>'
                f'{number}<p class="source">Source: {e(slide.source)}; figure <code>figures/{e(slide.image.name)}'
                "</code></p>"
            )
        speaker = _notes(slide.notes) if notes else ""
        parts.append(
            f'<section class="slide" id="slide-{k}"><h2>{_math(e(slide.title))}</h2>{body}{speaker}'
            f'<p class="counter">{k} / {n}</p></section>'
        )
    return _page("Slides: symmetry and directionality of self-attention", SLIDES_CSS, "\n".join(parts), SLIDES_JS)


def _verdict(text: str) -> str:
    """A finding's line with its verdict word set in colour."""
    text = html.escape(text)
    for word, css in (("does not hold", "not"), ("holds", "holds")):
        if text.endswith(word):
            return text[: -len(word)] + f'<span class="{css}">{word}</span>'
    return text


DEFINITIONS = """
<h2>Definitions (paper §2; <code>attnstruct.scores</code>)</h2>
<p>Head h: Q = X W_q^h, K = X W_k^h (tokens as rows, W ∈ ℝ^(d×d_h)); logits a_ij = x_iᵀ W_qk^h x_j with</p>
<p class="formula">W_qk^h = W_q^h (W_k^h)ᵀ &nbsp;(d × d), &nbsp; layer: M = Σ_h W_qk^h
&nbsp;(nn.Linear: M = W_qᵀ W_k)</p>
<p><b>Symmetry</b>, with M_s = (M + Mᵀ)/2, M_n = (M − Mᵀ)/2:</p>
<p class="formula">s(M) = (‖M_s‖_F² − ‖M_n‖_F²) / ‖M‖_F² = tr(M M) / tr(Mᵀ M) &nbsp;∈ [−1, 1]</p>
<p>+1 symmetric, −1 skew-symmetric, ≈ 0 i.i.d. Gaussian; the authors' code stores (1 + s)/2.</p>
<p><b>Directionality</b>: row norms r_i = ‖M[i,:]‖, column norms c_j = ‖M[:,j]‖, thresholds
τ = mean + 2·std (unbiased), excesses R = Σ_i max(r_i − τ_r, 0), C likewise:</p>
<p class="formula">dir(M) = (R − C) / (R + C) &nbsp;∈ [−1, 1], &nbsp;0 when R = C = 0</p>
<p>Negative: a few columns (keys) with outlying norms, column dominance; any symmetric M scores 0.
The authors' code stores −dir.</p>
<h2>Invariances</h2>
<ul><li>Both scores: unchanged by M → cM (c ≠ 0) and by a permutation P M Pᵀ.</li>
<li>Symmetry: unchanged by Mᵀ and by any rotation Q M Qᵀ (tr(MM), ‖M‖_F are basis-free).</li>
<li>Directionality: flips sign under Mᵀ; changes under a rotation (norms depend on the basis).</li></ul>
<h2>The gradient as a sum of outer products (§3)</h2>
<p class="formula">∂L/∂W_qk = Σ_i Σ_(j ∈ D_i) β_ij x_i x_jᵀ</p>
<p>Bidirectional (D_i = all j): each pair enters in both orders, so the update is symmetric as far as β_ij ≈ β_ji
(self-pairs x_i x_iᵀ always are). Causal (j ≤ i): early positions are keys for many queries, favouring column
dominance.</p>
"""


def render_cheat_sheet(build: contents.Build, figure: bool) -> str:
    """One A4 page: :data:`DEFINITIONS` beside the paper's claims (:func:`contents.paper_claims`) and the main
    figure (when the build has it), then this build's findings (:func:`contents.findings`) across the page."""
    e = html.escape
    claims = "".join(
        f"<tr><td>{_math(e(c))}</td><td>{_math(e(w))}</td><td>{_math(e(v))}</td></tr>"
        for c, w, v in contents.paper_claims()
    )
    found = "".join(
        f"<tr><td>{e(what)}</td><td>{_math(e(claim))}</td><td>{_verdict(result)}</td></tr>"
        for what, claim, result in contents.findings(build)
    )
    image = (
        f'<img src="figures/{CHEAT_FIGURE}.png" alt="Encoder and decoder stacks: median scores against size">'
        f'<p class="meta">figures/{CHEAT_FIGURE}.png (notebook 03): this build\'s stacks (large markers) beside '
        "the authors' reported models (dots).</p>"
        if figure
        else f'<p class="meta">figures/{CHEAT_FIGURE}.png is not in this build: '
        f"{e(contents.run_hint('03_pretrained_models'))}.</p>"
    )
    body = (
        "<h1>Self-attention's W<sub>qk</sub>: symmetry and directionality, a cheat sheet</h1>"
        f'<p class="meta">{PAPER}. Numbers: {provenance(build)}; the paper\'s from '
        "<code>src/attnstruct/reference/</code> (the authors' result files; docs/paper-notes.md).</p>"
        f'<div class="cols"><div>{_math(DEFINITIONS)}</div><div>'
        "<h2>What the paper claims</h2><table><tr><th>claim</th><th>where</th><th>authors' values</th></tr>"
        f"{claims}</table>{image}</div></div>"
        "<h2>What this reproduction finds</h2><table><tr><th>experiment</th><th>headline claim</th><th>estimate "
        f"(95% CI, n): the notebook's verdict</th></tr>{found}</table>"
        '<p class="meta">Verdicts: <i>holds</i>, <i>does not hold</i> or <i>cannot tell at this scale</i>, as '
        "each notebook decided them (<code>attnstruct.stats.decide</code>) and stored them in its dataset; "
        "estimates are differences of scores (of losses in 06).</p>"
    )
    return _page("Cheat sheet: symmetry and directionality of self-attention", SHEET_CSS, body)


def render_quiz(questions: list[quiz.Question], answers: bool) -> str:
    """The quiz: every question, its options; with ``answers`` the key (and the data's source) under each."""
    e = html.escape
    items = []
    for q in questions:
        options = "".join(f"<li>{_math(e(o))}</li>" for o in q.options)
        block = f'<ol class="options">{options}</ol>' if q.options else ""
        if answers:
            source = f'<br><span class="source">Source: {e(q.source)}</span>' if q.source else ""
            block += f'<div class="answer"><b>Answer.</b> {_math(e(q.answer))}{source}</div>'
        elif not q.options:
            block += '<div class="space"></div>'
        items.append(
            f'<li class="question"><div class="topic">{e(q.topic)}</div><p>{_math(e(q.prompt))}</p>{block}</li>'
        )
    kind = "answer key (for the instructor)" if answers else "questions"
    body = (
        f"<h1>Quiz: symmetry and directionality of self-attention</h1>"
        f'<p class="meta">{len(questions)} {kind}. Data questions refer to the executed notebooks of this '
        f"course's build.</p><ol>{''.join(items)}</ol>"
    )
    return _page(f"Quiz: {kind}", QUIZ_CSS, body)


def pdf_pages(path: Path) -> int:
    """The number of pages of a PDF: ``pypdf`` when installed, else its ``/Type /Page`` objects counted."""
    try:
        import pypdf
    except ImportError:
        return len(PAGE.findall(Path(path).read_bytes()))
    return len(pypdf.PdfReader(str(path)).pages)


def chromium() -> str | None:
    """The system Chromium (``$ATTNSTRUCT_CHROMIUM``, ``chromium`` or ``chromium-browser`` on PATH), or None."""
    for name in (os.environ.get("ATTNSTRUCT_CHROMIUM"), "chromium", "chromium-browser"):
        if name and (path := shutil.which(name)):
            return path
    return None


def print_pdfs(folder: Path) -> str | None:
    """``slides.pdf`` and ``cheat-sheet.pdf`` of ``folder``'s pages, printed offline by Chromium (Playwright's
    ``page.pdf``); the cheat sheet at the largest of :data:`CHEAT_SCALES` that fits one page. Returns why the PDFs
    were skipped (no Chromium or no Playwright), else None."""
    executable = chromium()
    if executable is None:
        return "no chromium on PATH (apt-get install chromium, or set ATTNSTRUCT_CHROMIUM)"
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return "playwright is not installed (pip install playwright)"
    with sync_playwright() as p:
        try:
            browser = p.chromium.launch(executable_path=executable, headless=True)
        except Exception as err:  # noqa: BLE001 - a Chromium that does not start: the HTML is still complete
            first = (str(err).strip().splitlines() or [""])[0][:160]
            return f"{executable} did not start ({type(err).__name__}: {first})"
        try:
            page = browser.new_page()
            page.route("**/*", lambda r: r.continue_() if r.request.url.startswith("file:") else r.abort())
            page.goto((folder / "slides.html").as_uri(), wait_until="load")
            page.pdf(path=str(folder / "slides.pdf"), prefer_css_page_size=True, print_background=True)
            page.goto((folder / "cheat-sheet.html").as_uri(), wait_until="load")
            for scale in CHEAT_SCALES:
                page.pdf(path=str(folder / "cheat-sheet.pdf"), prefer_css_page_size=True, scale=scale)
                if pdf_pages(folder / "cheat-sheet.pdf") == 1:
                    break
            else:
                raise HandoutError(f"the cheat sheet does not fit one A4 page even at scale {CHEAT_SCALES[-1]}")
        finally:
            browser.close()
    return None


STUDENTS, INSTRUCTOR = contents.STUDENTS, contents.INSTRUCTOR


def _write(stage: Path, build: contents.Build) -> list[contents.Slide]:
    """Every page and figure of the handouts into ``stage`` (:data:`STUDENTS` and :data:`INSTRUCTOR`); the figure
    slides."""
    slides = contents.slides(build)
    deck = [*contents.EQUATIONS, *slides]
    cheat = build.figure(CHEAT_FIGURE)
    images = [s.image for s in slides if s.image is not None]
    for folder, shown in ((STUDENTS, [*images, *([cheat] if cheat else [])]), (INSTRUCTOR, images)):
        (stage / folder / "figures").mkdir(parents=True)
        for image in shown:
            shutil.copy2(image, stage / folder / "figures" / image.name)
    questions = quiz.quiz(build)
    pages = {
        f"{STUDENTS}/slides.html": render_slides(deck, build),
        f"{STUDENTS}/cheat-sheet.html": render_cheat_sheet(build, cheat is not None),
        f"{STUDENTS}/quiz.html": render_quiz(questions, answers=False),
        f"{INSTRUCTOR}/slides.html": render_slides(deck, build, notes=True),
        f"{INSTRUCTOR}/quiz-answers.html": render_quiz(questions, answers=True),
    }
    for name, text in pages.items():
        (stage / name).write_text(text, encoding="utf-8")
    return slides


def build_handouts(build_dir: Path, out: Path | None = None, *, pdf: bool = True, log=None) -> Path:
    """Write the handouts of ``build_dir`` into ``out`` (default ``build_dir/handouts``); its path.

    Raises :class:`HandoutError` (one line) on bad input, leaving any older handouts untouched.
    """
    from .book import external_urls

    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    build_dir = Path(build_dir).resolve()
    out = Path(out).resolve() if out is not None else build_dir / "handouts"
    build = contents.read_build(build_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        stage = staging / "site"
        slides = _write(stage, build)
        bad = external_urls(stage)
        if bad:
            raise HandoutError(f"the handouts would load {len(bad)} files from the web, first {bad[0]}")
        skipped = print_pdfs(stage / STUDENTS) if pdf else "not asked for"
        if out.exists():
            os.replace(out, staging / "old")
        os.replace(stage, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    missing = sum(bool(s.missing) for s in slides)
    n = len(slides) + len(contents.EQUATIONS) + 1
    log(f"handouts: {n} slides ({missing} without their figure), a cheat sheet and a quiz -> {out}")
    if skipped:
        log(f"handouts: PDFs skipped: {skipped}")
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m attnstruct.teaching.handouts``: exit 0 with the handouts written, 2 with one line on stderr for
    bad input."""
    parser = argparse.ArgumentParser(prog="python -m attnstruct.teaching.handouts", description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", type=Path, default=Path("build/quick"), help="folder of a make reproduce")
    parser.add_argument("--out", type=Path, default=None, help="handouts folder (default: BUILD_DIR/handouts)")
    parser.add_argument("--no-pdf", action="store_true", help="write the HTML pages only")
    args = parser.parse_args(argv)
    try:
        build_handouts(args.build_dir, args.out, pdf=not args.no_pdf)
    except HandoutError as err:
        print(f"attnstruct handouts: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
