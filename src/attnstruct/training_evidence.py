"""The verdicts of the training notebooks (05, 06): which claims the runs support, with intervals and nulls.

Every function takes a combined dataset of runs (:func:`attnstruct.many_runs.combine`: dims ``objective``,
``seed``, ``step``, ``layer`` and maybe ``init``) and reduces each run to one number per seed before any
statistics, since the seed is the independent unit (:mod:`attnstruct.evidence`). Layers are pooled by their
median, as the paper does for a model. The null of a score is that of an untrained layer of the same shape:
``sum_h W_q[h]^T W_k[h]`` with Gaussian factors, ``n_heads`` heads of width ``d_model / n_heads``, the median over
``n_layers`` such layers (:func:`attnstruct.evidence.null_median_over_layers`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import xarray as xr

from . import evidence


def final_median(ds: xr.Dataset, score: str) -> xr.DataArray:
    """The median over layers of ``score`` at the last record of every run: ``[objective, (init,) seed]``."""
    return ds[score].isel(step=-1).median("layer")


def transient(ds: xr.Dataset, score: str = "symmetry") -> pd.DataFrame:
    """Per run: the peak of the median over layers of ``score`` during training, the step of the peak, the final
    value and ``decay = peak - final`` (how much of its peak the run lost by the end)."""
    median = ds[score].median("layer")
    peak_index = median.fillna(-np.inf).argmax("step")
    table = xr.Dataset(
        {
            "peak": median.max("step"),
            "peak_step": ds["step"].isel(step=peak_index).drop_vars("step"),
            "final": median.isel(step=-1),
        }
    ).to_dataframe()
    table = table[["peak", "peak_step", "final"]]
    table["decay"] = table["peak"] - table["final"]
    return table


@dataclass(frozen=True)
class Shape:
    """The attention shape whose untrained layers make the null."""

    d_model: int
    n_heads: int
    n_layers: int

    def null(self, score: str, n_draws: int, seed: int) -> np.ndarray:
        return evidence.null_median_over_layers(
            score, self.d_model, self.n_heads, self.n_layers, n_draws=n_draws, seed=seed
        )


def _per_seed(values: xr.DataArray) -> np.ndarray:
    return np.asarray(values.transpose("seed").values, dtype=float)


def difference_effect(
    treated: xr.DataArray,
    baseline: xr.DataArray,
    *,
    claim: str,
    score: str,
    shape: Shape,
    predicted_sign: int = +1,
    n_draws: int = 400,
    seed: int = 0,
) -> evidence.Effect:
    """``treated - baseline`` per seed (both ``[seed]``, paired by seed) against the null of the same difference
    between two untrained models of ``shape`` (independent draws)."""
    null = evidence.null_difference(shape.null(score, n_draws, seed), shape.null(score, n_draws, seed + 1), seed=seed)
    return evidence.paired_effect(
        _per_seed(treated),
        _per_seed(baseline.sel(seed=treated.seed)),
        claim=claim,
        predicted_sign=predicted_sign,
        null_samples=null,
        seed=seed,
    )


def against_null_effect(
    values: xr.DataArray,
    *,
    claim: str,
    score: str,
    shape: Shape,
    predicted_sign: int,
    n_draws: int = 400,
    seed: int = 0,
) -> evidence.Effect:
    """A model's score per seed (``[seed]``) against an untrained model of ``shape``: the difference from the null's
    median, with the null's spread (centred on 0) as the null comparison."""
    null = shape.null(score, n_draws, seed)
    centre = float(np.median(null))
    values = _per_seed(values)
    return evidence.paired_effect(
        values,
        np.full_like(values, centre),
        claim=claim,
        predicted_sign=predicted_sign,
        null_samples=null - centre,
        seed=seed,
    )


def objective_effects(
    ds: xr.Dataset,
    shape: Shape,
    *,
    encoder: str = "mlm",
    decoder: str = "next-token",
    n_draws: int = 400,
    seed: int = 0,
) -> list[evidence.Effect]:
    """The paper's three claims about encoders and decoders trained from scratch, at the end of training:

    1. the encoder ends more symmetric than the decoder (encoder minus decoder median symmetry > 0);
    2. the decoder ends more column-dominant (encoder minus decoder median directionality > 0);
    3. the decoder's directionality is negative beyond an untrained layer's (decoder minus null median < 0).
    """
    for name in (encoder, decoder):
        if name not in ds.objective.values:
            raise ValueError(f"objective {name!r} is not in the runs ({list(map(str, ds.objective.values))})")
    gaps = [
        difference_effect(
            final_median(ds, score).sel(objective=encoder),
            final_median(ds, score).sel(objective=decoder),
            score=score,
            shape=shape,
            claim=f"encoder minus decoder, final median {score}",
            n_draws=n_draws,
            seed=seed,
        )
        for score in ("symmetry", "directionality")
    ]
    decoder_direction = against_null_effect(
        final_median(ds, "directionality").sel(objective=decoder),
        score="directionality",
        shape=shape,
        predicted_sign=-1,
        claim="decoder final median directionality minus an untrained layer's",
        n_draws=n_draws,
        seed=seed,
    )
    return [*gaps, decoder_direction]


def decay_effects(ds: xr.Dataset, objectives=None, seed: int = 0) -> list[evidence.Effect]:
    """Per objective: did the median symmetry fall from its peak by the end (peak minus final > 0)?"""
    table = transient(ds).reset_index()
    effects = []
    for objective in objectives or [str(o) for o in ds.objective.values]:
        rows = table[table["objective"] == objective].sort_values("seed")
        effects.append(
            evidence.paired_effect(
                rows["peak"].to_numpy(),
                rows["final"].to_numpy(),
                seed=seed,
                claim=f"{objective}: peak minus final median symmetry",
            )
        )
    return effects


def speedup_effects(speedups: pd.DataFrame, placebo: str = "bert", seed: int = 0) -> list[evidence.Effect]:
    """Per objective and treated initialisation: its speed-ups (one per seed) against the placebo's.

    ``speedups``: columns ``objective``, ``init``, ``seed``, ``speedup`` (NaN: never reached the baseline's final
    loss); the rows of ``init == placebo`` are the baseline-against-baseline pairs of different seeds.
    """
    effects = []
    for objective, rows in speedups.groupby("objective", sort=False):
        control = rows.loc[rows["init"] == placebo, "speedup"].to_numpy(dtype=float)
        for init, treated in rows[rows["init"] != placebo].groupby("init", sort=False):
            effects.append(
                evidence.speedup_against_placebo(
                    treated["speedup"].to_numpy(dtype=float),
                    control,
                    seed=seed,
                    claim=f"{objective}: speed-up of {init} minus the placebo's",
                )
            )
    return effects
