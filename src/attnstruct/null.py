"""Null distributions of the scores: what unstructured matrices score, so that structure can be told apart.

Ensembles (one ``d_model x d_model`` matrix per draw):

* ``gaussian``: i.i.d. N(0, 1) entries;
* ``factors H=h, layer``: ``sum_h W_q[h]^T W_k[h]`` with independent Gaussian factors, ``d_head = d_model / h``
  (what an untrained layer with ``h`` heads scores);
* ``factors H=h, head``: the first head's ``W_q[0]^T W_k[0]`` of the same draws (rank ``d_head``).

Each (ensemble, d_model) cell has its own generator seeded from ``(seed, ensemble index, d_model)``, so a
cell's draws do not depend on which other cells are computed.

For the verdicts (:mod:`attnstruct.evidence`): :func:`null_median_over_layers` draws the median over a model's
layers of that ensemble, :func:`null_difference` the difference of two such models, and :func:`compare_with_null`
places a value in a null sample (percentile, z, 95% range).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import xarray as xr
from tqdm import tqdm

from ._arrays import finite_vector
from .progress import hidden
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


# ------------------------------------------------------------------ a value against its null (the verdicts)

SCORES = ("symmetry", "directionality")


@dataclass(frozen=True)
class NullComparison:
    """Where ``value`` sits in ``n_null`` null samples (see :func:`compare_with_null`)."""

    value: float
    percentile: float
    z: float
    null_low: float
    null_high: float
    null_median: float
    n_null: int

    @property
    def outside(self) -> bool:
        """``value`` lies outside the null's 95% range ``[null_low, null_high]``."""
        return self.value < self.null_low or self.value > self.null_high


def compare_with_null(value: float, null_samples) -> NullComparison:
    """``value`` against ``null_samples`` ``[k]`` (finite, ``k >= 2``).

    ``percentile = 100 (below + equal / 2) / k``; ``z = (value - mean) / std`` (ddof 1; ``+-inf`` or NaN for a
    null without spread); ``null_low``, ``null_high``: its 2.5% and 97.5% quantiles (``np.quantile``).
    """
    value = float(finite_vector([value], "value", min_n=1)[0])
    null = finite_vector(null_samples, "null_samples")
    below, equal = np.count_nonzero(null < value), np.count_nonzero(null == value)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = float(np.float64(value - null.mean()) / null.std(ddof=1))
    low, median, high = np.quantile(null, [0.025, 0.5, 0.975])
    percentile = 100.0 * (below + 0.5 * equal) / len(null)
    return NullComparison(float(value), percentile, z, float(low), float(high), float(median), len(null))


@functools.lru_cache(maxsize=16)
def _layer_draws(d_model: int, n_heads: int, n_draws: int, seed: int) -> np.ndarray:
    """``[2, n_draws]``: symmetry and directionality of the ``factors H=n_heads, layer`` ensemble's draws."""
    gen = generator(seed, 1, d_model)  # that ensemble's cell in null_distribution([d_model], [n_heads], ...)
    out = np.empty((2, n_draws))
    for k in range(n_draws):
        s = factor_scores(*random_factors(n_heads, d_model // n_heads, d_model, gen), sum_heads=True)
        out[:, k] = float(s.symmetry), float(s.directionality)
    return out


def null_median_over_layers(
    score: str, d_model: int, n_heads: int, n_layers: int, *, n_draws: int = 400, seed: int = 0
) -> np.ndarray:
    """``[n_draws]`` samples of the median ``score`` over ``n_layers`` independent random layers.

    A layer is a draw of :func:`attnstruct.null.null_distribution`'s ensemble ``f"factors H={n_heads}, layer"``
    (``sum_h W_q[h]^T W_k[h]``, Gaussian factors): the draws of ``null_distribution([d_model], [n_heads],
    n_draws * n_layers, seed)`` bit for bit, sample ``i`` the median of draws ``i * n_layers .. (i+1) * n_layers
    - 1``. Only that ensemble is drawn (at half the cost or less), both scores cached: about 1 s per 100 draws
    at ``d_model = 256`` on one core, 0.1 s at 64.
    """
    if score not in SCORES:
        raise ValueError(f"unknown score {score!r}; choose one of {SCORES}")
    for name, v, least in (
        ("d_model", d_model, 1),
        ("n_heads", n_heads, 1),
        ("n_layers", n_layers, 1),
        ("n_draws", n_draws, 2),
    ):
        if int(v) != v or v < least:
            raise ValueError(f"{name} must be an integer >= {least}, got {v!r}")
    if d_model % n_heads:
        raise ValueError(f"d_model ({d_model}) must be a multiple of n_heads ({n_heads})")
    draws = _layer_draws(int(d_model), int(n_heads), int(n_draws * n_layers), int(seed))[SCORES.index(score)]
    return np.median(draws.reshape(int(n_draws), int(n_layers)), axis=1)


def null_difference(null_a, null_b, *, seed: int = 0) -> np.ndarray:
    """Samples of ``A - B`` for independent ``A``, ``B``: ``null_a - null_b[perm]``, ``perm`` a random permutation
    from ``np.random.default_rng(seed)``; both ``[k]``, finite, of the same length."""
    a, b = finite_vector(null_a, "null_a"), finite_vector(null_b, "null_b")
    if len(a) != len(b):
        raise ValueError(f"null_a and null_b must have the same length, got {len(a)} and {len(b)}")
    return a - b[np.random.default_rng(seed).permutation(len(b))]
