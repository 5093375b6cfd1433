"""The null ensembles of the two scores: what unstructured matrices score, shared by notebooks 01 and 02 and read
by the handouts.

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
import xarray as xr
from tqdm import tqdm

from ..random_matrices import gaussian, generator, random_factors
from ..report.progress import bar_disabled
from ..scores import DEFAULT_NUM_STD, factor_scores, scores


def _positive_ints(values: Sequence[int], name: str) -> list[int]:
    out = [int(v) for v in values]
    if not out or any(v < 1 for v in out) or any(v != w for v, w in zip(out, values)):
        raise ValueError(f"{name} must be a non-empty list of positive integers, got {list(values)!r}")
    return out


def check_draw_count(n_draws: int) -> None:
    """A ``ValueError`` unless ``n_draws`` is an integer of at least 2 (a quantile over draws needs two)."""
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
    check_draw_count(n_draws)
    ensembles = ["gaussian"] + [f"factors H={h}, {scope}" for h in n_heads for scope in ("layer", "head")]
    heads_of = [0] + [h for h in n_heads for _ in range(2)]
    sym = np.full((len(ensembles), len(d_models), n_draws), np.nan)
    direc = np.full_like(sym, np.nan)
    cells = [(e, i) for e in range(len(ensembles)) for i in range(len(d_models)) if e == 0 or e % 2 == 1]
    for e, i in tqdm(cells, desc="null distributions", disable=bar_disabled(progress)):
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


def null_quartiles(null: xr.Dataset) -> pd.DataFrame:
    """The quartiles over draws of both scores, one row per (ensemble, d_model) cell of :func:`null_distribution`."""
    table = null.quantile([0.25, 0.5, 0.75], dim="draw").to_dataframe()[["symmetry", "directionality"]]
    return table.unstack("quantile")
