"""Checkpoints held in memory that are not a transformers model: a ``state_dict`` and a TransformerLens model.

* A ``state_dict`` (a mapping of tensor names to tensors) is read as a transformers checkpoint on disk is, by the
  tensor names of its family (:mod:`attnstruct.checkpoints.extract.families`). Names alone do not give the head
  count, so it needs ``config=`` (a transformers config, or its ``config.json`` as a dict) or ``family=`` (a
  model type such as ``"bert"``) with ``n_heads=``.
* A TransformerLens ``HookedTransformer`` keeps per-head weights ``blocks[i].attn.W_Q`` and ``W_K`` of shape
  ``[n_heads, d_model, d_head]`` (``q = x @ W_Q[h]``), grouped-query key heads repeated to ``n_heads`` by the
  ``W_K`` property, and its config in ``cfg`` (``n_heads``, ``n_key_value_heads``, ``attention_dir``,
  ``positional_embedding_type``, ``model_name``, ``original_architecture``). Each ``W_Q[h]`` transposed is the
  ``nn.Linear`` layout ``[d_head, d_model]`` of :class:`~attnstruct.checkpoints.extract.AttentionBlock`. It is
  recognised by those attributes, so TransformerLens need not be installed here.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import torch

from .extract import AttentionBlock, ExtractionError
from .extract.blocks import bias_extras, check_finite
from .extract.families import FAMILIES, FAMILY_BY_MODEL_TYPE
from .extract.hf import JsonConfig, hf_blocks, stack_layers
from .resolve import Checkpoint

TRANSFORMER_LENS = "TransformerLens"


def is_state_dict(x) -> bool:
    """A mapping whose values are all tensors (an empty mapping counts: it is refused later, by name)."""
    return isinstance(x, Mapping) and all(isinstance(v, torch.Tensor) for v in x.values())


def is_transformer_lens(x) -> bool:
    """A TransformerLens ``HookedTransformer`` by its layout: ``cfg.n_heads`` and ``blocks[0].attn.W_Q``."""
    blocks = getattr(x, "blocks", None)
    try:
        return hasattr(getattr(x, "cfg", None), "n_heads") and hasattr(blocks[0].attn, "W_Q")
    except (TypeError, IndexError, KeyError, AttributeError):
        return False


def _model_type(family: str) -> str:
    """``family`` as a model type: a model type itself, or an extraction family's name (``"LLaMA"``)."""
    if family in FAMILY_BY_MODEL_TYPE:
        return family
    for known in FAMILIES:
        if known.name.lower() == family.lower():
            return known.model_types[0]
    raise ExtractionError(
        f"unknown family {family!r}; give a model type such as 'bert' or 'llama'", "unsupported architecture"
    )


def _config(config, family: str | None, n_heads: int | None):
    """The config a state_dict is read with: ``config`` as given (a dict as ``config.json``), else one made of
    ``family`` and ``n_heads`` (every head-count key of the family set to ``n_heads``)."""
    if config is not None:
        return JsonConfig(**{str(k): v for k, v in config.items()}) if isinstance(config, Mapping) else config
    if family is None:
        raise ExtractionError(
            "a state_dict needs config= (its transformers config or config.json as a dict) or family= and n_heads=: "
            "tensor names alone give neither the model type nor the head count",
            "unsupported architecture",
        )
    model_type = _model_type(family)
    if n_heads is None:
        raise ExtractionError(f"family={family!r} needs n_heads=: tensor names do not give the head count")
    keys = {key for spec in FAMILY_BY_MODEL_TYPE[model_type].stacks for key in spec.heads}
    return JsonConfig(model_type=model_type, **dict.fromkeys(keys, n_heads))


class StateDictSource:
    """A ``state_dict`` as a tensor source (:class:`~attnstruct.checkpoints.extract.hf.TensorSource`)."""

    def __init__(self, state: Mapping[str, torch.Tensor], config):
        self.config = config
        self.description = "the state_dict"
        self._state = state

    def names(self) -> list[str]:
        return [str(name) for name in self._state]

    def get(self, name: str) -> torch.Tensor:
        return self._state[name].detach()


def state_dict_checkpoint(
    state: Mapping[str, torch.Tensor], *, config=None, family: str | None = None, n_heads: int | None = None
) -> Checkpoint:
    """A ``state_dict`` as a :class:`~attnstruct.checkpoints.resolve.Checkpoint` (module docstring).

    Raises :class:`~attnstruct.checkpoints.extract.ExtractionError` (one line) when neither ``config`` nor
    ``family`` is given, or the family is unknown.
    """
    source = StateDictSource(state, _config(config, family, n_heads))
    return Checkpoint(
        name="state_dict",
        kind="state_dict",
        blocks=lambda: hf_blocks(source),
        n_blocks=sum(len(layers) for _, layers in stack_layers(source)),
        model_type=str(getattr(source.config, "model_type", "") or ""),
        n_params=sum(t.numel() for t in state.values()) or None,
    )


def _transformer_lens_blocks(model) -> Iterator[AttentionBlock]:
    cfg = model.cfg
    causal = getattr(cfg, "attention_dir", "causal") != "bidirectional"
    rotary = getattr(cfg, "positional_embedding_type", "") == "rotary"
    n_kv = getattr(cfg, "n_key_value_heads", None) or cfg.n_heads
    for layer, block in enumerate(model.blocks):
        attn = block.attn
        w_q, w_k = (
            check_finite(w.detach().float(), f"blocks.{layer}.attn.{n}")
            for w, n in ((attn.W_Q, "W_Q"), (attn.W_K, "W_K"))
        )
        if w_q.ndim != 3 or w_q.shape != w_k.shape or w_q.shape[0] != cfg.n_heads:
            raise ExtractionError(
                f"blocks.{layer}.attn: W_Q {list(w_q.shape)} and W_K {list(w_k.shape)} are not TransformerLens' "
                f"[n_heads={cfg.n_heads}, d_model, d_head]"
            )
        b_q, b_k = (getattr(attn, n, None) for n in ("b_Q", "b_K"))
        b_q, b_k = (b.detach().float() if isinstance(b, torch.Tensor) else None for b in (b_q, b_k))
        yield AttentionBlock(
            stack="decoder" if causal else "encoder",
            layer=layer,
            w_q=w_q.transpose(-1, -2),
            w_k=w_k.transpose(-1, -2),
            causal=causal,
            n_kv_heads=int(n_kv),
            b_q=b_q,
            b_k=b_k,
            extras=(*(("rotary",) if rotary else ()), *bias_extras(b_q, b_k)),
            source_name=f"blocks.{layer}.attn.W_Q",
        )


def transformer_lens_checkpoint(model) -> Checkpoint:
    """A TransformerLens ``HookedTransformer`` as a :class:`~attnstruct.checkpoints.resolve.Checkpoint`: one
    ``decoder`` (causal) or ``encoder`` (``attention_dir="bidirectional"``) block per layer."""
    cfg = model.cfg
    n_params = sum(p.numel() for p in model.parameters()) if hasattr(model, "parameters") else None
    return Checkpoint(
        name=str(getattr(cfg, "model_name", "") or type(model).__name__),
        kind="transformer_lens",
        blocks=lambda: _transformer_lens_blocks(model),
        n_blocks=len(model.blocks),
        model_type=str(getattr(cfg, "original_architecture", "") or ""),
        n_params=n_params,
    )
