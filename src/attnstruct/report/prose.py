"""Sentences rendered from data: the notebooks state results through these, never as typed numbers.

An analysis module returns a facts record (a frozen dataclass of strings formatted here, plus the few
data-dependent words: a verdict, "rose" or "fell"); the notebook holds the sentence as a template and fills it with
one formatter (:func:`say` shows it as Markdown, :func:`fill` returns it, for a figure's title). The formatters keep
one style everywhere: scores signed with two decimals (``+0.35``), fractions as percentages, ranges as
``low to high``.
"""

from __future__ import annotations

import dataclasses
import re
import string
from collections.abc import Iterable, Mapping

import numpy as np


def signed(value: float, digits: int = 2) -> str:
    """``+0.35`` / ``-0.12``, rounded first, so that a tiny negative prints ``+0.00``, never ``-0.00``; ``nan`` for a
    missing value."""
    value = float(value)
    return "nan" if not np.isfinite(value) else f"{round(value, digits) + 0.0:+.{digits}f}"


def number(value: float, digits: int = 2) -> str:
    """``6.02``; ``nan`` for a missing value."""
    value = float(value)
    return "nan" if not np.isfinite(value) else f"{value:.{digits}f}"


def percent(fraction: float, digits: int = 0) -> str:
    """A fraction as a percentage: ``0.259 -> '26%'``; ``never`` for NaN (a run that never got there)."""
    fraction = float(fraction)
    return "never" if not np.isfinite(fraction) else f"{100 * fraction:.{digits}f}%"


def byte_size(value: float, digits: int = 1) -> str:
    """``'369.7 kB'``: bytes in the largest decimal unit (GB, MB, kB) they fill; under a kilobyte, ``'512 B'``."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if value >= size:
            return f"{value / size:.{digits}f} {unit}"
    return f"{value:.0f} B"


def span(values: Iterable[float], digits: int = 2, fmt=signed) -> str:
    """``'+0.14 to +0.24'``: the smallest and largest finite value (one value: just it; none: ``'none'``)."""
    finite = [float(v) for v in np.ravel(np.asarray(list(values), dtype=float)) if np.isfinite(v)]
    if not finite:
        return "none"
    low, high = min(finite), max(finite)
    return fmt(low, digits) if fmt(low, digits) == fmt(high, digits) else f"{fmt(low, digits)} to {fmt(high, digits)}"


def listing(values: Iterable[float], digits: int = 2, fmt=signed) -> str:
    """``'+0.21, +0.12 and +0.13'``."""
    parts = [fmt(v, digits) for v in values]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1] if parts else "none"


def compared(
    a: float,
    b: float,
    more: str = "more symmetric than",
    less: str = "less symmetric than",
    same: str = "as symmetric as",
    digits: int = 2,
) -> str:
    """How ``a`` compares with ``b`` at the ``digits`` a sentence prints: ``more`` when it is larger, ``less`` when
    smaller, ``same`` when the two round alike (so a sentence never says "more" of two equal printed numbers)."""
    a, b = round(float(a), digits), round(float(b), digits)
    return more if a > b else less if a < b else same


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``'1 seed'``, ``'3 seeds'``, ``'2 families'`` (a consonant and ``y``: ``ies``), or ``plural`` when given."""
    if n == 1:
        return f"{n} {noun}"
    if plural is None:
        plural = noun[:-1] + "ies" if re.search(r"[^aeiou]y$", noun) else noun + "s"
    return f"{n} {plural}"


def p_value(p: float) -> str:
    """``'p = 0.031'``, or ``'p < 0.001'`` below a thousandth."""
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


def effect_line(effect, digits: int = 2) -> str:
    """The one compact line of an effect (an :class:`attnstruct.stats.Effect`, read by its fields): claim, estimate,
    its intervals, each named (the bootstrap's, which the verdict reads, and Student's t beside it when known), n,
    test and p (with the corrected p when a plan changed it), the null's 95% range and the smallest
    detectable effect when known, verdict and reason, and the claim's family under a plan. An effect of one unit has
    no interval and no test: its value, n, verdict and reason."""
    f = f"+.{digits}f"
    family = f"; {effect.family}" if effect.family else ""
    if effect.n == 1:
        return f"{effect.claim}: {effect.estimate:{f}} (n = 1 {effect.unit}; {effect.verdict}: {effect.reason}{family})"
    p = p_value(effect.p_value)
    if np.isfinite(effect.p_adjusted) and effect.p_adjusted != effect.p_value:
        p += f", adjusted {effect.p_adjusted:.3f}"
    null = effect.null
    null = "" if null is None else f"; null 95% range [{null.null_low:{f}}, {null.null_high:{f}}]"
    reach = ""
    if not np.isnan(effect.detectable):
        reach = (
            f"; detectable from {effect.detectable:{f}}"
            if np.isfinite(effect.detectable)
            else "; no effect detectable at this n"
        )
    interval = f"{effect.level:.0%} bootstrap interval [{effect.low:{f}}, {effect.high:{f}}]"
    if np.isfinite(getattr(effect, "t_low", np.nan)):
        interval = (
            f"{effect.level:.0%} intervals [bootstrap {effect.low:{f}}, {effect.high:{f}}; "
            f"t {effect.t_low:{f}}, {effect.t_high:{f}}]"
        )
    return (
        f"{effect.claim}: {effect.estimate:{f}} ({interval}, "
        f"n = {count(effect.n, effect.unit)}, {effect.test} {p}{null}{reach}; "
        f"{effect.verdict}: {effect.reason}{family})"
    )


def markdown_table(frame, digits: int = 3) -> str:
    """``frame`` (a ``pandas.DataFrame``) as a Markdown table with its index as the first column, every cell in full
    (a float to ``digits`` significant digits, NaN as an empty cell, a boolean as yes or no, ``|`` escaped)."""

    def cell(value) -> str:
        if isinstance(value, (bool, np.bool_)):
            return "yes" if value else "no"
        if isinstance(value, float):
            return "" if value != value else f"{value:.{digits}g}"
        return str(value).replace("|", "\\|").replace("\n", " ")

    header = [str(frame.index.name or ""), *map(str, frame.columns)]
    rows = [[cell(index), *map(cell, row)] for index, row in zip(frame.index, frame.itertuples(index=False))]
    lines = [header, ["---"] * len(header), *rows]
    return "\n".join("| " + " | ".join(line) + " |" for line in lines)


def show(text: str) -> None:
    """Display ``text`` as Markdown in a notebook (plain print elsewhere)."""
    try:
        from IPython import get_ipython
        from IPython.display import Markdown, display
    except ImportError:  # pragma: no cover - IPython is a dependency of the notebooks
        print(text)
        return
    if get_ipython() is None:
        print(text)
    else:
        display(Markdown(text))


def fill(template: str, facts) -> str:
    """``template`` with every ``{name}`` replaced by the field ``name`` of ``facts`` (a dataclass instance or a
    mapping), by :meth:`str.format_map`; a field the facts lack is a ``KeyError`` naming every missing one and the
    record's class."""
    if dataclasses.is_dataclass(facts) and not isinstance(facts, type):
        values = {field.name: getattr(facts, field.name) for field in dataclasses.fields(facts)}
    elif isinstance(facts, Mapping):
        values = dict(facts)
    else:
        raise TypeError(f"facts must be a dataclass instance or a mapping, got {type(facts).__name__}")
    fields = (field for _, field, _, _ in string.Formatter().parse(template) if field)
    names = dict.fromkeys(re.split(r"[.\[]", field)[0] for field in fields)
    missing = [name for name in names if name not in values]
    if missing:
        raise KeyError(
            f"template fields {', '.join(map(repr, missing))} are not fields of {type(facts).__name__} "
            f"(it has {', '.join(values) or 'none'})"
        )
    return template.format_map(values)


def say(template: str, facts) -> None:
    """Show ``template`` filled with ``facts`` (:func:`fill`) as Markdown (:func:`show`)."""
    show(fill(template, facts))
