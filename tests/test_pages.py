"""The executed notebooks' HTML pages: every asset local (MathJax beside the page, no CDN), wide tables scrolling,
and no folder of the building machine in a page (``attnstruct.report.pages``, ``attnstruct.notebooks``)."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from attnstruct import notebooks
from attnstruct.report import pages
from attnstruct.teaching.book import EXTERNAL

from conftest import ROOT

SCRIPT_SOURCES = re.compile(r"""<script\b[^>]*\bsrc\s*=\s*["']([^"']*)["']""", re.IGNORECASE)
CDN = re.compile(r"https?://[^\s\"'<>]*(?:cdnjs|unpkg|jsdelivr|mathjax\.org)", re.IGNORECASE)


def _tiny_notebook(path: Path) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("The form $x^\\top W y$ and $$\\sigma = \\frac{a}{b}.$$"),
        nbformat.v4.new_code_cell(
            "table",
            outputs=[nbformat.v4.new_output("execute_result", {"text/html": "<table><tr><td>1</td></tr></table>"})],
        ),
    ]
    nbformat.write(nb, str(path))
    return path


@pytest.fixture
def rendered(tmp_path):
    """A small executed notebook rendered by the pipeline: ``(html text, html path)``."""
    html = tmp_path / "html" / "tiny.html"
    notebooks._render_html(_tiny_notebook(tmp_path / "tiny.ipynb"), html)
    return html.read_text(encoding="utf-8"), html


def test_rendered_page_loads_no_script_or_style_from_the_web(rendered):
    text, _ = rendered
    assert not EXTERNAL.findall(text), EXTERNAL.findall(text)[:5]
    assert not CDN.findall(text), CDN.findall(text)[:5]


def test_rendered_page_loads_mathjax_from_a_copy_beside_it(rendered):
    text, html = rendered
    sources = SCRIPT_SOURCES.findall(text)
    mathjax = [s for s in sources if "MathJax.js" in s]
    assert mathjax == [pages.mathjax_url()], sources
    assert (html.parent / mathjax[0].split("?")[0]).is_file()
    assert (html.parent / pages.MATHJAX_FOLDER / "config" / f"{pages.MATHJAX_CONFIG}.js").is_file()


def test_portable_text_makes_build_paths_relative_and_hides_home_and_checkout(tmp_path):
    build = tmp_path / "build"
    folders = pages.machine_folders(build, ROOT)
    text = f'results_dir = "{build}/results"\nloaded {ROOT}/notebooks/01.py from {Path.home()}/.cache/x'
    shown = pages.portable_text(text, folders)
    assert 'results_dir = "results"' in shown
    assert "<checkout>/notebooks/01.py" in shown and "~/.cache/x" in shown
    assert not pages.leaked_folders(shown, folders)


@pytest.mark.notebook
@pytest.mark.parametrize("name", [p.stem for p in notebooks.list_notebooks(ROOT)])
def test_executed_page_names_no_folder_of_the_building_machine(executed_build, name):
    result, _ = executed_build(name)
    folders = pages.machine_folders(executed_build.build_dir, ROOT)
    for path in (result.html, result.executed):
        text = path.read_text(encoding="utf-8")
        leaked = pages.leaked_folders(text, folders)
        where = [text[max(0, text.find(f) - 80) : text.find(f) + 80] for f in leaked]
        assert not leaked, f"{path.name}: {where}"
