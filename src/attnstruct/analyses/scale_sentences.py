"""Notebook 09's sentences and figure titles, each computed from the data it states (:mod:`.dynamics_at_scale`).

A title says what a figure shows in one line of words and numbers, a sentence what a table or a set of verdicts
says; neither is ever typed in the notebook. The authors' training runs are placed on the tokens axis with the
paper's batch: 32 sequences per device, 8 accumulation steps, 512 tokens each (:data:`AUTHORS_TOKENS_PER_STEP`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import xarray as xr

from .. import stats
from ..report import prose
from . import dynamics_at_scale as scale

AUTHORS_TOKENS_PER_STEP = 32 * 8 * 512


def authors_runs_on_tokens(runs: pd.DataFrame) -> pd.DataFrame:
    """The authors' training runs (:func:`attnstruct.reference.training_dynamics`: median over layers per step) with
    a ``tokens`` column, ``step * AUTHORS_TOKENS_PER_STEP``."""
    return runs.assign(tokens=runs["step"] * AUTHORS_TOKENS_PER_STEP)


def trajectory_axes(ds: xr.Dataset) -> dict[str, list[str]]:
    """The trajectory series drawn against the tokens seen (every checkpoint's tokens known) and those drawn against
    their checkpoint index in training order (``checkpoint``: Ettin's phases, whose tokens per step are not stated)."""
    axes: dict[str, list[str]] = {"tokens": [], "checkpoint": []}
    for series in scale.series_of(ds, "trajectory"):
        tokens = scale.select(ds, "trajectory", series)["tokens"].values.astype(float)
        axes["tokens" if np.isfinite(tokens).all() else "checkpoint"].append(series)
    return axes


def trajectory_grid(ds: xr.Dataset, series: str, score: str, axis: str) -> pd.DataFrame:
    """The median ``score`` of trajectory ``series`` as ``[position, seed]``: positions are the tokens seen
    (``axis="tokens"``) or each seed's checkpoint index in training order (``"checkpoint"``)."""
    lines = scale.trajectory_lines(ds, series, score)
    if axis == "checkpoint":
        lines = lines.assign(checkpoint=lines.groupby("seed").cumcount())
    return lines.pivot_table(index=axis, columns="seed", values=score)


def describe_series(entries: pd.DataFrame) -> pd.DataFrame:
    """One row per series: its kind, role(s), units and checkpoints (each model once)."""
    rows = []
    for (kind, series), group in entries.groupby(["kind", "series"], sort=False):
        rows.append(
            {
                "series": series,
                "kind": kind,
                "roles": ", ".join(dict.fromkeys(group["role"])),
                "units": group["unit"].nunique(),
                "checkpoints": group["model"].nunique(),
            }
        )
    return pd.DataFrame(rows).set_index("series")


def describe_copies(ds: xr.Dataset) -> str:
    """The checkpoints left out as byte-identical copies of a later one of their run, named with the one kept
    (:func:`~.dynamics_at_scale.left_out_copies`); nothing when no checkpoint's digest is known (a local series)."""
    copies = scale.left_out_copies(ds)
    known = "weights_sha256" in ds.coords and any(str(d) for d in ds["weights_sha256"].values)
    if not copies:
        return " No two checkpoints of a run hold byte-identical weights, by the hub's digests." if known else ""
    holds = "holds" if len(copies) == 1 else "hold"
    one = "its run" if len(copies) == 1 else "their run"
    named = ", ".join(f"`{model}` (as `{kept}`)" for model, kept in copies.items())
    return (
        f" {prose.count(len(copies), 'checkpoint')} {holds} weights byte-identical to a later one of {one} (the "
        f"hub's digests say so) and {'is' if len(copies) == 1 else 'are'} left out of the trajectories: {named}."
    )


def describe_scored(ds: xr.Dataset, missing: Sequence[str]) -> str:
    """How many checkpoints were scored, their sizes, which could not be (the sweep's failures.csv says why), and
    which were left out as copies of later ones (:func:`describe_copies`)."""
    models = pd.unique(ds["model"].values)
    params = pd.Series(ds["n_params"].values).dropna()
    sizes = f"; {prose.span(params / 1e6, 1, prose.number)} M parameters" if len(params) else ""
    lost = (
        f" {prose.count(len(missing), 'checkpoint')} could not be scored and are left out (the sweep's "
        "`failures.csv` says why)."
        if missing
        else " Every checkpoint named was scored."
    )
    return (
        f"{prose.count(len(models), 'checkpoint')} scored ({prose.count(len(ds['checkpoint']), 'entry', 'entries')}, "
        f"a checkpoint used by several analyses counted once){sizes}.{lost}{describe_copies(ds)}"
    )


def _bytes(value: float) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if value >= size:
            return f"{value / size:.1f} {unit}"
    return f"{value:.0f} B"


def describe_bytes(table: pd.DataFrame) -> str:
    """What reading the series by byte ranges cost: bytes in all, per checkpoint, and the share of the files."""
    total = float(table["bytes"].sum())
    share = table["share of files"].dropna()
    shares = f", {prose.span(share, 1, lambda v, d: prose.percent(v, d))} of their weight files" if len(share) else ""
    return (
        f"Reading the query and key weights of {prose.count(int(table['checkpoints'].sum()), 'checkpoint')} "
        f"transferred {_bytes(total)} ({_bytes(float(table['per checkpoint'].min()))} to "
        f"{_bytes(float(table['per checkpoint'].max()))} per checkpoint{shares})."
    )


def _verdict_counts(effects: Sequence[stats.Effect]) -> str:
    counts = {v: sum(e.verdict == v for e in effects) for v in stats.VERDICTS}
    return ", ".join(f"{n} {verdict}" for verdict, n in counts.items() if n) or "no claim tested"


def describe_pairs(ds: xr.Dataset, effects: Sequence[stats.Effect]) -> str:
    """The matched pairs in words: per series, in how many units the encoder is the more symmetric, and the
    verdicts."""
    parts = []
    for series in scale.series_of(ds, "pair"):
        pairs = scale.select(ds, "pair", series)
        frame = pd.DataFrame(
            {"unit": pairs["unit"].values, "role": pairs["role"].values, "s": scale.median(pairs, "symmetry").values}
        ).pivot_table(index="unit", columns="role", values="s", sort=False)
        gap = frame["encoder"] - frame["decoder"]
        parts.append(
            f"**{series}:** the encoder is the more symmetric of its pair in {int((gap > 0).sum())} of {len(frame)} "
            f"{scale.unit_kind(frame.index)}s (encoder minus decoder {prose.span(gap)})."
        )
    mine = [e for e in effects if "encoder minus decoder" in e.claim]
    return " ".join(parts) + f" Verdicts: {_verdict_counts(mine)}."


def describe_trajectories(ds: xr.Dataset, effects: Sequence[stats.Effect]) -> str:
    """Per trajectory series: its seeds, how far it reaches in tokens or steps, where its median symmetry peaks and
    ends (mean over seeds), and the verdicts."""
    parts = []
    for series in scale.series_of(ds, "trajectory"):
        lines = scale.trajectory_lines(ds, series, "symmetry")
        mean = lines.groupby(["phase", "step"], sort=True)["symmetry"].mean()
        tokens = lines["tokens"].max()
        reach = f"{tokens:.2g} tokens" if np.isfinite(tokens) else f"step {int(lines['step'].max()):,}"
        parts.append(
            f"**{series}** ({prose.count(lines['seed'].nunique(), 'seed')}, to {reach}): median symmetry peaks at "
            f"{prose.signed(mean.max())} and ends at {prose.signed(mean.iloc[-1])}, mean over seeds."
        )
    return " ".join(parts) + f" Verdicts at the last checkpoint: {_verdict_counts(effects)}."


def describe_cross(ds: xr.Dataset, effects: Sequence[stats.Effect]) -> str:
    """Per cross-objective series: in how many units symmetry moved in the predicted direction, and the verdicts."""
    parts = []
    for series in scale.series_of(ds, "cross"):
        table = scale.before_and_after(ds, series)
        role = str(scale.select(ds, "cross", series)["role"].values[0])
        moved = int((np.sign(table["change"]) == scale.SIGN[role]).sum())
        word = "rose" if scale.SIGN[role] > 0 else "fell"
        parts.append(
            f"**{series}:** median symmetry {word} in {moved} of {len(table)} {scale.unit_kind(table.index)}s "
            f"(after minus before {prose.span(table['change'])})."
        )
    return " ".join(parts) + f" Verdicts: {_verdict_counts(effects)}."


def describe_summary(effects: Sequence[stats.Effect]) -> str:
    """The primary claims' verdicts in one sentence, then every claim's count."""
    primary = [e for e in effects if e.family.startswith("primary")]
    lead = "; ".join(f"{e.claim}: **{e.verdict}** ({prose.signed(e.estimate)}, n = {e.n})" for e in primary)
    return f"Primary: {lead or 'none tested'}. All claims: {_verdict_counts(effects)}."


def pairs_title(ds: xr.Dataset) -> str:
    """The matched-pairs figure's message."""
    counts = []
    for series in scale.series_of(ds, "pair"):
        pairs = scale.select(ds, "pair", series)
        frame = pd.DataFrame(
            {"unit": pairs["unit"].values, "role": pairs["role"].values, "s": scale.median(pairs, "symmetry").values}
        ).pivot_table(index="unit", columns="role", values="s", sort=False)
        counts.append(f"{int((frame['encoder'] > frame['decoder']).sum())} of {len(frame)} ({series})")
    return f"The encoder is the more symmetric of its matched pair in {', '.join(counts)}"


def trajectories_title(ds: xr.Dataset) -> str:
    """The trajectories figure's message: each series' final median symmetry, mean over seeds."""
    finals = []
    for series in scale.series_of(ds, "trajectory"):
        last = scale.last_checkpoints(ds, series)
        finals.append(f"{series} {prose.signed(float(scale.median(last, 'symmetry').mean()))}")
    return "Median symmetry at the last checkpoint, mean over seeds: " + ", ".join(finals)


def cross_title(ds: xr.Dataset) -> str:
    """The cross-objective figure's message."""
    parts = []
    for series in scale.series_of(ds, "cross"):
        change = scale.before_and_after(ds, series)["change"]
        parts.append(f"{series}: {prose.signed(float(change.mean()))}")
    return "Median symmetry after minus before continued training, mean over units: " + "; ".join(parts)


def learned_line(learned: Mapping[str, bool]) -> str:
    """Which series rest on runs that did not learn (their verdicts read *cannot tell at this scale*)."""
    failed = [series for series, ok in learned.items() if not ok]
    if not failed:
        return "Every run behind these series met its loss target."
    return f"The runs behind {', '.join(failed)} did not meet their loss targets: their claims are not judged."
