"""``attnstruct score`` (every attention block of one checkpoint) and ``attnstruct sweep`` (many models, resumably,
in shards if need be, and the shards' folders merged).

Bad input, an unreadable or unsupported checkpoint, or a device that is not there: :class:`CommandError` with the
error's one line (an :class:`~attnstruct.checkpoints.extract.ExtractionError` says its kind first). An output that
cannot be written is :class:`attnstruct.results.OutputError`, refused in one line by :func:`attnstruct.cli.main`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from .errors import PROGRAM, CommandError

SWEEP_FAILED = 1  # a sweep that scored no model, or (--strict) in which any model failed


def score(args) -> int:
    """Print the table of ``args.source``, one row per block (or head); with ``--out``, also write it: ``.csv`` the
    long table of :attr:`attnstruct.ModelScores.table`, ``.nc`` the per-model dataset the sweep writes (one schema,
    :data:`attnstruct.checkpoints.schema.SCHEMA`). With ``--refresh``, a hub model named by a branch or tag is read
    at the commit it names now (:func:`attnstruct.checkpoints.hub.refresh_pin`), not at the one pinned by an earlier
    run."""
    from ..checkpoints.extract import ExtractionError
    from ..checkpoints.model_scores import score as score_of
    from ..checkpoints.tables import HEAD_MATRIX, LAYER_MATRIX
    from ..devices import DeviceError, resolve_device
    from ..results import check_writable, provenance_attrs

    if args.out is not None:
        if Path(args.out).suffix not in (".csv", ".nc"):
            raise CommandError(f"--out must end in .csv or .nc, got {args.out}")
        check_writable(args.out)  # a folder, a read-only disk: refused before the scoring, not after
    try:
        resolve_device(args.device)
        if args.refresh:
            _refresh(args.source)
        scores = score_of(
            args.source,
            per_head=args.per_head,
            name=args.source,
            num_std=args.num_std,
            n_heads=args.heads,
            precision=args.precision,
            device=args.device,
            progress=sys.stderr.isatty(),
        )
    except (ExtractionError, DeviceError) as err:
        raise CommandError(str(err)) from None
    except OSError as err:  # the disk failed under a reader (an I/O error, a file that went away mid-read)
        reason = os.strerror(err.errno) if err.errno else " ".join(str(err).split())
        raise CommandError(f"cannot read {err.filename or args.source}: {reason}") from None
    table = scores.table
    shown = table[table["head"].notna()] if args.per_head else table
    columns = ["stack", "layer"] + (["head"] if args.per_head else []) + ["symmetry", "directionality"]
    print(shown[columns].to_string(index=False, float_format=lambda v: f"{v:+.4f}"))
    if args.out is not None:
        attrs = provenance_attrs(
            parameters={"model": args.source, "per_head": args.per_head, "num_std": args.num_std},
            scored_matrix=LAYER_MATRIX
            + (f"; {HEAD_MATRIX}, in head_symmetry/head_directionality" if args.per_head else ""),
            num_std=args.num_std,
            precision=args.precision,
        )
        path = scores.save(args.out, attrs=attrs)
        print(f"wrote {path}", file=sys.stderr)
    return 0


def _refresh(source: str) -> None:
    """Pin the commit that ``source``'s branch or tag names now, when ``source`` is a hub model."""
    from ..checkpoints.hub import HubSettings, parse_hub_id, refresh_pin
    from ..checkpoints.resolve import names_hub_model

    if names_hub_model(source):
        refresh_pin(HubSettings.from_env(), *parse_hub_id(source))


def sweep(args) -> int:
    """Score every model of ``args.list`` (with ``--shard K/N``, shard K of it) into ``args.out``
    (:func:`attnstruct.checkpoints.sweep.run_sweep`); one model's failure is listed in ``failures.csv`` with its
    kind, not fatal, but an invalid token stops the sweep in one line. A sweep that scored no model exits 1 (one
    line), and with ``--strict`` one in which any model failed. Models holding byte-identical weights are
    named, one line per group, before the last line. With ``--combine DIR ...``, merge those sweeps' folders into
    ``args.out`` instead (:func:`attnstruct.checkpoints.sweep_merge.combine_parts`)."""
    if args.combine is not None:
        return _combine(args)
    if args.list is None:
        raise CommandError("name the model LIST to sweep, or --combine DIR [DIR ...] to merge sweeps")
    from ..checkpoints.sweep import SweepError, read_model_list, run_sweep
    from ..devices import DeviceError

    try:
        result = run_sweep(
            read_model_list(args.list),
            args.out,
            device=args.device,
            per_head=args.per_head,
            workers=args.workers,
            num_std=args.num_std,
            precision=args.precision,
            progress=sys.stderr.isatty(),
            shard=args.shard,
            refresh=args.refresh,
            report=lambda plan: print(f"attnstruct: {plan}", flush=True),
        )
    except (SweepError, DeviceError, ValueError) as err:  # an ExtractionError too: an invalid token
        raise CommandError(str(err)) from None
    if result.failures and not result.scored and not result.skipped:
        print(
            f"{PROGRAM}: error: no model scored; all {len(result.failures)} failed "
            f"(listed in {Path(args.out) / 'failures.csv'})",
            file=sys.stderr,
        )
        return SWEEP_FAILED
    for line in result.duplicates:
        print(f"attnstruct: {line}", file=sys.stderr)
    print(
        f"{len(result.scored)} scored, {len(result.skipped)} done before, {len(result.failures)} failed "
        f"(listed in {Path(args.out) / 'failures.csv'}); combined: {result.path}; {result.retries}; "
        f"{result.calls}",
        file=sys.stderr,
    )
    if args.strict and result.failures:
        print(f"{PROGRAM}: error: {len(result.failures)} models failed (--strict)", file=sys.stderr)
        return SWEEP_FAILED
    return 0


def _combine(args) -> int:
    """``attnstruct sweep --combine DIR ... --out DIR``: the parts' models in one ``sweep.nc``."""
    if args.list is not None:
        raise CommandError(f"--combine merges sweep folders and takes no model list (got {args.list})")
    if args.shard is not None:
        raise CommandError("--combine merges the shards; give --shard only when scoring one")
    from ..checkpoints.sweep import SweepError
    from ..checkpoints.sweep_merge import combine_parts

    try:
        result = combine_parts(args.combine, args.out)
    except (SweepError, OSError, ValueError) as err:
        raise CommandError(str(err)) from None
    for line in result.duplicates:
        print(f"attnstruct: {line}", file=sys.stderr)
    print(
        f"{len(result.scored)} models from {len(args.combine)} parts, {len(result.failures)} failed "
        f"(listed in {Path(args.out) / 'failures.csv'}); combined: {result.path}",
        file=sys.stderr,
    )
    return 0
