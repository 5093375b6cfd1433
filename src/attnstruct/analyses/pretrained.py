"""Notebook 03: packaged and local checkpoints scored offline, summarised per model and stack, placed among random
layers of the same shape, and saved as one dataset.

The steps, in the notebook's order: :func:`checkpoint_list` (which checkpoints, fetched or not), :func:`read_blocks`
and :func:`score_models` (the one per-model dataset of :func:`attnstruct.checkpoints.tables.model_dataset`, combined),
:func:`stack_table` (the paper's statistic per model and stack, with each stack's shape), :func:`null_comparison`
and :func:`null_sentences` (against random layers), and :func:`results_dataset` (the dataset with the nulls and its
provenance). The example matrices of section 6 are :mod:`attnstruct.analyses.example_matrices`'s; the comparison
of encoder and decoder stacks is :func:`attnstruct.analyses.paper_comparison.describe_roles`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import xarray as xr

from .. import results, stats
from ..checkpoints import tables, zoo
from ..checkpoints.extract import AttentionBlock, iter_blocks
from ..checkpoints.extract.blocks import STACKS as STACK_ORDER
from ..report import prose


def fetched_entries(models, cache_dir=None) -> list[zoo.Entry]:
    """The zoo entries of ``models`` (:func:`attnstruct.checkpoints.zoo.entries`); ``RuntimeError`` naming the fetch
    command when one of them is not fetched into ``cache_dir`` (None: the default cache)."""
    entries = zoo.entries(models)
    missing = [e.name for e in entries if not zoo.is_fetched(e.name, cache_dir)]
    if missing:
        raise RuntimeError(f"not fetched yet: {missing}; run: attnstruct fetch-models {' '.join(missing)}")
    return entries


def checkpoint_list(models, local_models: Sequence = (), cache_dir=None) -> pd.DataFrame:
    """The checkpoints to score: ``model``, ``path``, ``source`` (``zoo`` or ``local``), ``role`` (the registry's,
    or the one given with a local model, ``""`` for none: a check, :func:`attnstruct.checkpoints.tables.role_of`
    decides), ``n_params`` (the registry's, NaN for a local model: counted from the file) and ``model_type`` (the
    registry's, ``""``: read from the file where it says one).

    ``models``: a zoo selection (:func:`attnstruct.checkpoints.zoo.entries`); ``local_models``: ``[name, path]`` or
    ``[name, path, role]`` entries. Raises ``RuntimeError`` naming the fetch command when a zoo model is not
    fetched, ``ValueError`` for a role that is none of :data:`attnstruct.checkpoints.tables.ROLES`.
    """
    rows = [
        {
            "model": e.name,
            "path": zoo.path(e.name, cache_dir),
            "source": "zoo",
            "role": e.role,
            "n_params": e.n_params,
            "model_type": e.model_type,
        }
        for e in fetched_entries(models, cache_dir)
    ]
    for entry in local_models:
        if isinstance(entry, (str, bytes)) or len(entry) not in (2, 3):
            raise ValueError(f"a local model is [name, path] or [name, path, role], got {entry!r}")
        name, path, role = (*entry, "")[:3]
        if role and role not in tables.ROLES:
            raise ValueError(f"local model {name}: role must be one of {', '.join(tables.ROLES)}, not {role!r}")
        local = {"model": str(name), "path": path, "source": "local", "role": role, "n_params": math.nan}
        rows.append(local | {"model_type": ""})
    return pd.DataFrame(rows, columns=["model", "path", "source", "role", "n_params", "model_type"])


def read_blocks(checkpoints: pd.DataFrame) -> dict[str, list[AttentionBlock]]:
    """Every checkpoint's attention blocks (:func:`attnstruct.checkpoints.extract.iter_blocks`), by model name."""
    return {row.model: list(iter_blocks(row.path)) for row in checkpoints.itertuples()}


def score_models(checkpoints: pd.DataFrame, blocks: Mapping[str, Sequence[AttentionBlock]]) -> xr.Dataset:
    """The per-model datasets of :func:`attnstruct.checkpoints.tables.score_checkpoint` (float64, per head; role by
    its one rule, checked against the role listed), combined along ``model`` in the order of ``checkpoints``."""
    scored = [
        tables.score_checkpoint(
            row.path,
            name=row.model,
            blocks=blocks[row.model],
            role=row.role or None,
            n_params=None if pd.isna(row.n_params) else row.n_params,
            kind=row.source,
            model_type=row.model_type,
        )
        for row in checkpoints.itertuples()
    ]
    return tables.combine(scored)


def _extras(cell: xr.Dataset) -> set[str]:
    """The extra logit terms recorded for a (model, stack) cell (``extras``, comma-separated)."""
    if "extras" not in cell:
        return set()
    return {e for e in str(cell["extras"].values).split(",") if e}


def summary(ds: xr.Dataset) -> pd.DataFrame:
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


def block_shapes(blocks: Mapping[str, Sequence[AttentionBlock]]) -> pd.DataFrame:
    """Per model (the keys of ``blocks``) and stack: ``d_model``, ``n_heads``, ``d_head``, ``n_kv_heads`` of its
    blocks (the most common value over its layers, the smallest of ties)."""
    rows = []
    for model, model_blocks in blocks.items():
        for stack in STACK_ORDER:
            shapes = pd.DataFrame(
                [(b.w_q.shape[-1], b.n_heads, b.w_q.shape[-2], b.n_kv_heads) for b in model_blocks if b.stack == stack],
                columns=["d_model", "n_heads", "d_head", "n_kv_heads"],
            )
            if len(shapes):
                rows.append({"model": model, "stack": stack} | {k: int(shapes[k].mode()[0]) for k in shapes})
    return pd.DataFrame(rows, columns=["model", "stack", "d_model", "n_heads", "d_head", "n_kv_heads"])


def stack_table(ds: xr.Dataset, blocks: Mapping[str, Sequence[AttentionBlock]]) -> pd.DataFrame:
    """:func:`summary` of ``ds`` with each stack's shape (:func:`block_shapes`), one row per model and stack."""
    return summary(ds).merge(block_shapes(blocks), on=["model", "stack"], how="left")


def describe_caveated_stacks(table: pd.DataFrame) -> str:
    """The stacks of :func:`stack_table` that need a caveat: rotary ones (``model (stack)``) and cross-attention."""
    rotary = table[table["rotary"]]
    listed = ", ".join(f"{r.model} ({r.stack})" for r in rotary.itertuples()) or "none"
    cross = ", ".join(table.loc[table["attention"] == "cross", "model"]) or "none"
    return f"Rotary stacks in this run: {listed}. Cross-attention stacks: {cross}."


def stack_quartiles(table: pd.DataFrame) -> pd.DataFrame:
    """The self-attention rows of :func:`stack_table`, by stack then model: both medians over layers and the
    symmetry's quartiles."""
    own = table[table["attention"] == "self"].sort_values(["stack", "model"])
    columns = ["model", "stack", "symmetry_median", "symmetry_q25", "symmetry_q75", "directionality_median"]
    return own[columns].reset_index(drop=True)


def encoder_decoder_models(ds: xr.Dataset) -> list[str]:
    """The models of ``ds`` whose role is ``encoder-decoder``, in the dataset's order."""
    return [str(m) for m in ds.model.values if str(ds["role"].sel(model=m).values) == "encoder-decoder"]


NULL_SCORES = ("symmetry", "directionality")


NULL_FIELDS = ("percentile", "z", "null_low", "null_high")


def null_comparison(table: pd.DataFrame, *, n_draws: int = 200, layer_draws: int = 200, seed: int = 0) -> pd.DataFrame:
    """Where each row's median scores lie among random layers of the same shape (:func:`attnstruct.stats.median_null`).

    Args:
        table: one row per model and stack with ``d_model``, ``n_heads``, ``n_layers``, ``symmetry_median`` and
            ``directionality_median`` (:func:`stack_table`).

    Returns:
        Indexed as ``table``: ``null_layers`` (independent random layers behind the null), ``null_resampled``
        (whether it is the bootstrap of :func:`attnstruct.stats.median_null`) and per score ``{score}_percentile``,
        ``{score}_z``, ``{score}_null_low``, ``{score}_null_high`` (the null's 2.5% and 97.5% quantiles) and
        ``{score}_outside`` (:func:`attnstruct.stats.nulls.compare_with_null`). NaN, and not outside, where
        ``d_model`` is not a multiple of ``n_heads``. The null's key heads are independent, even for a
        grouped-query model, and its heads are ``d_model / n_heads`` wide whatever the model's ``d_head``.
    """
    rows = []
    for row in table.itertuples():
        d, h, n_layers = int(row.d_model), int(row.n_heads), int(row.n_layers)
        resampled = n_draws * n_layers > layer_draws
        out = {"null_layers": layer_draws if resampled else n_draws * n_layers, "null_resampled": resampled}
        for score in NULL_SCORES:
            if d % h:
                out |= {f"{score}_{k}": np.nan for k in NULL_FIELDS} | {f"{score}_outside": False}
                continue
            samples = stats.median_null(score, d, h, n_layers, n_draws=n_draws, layer_draws=layer_draws, seed=seed)
            found = stats.compare_with_null(getattr(row, f"{score}_median"), samples)
            out |= {f"{score}_{k}": getattr(found, k) for k in NULL_FIELDS} | {f"{score}_outside": found.outside}
        rows.append(out)
    return pd.DataFrame(rows, index=table.index)


def null_view(table: pd.DataFrame) -> pd.DataFrame:
    """The columns of ``table`` (:func:`stack_table` joined to :func:`null_comparison`) that place each stack among
    random layers: its shape, then per score the median, percentile, z, the null's range and whether outside."""
    columns = ["model", "stack", "attention", "d_model", "n_heads", "n_layers", "null_layers"]
    for score in NULL_SCORES:
        columns += [f"{score}_median", *(f"{score}_{k}" for k in NULL_FIELDS), f"{score}_outside"]
    return table[columns]


def _null_entry(row, score: str, digits: int) -> str:
    cross = " (cross-attention)" if getattr(row, "attention", "self") == "cross" else ""
    value, z = getattr(row, f"{score}_median"), getattr(row, f"{score}_z")
    low, high = getattr(row, f"{score}_null_low"), getattr(row, f"{score}_null_high")
    return (
        f"{row.model} {row.stack}{cross} {prose.signed(value, digits)} (z {prose.signed(z, 1)}, percentile "
        f"{prose.number(getattr(row, f'{score}_percentile'), 1)}; null {prose.signed(low, digits)} to "
        f"{prose.signed(high, digits)})"
    )


def null_sentences(table: pd.DataFrame, digits: Mapping[str, int] | None = None) -> list[str]:
    """One sentence per score: which rows of ``table`` (``model``, ``stack``, ``attention``, ``{score}_median``
    joined to :func:`null_comparison`'s columns) lie outside the null's 95% range, which inside, and the
    span of the nulls' ranges over the rows. ``digits`` per score (default: 3 for symmetry, 2 otherwise)."""
    digits = {"symmetry": 3} | dict(digits or {})
    lines = []
    for score in NULL_SCORES:
        places, outside = digits.get(score, 2), table[f"{score}_outside"].astype(bool)
        parts = {
            name: "; ".join(_null_entry(r, score, places) for r in table[rows].itertuples())
            for name, rows in (("outside", outside), ("inside", ~outside))
        }
        line = f"Median {score}: outside the null's 95% range for {int(outside.sum())} of "
        line += f"{prose.count(len(table), 'stack')}" + (f": {parts['outside']}." if outside.any() else ".")
        if (~outside).any():
            line += f" Inside it: {parts['inside']}."
        low, high = table[f"{score}_null_low"].min(), table[f"{score}_null_high"].max()
        lines.append(
            f"{line} Over these shapes the nulls' 95% ranges lie within {prose.signed(low, places)} to "
            f"{prose.signed(high, places)}."
        )
    return lines


NULL_VARIABLES = ("null_layers", *(f"{s}_{k}" for s in NULL_SCORES for k in NULL_FIELDS))


SCORED_MATRIX = (
    "symmetry/directionality: W_qk = sum_h W_q^h (W_k^h)^T per attention block (d_model x d_model; in "
    "nn.Linear weights sum_h W_q[h]^T W_k[h]); head_*: W_q^h (W_k^h)^T per head; key heads paired with query "
    "heads as h // (n_heads / n_kv_heads); rotary blocks: the position-free part (R = I)"
)


def results_dataset(
    ds: xr.Dataset, table: pd.DataFrame, *, parameters: Mapping, checkpoints: pd.DataFrame, effects=()
) -> xr.Dataset:
    """Notebook 03's dataset: the scores ``ds`` (:func:`score_models`) with :data:`NULL_VARIABLES` over ``(model,
    stack)`` from ``table`` (:func:`null_comparison` joined to :func:`stack_table`; NaN for a stack a model lacks)
    and provenance attrs (``parameters``, the scored matrix, the null, the checkpoints' paths, and under
    ``verdicts`` the table of ``effects``, JSON, ``"{}"`` for none)."""
    nulls = table.set_index(["model", "stack"])[list(NULL_VARIABLES)].astype(float).to_xarray()
    where = {"model": ds.model.values, "stack": ds["stack"].values}
    out = ds.assign({k: nulls[k].reindex(where) for k in NULL_VARIABLES})
    out.attrs = results.provenance_attrs(
        parameters=dict(parameters),
        scored_matrix=SCORED_MATRIX,
        null_comparison=(
            "null_layers, {score}_percentile, _z, _null_low, _null_high: the stack's median score against "
            "nulls.median_null (median over n_layers random layers of the same d_model and n_heads)"
        ),
        title="03 pretrained models: scores per model, stack, layer and head",
        checkpoints="; ".join(f"{row.model}: {row.path}" for row in checkpoints.itertuples()),
        verdicts=stats.verdict_table(effects).to_json(orient="index") if len(effects) else "{}",
    )
    return out
