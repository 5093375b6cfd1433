"""The copy task of notebook 02: synthetic token sequences, accumulated updates of ``W_qk`` at initialisation,
and a one-layer attention model trained both ways.

Not on :mod:`attnstruct.engine`: its batches come from one running generator and it records ``beta`` from the
analytic gradient, so moving it there would change notebook 02's numbers.

Objectives on the same sequences:

* ``bidirectional`` (masked LM): each position is predicted with probability ``mask_rate``; its input is
  replaced by a mask embedding; every position is context (``D_i`` = all ``j``).
* ``causal`` (next-token): the query at position ``i`` predicts token ``i + 1`` from positions ``j <= i``.

The task that separates the objectives is a copy task (:func:`repeated_sequences`): the second half of every
sequence repeats the first, so a token is predictable only from another position. (In a trial run on
first-order Markov data, where the next token depends only on the current one, the causal one-layer model
learned to attend to itself and ended more symmetric than the masked-LM one; such data cannot test the claim.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from . import gradient as G
from .scores import directionality_score, symmetry_score
from .settings import Settings, one_of, positive_integers


@dataclass(frozen=True)
class CopyTaskConfig(Settings):
    """One training run of :func:`train`. Defaults: notebook 02's quick profile (a test checks it)."""

    KIND: ClassVar[str] = "copy task"

    objective: str = "bidirectional"
    factorised: bool = False
    optimizer: str = "adam"
    seed: int = 0
    vocab: int = 64
    seq_len: int = 16
    d_model: int = 32
    steps: int = 1000
    batch: int = 64
    lr: float = 0.003
    mask_rate: float = 0.15
    zipf: float = 1.0
    every: int = 50

    def __post_init__(self):
        one_of(self.objective, G.OBJECTIVES, "objective")
        one_of(self.optimizer, ("adam", "sgd"), "optimizer")
        positive_integers(self, ("vocab", "seq_len", "d_model", "steps", "batch", "every"))
        if self.seq_len % 2:
            raise ValueError(f"seq_len must be even, got {self.seq_len}")
        if not 0.0 < self.mask_rate < 1.0 or not self.lr > 0:
            raise ValueError("mask_rate must be in (0, 1) and lr positive")


def repeated_sequences(n_seq: int, seq_len: int, vocab: int, zipf: float, gen: torch.Generator) -> torch.Tensor:
    """Token ids ``[n_seq, seq_len]``: ``seq_len // 2`` Zipf-distributed tokens, then the same tokens again."""
    if seq_len % 2:
        raise ValueError(f"seq_len must be even, got {seq_len}")
    prior = torch.arange(1, vocab + 1, dtype=torch.float64) ** -zipf
    half = torch.multinomial(prior / prior.sum(), n_seq * (seq_len // 2), replacement=True, generator=gen)
    half = half.view(n_seq, seq_len // 2)
    return torch.cat([half, half], dim=1)


def batch_for(objective: str, tokens: torch.Tensor, mask_token: int, mask_rate: float, gen: torch.Generator):
    """Input ids, targets, predicted positions (``[B, N]`` each) and the context mask ``[N, N]``.

    ``bidirectional``: masked LM, each position predicted with probability ``mask_rate`` (at least one per
    sequence), its input replaced by ``mask_token``. ``causal``: every position but the last predicts the next token.
    """
    b, n = tokens.shape
    if objective == "bidirectional":
        predict = torch.rand(b, n, generator=gen) < mask_rate
        predict[torch.arange(b), torch.randint(0, n, (b,), generator=gen)] = True
        return torch.where(predict, mask_token, tokens), tokens, predict, G.context_mask(n, "bidirectional")
    if objective != "causal":
        raise ValueError(f"unknown objective {objective!r}; choose one of {G.OBJECTIVES}")
    targets = torch.cat([tokens[:, 1:], tokens[:, :1]], dim=1)
    predict = torch.ones(b, n, dtype=torch.bool)
    predict[:, -1] = False
    return tokens, targets, predict, G.context_mask(n, "causal")


class OneLayer(torch.nn.Module):
    """Token and position embeddings (plus a mask token), one attention head, tied unembedding.

    ``W_qk`` is a ``d x d`` parameter, or the product ``W_q W_k^T`` of two ``d x d`` parameters (``factorised``).
    Everything is trained.
    """

    def __init__(self, vocab: int, seq_len: int, d: int, factorised: bool, gen: torch.Generator):
        super().__init__()

        def param(*shape, scale):
            return torch.nn.Parameter(torch.randn(*shape, generator=gen, dtype=torch.float64) * scale)

        self.vocab, self.factorised, self.scale = vocab, factorised, d**-0.5
        self.embed = param(vocab + 1, d, scale=1.0)
        self.position = param(seq_len, d, scale=1.0)
        self.w_v, self.w_o = param(1, d, d, scale=d**-0.5), param(1, d, d, scale=d**-0.5)
        if factorised:
            self.w_q, self.w_k = param(d, d, scale=0.02), param(d, d, scale=0.02)
        else:
            self.w = param(d, d, scale=0.02)

    def wqk(self) -> torch.Tensor:
        return self.w_q @ self.w_k.T if self.factorised else self.w

    def inputs(self, ids: torch.Tensor) -> torch.Tensor:
        return self.embed[ids] + self.position

    def arguments(self, ids, targets, predict, mask):
        """The arguments of :func:`attnstruct.gradient.analytic_gradient` for this model and batch."""
        unembed = self.embed[: self.vocab]
        return self.inputs(ids), self.wqk()[None], self.w_v, self.w_o, unembed, targets, predict, mask, self.scale

    def loss(self, ids, targets, predict, mask):
        x, w, w_v, w_o, unembed, *_ = self.arguments(ids, targets, predict, mask)
        _, _, logits = G.forward(x, w, w_v, w_o, unembed, mask, self.scale)
        return G.loss(logits, targets, predict)


def accumulated_updates(
    model: OneLayer,
    tokens: torch.Tensor,
    objective: str,
    checkpoints: list[int],
    *,
    mask_rate: float,
    gen: torch.Generator,
) -> dict:
    """Sum of the update directions ``-dL/dW_qk`` over sequences at the model's current weights, scored after
    each number of sequences in ``checkpoints``; also the final sum ``update`` and the summed ``beta`` by position.
    """
    d, n = model.embed.shape[1], tokens.shape[1]
    total = torch.zeros(d, d, dtype=torch.float64)
    beta_total = torch.zeros(n, n, dtype=torch.float64)
    out = {"symmetry": [], "directionality": []}
    done = 0
    for stop in checkpoints:
        while done < stop:
            batch = batch_for(objective, tokens[done : done + 1], model.vocab, mask_rate, gen)
            with torch.no_grad():
                grad, beta = G.analytic_gradient(*model.arguments(*batch))
            total -= grad[0]
            beta_total += beta[0, 0]
            done += 1
        out["symmetry"].append(float(symmetry_score(total)))
        out["directionality"].append(float(directionality_score(total)))
    out["update"] = total.numpy()
    out["beta"] = beta_total.numpy()
    return out


def beta_symmetry(beta: torch.Tensor) -> float:
    """Symmetry score of the coefficients summed over the batch, ``sum_b beta_b`` ``[N, N]``: +1 when
    ``beta_ij = beta_ji`` on aggregate (the assumption behind the symmetric-update argument)."""
    return float(symmetry_score(beta.sum((0, 1))))


def train(config: CopyTaskConfig) -> dict:
    """Train :class:`OneLayer` with Adam (or plain SGD, ``optimizer="sgd"``) on :func:`repeated_sequences`; every
    ``every`` steps record the loss, both scores of ``W_qk`` and :func:`beta_symmetry`. Returns arrays keyed by
    name and the final ``wqk``."""
    c = config
    gen = torch.Generator().manual_seed(c.seed)
    model = OneLayer(c.vocab, c.seq_len, c.d_model, c.factorised, gen)
    optimiser = (torch.optim.Adam if c.optimizer == "adam" else torch.optim.SGD)(model.parameters(), lr=c.lr)
    record = {k: [] for k in ("step", "loss", "symmetry", "directionality", "beta_symmetry")}
    for step in range(c.steps + 1):
        tokens = repeated_sequences(c.batch, c.seq_len, c.vocab, c.zipf, gen)
        data = batch_for(c.objective, tokens, c.vocab, c.mask_rate, gen)
        loss = model.loss(*data)
        if step % c.every == 0:
            w = model.wqk().detach()
            with torch.no_grad():
                _, beta = G.analytic_gradient(*model.arguments(*data))
            record["step"].append(step)
            record["loss"].append(float(loss.detach()))
            record["symmetry"].append(float(symmetry_score(w)))
            record["directionality"].append(float(directionality_score(w)))
            record["beta_symmetry"].append(beta_symmetry(beta))
        if step == c.steps:
            break
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    out = {k: np.asarray(v) for k, v in record.items()}
    out["wqk"] = model.wqk().detach().numpy()
    return out
