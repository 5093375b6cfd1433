"""One figure style for the whole project, and byte-reproducible figure files.

Colours follow the paper: navy for encoders (bidirectional), purple for decoders (autoregressive).
``savefig`` strips the creation date and software version from PNG and PDF metadata, so a rerun with the
same data writes identical files.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns

from .results import write_atomically

ENCODER_COLOR = "#1f2f7a"  # navy
DECODER_COLOR = "#7b2f9e"  # purple
CROSS_COLOR = "#2a9d8f"  # teal, for encoder-decoder cross-attention
NEUTRAL_COLOR = "#7f7f7f"
ROLE_COLORS = {"encoder": ENCODER_COLOR, "decoder": DECODER_COLOR, "cross": CROSS_COLOR}
MATRIX_CMAP = "RdBu_r"  # diverging, centred on 0

_METADATA = {
    "png": {"Software": None},
    "pdf": {"Creator": None, "Producer": None, "CreationDate": None},
    "svg": {"Date": None, "Creator": None},
}


def set_style(context: str = "paper", font_scale: float = 1.2) -> None:
    """Apply the project style; ``context="talk"`` scales it up for lecture slides."""
    sns.set_theme(
        context=context,
        style="ticks",
        palette=[ENCODER_COLOR, DECODER_COLOR, CROSS_COLOR, NEUTRAL_COLOR],
        font_scale=font_scale,
        rc={
            "figure.dpi": 100,
            "savefig.dpi": 150,
            "savefig.bbox": "tight",
            "axes.spines.top": False,
            "axes.spines.right": False,
            "axes.titleweight": "bold",
            "image.cmap": MATRIX_CMAP,
            "svg.hashsalt": "attnstruct",
            "legend.frameon": False,
        },
    )


def savefig(fig: mpl.figure.Figure, path: str | os.PathLike, formats: Sequence[str] = ("png", "pdf")) -> list[Path]:
    """Save ``fig`` as ``path`` with each suffix in ``formats``, with fixed metadata, each file written atomically
    (:func:`attnstruct.results.write_atomically`); returns the files written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    written = []
    for fmt in formats:
        if fmt not in _METADATA:
            raise ValueError(f"unsupported figure format {fmt!r}; choose from {sorted(_METADATA)}")
        target = path.with_suffix(f".{fmt}")
        write_atomically(target, lambda tmp, fmt=fmt: fig.savefig(tmp, format=fmt, metadata=_METADATA[fmt]))
        written.append(target)
    return written


def matrix_heatmap(
    ax: mpl.axes.Axes, m, *, title: str | None = None, colorbar: bool = True, limit: float | None = None
):
    """Draw a square matrix with a diverging map centred on 0 (symmetric colour limits)."""
    m = np.asarray(m, dtype=float)
    vmax = limit if limit is not None else float(np.abs(m).max()) or 1.0
    image = ax.imshow(m, cmap=MATRIX_CMAP, vmin=-vmax, vmax=vmax, interpolation="nearest")
    ax.set_xticks([])
    ax.set_yticks([])
    for spine in ax.spines.values():
        spine.set_visible(False)
    if title:
        ax.set_title(title)
    if colorbar:
        ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    return image


def reported_points(ax: mpl.axes.Axes, reference, role: str, score: str, color: str):
    """The authors' reported medians of ``score`` for ``role`` against parameters: faint open circles, labelled as
    reported by the paper (``reference``: :func:`attnstruct.pretrained.reference_table` or a subset)."""
    rows = reference[reference.role == role]
    return ax.scatter(
        rows.n_params,
        rows[f"{score}_median"],
        s=14,
        facecolors="none",
        edgecolors=color,
        alpha=0.35,
        label=f"{role}s, reported by the paper",
    )


def signed(value: float, digits: int = 2) -> str:
    """``+0.12`` / ``-0.12`` with rounding first, so that tiny negatives print as ``+0.00`` rather than ``-0.00``."""
    return f"{round(float(value), digits) + 0.0:+.{digits}f}"


def close(fig: mpl.figure.Figure) -> None:
    """Close a figure once it is shown and saved (keeps notebook memory flat)."""
    plt.close(fig)
