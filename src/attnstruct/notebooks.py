"""Run the numbered notebooks with papermill and a parameter profile; render them to HTML.

Layout of a run (``build_dir``, default ``build/<profile>``)::

    notebooks/NN_topic.ipynb   executed notebooks (papermill records the parameters in their metadata)
    html/NN_topic.html         static renders
    results/*.nc               datasets written by the notebooks
    figures/*.png, *.pdf       figures written by the notebooks

The ``.py`` files under ``notebooks/`` (jupytext percent format) are the only sources; they are read with
jupytext and handed to papermill as in-memory notebooks. Profiles are ``params/<profile>.yaml`` with one
mapping of parameter overrides per notebook name.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import json
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from . import interrupts

NOTEBOOK_GLOB = "[0-9][0-9]_*.py"
PATH_PARAMETERS = ("results_dir", "figures_dir")  # injected as build_dir/results, build_dir/figures
KERNEL_NAME = "python3"
INSTALLED_CHECKOUT = Path(__file__).resolve().parents[2]  # the checkout of an editable install (src/ layout)


class PipelineError(Exception):
    """Bad input to the pipeline: unknown notebook, profile or parameter."""


class NotebookFailed(Exception):
    """A notebook raised; carries the notebook name, the failing cell and the error line."""

    def __init__(self, name: str, cell: str, error: str, executed: Path):
        self.name, self.cell, self.error, self.executed = name, cell, error, executed
        super().__init__(f"notebook {name} failed at {cell}: {error} (executed notebook: {executed})")


@dataclass(frozen=True)
class RunResult:
    name: str
    executed: Path
    html: Path
    seconds: float


def find_root(start: str | os.PathLike | None = None) -> Path:
    """The nearest folder at or above ``start`` (default: cwd) that holds ``notebooks/`` and ``params/``."""
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if is_project_root(folder):
            return folder
    raise PipelineError(f"no project root (a folder with notebooks/ and params/) at or above {here}")


def project_root(start: str | os.PathLike | None = None) -> Path:
    """:func:`find_root` from ``start`` (default: cwd), else the checkout this package is installed from (an
    editable install): a notebook opened or graded outside the repository (a course folder, nbgrader's
    ``autograded/``) still finds its sources."""
    try:
        return find_root(start)
    except PipelineError:
        if is_project_root(INSTALLED_CHECKOUT):
            return INSTALLED_CHECKOUT
        raise


def is_project_root(folder: str | os.PathLike) -> bool:
    """Whether ``folder`` holds ``notebooks/`` and ``params/``: the root of a checkout (or a copy of its sources)."""
    return (Path(folder) / "notebooks").is_dir() and (Path(folder) / "params").is_dir()


def list_notebooks(root: Path) -> list[Path]:
    """The numbered notebook sources ``notebooks/NN_topic.py`` in reading order."""
    return sorted((root / "notebooks").glob(NOTEBOOK_GLOB))


def resolve_notebook(root: Path, name: str) -> Path:
    """Find a notebook by stem (``02_scores``), number (``02``) or path."""
    candidates = list_notebooks(root)
    stem = Path(name).stem
    matches = [p for p in candidates if p.stem == stem or p.stem.split("_", 1)[0] == stem]
    if len(matches) != 1:
        known = ", ".join(p.stem for p in candidates)
        raise PipelineError(f"unknown notebook {name!r}; known notebooks: {known}")
    return matches[0]


def load_profile(root: Path, profile: str, _seen: tuple[str, ...] = ()) -> dict[str, dict[str, Any]]:
    """Read ``params/<profile>.yaml`` (or a YAML path): ``{notebook stem: {parameter: value}}``.

    A profile may start from another with a top-level ``extends: <profile>``: its notebooks' parameters are
    then the other profile's, updated with its own (``smoke`` is ``paper`` with a few steps).
    """
    path = Path(profile) if profile.endswith((".yaml", ".yml")) else root / "params" / f"{profile}.yaml"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in (root / "params").glob("*.yaml")))
        raise PipelineError(f"no parameter profile {profile!r} (looked for {path}); known profiles: {known}")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        raise PipelineError(f"profile {path} is not valid YAML: {str(err).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise PipelineError(f"profile {path} must map notebook names to mappings of parameters")
    base: dict[str, dict[str, Any]] = {}
    if "extends" in data:
        parent = data.pop("extends")
        if not isinstance(parent, str) or parent in _seen + (path.stem,):
            raise PipelineError(f"profile {path}: extends must name another profile, got {parent!r}")
        base = load_profile(root, parent, _seen + (path.stem,))
    stems = {p.stem for p in list_notebooks(root)}
    if not all(isinstance(v, dict) for v in data.values()):
        raise PipelineError(f"profile {path} must map notebook names to mappings of parameters")
    unknown = sorted(set(data) - stems)
    if unknown:
        raise PipelineError(f"profile {path} names unknown notebooks {unknown}; known: {sorted(stems)}")
    return {name: {**base.get(name, {}), **data.get(name, {})} for name in {**base, **data}}


def read_notebook(path: Path):
    """The notebook as an ``nbformat`` node, read from its jupytext percent source."""
    import jupytext

    return jupytext.read(path)


RUN_SETTINGS_TAGS = ("text-training", "vision-training")  # a parameters cell's second tag: the runs it trains


def run_settings(tag: str) -> dict[str, Any]:
    """The run settings a notebook whose parameters cell carries ``tag`` (one of :data:`RUN_SETTINGS_TAGS`) takes
    beside its own: every field of the tag's configuration (:class:`attnstruct.tasks.text_config.TextConfig`,
    :class:`attnstruct.tasks.vision_config.VisionConfig`) with its default, but those that tell runs apart
    (``RUN_KEYS``) or are set run by run (``PER_RUN``). The configuration is their one declaration: its defaults
    are the quick profile, and the cell sets only where the notebook departs from them."""
    from .tasks import text_config, vision_config

    config_class = {"text-training": text_config.TextConfig, "vision-training": vision_config.VisionConfig}[tag]
    per_run = {*config_class.RUN_KEYS, *config_class.PER_RUN}
    return {f.name: f.default for f in dataclasses.fields(config_class) if f.name not in per_run}


def parameters_cell(nb):
    """The one cell tagged ``parameters``."""
    cells = [c for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    if len(cells) != 1:
        raise PipelineError(f"expected exactly one cell tagged 'parameters', found {len(cells)}")
    return cells[0]


def declared_parameters(nb) -> dict[str, Any]:
    """Names and default values assigned in the cell tagged ``parameters`` (literals only), followed by the run
    settings its second tag names (:func:`run_settings`) that the cell does not assign."""
    cell = parameters_cell(nb)
    params = {}
    for node in ast.parse(cell.source).body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    params[target.id] = ast.literal_eval(node.value)
    return params | {name: value for name, value in _settings_of(cell).items() if name not in params}


def _settings_of(cell) -> dict[str, Any]:
    """The run settings the parameters ``cell``'s tags name, with their defaults."""
    tags = [tag for tag in cell.metadata.get("tags", []) if tag in RUN_SETTINGS_TAGS]
    return {name: value for tag in tags for name, value in run_settings(tag).items()}


_SCALARS = (  # a parameter's kind by its default: the type, the value it takes, a list's items (bool before int)
    (bool, "true or false", "booleans"),
    (int, "an integer", "integers"),
    (float, "a finite number", "finite numbers"),
    (str, "a string", "strings"),
)


def _scalar(default: Any) -> tuple[type, str, str] | None:
    return next((row for row in _SCALARS if isinstance(default, row[0])), None)


def _item(default: list | tuple) -> Any:
    """The default item of a list whose items are all of one kind, else None."""
    kinds = {_scalar(item) for item in default}
    return default[0] if len(kinds) == 1 and None not in kinds else None


def _kind_of(default: Any) -> str:
    """What a value must be to replace ``default`` (a parameters cell's literal)."""
    if _scalar(default):
        return _scalar(default)[1]
    if isinstance(default, (list, tuple)):
        item = _item(default)
        return f"a list of {_scalar(item)[2]}" if item is not None else "a list"
    if isinstance(default, dict):
        return "a mapping"
    return "None or a single value (not a list or mapping)"


def _fits(value: Any, default: Any) -> bool:
    if isinstance(default, bool):
        return isinstance(value, bool)
    if isinstance(default, int):
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(default, float):
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if isinstance(default, str):
        return isinstance(value, str)
    if isinstance(default, (list, tuple)):
        item = _item(default)
        return isinstance(value, (list, tuple)) and (item is None or all(_fits(v, item) for v in value))
    if isinstance(default, dict):
        return isinstance(value, dict)
    return not isinstance(value, (list, tuple, dict))


def check_parameters(name: str, parameters: dict[str, Any], declared: dict[str, Any]) -> None:
    """Raise PipelineError, one line, for a parameter that notebook ``name`` does not declare (``declared``: its
    parameters cell) or whose value is not of its default's kind (:func:`check_parameter_types`)."""
    unknown = sorted(set(parameters) - set(declared))
    if unknown:
        raise PipelineError(f"notebook {name} has no parameters {unknown}; it has {sorted(declared)}")
    check_parameter_types(name, parameters, declared)


def check_parameter_types(name: str, parameters: dict[str, Any], declared: dict[str, Any]) -> None:
    """Raise PipelineError, naming the notebook, the parameter and what it must be, for the first value of
    ``parameters`` whose kind is not its default's in the parameters cell ``declared``: an integer for an integer,
    a finite number (an integer too) for a float, a string for a string, true or false for a boolean, a list of the
    default's items for a list; a parameter whose default is None takes None or a single value, not a list or
    mapping."""
    for key, value in parameters.items():
        default = declared.get(key)
        if key in declared and not _fits(value, default):
            kind = _kind_of(default)
            raise PipelineError(f"notebook {name}: parameter {key} must be {kind} (default {default!r}), got {value!r}")


def notebook_parameters(name: str, namespace: dict[str, Any], root: str | os.PathLike | None = None) -> dict:
    """The values in ``namespace`` (a notebook's ``globals()``) of every parameter that notebook ``name``
    declares (:func:`declared_parameters`), output folders left out: what its dataset records as ``parameters``.
    A run setting its cell does not assign and no profile set takes its default (:func:`run_settings`).

    The names come from the notebook's source, so a parameter added to the cell is recorded without a second
    list to keep in step.
    """
    source = resolve_notebook(project_root(root), name)
    nb = read_notebook(source)
    settings = _settings_of(parameters_cell(nb))
    declared = [n for n in declared_parameters(nb) if n not in PATH_PARAMETERS]
    missing = [n for n in declared if n not in namespace and n not in settings]
    if missing:
        raise PipelineError(f"notebook {source.stem}: parameters {missing} are not defined in this namespace")
    return {n: namespace[n] if n in namespace else settings[n] for n in declared}


def _kernel_environment(build_dir: Path) -> None:
    """Point the ``python3`` kernel at this interpreter, whatever kernelspecs the machine has (papermill#761)."""
    spec_dir = build_dir / ".jupyter" / "kernels" / KERNEL_NAME
    spec_dir.mkdir(parents=True, exist_ok=True)
    spec = {
        "argv": [
            sys.executable,
            "-m",
            "ipykernel_launcher",
            "-f",
            "{connection_file}",
            "--IPKernelApp.log_level=CRITICAL",  # jupyter_client interrupts a kernel before shutting it down, which
            # it may log as an error ("KeyboardInterrupt caught in kernel."), a stray line on the command's stderr
        ],
        "display_name": "Python 3 (attnstruct)",
        "language": "python",
    }
    from .results import write_atomically

    write_atomically(spec_dir / "kernel.json", lambda tmp: Path(tmp).write_text(json.dumps(spec, indent=1)))
    jupyter_path = str(build_dir / ".jupyter")
    existing = os.environ.get("JUPYTER_PATH", "")
    if jupyter_path not in existing.split(os.pathsep):
        os.environ["JUPYTER_PATH"] = os.pathsep.join(p for p in (jupyter_path, existing) if p)


@contextlib.contextmanager
def _no_progress_bars_in_outputs():
    """Run the kernel with ``TQDM_DISABLE=1``: a stored notebook holds no progress-bar widgets, which a static
    page (HTML, the course book) could not draw offline. Interactive kernels (``make lab``) keep their bars."""
    before = os.environ.get("TQDM_DISABLE")
    os.environ["TQDM_DISABLE"] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TQDM_DISABLE", None)
        else:
            os.environ["TQDM_DISABLE"] = before


def _portable(executed: Path, build_dir: Path, root: Path) -> None:
    """Rewrite the executed notebook so that its text names no folder of this machine: paths in the build
    relative to it, the checkout as ``<checkout>``, the home folder as ``~``
    (:func:`attnstruct.report.pages.portable_notebook`); the HTML and the books show it as it is then."""
    import nbformat

    from .report import pages
    from .results import write_atomically

    nb = pages.portable_notebook(nbformat.read(executed, as_version=4), pages.machine_folders(build_dir, root))
    write_atomically(executed, lambda tmp: nbformat.write(nb, str(tmp)))


def _render_html(executed: Path, html: Path) -> None:
    """The executed notebook as a page that renders offline: MathJax copied beside it
    (:func:`attnstruct.report.pages.html_exporter`)."""
    import nbformat

    from .report import pages
    from .results import write_atomically

    body, _ = pages.html_exporter().from_notebook_node(nbformat.read(executed, as_version=4))
    html.parent.mkdir(parents=True, exist_ok=True)
    pages.copy_mathjax(html.parent)
    write_atomically(html, lambda tmp: Path(tmp).write_text(body, encoding="utf-8"))


def run_notebook(
    root: Path,
    source: Path,
    parameters: dict[str, Any],
    build_dir: Path,
    *,
    profile: str | None = None,
    progress: bool = False,
    notebook=None,
    allow_errors: bool = False,
) -> RunResult:
    """Execute one notebook with ``parameters`` (checked against its parameters cell) and render it.

    The output paths (``results_dir``, ``figures_dir``) and the ``profile`` name are injected when the
    notebook declares them and ``parameters`` does not set them. ``notebook`` replaces the source's cells (a
    student version, :func:`attnstruct.teaching.exercises.student_version`); with ``allow_errors`` every cell runs
    whatever the ones before raised, the errors stay in the executed notebook and no HTML is rendered.
    """
    from papermill.exceptions import PapermillExecutionError

    from .notebook_execution import execute_whole

    nb = read_notebook(source) if notebook is None else notebook
    declared = declared_parameters(nb)
    check_parameters(source.stem, parameters, declared)
    build_dir = build_dir.resolve()
    injected = {k: str(build_dir / k.removesuffix("_dir")) for k in PATH_PARAMETERS if k in declared}
    if profile is not None and "profile" in declared:
        injected["profile"] = profile
    injected.update(parameters)
    executed = build_dir / "notebooks" / f"{source.stem}.ipynb"
    html = build_dir / "html" / f"{source.stem}.html"
    executed.parent.mkdir(parents=True, exist_ok=True)
    _kernel_environment(build_dir)
    start = time.perf_counter()
    try:
        with _no_progress_bars_in_outputs():
            execute_whole(
                nb,
                executed,
                kernel_name=KERNEL_NAME,
                finish=lambda tmp: _portable(tmp, build_dir, root),
                parameters=injected,
                cwd=str(root),
                progress_bar=progress,
                log_output=False,
                allow_errors=allow_errors,
            )
    except PapermillExecutionError as err:
        if allow_errors:
            return RunResult(source.stem, executed, html, time.perf_counter() - start)
        cell = f"cell {err.cell_index} (execution count {err.exec_count})"
        error = " ".join(f"{err.ename}: {err.evalue}".split())  # one line, whatever the exception message holds
        raise NotebookFailed(source.stem, cell, error, executed) from None
    except KeyboardInterrupt:  # Ctrl-C: the kernel shut down, no executed notebook written (notebook_execution)
        raise interrupts.Interrupted(f"in {source.stem}", "run the same command to run it again") from None
    seconds = time.perf_counter() - start
    _render_html(executed, html)
    return RunResult(source.stem, executed, html, seconds)


def reproduce(
    root: Path, profile: str, build_dir: Path, *, only: list[str] | None = None, progress: bool = False, log=print
) -> list[RunResult]:
    """Run every notebook (or those in ``only``) in order with ``profile``; stop at the first failure. Ctrl-C
    (under :func:`attnstruct.interrupts.handled`) stops the running notebook's kernel, writes nothing of that notebook
    and raises :class:`~attnstruct.interrupts.Interrupted` naming it, how many notebooks were done and how to run the
    rest (a rerun runs every notebook again; ``--only`` the ones not done)."""
    overrides = load_profile(root, profile)
    sources = [resolve_notebook(root, n) for n in only] if only else list_notebooks(root)
    for source in sources:  # every notebook's parameters, before the first one runs
        check_parameters(source.stem, overrides.get(source.stem, {}), declared_parameters(read_notebook(source)))
    results = []
    for i, source in enumerate(sources, 1):
        stopped = interrupts.Interrupted(
            f"after {i - 1} of {len(sources)} notebooks",
            f"run the same command to run all {len(sources)} again, or with --only "
            + " ".join(s.stem for s in sources[i - 1 :])
            + " to run the rest",
        )
        if interrupts.requested():  # Ctrl-C while the notebook before was rendered
            raise stopped
        log(f"[{i}/{len(sources)}] {source.stem} ({profile}) ...", flush=True)
        try:
            result = run_notebook(
                root, source, overrides.get(source.stem, {}), build_dir, profile=Path(profile).stem, progress=progress
            )
        except KeyboardInterrupt:  # the notebooks before it stay whole, executed and rendered
            stopped.progress = f"in {source.stem}, {stopped.progress}"
            raise stopped from None
        log(f"[{i}/{len(sources)}] {source.stem} done in {result.seconds:.1f} s -> {result.html}", flush=True)
        results.append(result)
    return results
