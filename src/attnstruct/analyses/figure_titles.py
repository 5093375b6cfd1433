"""Message titles of the figures of notebooks 01 and 08 (02, 03, 04, 05, 06, 07 and 09: templates in the
notebook): each says what its figure shows, in words, with every number in it computed
from the data the figure draws (never typed), so that a reader who only glances at the figure gets its finding. A
notebook passes a function's string to
:func:`attnstruct.report.plotting.message_title`.

The titles describe what was drawn; the verdicts on the paper's claims stay with :mod:`attnstruct.stats` and the
sentences of the analysis modules.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from ..report.prose import count, percent, signed


def _more(a: float, b: float, more: str, less: str, same: str) -> str:
    """``more`` when ``a`` beats ``b`` at two decimals, ``less`` when it trails, ``same`` when they round alike."""
    a, b = round(float(a), 2), round(float(b), 2)
    return more if a > b else less if a < b else same


def more_symmetric(a: float, b: float) -> str:
    """How a symmetry ``a`` compares with ``b``: ``more symmetric than``, ``less symmetric than`` or ``as symmetric
    as`` (compared at two decimals, as the titles print them)."""
    return _more(a, b, "more symmetric than", "less symmetric than", "as symmetric as")


# Notebook 01
def decomposition(energy: Mapping[str, float]) -> str:
    """The layer's energy split: ``energy`` holds ``||M||^2`` (``M``) and its parts' (``M_s``, ``M_n``)."""
    total = energy["M"] or 1.0
    return (
        f"An untrained layer: its symmetric part carries {percent(energy['M_s'] / total)} of the energy, "
        f"its skew part {percent(energy['M_n'] / total)}"
    )


def examples(scores: Mapping[str, object]) -> str:
    """The five example matrices' scores (``scores[kind]``: symmetry and directionality; kinds of
    :data:`attnstruct.analyses.bilinear_form.EXAMPLE_TITLES`): which structure each score answers to."""
    s = {kind: (float(v.symmetry), float(v.directionality)) for kind, v in scores.items()}
    return (
        f"Symmetry answers to mirror structure ({signed(s['symmetric'][0])} symmetric, {signed(s['skew'][0])} "
        f"skew), directionality to dominant columns ({signed(s['columns'][1])}) and rows ({signed(s['rows'][1])})"
    )


def dominant_columns(norms: Mapping[str, float], score: float) -> str:
    """The dominant-columns example: ``norms`` of :func:`attnstruct.analyses.matrix_readings.outlying_norms`
    (norms above threshold, summed excesses ``C`` and ``R``) and its directionality ``score``."""
    return (
        f"{count(norms['columns_over'], 'column')} and {count(norms['rows_over'], 'row')} pass their threshold: "
        f"C = {norms['C']:.3g} against R = {norms['R']:.3g}, so directionality is {signed(score)}"
    )


# Notebook 08
def roles(summary: pd.DataFrame, reference: pd.DataFrame | None = None, label: str = "here") -> str:
    """Our encoder stacks' median symmetry (median over stacks of their medians over layers) against the decoder
    stacks', and, with ``reference``, the authors' language models' (all rows; cross-attention left out)."""
    from .paper_comparison import group_medians, reported_group_medians

    ours = group_medians(summary).set_index("stack")
    enc, dec = (float(ours.loc[s, "symmetry_median"]) for s in ("encoder", "decoder"))
    n = int(ours["n"].sum())
    if not (np.isfinite(enc) and np.isfinite(dec)):
        present = "encoder" if np.isfinite(enc) else "decoder"
        return f"{count(n, f'{present} stack')} {label}: median symmetry {signed(enc if np.isfinite(enc) else dec)}"
    text = (
        f"Encoder stacks are {more_symmetric(enc, dec)} decoder stacks: median symmetry {signed(enc)} against "
        f"{signed(dec)} {label} ({count(n, 'stack')})"
    )
    if reference is not None:
        theirs = reported_group_medians(reference).set_index("stack")
        text += (
            f", {signed(theirs.loc['encoder', 'symmetry_median'])} against "
            f"{signed(theirs.loc['decoder', 'symmetry_median'])} as reported by the paper"
        )
    return text


def agreement(table: pd.DataFrame) -> str:
    """Ours against the authors' values, stack by stack (:func:`paper_comparison.agreement`'s ``table``)."""
    return (
        f"{count(len(table), 'stack')} also scored by the paper: median |ours - theirs| "
        f"{table['diff_symmetry'].abs().median():.2f} in symmetry, "
        f"{table['diff_directionality'].abs().median():.2f} in directionality"
    )
