"""The one schema of every output of scores, and :func:`tidy`, any of them as the long table.

``attnstruct score --out FILE.nc``, the sweep's ``models/*.nc`` and ``sweep.nc``, and
:meth:`attnstruct.ModelScores.to_xarray` are one dataset layout (:func:`attnstruct.checkpoints.tables.model_dataset`,
over ``(model, stack, layer[, head])``); ``attnstruct score --out FILE.csv`` and :attr:`attnstruct.ModelScores.table`
are one long table (:data:`TABLE_COLUMNS`: one row per model, stack, layer and head, ``head`` empty for the layer
matrix). :data:`SCHEMA` names every variable and coordinate with its dims, dtype and meaning (the table of
``docs/command-line.md``).

A dataset's ``to_dataframe()`` spans the whole grid, ``model x stack x layer[ x head]``, and carries the
per-model coordinates that are NaN where unknown (``n_params``, ``step``, ``tokens``, ``phase``, a hub's calls):
``.dropna()`` on it drops every row of a model with one unknown. :func:`tidy` gives the blocks that exist instead.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr

from .extract.blocks import STACKS

# name: (dims in a dataset, dtype, meaning). Coordinates along ``model`` are per model.
SCHEMA = {
    "symmetry": (("model", "stack", "layer"), "float64", "symmetry score of the layer matrix; NaN: no block"),
    "directionality": (("model", "stack", "layer"), "float64", "directionality score of the layer matrix"),
    "head_symmetry": (("model", "stack", "layer", "head"), "float64", "each head's symmetry (--per-head)"),
    "head_directionality": (("model", "stack", "layer", "head"), "float64", "each head's directionality"),
    "n_heads": (("model", "stack", "layer"), "int64", "query heads of the block; 0: no block"),
    "n_kv_heads": (("model", "stack", "layer"), "int64", "key heads (fewer under grouped-query attention)"),
    "d_model": (("model", "stack", "layer"), "int64", "width of the residual stream the block reads"),
    "d_head": (("model", "stack", "layer"), "int64", "width of one head's query and key"),
    "causal": (("model", "stack", "layer"), "bool", "whether the block's attention is causal"),
    "extras": (("model", "stack"), "str", "extra logit terms of the stack's blocks, comma-separated"),
    "model": (("model",), "str", "the name the model was scored under (path, packaged name, hub id)"),
    "stack": (("stack",), "str", "encoder, decoder or cross (in that order)"),
    "layer": (("layer",), "int64", "layer number within the stack"),
    "head": (("head",), "int64", "head number (--per-head)"),
    "role": (("model",), "str", "encoder, decoder, encoder-decoder or vision encoder, from the stacks and family"),
    "family": (("model",), "str", "the model's own type, its config's model_type (whisper, qwen3)"),
    "reader": (("model",), "str", "the code that read its weights (BART, LLaMA, TransformerLens)"),
    "n_params": (("model",), "float64", "parameter count; NaN: unknown"),
    "source": (("model",), "str", "how it was had: zoo, local, module, ranges, ..."),
    "location": (("model",), "str", "where: a path, a hub id or a URL"),
    "revision": (("model",), "str", "the revision named, ORG/NAME@REV; empty for none"),
    "commit": (("model",), "str", "the commit a hub model was read at"),
    "step": (("model",), "float64", "training step of the revision; NaN: unknown"),
    "tokens": (("model",), "float64", "training tokens of the revision; NaN: unknown"),
    "phase": (("model",), "float64", "training phase of the revision; NaN: unknown"),
    "bytes_fetched": (("model",), "float64", "bytes read from the network"),
    "weights_sha256": (("model",), "str", "digest of a hub model's weights as the hub states it"),
    "resolver_calls": (("model",), "float64", "hub requests in the resolver bucket; NaN: not a hub model"),
    "api_calls": (("model",), "float64", "hub requests in the API bucket; NaN: not a hub model"),
    "relative_depth": (("model", "layer"), "float64", "layer / deepest layer of the model"),
}

# The long table: ``attnstruct score --out FILE.csv``, :attr:`attnstruct.ModelScores.table`, :func:`tidy`.
TABLE_COLUMNS = (
    "model",
    "stack",
    "layer",
    "head",
    "symmetry",
    "directionality",
    "n_heads",
    "n_kv_heads",
    "d_model",
    "d_head",
    "causal",
    "family",
    "reader",
    "extras",
)
TABLE_DTYPES = {
    **{k: "object" for k in ("model", "stack", "family", "reader", "extras")},
    **{k: "int64" for k in ("layer", "n_heads", "n_kv_heads", "d_model", "d_head")},
    "head": "Int64",
    "symmetry": "float64",
    "directionality": "float64",
    "causal": "bool",
}


def tidy(ds: xr.Dataset) -> pd.DataFrame:
    """Any dataset of :data:`SCHEMA` (a ``score --out`` file, a sweep's model file or ``sweep.nc``, or
    :meth:`~attnstruct.ModelScores.to_xarray`) as the long table :data:`TABLE_COLUMNS`: per model, stack (encoder,
    decoder, cross) and layer that has a block, its layer row (``head`` ``<NA>``), then its heads' rows when the
    dataset has per-head scores. ``extras`` is the stack's (the dataset keeps it per stack)."""
    rows = []
    heads = "head_symmetry" in ds
    stacks = [s for s in STACKS if s in set(ds["stack"].values)]
    for m, model in enumerate(ds["model"].values):
        meta = {k: str(ds[k].values[m]) for k in ("family", "reader")}
        for stack in stacks:
            cell = ds.isel(model=m).sel(stack=stack)
            for layer in np.flatnonzero(cell["symmetry"].notnull().values):
                block = cell.isel(layer=layer)
                shape = {k: int(block[k]) for k in ("n_heads", "n_kv_heads", "d_model", "d_head")}
                where = {"model": str(model), "stack": stack, "layer": int(block["layer"])}
                more = {**shape, "causal": bool(block["causal"]), **meta, "extras": str(block["extras"].values)}
                rows.append(
                    {
                        **where,
                        "head": pd.NA,
                        "symmetry": float(block["symmetry"]),
                        "directionality": float(block["directionality"]),
                        **more,
                    }
                )
                if heads:
                    for h in range(shape["n_heads"]):
                        sym, direc = float(block["head_symmetry"][h]), float(block["head_directionality"][h])
                        rows.append({**where, "head": h, "symmetry": sym, "directionality": direc, **more})
    return pd.DataFrame(rows, columns=list(TABLE_COLUMNS)).astype(TABLE_DTYPES)
