"""Notebook 02: the two scores' conventions and invariants, how directionality depends on its threshold, per-head
against summed scores, and the facts its sentences and figure titles state about the null ensembles (drawn by
:mod:`attnstruct.analyses.null_ensembles`, which notebook 01 shares).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
import xarray as xr

from ..random_matrices import example_matrix, gaussian, generator, tied_factors
from ..report.prose import count, number, signed, span
from ..scores import directionality_score, factor_scores, scores, symmetry_score
from .null_ensembles import check_draw_count

SCORES = ("symmetry", "directionality")


def num_std_sweep(
    d_model: int,
    num_stds: Sequence[float],
    n_draws: int,
    seed: int,
    *,
    gains: Sequence[float] = (2.0, 4.0, 8.0),
    n_outliers: int = 3,
) -> xr.Dataset:
    """Directionality against the threshold ``num_std`` for null and planted-structure matrices.

    Ensembles: ``gaussian``; ``columns xg`` / ``rows xg``: Gaussian with ``n_outliers`` columns / rows scaled by
    ``g``. Returns ``directionality`` over ``(ensemble, num_std, draw)`` and the ``symmetry`` of each draw over
    ``(ensemble, draw)``.
    """
    check_draw_count(n_draws)
    if d_model < 2 or n_outliers < 1 or n_outliers >= d_model:
        raise ValueError(f"need d_model >= 2 and 1 <= n_outliers < d_model, got {d_model} and {n_outliers}")
    stds = [float(s) for s in num_stds]
    if not stds:
        raise ValueError("num_stds must not be empty")
    ensembles = ["gaussian"] + [f"{kind} x{g:g}" for kind in ("columns", "rows") for g in gains]
    direc = np.empty((len(ensembles), len(stds), n_draws))
    sym = np.empty((len(ensembles), n_draws))
    for e, name in enumerate(ensembles):
        gen = generator(seed, e, d_model)
        kind, _, gain = name.partition(" x")
        for k in range(n_draws):
            if kind == "gaussian":
                m = gaussian(d_model, gen)
            else:
                m = example_matrix(kind, d_model, gen, n_outliers=n_outliers, gain=float(gain))
            sym[e, k] = symmetry_score(m)
            for j, s in enumerate(stds):
                direc[e, j, k] = directionality_score(m, num_std=s)
    coords = {"ensemble": ensembles, "num_std": stds, "draw": np.arange(n_draws)}
    return xr.Dataset(
        {
            "directionality": (("ensemble", "num_std", "draw"), direc),
            "symmetry": (("ensemble", "draw"), sym),
        },
        coords=coords,
    )


def tying_sweep(thetas: Sequence[float], n_heads: int, d_model: int, n_draws: int, seed: int) -> xr.Dataset:
    """Per-head versus layer symmetry for partly tied factors (:func:`attnstruct.random_matrices.tied_factors`).

    Returns ``symmetry`` of the layer matrix ``sum_h W_q^h W_k^h^T`` over ``(theta, draw)`` and
    ``head_symmetry`` of each head's matrix over ``(theta, draw, head)``.
    """
    check_draw_count(n_draws)
    if n_heads < 1 or d_model % n_heads:
        raise ValueError(f"d_model ({d_model}) must be a positive multiple of n_heads ({n_heads})")
    thetas = [float(t) for t in thetas]
    layer = np.empty((len(thetas), n_draws))
    head = np.empty((len(thetas), n_draws, n_heads))
    for t, theta in enumerate(thetas):
        gen = generator(seed, t, d_model, n_heads)
        for k in range(n_draws):
            w_q, w_k = tied_factors(theta, n_heads, d_model // n_heads, d_model, gen)
            layer[t, k] = factor_scores(w_q, w_k, sum_heads=True).symmetry
            head[t, k] = factor_scores(w_q, w_k).symmetry.numpy()
    coords = {"theta": thetas, "draw": np.arange(n_draws), "head": np.arange(n_heads)}
    return xr.Dataset(
        {"symmetry": (("theta", "draw"), layer), "head_symmetry": (("theta", "draw", "head"), head)}, coords=coords
    )


# ---------------------------------------------------------------------------------------------- the definitions


def conventions(seed: int, d: int = 64) -> pd.DataFrame:
    """Both scores of one ``columns`` example (``example_matrix("columns", d, generator(seed, 0))``) in the paper's
    convention and in the authors' stored one (``raw``): a table over ``symmetry``, ``directionality``."""
    m = example_matrix("columns", d, generator(seed, 0))
    paper, raw = scores(m), scores(m, convention="raw")
    return pd.DataFrame(
        {
            "paper (default)": [paper.symmetry.item(), paper.directionality.item()],
            "raw (authors' storage)": [raw.symmetry.item(), raw.directionality.item()],
        },
        index=["symmetry", "directionality"],
    )


TRANSFORMS = ("M", "3 M", "-0.5 M", "M^T", "P M P^T (permutation)", "Q M Q^T (rotation)")


def invariants(seed: int, d: int = 128) -> pd.DataFrame:
    """Both scores of one ``columns`` example ``M`` (``d x d``, ``generator(seed, 1)``) and of its transforms
    (:data:`TRANSFORMS`: scalings, the transpose, a random permutation similarity ``P M P^T`` and a random rotation
    ``Q M Q^T``, drawn from the same generator after ``M``), indexed by transform."""
    gen = generator(seed, 1)
    m = example_matrix("columns", d, gen)
    q, _ = torch.linalg.qr(torch.randn(d, d, generator=gen, dtype=torch.float64))
    p = torch.eye(d, dtype=torch.float64)[torch.randperm(d, generator=gen)]
    transformed = dict(zip(TRANSFORMS, (m, 3 * m, -0.5 * m, m.T, p @ m @ p.T, q @ m @ q.T), strict=True))
    return pd.DataFrame(
        {
            name: {"symmetry": symmetry_score(x).item(), "directionality": directionality_score(x).item()}
            for name, x in transformed.items()
        }
    ).T


def unchanged(table: pd.DataFrame, score: str, names, sign: float = 1.0, tolerance: float = 1e-10) -> bool:
    """Whether ``score`` of each transform in ``names`` (rows of :func:`invariants`) equals ``sign`` times that of
    ``M``, to ``tolerance``."""
    return all(abs(table.loc[n, score] - sign * table.loc["M", score]) < tolerance for n in names)


# ---------------------------------------------------------------------------------------------- the nulls, read


def directionality_spread(null: xr.Dataset, d_model: int) -> pd.DataFrame:
    """The interquartile range of directionality at width ``d_model``: ``low``, ``high`` per ensemble that has
    draws there."""
    q = null.directionality.sel(d_model=d_model).quantile([0.25, 0.75], dim="draw")
    rows = {str(e): q.sel(ensemble=e).values for e in null.ensemble.values}
    return pd.DataFrame({e: {"low": lo, "high": hi} for e, (lo, hi) in rows.items() if np.isfinite(lo)}).T


def _iqr_by_width(null: xr.Dataset, low, high, digits: int) -> str:
    pairs = zip(null.d_model.values, low.values, high.values, strict=True)
    return "; ".join(f"{signed(lo, digits)} to {signed(hi, digits)} at $d$ = {d}" for d, lo, hi in pairs)


@dataclass(frozen=True)
class SpreadFacts:
    """The interquartile ranges of the null ensembles at every width, each ``lo to hi at $d$ = w`` joined by ``;``.

    ``layer_directionality`` and ``layer_symmetry`` span the layer ensembles (the lowest first and highest third
    quartile over them); ``gaussian_directionality`` is the i.i.d. Gaussian's; ``draws`` per cell; ``heads`` the
    head counts of the layer ensembles."""

    draws: str
    heads: str
    layer_directionality: str
    gaussian_directionality: str
    layer_symmetry: str


def spread_by_width(null: xr.Dataset) -> SpreadFacts:
    """Per width: the interquartile range of one random layer's directionality over the layer ensembles, the same
    for an i.i.d. Gaussian matrix, and the layers' symmetry (three decimals)."""
    layers = [e for e in null.ensemble.values if str(e).endswith(", layer")]
    layer_q = null.sel(ensemble=layers).quantile([0.25, 0.75], dim="draw")
    gauss_q = null.sel(ensemble="gaussian").quantile([0.25, 0.75], dim="draw")

    def layer_iqr(var, digits=2):
        q = layer_q[var]
        return _iqr_by_width(null, q.sel(quantile=0.25).min("ensemble"), q.sel(quantile=0.75).max("ensemble"), digits)

    heads = sorted({int(h) for h in null.n_heads.values if h > 0})
    gauss = _iqr_by_width(null, gauss_q.directionality.sel(quantile=0.25), gauss_q.directionality.sel(quantile=0.75), 2)
    return SpreadFacts(
        draws=count(null.sizes["draw"], "draw"),
        heads=", ".join(str(h) for h in heads),
        layer_directionality=layer_iqr("directionality"),
        gaussian_directionality=gauss,
        layer_symmetry=layer_iqr("symmetry", 3),
    )


@dataclass(frozen=True)
class WidestSpreadFacts:
    """At the largest width of the null ensembles: the widest interquartile range of each score over the ensembles
    (symmetry's to three decimals, directionality's to two)."""

    width: str
    symmetry_iqr: str
    directionality_iqr: str


def widest_spread(null: xr.Dataset) -> WidestSpreadFacts:
    """At the largest width, the widest interquartile range of each score over the ensembles."""
    widest = null.sel(d_model=null.d_model.max())
    q = widest.quantile([0.25, 0.75], dim="draw")
    iqr = {s: float((q[s].sel(quantile=0.75) - q[s].sel(quantile=0.25)).max()) for s in SCORES}
    return WidestSpreadFacts(
        width=str(int(widest.d_model)),
        symmetry_iqr=number(iqr["symmetry"], 3),
        directionality_iqr=number(iqr["directionality"]),
    )


@dataclass(frozen=True)
class ThresholdFacts:
    """Over every threshold of the sweep: the largest median of the planted-column ensembles (``columns``), the
    smallest of the planted-row ones (``rows``), and the span of the Gaussian's median (``gaussian``)."""

    columns: str
    rows: str
    gaussian: str


def threshold_extremes(sweep: xr.Dataset) -> ThresholdFacts:
    """The medians over draws of :func:`num_std_sweep` read at their extremes over the thresholds."""
    median = sweep.directionality.median("draw")
    names = [str(e) for e in sweep.ensemble.values]
    columns = float(median.sel(ensemble=[e for e in names if e.startswith("columns")]).max())
    rows = float(median.sel(ensemble=[e for e in names if e.startswith("rows")]).min())
    return ThresholdFacts(
        columns=signed(columns), rows=signed(rows), gaussian=span(median.sel(ensemble="gaussian").values)
    )


@dataclass(frozen=True)
class HeadLayerFacts:
    """The largest gap over ``theta`` between the layer's symmetry and its heads' mean (``largest``), and whether the
    layer leads at all (``layer_leads``: the largest gap is positive at two decimals)."""

    largest: str
    layer_leads: bool


def head_layer_gap(tying: xr.Dataset) -> HeadLayerFacts:
    """The largest of :func:`layer_minus_head` over ``theta``."""
    largest = float(layer_minus_head(tying).max())
    return HeadLayerFacts(largest=signed(largest), layer_leads=round(largest, 2) > 0)


def layer_minus_head(tying: xr.Dataset) -> xr.DataArray:
    """Per ``theta`` of :func:`tying_sweep`: the median over draws of the layer's symmetry minus its heads' mean."""
    return (tying.symmetry - tying.head_symmetry.mean("head")).median("draw")


def result_dataset(null: xr.Dataset, sweep: xr.Dataset, tying: xr.Dataset, invariant_table: pd.DataFrame) -> xr.Dataset:
    """Notebook 02's results in one dataset (attrs added by the notebook): the null ensembles; the threshold sweep
    (``planted``, ``sweep_directionality``, ``sweep_symmetry``); the tying sweep (``tying_symmetry``,
    ``tying_head_symmetry``); the invariants (``transform``, ``invariant_symmetry``, ``invariant_directionality``)."""
    invariant = xr.Dataset.from_dataframe(invariant_table.rename_axis("transform"))
    return xr.merge(
        [
            null,
            sweep.rename(ensemble="planted", directionality="sweep_directionality", symmetry="sweep_symmetry"),
            tying.rename(symmetry="tying_symmetry", head_symmetry="tying_head_symmetry"),
            invariant.rename(symmetry="invariant_symmetry", directionality="invariant_directionality"),
        ],
        combine_attrs="drop",
    )
