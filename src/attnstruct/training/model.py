"""A small BERT-like Transformer whose attention can be bidirectional (encoder) or causal (decoder).

One definition serves both of the paper's training modes (its section 4, models trained from scratch as
encoders and as decoders), so that the two runs differ only in the attention mask and the objective:

* post-LN blocks as BERT (``x = LN(x + Attn(x)); x = LN(x + FFN(x))``) or pre-LN blocks (``x = x + Attn(LN(x))``,
  a final LN), chosen by ``TransformerConfig.norm``;
* separate query, key and value projections (``nn.Linear`` with bias, as BERT), so that
  ``W_q[h] = query.weight[h*d_head:(h+1)*d_head]`` has the ``[d_head, d_model]`` layout of
  :class:`attnstruct.checkpoints.extract.AttentionBlock`, and ``W_qk^h = W_q[h]^T W_k[h]`` (``[d_model, d_model]``: the
  paper's ``W_q^h (W_k^h)^T`` from ``nn.Linear`` blocks);
* attention through :func:`torch.nn.functional.scaled_dot_product_attention` (fused kernels where PyTorch has
  them), with ``is_causal`` for the decoder; ``TransformerConfig.attention`` replaces the softmax by a sigmoid
  without normalisation or adds a learned null key/value slot (:func:`sigmoid_attention`,
  :func:`null_slot_attention`);
* BERT's language-model head (dense, GELU, LN, decoder tied to the token embedding) for both objectives;
* BERT's initialisation: weights ``N(0, 0.02)``, biases zero, LayerNorm ``(1, 0)``.

The token-level interface is also used by the vision notebook: :class:`Encoder` takes embeddings, not ids.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from .model_config import TransformerConfig


def sigmoid_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, dropout: float = 0.0
) -> torch.Tensor:
    """``[B, H, T, d_head]`` -> ``[B, H, T, d_head]``: weights ``sigmoid(q_i . k_j / sqrt(d_head))``, 0 for a key
    after the query when ``causal``, not normalised (:class:`~attnstruct.training.model_config.TransformerConfig`
    says whose form this is); dropout on the weights, as SDPA's."""
    weights = torch.sigmoid(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]))
    if causal:
        length = q.shape[-2]
        visible = torch.ones(length, length, dtype=torch.bool, device=q.device).tril()
        weights = weights.masked_fill(~visible, 0.0)
    if dropout:
        weights = F.dropout(weights, dropout)
    return weights @ v


def null_slot_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    null_key: torch.Tensor,
    null_value: torch.Tensor,
    causal: bool,
    dropout: float = 0.0,
) -> torch.Tensor:
    """``[B, H, T, d_head]`` -> ``[B, H, T, d_head]``: softmax attention over the keys and one more, ``null_key[h]``
    with ``null_value[h]`` (``[H, d_head]``), put before the first position and visible to every query, also
    when ``causal``."""
    batch, heads, length, d_head = q.shape

    def slot(first: torch.Tensor, rest: torch.Tensor) -> torch.Tensor:
        return torch.cat([first.to(rest.dtype).view(1, heads, 1, d_head).expand(batch, -1, -1, -1), rest], dim=2)

    mask = None
    if causal:  # query t sees the slot (column 0) and the positions 0..t (columns 1..t+1)
        mask = torch.ones(length, length + 1, dtype=torch.bool, device=q.device).tril(diagonal=1)
    return F.scaled_dot_product_attention(q, slot(null_key, k), slot(null_value, v), attn_mask=mask, dropout_p=dropout)


class SelfAttention(nn.Module):
    """Multi-head self-attention with separate Q/K/V projections; ``[B, T, d] -> [B, T, d]``.

    The weights are those of ``config.attention``; with ``"softmax-null-slot"`` the layer holds the slot as
    ``null_key`` and ``null_value`` (``[H, d_head]``), drawn ``N(0, init_std)`` as the other weights, as Gu et al.
    draw their ``k*, v*`` (zero would start every head with a slot that is a uniform share of the attention and
    adds nothing: a special point, not a draw from the weights' own distribution).
    """

    def __init__(self, config: TransformerConfig):
        super().__init__()
        d = config.d_model
        self.n_heads, self.d_head = config.n_heads, config.d_head
        self.query, self.key, self.value = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.output = nn.Linear(d, d)
        self.dropout = config.dropout
        self.attention = config.attention
        if config.null_slot:
            self.null_key = nn.Parameter(torch.randn(self.n_heads, self.d_head) * config.init_std)
            self.null_value = nn.Parameter(torch.randn(self.n_heads, self.d_head) * config.init_std)

    def forward(self, x: torch.Tensor, causal: bool) -> torch.Tensor:
        batch, length, d = x.shape

        def heads(t: torch.Tensor) -> torch.Tensor:  # [B, T, d] -> [B, H, T, d_head]
            return t.view(batch, length, self.n_heads, self.d_head).transpose(1, 2)

        q, k, v = heads(self.query(x)), heads(self.key(x)), heads(self.value(x))
        dropout = self.dropout if self.training else 0.0
        if self.attention == "sigmoid":
            out = sigmoid_attention(q, k, v, causal, dropout)
        elif self.attention == "softmax-null-slot":
            out = null_slot_attention(q, k, v, self.null_key, self.null_value, causal, dropout)
        else:
            out = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout, is_causal=causal)
        return self.output(out.transpose(1, 2).reshape(batch, length, d))


class Block(nn.Module):
    """One Transformer layer: attention and a GELU feed-forward network, post-LN (BERT) or pre-LN."""

    def __init__(self, config: TransformerConfig):
        super().__init__()
        d = config.d_model
        self.pre_norm = config.norm == "pre"
        self.attention = SelfAttention(config)
        self.attention_norm = nn.LayerNorm(d, eps=config.layer_norm_eps)
        self.ffn = nn.Sequential(nn.Linear(d, config.ffn_mult * d), nn.GELU(), nn.Linear(config.ffn_mult * d, d))
        self.ffn_norm = nn.LayerNorm(d, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor, causal: bool) -> torch.Tensor:
        if self.pre_norm:
            x = x + self.dropout(self.attention(self.attention_norm(x), causal))
            return x + self.dropout(self.ffn(self.ffn_norm(x)))
        x = self.attention_norm(x + self.dropout(self.attention(x, causal)))
        return self.ffn_norm(x + self.dropout(self.ffn(x)))


class Encoder(nn.Module):
    """A stack of blocks over embeddings ``[B, T, d]``; learned positions; BERT's embedding LayerNorm.

    ``causal=True`` gives the autoregressive (decoder) stack: position ``t`` attends to ``s <= t`` only.
    """

    def __init__(self, config: TransformerConfig):
        super().__init__()
        config.check_fits_in_memory()
        d = config.d_model
        self.config = config
        self.position = nn.Embedding(config.max_len, d)
        self.embedding_norm = nn.LayerNorm(d, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layers))
        self.final_norm = nn.LayerNorm(d, eps=config.layer_norm_eps) if config.norm == "pre" else nn.Identity()

    def forward(self, embeddings: torch.Tensor, causal: bool) -> torch.Tensor:
        length = embeddings.shape[1]
        if length > self.config.max_len:
            raise ValueError(f"sequence length {length} exceeds max_len {self.config.max_len}")
        positions = torch.arange(length, device=embeddings.device)
        x = self.dropout(self.embedding_norm(embeddings + self.position(positions)))
        for block in self.blocks:
            x = block(x, causal)
        return self.final_norm(x)


class LanguageModel(nn.Module):
    """Token embedding, :class:`Encoder`, and BERT's LM head with the decoder tied to the token embedding.

    ``forward(ids [B, T], causal) -> logits [B, T, vocab]``; ``hidden`` and ``head`` split it, so a masked-LM
    loss can project only the masked positions.
    """

    def __init__(self, config: TransformerConfig):
        super().__init__()
        config.check_fits_in_memory()
        d = config.d_model
        self.config = config
        self.token = nn.Embedding(config.vocab_size, d)
        self.encoder = Encoder(config)
        self.head_transform = nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.LayerNorm(d, eps=config.layer_norm_eps))
        self.head_bias = nn.Parameter(torch.zeros(config.vocab_size))
        self.apply(lambda module: init_bert_(module, config.init_std))

    def hidden(self, ids: torch.Tensor, causal: bool) -> torch.Tensor:
        """``[B, T]`` token ids -> ``[B, T, d_model]`` final hidden states."""
        return self.encoder(self.token(ids), causal)

    def head(self, hidden: torch.Tensor) -> torch.Tensor:
        """``[..., d_model]`` -> ``[..., vocab]`` logits (decoder tied to the token embedding)."""
        return F.linear(self.head_transform(hidden), self.token.weight, self.head_bias)

    def forward(self, ids: torch.Tensor, causal: bool) -> torch.Tensor:
        return self.head(self.hidden(ids, causal))


def init_bert_(module: nn.Module, std: float = 0.02, generator: torch.Generator | None = None) -> None:
    """BERT's initialisation, in place: Linear/Embedding weights ``N(0, std)`` (drawn from ``generator``, else the
    global RNG), biases 0, LayerNorm ``(1, 0)``; an attention layer's null slot ``N(0, std)`` as the weights."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, mean=0.0, std=std, generator=generator)
    if isinstance(module, SelfAttention) and module.attention == "softmax-null-slot":
        nn.init.normal_(module.null_key, mean=0.0, std=std, generator=generator)
        nn.init.normal_(module.null_value, mean=0.0, std=std, generator=generator)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)
    if isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)


def attention_layers(model: nn.Module) -> list[SelfAttention]:
    """The :class:`SelfAttention` modules of a model, in layer order (DDP and compiled wrappers unwrapped)."""
    layers = [m for m in model.modules() if isinstance(m, SelfAttention)]
    if not layers:
        raise ValueError(f"{type(model).__name__} has no attnstruct SelfAttention layers")
    return layers


@torch.no_grad()
def query_key_factors(model: nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-head query and key weights of every layer, ``([L, H, d_head, d_model], [L, H, d_head, d_model])``.

    A detached float64 copy in the layout of :func:`attnstruct.factor_scores`, for which
    ``W_qk^{l,h} = W_q^{l,h}^T W_k^{l,h}``. Biases are left out, as in the paper's score, and so is a null slot
    (``attention="softmax-null-slot"``): its key ``k0`` is a key bias, a score ``q_i . k0`` that no second token
    enters, outside the bilinear form ``x_i^T W_qk x_j`` (as the rotation of rotary embeddings is).
    """
    layers = attention_layers(model)
    n_heads, d_head = layers[0].n_heads, layers[0].d_head

    def stack(kind: str) -> torch.Tensor:
        weights = torch.stack([getattr(layer, kind).weight.detach() for layer in layers])
        return weights.to("cpu", torch.float64).view(len(layers), n_heads, d_head, -1)

    return stack("query"), stack("key")


def attention_scale(config: TransformerConfig) -> float:
    """The ``1/sqrt(d_head)`` factor that every attention form applies to ``q k^T`` (SDPA's own for softmax)."""
    return 1.0 / math.sqrt(config.d_head)
