"""The lecture path's teaching plan and the numbers its answers quote, filled into ``book/lecture-path.md``.

The plan is ``book/lecture-plan.yaml``: per session, steps of class time (minutes, a mode, a notebook section or
exercise, what to do). :func:`plan_table` renders a session as a table with the clock, a link to each section of
the notebook's page (the anchor Sphinx gives the heading, :func:`anchor`), the break, the exercise slots and what to
cut when time runs short; :func:`check_plan` refuses a step naming a section or exercise the notebook does not
have, and a session longer than its minutes.

The answers to the students' questions quote the build's own datasets through the package's sentences
(:data:`FACTS`): ``{{fact:NAME}}`` in the template, never a typed number.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import yaml

from ..notebooks import list_notebooks, read_notebook
from .book_contents import BookError, cell, exercises

MODES = {"show": "show the stored output", "live": "run live", "exercise": "exercise", "discuss": "discuss",
         "break": "break"}  # fmt: skip


def anchor(heading: str) -> str:
    """The HTML id Sphinx gives a section heading (docutils' ``make_id``: lower case, dashes, no leading digits)."""
    from docutils.nodes import make_id

    return make_id(heading)


def load_plan(path: Path) -> list[dict]:
    """The sessions of ``path`` (``book/lecture-plan.yaml``)."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as err:
        raise BookError(f"lecture plan {path} cannot be read: {type(err).__name__}") from None
    sessions = data.get("sessions")
    if not isinstance(sessions, list) or not sessions:
        raise BookError(f"lecture plan {path} has no sessions")
    return sessions


def notebook_sections(root: Path) -> dict[str, set[str]]:
    """Per notebook source: its ``## `` headings and its exercises (``Exercise NN.k``)."""
    found = {}
    for source in list_notebooks(root):
        nb = read_notebook(source)
        heads = {ln[3:].strip() for c in nb.cells if c.cell_type == "markdown" for ln in c.source.splitlines()
                 if ln.startswith("## ")}  # fmt: skip
        heads |= {f"Exercise {e.number}" for e in exercises(source.stem, nb)}
        found[source.stem] = heads
    return found


def check_plan(sessions: list[dict], sections: dict[str, set[str]]) -> None:
    """Raise :class:`BookError` for a step naming an unknown notebook, section, exercise or mode, or a session
    whose steps take longer than its minutes."""
    for session in sessions:
        total = 0
        for step in session["steps"]:
            if step.get("mode") not in MODES or not isinstance(step.get("minutes"), int):
                raise BookError(f"lecture plan: step {step} needs a mode of {sorted(MODES)} and whole minutes")
            total += step["minutes"]
            name = step.get("notebook")
            if name is not None and step.get("section") not in sections.get(name, set()):
                raise BookError(f"lecture plan: {name} has no section or exercise {step.get('section')!r}")
        if total > session["minutes"]:
            raise BookError(f"lecture plan: {session['title']!r} takes {total} min, more than {session['minutes']}")


def _link(step: dict, ran: set[str]) -> str:
    name, section = step.get("notebook"), step.get("section")
    if name is None:
        return ""
    if section.startswith("Exercise "):
        target = f"nb-ex-{name[:2]}-{section.split('.')[-1]}"  # book_contents.Exercise.target
    else:
        target = anchor(section)
    text = f"{name[:2]} · {cell(section)}"
    return f'<a href="notebooks/{name}.html#{target}">{text}</a>' if name in ran else f"{text} (not run in this build)"


def plan_table(session: dict, ran: set[str]) -> str:
    """One session as a Markdown table (clock, minutes, step, what to do in class) and the list of cuts."""
    rows = ["| clock | min | step | in class |", "|---|---|---|---|"]
    clock = 0
    for step in session["steps"]:
        where = _link(step, ran) or f"*{MODES[step['mode']]}*"
        mode = MODES[step["mode"]] + (" (cut first when short)" if step.get("cut") else "")
        rows.append(f"| {clock // 60}:{clock % 60:02d} | {step['minutes']} | {where} | {mode}: {cell(step['what'])} |")
        clock += step["minutes"]
    rows.append(f"| {clock // 60}:{clock % 60:02d} | **{clock}** | end of the session | of {session['minutes']} min |")
    cuts = [s for s in session["steps"] if s.get("cut")]
    saved = sum(s["minutes"] for s in cuts)
    short = (
        f"\n\n**When time is short**, cut in this order ({saved} min in all): "
        + "; ".join(f"{cell(s.get('section', s['what']))} ({s['minutes']} min)" for s in cuts)
        + "."
        if cuts
        else ""
    )
    return "\n".join(rows) + short


def _dataset(build_dir: Path, name: str):
    from ..results import load_dataset

    path = build_dir / "results" / f"{name}.nc"
    return load_dataset(path) if path.is_file() else None


def _transient(build_dir: Path) -> str | None:
    from ..analyses import nb05_training_dynamics as training
    from ..report import prose

    ds = _dataset(build_dir, "05_training_dynamics")
    if ds is None:
        return None
    return " ".join(
        prose.fill(
            "In the {objective}, the median symmetry over layers rose to {peak} (mean over seeds; median step of the "
            "peak: {peak_step}) and ended at {final}, {decay} below its peak.",
            objective,
        )
        for objective in training.transients(training.transient(ds))
    )


def _layer_gap(build_dir: Path) -> str | None:
    from ..analyses import nb05_training_dynamics as training
    from ..report import prose

    ds = _dataset(build_dir, "05_training_dynamics")
    gap = None if ds is None else training.layer_gap(ds)
    if gap is None or not gap.both_trained:
        return None
    return prose.fill(
        "The gap of the medians over layers, encoder minus decoder, is {mean} (mean over {seeds}). Encoder minus "
        "decoder final symmetry per layer, mean over seeds: {layers}.",
        gap,
    )


def _markov(build_dir: Path) -> str | None:
    from ..report import prose
    from ..scores import symmetry_score
    from ..tasks import toy_tasks

    ds = _dataset(build_dir, "04_gradient_structure")
    if ds is None:
        return None
    final = ds.symmetry.isel(step=-1).sel(parameterisation=ds.parameterisation.values[0]).median("seed")
    parts = [
        f"the {task} task, masked LM {prose.signed(float(final.sel(task=task, objective='bidirectional')))} and "
        f"next-token prediction {prose.signed(float(final.sel(task=task, objective='causal')))}"
        for task in toy_tasks.TASKS
    ]
    vocab = json.loads(ds.attrs.get("parameters", "{}")).get("vocab")
    matrix = symmetry_score(toy_tasks.markov_transitions(int(vocab))) if vocab else None
    said = f"Final symmetry of $W_{{qk}}$ (median over seeds): {'; '.join(parts)}."
    return said + (f" The Markov task's transition matrix scores {prose.signed(matrix)}." if vocab else "")


FACTS: dict[str, Callable[[Path], str | None]] = {
    "05_transient": _transient,
    "05_layer_gap": _layer_gap,
    "04_markov": _markov,
}


def fact(build_dir: Path, name: str) -> str:
    """The sentence :data:`FACTS` gives for ``name`` from this build, or a line saying which notebook to run."""
    if name not in FACTS:
        raise BookError(f"lecture path: unknown fact {name!r}; known: {sorted(FACTS)}")
    said = FACTS[name](build_dir)
    return said if said is not None else f"*Notebook {name[:2]} is not in this build: run it to see its numbers.*"


def placeholders(root: Path, build_dir: Path, ran: set[str]) -> dict[str, Callable[[str | None], str]]:
    """The lecture path template's ``{{plan:N}}`` (session N, from 1) and ``{{fact:NAME}}`` values."""
    sessions = load_plan(root / "book" / "lecture-plan.yaml")
    check_plan(sessions, notebook_sections(root))
    return {
        "plan": lambda n: plan_table(sessions[int(n or 1) - 1], ran),
        "fact": lambda name: fact(build_dir, name or ""),
    }


def page(books, root: Path, build_dir: Path, template: str) -> str:
    """The lecture path page: ``template`` (``book/lecture-path.md``) with its timings and sessions measured in the
    build (:mod:`attnstruct.teaching.book_contents`), the teaching plan and the facts its answers quote."""
    from . import book_contents as contents
    from . import handout_contents as handouts

    by_name = {b.name: b for b in books}
    values = {
        "live_limit": lambda _: f"{contents.LIVE_LIMIT_S:g} s",
        "summary": lambda _: contents.timing_summary(books),
        "session": lambda spec: contents.session_block(by_name, spec or ""),
        "timing": lambda name: contents.timing_block(by_name.get(name or ""), name or ""),
    }
    values |= placeholders(root, build_dir, {b.name for b in books if b.ran})
    values["handouts"] = lambda _: handouts.lecture_block(build_dir)
    return contents.fill(template, values, "lecture-path.md")
