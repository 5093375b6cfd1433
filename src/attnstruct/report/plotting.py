"""One figure style for the whole project, and byte-reproducible figure files.

Colours follow the paper: navy for encoders (bidirectional), purple for decoders (autoregressive).
``savefig`` strips the creation date and software version from PNG and PDF metadata, so a rerun with the
same data writes identical files.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Sequence
from pathlib import Path

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns

from ..results import write_atomically

ENCODER_COLOR = "#1f2f7a"  # navy
DECODER_COLOR = "#7b2f9e"  # purple
CROSS_COLOR = "#2a9d8f"  # teal, for encoder-decoder cross-attention
VISION_COLOR = "#d17a00"  # amber, for a vision transformer's encoder (role "vision encoder")
NEUTRAL_COLOR = "#7f7f7f"
ROLE_COLORS = {"encoder": ENCODER_COLOR, "decoder": DECODER_COLOR, "cross": CROSS_COLOR, "vision encoder": VISION_COLOR}
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
    (:func:`attnstruct.results.write_atomically`); returns the files written.

    Beside them, ``<path>.layout.json`` records where the figure's titles and panels lie (:func:`figure_layout`),
    measured on the figure object as it was saved: a PNG cannot be measured again, and a test reads the record
    (:func:`read_layout`, :func:`title_faults`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    written = []
    for fmt in formats:
        if fmt not in _METADATA:
            raise ValueError(f"unsupported figure format {fmt!r}; choose from {sorted(_METADATA)}")
        target = path.with_suffix(f".{fmt}")
        write_atomically(target, lambda tmp, fmt=fmt: fig.savefig(tmp, format=fmt, metadata=_METADATA[fmt]))
        written.append(target)
    record = json.dumps(figure_layout(fig), indent=1, sort_keys=True) + "\n"
    write_atomically(layout_path(path), lambda tmp: Path(tmp).write_text(record))
    return written


def layout_path(figure: str | os.PathLike) -> Path:
    """The layout record beside the figure ``figure`` (any of its files, or its path without a suffix)."""
    figure = Path(figure)
    return figure.with_name(f"{figure.name.split('.')[0]}.layout.json")


def _box(bbox) -> list[float]:
    return [round(float(v), 2) for v in (bbox.x0, bbox.y0, bbox.x1, bbox.y1)]


def figure_layout(fig: mpl.figure.Figure) -> dict:
    """Where the titles and panels of ``fig`` lie once drawn, in display pixels (origin bottom left).

    ``titles``: the suptitle (``panel`` None), then each axes' title (``panel``: the index of its axes in
    ``panels``), each as ``text``, ``lines`` (its number of lines) and ``box`` (``[x0, y0, x1, y1]``), empty titles
    left out. ``panels``: per visible axes (colour bars included), the boxes of what it draws but its own title
    (the plot area, each axis with its ticks and label, its legend), kept apart because their union is a rectangle
    that a tall y-label stretches over the panel's title; then each figure legend, as one box."""
    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()

    def entry(text, panel):
        words = text.get_text()
        return {"text": words, "lines": words.count("\n") + 1, "box": _box(text.get_window_extent(renderer))} | {
            "panel": panel
        }

    def shown(text) -> bool:
        return text is not None and text.get_visible() and bool(text.get_text().strip())

    titles = [entry(fig._suptitle, None)] if shown(fig._suptitle) else []
    drawn = [ax for ax in fig.axes if ax.get_visible() and ax.get_tightbbox(renderer) is not None]
    titles += [entry(ax.title, i) for i, ax in enumerate(drawn) if shown(ax.title)]  # measured before any is hidden
    image = fig.get_tightbbox(renderer).transformed(mpl.transforms.Affine2D().scale(fig.dpi))
    panels = [_panel_parts(ax, renderer) for ax in drawn]
    panels += [[_box(legend.get_window_extent(renderer))] for legend in fig.legends]
    return {"titles": titles, "panels": panels, "image": _box(image)}


def _panel_parts(ax, renderer) -> list[list[float]]:
    """The boxes of what ``ax`` draws but its title: its plot area, each axis (ticks, tick labels, label), its
    legend; empty ones left out."""
    parts = [ax.get_window_extent(renderer)]
    parts += [axis.get_tightbbox(renderer) for axis in (ax.xaxis, ax.yaxis) if axis.get_visible()]
    legend = ax.get_legend()
    if legend is not None and legend.get_visible():
        parts.append(legend.get_window_extent(renderer))
    return [_box(part) for part in parts if part is not None and part.width > 0 and part.height > 0]


def read_layout(figure: str | os.PathLike) -> dict:
    """The layout record that :func:`savefig` wrote beside ``figure``."""
    return json.loads(layout_path(figure).read_text())


# Boxes that share less than this (pixels at 100 dpi) in either direction only touch: a text's box includes its
# font's ascent and descent, white space above and below the glyphs.
OVERLAP_PIXELS = 3.0


def title_faults(layout: dict) -> list[str]:
    """What keeps the titles of a figure's ``layout`` (:func:`figure_layout`) from being read, one line each (empty
    when they can be): a title of more than :data:`TITLE_LINES` lines; a panel's title that stacks more than
    ``TITLE_LINES + 1`` lines over its panel with the figure title (which says the message; a panel's title under
    it names the panel); a title cut short (ending in "…", as :func:`message_title` cuts one that
    does not fit); a title outside the saved image (``image``: the figure's tight box, what bbox "tight" saves);
    and each panel a title's box overlaps (by :data:`OVERLAP_PIXELS` or more both ways), and for the figure's
    title each panel's title it overlaps."""
    faults = []
    panels = layout["panels"]
    above = max((t["lines"] for t in layout["titles"] if t["panel"] is None), default=0)
    for title in layout["titles"]:
        name = " ".join(title["text"].split())
        name = name if len(name) <= 60 else name[:57] + "..."
        if title["lines"] > TITLE_LINES:
            faults.append(f"title {name!r} has {title['lines']} lines")
        elif title["panel"] is not None and above and above + title["lines"] > TITLE_LINES + 1:
            faults.append(f"title {name!r} has {title['lines']} lines under a figure title of {above}")
        if title["text"].rstrip().endswith("…"):
            faults.append(f"title {name!r} is cut short")
        x0, y0, x1, y1 = title["box"]
        left, bottom, right, top = layout["image"]
        if (
            x0 < left - OVERLAP_PIXELS
            or y0 < bottom - OVERLAP_PIXELS
            or x1 > right + OVERLAP_PIXELS
            or y1 > top + OVERLAP_PIXELS
        ):
            faults.append(f"title {name!r} lies outside the saved image")
        for i, parts in enumerate(panels, 1):
            if any(
                min(x1, a1) - max(x0, a0) >= OVERLAP_PIXELS and min(y1, b1) - max(y0, b0) >= OVERLAP_PIXELS
                for a0, b0, a1, b1 in parts
            ):
                faults.append(f"title {name!r} overlaps panel {i} of {len(panels)}")
        if title["panel"] is None:  # the figure's title also clears the panels' titles
            for other in (t for t in layout["titles"] if t["panel"] is not None):
                a0, b0, a1, b1 = other["box"]
                if min(x1, a1) - max(x0, a0) >= OVERLAP_PIXELS and min(y1, b1) - max(y0, b0) >= OVERLAP_PIXELS:
                    faults.append(f"title {name!r} overlaps the title of panel {other['panel'] + 1}")
    return faults


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


def reported_points(ax: mpl.axes.Axes, reference, role: str, score: str, color: str, *, filled: bool = False):
    """The authors' reported medians of ``score`` for ``role`` against parameters: faint open circles (``filled``:
    small pale filled dots, to sit behind large edged markers of ours), labelled as reported by the paper
    (``reference``: :func:`attnstruct.reference.reference_table` or a subset)."""
    rows = reference[reference.role == role]
    style = {"s": 16, "color": color, "alpha": 0.3, "linewidths": 0} if filled else {"s": 14, "alpha": 0.35}
    if not filled:
        style |= {"facecolors": "none", "edgecolors": color}
    return ax.scatter(rows.n_params, rows[f"{score}_median"], label=f"{role}s, reported by the paper", **style)


# Markers that stay distinguishable when filled and edged (one per model in a legend).
MODEL_MARKERS = ("D", "s", "^", "v", "P", "X", "p", "h", "<", ">", "*", "8")


# The paper's two self-attention roles, in the order they are drawn; a vision encoder's stacks are drawn after them.
MAIN_ROLES = ("encoder", "decoder")
VISION = "vision encoder"
# Two stacks of one model (an encoder-decoder) drawn this factor apart along the log size axis.
STACK_DODGE = {"encoder": 10**-0.03, "decoder": 10**0.03}


def _our_stacks(ax: mpl.axes.Axes, own, score: str, markers: dict, label: str) -> None:
    """Our stacks ``own`` (rows with a ``group``: encoder, decoder or vision encoder, drawn in their order) as edged
    markers with interquartile bars in the group's colour; ``markers`` per model (one legend entry per stack) or
    empty (circles and one legend entry per group)."""
    stacks_of = own.groupby("model")["stack"].nunique() if len(own) else {}
    for row in own.itertuples():
        median, q25, q75 = (getattr(row, f"{score}_{k}") for k in ("median", "q25", "q75"))
        dodge = STACK_DODGE[row.stack] if stacks_of[row.model] > 1 else 1.0
        ax.errorbar(
            row.n_params * dodge,
            median,
            yerr=[[median - q25], [q75 - median]],
            fmt=markers.get(row.model, "o"),
            color=ROLE_COLORS[row.group],
            ms=9 if markers else 7,
            mec="black",
            mew=0.8,
            capsize=3,
            zorder=3,
            label=f"{row.model}, {row.group} stack ({label})" if markers else f"{row.group} stacks ({label})",
        )


def _drawn_stacks(summary) -> object:
    """The self-attention stacks of ``summary`` with their ``group`` (a vision encoder's stacks ``vision encoder``,
    else the stack; cross-attention left out), encoders and decoders first, then vision encoders."""
    roles = (summary["role"] if "role" in summary.columns else summary["stack"]).to_numpy()
    own = summary.assign(group=np.where(roles == VISION, VISION, summary["stack"].to_numpy()))
    own = own[own["stack"].isin(MAIN_ROLES).to_numpy()]
    return own.iloc[np.argsort((own["group"] == VISION).to_numpy(), kind="stable")]


def main_figure(
    summary,
    reference,
    *,
    caveat_rows: bool = False,
    markers_per_model: bool | None = None,
    label: str = "this notebook",
) -> mpl.figure.Figure:
    """The paper's main figure: per stack, the median score over layers with interquartile bars against the number
    of parameters, symmetry left and directionality right, encoders navy and decoders purple (a vision encoder's
    stacks, role ``vision encoder``, amber: a group of their own), and the authors' reported values drawn behind ours.

    Args:
        summary: our stacks, one row each (:func:`attnstruct.analyses.pretrained_scores.stack_summary`: ``model``,
            ``stack``, ``n_params``, ``{score}_median``, ``{score}_q25``, ``{score}_q75``); ``cross`` rows are left
            out.
            The two self-attention stacks of one model are drawn :data:`STACK_DODGE` apart.
        reference: the authors' rows (:func:`attnstruct.reference.reference_table`: ``role``, ``n_params``,
            ``{score}_median``, ``caveats``), all families: those without a caveat as small pale dots.
        caveat_rows: also draw the rows with a known caveat (open circles, labelled as such); else leave them out.
        markers_per_model: one marker shape per model of ours (:data:`MODEL_MARKERS`) and a legend entry per stack;
            else circles and one legend entry per role. None: per model when there are at most as many models as
            shapes.
        label: how our points are labelled in the legend.

    Returns the figure (two axes sharing the log size axis), its legend right of the second axis, ours first.
    """
    own = _drawn_stacks(summary)
    models = list(dict.fromkeys(own["model"]))
    if markers_per_model is None:
        markers_per_model = len(models) <= len(MODEL_MARKERS)
    markers = dict(zip(models, itertools.cycle(MODEL_MARKERS))) if markers_per_model else {}
    caveated = reference["caveats"].notna()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharex=True)
    for ax, score in zip(axes, ("symmetry", "directionality"), strict=True):
        for role in MAIN_ROLES:
            reported_points(ax, reference[~caveated], role, score, ROLE_COLORS[role], filled=True)
            if caveat_rows:
                points = reported_points(ax, reference[caveated], role, score, ROLE_COLORS[role])
                points.set_label(f"{role}s with a known caveat, reported by the paper")
        _our_stacks(ax, own, score, markers, label)
        ax.axhline(0, color="black", lw=0.8)
        ax.set_xscale("log")
        ax.set_xlabel("parameters")
        ax.set_title(f"{score} (median over layers, IQR)")
    axes[0].set_ylabel("score")
    handles, labels = axes[0].get_legend_handles_labels()
    unique = dict(zip(labels, handles))  # one entry per label (a role's stacks share theirs)
    order = sorted(unique, key=lambda text: "reported by the paper" in text)  # ours first
    axes[1].legend([unique[t] for t in order], order, loc="center left", bbox_to_anchor=(1.0, 0.5))
    return fig


# Colours of the authors' entries by caveat, in the point-by-point comparison with theirs (notebook 08).
CAVEAT_COLORS = {
    "no known caveat": NEUTRAL_COLOR,
    "gqa_head_pairing_suspect": "#e76f51",
    "fused_qkv_branch_suspect": "#e9c46a",
    "other caveat": CROSS_COLOR,
}


def robust_limit(m, percentile: float = 99.0) -> float:
    """The ``percentile`` of ``|m|`` (any shape), a colour limit that a few huge entries cannot wash out; 1.0 for
    an all-zero ``m``."""
    return float(np.percentile(np.abs(np.asarray(m, dtype=float)), percentile)) or 1.0


def robust_limits(values, percentile: float = 95.0, pad: float = 0.25) -> tuple[float, float]:
    """Axis limits for ``values`` (any shape, NaN ignored) that a few spikes cannot set: the central ``percentile``
    range widened by ``pad`` of its width each side, always including 0 (the reference line)."""
    v = np.asarray(values, dtype=float)
    low, high = np.nanpercentile(v, [(100 - percentile) / 2, (100 + percentile) / 2])
    low, high = min(float(low), 0.0), max(float(high), 0.0)
    width = (high - low) or 1.0
    return (low - pad * width if low < 0 else 0.0), (high + pad * width if high > 0 else 0.0)


def mirror_pairs(ax: mpl.axes.Axes, m, *, color: str, label: str, max_points: int = 20_000, seed: int = 0):
    """Each off-diagonal entry ``M[i, j]`` (``i < j``) against its mirror ``M[j, i]``, both divided by the standard
    deviation of the off-diagonal entries; ``m``: ``[d, d]``.

    A symmetric matrix puts the points on the diagonal ``y = x``, a skew-symmetric one on ``y = -x``, an
    unstructured one in a round cloud. Returns the Pearson correlation of the pairs, close to the symmetry score
    of ``m`` with its diagonal set to 0 (exactly that when both triangles have mean 0 and equal spread). At most
    ``max_points`` pairs are drawn, picked by ``np.random.default_rng(seed)`` (the correlation uses all of them);
    the points are rasterised, so that a PDF stays small.
    """
    m = np.asarray(m, dtype=float)
    upper, lower = m[np.triu_indices(len(m), 1)], m.T[np.triu_indices(len(m), 1)]
    scale = np.concatenate([upper, lower]).std() or 1.0
    pick = np.random.default_rng(seed).permutation(len(upper))[:max_points]
    ax.scatter(upper[pick] / scale, lower[pick] / scale, s=2, alpha=0.15, color=color, linewidths=0, rasterized=True)
    ax.scatter([], [], s=12, color=color, label=label)  # an opaque legend marker
    return float(np.corrcoef(upper, lower)[0, 1])


def norm_profile(ax: mpl.axes.Axes, m, *, color: str, label: str, num_std: float = 2.0, top: int = 40) -> None:
    """The ``top`` largest column norms (solid) and row norms (dashed) of ``m`` ``[d, d]``, in decreasing order, each
    divided by its own threshold ``tau = mean + num_std * std`` (unbiased std) as directionality uses it
    (:func:`attnstruct.scores.directionality_score`): points above 1 are the outliers whose excess ``r - tau``
    (rows, ``R``) or ``c - tau`` (columns, ``C``) enters ``(R - C) / (R + C)``."""
    m = np.asarray(m, dtype=float)
    for axis, style, what in ((0, "-", "columns"), (1, "--", "rows")):
        norms = np.linalg.norm(m, axis=axis)
        tau = norms.mean() + num_std * norms.std(ddof=1)
        ax.plot(
            np.arange(1, min(top, len(norms)) + 1),
            np.sort(norms)[::-1][:top] / tau,
            style,
            color=color,
            marker=".",
            label=f"{label}: {what}",
        )
    ax.axhline(1.0, color="black", lw=0.8)


def quartiles(values, over: Sequence[str] = ("seed", "layer")) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The 25%, 50% and 75% quantiles of an ``xarray.DataArray`` pooled over the dims ``over``, along the dim left
    (``step``, say): three arrays, the band and its middle line of a score over training."""
    q = values.stack(sample=tuple(over)).quantile([0.25, 0.5, 0.75], dim="sample").values
    return q[0], q[1], q[2]


def null_band(ax: mpl.axes.Axes, samples, label: str) -> None:
    """The null ``samples`` ``[k]`` as a grey band (central 95%) and a dashed line (median), both labelled with
    ``label``: the chance level a score is read against."""
    low, high = np.quantile(samples, [0.025, 0.975])
    ax.axhspan(low, high, color="0.88", lw=0, zorder=0, label=f"{label}: 95% band")
    ax.axhline(np.median(samples), color="0.45", ls="--", lw=1, zorder=1, label=f"{label}: median")


def title_width(fig: mpl.figure.Figure, fontsize: float) -> int:
    """How many characters of a bold title of ``fontsize`` points fit across ``fig`` (about 0.62 em each)."""
    return max(20, int(fig.get_figwidth() * 72 / (0.62 * fontsize)))


TITLE_LINES = 2  # a message title's most lines: above a small plot, a longer one would dwarf it
TITLE_MIN_POINTS = 8.0  # the smallest font a message title shrinks to before it is shortened
TITLE_GAP_POINTS = 6.0  # between a message title's last line and the panels under it


def message_title(fig: mpl.figure.Figure, text: str, **kwargs) -> mpl.text.Text:
    """Give ``fig`` its message title: one line (or two) above every panel that says what the figure shows, its
    finding in words, with any number in it computed from the data drawn (a template of the notebook filled with
    its facts by :func:`attnstruct.report.prose.fill`).

    Each line of ``text`` longer than the figure is wide (:func:`title_width`) is wrapped at word boundaries, so a
    title never widens the saved image; a title that would take more than :data:`TITLE_LINES` lines is set in a
    smaller font (down to :data:`TITLE_MIN_POINTS`), and one that still would is cut at a word, ending in "…".
    The title sits at the top of the figure and the panels below it: a layout engine (constrained, or a later
    ``fig.tight_layout()``) makes room for it; without one the top margin is set from the title's height, its
    lines (``y`` and ``va`` in ``kwargs`` are ignored)."""
    import textwrap

    from matplotlib.font_manager import FontProperties

    kwargs = {"fontsize": "large"} | {k: v for k, v in kwargs.items() if k not in ("y", "va", "verticalalignment")}
    size = FontProperties(size=kwargs["fontsize"]).get_size_in_points()

    def wrapped(points: float) -> list[str]:
        width = title_width(fig, points)
        return [part for line in text.split("\n") for part in (textwrap.wrap(line, width) or [""])]

    lines = wrapped(size)
    while len(lines) > TITLE_LINES and size > TITLE_MIN_POINTS:
        size = max(TITLE_MIN_POINTS, size * 0.9)
        lines = wrapped(size)
    if len(lines) > TITLE_LINES:
        rest = " ".join(lines[TITLE_LINES - 1 :])
        lines = [*lines[: TITLE_LINES - 1], textwrap.shorten(rest, title_width(fig, size), placeholder=" …")]
    title = fig.suptitle("\n".join(lines), **(kwargs | {"fontsize": size, "fontweight": "bold"}))
    if fig.get_layout_engine() is None:  # constrained and tight layout make room for a suptitle themselves
        _make_room_under(fig, title)
    return title


def _make_room_under(fig: mpl.figure.Figure, title: mpl.text.Text, tries: int = 3) -> None:
    """Lower the top of ``fig``'s subplot grid until everything its panels draw ends :data:`TITLE_GAP_POINTS`
    below ``title``: the top margin follows the title's height, that is its number of lines."""
    gap = TITLE_GAP_POINTS * fig.dpi / 72
    height = fig.get_figheight() * fig.dpi
    for _ in range(tries):
        fig.draw_without_rendering()
        renderer = fig.canvas.get_renderer()
        boxes = [ax.get_tightbbox(renderer) for ax in fig.axes if ax.get_visible()]
        reach = max((box.y1 for box in boxes if box is not None), default=0.0)
        overlap = reach + gap - title.get_window_extent(renderer).y0
        if overlap <= 0:
            return
        fig.subplots_adjust(top=fig.subplotpars.top - overlap / height)


def licence_note(fig: mpl.figure.Figure, models: str) -> mpl.text.Text:
    """Write under ``fig`` (outside its panels; the tight bounding box of :func:`set_style` keeps it in the saved
    image) that it draws checkpoints whose licence forbids commercial use, naming ``models``."""
    return fig.text(
        0.01,
        -0.01,
        f"Draws non-commercial checkpoints (licences forbid commercial use): {models}",
        fontsize=8,
        va="top",
        ha="left",
        color="0.3",
        style="italic",
    )


def median_and_range(ax: mpl.axes.Axes, values, color: str, style: str = "-", label: str | None = None) -> None:
    """The median over seeds (line) and the range over seeds (band) of ``values``, an ``xarray.DataArray``
    ``[seed, step]``."""
    ax.plot(values.step, values.median("seed"), style, color=color, label=label)
    ax.fill_between(values.step, values.min("seed"), values.max("seed"), color=color, alpha=0.15, lw=0)


def energy_shares(m) -> tuple[float, float]:
    """``(||M_s||^2, ||M_n||^2) / ||M||^2``: the shares of the squared Frobenius norm of ``m`` ``[d, d]`` in its
    symmetric and skew-symmetric parts; they add up to 1, and their difference is the symmetry score."""
    m = np.asarray(m, dtype=float)
    total = float((m**2).sum()) or 1.0
    return float((((m + m.T) / 2) ** 2).sum() / total), float((((m - m.T) / 2) ** 2).sum() / total)


def symmetric_and_skew(axes: Sequence[mpl.axes.Axes], m, *, size: int, percentile: float = 99.0, label: str = ""):
    """The top-left ``size`` block of the symmetric part ``M_s`` (first axes) and of the skew part ``M_n`` (second)
    of ``m`` ``[d, d]``, on one diverging colour scale centred at 0 and clipped at the ``percentile`` of the block's
    ``|M|``, each titled with its share of the whole matrix's energy (:func:`energy_shares`): the part that carries
    more energy shows the stronger colours; ``label`` (the layer's name, say) opens both titles. Returns the second
    image (for a shared colour bar)."""
    m = np.asarray(m, dtype=float)
    shares = energy_shares(m)
    corner = m[:size, :size]
    limit = robust_limit(corner, percentile)
    parts = ((corner + corner.T) / 2, (corner - corner.T) / 2)
    names = ("symmetric part $M_s$", "skew part $M_n$")
    for ax, part, name, share in zip(axes, parts, names, shares, strict=True):
        image = matrix_heatmap(ax, part, colorbar=False, limit=limit)
        ax.set_title(f"{label}{name}: {100 * share:.0f}% of $\\|M\\|_F^2$", fontsize=11)
    return image


def coefficient_heatmap(ax: mpl.axes.Axes, beta, *, percentile: float = 95.0, title: str | None = None):
    """Summed coefficients ``beta`` ``[query, context]`` on a diverging scale centred at 0 and clipped at the
    ``percentile`` of the ``|beta|`` of the pairs that occur (colour bar arrows mark the clipped entries), so that
    a few large coefficients cannot wash out the rest; pairs whose coefficient is exactly 0 (a pair the objective
    never uses) are drawn grey. Returns the image."""
    beta = np.asarray(beta, dtype=float)
    used = beta != 0
    limit = robust_limit(beta[used], percentile) if used.any() else 1.0
    cmap = mpl.colormaps[MATRIX_CMAP].with_extremes(bad="0.6")
    image = ax.imshow(np.ma.masked_where(~used, beta), cmap=cmap, vmin=-limit, vmax=limit, interpolation="nearest")
    for spine in ax.spines.values():
        spine.set_visible(False)
    if title:
        ax.set_title(title)
    ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04, extend="both")
    return image


def close(fig: mpl.figure.Figure) -> None:
    """Close a figure once it is shown and saved (keeps notebook memory flat)."""
    plt.close(fig)
