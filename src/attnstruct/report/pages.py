"""Static HTML of an executed notebook that renders offline and shows no path of the machine that built it.

nbconvert's HTML exporter loads MathJax, require.js and mermaid from cdnjs by default (its ``mathjax_url`` and
``require_js_url`` traits). Here MathJax 2.7 is the copy that the ``jupyter_server_mathjax`` package ships,
placed next to the pages (``mathjax/`` beside ``NN_x.html``) and named by a relative URL, so a page opened from
disk typesets its maths with no network; require.js is left out (it only serves widget outputs, which the
pipeline's notebooks do not store: ``TQDM_DISABLE=1``), and so is mermaid (no notebook draws a mermaid
diagram). Wide output tables scroll inside their output area instead of being clipped.

:func:`portable_text` rewrites the absolute folders of the building machine (the build, the checkout, the home
folder) in a notebook's text outputs as paths relative to the build, ``<checkout>/...`` and ``~/...``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path

MATHJAX_CONFIG = "TeX-AMS-MML_HTMLorMML-full"  # the combined configuration jupyter_server_mathjax ships
MATHJAX_PARTS = ("MathJax.js", f"config/{MATHJAX_CONFIG}.js", "extensions", "jax/input", "jax/element",
                 "jax/output/HTML-CSS", "fonts/HTML-CSS/STIX-Web", "LICENSE")  # fmt: skip
MATHJAX_FOLDER = "mathjax"
# Output areas scroll sideways (a wide DataFrame); images and text keep their own width rules.
PAGE_CSS = """
.jp-OutputArea-output, .jp-RenderedHTMLCommon { overflow-x: auto; }
.jp-RenderedHTMLCommon table { max-width: none; }
"""


class PageError(RuntimeError):
    """A page cannot be made to render offline (no local MathJax installed)."""


def mathjax_source() -> Path:
    """The ``static`` folder of the installed ``jupyter_server_mathjax`` package, which holds ``MathJax.js``."""
    try:
        import jupyter_server_mathjax
    except ImportError:
        raise PageError("no local MathJax: install jupyter-server-mathjax") from None
    src = Path(jupyter_server_mathjax.__file__).parent / "static"
    if not (src / "MathJax.js").is_file():
        raise PageError(f"no MathJax.js in {src}; install jupyter-server-mathjax")
    return src


def copy_mathjax(folder: Path) -> Path:
    """Copy the parts of MathJax a page uses (:data:`MATHJAX_PARTS`) into ``folder/mathjax``, once; that folder."""
    src, dest = mathjax_source(), Path(folder) / MATHJAX_FOLDER
    for part in MATHJAX_PARTS:
        target = dest / part
        if target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if (src / part).is_dir() else shutil.copy2)(src / part, target)
    return dest


def mathjax_url() -> str:
    """MathJax relative to a page in the folder :func:`copy_mathjax` filled."""
    return f"{MATHJAX_FOLDER}/MathJax.js?config={MATHJAX_CONFIG}"


def html_exporter():
    """nbconvert's HTML exporter with every asset local: MathJax by :func:`mathjax_url`, no require.js or mermaid,
    and :data:`PAGE_CSS`."""
    from jinja2 import DictLoader
    from nbconvert import HTMLExporter

    template = (
        "{%- extends 'lab/index.html.j2' -%}\n"
        "{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}\n"
        "{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}\n"
        '{%- block extra_css -%}<style type="text/css">' + PAGE_CSS + "</style>{%- endblock extra_css -%}\n"
    )
    return HTMLExporter(
        extra_loaders=[DictLoader({"attnstruct_page.html.j2": template})],
        template_file="attnstruct_page.html.j2",
        mathjax_url=mathjax_url(),
        require_js_url="",
    )


def machine_folders(build_dir: Path, checkout: Path | None = None) -> dict[str, str]:
    """Absolute folders of this machine and what a page shows instead, longest first: the build as ``.`` (paths
    relative to it), the checkout as ``<checkout>``, the home folder as ``~``; each both as given and resolved."""
    pairs: list[tuple[Path, str]] = [(Path(build_dir), ".")]
    if checkout is not None:
        pairs.append((Path(checkout), "<checkout>"))
    pairs.append((Path.home(), "~"))
    folders: dict[str, str] = {}
    for path, shown in pairs:
        for form in {str(path), str(path.resolve())}:
            if len(form) > 1:
                folders.setdefault(form.rstrip(os.sep), shown)
    return dict(sorted(folders.items(), key=lambda item: -len(item[0])))


def portable_text(text: str, folders: Mapping[str, str]) -> str:
    """``text`` with each folder of ``folders`` (:func:`machine_folders`) replaced by what a page shows instead:
    ``/build/results/x.nc`` becomes ``results/x.nc`` for the build ``/build``."""
    for folder, shown in folders.items():
        if shown == ".":
            text = text.replace(folder + os.sep, "").replace(folder, ".")
        else:
            text = text.replace(folder, shown)
    return text


def _strings(value, rewrite):
    if isinstance(value, str):
        return rewrite(value)
    if isinstance(value, list):
        return [_strings(v, rewrite) for v in value]
    if isinstance(value, dict):
        return type(value)({k: _strings(v, rewrite) for k, v in value.items()})
    return value


def portable_notebook(nb, folders: Mapping[str, str]):
    """The notebook ``nb`` (an nbformat node, changed in place and returned) with :func:`portable_text` applied to
    every cell's source, to its text outputs (streams, errors, ``text/*`` data) and to papermill's record of the
    run (its paths and parameters); images are left as they are, so what they draw must name no path (their
    titles and legends name models)."""

    def rewrite(text: str) -> str:
        return portable_text(text, folders)

    if "papermill" in nb.metadata:
        nb.metadata["papermill"] = _strings(nb.metadata["papermill"], rewrite)

    for cell in nb.cells:
        cell.source = rewrite(cell.source)
        for output in cell.get("outputs", ()):
            if "text" in output:
                output.text = _strings(output.text, rewrite)
            if "traceback" in output:
                output.traceback = _strings(output.traceback, rewrite)
            if "evalue" in output:
                output.evalue = rewrite(output.evalue)
            for mime, data in output.get("data", {}).items():
                if mime.startswith("text/"):
                    output.data[mime] = _strings(data, rewrite)
    return nb


def leaked_folders(text: str, folders: Iterable[str]) -> list[str]:
    """The folders of ``folders`` that occur in ``text``."""
    return [folder for folder in folders if folder in text]
