"""The notebooks as a course hands them out: the course settings injected, prompts read-only, and a note before
every slow cell saying whether an exercise needs it.

:func:`course_notebook` turns a notebook source into its course version (still the solution version: the student
copy is :func:`attnstruct.teaching.exercises.student_version` of it):

1. **Course settings.** The parameters of ``params/course.yaml`` (:data:`COURSE_PROFILE`: every notebook in about a
   minute on one core) go into a code cell tagged ``course-parameters`` right after the ``parameters`` cell, the
   way papermill injects a profile, with a Markdown line above it saying so.
2. **Read-only prompts.** Each exercise's prompt cell gets nbgrader's read-only metadata (``locked``, no grade, no
   solution), so nbgrader locks it and checksums it like the checks.
3. **Which cells to skip.** A code cell tagged ``slow`` in the source (it trains, minutes at the quick profile) gets
   a Markdown note before it: the exercises that read what it computes (:func:`exercises_needing`, a static
   reading of the names each cell binds and loads), or, when none does, that it and the cells drawing its result
   can be skipped by a student who came for the exercises.
4. **Real seeds.** An in-class exercise that reads a notebook's runs must see at least three seeds at the course
   profile (:func:`exercise_seeds`, tested). Where the course profile trains fewer, the exercise reads the quick
   profile's dataset (:data:`QUICK_DATA`): ``make course`` ships it into the work folder (:func:`ship_quick_data`)
   and a cell tagged ``quick-data`` before the exercise's prompt rebinds ``dataset`` to it
   (:func:`attnstruct.teaching.exercise_runs.quick_dataset`, which keeps the notebook's own runs when none was
   shipped, and says which it reads).
"""

from __future__ import annotations

import argparse
import ast
import copy
import sys
from pathlib import Path

from ..notebooks import PipelineError, find_root, list_notebooks, load_profile, read_notebook
from .exercises import ExerciseError, exercises, student_version

COURSE_PROFILE = "course"
SLOW_TAG = "slow"
COURSE_TAG = "course-parameters"
QUICK_TAG = "quick-data"
QUICK_DATA = {"05_training_dynamics": ("05.3",)}  # notebook: its exercises that read the quick profile's dataset
SEED_PARAMETERS = ("seeds", "n_seeds")  # a list of seeds, or their number


def course_parameters(root: Path, name: str) -> dict:
    """The parameters of notebook ``name`` in the course profile (``params/course.yaml``, deltas on the quick
    profile that is each notebook's parameters cell); none in a project without that profile."""
    if not (root / "params" / f"{COURSE_PROFILE}.yaml").is_file():
        return {}
    return dict(load_profile(root, COURSE_PROFILE).get(name, {}))


def _tags(cell) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def bound_names(source: str) -> set[str]:
    """Names a cell binds at its top level: assignments, loops, ``with ... as``, imports, functions, classes."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        else:
            targets = [n for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]
            names |= {n.id for n in targets}
    return names


def loaded_names(source: str) -> set[str]:
    """The names a cell reads from before it: read anywhere in the cell (``ast.Name`` in load context) and bound
    nowhere in it (assignments, loop and comprehension targets, function arguments, imports)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    nodes = list(ast.walk(tree))
    read = {n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    bound = {n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del))}
    bound |= {n.arg for n in nodes if isinstance(n, ast.arg)}
    bound |= {n.name for n in nodes if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    return read - bound - bound_names(source)


def _strip_magics(source: str) -> str:
    return "\n".join(ln for ln in source.splitlines() if not ln.lstrip().startswith(("%", "!")))


def dependent_cells(nb, start: int) -> tuple[list[int], set[str]]:
    """The code cells after cell ``start`` that read, directly or through another such cell, a name that cell
    ``start`` binds; and the names so tainted. A cell that binds a tainted name again, without reading one,
    clears it."""
    tainted = bound_names(_strip_magics(nb.cells[start].source))
    cells = []
    for i in range(start + 1, len(nb.cells)):
        cell = nb.cells[i]
        if cell.cell_type != "code":
            continue
        source = _strip_magics(cell.source)
        if loaded_names(source) & tainted:
            cells.append(i)
            tainted |= bound_names(source)
        else:
            tainted -= bound_names(source)
    return cells, tainted


def exercises_needing(nb, start: int, name: str = "notebook") -> list[str]:
    """The numbers (``"05.3"``) of the exercises whose solution or check cells depend on cell ``start``."""
    dependents = set(dependent_cells(nb, start)[0])
    return [e.number for e in exercises(nb, name) if dependents & {e.cells[1], e.cells[2]}]


def _section_of(nb, index: int) -> str:
    """The last ``## `` heading before cell ``index``."""
    for cell in reversed(nb.cells[:index]):
        if cell.cell_type == "markdown":
            heads = [ln[3:].strip() for ln in cell.source.splitlines() if ln.startswith("## ")]
            if heads:
                return heads[-1]
    return "the introduction"


def slow_cell_note(nb, index: int, name: str = "notebook") -> str:
    """The Markdown note put before slow cell ``index``: run it (and for which exercises), or skip it."""
    needing = exercises_needing(nb, index, name)
    stored = (
        "At the course settings it takes about a minute or less; its result is stored in the work folder and "
        "reused on the next run."
    )
    if needing:
        which = ", ".join(needing)
        return f"**Slow cell, needed by Exercise{'s' if len(needing) > 1 else ''} {which}**: run it. {stored}"
    dependents, _ = dependent_cells(nb, index)
    story = [i for i in dependents if not nb.cells[i].get("metadata", {}).get("nbgrader")]
    sections = list(dict.fromkeys(_section_of(nb, i) for i in story))  # in the order the cells come
    after = (
        f" Skip the {len(story)} later cell{'s' if len(story) != 1 else ''} that use its result too (in "
        + "; ".join(f"*{s}*" for s in sections)
        + ")."
        if story
        else ""
    )
    return f"**Slow cell, no exercise needs it**: skip it if you came for the exercises.{after} {stored}"


def _seed_count(parameters: dict) -> int | None:
    for key in SEED_PARAMETERS:
        if key in parameters:
            value = parameters[key]
            return len(value) if isinstance(value, (list, tuple)) else int(value)
    return None


def exercise_seeds(root: Path, name: str, number: str) -> int | None:
    """How many seeds Exercise ``number`` of notebook ``name`` sees at the course profile: the quick profile's when
    it reads the shipped quick dataset (:data:`QUICK_DATA`), else the course profile's; None when it reads no
    slow cell's runs."""
    from ..notebooks import declared_parameters

    source = root / "notebooks" / f"{name}.py"
    nb = read_notebook(source)
    slow = [i for i, c in enumerate(nb.cells) if SLOW_TAG in _tags(c)]
    if not any(number in exercises_needing(nb, i, name) for i in slow):
        return None
    quick = declared_parameters(nb)
    if number in QUICK_DATA.get(name, ()):
        return _seed_count(quick)
    return _seed_count({**quick, **course_parameters(root, name)})


def ship_quick_data(quick_results: Path, work: Path) -> list[Path]:
    """Copy the quick profile's datasets that in-class exercises read (:data:`QUICK_DATA`) from ``quick_results``
    (``build/quick/results``, written by ``make reproduce``) into ``work/quick/results``; the paths written (none
    when the quick build has not run: the exercises then read the course profile's runs, and say so)."""
    import shutil

    from .exercise_runs import QUICK_FOLDER

    written = []
    for name in QUICK_DATA:
        found = quick_results / f"{name}.nc"
        if found.is_file():
            target = work / QUICK_FOLDER / "results" / found.name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(found, target)
            written.append(target)
    return written


def _quick_cell(name: str, numbers: list[str]):
    from nbformat.v4 import new_code_cell

    which = ", ".join(numbers)
    return new_code_cell(
        f"# Exercise{'s' if len(numbers) > 1 else ''} {which}: the quick profile's stored runs, shipped with the "
        "course (more seeds than the course settings train)\n"
        "from attnstruct.teaching.exercise_runs import quick_dataset\n\n"
        f"dataset = quick_dataset({name!r}, dataset)",
        metadata={"tags": [QUICK_TAG]},
    )


def _injected_cell(parameters: dict):
    from nbformat.v4 import new_code_cell

    lines = ["# Course settings (params/course.yaml), injected over the parameters cell above"]
    lines += [f"{key} = {value!r}" for key, value in parameters.items()]
    return new_code_cell("\n".join(lines), metadata={"tags": [COURSE_TAG]})


def _read_only(cell, grade_id: str) -> None:
    cell.metadata["nbgrader"] = {
        "grade": False,
        "grade_id": grade_id,
        "locked": True,
        "schema_version": 3,
        "solution": False,
    }


def course_notebook(root: Path, source: Path, nb=None):
    """The course version of notebook ``source`` (module docstring); ``nb`` replaces its cells when given."""
    from nbformat.v4 import new_markdown_cell

    name = source.stem
    nb = copy.deepcopy(nb if nb is not None else read_notebook(source))
    found = exercises(nb, name)
    for exercise in found:
        _read_only(nb.cells[exercise.cells[0]], f"{exercise.grade_id}-prompt")
    reading = [e for e in found if e.number in QUICK_DATA.get(name, ())]
    if reading:
        nb.cells.insert(reading[0].cells[0], _quick_cell(name, [e.number for e in reading]))
    notes = [(i, slow_cell_note(nb, i, name)) for i, c in enumerate(nb.cells) if SLOW_TAG in _tags(c)]
    for i, text in reversed(notes):
        nb.cells.insert(i, new_markdown_cell(text, metadata={"tags": ["slow-note"]}))
    parameters = course_parameters(root, name)
    at = next((i for i, c in enumerate(nb.cells) if "parameters" in _tags(c)), None)
    if parameters and at is not None:
        note = new_markdown_cell(
            "**Course settings.** The cell below sets this notebook's parameters to the course profile: every "
            "training run takes seconds, so the numbers show the method rather than the paper's findings, and "
            "differ from the student book's, which shows the quick profile. Delete it to run the quick profile "
            "(minutes).",
            metadata={"tags": ["course-note"]},
        )
        nb.cells[at + 1 : at + 1] = [note, _injected_cell(parameters)]
    return nb


def write_student_notebooks(root: Path, out: Path) -> list[Path]:
    """Write ``out/NN_topic.ipynb``, the student version of the course version of every notebook of ``root`` that
    has exercises (:func:`attnstruct.teaching.course_notebooks.course_notebook`: the course settings, read-only
    prompts, a note before each slow cell saying whether an exercise needs it).

    Every notebook is validated first (:func:`exercises`), so a markup error writes nothing.
    """
    import nbformat

    from ..results import write_atomically

    sources = list_notebooks(root)
    notebooks = [(s, course_notebook(root, s)) for s in sources]
    with_exercises = [(s, nb) for s, nb in notebooks if exercises(nb, s.stem)]
    if not with_exercises:
        raise ExerciseError(f"no notebook under {root / 'notebooks'} has an exercise")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for source, nb in with_exercises:
        target = out / f"{source.stem}.ipynb"
        student = student_version(nb)
        student.metadata.pop("jupytext", None)  # saving it must not write a paired .py
        write_atomically(target, lambda tmp, nb=student: nbformat.write(nb, str(tmp)))
        written.append(target)
    return written


def main(argv: list[str] | None = None) -> int:
    """``python -m attnstruct.teaching.course_notebooks [--out build/exercises]``: write the student notebooks."""
    parser = argparse.ArgumentParser(prog="python -m attnstruct.teaching.course_notebooks", description=main.__doc__)
    parser.add_argument("--out", default=None, help="folder for the student notebooks (default: build/exercises)")
    args = parser.parse_args(argv)
    try:
        root = find_root()
        out = Path(args.out) if args.out else root / "build" / "exercises"
        written = write_student_notebooks(root, out)
    except (ExerciseError, PipelineError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
