"""The numbers the docs state of a build, rewritten between their marker comments from the build's datasets.

``docs/paper-notes.md`` §3.6 and the README's notebook table state what notebook 10 found; the text between each
pair of markers (:data:`BLOCKS`) is what :func:`attnstruct.analyses.nb10_attention_sinks.docs_numbers` and
``readme_clause`` render from ``results/10_attention_sinks.nc``, never typed. After a build::

    python -m attnstruct.analyses.documented_numbers build/quick/results

Bad input (no dataset, a dataset without verdicts, a file without its markers) is one line on stderr, exit status 2,
and nothing written; otherwise every file is rendered first, then each written atomically
(:func:`attnstruct.results.write_atomically`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import xarray as xr

from .. import notebooks, results
from . import nb10_attention_sinks

COMMAND = "python -m attnstruct.analyses.documented_numbers build/quick/results"
BAD_INPUT = 2


@dataclass(frozen=True)
class Block:
    """The text of ``file`` (relative to the project root) between ``begin`` and ``end``: ``render(dataset, root)``
    of ``notebook``'s dataset, on lines of its own (``inline`` false) or inside one line (a table row)."""

    file: str
    begin: str
    end: str
    notebook: str
    render: Callable[[xr.Dataset, Path], str]
    inline: bool


BLOCKS = (
    Block(
        "docs/paper-notes.md",
        f"<!-- notebook 10 numbers: begin ({COMMAND}) -->",
        "<!-- notebook 10 numbers: end -->",
        "10_attention_sinks",
        nb10_attention_sinks.docs_numbers,
        inline=False,
    ),
    Block(
        "README.md",
        "<!-- notebook 10 finds: begin -->",
        "<!-- notebook 10 finds: end -->",
        "10_attention_sinks",
        lambda ds, root: nb10_attention_sinks.readme_clause(ds),
        inline=True,
    ),
)


def replaced(text: str, block: Block, body: str) -> str:
    """``text`` with what lies between ``block``'s markers replaced by ``body``; ValueError (one line) when the
    markers are not there exactly once each, in order."""
    if text.count(block.begin) != 1 or text.count(block.end) != 1:
        raise ValueError(f"{block.file} must hold {block.begin} and {block.end} once each")
    head, rest = text.split(block.begin)
    if block.end not in rest:
        raise ValueError(f"{block.file}: {block.end} comes before {block.begin}")
    _, tail = rest.split(block.end)
    inner = body if block.inline else f"\n{body}\n"
    return f"{head}{block.begin}{inner}{block.end}{tail}"


def rendered(results_dir: str | Path, root: str | Path | None = None) -> dict[Path, str]:
    """Each file of :data:`BLOCKS` (absolute path) as it reads with its blocks rendered from the datasets in
    ``results_dir``; ValueError (one line naming the file) for a dataset missing or without verdicts, or a file
    without its markers. Nothing is written."""
    root = notebooks.project_root(root)
    datasets: dict[str, xr.Dataset] = {}
    texts: dict[Path, str] = {}
    for block in BLOCKS:
        if block.notebook not in datasets:
            path = Path(results_dir) / f"{block.notebook}.nc"
            if not path.is_file():
                raise ValueError(f"no {path}: run notebook {block.notebook} first (make reproduce)")
            try:
                datasets[block.notebook] = results.load_dataset(path)
            except Exception as err:  # noqa: BLE001  (whatever the file holds, one line)
                reason = " ".join(str(err).split())
                raise ValueError(f"{path} is not a dataset attnstruct can read ({reason})") from None
        target = root / block.file
        text = texts.get(target) or target.read_text(encoding="utf-8")
        try:
            body = block.render(datasets[block.notebook], root)
        except ValueError as err:
            raise ValueError(f"{Path(results_dir) / block.notebook}.nc: {err}") from None
        texts[target] = replaced(text, block, body)
    return texts


def stale(results_dir: str | Path, root: str | Path | None = None) -> list[str]:
    """The files of :data:`BLOCKS` whose blocks differ from what ``results_dir`` renders (``make findings``)."""
    return [str(path) for path, text in rendered(results_dir, root).items() if path.read_text(encoding="utf-8") != text]


def rewrite(results_dir: str | Path, root: str | Path | None = None) -> list[Path]:
    """Render every block (:func:`rendered`), then write each file atomically; the files written."""
    texts = rendered(results_dir, root)
    for path, text in texts.items():
        results.write_atomically(path, lambda tmp, text=text: Path(tmp).write_text(text, encoding="utf-8"))
    return list(texts)


def main(argv: list[str] | None = None) -> int:
    """``python -m attnstruct.analyses.documented_numbers RESULTS_DIR``: rewrite the blocks; exit 0, or 2 with one
    line on stderr."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print(f"usage: {COMMAND.replace('build/quick/results', 'RESULTS_DIR')}", file=sys.stderr)
        return BAD_INPUT
    try:
        written = rewrite(argv[0])
    except (ValueError, results.OutputError) as err:
        print(f"documented_numbers: error: {' '.join(str(err).split())}", file=sys.stderr)
        return BAD_INPUT
    for path in written:
        print(f"rewrote the numbers in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
