"""``attnstruct reproduce``, ``attnstruct notebook`` and ``attnstruct list``: the notebooks through the papermill
runner (:mod:`attnstruct.notebooks`)."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from ..notebooks import (
    PipelineError,
    declared_parameters,
    find_root,
    list_notebooks,
    load_profile,
    read_notebook,
    reproduce,
    resolve_notebook,
    run_notebook,
)


def parameter(pair: list[str]) -> tuple[str, object]:
    """``(name, value)`` of ``-p NAME VALUE``, the value read as YAML (``3``, ``0.5``, ``[64, 128]``)."""
    name, raw = pair
    try:
        return name, yaml.safe_load(raw)
    except yaml.YAMLError:
        raise PipelineError(
            f"parameter {name}: cannot parse value {raw!r} (YAML syntax, e.g. 3, 0.5, [64, 128])"
        ) from None


def _build_dir(args, root: Path) -> Path:
    return Path(args.build_dir) if args.build_dir else root / "build" / Path(args.profile).stem


def list_parameters(args) -> int:
    """Print every notebook with the parameters of its parameters cell."""
    for path in list_notebooks(find_root()):
        print(f"{path.stem}: {', '.join(declared_parameters(read_notebook(path)))}")
    return 0


def run_all(args) -> int:
    """Run every notebook (or ``--only`` some) with the profile, in order."""
    root = find_root()
    build_dir = _build_dir(args, root)
    results = reproduce(root, args.profile, build_dir, only=args.only, progress=sys.stderr.isatty())
    print(f"{len(results)} notebooks ran with profile {args.profile!r}; outputs in {build_dir}")
    return 0


def run_one(args) -> int:
    """Run one notebook with the profile and the ``-p NAME VALUE`` overrides."""
    root = find_root()
    build_dir = _build_dir(args, root)
    source = resolve_notebook(root, args.name)
    params = dict(load_profile(root, args.profile).get(source.stem, {}))
    params.update(parameter(p) for p in args.param)
    print(f"[1/1] {source.stem} ({args.profile}) ...", flush=True)
    result = run_notebook(
        root, source, params, build_dir, profile=Path(args.profile).stem, progress=sys.stderr.isatty()
    )
    print(f"[1/1] {source.stem} done in {result.seconds:.1f} s -> {result.html}")
    return 0
