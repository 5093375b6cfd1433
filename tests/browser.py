"""Helpers of the browser tests (tests/test_browser.py): the system Chromium, an offline guard, a static site
server, what one book page shows, and a JupyterLab server from ``attnstruct.teaching.lab`` on a free port."""

from __future__ import annotations

import contextlib
import functools
import http.server
import json
import os
import re
import shutil
import socket
import subprocess
import threading
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from attnstruct.teaching import lab

LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1", "[::1]"}
# MathJax 2 (HTML-CSS, CommonHTML, SVG) and MathJax 3 output elements.
MATHJAX_OUTPUT = (
    ".MathJax, .MathJax_CHTML, .mjx-chtml, .MathJax_SVG, .MathJax_Display, .MJXc-display, mjx-container, "
    '[id^="MathJax-Element-"][id$="-Frame"]'
)
# TeX left as text: $$...$$, \(...\), \[...\], \begin{...} and $...$ (a dollar pair around non-blank text).
RAW_TEX = re.compile(
    r"\$\$|\\\(|\\\)|\\\[|\\\]|\\begin\{|(?<![\w$\\])\$(?=[^\s$])[^$\n]{1,300}(?<=[^\s$\\])\$(?![\w$])"
)


def chromium_executable() -> str:
    """The system Chromium (``$ATTNSTRUCT_CHROMIUM``, ``chromium`` or ``chromium-browser`` on PATH)."""
    for name in (os.environ.get("ATTNSTRUCT_CHROMIUM"), "chromium", "chromium-browser"):
        if name and (path := shutil.which(name)):
            return path
    pytest.fail("no chromium on PATH: run .ci/ensure-chromium (or apt-get install chromium)", pytrace=False)


class OfflineGuard:
    """Aborts every request of a browser context that leaves 127.0.0.1 and records it in ``blocked``."""

    def __init__(self, context):
        self.blocked: list[str] = []
        context.route("**/*", self._route)

    def _route(self, route):
        url = route.request.url
        parts = urlsplit(url)
        if parts.scheme in ("http", "https", "ws", "wss") and (parts.hostname or "") not in LOCAL_HOSTS:
            self.blocked.append(url)
            route.abort("blockedbyclient")
        else:
            route.continue_()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # no request log on stderr
        pass


@contextlib.contextmanager
def static_site(folder: Path):
    """Serve ``folder`` on 127.0.0.1 (a free port) from a thread; yields the base URL, ending in ``/``."""
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# Console errors that are no defect of the book. pydata-sphinx-theme logs the first on a browser's first visit
# (nothing in localStorage yet), then picks the automatic light/dark mode. MathJax 2's HTML-CSS output tests how
# the browser answers a missing web font with ``@font-face {src: url('about:blank')}`` (MathJax_Blank), which
# Chrome reports as the next three (expected behaviour, mathjax/MathJax#926); any other failed request is still
# reported with its URL ("request failed ...", "HTTP 404 ...").
BENIGN_CONSOLE = tuple(
    re.compile(pattern)
    for pattern in (
        r"console: Got invalid theme mode: \. Resetting to auto\.",
        r"console: Access to font at 'about:blank' from origin '[^']*' has been blocked by CORS policy: .*",
        r"request failed \(net::ERR_FAILED\): about:blank",
        r"console: Failed to load resource: net::ERR_FAILED",
    )
)


class ConsoleErrors:
    """Console messages of type error, uncaught page errors and failed resources of one page, as text."""

    def __init__(self, page):
        self.messages: list[str] = []
        page.on("console", lambda msg: msg.type == "error" and self._add(f"console: {msg.text}"))
        page.on("pageerror", lambda err: self._add(f"pageerror: {err}"))
        page.on("response", lambda r: r.status >= 400 and self._add(f"HTTP {r.status}: {r.url}"))
        page.on("requestfailed", lambda r: self._add(f"request failed ({r.failure}): {r.url}"))

    def _add(self, message: str) -> None:
        if not any(pattern.fullmatch(message) for pattern in BENIGN_CONSOLE):
            self.messages.append(message)

    def take(self) -> list[str]:
        messages, self.messages = self.messages, []
        return messages


WAIT_FOR_MATH = """async () => {
  const timeout = new Promise(resolve => setTimeout(() => resolve('timeout'), 30000));
  const mj = window.MathJax;
  let done = Promise.resolve('none');
  if (mj && mj.Hub && mj.Hub.Queue) done = new Promise(resolve => mj.Hub.Queue(() => resolve('mathjax2')));
  else if (mj && mj.startup && mj.startup.promise) done = mj.startup.promise.then(() => 'mathjax3');
  else if (mj) done = Promise.resolve('mathjax-not-loaded');
  return Promise.race([done, timeout]);
}"""

PAGE_REPORT = """async ([mathjax, skip]) => {
  const images = Array.from(document.images);
  images.forEach(img => { if (img.loading === 'lazy') img.loading = 'eager'; });
  await Promise.all(images.map(img => img.complete ? null : new Promise(resolve => {
    img.addEventListener('load', resolve, {once: true});
    img.addEventListener('error', resolve, {once: true});
    setTimeout(resolve, 15000);
  })));
  const brokenImages = images.filter(img => !(img.complete && img.naturalWidth > 0))
    .map(img => img.getAttribute('src') || img.outerHTML.slice(0, 120));
  // Sphinx's math (span/div.math), not the span.math that MathJax's HTML-CSS output has inside it.
  const math = Array.from(document.querySelectorAll('.math')).filter(el => !el.parentElement?.closest(mathjax));
  const untypeset = math.filter(el => !el.matches(mathjax) && !el.querySelector(mathjax))
    .map(el => el.textContent.trim().slice(0, 80));
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const text = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const el = node.parentElement;
    if (!el || el.closest(skip) || (el.checkVisibility && !el.checkVisibility())) continue;
    text.push(node.textContent);
  }
  return {
    brokenImages, untypeset, mathElements: math.length, text: text.join(' '),
    typeset: document.querySelectorAll(mathjax).length,
    links: Array.from(document.querySelectorAll('a[href]')).map(a => a.href),
    ids: Array.from(document.querySelectorAll('[id], a[name]')).map(el => el.id || el.getAttribute('name')),
  };
}"""
TEXT_SKIP = (
    "pre, code, kbd, samp, script, style, textarea, noscript, .highlight, .MathJax_Preview, .MJX_Assistive_MathML, "
    + MATHJAX_OUTPUT
)


def page_report(page, url: str, errors: ConsoleErrors) -> dict:
    """Load ``url`` and wait for MathJax; what the page shows: status, console errors, images, math, links, ids."""
    response = page.goto(url, wait_until="load")
    mathjax = page.evaluate(WAIT_FOR_MATH)
    report = page.evaluate(PAGE_REPORT, [MATHJAX_OUTPUT, TEXT_SKIP])
    report["status"] = response.status if response else None
    report["mathjax"] = mathjax
    report["raw_tex"] = [m.group(0)[:80] for m in RAW_TEX.finditer(report.pop("text"))]
    report["errors"] = errors.take()
    return report


def site_pages(site: Path) -> list[str]:
    """Every HTML page of a built Sphinx site, relative to it, outside Sphinx's own ``_static``-like folders."""
    pages = [p.relative_to(site) for p in site.rglob("*.html")]
    return sorted(p.as_posix() for p in pages if not any(part.startswith((".", "_")) for part in p.parts[:-1]))


# The JupyterLab side.
LAB_READY_S = 180  # the server starts in ~20 s on a loaded 2-core machine


class LabServer:
    """A JupyterLab from :func:`attnstruct.teaching.lab.lab_command` on ``root`` (127.0.0.1, a free port, a token),
    with the user's Jupyter settings, workspaces and runtime files kept in ``scratch``."""

    def __init__(self, root: Path, scratch: Path, token: str):
        self.root, self.token, self.port = root, token, free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        env = {
            **{k: v for k, v in os.environ.items() if k != "ATTNSTRUCT_WORK"},  # the lab's own default: build/quick
            "JUPYTER_CONFIG_DIR": str(scratch / "config"),
            "JUPYTER_DATA_DIR": str(scratch / "data"),
            "JUPYTER_RUNTIME_DIR": str(scratch / "runtime"),
            "JUPYTERLAB_SETTINGS_DIR": str(scratch / "user-settings"),
            "JUPYTERLAB_WORKSPACES_DIR": str(scratch / "workspaces"),
        }
        self.argv, self.env = lab.lab_command(root, port=self.port, token=token, open_browser=False, environ=env)
        self.log = scratch / "jupyterlab.log"
        self.process: subprocess.Popen | None = None

    def api(self, path: str, method: str = "GET"):
        """Call the server's REST API; the decoded JSON answer (None when empty)."""
        request = urllib.request.Request(
            self.url + path, method=method, headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            body = answer.read()
        return json.loads(body) if body else None

    def __enter__(self):
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(self.argv, env=self.env, cwd=self.root, stdout=log, stderr=log)
        deadline = time.monotonic() + LAB_READY_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with {self.process.returncode}:\n{self.log_tail()}")
            with contextlib.suppress(OSError):
                self.api("api/status")
                return self
            time.sleep(0.5)
        self.__exit__(None, None, None)
        raise TimeoutError(f"JupyterLab did not answer within {LAB_READY_S} s:\n{self.log_tail()}")

    def __exit__(self, *exc):
        if self.process is None or self.process.poll() is not None:
            return
        with contextlib.suppress(OSError):
            self.api("api/shutdown", method="POST")  # stops the kernels too
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def log_tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""
