"""The shape of the project's Transformer (:class:`TransformerConfig`), without torch: the configurations of a run
build it, and ``attnstruct train --help`` reads them without loading the model's code
(:mod:`attnstruct.training.model`)."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Literal

from .config import one_of

Norm = Literal["post", "pre"]
ATTENTIONS = ("softmax", "sigmoid", "softmax-null-slot")  # the attention normalisations (TransformerConfig.attention)
TRAINING_BYTES = 16  # per parameter while training: float32 weights, gradients and AdamW's two moments


def _memory_bytes() -> int | None:
    """The machine's physical memory in bytes, None where the system does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


@dataclass(frozen=True)
class TransformerConfig:
    """Shape of the model. ``d_model`` must be a multiple of ``n_heads``; the FFN is ``ffn_mult * d_model`` wide.

    ``attention`` is how the scores ``s_ij = q_i . k_j / sqrt(d_head)`` become weights (one of :data:`ATTENTIONS`;
    :class:`attnstruct.training.model.SelfAttention` computes each):

    * ``"softmax"``: ``softmax_j(s_ij)`` over the visible keys (PyTorch's ``scaled_dot_product_attention``);
    * ``"sigmoid"``: ``sigmoid(s_ij)`` for a visible key and 0 for a masked one, without normalisation: the
      sink-free form of Gu et al., "When Attention Sink Emerges in Language Models: An Empirical View" (ICLR 2025,
      arXiv:2410.10781, section 7.4), whose code (github.com/sail-sg/Attention-Sink, ``lit_gpt/model_attn_sim.py``)
      applies the sigmoid to the scaled scores with no bias and multiplies by the causal mask. Ramapuram et al.
      (arXiv:2409.04431) add ``b = -log(T)`` to keep the output's size at initialisation; that is their fix for
      long sequences, not the form in which Gu et al. found no sink, so it is left out;
    * ``"softmax-null-slot"``: softmax over the visible keys and one learned key/value slot ``(k0, v0)`` per head
      that every query sees, also under the causal mask: an explicit key bias, Gu et al.'s learnable ``k*, v*``
      (their section 7.3, where the sink moves from the first token to the slot).

    Records (:meth:`to_dict`, a snapshot's ``config.json``) leave ``attention`` out at ``"softmax"``: the shape of a
    model made before the choice existed reads the same, and a reader that does not know the field refuses
    another value instead of building a softmax model.
    """

    vocab_size: int
    max_len: int = 64
    d_model: int = 128
    n_layers: int = 4
    n_heads: int = 4
    ffn_mult: int = 4
    dropout: float = 0.1
    norm: Norm = "post"
    init_std: float = 0.02
    layer_norm_eps: float = 1e-12
    attention: str = "softmax"

    def __post_init__(self):
        for name in ("vocab_size", "max_len", "d_model", "n_layers", "n_heads", "ffn_mult"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"TransformerConfig.{name} must be a positive integer, got {getattr(self, name)!r}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model {self.d_model} is not a multiple of n_heads {self.n_heads}")
        if self.norm not in ("post", "pre"):
            raise ValueError(f"norm must be 'post' (BERT) or 'pre', got {self.norm!r}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout!r}")
        one_of(self.attention, ATTENTIONS, "attention")

    @property
    def null_slot(self) -> bool:
        """Whether each head has a learned null key/value slot (``attention="softmax-null-slot"``)."""
        return self.attention == "softmax-null-slot"

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    @property
    def n_parameters(self) -> int:
        """Parameters of a :class:`LanguageModel` of this shape: token and position embeddings, the blocks
        (Q, K, V, output and FFN matrices with their biases, two LayerNorms), the embedding's and (pre-LN) the final
        LayerNorm, the head, and with a null slot its key and value (``d_model`` each per layer)."""
        d, wide = self.d_model, self.ffn_mult * self.d_model
        block = 4 * (d * d + d) + 2 * d * wide + wide + d + 4 * d + (2 * d if self.null_slot else 0)
        norms = 4 * d if self.norm == "pre" else 2 * d
        return (self.vocab_size + self.max_len) * d + norms + self.n_layers * block + d * d + 3 * d + self.vocab_size

    def check_fits_in_memory(self) -> None:
        """Raise ValueError, before any weight is allocated, when training a model of this shape needs more than the
        machine's memory: :data:`TRAINING_BYTES` per parameter (float32 weights, gradients, AdamW's two moments)."""
        total = _memory_bytes()
        need = TRAINING_BYTES * self.n_parameters
        if total is not None and need > total:
            raise ValueError(
                f"a model of d_model {self.d_model}, {self.n_layers} layers and {self.vocab_size:,} tokens has "
                f"{self.n_parameters:,} parameters: training it needs {need / 2**30:,.1f} GiB, more than the "
                f"{total / 2**30:,.1f} GiB of memory of this machine"
            )

    def to_dict(self) -> dict:
        """Every field, but ``attention`` at ``"softmax"`` (class docstring)."""
        record = asdict(self)
        return record if self.attention != "softmax" else {k: v for k, v in record.items() if k != "attention"}
