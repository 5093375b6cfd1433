"""``attnstruct prepare-corpus``: a hub dataset, a named corpus or local files tokenised once into a prepared corpus.

    attnstruct prepare-corpus wikitext-103 --tokenizer google-bert/bert-base-uncased
    attnstruct prepare-corpus hf://datasets/HuggingFaceFW/fineweb-edu --config sample-10BT --tokenizer gpt2 \\
        --max-tokens 200M --workers 8 --steps 20000 --batch-size 64 --seq-len 512
    attnstruct prepare-corpus my-texts/ --tokenizer bpe:8192
    attnstruct prepare-corpus --list

Prints where the corpus is and how many tokens it holds, ``prepared: N tokens (T train, V val) in D documents ->
FOLDER``, and with ``--steps``, ``--batch-size`` and ``--seq-len`` how many passes such a run makes over the
training tokens. Progress lines go to stderr (the bar only on a terminal). Bad input: one line on stderr, exit
status 2, no corpus written (:func:`attnstruct.tasks.prepared_corpus.prepare`).
"""

from __future__ import annotations

import argparse
import os
import re
import sys

from .errors import PROGRAM, CommandError, Parser, refuse
from .help_text import described

_SUFFIXES = {"": 1, "k": 10**3, "m": 10**6, "b": 10**9, "g": 10**9, "t": 10**12}
MOST = 10**15  # a quadrillion tokens, steps or sequences: beyond any corpus or run


def count(text: str) -> int:
    """A positive count up to :data:`MOST`: ``1000000``, ``1_000_000``, ``1e6``, ``20M``, ``1.5B`` (k, M, B/G, T:
    powers of 1000)."""
    match = re.fullmatch(r"\s*([0-9][0-9_]*(?:\.[0-9]+)?(?:e[0-9]+)?)\s*([kmbgt]?)\s*", text.lower())
    if not match:
        raise argparse.ArgumentTypeError(f"expected a count such as 1000000, 1e6 or 20M, got {text!r}")
    value = float(match[1].replace("_", "")) * _SUFFIXES[match[2]]
    if value < 1 or value > MOST or value != int(value):
        raise argparse.ArgumentTypeError(f"expected a whole count from 1 to {MOST:.0e}, got {text!r}")
    return int(value)


def _name(text: str) -> str:
    """A config, split or field name: not empty."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a name, got an empty one")
    return text


def _folder(text: str) -> str:
    """The cache folder: not empty, not a file."""
    if not text.strip() or (os.path.exists(text) and not os.path.isdir(text)):
        raise argparse.ArgumentTypeError(f"{text!r} is not a folder")
    return text


def _parser() -> Parser:
    parser = Parser(prog="attnstruct prepare-corpus", **described("prepare-corpus"))
    parser.add_argument(
        "source",
        nargs="?",
        help="hf://datasets/ORG/NAME[@REVISION][/PATH], a named corpus (--list), or a local folder or file of "
        ".parquet, .jsonl/.json (one object per line) or .txt",
    )
    parser.add_argument("--list", action="store_true", help="list the named corpora and exit")
    parser.add_argument(
        "--tokenizer", help="a hub tokenizer ORG/NAME[@REVISION], a tokenizer.json, or bpe / bpe:N (trained here)"
    )
    parser.add_argument(
        "--config", type=_name, help="the dataset's config (its README's configs, or a top-level folder)"
    )
    parser.add_argument("--split", type=_name, help="the split (default: train)")
    parser.add_argument("--field", type=_name, help="the column or key that holds the text (default: text)")
    parser.add_argument("--max-tokens", type=count, help="keep the first N tokens of the source (e.g. 20M)")
    parser.add_argument("--val-fraction", type=float, default=0.005, help="documents held out (default: 0.005)")
    parser.add_argument("--workers", type=int, default=1, help="tokenising processes (default: 1)")
    parser.add_argument("--preprocessing", default="none", help="a transform of each document (default: none)")
    parser.add_argument(
        "--cache-dir", type=_folder, default=None, help="attnstruct cache (default: $ATTNSTRUCT_CACHE or ~/.cache)"
    )
    parser.add_argument("--steps", type=count, help="a training run's steps, to count its passes over the tokens")
    parser.add_argument("--batch-size", type=count, help="its sequences per step")
    parser.add_argument("--seq-len", type=count, help="its tokens per sequence")
    return parser


def passes_line(steps: int, batch_size: int, seq_len: int, train_tokens: int) -> str:
    """``a run of S steps x B sequences x L tokens = N tokens makes P passes over the T training tokens``."""
    seen = steps * batch_size * seq_len
    passes = seen / train_tokens
    return (
        f"a run of {steps:,} steps x {batch_size:,} sequences x {seq_len:,} tokens = {seen:,} tokens makes "
        f"{passes:,.2f} passes over the {train_tokens:,} training tokens"
    )


def main_prepare(argv: list[str]) -> int:
    """``attnstruct prepare-corpus SOURCE --tokenizer TOK [options]`` or ``--list``; return the exit status."""
    from ..checkpoints.extract.blocks import ExtractionError
    from ..tasks.source_documents import CorpusError
    from ..untrusted import UnsafeName

    try:
        args = _parser().parse_args(argv)
        if args.list:
            from ..tasks.hub_sources import describe_corpora

            print(describe_corpora(args.cache_dir))
            return 0
        if not args.source or not args.tokenizer:
            raise CommandError("give a SOURCE and --tokenizer TOK (or --list)")
        run = (args.steps, args.batch_size, args.seq_len)
        if any(run) and not all(run):
            raise CommandError("give --steps, --batch-size and --seq-len together")
        from ..tasks.prepared_corpus import prepare

        corpus = prepare(
            args.source,
            args.tokenizer,
            config=args.config,
            split=args.split,
            field=args.field,
            max_tokens=args.max_tokens,
            val_fraction=args.val_fraction,
            workers=args.workers,
            preprocessing=args.preprocessing,
            cache=args.cache_dir,
            progress=True,
            log=lambda line: print(line, file=sys.stderr, flush=True),
        )
    except SystemExit as done:  # --help
        return int(done.code or 0)
    except (CommandError, CorpusError, ExtractionError, UnsafeName) as err:  # a hub's error, an unsafe name: one line
        return refuse(PROGRAM, err)
    except OSError as err:  # a cache folder that cannot be made or written, a full disk
        return refuse(PROGRAM, f"{err.strerror or err}: {err.filename}" if err.filename else err)
    print(corpus.describe())
    if all(run):
        print(passes_line(*run, len(corpus.train)))
    return 0
