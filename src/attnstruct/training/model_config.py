"""The shape of the project's Transformer (:class:`TransformerConfig`), without torch: the configurations of a run
build it, and ``attnstruct train --help`` reads them without loading the model's code
(:mod:`attnstruct.training.model`)."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Literal

Norm = Literal["post", "pre"]
TRAINING_BYTES = 16  # per parameter while training: float32 weights, gradients and AdamW's two moments


def _memory_bytes() -> int | None:
    """The machine's physical memory in bytes, None where the system does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


@dataclass(frozen=True)
class TransformerConfig:
    """Shape of the model. ``d_model`` must be a multiple of ``n_heads``; the FFN is ``ffn_mult * d_model`` wide."""

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

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    @property
    def n_parameters(self) -> int:
        """Parameters of a :class:`LanguageModel` of this shape: token and position embeddings, the blocks
        (Q, K, V, output and FFN matrices with their biases, two LayerNorms), the embedding's and (pre-LN) the final
        LayerNorm, and the head."""
        d, wide = self.d_model, self.ffn_mult * self.d_model
        block = 4 * (d * d + d) + 2 * d * wide + wide + d + 4 * d
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
        return asdict(self)
