"""The lecture path's teaching plan and the numbers its answers quote, filled into ``book/lecture-path.md``.

The plan is ``book/lecture-plan.yaml``, the one source of what happens in class: per session, steps of class time
(minutes, a mode, a notebook section or exercise, what to do). An exercise step takes its minutes from the
exercise's header (:mod:`attnstruct.teaching.exercises`, :func:`with_exercise_minutes`), and its mode is always
``exercise``: students do it, the lecturer never runs it live (:func:`check_plan`). :func:`plan_table` renders a
session as a table with the clock, a link to each section of the notebook's page (the anchor Sphinx gives the
heading, :func:`anchor`), the break, the exercise slots and what to cut when time runs short; :func:`budget` sums
the session's minutes by mode and the measured compute time of its live steps; :func:`timing_table` gives each
notebook's sections with their measured seconds and what the plan does with each. :func:`check_plan` refuses a
step naming a section or exercise the notebook does not have, and a session longer than its minutes.

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

MODES = {"show": "show the stored output", "live": "run live", "exercise": "students do it", "discuss": "discuss",
         "break": "break"}  # fmt: skip
EXERCISE = "Exercise "  # a step's section naming an exercise: "Exercise NN.k"


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


def exercise_minutes(root: Path) -> dict[str, int]:
    """The minutes of every exercise's header, by number (``"05.3"``)."""
    from .exercises import exercises as marked

    return {e.number: e.minutes for source in list_notebooks(root) for e in marked(read_notebook(source), source.stem)}


def with_exercise_minutes(sessions: list[dict], minutes: dict[str, int]) -> list[dict]:
    """``sessions`` with each exercise step's minutes taken from its exercise's header; a step that gives minutes
    of its own, or names an exercise without a header, is refused (:class:`BookError`)."""
    out = []
    for session in sessions:
        steps = []
        for step in session["steps"]:
            section = str(step.get("section") or "")
            if section.startswith(EXERCISE):
                number = section[len(EXERCISE) :]
                if "minutes" in step:
                    raise BookError(f"lecture plan: {section} takes the minutes of its header; drop its 'minutes'")
                if number not in minutes:
                    raise BookError(f"lecture plan: {section} has no header with its minutes")
                step = {**step, "minutes": minutes[number]}
            steps.append(step)
        out.append({**session, "steps": steps})
    return out


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
    """Raise :class:`BookError` for a step naming an unknown notebook, section, exercise or mode, an exercise in
    another mode than ``exercise`` (or that mode without an exercise), or a session whose steps take longer than
    its minutes."""
    for session in sessions:
        total = 0
        for step in session["steps"]:
            if step.get("mode") not in MODES or not isinstance(step.get("minutes"), int):
                raise BookError(f"lecture plan: step {step} needs a mode of {sorted(MODES)} and whole minutes")
            total += step["minutes"]
            exercise = str(step.get("section") or "").startswith(EXERCISE)
            if exercise != (step["mode"] == "exercise"):
                raise BookError(
                    f"lecture plan: {step.get('section') or step['mode']!r}: an exercise is students' work (mode "
                    "exercise), never run live or shown by the lecturer, and mode exercise names an exercise"
                )
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
        said = f"{mode}: {cell(step['what'])}" if step.get("what") else ""
        rows.append(f"| {clock // 60}:{clock % 60:02d} | {step['minutes']} | {where} | {said} |")
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


def _measured(books: dict, step: dict) -> float | None:
    """The measured compute seconds of a step's section in this build; None when its notebook did not run."""
    from .book_contents import sections

    nb = books.get(step.get("notebook"))
    if nb is None or not nb.ran:
        return None
    return sum(s["seconds"] for s in sections(nb.nb) if s["title"] == step.get("section"))


def minutes_by_mode(session: dict) -> dict[str, int]:
    """The session's minutes per mode of :data:`MODES` (0 for a mode it does not use)."""
    return {mode: sum(s["minutes"] for s in session["steps"] if s["mode"] == mode) for mode in MODES}


def live_compute(session: dict, books: dict) -> tuple[float, int]:
    """Measured compute seconds of the session's live steps in this build, and how many live steps did not run."""
    live = [_measured(books, s) for s in session["steps"] if s["mode"] == "live"]
    return sum(t for t in live if t is not None), sum(t is None for t in live)


def budget(session: dict, books: dict) -> str:
    """The session's minutes by mode (run live, shown stored, students' exercises, discussion, break), and what
    its live steps compute in this build: one sentence, every number from the plan or the build."""
    from .book_contents import minutes

    by_mode = minutes_by_mode(session)
    parts = [f"{by_mode[m]} min {MODES[m]}" for m in ("live", "show", "exercise", "discuss", "break") if by_mode[m]]
    seconds, missing = live_compute(session, books)
    computed = (
        f" The live steps' cells compute {minutes(seconds)} in this build; the rest of their {by_mode['live']} min "
        "is explanation and the class's predictions."
        if missing < sum(s["mode"] == "live" for s in session["steps"])
        else ""
    )
    computed += f" {missing} live step{'s' if missing != 1 else ''} not run in this build." if missing else ""
    return f"**Budget**: {sum(by_mode.values())} of {session['minutes']} min: {', '.join(parts)}.{computed}"


def section_modes(sessions: list[dict], name: str) -> dict[str, tuple[int, str]]:
    """The sections and exercises of notebook ``name`` the plan names: ``{section: (session number, mode)}``."""
    return {
        s["section"]: (n, s["mode"])
        for n, session in enumerate(sessions, 1)
        for s in session["steps"]
        if s.get("notebook") == name
    }


def timing_table(nb, name: str, sessions: list[dict]) -> str:
    """Measured times of one notebook, section by section, with what the plan does with each in class: the
    plan's mode where a step names the section (a slow cell is always shown from its stored output), the exercises
    students do, and the sections the plan leaves to reading."""
    from .book_contents import cell as table_cell
    from .book_contents import seconds, sections

    if nb is None or not nb.ran:
        return (
            f"*`{name}` was not run in this build, so there are no measured times for it:* "
            f"`make notebook NB={name}`, then `make book` again."
        )
    end = str(nb.nb.metadata.get("papermill", {}).get("end_time") or "")[:10]
    head = (
        f"**Measured** (profile {table_cell(nb.profile)}, executed {end or 'at an unrecorded time'}): the whole "
        f"notebook ran in {seconds(nb.duration)}."
    )
    if nb.changed:
        head += f" Parameters changed from the profile: {', '.join(f'`{k}`' for k in nb.changed)}."
    planned = section_modes(sessions, name)
    in_class = [
        f"{s['section'][len(EXERCISE) :]} ({s['minutes']} min)"
        for session in sessions
        for s in session["steps"]
        if s.get("notebook") == name and s["mode"] == "exercise"
    ]
    rows = ["| section | code cells | measured | in class |", "|---|---|---|---|"]
    for sec in sections(nb.nb):
        slow = "; ".join(f"the cell `{line}` took {seconds(t)}" for _, line, t in sec["slow"])
        if sec["title"] in planned:
            number, mode = planned[sec["title"]]
            mode = "show" if sec["slow"] else mode
            how = f"session {number}: {MODES[mode]}" + (f" ({slow})" if slow else "")
        elif sec["title"] == "Exercises":
            how = f"students do them: in class {', '.join(in_class)}; the rest" if in_class else "students do them"
            how += " as homework"
        elif slow:
            how = f"not in the plan; show the stored output ({slow})"
        else:
            how = "not in the plan: reading"
        rows.append(f"| {table_cell(sec['title'])} | {sec['cells']} | {seconds(sec['seconds'])} | {how} |")
    return head + "\n\n" + "\n".join(rows)


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


def sessions_of(root: Path) -> list[dict]:
    """The checked sessions of ``root``'s plan, exercise steps with their headers' minutes."""
    sessions = with_exercise_minutes(load_plan(root / "book" / "lecture-plan.yaml"), exercise_minutes(root))
    check_plan(sessions, notebook_sections(root))
    return sessions


def placeholders(root: Path, build_dir: Path, books: list) -> dict[str, Callable[[str | None], str]]:
    """The lecture path template's ``{{plan:N}}`` and ``{{budget:N}}`` (session N, from 1), ``{{timing:NAME}}``
    and ``{{fact:NAME}}`` values."""
    sessions = sessions_of(root)
    by_name = {b.name: b for b in books}
    ran = {b.name for b in books if b.ran}
    return {
        "plan": lambda n: plan_table(sessions[int(n or 1) - 1], ran),
        "budget": lambda n: budget(sessions[int(n or 1) - 1], by_name),
        "timing": lambda name: timing_table(by_name.get(name or ""), name or "", sessions),
        "fact": lambda name: fact(build_dir, name or ""),
    }


def page(books, root: Path, build_dir: Path, template: str) -> str:
    """The lecture path page: ``template`` (``book/lecture-path.md``) with its timings and sessions measured in the
    build (:mod:`attnstruct.teaching.book_contents`), the teaching plan and the facts its answers quote."""
    from . import book_contents as contents
    from . import handout_contents as handouts

    values = {
        "live_limit": lambda _: f"{contents.LIVE_LIMIT_S:g} s",
        "summary": lambda _: contents.timing_summary(books),
    }
    values |= placeholders(root, build_dir, books)
    values["handouts"] = lambda _: handouts.lecture_block(build_dir)
    return contents.fill(template, values, "lecture-path.md")
