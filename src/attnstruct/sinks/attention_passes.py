r"""Forward passes that return attention probabilities, for the project's own model and for transformers models.

A pass returns an :class:`AttentionPass`: ``probabilities`` ``[L, H, B, T, T]`` (query ``i`` on key ``j``),
``residual`` ``[L, B, T, d]`` (the residual stream entering each layer) and ``key_inputs`` ``[L, B, T, d]`` (what
each layer's key projection reads: the residual stream after the layer's pre-norm, or the residual itself in a
post-LN model).

* :func:`own_model_pass`: the project's :class:`~attnstruct.training.model.LanguageModel` attends through SDPA,
  which returns no weights. Hooks catch each attention layer's input ``x``, and the probabilities are recomputed
  from its own modules: ``softmax((W_q x + b_q)(W_k x + b_k)^T / sqrt(d_head) + mask)``, the mask ``-inf`` above the
  diagonal for a causal model. :func:`output_from_probabilities` rebuilds the layer's output from them
  (``W_o (P V) + b_o``); the tests hold it equal to the layer's own output.
* :func:`transformers_pass`: a transformers model loaded with ``attn_implementation="eager"`` returns its
  probabilities with ``output_attentions=True`` and its residual stream with ``output_hidden_states=True``.
* :func:`load_packaged`: a packaged checkpoint as a transformers model in eager attention (a ``config.json`` and
  safetensors folder by ``from_pretrained``; a GGUF file dequantised by transformers' GGUF loader), with the
  tokenizer the checkpoint holds, or None.

:func:`key_projections`, :func:`query_projections` and :func:`query_key_weights` find the projections of either kind
of model, in layer order, as :class:`Projection`: a linear module and the rows of its output that are the projection.
Separate projections (``q_proj``, BERT's ``query``) are a whole module; a fused one is read by its layout, as
transformers splits it: GPT-NeoX's ``query_key_value`` (Pythia) per head, ``[H, 3, d_head]`` rows
(``view(..., H, 3 d_head)`` then ``chunk(3)``), ModernBERT's ``Wqkv`` (Ettin's encoders) by part, ``[3, H, d_head]``
(``view(..., 3, H, d_head)`` then ``unbind``). Grouped key heads (GQA) are repeated to one per query head.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from ..checkpoints import zoo
from ..training.model import Block, SelfAttention, attention_layers

KEY_SUFFIXES = ("k_proj", "attention.self.key", "attention.attn.k")
QUERY_SUFFIXES = ("q_proj", "attention.self.query", "attention.attn.q")
FUSED_LAYOUTS = {"attention.query_key_value": "per-head", "attn.Wqkv": "by-part"}  # module suffix -> row layout
FUSED_PARTS = {"query": 0, "key": 1}


@dataclass(frozen=True)
class AttentionPass:
    """One batch's attention probabilities ``[L, H, B, T, T]``, residual stream entering each layer ``[L, B, T, d]``
    and key projections' inputs ``[L, B, T, d]``; ``causal`` whether queries see only earlier keys."""

    probabilities: torch.Tensor
    residual: torch.Tensor
    key_inputs: torch.Tensor
    causal: bool


@dataclass(frozen=True, eq=False)
class Projection:
    """One layer's query or key projection: the rows ``rows`` ``[H d_head]`` of ``module``'s output (all of them for a
    separate projection, a third for a fused one). ``weight`` ``[H d_head, d]`` and ``bias`` are copies of those
    rows; :meth:`input_columns` and :meth:`set_input_columns` read and write the columns of the module's own weight."""

    module: nn.Linear
    rows: torch.Tensor

    @classmethod
    def whole(cls, module: nn.Linear) -> Projection:
        return cls(module, torch.arange(module.out_features))

    @property
    def weight(self) -> torch.Tensor:
        return self.module.weight[self.rows]

    @property
    def bias(self) -> torch.Tensor | None:
        return None if self.module.bias is None else self.module.bias[self.rows]

    def input_columns(self, channels: list[int]) -> torch.Tensor:
        """``W[:, channels]`` of the projection's rows, ``[H d_head, len(channels)]`` (a copy)."""
        return self.module.weight[self.rows[:, None], torch.as_tensor(channels, dtype=torch.long)]

    def set_input_columns(self, channels: list[int], values: torch.Tensor | float) -> None:
        """``W[:, channels] = values`` in the projection's rows of the module's weight."""
        self.module.weight[self.rows[:, None], torch.as_tensor(channels, dtype=torch.long)] = values


def _is_own(model: nn.Module) -> bool:
    return any(isinstance(m, SelfAttention) for m in model.modules())


def fused_rows(layout: str, part: int, heads: int, out_features: int) -> torch.Tensor:
    """The rows of part ``part`` (0 query, 1 key, 2 value) of a fused projection with ``out_features`` rows in
    ``layout`` (module docstring): ``per-head`` ``[H, 3, d_head]``, ``by-part`` ``[3, H, d_head]``."""
    d_head = out_features // (3 * heads)
    grid = torch.arange(out_features)
    if layout == "per-head":
        return grid.view(heads, 3, d_head)[:, part].reshape(-1)
    return grid.view(3, heads * d_head)[part]


def _projections(model: nn.Module, own: str, suffixes: tuple[str, ...]) -> list[Projection]:
    if _is_own(model):
        return [Projection.whole(getattr(layer, own)) for layer in attention_layers(model)]
    linear = [(name, m) for name, m in model.named_modules() if isinstance(m, nn.Linear)]
    found = [Projection.whole(m) for name, m in linear if name.endswith(suffixes)]
    if found:
        return found
    for suffix, layout in FUSED_LAYOUTS.items():
        fused = [m for name, m in linear if name.endswith(suffix)]
        if fused:
            heads = model.config.num_attention_heads
            return [Projection(m, fused_rows(layout, FUSED_PARTS[own], heads, m.out_features)) for m in fused]
    names = " or ".join((*suffixes, *FUSED_LAYOUTS))
    raise ValueError(f"{type(model).__name__} has no projection named {names}")


def key_projections(model: nn.Module) -> list[Projection]:
    """Each layer's key projection (``k = W_k x + b_k``), in layer order."""
    return _projections(model, "key", KEY_SUFFIXES)


def query_projections(model: nn.Module) -> list[Projection]:
    """Each layer's query projection, in layer order."""
    return _projections(model, "query", QUERY_SUFFIXES)


def head_counts(model: nn.Module) -> tuple[int, int, int]:
    """``(query heads, key heads, d_head)`` of the model's attention."""
    if _is_own(model):
        layer = attention_layers(model)[0]
        return layer.n_heads, layer.n_heads, layer.d_head
    config = model.config
    heads = config.num_attention_heads
    d_head = getattr(config, "head_dim", None) or config.hidden_size // heads
    return heads, getattr(config, "num_key_value_heads", None) or heads, d_head


@torch.no_grad()
def query_key_weights(model: nn.Module) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Per-head query and key weights ``[L, H, d_head, d_model]`` (float64, key heads repeated to the query heads)
    and the query biases ``[L, H, d_head]`` (None where the projections have no bias)."""
    heads, kv_heads, d_head = head_counts(model)
    queries, keys = query_projections(model), key_projections(model)
    w_q = torch.stack([q.weight.double().reshape(heads, d_head, -1) for q in queries])
    w_k = torch.stack([k.weight.double().reshape(kv_heads, d_head, -1) for k in keys])
    w_k = w_k.repeat_interleave(heads // kv_heads, dim=1)
    biased = all(q.bias is not None for q in queries)
    b_q = torch.stack([q.bias.double().reshape(heads, d_head) for q in queries]) if biased else None
    return w_q.cpu(), w_k.cpu(), None if b_q is None else b_q.cpu()


def _layer_probabilities(layer: SelfAttention, x: torch.Tensor, causal: bool) -> torch.Tensor:
    """``[B, T, d] -> [B, H, T, T]``: each query's share of its attention over the positions, from the layer's own
    projections and its normalisation (``layer.attention``, :data:`attnstruct.training.model_config.ATTENTIONS`).

    Softmax: the probabilities SDPA applies. Sigmoid: the weights ``sigmoid(q.k / sqrt(d_head))`` it applies (0 after
    the query when ``causal``), divided by their sum over the row: they are not normalised, so the share is what makes
    a sink mass comparable across normalisations. Softmax with a null slot: the probabilities over the slot and the
    positions, the slot left out and the rest renormalised over the positions (the slot is the sink the form offers;
    the mass on position 0 is what is left for a token)."""
    batch, length, _ = x.shape

    def heads(t: torch.Tensor) -> torch.Tensor:
        return t.view(batch, length, layer.n_heads, layer.d_head).transpose(1, 2)

    q, k = heads(layer.query(x)), heads(layer.key(x))
    logits = q @ k.transpose(-1, -2) / math.sqrt(layer.d_head)
    above = torch.ones(length, length, dtype=torch.bool, device=x.device).triu(1)
    kind = getattr(layer, "attention", "softmax")
    if kind == "sigmoid":
        weights = torch.sigmoid(logits)
        if causal:
            weights = weights.masked_fill(above, 0.0)
        return weights / weights.sum(-1, keepdim=True)
    if causal:
        logits = logits.masked_fill(above, float("-inf"))
    if kind == "softmax-null-slot":
        null_key = layer.null_key.to(q.dtype).view(1, layer.n_heads, 1, layer.d_head)
        slot = (q * null_key).sum(-1, keepdim=True) / math.sqrt(layer.d_head)  # [B, H, T, 1]
        tokens = torch.cat([slot, logits], dim=-1).softmax(-1)[..., 1:]
        return tokens / tokens.sum(-1, keepdim=True)
    return logits.softmax(-1)


def output_from_probabilities(layer: SelfAttention, x: torch.Tensor, probabilities: torch.Tensor) -> torch.Tensor:
    """The attention layer's output rebuilt from its probabilities ``[B, H, T, T]`` and values: ``W_o (P V) + b_o``,
    ``[B, T, d]``."""
    batch, length, d = x.shape
    v = layer.value(x).view(batch, length, layer.n_heads, layer.d_head).transpose(1, 2)
    return layer.output((probabilities @ v).transpose(1, 2).reshape(batch, length, d))


def _capturing(modules: list[nn.Module], store: list[torch.Tensor]):
    return [m.register_forward_pre_hook(lambda _m, args: store.append(args[0].detach())) for m in modules]


@torch.no_grad()
def own_model_pass(model: nn.Module, ids: torch.Tensor, *, causal: bool) -> AttentionPass:
    """The attention of the project's own :class:`~attnstruct.training.model.LanguageModel` on ``ids`` ``[B, T]``
    (module docstring); the model is put in eval mode for the pass and left as it was."""
    layers = attention_layers(model)
    blocks = [m for m in model.modules() if isinstance(m, Block)]
    inputs: list[torch.Tensor] = []
    residual: list[torch.Tensor] = []
    hooks = _capturing(layers, inputs) + _capturing(blocks, residual)
    was_training = model.training
    try:
        model.eval()
        model(ids, causal)
    finally:
        model.train(was_training)
        for hook in hooks:
            hook.remove()
    probabilities = torch.stack([_layer_probabilities(layer, x, causal) for layer, x in zip(layers, inputs)])
    return AttentionPass(probabilities.transpose(1, 2), torch.stack(residual), torch.stack(inputs), causal)


@torch.no_grad()
def transformers_pass(
    model: nn.Module, ids: torch.Tensor, *, causal: bool, attention_mask: torch.Tensor | None = None
) -> AttentionPass:
    """The attention of a transformers model in eager attention on ``ids`` ``[B, T]`` (module docstring)."""
    inputs: list[torch.Tensor] = []
    hooks = _capturing([k.module for k in key_projections(model)], inputs)
    try:
        out = model(input_ids=ids, attention_mask=attention_mask, output_attentions=True, output_hidden_states=True)
    finally:
        for hook in hooks:
            hook.remove()
    if not out.attentions or out.attentions[0] is None:
        raise ValueError(
            f"{type(model).__name__} returned no attention weights: load it with attn_implementation='eager'"
        )
    probabilities = torch.stack(out.attentions).transpose(1, 2).float()
    residual = torch.stack(out.hidden_states[: len(out.attentions)]).float()
    return AttentionPass(probabilities, residual, torch.stack(inputs).float(), causal)


def load_packaged(name: str | zoo.Entry, cache=None) -> tuple[nn.Module, object | None]:
    """A packaged checkpoint (``attnstruct fetch-models``) as a transformers base model (its language-modelling head
    left out: the attention does not need it, and a decoder's head over its vocabulary costs a fifth of a pass) in
    eager attention, float32, in eval mode, and its tokenizer where the checkpoint holds one (GGUF files do, and the
    folders that install a ``tokenizer.json``), else None. A folder whose ``config.json`` names no ``model_type``
    is read as the registry's ``model_type``."""
    import transformers

    entry = zoo.resolve(name)
    where = zoo.path(entry, cache)
    if not zoo.is_fetched(entry, cache):
        raise ValueError(f"{entry.name} {zoo.why_not_fetched(entry, cache)}")
    if entry.format == "gguf":
        from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

        settings = dict(load_gguf_checkpoint(str(where))["config"])
        config = transformers.AutoConfig.for_model(settings.pop("model_type"), **settings)
        config._attn_implementation = "eager"
        model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager")
        tensors = load_gguf_checkpoint(str(where), return_tensors=True, model_to_load=model)["tensors"]
        model.load_state_dict({k: torch.as_tensor(v) for k, v in tensors.items()}, strict=False)
        if getattr(config, "tie_word_embeddings", False):
            model.tie_weights()
        tokenizer = transformers.AutoTokenizer.from_pretrained(str(where.parent), gguf_file=where.name)
    elif (Path(where) / "config.json").is_file():
        settings = json.loads((Path(where) / "config.json").read_text(encoding="utf-8"))
        config = None
        if "model_type" not in settings and entry.model_type:
            config = transformers.AutoConfig.for_model(entry.model_type, **settings)
        model = transformers.AutoModel.from_pretrained(
            str(where), config=config, attn_implementation="eager", dtype=torch.float32
        )
        has_tokenizer = (Path(where) / "tokenizer.json").is_file()
        tokenizer = transformers.AutoTokenizer.from_pretrained(str(where)) if has_tokenizer else None
    else:
        raise ValueError(f"{entry.name} ({entry.format}) is not a checkpoint transformers runs")
    return model.base_model.float().eval(), tokenizer


def attention_pass(model: nn.Module, ids: torch.Tensor, *, causal: bool) -> AttentionPass:
    """:func:`own_model_pass` for the project's own model, :func:`transformers_pass` for any other."""
    return own_model_pass(model, ids, causal=causal) if _is_own(model) else transformers_pass(model, ids, causal=causal)
