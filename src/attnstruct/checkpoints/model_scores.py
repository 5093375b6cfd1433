"""``attnstruct.score``: the scores of any model, as one tidy table and as the sweep's per-model dataset.

``x`` is whatever :func:`attnstruct.checkpoints.resolve.open_checkpoint` opens (a path, a packaged name, a hub id
``ORG/NAME[@REVISION]``, a transformers model in memory), a ``state_dict`` with ``config=`` or ``family=`` and
``n_heads=``, or a TransformerLens ``HookedTransformer`` (:mod:`attnstruct.checkpoints.in_memory`).

The table (:attr:`ModelScores.table`) is long: one row per model, stack, layer and head, ``head`` ``<NA>`` for the
layer matrix (the sum over heads that the paper's tables report), each head's own matrix in the rows with a head
number (``per_head=True``). Columns: :data:`~.schema.TABLE_COLUMNS`. ``family`` is the model's own type
(``whisper``, ``qwen3``), ``reader`` the extraction family that read its weights (``BART``, ``LLaMA``), or
``TransformerLens``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path

import pandas as pd
import torch

from ..devices import DeviceError, resolve_device
from ..results import save_dataset, write_atomically
from ..scores import DEFAULT_NUM_STD
from .in_memory import (
    is_state_dict,
    is_transformer_lens,
    state_dict_checkpoint,
    transformer_lens_checkpoint,
)
from .resolve import open_checkpoint
from .schema import TABLE_COLUMNS, TABLE_DTYPES
from .scoring import _naming, block_precision, score_opened
from .tables import checkpoint_dataset, reader_of


def long_table(wide: pd.DataFrame, *, model: str, family: str, reader: str) -> pd.DataFrame:
    """:func:`~attnstruct.checkpoints.scoring.score_blocks`' table (one row per block, per-head arrays in cells) as
    :data:`~.schema.TABLE_COLUMNS`: each block's layer row (``head`` ``<NA>``), then its head rows when it has
    them."""
    rows = []
    for block in wide.itertuples(index=False):
        meta = {
            "n_heads": block.n_heads,
            "n_kv_heads": block.n_kv_heads,
            "d_model": block.d_model,
            "d_head": block.d_head,
            "causal": bool(block.causal),
            "family": family,
            "reader": reader,
            "extras": block.extras,
        }
        where = {"model": model, "stack": block.stack, "layer": block.layer}
        rows.append(
            {**where, "head": pd.NA, "symmetry": block.symmetry, "directionality": block.directionality, **meta}
        )
        heads = zip(getattr(block, "head_symmetry", ()), getattr(block, "head_directionality", ()), strict=True)
        for h, (sym, direc) in enumerate(heads):
            rows.append({**where, "head": h, "symmetry": float(sym), "directionality": float(direc), **meta})
    return pd.DataFrame(rows, columns=list(TABLE_COLUMNS)).astype(TABLE_DTYPES)


class ModelScores:
    """The scores of one model: :attr:`table` (long form, module docstring) and :meth:`to_xarray`, the per-model
    dataset the sweep writes (:func:`attnstruct.checkpoints.tables.model_dataset`)."""

    def __init__(self, table: pd.DataFrame, dataset, *, per_head: bool):
        self.table = table
        self.per_head = per_head
        self._dataset = dataset

    @property
    def model(self) -> str:
        return str(self.table["model"].iloc[0])

    def to_xarray(self):
        """The per-model dataset over ``(model=1, stack, layer[, head])`` (a copy)."""
        return self._dataset.copy()

    def save(self, out: str | os.PathLike, *, attrs: Mapping | None = None) -> Path:
        """Write ``out`` atomically: ``.csv`` as :attr:`table` (scores with 6 decimals, ``head`` empty on the layer
        rows), ``.nc`` as :meth:`to_xarray` with ``attrs``. Raises ``ValueError`` for any other suffix."""
        out = Path(out)
        if out.suffix == ".nc":
            dataset = self.to_xarray()
            dataset.attrs = dict(attrs or {})
            return save_dataset(dataset, out)
        if out.suffix != ".csv":
            raise ValueError(f"--out must end in .csv or .nc, got {out.name}")
        return write_atomically(out, lambda tmp: self.table.to_csv(tmp, index=False, float_format="%.6f"))

    def __repr__(self) -> str:
        layers = self.table[self.table["head"].isna()]
        first = layers.iloc[0]
        kind = f"{first['family'] or 'unknown type'}, read as {first['reader'] or 'its format'}"
        heads = "per head and per layer" if self.per_head else "per layer"
        shown = layers[["stack", "layer", "n_heads", "symmetry", "directionality"]]
        body = shown.to_string(index=False, max_rows=12, float_format=lambda v: f"{v:+.3f}")
        return f"ModelScores of {self.model} ({kind}): {len(layers)} blocks scored {heads}\n{body}"


def _opened(x, *, config, family, n_heads):
    """A context yielding the :class:`~attnstruct.checkpoints.resolve.Checkpoint` of ``x`` (module docstring)."""
    if is_state_dict(x):
        return contextlib.nullcontext(state_dict_checkpoint(x, config=config, family=family, n_heads=n_heads))
    if config is not None or family is not None:
        raise ValueError("config= and family= are for a state_dict; a model or checkpoint says its own")
    if is_transformer_lens(x):
        return contextlib.nullcontext(transformer_lens_checkpoint(x))
    return open_checkpoint(x, n_heads=n_heads)


def score(
    x,
    per_head: bool = False,
    *,
    config=None,
    family: str | None = None,
    n_heads: int | None = None,
    name: str | None = None,
    num_std: float = DEFAULT_NUM_STD,
    precision: str = "auto",
    device: str | torch.device = "auto",
    progress=False,
) -> ModelScores:
    """Score every attention block of ``x`` (module docstring): the layer matrices, and each head's with
    ``per_head``.

    ``name``: the model's name in the table and dataset (default: the path, packaged name or hub id; a model's
    class or TransformerLens ``model_name``; ``state_dict``). ``precision`` (``auto``, ``float64``, ``float32``) and
    ``device`` (``auto``, ``cpu``, ``cuda``) as :func:`~attnstruct.checkpoints.scoring.score_blocks`.

    Raises :class:`~attnstruct.checkpoints.extract.ExtractionError` (one line naming ``x`` where it has a name) for
    whatever is wrong with the model, a ``state_dict`` without ``config`` or ``family`` among them.
    """
    block_precision(1, precision)
    resolve_device(device)
    try:
        with _opened(x, config=config, family=family, n_heads=n_heads) as checkpoint:
            wide = score_opened(
                checkpoint, per_head=per_head, num_std=num_std, precision=precision, device=device, progress=progress
            )
            model = name or checkpoint.name
            dataset = checkpoint_dataset(model, checkpoint, wide)
            reader = reader_of(checkpoint)
            table = long_table(wide, model=model, family=checkpoint.model_type, reader=reader)
    except ValueError as err:  # ExtractionError, a reader's or the scores' ValueError: named by the path or id
        if isinstance(err, DeviceError) or not isinstance(x, (str, os.PathLike)):
            raise
        raise _naming(err, x) from None
    return ModelScores(table, dataset, per_head=per_head)
