"""Notebook 09's figures, drawn from the dataset of :func:`attnstruct.analyses.dynamics_at_scale.checkpoint_scores`,
each under the message title :mod:`attnstruct.analyses.scale_sentences` computes from the same data.

* :func:`matched_pairs`: per unit, the encoder's and the decoder's median score over layers, joined, over the 95%
  range of an untrained stack of that unit's shape;
* :func:`trajectories`: the median scores against the tokens seen (log axis; the untrained start, at zero tokens,
  cannot be drawn there), one thin line per seed, the band between the seeds' extremes and their mean in bold, the
  authors' runs in grey (encoders solid, decoders dashed); series that state no tokens per step in a second row,
  against their checkpoint index;
* :func:`continued_training`: one line per unit from before to after continued training with the other objective.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import xarray as xr
from matplotlib.lines import Line2D

from ..report import plotting
from . import dynamics_at_scale as scale
from . import scale_sentences as words

COLORS = {"encoder": plotting.ENCODER_COLOR, "decoder": plotting.DECODER_COLOR}


def matched_pairs(ds: xr.Dataset, n_draws: int):
    """The matched-pairs figure (module docstring); ``n_draws`` untrained stacks per null band."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), squeeze=False)
    for ax, score in zip(axes[0], scale.SCORES):
        for series in scale.series_of(ds, "pair"):
            members = scale.select(ds, "pair", series)
            units = list(dict.fromkeys(members["unit"].values))
            values = scale.median(members, score).values
            unit_of = members["unit"].values
            for role in ("encoder", "decoder"):
                mine = members["role"].values == role
                ax.plot([units.index(u) for u in unit_of[mine]], values[mine], "o", color=COLORS[role])
            for i, unit in enumerate(units):
                both = values[unit_of == unit]
                ax.plot([i, i], [both.min(), both.max()], color="0.6", lw=1, zorder=0)
                null = scale.untrained_null(
                    score, scale.shape_of(members, int(np.flatnonzero(unit_of == unit)[0])), n_draws, 0
                )
                ax.fill_between([i - 0.3, i + 0.3], *np.quantile(null, [0.025, 0.975]), color="0.85", lw=0, zorder=-1)
            ax.set_xticks(range(len(units)), units)
        ax.axhline(0, color="0.5", lw=0.5)
        ax.set(ylabel=f"median {score} over layers", title=f"{score}: matched encoder and decoder")
    handles = [Line2D([], [], marker="o", ls="", color=COLORS[r], label=r) for r in COLORS]
    handles.append(plt.Rectangle((0, 0), 1, 1, color="0.85", label="untrained stack of that shape (95%)"))
    axes[0, -1].legend(handles=handles, fontsize=8, loc="center left", bbox_to_anchor=(1.02, 0.5))
    plotting.message_title(fig, words.pairs_title(ds))
    fig.tight_layout()
    return fig


def _draw_series(ax, ds: xr.Dataset, series: str, score: str, axis: str) -> None:
    role = str(scale.select(ds, "trajectory", series)["role"].values[0])
    grid = words.trajectory_grid(ds, series, score, axis)  # [position, seed]
    if axis == "tokens":
        grid = grid[grid.index > 0]  # the untrained start has no place on a log axis
    for seed in grid.columns:
        ax.plot(grid.index, grid[seed], color=COLORS[role], lw=0.6, alpha=0.5)
    ax.fill_between(grid.index, grid.min(axis=1), grid.max(axis=1), color=COLORS[role], alpha=0.15, lw=0)
    ax.plot(grid.index, grid.mean(axis=1), color=COLORS[role], lw=2, label=series)


def _authors(ax, authors: pd.DataFrame, score: str) -> list:
    for mode, run in authors.groupby("mode"):
        for _, one in run.groupby(["n_layers", "dataset"]):
            ax.plot(one["tokens"], one[score], color="0.6", lw=0.8, ls="-" if mode == "encoder" else "--")
    return [
        Line2D([], [], color="0.6", ls="-", label="authors' encoders"),
        Line2D([], [], color="0.6", ls="--", label="authors' decoders"),
    ]


def trajectories(ds: xr.Dataset, authors: pd.DataFrame):
    """The trajectories figure (module docstring); ``authors``: their runs with ``tokens``
    (:func:`attnstruct.analyses.scale_sentences.authors_runs_on_tokens`)."""
    by_axis = words.trajectory_axes(ds)
    rows = [axis for axis in ("tokens", "checkpoint") if by_axis[axis]]
    fig, axes = plt.subplots(len(rows), 2, figsize=(11, 3.8 * len(rows)), squeeze=False)
    for row, axis in enumerate(rows):
        extra = []
        for ax, score in zip(axes[row], scale.SCORES):
            if axis == "tokens":
                extra = _authors(ax, authors, score)
                ax.set_xscale("log")
            for series in by_axis[axis]:
                _draw_series(ax, ds, series, score, axis)
            ax.axhline(0, color="0.5", lw=0.5)
            xlabel = "tokens seen" if axis == "tokens" else "checkpoint, in training order"
            ax.set(xlabel=xlabel, ylabel=f"median {score} over layers", title=f"{score} over training")
        handles, _ = axes[row, -1].get_legend_handles_labels()
        axes[row, -1].legend(handles=handles + extra, fontsize=8, loc="center left", bbox_to_anchor=(1.02, 0.5))
    plotting.message_title(fig, words.trajectories_title(ds))
    fig.tight_layout()
    return fig


def continued_training(ds: xr.Dataset):
    """The continued-training figure (module docstring): one panel per series."""
    crossing = scale.series_of(ds, "cross")
    fig, axes = plt.subplots(1, max(1, len(crossing)), figsize=(5 * max(1, len(crossing)), 3.6), squeeze=False)
    for ax, series in zip(axes[0], crossing):
        table = scale.before_and_after(ds, series)
        role = str(scale.select(ds, "cross", series)["role"].values[0])
        for _, row in table.iterrows():
            ax.plot([0, 1], [row["before"], row["after"]], "o-", color=COLORS[role], alpha=0.7)
        ax.set_xticks([0, 1], ["before", "after"])
        ax.axhline(0, color="0.5", lw=0.5)
        ax.set(ylabel="median symmetry over layers", title=series)
    plotting.message_title(fig, words.cross_title(ds))
    fig.tight_layout()
    return fig
