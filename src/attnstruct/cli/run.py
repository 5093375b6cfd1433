"""``attnstruct reproduce``, ``attnstruct notebook`` and ``attnstruct list``: the notebooks through the papermill
runner (:mod:`attnstruct.notebooks`).

The project (the folder holding ``notebooks/`` and ``params/``) is ``--root DIR`` when given, else the nearest one
at or above the working folder, else the checkout attnstruct is installed from (an editable install), so the
commands work from any folder; outside all three they refuse with one line."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from ..notebooks import (
    PipelineError,
    declared_parameters,
    is_project_root,
    list_notebooks,
    load_profile,
    project_root,
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


def command_root(given: str | None) -> Path:
    """The project the command works on: ``given`` (``--root``) if it is one, else :func:`project_root` from the
    working folder. Raise :class:`PipelineError` (one line) when ``given`` is not a project or there is none."""
    if given is not None:
        if not is_project_root(given):
            raise PipelineError(f"--root {given}: no notebooks/ and params/ folders there (not an attnstruct checkout)")
        return Path(given).resolve()
    try:
        return project_root()
    except PipelineError:
        raise PipelineError(
            f"no project root: {Path.cwd()} is not inside an attnstruct checkout (a folder with notebooks/ and "
            "params/) and attnstruct is not installed from one (pip install -e); give --root DIR"
        ) from None


def _build_dir(args, root: Path) -> Path:
    return Path(args.build_dir) if args.build_dir else root / "build" / Path(args.profile).stem


def list_parameters(args) -> int:
    """Print every notebook with the parameters of its parameters cell."""
    for path in list_notebooks(command_root(args.root)):
        print(f"{path.stem}: {', '.join(declared_parameters(read_notebook(path)))}")
    return 0


def run_all(args) -> int:
    """Run every notebook (or ``--only`` some) with the profile, in order."""
    root = command_root(args.root)
    build_dir = _build_dir(args, root)
    results = reproduce(root, args.profile, build_dir, only=args.only, progress=sys.stderr.isatty())
    print(f"{len(results)} notebooks ran with profile {args.profile!r}; outputs in {build_dir}")
    return 0


def run_one(args) -> int:
    """Run one notebook with the profile and the ``-p NAME VALUE`` overrides."""
    root = command_root(args.root)
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
