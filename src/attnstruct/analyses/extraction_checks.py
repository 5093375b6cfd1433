"""Notebook 03's two checks: grouped-query pairing done right and as in the authors' code, and quantisation.

Grouped-query attention: :func:`pairing_errors` builds a tiny random LLaMA whose query heads share key heads and
compares the attention computed from each pairing's blocks (:func:`attention_from`) with the model's own;
:func:`gqa_table` scores every grouped-query model both ways. Quantisation: :func:`quantization_effect` rounds an
fp32 checkpoint's ``W_q`` and ``W_k`` through GGUF types, :func:`quantization_summary` keeps the largest change per
type. The ``describe_...`` functions state the results in sentences.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from ..checkpoints.extract import AttentionBlock, iter_blocks
from ..report import prose
from ..scores import factor_scores


def _blocks(source_or_blocks) -> Iterable[AttentionBlock]:
    """Blocks read already (a list) or a source to read them from."""
    return source_or_blocks if isinstance(source_or_blocks, list) else iter_blocks(source_or_blocks)


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


def _exponent(value: float) -> str:
    """``1e-6`` for ``1e-06``."""
    mantissa, exponent = f"{value:.0e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def describe_pairing_errors(errors: pd.Series, tolerance: float = 1e-6) -> list[str]:
    """One line per pairing of :func:`pairing_errors`: whether it reproduces the model's attention, i.e. whether its
    largest error is below ``tolerance``."""
    return [
        f"query head h with key head {pairing}: reproduces the model's attention (max error < "
        f"{_exponent(tolerance)}): {bool(error < tolerance)}"
        for pairing, error in errors.items()
    ]


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


def wqk_corner(block: AttentionBlock, size: int) -> np.ndarray:
    """The top-left ``size x size`` block of the layer matrix ``sum_h W_q^h (W_k^h)^T`` (in the blocks' ``nn.Linear``
    weights ``sum_h W_q[h]^T W_k[h]``; the paper's example figure)."""
    a = block.w_q.reshape(-1, block.w_q.shape[-1])[:, :size].double()
    b = block.w_k.reshape(-1, block.w_k.shape[-1])[:, :size].double()
    return (a.T @ b).numpy()


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


def describe_gqa(table: pd.DataFrame) -> list[str]:
    """One sentence per row of :func:`gqa_table`: the medians with either pairing (none without a grouped-query
    model: then one sentence saying so)."""
    if table.empty:
        return ["No model of this run shares key heads between query heads, so both pairings give the same scores."]
    lines = []
    for _, row in table.iterrows():
        right, wrong = (row[f"symmetry ({p})"] for p in ("correct", "authors' pairing"))
        right_dir, wrong_dir = (row[f"directionality ({p})"] for p in ("correct", "authors' pairing"))
        lines.append(
            f"{row.model} ({row.n_heads} query heads, {row.n_kv_heads} key heads): median symmetry "
            f"{prose.signed(right)} with the correct pairing, {prose.signed(wrong)} with the authors'; median "
            f"directionality {prose.signed(right_dir)} and {prose.signed(wrong_dir)}."
        )
    return lines


def quantization_summary(source_or_blocks, qtypes: Sequence[str]) -> pd.DataFrame:
    """Per GGUF type (index ``qtype``, in the order given): the largest over layers of the relative error of
    ``W_qk`` and of the absolute change of each score (:func:`quantization_effect`)."""
    quant = quantization_effect(source_or_blocks, qtypes)
    quant["abs change symmetry"] = (quant.symmetry_quantized - quant.symmetry).abs()
    quant["abs change directionality"] = (quant.directionality_quantized - quant.directionality).abs()
    return quant.groupby("qtype", sort=False)[
        ["wqk_relative_error", "abs change symmetry", "abs change directionality"]
    ].max()


def describe_quantization(model: str, summary: pd.DataFrame) -> str:
    """One sentence on :func:`quantization_summary` of ``model``: the range of ``W_qk``'s largest relative error over
    the types, and the largest change of each score."""
    return (
        f"Rounding {model}'s $W_q$ and $W_k$ through {', '.join(summary.index)} changes its $W_{{qk}}$ by "
        f"{prose.span(summary.wqk_relative_error, fmt=lambda v, d: prose.percent(v, 1))} (relative Frobenius error, "
        f"largest over layers); symmetry moves by at most {prose.number(summary['abs change symmetry'].max(), 4)}, "
        f"directionality by at most {prose.number(summary['abs change directionality'].max(), 4)}."
    )
