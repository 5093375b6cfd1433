"""Null distributions of the scores: what unstructured matrices score, so that structure can be told apart.

Ensembles (one ``d_model x d_model`` matrix per draw):

* ``gaussian``: i.i.d. N(0, 1) entries;
* ``factors H=h, layer``: ``sum_h W_q[h]^T W_k[h]`` with independent Gaussian factors, ``d_head = d_model / h``
  (what an untrained layer with ``h`` heads scores);
* ``factors H=h, head``: the first head's ``W_q[0]^T W_k[0]`` of the same draws (rank ``d_head``).

Each (ensemble, d_model) cell has its own generator seeded from ``(seed, ensemble index, d_model)``, so a
cell's draws do not depend on which other cells are computed.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import xarray as xr
from tqdm import tqdm

from .scores import DEFAULT_NUM_STD, directionality_score, factor_scores, scores, symmetry_score
from .toys import example_matrix, gaussian, generator, random_factors, tied_factors


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
    for e, i in tqdm(cells, desc="null distributions", disable=not progress):
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
    """Per-head versus layer symmetry for partly tied factors (:func:`attnstruct.toys.tied_factors`).

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
