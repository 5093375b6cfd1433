"""Notebook 03, section 6: which layers' ``W_qk`` to show, and what each shows, in sentences computed from it.

:func:`example_layers` picks, over all models of a dataset, the encoder-stack layer whose symmetry is nearest the
median of the encoder layers and the decoder-stack layer whose directionality is nearest the median of the decoder
layers: a typical layer of each role, not its extreme; each :class:`Example` carries its whole layer matrix and the
median and range of its role. :func:`describe_choice` states where the shown layers lie among their roles';
:func:`mirror_correlation`, :func:`diagonal_share` and :func:`outlying_norms` are the readings of the matrix that
the figure draws; :func:`describe_examples` states them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import xarray as xr

from ..checkpoints.extract import AttentionBlock
from ..conventions import DEFAULT_NUM_STD
from ..report import prose
from ..scores import row_column_excess
from .extraction_checks import wqk_corner

# (stack, score): the layer of that stack whose score is nearest the median of the stack's layers.
CHOICES = (("encoder", "symmetry"), ("decoder", "directionality"))


@dataclass(frozen=True)
class Example:
    """One layer's matrix ``[d_model, d_model]`` and why it was chosen: its ``score`` is ``value``, the nearest to
    ``median`` among the stack's layers (``scope``: ``"encoder layers"``, or ``"encoder layers 3"`` when one layer
    index was given), whose scores run from ``low`` to ``high``."""

    score: str
    model: str
    stack: str
    layer: int
    value: float
    scope: str
    matrix: np.ndarray
    median: float = float("nan")
    low: float = float("nan")
    high: float = float("nan")

    def title(self) -> str:
        """Two lines for the figure: the layer, then its score and the median it was chosen by."""
        return (
            f"{self.model}, {self.stack} layer {self.layer}\n"
            f"{self.score} {prose.signed(self.value)} (median of the {self.scope} {prose.signed(self.median)})"
        )


def nearest_median(values: xr.DataArray) -> tuple[str, int, float, float, float, float]:
    """The ``(model, layer)`` of ``values`` ``[model, layer]`` whose value is nearest the median ``q`` of all finite
    values, ``argmin_{m, l} |v_{m,l} - q|`` (ties: the first in model-then-layer order), with ``(value, q, min,
    max)``; NaN skipped. With an even count ``q`` is the mean of the middle two, so either of them may be chosen."""
    grid = values.transpose("model", "layer").values.astype(float)
    finite = grid[np.isfinite(grid)]
    median = float(np.median(finite))
    distance = np.where(np.isfinite(grid), np.abs(grid - median), np.inf)
    i, j = np.unravel_index(int(np.argmin(distance)), grid.shape)
    model, layer = str(values.model.values[i]), int(values.layer.values[j])
    return model, layer, float(grid[i, j]), median, float(finite.min()), float(finite.max())


def example_layers(
    ds: xr.Dataset, blocks: Mapping[str, Sequence[AttentionBlock]], layer: int | None = None
) -> list[Example]:
    """One :class:`Example` per entry of :data:`CHOICES` whose stack ``ds`` has: over all models (and, with
    ``layer``, among the layers of that index only), the layer whose score is nearest the median of those layers
    (:func:`nearest_median`), a typical layer of its role rather than its extreme. ``ds``: ``symmetry`` and
    ``directionality`` over ``[model, stack, layer]``; ``blocks``: each model's blocks (the matrix is
    :func:`attnstruct.analyses.extraction_checks.wqk_corner` of the whole width)."""
    examples = []
    for stack, score in CHOICES:
        if stack not in ds["stack"].values:
            continue
        values = ds[score].sel(stack=stack)
        if layer is not None:
            values = values.sel(layer=[layer])
        if bool(values.isnull().all()):
            continue
        model, index, value, median, low, high = nearest_median(values)
        block = next(b for b in blocks[model] if b.stack == stack and b.layer == index)
        examples.append(
            Example(
                score,
                model,
                stack,
                index,
                value,
                f"{stack} layers" + ("" if layer is None else f" {layer}"),
                wqk_corner(block, block.w_q.shape[-1]),
                median,
                low,
                high,
            )
        )
    return examples


def describe_choice(examples: Sequence[Example]) -> str:
    """One line: each shown layer's score beside the median and range of its role's layers."""
    parts = [
        f"{e.model}, {e.stack} layer {e.layer}: {e.score} {prose.signed(e.value)} against a median of "
        f"{prose.signed(e.median)} over the {e.scope} (range {prose.span([e.low, e.high])})"
        for e in examples
    ]
    return "Layers shown, each nearest its role's median: " + "; ".join(parts) + "."


def mirror_correlation(m) -> float:
    """Pearson correlation of the off-diagonal entries ``M[i, j]`` (``i < j``) with their mirrors ``M[j, i]``; ``m``
    ``[d, d]``. +1 for a symmetric matrix, -1 for a skew-symmetric one, near 0 for an unstructured one (what
    :func:`attnstruct.report.plotting.mirror_pairs` draws)."""
    m = np.asarray(m, dtype=float)
    upper = np.triu_indices(len(m), 1)
    return float(np.corrcoef(m[upper], m.T[upper])[0, 1])


def diagonal_share(m) -> float:
    """``sum_i M_ii^2 / ||M||_F^2``: the part of the squared norm on the diagonal, which counts fully towards
    symmetry (a diagonal entry is its own mirror)."""
    m = np.asarray(m, dtype=float)
    return float((np.diag(m) ** 2).sum() / (m**2).sum())


def outlying_norms(m, num_std: float = DEFAULT_NUM_STD) -> dict[str, float]:
    """The column and row norms of ``m`` ``[d, d]`` that directionality reads: how many lie above their threshold
    ``mean + num_std * std`` (unbiased; ``columns_over``, ``rows_over``), the summed excess ``C`` and ``R``
    (:func:`attnstruct.scores.row_column_excess`), and the largest norm over the mean norm (``column_ratio``,
    ``row_ratio``)."""
    m = np.asarray(m, dtype=float)
    cols, rows = np.linalg.norm(m, axis=0), np.linalg.norm(m, axis=1)
    r_excess, c_excess = (float(v) for v in row_column_excess(m, num_std=num_std))
    over = [int((v > v.mean() + num_std * v.std(ddof=1)).sum()) for v in (cols, rows)]
    return {
        "columns_over": over[0],
        "rows_over": over[1],
        "C": c_excess,
        "R": r_excess,
        "column_ratio": float(cols.max() / cols.mean()),
        "row_ratio": float(rows.max() / rows.mean()),
    }


# Below this largest-over-mean column norm, dominant columns do not stand out as stripes in a heat map.
STRIPE_RATIO = 2.0


def _describe_symmetric(example: Example, others: Sequence[Example]) -> str:
    m = example.matrix
    against = f", against {prose.signed(mirror_correlation(others[0].matrix))} in the decoder layer" if others else ""
    return (
        f"an entry and its mirror image are correlated ({prose.signed(mirror_correlation(m))}{against}). Its "
        f"diagonal, which counts fully towards symmetry, carries {prose.percent(diagonal_share(m))} of "
        f"$\\|M\\|_F^2$, and {prose.percent(float((np.diag(m) > 0).mean()))} of its diagonal entries are positive."
    )


def _describe_directional(example: Example) -> str:
    n = outlying_norms(example.matrix)
    small = n["column_ratio"] < STRIPE_RATIO
    largest = "Yet its largest column norm is only" if small else "Its largest column norm is"
    stripes = (
        ", so the dominant columns hardly stand out in a heat map: directionality weighs the columns' excess "
        "against the rows', not against the bulk of the matrix. The norm profile shows it."
        if small
        else ", enough for the dominant columns to show as stripes where they fall inside the block."
    )
    return (
        f"{n['columns_over']} column norms and {n['rows_over']} row norms lie above their thresholds, with a summed "
        f"excess $C$ = {n['C']:.3g} for the columns against $R$ = {n['R']:.3g} for the rows, and $(R - C)/(R + C)$ "
        f"is the score. {largest} {prose.number(n['column_ratio'])} times the mean column norm "
        f"(rows: {prose.number(n['row_ratio'])} times the mean){stripes}"
    )


def describe_examples(examples: Sequence[Example]) -> list[str]:
    """One Markdown paragraph per example: for the symmetric one, the mirror correlation (beside the other
    examples'), the diagonal's share of the squared norm and its positive entries; for the directional one, the
    outlying norms, ``C`` against ``R``, and whether the largest column norm stands out (:data:`STRIPE_RATIO`)."""
    lines = []
    for example in examples:
        where = f"**{example.model}, {example.stack} layer {example.layer}**"
        head = f"{where} ({example.score} {prose.signed(example.value)}): "
        if example.score == "symmetry":
            lines.append(head + _describe_symmetric(example, [e for e in examples if e is not example]))
        else:
            lines.append(head + _describe_directional(example))
    return lines
