"""An nbgrader course folder from the notebooks: ``make course`` (``python -m attnstruct.teaching.course``).

``make course`` first executes every notebook at the course profile into ``build/course/work/``
(:func:`attnstruct.notebooks.reproduce` with ``params/course.yaml``: the solutions pass their checks there, and the
slow cells store their runs), then this module writes the course around it::

    build/course/
        nbgrader_config.py        course id, cell timeout, the work folder and the stored-runs-only switch
        source/NN_topic/NN_topic.ipynb    the course version of each notebook (solutions in)
        release/NN_topic/NN_topic.ipynb   nbgrader's student version: solutions stubbed, checks and prompts
                                          locked with checksums, outputs cleared
        gradebook.db              nbgrader's database, with every assignment and its points
        work/                     the course-profile build: the runs that autograding reads, and in
                                  work/quick/results/ the quick profile's datasets in-class exercises read
                                  (copied from build/quick/results when `make reproduce` has run)
        README.md                 the assignments, their points, and the commands to collect and grade

One assignment per notebook. Autograding re-runs a submitted notebook from the top; the cells tagged ``slow``
(training) then find their runs stored in ``work/`` (the notebooks' ``results_dir`` defaults to the work folder,
:mod:`attnstruct.work`), and ``ATTNSTRUCT_STORED_RUNS_ONLY=1`` in ``nbgrader_config.py`` makes any computation that
is not stored stop with one line instead of training. The cell timeout is four times the slowest cell of the
course build, at least a minute.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from ..notebooks import PATH_PARAMETERS, PipelineError, find_root, list_notebooks
from .course_notebooks import course_notebook, course_parameters, ship_quick_data
from .exercises import ExerciseError, exercises

COURSE_ID = "attnstruct"
MIN_TIMEOUT_S = 60
TIMEOUT_FACTOR = 4
WRITTEN = ("nbgrader_config.py", "source", "release", "gradebook.db", "README.md", ".jupyter", "templates", "mathjax")
FEEDBACK_DEPTH = 3  # feedback/{student_id}/{assignment_id}/NB.html: nbgrader's directory_structure below the course


class CourseError(ValueError):
    """Bad input to the course: a work folder not run at the course profile, a notebook that failed there."""


def _executed(work: Path, name: str, root: Path):
    """The executed course-profile notebook ``name`` of ``work``, checked: it ran to the end with the course
    parameters."""
    import nbformat

    path = work / "notebooks" / f"{name}.ipynb"
    if not path.is_file():
        raise CourseError(f"{path} is missing: run the notebooks at the course profile first (`make course` does)")
    nb = nbformat.read(path, as_version=4)
    meta = nb.metadata.get("papermill", {})
    if meta.get("exception") or meta.get("duration") is None:
        raise CourseError(f"{path} did not run to its end; run it again at the course profile")
    ran = {k: v for k, v in meta.get("parameters", {}).items() if k not in PATH_PARAMETERS}
    wanted = course_parameters(root, name)
    if ran != wanted:
        differ = sorted(k for k in {*ran, *wanted} if ran.get(k) != wanted.get(k))
        raise CourseError(f"{path} was not run at the course profile (parameters {differ} differ)")
    return nb


def released(nb):
    """``nb`` without its jupytext metadata, changed in place: a notebook handed to a student opens as a plain
    notebook, and saving it in a Jupyter with jupytext writes no paired ``.py`` beside it."""
    nb.metadata.pop("jupytext", None)
    return nb


def cell_timeout(executed: dict) -> tuple[int, str]:
    """Seconds per cell for autograding: :data:`TIMEOUT_FACTOR` times the slowest cell of the executed course
    notebooks ``{name: notebook}``, at least :data:`MIN_TIMEOUT_S`; and which cell that was."""
    slowest, where = 0.0, "none"
    for name, nb in executed.items():
        for i, cell in enumerate(nb.cells):
            took = float(cell.get("metadata", {}).get("papermill", {}).get("duration") or 0.0)
            if cell.cell_type == "code" and took > slowest:
                slowest, where = took, f"{name} cell {i}, {took:.1f} s"
    return max(MIN_TIMEOUT_S, math.ceil(TIMEOUT_FACTOR * slowest)), where


def _kernel_spec(folder: Path) -> None:
    """A ``python3`` kernel of this interpreter under ``folder/.jupyter`` (nbgrader_config.py puts it first on
    ``JUPYTER_PATH``), whatever kernels the machine has."""
    spec = folder / ".jupyter" / "kernels" / "python3"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": "Python 3", "language": "python"}))


def config_text(timeout: int, slowest: str, work: str = "work") -> str:
    """``nbgrader_config.py``; ``work`` relative to the course folder (then the folder can move) or absolute."""
    return f'''"""nbgrader configuration of the attnstruct course, written by `make course`."""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
c = get_config()  # noqa: F821 - nbgrader defines it
c.CourseDirectory.course_id = "{COURSE_ID}"
c.CourseDirectory.root = HERE
c.Execute.timeout = {timeout}  # seconds per cell: {TIMEOUT_FACTOR} x the slowest cell of the course build ({slowest})
c.Execute.interrupt_on_timeout = True
c.ClearSolutions.code_stub = {{"python": "# YOUR CODE HERE\\nraise NotImplementedError()"}}
# A solution region at a cell's top level becomes `name = ...  # YOUR CODE HERE` for the names the check reads
from attnstruct.teaching.exercises import assignment_preprocessors  # noqa: E402

c.GenerateAssignment.preprocessors = assignment_preprocessors()
# Feedback pages typeset their maths with the MathJax copied into the course folder, never from a CDN
c.HTMLExporter.template_name = "feedback"
c.HTMLExporter.extra_template_basedirs = [os.path.join(HERE, "templates")]
# The notebooks read and write the course build; a slow cell finds its runs stored there and never trains again.
os.environ["ATTNSTRUCT_WORK"] = os.path.join(HERE, {work!r})
os.environ["ATTNSTRUCT_STORED_RUNS_ONLY"] = "1"
os.environ["JUPYTER_PATH"] = os.pathsep.join(
    p for p in (os.path.join(HERE, ".jupyter"), os.environ.get("JUPYTER_PATH", "")) if p
)
os.environ.setdefault("OMP_NUM_THREADS", "1")
# nbgrader runs the `alembic` command of its own environment; put that environment first, activated or not
os.environ["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
'''


def _nbgrader(args: list[str], course: Path) -> None:
    env = {**os.environ, "ATTNSTRUCT_STORED_RUNS_ONLY": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "nbgrader", *args], cwd=course, capture_output=True, text=True, env=env
    )
    if done.returncode:
        lines = [ln for ln in (done.stderr + done.stdout).splitlines() if "ERROR" in ln or "Error" in ln]
        raise CourseError(f"nbgrader {args[0]} failed: {(lines or ['no message'])[0].strip()}")


def readme_text(assignments: list[tuple[str, list]], timeout: int) -> str:
    rows = ["| assignment | exercises | points |", "|---|---|---|"]
    for name, found in assignments:
        auto, manual = sum(e.auto_points for e in found), sum(e.manual_points for e in found)
        rows.append(f"| `{name}` | {', '.join(e.number for e in found)} | {auto} + {manual} by hand |")
    return "\n".join(
        [
            "# attnstruct course (nbgrader)",
            "",
            "One assignment per notebook, at the course profile (`params/course.yaml`: a minute or so of one core "
            "per notebook).",
            "A check is worth its exercise's difficulty (1 to 5 points), an explanation one point graded by hand "
            "(`nbgrader formgrader`). Autograding re-runs a notebook with a cell timeout of "
            f"{timeout} s; the slow cells read the runs stored in `work/` and never train again.",
            "",
            *rows,
            "",
            "Collect submissions into `submitted/STUDENT/ASSIGNMENT/`, then, from this folder:",
            "",
            "```bash",
            "nbgrader autograde ASSIGNMENT      # scores in gradebook.db",
            "nbgrader generate_feedback ASSIGNMENT",
            "```",
            "",
        ]
    )


def feedback_template(folder: Path) -> Path:
    """Write nbgrader's feedback template into ``folder/templates/feedback``, its MathJax macro pointed at a copy of
    MathJax it puts in ``folder/mathjax`` (:func:`attnstruct.report.pages.copy_mathjax`) instead of nbconvert's
    default CDN, relative to a feedback page :data:`FEEDBACK_DEPTH` folders below the course; the template folder."""
    import nbgrader

    from ..report import pages

    source = Path(nbgrader.__file__).parent / "server_extensions" / "formgrader" / "templates" / "feedback"
    text = (source / "index.html.j2").read_text(encoding="utf-8")
    if text.count("{{ mathjax() }}") != 1:
        raise CourseError(f"nbgrader's feedback template ({source}) no longer loads MathJax as this course expects")
    local = "/".join([".."] * FEEDBACK_DEPTH + [pages.mathjax_url()])
    target = Path(folder) / "templates" / "feedback"
    target.mkdir(parents=True, exist_ok=True)
    (target / "index.html.j2").write_text(text.replace("{{ mathjax() }}", f'{{{{ mathjax("{local}") }}}}'), "utf-8")
    shutil.copy2(source / "conf.json", target / "conf.json")
    pages.copy_mathjax(folder)
    return target


def build_course(root: Path, work: Path, out: Path, *, only: list[str] | None = None, log=print) -> Path:
    """Write the course folder ``out`` (module docstring) around the course-profile build ``work``; its path.

    Every input is checked before anything is written; the pieces are made in a staging folder and moved into
    ``out`` at the end. Raises :class:`CourseError` (one line).
    """
    import nbformat

    sources = [s for s in list_notebooks(root) if only is None or s.stem in only or s.stem[:2] in only]
    chosen = []
    for source in sources:
        try:
            found = exercises(course_notebook(root, source), source.stem)
        except ExerciseError as err:
            raise CourseError(str(err)) from None
        if found:
            chosen.append((source, found))
    if not chosen:
        raise CourseError("no notebook with exercises was chosen")
    executed = {s.stem: _executed(work, s.stem, root) for s, _ in chosen}
    timeout, slowest = cell_timeout(executed)
    shipped = ship_quick_data(root / "build" / "quick" / "results", work)
    log(f"quick-profile runs for the in-class exercises: {', '.join(p.name for p in shipped) or 'none stored'}")
    out.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".course.", dir=out))
    try:
        for source, _ in chosen:
            target = staging / "source" / source.stem / f"{source.stem}.ipynb"
            target.parent.mkdir(parents=True)
            nbformat.write(released(course_notebook(root, source)), target)
        _kernel_spec(staging)
        feedback_template(staging)
        (staging / "nbgrader_config.py").write_text(
            config_text(timeout, slowest, os.path.relpath(work.resolve(), out.resolve())), encoding="utf-8"
        )
        (staging / "README.md").write_text(readme_text([(s.stem, f) for s, f in chosen], timeout), encoding="utf-8")
        for source, _ in chosen:
            log(f"nbgrader generate_assignment {source.stem}")
            _nbgrader(["generate_assignment", source.stem, "--force"], staging)
        for name in WRITTEN:
            if (out / name).is_dir():
                shutil.rmtree(out / name)
            elif (out / name).exists():
                (out / name).unlink()
            os.replace(staging / name, out / name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    log(f"course: {len(chosen)} assignments, cell timeout {timeout} s -> {out}")
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m attnstruct.teaching.course [--out build/course] [--work OUT/work]``: exit 0, or 2 with one
    line on stderr."""
    parser = argparse.ArgumentParser(prog="python -m attnstruct.teaching.course", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="course folder (default: build/course)")
    parser.add_argument("--work", type=Path, default=None, help="the course-profile build (default: OUT/work)")
    args = parser.parse_args(argv)
    try:
        root = find_root()
        out = (args.out or root / "build" / "course").resolve()
        build_course(root, (args.work or out / "work").resolve(), out)
    except (CourseError, PipelineError) as err:
        print(f"attnstruct course: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
