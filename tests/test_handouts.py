"""The lecture handouts (``attnstruct.teaching.handouts``): slides, cheat sheet and quiz from a build.

Unit tests build them from a tiny fake build (one executed-notebook stub, one figure, one dataset) or test the pure
functions. The tests marked ``browser`` build them from the session's executed build and load them in the system
Chromium, offline: the slides open without a console error and every image loads, the cheat sheet prints on one
page and the slides one page per slide, and the student quiz holds no answer.
"""

from __future__ import annotations

import html
import math
import re
from pathlib import Path

import nbformat
import pandas as pd
import pytest
import xarray as xr

from attnstruct import notebooks, stats
from attnstruct.analyses import pretrained_scores
from attnstruct.report import prose
from attnstruct.results import ENGINE
from attnstruct.teaching import handout_contents as contents
from attnstruct.teaching import handouts, quiz
from attnstruct.teaching.book import external_urls

from conftest import ROOT

PNG = bytes.fromhex(  # a 1 x 1 PNG
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d49444154789c6360f8cf"
    "c0f01f0005000201e2e0b1c30000000049454e44ae426082"
)
TAG = re.compile(r"<[^>]+>")


def visible_text(page: str) -> str:
    """A page's text without tags, scripts or styles, entities decoded, white space collapsed."""
    page = re.sub(r"<(script|style)\b.*?</\1>", " ", page, flags=re.S)
    return " ".join(html.unescape(TAG.sub("", page)).split())


def executed_stub(path: Path, duration: float | None = 1.0, exception: bool = False) -> None:
    """An executed notebook as papermill leaves it: one cell and ``metadata.papermill``."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# 01 · stub")])
    nb.metadata["papermill"] = {"duration": duration, "exception": exception, "parameters": {}}
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)


@pytest.fixture
def fake_build(tmp_path) -> Path:
    """A build with notebook 01 only: its executed stub, its figure and its dataset (two layers' scores)."""
    build = tmp_path / "build"
    executed_stub(build / "notebooks" / "01_bilinear_form.ipynb")
    (build / "figures").mkdir(parents=True)
    (build / "figures" / "01_decomposition.png").write_bytes(PNG)
    (build / "results").mkdir()
    ds = xr.Dataset({"symmetry": ("layer", [0.2, -0.1])}, coords={"layer": [0, 1]}, attrs={"git_commit": "abc1234"})
    ds.to_netcdf(build / "results" / "01_bilinear_form.nc", engine=ENGINE)
    return build


def test_handouts_of_a_partial_build(fake_build, tmp_path):
    out = handouts.build_handouts(fake_build, tmp_path / "out", pdf=False, log=lambda message: None)
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*.html")) == [
        "instructor/quiz-answers.html",
        "instructor/slides.html",
        "students/cheat-sheet.html",
        "students/quiz.html",
        "students/slides.html",
    ]
    assert [p.name for p in (out / "students" / "figures").iterdir()] == ["01_decomposition.png"]
    assert external_urls(out) == []
    slides = (out / "students" / "slides.html").read_text(encoding="utf-8")
    assert slides.count('<section class="slide') == 1 + 3 + 8  # title, 3 equations, 01..07 and 09; 08 not run
    assert 'src="figures/01_decomposition.png"' in slides
    text = visible_text(slides)
    assert "the symmetric part carries 60% of its energy, the skew part 40%" in text
    assert "Source: notebook 01_bilinear_form, dataset results/01_bilinear_form.nc" in text
    for name in ("02_scores", "05_training_dynamics", "07_vision", "09_dynamics_at_scale"):
        assert f"make notebook NB={name}" in text
    sheet = visible_text((out / "students" / "cheat-sheet.html").read_text(encoding="utf-8"))
    assert "not in this build: run notebook 05" in sheet and "abc1234" in sheet
    assert "+0.46 (38 encoder rows)" in sheet  # the authors' values, from the package's reference CSV


def test_equation_slides_are_typeset_offline_as_mathml(fake_build, tmp_path):
    out = handouts.build_handouts(fake_build, tmp_path / "out", pdf=False, log=lambda message: None)
    slides = (out / "students" / "slides.html").read_text(encoding="utf-8")
    equations = re.findall(r'<section class="slide" id="slide-[234]">(.*?)</section>', slides, flags=re.S)
    assert len(equations) == 3 and all('<math display="block">' in s for s in equations)
    assert [e.key for e in contents.EQUATIONS] == ["bilinear", "scores", "gradient"]  # in this order, after the title
    assert "<script src" not in slides and "mathjax" not in slides.lower()


def test_every_slide_has_speaker_notes_in_the_instructor_deck_only(fake_build, tmp_path):
    out = handouts.build_handouts(fake_build, tmp_path / "out", pdf=False, log=lambda message: None)
    deck = (out / "instructor" / "slides.html").read_text(encoding="utf-8")
    sections = re.findall(r'<section class="slide.*?</section>', deck, flags=re.S)
    assert len(sections) == 12
    for section in sections:
        notes = re.search(r'<aside class="notes">(.*?)</aside>', section, flags=re.S)
        assert notes and re.search(r"<b>[^<]*\?", notes.group(1)), section[:80]
    assert '<aside class="notes">' not in (out / "students" / "slides.html").read_text(encoding="utf-8")


def test_quiz_answer_key_only_in_the_instructor_folder(fake_build, tmp_path):
    out = handouts.build_handouts(fake_build, tmp_path / "out", pdf=False, log=lambda message: None)
    shared = [p.name for p in (out / "students").rglob("*")]
    assert "quiz.html" in shared and not [n for n in shared if "answer" in n]
    assert (out / "instructor" / "quiz-answers.html").is_file()


def test_a_notebook_10_gets_a_slide_with_its_figure(fake_build):
    assert not [s for s in contents.slides(contents.read_build(fake_build)) if s.notebook.startswith("10")]
    executed_stub(fake_build / "notebooks" / "10_next_topic.ipynb")
    (fake_build / "figures" / "10_first.png").write_bytes(PNG)
    later = [s for s in contents.slides(contents.read_build(fake_build)) if s.notebook.startswith("10")]
    assert [(s.figure, s.missing) for s in later] == [("10_first", "")] and later[0].notes


def test_lecture_block_links_the_built_handouts(fake_build):
    assert "run `make handouts`" in contents.lecture_block(fake_build)
    handouts.build_handouts(fake_build, pdf=False, log=lambda message: None)
    block = contents.lecture_block(fake_build)
    page_dir = fake_build / "book" / "instructor"
    hrefs = re.findall(r'href="([^"]+)"', block)
    assert len(hrefs) == len(contents.HANDOUT_FILES)
    assert all((page_dir / href).resolve().is_file() for href in hrefs), hrefs


def test_without_chromium_the_pdfs_are_skipped_in_one_line(fake_build, tmp_path, monkeypatch):
    monkeypatch.setattr(handouts, "chromium", lambda: None)
    lines = []
    out = handouts.build_handouts(fake_build, tmp_path / "out", log=lines.append)
    assert not list(out.rglob("*.pdf")) and (out / "students" / "slides.html").is_file()
    assert [line for line in lines if "PDF" in line] == [
        "handouts: PDFs skipped: no chromium on PATH (apt-get install chromium, or set ATTNSTRUCT_CHROMIUM)"
    ]


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "old.txt").write_text("kept")
    assert handouts.main(["--build-dir", str(tmp_path / "nothing"), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("attnstruct handouts: error: no executed notebooks")
    bad = tmp_path / "bad"
    (bad / "notebooks").mkdir(parents=True)
    (bad / "notebooks" / "01_bilinear_form.ipynb").write_text("{not json")
    assert handouts.main(["--build-dir", str(bad), "--out", str(out)]) == 2
    assert "cannot be read" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == ["old.txt"]  # no partial output, the old one untouched
    assert not list(tmp_path.glob(".out.*"))  # no staging folder left behind


def test_unreadable_dataset_is_bad_input(fake_build, tmp_path):
    (fake_build / "results" / "01_bilinear_form.nc").write_bytes(b"not netCDF")
    with pytest.raises(contents.HandoutError, match="dataset .*01_bilinear_form.nc cannot be read"):
        handouts.build_handouts(fake_build, tmp_path / "out", pdf=False, log=lambda message: None)
    assert not (tmp_path / "out").exists()


def test_a_failed_notebook_gets_a_slide_saying_what_to_run(fake_build):
    executed_stub(fake_build / "notebooks" / "01_bilinear_form.ipynb", exception=True)
    first = contents.slides(contents.read_build(fake_build))[0]
    assert first.missing and "make notebook NB=01_bilinear_form" in first.missing and first.image is None


def test_stored_effects_read_back_the_notebooks_verdicts():
    null = stats.NullComparison(0.3, 99.0, 2.5, -0.1, 0.1, 0.0, 400)
    effect = stats.Effect(
        "a minus b", "seed", 0.3, 0.1, 0.5, 0.95, 5, 0.03125, "greater", null, stats.HOLDS, "because", smallest=1 / 32
    )
    plain = stats.Effect("c minus d", "stack", 0.2, 0.1, 0.3, 0.95, 2, 1 / 6, "greater", None, stats.CANNOT_TELL, "n")
    ds = xr.Dataset(attrs={"verdicts": stats.verdict_table([effect, plain]).to_json(orient="index")})
    back = contents.stored_effects(ds)
    assert back["a minus b"].verdict == stats.HOLDS and back["a minus b"].null == null
    assert back["c minus d"].null is None and back["c minus d"].n == 2 and math.isnan(back["c minus d"].p_opposite)
    assert prose.effect_line(back["a minus b"]) == prose.effect_line(effect)
    assert contents.short(back["a minus b"]) == "+0.30 (95% CI [+0.10, +0.50], n = 5 seeds): holds"
    assert contents.stored_effects(xr.Dataset()) == {}


def test_notation_and_page_count():
    assert handouts._math("W_qk^h = W_q^h (W_k^h)ᵀ") == (
        "W<sub>qk</sub><sup>h</sup> = W<sub>q</sub><sup>h</sup> (W<sub>k</sub><sup>h</sup>)ᵀ"
    )
    assert handouts._math("Σ_(j ∈ D_i)") == "Σ<sub>j ∈ D<sub>i</sub></sub>"
    assert handouts._math("accumulated_symmetry, ℝ^(d×d_h)") == "accumulated_symmetry, ℝ<sup>d×d<sub>h</sub></sup>"
    fake = b"%PDF-1.4 1 0 obj <</Type /Pages /Count 2>> 2 0 obj <</Type /Page>> 3 0 obj <</Type/Page /Parent 1>>"
    assert len(handouts.PAGE.findall(fake)) == 2


def test_student_quiz_has_no_answer(fake_build):
    build = contents.read_build(fake_build)
    questions = quiz.quiz(build)
    assert len(questions) >= 5  # the data questions of notebooks that did not run are left out
    student = visible_text(handouts.render_quiz(questions, answers=False))
    key = visible_text(handouts.render_quiz(questions, answers=True))
    assert "Answer" not in student and 'class="answer"' not in handouts.render_quiz(questions, answers=False)
    for q in questions:
        answer = visible_text(handouts._math(html.escape(q.answer)))
        assert answer in key and answer not in student


# Browser tests: the handouts of the session's executed build.


@pytest.fixture(scope="module")
def built(executed_build, tmp_path_factory):
    """The handouts of every notebook of the shared build (PDFs printed by the system Chromium)."""
    from browser import chromium_executable

    chromium_executable()  # fails the test, naming the fix, when there is none
    for source in notebooks.list_notebooks(ROOT):
        executed_build(source.stem)
    out = tmp_path_factory.mktemp("handouts") / "handouts"
    return handouts.build_handouts(executed_build.build_dir, out, log=lambda message: None) / "students"


BROWSER = (pytest.mark.browser, pytest.mark.notebook, pytest.mark.timeout(1800))  # the first builds every notebook


@BROWSER[0]
@BROWSER[1]
@BROWSER[2]
def test_slides_load_offline_with_every_image(built):
    playwright_sync = pytest.importorskip("playwright.sync_api")
    from browser import ConsoleErrors, OfflineGuard, chromium_executable, static_site

    n = (built / "slides.html").read_text(encoding="utf-8").count('<section class="slide')
    assert (built / "slides.html").read_text(encoding="utf-8").count("<math") >= 3
    with playwright_sync.sync_playwright() as p, static_site(built) as url:
        browser = p.chromium.launch(executable_path=chromium_executable(), headless=True)
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        guard = OfflineGuard(context)
        page = context.new_page()
        errors = ConsoleErrors(page)
        page.goto(url + "slides.html", wait_until="load")
        broken = page.evaluate(
            "() => Array.from(document.images).filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src)"
        )
        images = page.evaluate("() => document.images.length")
        shown = page.evaluate("() => document.querySelectorAll('.slide.active').length")
        page.keyboard.press("ArrowRight")
        second = page.evaluate("() => document.querySelector('.slide.active').id")
        page.keyboard.press("End")
        last = page.evaluate("() => document.querySelector('.slide.active').id")
        messages = errors.take()
        browser.close()
    assert not messages, messages
    assert not guard.blocked, guard.blocked
    assert images >= 7 and not broken, broken
    assert (shown, second, last) == (1, "slide-2", f"slide-{n}")


@BROWSER[0]
@BROWSER[1]
@BROWSER[2]
def test_pdfs_one_page_per_slide_and_a_one_page_cheat_sheet(built):
    n = (built / "slides.html").read_text(encoding="utf-8").count('<section class="slide')
    assert n >= 8
    assert handouts.pdf_pages(built / "slides.pdf") == n
    assert handouts.pdf_pages(built / "cheat-sheet.pdf") == 1


@BROWSER[0]
@BROWSER[1]
@BROWSER[2]
def test_student_quiz_of_the_build_has_no_answer(built):
    raw = (built / "quiz.html").read_text(encoding="utf-8")
    keyed = (built.parent / "instructor" / "quiz-answers.html").read_text(encoding="utf-8")
    student, key = visible_text(raw), visible_text(keyed)
    answers = re.findall(r'<div class="answer"><b>Answer\.</b> (.*?)(?:<br>|</div>)', keyed, flags=re.S)
    assert len(answers) >= 8 and "Answer" in key
    assert "Answer" not in student and 'class="answer"' not in raw
    for answer in answers:
        assert visible_text(answer) not in student
    prompts = re.findall(r'<li class="question">.*?<p>(.*?)</p>', raw, flags=re.S)
    assert len(prompts) == len(answers) and all(visible_text(q) in key for q in prompts)


def figure_statistics(build_dir: Path) -> dict[str, list[float]]:
    """Per notebook, the statistics its key figure draws, computed here from its dataset the way the figure's cell
    computes them (not through the handouts' code): what every signed number on its slide must be."""
    import numpy as np

    from attnstruct.results import load_dataset

    def ds(name):
        return load_dataset(build_dir / "results" / f"{name}.nc")

    out = {}
    s = float(ds("01_bilinear_form").symmetry.sel(layer=0))
    out["01_bilinear_form"] = [s]
    null = ds("02_scores")
    gauss = null.sel(ensemble="gaussian", d_model=int(null.d_model.max()))
    out["02_scores"] = [
        float(np.quantile(gauss[v].values, q)) for v in ("symmetry", "directionality") for q in (0.25, 0.75)
    ]
    last = ds("04_gradient_structure").isel(n_sequences=-1).sel(task="copy").accumulated_symmetry
    out["04_gradient_structure"] = [float(last.sel(objective=o)) for o in ("bidirectional", "causal")]
    runs = ds("05_training_dynamics")
    ends = [
        float(runs.symmetry.sel(objective=o).isel(step=-1).median("layer").mean("seed")) for o in runs.objective.values
    ]
    out["05_training_dynamics"] = ends + ([ends[0] - ends[1]] if len(ends) == 2 else [])
    init = ds("06_symmetric_init")
    loss = init.val_loss.isel(objective=0)
    placebo = init.placebo_val_loss.isel(objective=0)  # 06_validation_loss: the placebo minus each arm
    out["06_symmetric_init"] = [
        float((placebo - loss.sel(init=arm)).dropna("step", how="all").isel(step=-1).mean("seed"))
        for arm in ("symmetric", "bert")
    ]
    vision = ds("07_vision")
    final = vision.symmetry.isel(step=-1).median("layer")  # 07_scores_over_training: each seed's median, mean
    out["07_vision"] = [float(final.sel(objective=o).mean("seed")) for o in vision.objective.values]
    for name in ("03_pretrained_models", "08_model_sweep"):
        if (build_dir / "results" / f"{name}.nc").is_file():
            summary = pretrained_scores.stack_summary(ds(name))
            own = summary[summary["stack"].isin(["encoder", "decoder"]) & (summary["role"] != "vision encoder")]
            out[name] = list(own.groupby("stack")["symmetry_median"].median())  # vision encoders drawn apart
    pairs = ds("09_dynamics_at_scale")
    pairs = pairs.isel(checkpoint=np.flatnonzero(pairs["kind"].values == "pair"))
    frame = pd.DataFrame(
        {
            "series": pairs["series"].values,
            "unit": pairs["unit"].values,
            "role": pairs["role"].values,
            "s": pairs.symmetry.median("layer").values,
        }
    ).pivot_table(index=["series", "unit"], columns="role", values="s")
    gaps = (frame["encoder"] - frame["decoder"]).groupby(level="series")
    out["09_dynamics_at_scale"] = [*gaps.min(), *gaps.max()]
    return out


SIGNED = re.compile(r"(?<![\w.])[+\-−](\d+\.(\d+))")


def assert_slide_numbers_are_the_figure_statistics(build_dir: Path) -> None:
    """Every signed number on each figure slide (title and number line) is, to its printed digits, one of the
    statistics its figure draws, and each of those statistics is printed."""
    expected = figure_statistics(build_dir)
    for slide in contents.slides(contents.read_build(build_dir)):
        if slide.missing or slide.notebook not in expected:
            continue
        wanted = expected[slide.notebook]
        text = handouts._math(html.escape(slide.title)) + " " + slide.number
        shown = [(m.group(0).replace("−", "-"), len(m.group(2))) for m in SIGNED.finditer(visible_text(text))]
        assert shown, slide.title
        for token, digits in shown:
            close = [v for v in wanted if abs(float(token) - v) <= 0.5 * 10**-digits + 1e-12]
            assert close, f"{slide.notebook}: {token} is not a statistic of its figure {wanted}"
        for value in wanted:
            assert any(abs(float(t) - value) <= 0.5 * 10**-d + 1e-12 for t, d in shown), (slide.notebook, value)


@BROWSER[1]
@BROWSER[2]
def test_each_slide_number_is_its_figure_statistic(built, executed_build):
    assert_slide_numbers_are_the_figure_statistics(executed_build.build_dir)
