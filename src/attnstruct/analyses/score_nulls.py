"""Notebook 02: the two scores' conventions and invariants, what unstructured matrices score, how directionality
depends on its threshold, and per-head against summed scores.

Null ensembles (one ``d_model x d_model`` matrix per draw, :func:`null_distribution`):

* ``gaussian``: i.i.d. N(0, 1) entries;
* ``factors H=h, layer``: ``sum_h W_q[h]^T W_k[h]`` with independent Gaussian factors, ``d_head = d_model / h``
  (what an untrained layer with ``h`` heads scores);
* ``factors H=h, head``: the first head's ``W_q[0]^T W_k[0]`` of the same draws (rank ``d_head``).

Each (ensemble, d_model) cell has its own generator seeded from ``(seed, ensemble index, d_model)``, so a cell's
draws do not depend on which other cells are computed. The verdicts of the other notebooks read the layer ensemble
through :mod:`attnstruct.stats.nulls`, which draws it bit for bit as here.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch
import xarray as xr
from tqdm import tqdm

from ..random_matrices import example_matrix, gaussian, generator, random_factors, tied_factors
from ..report import prose
from ..report.progress import hidden
from ..scores import DEFAULT_NUM_STD, directionality_score, factor_scores, scores, symmetry_score


def _positive_ints(values: Sequence[int], name: str) -> list[int]:
    out = [int(v) for v in values]
    if not out or any(v < 1 for v in out) or any(v != w for v, w in zip(out, values)):
        raise ValueError(f"{name} must be a non-empty list of positive integers, got {list(values)!r}")
    return out


def _check_draws(n_draws: int) -> None:
    if int(n_draws) != n_draws or n_draws < 2:
        raise ValueError(f"n_draws must be an integer >= 2, got {n_draws!r}")


def null_distribution(
    d_models: Sequence[int],
    n_heads: Sequence[int],
    n_draws: int,
    seed: int,
    *,
    num_std: float = DEFAULT_NUM_STD,
    progress: bool = False,
) -> xr.Dataset:
    """Scores of unstructured matrices: ``symmetry`` and ``directionality`` over ``(ensemble, d_model, draw)``.

    Cells where ``d_model`` is not divisible by ``H`` are NaN.
    """
    d_models = _positive_ints(d_models, "d_models")
    n_heads = _positive_ints(n_heads, "n_heads")
    _check_draws(n_draws)
    ensembles = ["gaussian"] + [f"factors H={h}, {scope}" for h in n_heads for scope in ("layer", "head")]
    heads_of = [0] + [h for h in n_heads for _ in range(2)]
    sym = np.full((len(ensembles), len(d_models), n_draws), np.nan)
    direc = np.full_like(sym, np.nan)
    cells = [(e, i) for e in range(len(ensembles)) for i in range(len(d_models)) if e == 0 or e % 2 == 1]
    for e, i in tqdm(cells, desc="null distributions", disable=hidden(progress)):
        d = d_models[i]
        gen = generator(seed, e, d)
        if e == 0:
            for k in range(n_draws):
                s = scores(gaussian(d, gen), num_std=num_std)
                sym[e, i, k], direc[e, i, k] = s.symmetry, s.directionality
            continue
        h = heads_of[e]
        if d % h:
            continue
        for k in range(n_draws):
            w_q, w_k = random_factors(h, d // h, d, gen)
            layer = factor_scores(w_q, w_k, sum_heads=True, num_std=num_std)
            head = factor_scores(w_q[0], w_k[0], num_std=num_std)
            sym[e, i, k], direc[e, i, k] = layer.symmetry, layer.directionality
            sym[e + 1, i, k], direc[e + 1, i, k] = head.symmetry, head.directionality
    coords = {
        "ensemble": ensembles,
        "d_model": d_models,
        "draw": np.arange(n_draws),
        "n_heads": ("ensemble", heads_of),
    }
    dims = ("ensemble", "d_model", "draw")
    return xr.Dataset({"symmetry": (dims, sym), "directionality": (dims, direc)}, coords=coords)


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
    _check_draws(n_draws)
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
    _check_draws(n_draws)
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


def null_quartiles(null: xr.Dataset) -> pd.DataFrame:
    """The quartiles over draws of both scores, one row per (ensemble, d_model) cell of :func:`null_distribution`."""
    table = null.quantile([0.25, 0.5, 0.75], dim="draw").to_dataframe()[["symmetry", "directionality"]]
    return table.unstack("quantile")


def directionality_spread(null: xr.Dataset, d_model: int) -> pd.DataFrame:
    """The interquartile range of directionality at width ``d_model``: ``low``, ``high`` per ensemble that has
    draws there."""
    q = null.directionality.sel(d_model=d_model).quantile([0.25, 0.75], dim="draw")
    rows = {str(e): q.sel(ensemble=e).values for e in null.ensemble.values}
    return pd.DataFrame({e: {"low": lo, "high": hi} for e, (lo, hi) in rows.items() if np.isfinite(lo)}).T


def _iqr_by_width(null: xr.Dataset, low, high, digits: int) -> str:
    pairs = zip(null.d_model.values, low.values, high.values, strict=True)
    return "; ".join(f"{prose.signed(lo, digits)} to {prose.signed(hi, digits)} at $d$ = {d}" for d, lo, hi in pairs)


def describe_spread(null: xr.Dataset) -> str:
    """Per width: the interquartile range of one random layer's directionality (the lowest first and the highest
    third quartile over the layer ensembles), the same for an i.i.d. Gaussian matrix, and the layers' symmetry."""
    layers = [e for e in null.ensemble.values if str(e).endswith(", layer")]
    layer_q = null.sel(ensemble=layers).quantile([0.25, 0.75], dim="draw")
    gauss_q = null.sel(ensemble="gaussian").quantile([0.25, 0.75], dim="draw")

    def layer_iqr(var, digits=2):
        q = layer_q[var]
        return _iqr_by_width(null, q.sel(quantile=0.25).min("ensemble"), q.sel(quantile=0.75).max("ensemble"), digits)

    heads = sorted({int(h) for h in null.n_heads.values if h > 0})
    gauss = _iqr_by_width(null, gauss_q.directionality.sel(quantile=0.25), gauss_q.directionality.sel(quantile=0.75), 2)
    return (
        f"Measured in this run ({prose.count(null.sizes['draw'], 'draw')} per cell), the interquartile range of one "
        f"random layer's directionality lies within {layer_iqr('directionality')} (the lowest first and highest third "
        f"quartile over the layer ensembles, H = {', '.join(str(h) for h in heads)}); for an i.i.d. Gaussian matrix "
        f"it is {gauss}. The layer ensembles' symmetry: {layer_iqr('symmetry', 3)}."
    )


def layer_minus_head(tying: xr.Dataset) -> xr.DataArray:
    """Per ``theta`` of :func:`tying_sweep`: the median over draws of the layer's symmetry minus its heads' mean."""
    return (tying.symmetry - tying.head_symmetry.mean("head")).median("draw")


def dataset(null: xr.Dataset, sweep: xr.Dataset, tying: xr.Dataset, invariant_table: pd.DataFrame) -> xr.Dataset:
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
