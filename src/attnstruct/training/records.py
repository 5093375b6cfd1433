"""What a training run logs at each record step, and the run's dataset built from it.

At every record step the engine appends the symmetry and directionality of every layer's
``W_qk = sum_h W_q^h (W_k^h)^T`` (in the model's ``nn.Linear`` weights ``sum_h W_q[h]^T W_k[h]``) and of every
head's ``W_q^h (W_k^h)^T`` (from the factors, :func:`attnstruct.factor_scores`, so no ``d_model x d_model``
matrix is formed), the mean training loss since the previous record, the learning rate, and the task's
evaluations (NaN at record steps without an evaluation).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import xarray as xr
from torch import nn

from ..scores import factor_scores
from .model import query_key_factors

SCORED_MATRIX = (
    "W_qk = sum_h W_q^h (W_k^h)^T per layer (and W_q^h (W_k^h)^T per head); in nn.Linear weights "
    "sum_h W_q[h]^T W_k[h]; biases left out"
)


@dataclass
class Records:
    """Lists with one entry per record step; saved inside checkpoints (``asdict``) and restored from them.

    ``evaluations`` maps each of the task's evaluation names (e.g. ``val_loss``) to its values.
    """

    step: list[int] = field(default_factory=list)
    symmetry_layer: list[list[float]] = field(default_factory=list)
    directionality_layer: list[list[float]] = field(default_factory=list)
    head_symmetry: list[list[list[float]]] = field(default_factory=list)
    head_directionality: list[list[list[float]]] = field(default_factory=list)
    train_loss: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    evaluations: dict[str, list[float]] = field(default_factory=dict)
    score_seconds: float = 0.0

    def add_evaluation(self, names, values: Mapping[str, float] | None) -> None:
        """Append one value per evaluation name: from ``values``, or NaN for all when ``values`` is None."""
        for name in names:
            self.evaluations.setdefault(name, []).append(float("nan") if values is None else float(values[name]))

    def to_dataset(self, n_layers: int, n_heads: int, descriptions: Mapping[str, str]) -> xr.Dataset:
        """Scores, losses, learning rate and evaluations over ``step``, ``layer``, ``head`` (float64), no attrs.

        ``descriptions`` gives each evaluation's ``long_name``.
        """
        ds = xr.Dataset(
            {
                "symmetry": (("step", "layer"), np.asarray(self.symmetry_layer)),
                "directionality": (("step", "layer"), np.asarray(self.directionality_layer)),
                "head_symmetry": (("step", "layer", "head"), np.asarray(self.head_symmetry)),
                "head_directionality": (("step", "layer", "head"), np.asarray(self.head_directionality)),
                "train_loss": (("step",), np.asarray(self.train_loss)),
                "lr": (("step",), np.asarray(self.lr)),
            },
            coords={"step": np.asarray(self.step), "layer": np.arange(n_layers), "head": np.arange(n_heads)},
        )
        for name, description in descriptions.items():
            ds[name] = ("step", np.asarray(self.evaluations[name], dtype=float))
            ds[name].attrs["long_name"] = description
        ds["symmetry"].attrs["long_name"] = "symmetry score of the layer's W_qk (heads summed)"
        ds["directionality"].attrs["long_name"] = "directionality score of the layer's W_qk (heads summed)"
        ds["train_loss"].attrs["long_name"] = "mean training loss over the steps since the previous record (NaN at 0)"
        return ds


def record_scores(model: nn.Module, records: Records) -> None:
    """Append the per-layer (heads summed) and per-head scores of the model's current weights."""
    w_q, w_k = query_key_factors(model)
    per_layer = factor_scores(w_q, w_k, sum_heads=True)
    per_head = factor_scores(w_q, w_k)
    records.symmetry_layer.append(per_layer.symmetry.tolist())
    records.directionality_layer.append(per_layer.directionality.tolist())
    records.head_symmetry.append(per_head.symmetry.tolist())
    records.head_directionality.append(per_head.directionality.tolist())
