"""``attnstruct revisions ORG/NAME [--match REGEX] [--out FILE.csv]``: a repository's checkpoint series as sweep lines.

One line ``ORG/NAME@REV`` per branch and tag, in training order
(:func:`attnstruct.checkpoints.revisions.list_revisions`), on stdout, so that ``attnstruct revisions X > list.txt``
makes a list for ``attnstruct sweep list.txt``; ``--out`` also writes the table (model, revision, kind, commit,
step, tokens, phase) as CSV, which ``attnstruct sweep`` reads as well. A malformed id, a bad ``--match``, no
revision matching, or a hub that cannot say (offline, not found, gated): :class:`CommandError`, one line, exit 2.
"""

from __future__ import annotations

import sys
from pathlib import Path

from .errors import CommandError


def revisions(args) -> int:
    """Print the sweep lines of ``args.repo``'s revisions; with ``--out``, write their table."""
    if args.out and Path(args.out).suffix != ".csv":
        raise CommandError(f"--out must end in .csv, got {args.out}")
    from ..checkpoints.extract import ExtractionError
    from ..checkpoints.revisions import list_revisions
    from ..results import write_atomically

    try:
        table = list_revisions(args.repo, match=args.match)
    except (ExtractionError, ValueError) as err:
        raise CommandError(str(err)) from None
    if table.empty:
        raise CommandError(f"no branch or tag of {args.repo} matches {args.match!r}")
    print("\n".join(table["model"]))
    if args.out:
        path = write_atomically(args.out, lambda tmp: table.to_csv(tmp, index=False))
        print(f"wrote {path}", file=sys.stderr)
    return 0
