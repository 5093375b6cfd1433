"""Toy experiments for the gradient structure (notebook 02): synthetic token sequences, accumulated
updates of ``W_qk`` at initialisation, and a one-layer attention model trained both ways.

Objectives on the same sequences:

* ``bidirectional`` (masked LM): each position is predicted with probability ``mask_rate``; its input is
  replaced by a mask embedding; every position is context (``D_i`` = all ``j``).
* ``causal`` (next-token): the query at position ``i`` predicts token ``i + 1`` from positions ``j <= i``.

Status: a first draft for notebook 02, which does not exist yet. At initialisation (``W_qk = 0``, fixed random
embeddings and values) these updates are *not* more symmetric for the bidirectional objective than for the
causal one, and training ``W_qk`` alone barely lowers the loss; the experiment design is still open.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from . import gradient as G
from .scores import directionality_score, symmetry_score


def markov_sequences(n_seq: int, seq_len: int, vocab: int, zipf: float, gen: torch.Generator) -> torch.Tensor:
    """Token ids ``[n_seq, seq_len]`` from a random first-order Markov chain whose states follow Zipf frequencies.

    Transition rows are ``softmax(log zipf_prior + 2 * standard normal)``: frequent tokens stay frequent, and
    each token has preferred successors (something to learn).
    """
    prior = torch.arange(1, vocab + 1, dtype=torch.float64) ** -zipf
    logits = prior.log()[None, :] + 2.0 * torch.randn(vocab, vocab, generator=gen, dtype=torch.float64)
    transition = torch.softmax(logits, -1)
    tokens = torch.empty(n_seq, seq_len, dtype=torch.long)
    tokens[:, 0] = torch.multinomial(prior / prior.sum(), n_seq, replacement=True, generator=gen)
    for i in range(1, seq_len):
        tokens[:, i] = torch.multinomial(transition[tokens[:, i - 1]], 1, generator=gen)[:, 0]
    return tokens


def batch_for(
    objective: str,
    tokens: torch.Tensor,
    embed: torch.Tensor,
    mask_vector: torch.Tensor,
    mask_rate: float,
    gen: torch.Generator,
):
    """Inputs ``x`` ``[B, N, d]``, targets ``[B, N]``, predicted positions ``[B, N]`` and the context mask."""
    b, n = tokens.shape
    x = embed[tokens]
    if objective == "bidirectional":
        predict = torch.rand(b, n, generator=gen) < mask_rate
        x = torch.where(predict[..., None], mask_vector, x)
        return x, tokens, predict, G.context_mask(n, "bidirectional")
    targets = torch.cat([tokens[:, 1:], tokens[:, :1]], dim=1)
    predict = torch.ones(b, n, dtype=torch.bool)
    predict[:, -1] = False
    return x, targets, predict, G.context_mask(n, "causal")


@dataclass
class ToyModel:
    """Fixed token embeddings ``[V, d]`` (tied unembedding), a mask embedding, values and output (one head)."""

    embed: torch.Tensor
    mask_vector: torch.Tensor
    w_v: torch.Tensor  # [1, d, d]
    w_o: torch.Tensor  # [1, d, d]

    @classmethod
    def random(cls, vocab: int, d: int, gen: torch.Generator) -> "ToyModel":
        r = lambda *s: torch.randn(*s, generator=gen, dtype=torch.float64)  # noqa: E731
        return cls(r(vocab, d), r(d), r(1, d, d) / d**0.5, r(1, d, d) / d**0.5)


def accumulated_updates(
    model: ToyModel,
    tokens: torch.Tensor,
    objective: str,
    checkpoints: list[int],
    *,
    mask_rate: float,
    gen: torch.Generator,
    w_qk: torch.Tensor | None = None,
) -> dict:
    """Sum of the update directions ``-dL/dW_qk`` over sequences, scored after each number in ``checkpoints``.

    Returns ``symmetry``, ``directionality`` (lists over checkpoints) and the final accumulated matrix ``update``.
    """
    d = model.embed.shape[1]
    w = torch.zeros(1, d, d, dtype=torch.float64) if w_qk is None else w_qk
    total = torch.zeros(d, d, dtype=torch.float64)
    out = {"symmetry": [], "directionality": []}
    done = 0
    for stop in checkpoints:
        while done < stop:
            x, targets, predict, mask = batch_for(
                objective, tokens[done : done + 1], model.embed, model.mask_vector, mask_rate, gen
            )
            if predict.any():
                grad, _ = G.analytic_gradient(x, w, model.w_v, model.w_o, model.embed, targets, predict, mask, d**-0.5)
                total -= grad[0]
            done += 1
        out["symmetry"].append(float(symmetry_score(total)))
        out["directionality"].append(float(directionality_score(total)))
    out["update"] = total.numpy()
    return out


def beta_symmetry(beta: torch.Tensor, tokens: torch.Tensor, vocab: int) -> tuple[float, float]:
    """How symmetric the coefficients are on aggregate: the symmetry score of ``sum beta`` over positions
    ``[N, N]`` and over token pairs ``[V, V]`` (``C[t_i, t_j] += beta_ij``)."""
    by_position = beta.sum((0, 1))
    b, _, n, _ = beta.shape
    pairs = (tokens[:, :, None] * vocab + tokens[:, None, :]).reshape(b, -1)
    by_token = torch.zeros(vocab * vocab, dtype=beta.dtype)
    by_token.index_add_(0, pairs.reshape(-1), beta.sum(1).reshape(-1))
    return float(symmetry_score(by_position)), float(symmetry_score(by_token.reshape(vocab, vocab)))


def train(
    model: ToyModel,
    tokens: torch.Tensor,
    objective: str,
    factorised: bool,
    *,
    steps: int,
    batch: int,
    lr: float,
    mask_rate: float,
    every: int,
    seed: int,
    d_head: int | None = None,
) -> dict:
    """Adam on ``W_qk`` (a ``d x d`` parameter) or on ``W_q, W_k`` (``d x d_head`` each, ``W_qk = W_q W_k^T``).

    Values, output and embeddings stay fixed, so only the query-key geometry learns. Records, every
    ``every`` steps, the loss and both scores of ``W_qk``, and the aggregate symmetry of ``beta``.
    """
    gen = torch.Generator().manual_seed(seed)
    d = model.embed.shape[1]
    d_head = d_head or d
    init = lambda *s: (torch.randn(*s, generator=gen, dtype=torch.float64) * 0.02).requires_grad_(True)  # noqa: E731
    params = [init(d, d_head), init(d, d_head)] if factorised else [init(d, d)]
    optimiser = torch.optim.Adam(params, lr=lr)
    record = {
        k: [] for k in ("step", "loss", "symmetry", "directionality", "beta_position_symmetry", "beta_token_symmetry")
    }
    vocab = model.embed.shape[0]
    for step in range(steps + 1):
        index = torch.randint(0, tokens.shape[0], (batch,), generator=gen)
        x, targets, predict, mask = batch_for(objective, tokens[index], model.embed, model.mask_vector, mask_rate, gen)
        w_qk = (params[0] @ params[1].T if factorised else params[0])[None]
        _, _, logits = G.forward(x, w_qk, model.w_v, model.w_o, model.embed, mask, d**-0.5)
        loss = G.loss(logits, targets, predict)
        if step % every == 0:
            w = w_qk.detach()[0]
            _, beta = G.analytic_gradient(
                x, w_qk.detach(), model.w_v, model.w_o, model.embed, targets, predict, mask, d**-0.5
            )
            record["step"].append(step)
            record["loss"].append(float(loss.detach()))
            record["symmetry"].append(float(symmetry_score(w)))
            record["directionality"].append(float(directionality_score(w)))
            pos, tok = beta_symmetry(beta, tokens[index], vocab)
            record["beta_position_symmetry"].append(pos)
            record["beta_token_symmetry"].append(tok)
        if step == steps:
            break
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    return {k: np.asarray(v) for k, v in record.items()}
