"""The course book and JupyterLab in a real browser (headless system Chromium through Playwright), offline.

Books: the instructor's and the student's site that ``attnstruct.teaching.book.build_books`` makes from the shared
executed build (or the ones under the folder that ``$ATTNSTRUCT_BOOK`` names, e.g. ``build/quick/book``), each
served from 127.0.0.1: every page loads without a console error, images load, math is typeset and inline math is
no taller than the text, output lines wrap, internal links resolve, a solution dropdown opens and closes (the
student's exercises page has none).
JupyterLab: ``attnstruct.teaching.lab`` on a copy of the notebooks opens ``01_bilinear_form.py`` as a notebook and
runs it through the UI without an error. Any request that leaves 127.0.0.1 is aborted and fails the test.
Screenshots go to ``build/browser/``.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import sys
import time
from pathlib import Path
from urllib.parse import unquote, urldefrag, urlsplit

import pytest

from attnstruct import notebooks
from attnstruct.teaching import lab

from browser import ConsoleErrors, LabServer, OfflineGuard, chromium_executable, page_report, site_pages, static_site
from conftest import ROOT

playwright_sync = pytest.importorskip("playwright.sync_api")
pytestmark = [pytest.mark.browser, pytest.mark.notebook]  # the book of the shared build; 01 run in JupyterLab

SHOTS = ROOT / "build" / "browser"
NOTEBOOKS = [p.stem for p in notebooks.list_notebooks(ROOT)]
LAB_NOTEBOOK = "01_bilinear_form"
RUN_ALL_S = 600  # notebook 01 runs in ~16 s in a quiet kernel; the test suite shares the CPUs
ID_ATTRIBUTE = re.compile(r"""\s(?:id|name)\s*=\s*["']([^"']+)["']""")


@pytest.fixture(scope="module")
def browser():
    """One headless system Chromium for the module."""
    with playwright_sync.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=chromium_executable(), headless=True)
        yield chromium
        chromium.close()


@pytest.fixture
def context(browser):
    """A fresh browser context whose requests may not leave 127.0.0.1 (the test fails if one tried)."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    guard = OfflineGuard(ctx)
    yield ctx, guard
    ctx.close()
    assert not guard.blocked, f"requests that would have left 127.0.0.1: {sorted(set(guard.blocked))[:10]}"


# The books.

AUDIENCES = ("instructor", "student")


@pytest.fixture(scope="module", params=AUDIENCES)
def book(request):
    """One built book, each in turn: ``$ATTNSTRUCT_BOOK/<audience>``, else a build from the shared executed
    notebooks."""
    if os.environ.get("ATTNSTRUCT_BOOK"):
        folder = Path(os.environ["ATTNSTRUCT_BOOK"])
        folder = folder if folder.is_absolute() else Path.cwd() / folder
    else:
        folder = Path(request.getfixturevalue("built_book"))
    folder = folder.parent if folder.suffix == ".html" else folder
    site = folder / request.param
    assert (site / "index.html").is_file(), f"no {request.param} book at {site} (index.html missing)"
    return site


# What one page's layout shows: the output blocks of code cells wider than their box (they should wrap), and
# per inline math element (HTML-CSS output of MathJax 2, outside display math) its height and the height of its
# first identifier or number, over the font size of the text around it. "simple" marks an element without a
# tall construct (a sum with limits, a fraction, a root, ...), whose whole height should stay near the line's.
LAYOUT = r"""() => {
  const tall = /\\(sum|prod|int|frac|tfrac|dfrac|binom|sqrt|left|over|begin|overline|underline|widehat)/;
  const size = el => parseFloat(getComputedStyle(el).fontSize);
  const pres = Array.from(document.querySelectorAll('div.cell_output pre')).filter(p => p.clientWidth > 0);
  const inline = [];
  for (const el of document.querySelectorAll('span.MathJax')) {
    if (el.closest('.MathJax_Display, div.math')) continue;
    const box = (el.querySelector('span.math') || el).getBoundingClientRect();
    if (!box.height) continue;  // not shown: in a folded input
    const script = el.nextElementSibling;
    const tex = script && script.tagName === 'SCRIPT' ? script.textContent : '';
    const glyph = el.querySelector('.mi, .mn');
    const font = size(el.parentElement);
    inline.push({tex: tex.slice(0, 60), simple: !tall.test(tex), box: box.height / font,
                 glyph: glyph ? glyph.getBoundingClientRect().height / font : 0});
  }
  return {
    outputs: pres.length,
    wide: pres.filter(p => p.scrollWidth > p.clientWidth).map(p => p.textContent.trim().slice(0, 80)),
    inline,
  };
}"""
INLINE_MATH_MAX = 1.6  # an inline math element's height, in font sizes of the line around it


@pytest.fixture(scope="module")
def crawl(book, browser):
    """Every page of the book loaded once: ``{"url", "pages": {relative path: report}, "blocked", "status"}``;
    each report has the page's ``layout`` (:data:`LAYOUT`)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    pages = site_pages(book)
    notebook_contents = [p for p in pages if p.startswith("notebooks/")]
    shots = {"index.html": "index.png", "exercises.html": "exercises.png"}
    if notebook_contents:
        shots[notebook_contents[0]] = "notebook.png"
    with static_site(book) as url:
        ctx = browser.new_context(viewport={"width": 1280, "height": 900})
        guard = OfflineGuard(ctx)
        page = ctx.new_page()
        errors = ConsoleErrors(page)
        reports = {}
        for path in pages:
            reports[path] = page_report(page, url + path, errors)
            reports[path]["layout"] = page.evaluate(LAYOUT)
            if path in shots:
                page.screenshot(path=SHOTS / f"book-{book.name}-{shots[path]}", full_page=True)
        status = _link_status(ctx, url, reports)
        ctx.close()
        yield {"url": url, "pages": reports, "blocked": guard.blocked, "status": status, "site": book}


def _link_status(ctx, url: str, reports: dict) -> dict:
    """HTTP status and the ids (``None`` when not HTML) of every same-origin link target, by URL without fragment."""
    origin = urlsplit(url).netloc
    targets = {urldefrag(link)[0] for r in reports.values() for link in r["links"] if urlsplit(link).netloc == origin}
    status = {}
    for target in sorted(targets):
        answer = ctx.request.get(target)
        is_html = "html" in answer.headers.get("content-type", "")
        ids = set(ID_ATTRIBUTE.findall(answer.text())) if answer.ok and is_html else None
        status[target] = (answer.status, ids)
        answer.dispose()
    return status


def test_book_has_the_expected_pages(crawl):
    pages = crawl["pages"]
    expected = {"index.html", "exercises.html", "data.html", "citation.html"}
    assert expected <= set(pages), sorted(expected - set(pages))
    assert ("lecture-path.html" in pages) == (crawl["site"].name == "instructor")
    notebook_contents = {Path(p).stem for p in pages if p.startswith("notebooks/")}
    assert set(NOTEBOOKS) <= notebook_contents, sorted(set(NOTEBOOKS) - notebook_contents)
    assert not [p for p, r in pages.items() if r["status"] != 200]


def test_book_contents_load_without_console_errors(crawl):
    errors = {path: r["errors"] for path, r in crawl["pages"].items() if r["errors"]}
    assert not errors, json.dumps(errors, indent=1)[:4000]


def test_book_images_load(crawl):
    broken = {path: r["brokenImages"] for path, r in crawl["pages"].items() if r["brokenImages"]}
    assert not broken, json.dumps(broken, indent=1)[:4000]


def test_book_math_is_typeset(crawl):
    pages = crawl["pages"]
    with_math = {p: r for p, r in pages.items() if r["mathElements"] or r["typeset"] or r["raw_tex"]}
    assert any(p.startswith("notebooks/") for p in with_math), "no notebook page has math"
    problems = {}
    for path, r in with_math.items():
        if not r["typeset"] or r["untypeset"] or r["raw_tex"]:
            problems[path] = {
                "MathJax": r["mathjax"],  # none: the page does not load it (math only in the sidebar?)
                "typeset elements": r["typeset"],
                "math elements not typeset": r["untypeset"][:5],
                "raw TeX in visible text": r["raw_tex"][:5],
            }
    assert not problems, json.dumps(problems, indent=1)[:4000]


def test_book_internal_links_resolve(crawl):
    origin = urlsplit(crawl["url"]).netloc
    live_ids = {crawl["url"] + path: set(r["ids"]) for path, r in crawl["pages"].items()}
    broken = []
    for source, r in crawl["pages"].items():
        for link in r["links"]:
            if urlsplit(link).netloc != origin:
                continue
            target, fragment = urldefrag(link)
            code, ids = crawl["status"][target]
            if code != 200:
                broken.append(f"{source}: {link} -> HTTP {code}")
                continue
            key = target + "index.html" if target.endswith("/") else target
            if fragment and ids is not None and unquote(fragment) not in ids | live_ids.get(key, set()):
                broken.append(f"{source}: {link} -> no element with id {unquote(fragment)!r}")
    assert not broken, "\n".join(sorted(set(broken))[:40])


TAG_DROPDOWN = """() => {
  const main = document.querySelector('article.bd-article, [role="main"], main, article') || document.body;
  const solution = el => /solution/i.test(el.className + ' ' + el.textContent.slice(0, 200)) ? 0 : 1;
  const tag = (click, content, kind) => {
    click.setAttribute('data-test-click', ''); content.setAttribute('data-test-content', '');
    return {kind, label: click.textContent.trim().slice(0, 80)};
  };
  const details = Array.from(main.querySelectorAll('details')).sort((a, b) => solution(a) - solution(b));
  for (const d of details) {
    const summary = d.querySelector(':scope > summary');
    const content = Array.from(d.children).find(c => c.tagName !== 'SUMMARY' && c.textContent.trim());
    if (summary && content && !d.open) return tag(summary, content, 'details');
  }
  const toggles = Array.from(main.querySelectorAll('.toggle, .dropdown')).sort((a, b) => solution(a) - solution(b));
  for (const t of toggles) {
    const click = t.querySelector('.toggle-button') || t.querySelector(':scope > .admonition-title');
    const content = Array.from(t.children).find(
      c => !c.matches('.admonition-title, .toggle-button, button') && c.textContent.trim());
    if (click && content) return tag(click, content, 'togglebutton');
  }
  return null;
}"""


def test_book_solution_dropdown_opens_and_closes(crawl, context):
    ctx, _ = context
    page = ctx.new_page()
    page.goto(crawl["url"] + "exercises.html", wait_until="load")
    if crawl["site"].name == "student":
        solutions = page.locator("details.solution, .solution.dropdown, .solution")
        assert solutions.count() == 0, "the student book's exercises page has a solution"
        return
    found = page.evaluate(TAG_DROPDOWN)
    assert found, "the exercises page has no collapsed solution (details, or a togglebutton dropdown)"
    click, content = page.locator("[data-test-click]"), page.locator("[data-test-content]")
    expect = playwright_sync.expect
    expect(content).to_be_hidden()
    click.click()
    expect(content).to_be_visible(timeout=5000)
    click.click()
    expect(content).to_be_hidden(timeout=5000)


def test_book_output_lines_wrap(crawl):
    wide = {path: r["layout"]["wide"] for path, r in crawl["pages"].items() if r["layout"]["wide"]}
    assert any(r["layout"]["outputs"] for r in crawl["pages"].values()), "no output block measured"
    assert not wide, "outputs behind a horizontal scroll bar:\n" + json.dumps(wide, indent=1)[:3000]


def test_book_inline_math_is_text_sized(crawl):
    measured, tall = 0, {}
    for path, r in crawl["pages"].items():
        for m in r["layout"]["inline"]:
            measured += 1
            if m["glyph"] > INLINE_MATH_MAX or (m["simple"] and m["box"] > INLINE_MATH_MAX):
                tall.setdefault(path, []).append(f"{m['tex']!r}: {m['box']:.2f} (letter {m['glyph']:.2f})")
    assert measured, "no inline math measured"
    assert not tall, f"inline math taller than {INLINE_MATH_MAX} x the font size:\n" + json.dumps(tall, indent=1)[:3000]


def test_book_stays_offline(crawl):
    assert not crawl["blocked"], f"requests that would have left 127.0.0.1: {sorted(set(crawl['blocked']))[:10]}"


# JupyterLab.


def test_lab_command_roots_the_repository_with_its_settings_and_kernel():
    argv, env = lab.lab_command(ROOT, port=8899, token="t0ken", open_browser=False, environ={"MPLBACKEND": "agg"})
    assert argv[:3] == [argv[0], "-m", "jupyterlab"] and Path(argv[0]).samefile(sys.executable)
    assert f"--ServerApp.root_dir={ROOT}" in argv and "--ServerApp.port=8899" in argv
    assert "--IdentityProvider.token=t0ken" in argv and "--ServerApp.open_browser=False" in argv
    assert "--ContentsManager.preferred_dir=notebooks" in argv
    settings = Path(env["JUPYTER_PATH"].split(os.pathsep)[0])
    assert settings == ROOT / "jupyter" and "MPLBACKEND" not in env
    assert f"--LabApp.app_settings_dir={settings / 'lab' / 'settings'}" in argv
    overrides = json.loads((settings / "lab" / "settings" / "overrides.json").read_text())
    viewers = overrides["@jupyterlab/docmanager-extension:plugin"]["defaultViewers"]
    assert viewers["python"] == lab.JUPYTEXT_VIEWER
    kernel = json.loads((settings / "kernels" / "python3" / "kernel.json").read_text())
    assert kernel["argv"][:3] == ["python", "-m", "ipykernel_launcher"]  # jupyter_client: the server's Python
    default_argv, _ = lab.lab_command(ROOT, environ={})
    assert not [a for a in default_argv if a.startswith(("--IdentityProvider.token", "--ServerApp.port="))]


@pytest.fixture
def lab_root(tmp_path):
    """A copy of what the notebooks need (``notebooks/``, ``params/``, ``jupytext.toml``): a project root."""
    root = tmp_path / "repo"
    shutil.copytree(ROOT / "notebooks", root / "notebooks", ignore=shutil.ignore_patterns("*.ipynb", ".*"))
    shutil.copytree(ROOT / "params", root / "params")
    shutil.copy(ROOT / "jupytext.toml", root / "jupytext.toml")
    assert notebooks.find_root(root / "notebooks") == root
    return root


@pytest.mark.timeout(RUN_ALL_S + 120)
def test_lab_runs_01_bilinear_form_through_the_ui(lab_root, tmp_path, context):
    """Another execution of 01, at its own defaults: a student's Run All in JupyterLab, not the pipeline's."""
    ctx, _ = context
    code_cells = sum(
        c.cell_type == "code" for c in notebooks.read_notebook(lab_root / "notebooks" / f"{LAB_NOTEBOOK}.py").cells
    )
    with LabServer(lab_root, tmp_path, secrets.token_hex(16)) as server:
        page = ctx.new_page()
        page.goto(f"{server.url}lab?token={server.token}", wait_until="load")
        # The file browser opens on notebooks/; double-clicking a .py source opens it as a notebook.
        item = page.locator(".jp-DirListing-item", has_text=f"{LAB_NOTEBOOK}.py")
        item.first.wait_for(timeout=120_000)
        item.first.dblclick()
        panel = page.locator(".jp-NotebookPanel").first
        panel.wait_for(timeout=60_000)
        expect = playwright_sync.expect
        expect(panel.locator(".jp-Toolbar-kernelName")).to_contain_text("attnstruct", timeout=60_000)
        expect(panel.locator(".jp-Notebook-ExecutionIndicator")).to_have_attribute(
            "data-status", "idle", timeout=120_000
        )
        started = time.monotonic()
        page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
        page.locator("#jp-mainmenu-run .lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()
        prompts = panel.locator(".jp-CodeCell .jp-InputPrompt")
        deadline, settled = time.monotonic() + RUN_ALL_S, 0
        while settled < 3:  # Run All marks every cell [*] at once; done when none is, the kernel idle, for 3 s
            if time.monotonic() > deadline:
                pytest.fail(f"the notebook did not finish within {RUN_ALL_S} s\n{server.log_tail()}")
            page.wait_for_timeout(1000)
            texts = prompts.evaluate_all("els => els.map(e => e.textContent.trim())")
            busy = [k for k in server.api("api/kernels") if k["execution_state"] != "idle"]
            settled = 0 if busy or "[*]:" in texts else settled + 1
        elapsed = time.monotonic() - started
        errors = panel.locator('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]').evaluate_all(
            "els => els.map(e => e.textContent).filter(t => /Traceback/.test(t))"
        )
        figures = panel.locator('.jp-OutputArea-output[data-mime-type="image/png"] img')
        shown = panel.locator(".jp-OutputArea-output", has_text="Traceback") if errors else figures
        if shown.count():
            shown.first.scroll_into_view_if_needed()
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=SHOTS / f"lab-{LAB_NOTEBOOK}.png")
        assert not errors, "error outputs:\n" + "\n---\n".join(e[:1500] for e in errors)
        assert len(texts) == code_cells and all(re.fullmatch(r"\[\d+\]:", t) for t in texts), texts
        assert figures.count() > 0, "no figure drawn inline (is MPLBACKEND passed to the kernel?)"
        assert (lab_root / "build" / "quick" / "results" / f"{LAB_NOTEBOOK}.nc").is_file()
        print(f"JupyterLab ran {LAB_NOTEBOOK} ({code_cells} code cells) in {elapsed:.1f} s")
    assert server.process.poll() is not None, "the JupyterLab server did not stop"


# The executed notebooks' own pages (``build/<profile>/html/``), opened from disk as a reader opens them.

WIDE_TABLE = """() => {
  const table = document.querySelector('.jp-OutputArea-output table');
  const box = table.closest('.jp-OutputArea-output');
  const style = getComputedStyle(box);
  return {overflow: style.overflowX, scrolls: box.scrollWidth > box.clientWidth,
          boxRight: box.getBoundingClientRect().right, viewport: document.documentElement.clientWidth,
          pageWidth: document.documentElement.scrollWidth};
}"""


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_page_typesets_its_maths_from_disk_with_the_network_blocked(executed_build, context, name):
    ctx, guard = context
    result, _ = executed_build(name)
    page = ctx.new_page()
    errors = ConsoleErrors(page)
    report = page_report(page, result.html.as_uri(), errors)
    assert report["mathjax"] == "mathjax2", f"MathJax did not load: {report['mathjax']}"
    assert report["typeset"] > 0, "no MathJax output element in the page"
    assert not report["raw_tex"], f"raw TeX in visible text: {report['raw_tex'][:5]}"
    assert not guard.blocked, f"the page asked the network for {guard.blocked[:5]}"


def test_notebook_page_lets_a_wide_table_scroll(tmp_path, context):
    import nbformat

    ctx, _ = context
    cells = "".join(f"<td>column_{i:03d}_value</td>" for i in range(80))
    nb = nbformat.v4.new_notebook()
    table = f"<table><tr>{cells}</tr></table>"
    output = nbformat.v4.new_output("execute_result", {"text/html": table})
    nb.cells = [nbformat.v4.new_code_cell("t", outputs=[output])]
    nbformat.write(nb, str(tmp_path / "wide.ipynb"))
    notebooks._render_html(tmp_path / "wide.ipynb", tmp_path / "html" / "wide.html")
    page = ctx.new_page()
    page.goto((tmp_path / "html" / "wide.html").as_uri(), wait_until="load")
    shown = page.evaluate(WIDE_TABLE)
    assert shown["overflow"] in ("auto", "scroll") and shown["scrolls"], shown
    assert shown["boxRight"] <= shown["viewport"] + 1, f"the output box runs past the page's edge: {shown}"
