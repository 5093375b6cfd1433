"""Notebook 03: pretrained checkpoints scored offline, placed among random layers, encoders against decoders.

The steps, in the notebook's order:

* **The plan** (:data:`PLAN`): the primary claim is tested on the authors' list of language models with one unit
  per model family (:func:`family_rows`, :func:`family_effects`, the reach of :func:`smallest_p_by_claim`); the
  same test on directionality and the test over this run's own stacks (:func:`stack_effect`) are secondary.
* **The checkpoints and their scores**: :func:`checkpoint_list` (which checkpoints, fetched or not),
  :func:`read_blocks` and :func:`score_models` (the one per-model dataset of
  :func:`attnstruct.checkpoints.tables.model_dataset`, combined), :func:`stack_table` (the paper's statistic per
  model and stack, :func:`attnstruct.analyses.pretrained_scores.stack_summary`, with each stack's shape).
* **Against random layers** of each stack's shape: :func:`null_comparison` and :func:`null_view`.
* **The example matrices** of section 6: :func:`example_layers` picks, over all models, the encoder-stack layer whose
  symmetry is nearest the median of the encoder layers and the decoder-stack layer whose directionality is nearest
  the median of the decoder layers, a typical layer of each role, not its extreme.
* **The two checks**: grouped-query attention paired right and as in the authors' code (:func:`pairing_errors`
  against a tiny LLaMA's own attention, :func:`gqa_table` per model), and GGUF quantisation
  (:func:`quantization_summary`).
* **The vision transformers** are read apart from the language models, beside notebook 07's runs and the paper's
  vision values, by the shared :mod:`attnstruct.analyses.pretrained_vision`.
* **The fine-tune pair**: how far fine-tuning moves each layer's scores (:func:`finetune_changes`), beside the spread
  of the score over the pretrained layer's heads, a description without a verdict (:func:`finetune_facts`,
  :func:`finetune_status`).
* **The dataset** it saves: :func:`results_dataset`.

What the notebook says comes from here as facts records (frozen dataclasses of strings formatted by
:mod:`attnstruct.report.prose`, plus the few data-dependent words); its sentences and figure titles are templates in
the notebook, filled by :func:`attnstruct.report.prose.say` and :func:`~attnstruct.report.prose.fill`, and its figures
are drawn in its cells.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
import xarray as xr

from .. import results, stats
from ..checkpoints import tables, zoo
from ..checkpoints.extract import AttentionBlock, iter_blocks
from ..checkpoints.extract.blocks import STACKS as STACK_ORDER
from ..report import plotting, prose
from ..scores import factor_scores
from . import matrix_readings, paper_comparison, pretrained_ordering, pretrained_scores

# The plan: the authors' language models counted by family, and the stacks scored here.

FAMILY_CLAIM = "encoder minus decoder model families, median {score} (the authors' {group} models)"
_LANGUAGE_CLAIM = FAMILY_CLAIM.format(score="{score}", group="language")
PLAN = stats.Plan(
    "03_pretrained_models",
    (
        pretrained_ordering.family_claim("symmetry", "primary", _LANGUAGE_CLAIM),
        pretrained_ordering.family_claim("directionality", "secondary", _LANGUAGE_CLAIM),
        pretrained_ordering.STACKS,
    ),
)


def family_rows(reference: pd.DataFrame, group: str = "language") -> pd.DataFrame:
    """The authors' rows of ``group`` (their ``family`` column: language, vision, audio) without a caveat, with each
    model's family (:func:`attnstruct.stats.model_family` of its hub id) in ``model_family``."""
    rows = reference[(reference["family"] == group) & reference["caveats"].isna()]
    return rows.assign(model_family=[stats.model_family(model) for model in rows["model"]])


def family_effects(reference: pd.DataFrame, group: str = "language", seed: int = 0) -> list[stats.Effect]:
    """Encoder minus decoder model families in the authors' reported median symmetry and directionality
    (:func:`family_rows`), decided under :data:`PLAN`."""
    claim = FAMILY_CLAIM.format(score="{score}", group=group)
    return PLAN.decide(pretrained_ordering.effects_by_family(family_rows(reference, group), claim, seed))


def stack_effect(summary: pd.DataFrame, plan: stats.Plan = PLAN) -> stats.Effect | None:
    """:func:`attnstruct.analyses.paper_comparison.role_effect` of this run's stacks, decided under ``plan``; None
    without a stack of each role."""
    effect = paper_comparison.role_effect(summary, "symmetry")
    return None if effect is None else plan.decide([effect])[0]


def effects(summary: pd.DataFrame, reference: pd.DataFrame) -> list[stats.Effect]:
    """Every verdict of notebook 03: :func:`family_effects` and, when there is a stack of each role,
    :func:`stack_effect`."""
    stack = stack_effect(summary)
    return family_effects(reference) + ([] if stack is None else [stack])


def smallest_p_by_claim(reference: pd.DataFrame, group: str = "language") -> dict[str, float]:
    """The smallest p each family claim's permutation test can reach with the reference table's families."""
    p = stats.smallest_two_sample_p(*pretrained_ordering.families_per_role(family_rows(reference, group)))
    return {FAMILY_CLAIM.format(score=score, group=group): p for score in paper_comparison.SCORES}


# The checkpoints, their blocks and their scores.


def checkpoint_list(models, local_models: Sequence = (), cache_dir=None) -> pd.DataFrame:
    """The checkpoints to score: ``model``, ``path``, ``source`` (``zoo`` or ``local``), ``role`` (the registry's,
    or the one given with a local model, ``""`` for none: a check, :func:`attnstruct.checkpoints.tables.role_of`
    decides), ``n_params`` (the registry's, NaN for a local model: counted from the file) and ``model_type`` (the
    registry's, ``""``: read from the file where it says one).

    ``models``: a zoo selection (:func:`attnstruct.checkpoints.zoo.entries`); ``local_models``: ``[name, path]`` or
    ``[name, path, role]`` entries. Raises ``RuntimeError`` naming the fetch command when a zoo model is not
    fetched, ``ValueError`` for a role that is none of :data:`attnstruct.checkpoints.tables.ROLES`.
    """
    rows = [pretrained_scores.zoo_row(e, cache_dir) for e in pretrained_scores.fetched_entries(models, cache_dir)]
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
    """Every checkpoint's attention blocks (:func:`attnstruct.checkpoints.extract.iter_blocks`, a registry's
    ``model_type`` standing in where a folder's config names none), by model name."""
    return {
        row.model: list(iter_blocks(row.path, model_type=row.model_type or None)) for row in checkpoints.itertuples()
    }


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
    """:func:`attnstruct.analyses.pretrained_scores.stack_summary` of ``ds`` with each stack's shape
    (:func:`block_shapes`), one row per model and stack."""
    return pretrained_scores.stack_summary(ds).merge(block_shapes(blocks), on=["model", "stack"], how="left")


def stack_quartiles(table: pd.DataFrame) -> pd.DataFrame:
    """The self-attention rows of :func:`stack_table`, by stack then model: both medians over layers and the
    symmetry's quartiles."""
    own = table[table["attention"] == "self"].sort_values(["stack", "model"])
    columns = ["model", "stack", "symmetry_median", "symmetry_q25", "symmetry_q75", "directionality_median"]
    return own[columns].reset_index(drop=True)


def encoder_decoder_models(ds: xr.Dataset) -> list[str]:
    """The models of ``ds`` whose role is ``encoder-decoder``, in the dataset's order."""
    return [str(m) for m in ds.model.values if str(ds["role"].sel(model=m).values) == "encoder-decoder"]


# The fine-tune pair: a pretrained checkpoint against its fine-tunes.


def finetune_changes(ds: xr.Dataset, base: str) -> pd.DataFrame:
    """How far fine-tuning moved each layer's scores: one row per fine-tuned ``model`` of ``ds`` (every model but
    ``base``) and encoder ``layer``, per score of :data:`NULL_SCORES`: ``{score}_base`` and ``{score}_tuned`` (the layer
    matrix's), ``{score}_change`` (tuned minus base), ``{score}_head_change`` (median over heads of a head's
    ``|tuned - base|``: a head keeps its place through fine-tuning) and the yardstick ``{score}_head_spread``, the
    standard deviation over the base layer's heads of their scores (how much heads trained together differ).
    ``ds``: :func:`score_models` of the base and its fine-tunes, one shape."""
    rows = []
    before = ds.sel(model=base, stack="encoder")
    for model in (str(m) for m in ds.model.values if str(m) != base):
        after = ds.sel(model=model, stack="encoder")
        for layer in before.layer.values[np.isfinite(before.symmetry.values)]:
            row = {"model": model, "layer": int(layer)}
            for score in NULL_SCORES:
                old, new = float(before[score].sel(layer=layer)), float(after[score].sel(layer=layer))
                heads_old = before[f"head_{score}"].sel(layer=layer).values
                heads_new = after[f"head_{score}"].sel(layer=layer).values
                row |= {
                    f"{score}_base": old,
                    f"{score}_tuned": new,
                    f"{score}_change": new - old,
                    f"{score}_head_change": float(np.nanmedian(np.abs(heads_new - heads_old))),
                    f"{score}_head_spread": float(np.nanstd(heads_old)),
                }
            rows.append(row)
    return pd.DataFrame(rows)


# Against random layers of the same shape.

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


# The example matrices of section 6: a typical layer of each role.

# (stack, score): the layer of that stack whose score is nearest the median of the stack's layers.
EXAMPLE_CHOICES = (("encoder", "symmetry"), ("decoder", "directionality"))


@dataclass(frozen=True)
class Example:
    """One layer's matrix ``[d_model, d_model]`` and why it was chosen: its ``score`` is ``value``, the nearest to
    ``median`` among the stack's layers (``scope``: ``"encoder layers"``, or ``"encoder layers 3"`` when one layer
    index was given), whose scores run from ``low`` to ``high``."""

    score: str
    model: str
    stack: str
    layer: int
    value: float
    scope: str
    matrix: np.ndarray
    median: float = float("nan")
    low: float = float("nan")
    high: float = float("nan")


def nearest_median(values: xr.DataArray) -> tuple[str, int, float, float, float, float]:
    """The ``(model, layer)`` of ``values`` ``[model, layer]`` whose value is nearest the median ``q`` of all finite
    values, ``argmin_{m, l} |v_{m,l} - q|`` (ties: the first in model-then-layer order), with ``(value, q, min,
    max)``; NaN skipped. With an even count ``q`` is the mean of the middle two, so either of them may be chosen."""
    grid = values.transpose("model", "layer").values.astype(float)
    finite = grid[np.isfinite(grid)]
    median = float(np.median(finite))
    distance = np.where(np.isfinite(grid), np.abs(grid - median), np.inf)
    i, j = np.unravel_index(int(np.argmin(distance)), grid.shape)
    model, layer = str(values.model.values[i]), int(values.layer.values[j])
    return model, layer, float(grid[i, j]), median, float(finite.min()), float(finite.max())


def example_layers(
    ds: xr.Dataset, blocks: Mapping[str, Sequence[AttentionBlock]], layer: int | None = None
) -> list[Example]:
    """One :class:`Example` per entry of :data:`EXAMPLE_CHOICES` whose stack ``ds`` has: over all models (and, with
    ``layer``, among the layers of that index only), the layer whose score is nearest the median of those layers
    (:func:`nearest_median`), a typical layer of its role rather than its extreme. ``ds``: ``symmetry`` and
    ``directionality`` over ``[model, stack, layer]``; ``blocks``: each model's blocks (the matrix is
    :func:`wqk_corner` of the whole width)."""
    examples = []
    for stack, score in EXAMPLE_CHOICES:
        if stack not in ds["stack"].values:
            continue
        values = ds[score].sel(stack=stack)
        if layer is not None:
            values = values.sel(layer=[layer])
        if bool(values.isnull().all()):
            continue
        model, index, value, median, low, high = nearest_median(values)
        block = next(b for b in blocks[model] if b.stack == stack and b.layer == index)
        examples.append(
            Example(
                score,
                model,
                stack,
                index,
                value,
                f"{stack} layers" + ("" if layer is None else f" {layer}"),
                wqk_corner(block, block.w_q.shape[-1]),
                median,
                low,
                high,
            )
        )
    return examples


# Below this largest-over-mean column norm, dominant columns do not stand out as stripes in a heat map.
STRIPE_RATIO = 2.0


# The two checks: grouped-query pairing and quantisation.


def authors_gqa_pairing(block: AttentionBlock) -> AttentionBlock:
    """The block with query head ``h`` paired with key head ``h mod n_kv`` (the authors' code), not ``h // group``."""
    group = block.n_heads // block.n_kv_heads
    index = torch.arange(block.n_heads) % block.n_kv_heads
    w_k = block.w_k[::group][index]
    b_k = block.b_k[::group][index] if block.b_k is not None else None
    return AttentionBlock(
        block.stack,
        block.layer,
        block.w_q,
        w_k,
        block.causal,
        block.n_kv_heads,
        block.b_q,
        b_k,
        block.extras,
        block.source_name,
    )


def attention_from(block: AttentionBlock, x: torch.Tensor, *, causal: bool = True) -> torch.Tensor:
    """``[H, n, n]`` attention probabilities of ``block`` on the inputs ``x`` ``[n, d_model]``, in float64:
    ``softmax_j(x_i^T W_q^h (W_k^h)^T x_j / sqrt(d_head))`` with, if ``causal``, the keys after the query masked.

    No biases and no rotation: the logits of the position-free part of the block (all positions equal)."""
    x = x.double()
    logits = torch.einsum("hed,nd,hef,mf->hnm", block.w_q.double(), x, block.w_k.double(), x)
    logits = logits / block.w_q.shape[1] ** 0.5
    if causal:
        logits = logits.masked_fill(torch.ones(len(x), len(x), dtype=torch.bool).triu(1), float("-inf"))
    return logits.softmax(-1)


PAIRINGS = ("h // (H / n_kv), attnstruct's", "h mod n_kv, the authors' code")


def tiny_gqa_llama(n_heads: int = 4, n_kv_heads: int = 2, d_model: int = 32, seed: int = 0):
    """A one-layer LLaMA with random weights (``torch.manual_seed(seed)`` inside a forked generator), ``n_heads`` query
    heads sharing ``n_kv_heads`` key heads, eager attention, in float64 and in eval mode."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        hidden_size=d_model,
        intermediate_size=2 * d_model,
        num_hidden_layers=1,
        vocab_size=64,
        num_attention_heads=n_heads,
        num_key_value_heads=n_kv_heads,
        attn_implementation="eager",
    )
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return LlamaForCausalLM(config).double().eval()


def model_attention(model, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """What the first attention module of a LLaMA ``model`` receives, ``x`` ``[n, d_model]``, and its attention
    probabilities ``[H, n, n]``, for ``tokens`` ``[1, n]`` with every position id 0 (the rotation is the identity)."""
    seen = {}

    def keep_input(module, args, kwargs):
        seen["x"] = kwargs["hidden_states"][0].double()

    hook = model.model.layers[0].self_attn.register_forward_pre_hook(keep_input, with_kwargs=True)
    try:
        with torch.no_grad():
            out = model(input_ids=tokens, position_ids=torch.zeros_like(tokens), output_attentions=True)
    finally:
        hook.remove()
    return seen["x"], out.attentions[0][0]


def pairing_errors(n_heads: int = 4, n_kv_heads: int = 2, d_model: int = 32, n_tokens: int = 6, seed: int = 0):
    """The largest absolute difference between the attention of :func:`tiny_gqa_llama` and the attention computed
    from its extracted block (:func:`attention_from`) with each pairing of :data:`PAIRINGS`: query head ``h`` with
    key head ``h // (H / n_kv)`` (the extraction's), and with ``h mod n_kv`` (:func:`authors_gqa_pairing`).

    Returns a ``pandas.Series`` indexed by :data:`PAIRINGS`. The right pairing reproduces the model to rounding;
    the other does not, whenever ``1 < n_kv_heads < n_heads``."""
    model = tiny_gqa_llama(n_heads, n_kv_heads, d_model, seed)
    tokens = torch.randint(3, 64, (1, n_tokens), generator=torch.Generator().manual_seed(seed))
    x, probs = model_attention(model, tokens)
    block = next(iter_blocks(model))
    errors = [float((attention_from(b, x) - probs).abs().max()) for b in (block, authors_gqa_pairing(block))]
    return pd.Series(errors, index=list(PAIRINGS), name="max_error")


def _blocks(source_or_blocks) -> Iterable[AttentionBlock]:
    """Blocks read already (a list) or a source to read them from."""
    return source_or_blocks if isinstance(source_or_blocks, list) else iter_blocks(source_or_blocks)


def gqa_comparison(source_or_blocks) -> pd.DataFrame:
    """Per layer: scores with the correct pairing and with the authors' ``h mod n_kv`` pairing."""
    rows = []
    for block in _blocks(source_or_blocks):
        right = factor_scores(block.w_q, block.w_k, sum_heads=True)
        wrong_block = authors_gqa_pairing(block)
        wrong = factor_scores(wrong_block.w_q, wrong_block.w_k, sum_heads=True)
        rows.append(
            {
                "layer": block.layer,
                "n_heads": block.n_heads,
                "n_kv_heads": block.n_kv_heads,
                "symmetry": float(right.symmetry),
                "symmetry_authors_pairing": float(wrong.symmetry),
                "directionality": float(right.directionality),
                "directionality_authors_pairing": float(wrong.directionality),
            }
        )
    return pd.DataFrame(rows)


def gqa_table(blocks: Mapping[str, Sequence[AttentionBlock]]) -> pd.DataFrame:
    """One row per grouped-query model of ``blocks`` (first block with fewer key than query heads): its head counts
    and the median over layers of both scores with the right pairing and with the authors' (:func:`gqa_comparison`)."""
    rows = []
    for name, model_blocks in blocks.items():
        if not model_blocks or model_blocks[0].n_kv_heads == model_blocks[0].n_heads:
            continue
        medians = gqa_comparison(list(model_blocks)).median(numeric_only=True)
        rows.append(
            {
                "model": name,
                "n_heads": int(medians.n_heads),
                "n_kv_heads": int(medians.n_kv_heads),
                "symmetry (correct)": medians.symmetry,
                "symmetry (authors' pairing)": medians.symmetry_authors_pairing,
                "directionality (correct)": medians.directionality,
                "directionality (authors' pairing)": medians.directionality_authors_pairing,
            }
        )
    columns = ["model", "n_heads", "n_kv_heads"]
    columns += [f"{s} ({p})" for s in ("symmetry", "directionality") for p in ("correct", "authors' pairing")]
    return pd.DataFrame(rows, columns=columns)


def quantize_roundtrip(w: torch.Tensor, qtype: str) -> torch.Tensor:
    """``w`` ``[rows, cols]`` quantised to a GGUF type (``Q8_0``, ``Q5_0``, ``Q4_1``, ``Q4_0``, ...) and back."""
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize, quantize

    kind = GGMLQuantizationType[qtype]
    array = w.detach().float().numpy()
    return torch.from_numpy(dequantize(quantize(array, kind), kind).reshape(array.shape).astype(np.float32))


def quantization_effect(source_or_blocks, qtypes: Sequence[str]) -> pd.DataFrame:
    """Per layer and type: scores after rounding W_q and W_k through the type, and the relative error of W_qk."""
    rows = []
    for block in _blocks(source_or_blocks):
        exact = factor_scores(block.w_q, block.w_k, sum_heads=True)
        m = block.w_q.reshape(-1, block.w_q.shape[-1]).double().T @ block.w_k.reshape(-1, block.w_k.shape[-1]).double()
        for qtype in qtypes:
            q = quantize_roundtrip(block.w_q.reshape(-1, block.w_q.shape[-1]), qtype)
            k = quantize_roundtrip(block.w_k.reshape(-1, block.w_k.shape[-1]), qtype)
            s = factor_scores(q[None], k[None], sum_heads=True)
            error = float(torch.linalg.norm(q.double().T @ k.double() - m) / torch.linalg.norm(m))
            rows.append(
                {
                    "stack": block.stack,
                    "layer": block.layer,
                    "qtype": qtype,
                    "symmetry": float(exact.symmetry),
                    "symmetry_quantized": float(s.symmetry),
                    "directionality": float(exact.directionality),
                    "directionality_quantized": float(s.directionality),
                    "wqk_relative_error": error,
                }
            )
    return pd.DataFrame(rows)


def quantization_summary(source_or_blocks, qtypes: Sequence[str]) -> pd.DataFrame:
    """Per GGUF type (index ``qtype``, in the order given): the largest over layers of the relative error of
    ``W_qk`` and of the absolute change of each score (:func:`quantization_effect`)."""
    quant = quantization_effect(source_or_blocks, qtypes)
    quant["abs change symmetry"] = (quant.symmetry_quantized - quant.symmetry).abs()
    quant["abs change directionality"] = (quant.directionality_quantized - quant.directionality).abs()
    return quant.groupby("qtype", sort=False)[
        ["wqk_relative_error", "abs change symmetry", "abs change directionality"]
    ].max()


def wqk_corner(block: AttentionBlock, size: int) -> np.ndarray:
    """The top-left ``size x size`` block of the layer matrix ``sum_h W_q^h (W_k^h)^T`` (in the blocks' ``nn.Linear``
    weights ``sum_h W_q[h]^T W_k[h]``; the paper's example figure)."""
    a = block.w_q.reshape(-1, block.w_q.shape[-1])[:, :size].double()
    b = block.w_k.reshape(-1, block.w_k.shape[-1])[:, :size].double()
    return (a.T @ b).numpy()


# The dataset saved.

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
    and provenance attrs (``parameters``, the scored matrix, the null, the checkpoints' paths, under
    ``non_commercial`` those of the zoo's non-commercial set, comma-separated, ``""`` for none, and under
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
        non_commercial=",".join(m for m in checkpoints["model"] if pretrained_scores.is_non_commercial(m)),
        verdicts=stats.verdict_table(effects).to_json(orient="index") if len(effects) else "{}",
    )
    return out


# The facts the notebook's sentences and titles state: strings formatted by attnstruct.report.prose.


@dataclass(frozen=True)
class FamiliesFacts:
    """The test by model family on the authors' rows of ``group``: the ``rows`` without a caveat that enter and the
    rows with a caveat ``left_out``, the ``encoder_families`` and ``decoder_families`` they form (counts) with their
    ``encoder_names`` and ``decoder_names``, and ``tests``: each family effect's line
    (:func:`attnstruct.report.prose.effect_line`)."""

    group: str
    rows: str
    left_out: str
    encoder_families: str
    encoder_names: str
    decoder_families: str
    decoder_names: str
    tests: str


def families(reference: pd.DataFrame, decided: Sequence[stats.Effect], group: str = "language") -> FamiliesFacts:
    """The facts of the test by model family (:func:`family_rows`; ``decided``: :func:`effects`, of which the family
    effects are stated)."""
    rows = family_rows(reference, group)
    left_out = int(((reference["family"] == group) & reference["caveats"].notna()).sum())
    names = {r: sorted(rows.loc[rows["role"] == r, "model_family"].unique()) for r in ("encoder", "decoder")}
    return FamiliesFacts(
        group=group,
        rows=prose.count(len(rows), "row"),
        left_out=prose.count(left_out, "row"),
        encoder_families=prose.count(len(names["encoder"]), "encoder family"),
        encoder_names=", ".join(names["encoder"]),
        decoder_families=prose.count(len(names["decoder"]), "decoder family"),
        decoder_names=", ".join(names["decoder"]),
        tests=" ".join(f"{prose.effect_line(e)}." for e in decided if e.unit == "family"),
    )


@dataclass(frozen=True)
class CaveatFacts:
    """The stacks of :func:`stack_table` that need a caveat: the ``rotary`` ones (``model (stack)``) and the models
    with a ``cross``-attention stack; ``none`` for none."""

    rotary: str
    cross: str


def caveated_stacks(table: pd.DataFrame) -> CaveatFacts:
    """The facts of the rotary and cross-attention stacks of :func:`stack_table`."""
    rotary = table[table["rotary"]]
    return CaveatFacts(
        rotary=", ".join(f"{r.model} ({r.stack})" for r in rotary.itertuples()) or "none",
        cross=", ".join(table.loc[table["attention"] == "cross", "model"]) or "none",
    )


@dataclass(frozen=True)
class NullPlacementFacts:
    """One score's median over layers against the nulls (:func:`null_comparison`): ``outside`` of ``stacks`` lie
    outside their null's 95% range (``any_outside``; ``outside_stacks``: ``model stack`` of each), and the nulls'
    ranges lie within ``low`` to ``high`` over the stacks' shapes."""

    score: str
    outside: str
    stacks: str
    any_outside: bool
    outside_stacks: str
    low: str
    high: str


def null_placements(table: pd.DataFrame) -> list[NullPlacementFacts]:
    """The facts of ``table`` (:func:`stack_table` joined to :func:`null_comparison`), one per score of
    :data:`NULL_SCORES`; symmetry's values to 3 decimals (its nulls are narrow), directionality's to 2."""
    facts = []
    for score in NULL_SCORES:
        places, outside = 3 if score == "symmetry" else 2, table[f"{score}_outside"].astype(bool)
        facts.append(
            NullPlacementFacts(
                score=score,
                outside=str(int(outside.sum())),
                stacks=prose.count(len(table), "stack"),
                any_outside=bool(outside.any()),
                outside_stacks=", ".join(f"{r.model} {r.stack}" for r in table[outside].itertuples()),
                low=prose.signed(table[f"{score}_null_low"].min(), places),
                high=prose.signed(table[f"{score}_null_high"].max(), places),
            )
        )
    return facts


@dataclass(frozen=True)
class StackRolesFacts:
    """This run's self-attention stacks by role, a description: the ``encoders`` and ``decoders`` (counts) with their
    ``encoder_names`` and ``decoder_names``, the median over stacks of their median symmetries (``encoder_median``,
    ``decoder_median``) and its range (``encoder_span``, ``decoder_span``), the ``share`` of the ``pairs`` (encoder,
    decoder) in which the encoder is the more symmetric; then the ``test`` over stacks (its
    :func:`attnstruct.report.prose.effect_line`; what the stacks can reach at all is
    :func:`attnstruct.analyses.paper_comparison.stack_reach`). Without a stack of each role (``both_roles`` false)
    the other fields are empty."""

    both_roles: bool
    encoders: str
    encoder_names: str
    encoder_median: str
    encoder_span: str
    decoders: str
    decoder_names: str
    decoder_median: str
    decoder_span: str
    share: str
    pairs: str
    test: str


def stack_roles(summary: pd.DataFrame, effect: stats.Effect | None = None) -> StackRolesFacts:
    """The facts of the encoder and decoder stacks of ``summary`` (:func:`stack_table`) and of their test, ``effect``
    when given (the same test decided under :data:`PLAN`, :func:`stack_effect`), else
    :func:`attnstruct.analyses.paper_comparison.role_effect`."""
    own = summary[summary["stack"].isin(("encoder", "decoder"))]
    groups = paper_comparison.group_medians(own).set_index("stack")
    both = bool(groups.loc["encoder", "n"] and groups.loc["decoder", "n"])
    if not both:
        return StackRolesFacts(False, *[""] * 11)
    effect = paper_comparison.role_effect(own, "symmetry") if effect is None else effect
    values = {s: own.loc[own["stack"] == s] for s in ("encoder", "decoder")}
    return StackRolesFacts(
        both_roles=True,
        encoders=prose.count(int(groups.loc["encoder", "n"]), "encoder stack"),
        encoder_names=", ".join(values["encoder"]["model"]),
        encoder_median=prose.signed(groups.loc["encoder", "symmetry_median"]),
        encoder_span=prose.span(values["encoder"]["symmetry_median"]),
        decoders=prose.count(int(groups.loc["decoder", "n"]), "decoder stack"),
        decoder_names=", ".join(values["decoder"]["model"]),
        decoder_median=prose.signed(groups.loc["decoder", "symmetry_median"]),
        decoder_span=prose.span(values["decoder"]["symmetry_median"]),
        share=prose.percent(paper_comparison.ordering_probability(own, "symmetry")),
        pairs=str(int(groups.loc["encoder", "n"] * groups.loc["decoder", "n"])),
        test=prose.effect_line(effect),
    )


@dataclass(frozen=True)
class ReportedFacts:
    """The authors' reported scores of their ``group`` models (their result files), recomputed from their rows: the
    median of the per-model median symmetries of the encoder rows (``encoders``, over ``encoder_rows``) and decoder
    rows (``decoders``, over ``decoder_rows``), the same without the rows with a caveat (``clean_...``), and the
    median directionalities (``..._directionality``)."""

    group: str
    encoders: str
    encoder_rows: str
    decoders: str
    decoder_rows: str
    clean_encoders: str
    clean_encoder_rows: str
    clean_decoders: str
    clean_decoder_rows: str
    encoder_directionality: str
    decoder_directionality: str
    clean_encoder_directionality: str
    clean_decoder_directionality: str


def authors_reported(reference: pd.DataFrame, group: str = "language") -> ReportedFacts:
    """The facts of :func:`attnstruct.analyses.paper_comparison.reported_group_medians` of ``group``, with and
    without the rows with a caveat."""
    theirs = paper_comparison.reported_group_medians(reference, group).set_index("stack")
    clean = paper_comparison.reported_group_medians(reference, group, clean=True).set_index("stack")
    return ReportedFacts(
        group=group,
        encoders=prose.signed(theirs.loc["encoder", "symmetry_median"]),
        encoder_rows=prose.count(int(theirs.loc["encoder", "n"]), f"{group}-encoder row"),
        decoders=prose.signed(theirs.loc["decoder", "symmetry_median"]),
        decoder_rows=prose.count(int(theirs.loc["decoder", "n"]), f"{group}-decoder row"),
        clean_encoders=prose.signed(clean.loc["encoder", "symmetry_median"]),
        clean_encoder_rows=prose.count(int(clean.loc["encoder", "n"]), "row"),
        clean_decoders=prose.signed(clean.loc["decoder", "symmetry_median"]),
        clean_decoder_rows=prose.count(int(clean.loc["decoder", "n"]), "row"),
        encoder_directionality=prose.signed(theirs.loc["encoder", "directionality_median"]),
        decoder_directionality=prose.signed(theirs.loc["decoder", "directionality_median"]),
        clean_encoder_directionality=prose.signed(clean.loc["encoder", "directionality_median"]),
        clean_decoder_directionality=prose.signed(clean.loc["decoder", "directionality_median"]),
    )


@dataclass(frozen=True)
class ProfileFacts:
    """Section 5's figure: the span of the encoder layers' symmetry (``encoder_span``; ``has_encoder``) and the
    most column-dominant decoder layer's directionality (``decoder_lowest``; ``has_decoder``)."""

    has_encoder: bool
    encoder_span: str
    has_decoder: bool
    decoder_lowest: str


def layer_profiles(ds: xr.Dataset) -> ProfileFacts:
    """The facts of the scores over ``(model, stack, layer)`` drawn against relative depth."""
    stacks = [str(s) for s in ds["stack"].values]
    has_encoder, has_decoder = "encoder" in stacks, "decoder" in stacks
    return ProfileFacts(
        has_encoder=has_encoder,
        encoder_span=prose.span(ds.symmetry.sel(stack="encoder").values) if has_encoder else "none",
        has_decoder=has_decoder,
        decoder_lowest=prose.signed(ds.directionality.sel(stack="decoder").min()) if has_decoder else "none",
    )


@dataclass(frozen=True)
class ExampleFacts:
    """One example layer (:class:`Example`) and why it was chosen: its ``score`` is ``value``, against a ``median``
    of ``span`` over the ``scope``."""

    model: str
    stack: str
    layer: str
    score: str
    value: str
    median: str
    scope: str
    span: str


def examples_chosen(examples: Sequence[Example]) -> list[ExampleFacts]:
    """The facts of :func:`example_layers`' examples, in order."""
    return [
        ExampleFacts(
            e.model,
            e.stack,
            str(e.layer),
            e.score,
            prose.signed(e.value),
            prose.signed(e.median),
            e.scope,
            prose.span([e.low, e.high]),
        )
        for e in examples
    ]


@dataclass(frozen=True)
class SymmetricReadingFacts:
    """The example chosen by its symmetry, read from its whole matrix: how its entries go with their mirror images
    (``mirror``, the correlation of :func:`attnstruct.analyses.matrix_readings.mirror_correlation`; ``other_mirror``
    the other example's, ``has_other``), the ``diagonal_share`` of its squared norm, the share of ``positive``
    diagonal entries, and the share of its energy in its symmetric part (``energy_share``)."""

    model: str
    stack: str
    layer: str
    value: str
    mirror: str
    has_other: bool
    other_mirror: str
    diagonal_share: str
    positive: str
    energy_share: str


def symmetric_readings(examples: Sequence[Example]) -> list[SymmetricReadingFacts]:
    """The facts of the examples of :func:`example_layers` chosen by their symmetry (one or none)."""
    facts = []
    for example in (e for e in examples if e.score == "symmetry"):
        m, others = example.matrix, [e for e in examples if e is not example]
        facts.append(
            SymmetricReadingFacts(
                model=example.model,
                stack=example.stack,
                layer=str(example.layer),
                value=prose.signed(example.value),
                mirror=prose.signed(matrix_readings.mirror_correlation(m)),
                has_other=bool(others),
                other_mirror=prose.signed(matrix_readings.mirror_correlation(others[0].matrix)) if others else "",
                diagonal_share=prose.percent(matrix_readings.diagonal_share(m)),
                positive=prose.percent(float((np.diag(m) > 0).mean())),
                energy_share=prose.percent(plotting.energy_shares(m)[0]),
            )
        )
    return facts


@dataclass(frozen=True)
class DirectionalReadingFacts:
    """The example chosen by its directionality, read from its whole matrix
    (:func:`attnstruct.analyses.matrix_readings.outlying_norms`): ``columns_over`` column norms and ``rows_over`` row
    norms above their thresholds, their summed excesses ``C`` and ``R`` (three significant digits), which of the two
    is the ``larger`` (``columns``, ``rows``) and the ``smaller``, the largest column and row norms over the mean
    (``column_ratio``, ``row_ratio``), and whether the largest column ``stands_out`` (at least :data:`STRIPE_RATIO`
    times the mean column norm) enough to show as a stripe in a heat map."""

    model: str
    stack: str
    layer: str
    value: str
    columns_over: str
    rows_over: str
    C: str
    R: str
    larger: str
    smaller: str
    column_ratio: str
    row_ratio: str
    stands_out: bool


def directional_readings(examples: Sequence[Example]) -> list[DirectionalReadingFacts]:
    """The facts of the examples of :func:`example_layers` chosen by their directionality (one or none)."""
    facts = []
    for example in (e for e in examples if e.score == "directionality"):
        n = matrix_readings.outlying_norms(example.matrix)
        larger, smaller = ("columns", "rows") if n["C"] > n["R"] else ("rows", "columns")
        facts.append(
            DirectionalReadingFacts(
                model=example.model,
                stack=example.stack,
                layer=str(example.layer),
                value=prose.signed(example.value),
                columns_over=str(n["columns_over"]),
                rows_over=str(n["rows_over"]),
                C=f"{n['C']:.3g}",
                R=f"{n['R']:.3g}",
                larger=larger,
                smaller=smaller,
                column_ratio=prose.number(n["column_ratio"]),
                row_ratio=prose.number(n["row_ratio"]),
                stands_out=bool(n["column_ratio"] >= STRIPE_RATIO),
            )
        )
    return facts


@dataclass(frozen=True)
class EncoderDecoderFacts:
    """One encoder-decoder ``model``: the median over layers of each self-attention stack's symmetry (``medians``:
    ``stack value`` pairs), and its cross-attention's (``cross``; ``has_cross``), which is not comparable."""

    model: str
    medians: str
    has_cross: bool
    cross: str


def encoder_decoder_medians(ds: xr.Dataset, model: str) -> EncoderDecoderFacts:
    """The facts of ``model``'s median symmetry over layers, stack by stack."""
    medians = {str(s): float(ds.symmetry.sel(model=model, stack=s).median()) for s in ds["stack"].values}
    medians = {s: v for s, v in medians.items() if np.isfinite(v)}
    return EncoderDecoderFacts(
        model=model,
        medians=", ".join(f"{s} {prose.signed(v)}" for s, v in medians.items() if s != "cross"),
        has_cross="cross" in medians,
        cross=prose.signed(medians.get("cross", float("nan"))),
    )


@dataclass(frozen=True)
class QuantizationFacts:
    """``model``'s ``W_q`` and ``W_k`` rounded through the GGUF ``types`` (:func:`quantization_summary`): the span over
    the types of ``W_qk``'s largest relative ``error``, and the largest change of ``symmetry`` and ``directionality``
    (4 decimals)."""

    model: str
    types: str
    error: str
    symmetry: str
    directionality: str


def quantization_facts(model: str, summary: pd.DataFrame) -> QuantizationFacts:
    """The facts of :func:`quantization_summary` of ``model``."""
    return QuantizationFacts(
        model=model,
        types=", ".join(summary.index),
        error=prose.span(summary.wqk_relative_error, fmt=lambda v, d: prose.percent(v, 1)),
        symmetry=prose.number(summary["abs change symmetry"].max(), 4),
        directionality=prose.number(summary["abs change directionality"].max(), 4),
    )


@dataclass(frozen=True)
class PairingFacts:
    """One pairing of :data:`PAIRINGS` (``pairing``): whether it ``reproduces`` the model's attention (``True``,
    ``False``), i.e. whether its largest error (:func:`pairing_errors`) is below ``tolerance`` (as ``1e-6``)."""

    pairing: str
    tolerance: str
    reproduces: str


def pairing_checks(errors: pd.Series, tolerance: float = 1e-6) -> list[PairingFacts]:
    """The facts of :func:`pairing_errors`, one per pairing."""
    mantissa, exponent = f"{tolerance:.0e}".split("e")
    short = f"{mantissa}e{int(exponent)}"
    return [PairingFacts(str(pairing), short, str(bool(error < tolerance))) for pairing, error in errors.items()]


@dataclass(frozen=True)
class GroupedQueryFacts:
    """The grouped-query models of :func:`gqa_table` (``models``; ``any_grouped``)."""

    any_grouped: bool
    models: str


def grouped_query_models(gqa: pd.DataFrame) -> GroupedQueryFacts:
    """The facts of :func:`gqa_table`'s rows."""
    return GroupedQueryFacts(bool(len(gqa)), ", ".join(gqa["model"]))


@dataclass(frozen=True)
class FineTuneStatus:
    """The fine-tune pair asked for: the ``base`` (the first name) and the ``tuned`` ones, whether all are
    ``fetched``, and else the ``missing`` ones and the ``command`` that fetches them."""

    base: str
    tuned: str
    fetched: bool
    missing: str
    command: str


def finetune_status(names: Sequence[str], cache_dir=None) -> FineTuneStatus:
    """The facts of the checkpoints ``names`` (a base, then its fine-tunes) in the zoo cache ``cache_dir``."""
    missing = [name for name in names if not zoo.is_fetched(name, cache_dir)]
    return FineTuneStatus(
        base=names[0] if names else "",
        tuned=", ".join(names[1:]),
        fetched=bool(names) and not missing,
        missing=", ".join(missing),
        command=f"attnstruct fetch-models {' '.join(missing)}",
    )


@dataclass(frozen=True)
class FineTuneFacts:
    """One fine-tuned ``model`` against its ``base`` (:func:`finetune_changes`), over its ``layers``, per score: the
    median over layers of the layer score's ``|change|`` (``{score}_median``), the change of largest size, signed
    (``{score}_largest``), the median over layers of a head's ``|change|`` (``{score}_head_change``) and of the spread
    of the base layer's heads (``{score}_head_spread``), and in how many layers the layer score moved more than that
    spread (``{score}_beyond``)."""

    model: str
    base: str
    layers: str
    symmetry_median: str
    symmetry_largest: str
    symmetry_head_change: str
    symmetry_head_spread: str
    symmetry_beyond: str
    directionality_median: str
    directionality_largest: str
    directionality_head_change: str
    directionality_head_spread: str
    directionality_beyond: str


def finetune_facts(changes: pd.DataFrame, base: str) -> list[FineTuneFacts]:
    """The facts of :func:`finetune_changes`, one per fine-tuned model in its order; values to 3 decimals."""
    facts = []
    for model, rows in changes.groupby("model", sort=False):
        values = {}
        for score in NULL_SCORES:
            change = rows[f"{score}_change"]
            values |= {
                f"{score}_median": prose.number(change.abs().median(), 3),
                f"{score}_largest": prose.signed(change.iloc[int(np.argmax(change.abs().values))], 3),
                f"{score}_head_change": prose.number(rows[f"{score}_head_change"].median(), 3),
                f"{score}_head_spread": prose.number(rows[f"{score}_head_spread"].median(), 3),
                f"{score}_beyond": f"{int((change.abs() > rows[f'{score}_head_spread']).sum())} of {len(rows)}",
            }
        facts.append(FineTuneFacts(model=str(model), base=base, layers=prose.count(len(rows), "layer"), **values))
    return facts
