"""The two toy tasks of notebook 04 (copy and Markov sequences) and the one-layer attention model trained on them.

Their tiny loop (:func:`train`) stays off :mod:`attnstruct.training.engine`: it trains ``W_qk`` itself as a
parameter (or as ``W_q W_k^T``) and records the coefficients ``beta`` of the analytic gradient, which the engine's
Transformer and records do not have.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch
import xarray as xr

from .. import gradient as G
from ..random_matrices import generator
from ..scores import directionality_score, symmetry_score
from ..training.config import Settings, one_of, positive_integers

TASKS = ("copy", "markov")


MARKOV_SEED = 2502  # seeds the one transition matrix of the Markov task, whatever the run's seed


MARKOV_CONCENTRATION = 0.1  # Dirichlet concentration of its rows: a few likely successors per token


@dataclass(frozen=True)
class CopyTaskConfig(Settings):
    """One training run of :func:`train`. Defaults: notebook 04's quick profile (a test checks it)."""

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


def _zipf(vocab: int, zipf: float) -> torch.Tensor:
    prior = torch.arange(1, vocab + 1, dtype=torch.float64) ** -zipf
    return prior / prior.sum()


def repeated_sequences(n_seq: int, seq_len: int, vocab: int, zipf: float, gen: torch.Generator) -> torch.Tensor:
    """Token ids ``[n_seq, seq_len]``: ``seq_len // 2`` Zipf-distributed tokens, then the same tokens again."""
    if seq_len % 2:
        raise ValueError(f"seq_len must be even, got {seq_len}")
    half = torch.multinomial(_zipf(vocab, zipf), n_seq * (seq_len // 2), replacement=True, generator=gen)
    half = half.view(n_seq, seq_len // 2)
    return torch.cat([half, half], dim=1)


@functools.lru_cache(maxsize=8)
def _dirichlet_rows(vocab: int, seed: int, concentration: float) -> np.ndarray:
    rows = np.random.default_rng(seed).dirichlet(np.full(vocab, concentration), size=vocab)
    rows = rows / rows.sum(1, keepdims=True)
    rows.flags.writeable = False
    return rows


def markov_transitions(vocab: int, *, seed: int = MARKOV_SEED, concentration: float = MARKOV_CONCENTRATION):
    """Row-stochastic ``[vocab, vocab]`` (float64): row ``a`` is ``P(next = b | current = a)``, each row a
    Dirichlet draw of ``concentration`` from ``np.random.default_rng(seed)``."""
    return torch.tensor(_dirichlet_rows(int(vocab), int(seed), float(concentration)))


def markov_sequences(
    n_seq: int, seq_len: int, vocab: int, zipf: float, gen: torch.Generator, transitions: torch.Tensor | None = None
) -> torch.Tensor:
    """Token ids ``[n_seq, seq_len]``: a Zipf-distributed first token, then each token drawn from the row of
    ``transitions`` (default :func:`markov_transitions`) of the token before it."""
    t = markov_transitions(vocab) if transitions is None else transitions
    cdf = t.cumsum(1)
    tokens = [torch.multinomial(_zipf(vocab, zipf), n_seq, replacement=True, generator=gen)]
    u = torch.rand(seq_len - 1, n_seq, 1, generator=gen, dtype=torch.float64)
    for k in range(seq_len - 1):
        tokens.append(torch.searchsorted(cdf[tokens[-1]], u[k]).squeeze(1).clamp_max(vocab - 1))
    return torch.stack(tokens, 1)


def sequences(task: str, n_seq: int, seq_len: int, vocab: int, zipf: float, gen: torch.Generator) -> torch.Tensor:
    """Token ids ``[n_seq, seq_len]`` of ``task`` (one of :data:`TASKS`)."""
    one_of(task, TASKS, "task")
    make = repeated_sequences if task == "copy" else markov_sequences
    return make(n_seq, seq_len, vocab, zipf, gen)


def target_entropy(
    task: str, objective: str, *, seq_len: int, vocab: int, zipf: float, mask_rate: float, n_sequences: int, gen
) -> float:
    """Entropy in nats, ``-sum_v p_v log p_v``, of the tokens ``objective`` predicts on ``n_sequences`` sequences
    of ``task`` (the targets of :func:`batch_for` at its predicted positions, ``p_v`` their frequencies): the loss
    of the best predictor that ignores the context, the yardstick a run must beat to have learned anything. A
    plug-in estimate, low by about ``(vocab - 1) / (2 * predicted tokens)`` nats."""
    tokens = sequences(task, n_sequences, seq_len, vocab, zipf, gen)
    _, targets, predict, _ = batch_for(objective, tokens, vocab, mask_rate, gen)
    counts = torch.bincount(targets[predict], minlength=vocab).double()
    p = counts[counts > 0] / counts.sum()
    return float(-(p * p.log()).sum())


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


def training_batch(config: CopyTaskConfig, task: str, step: int):
    """:func:`batch_for` of step ``step`` of a run: sequences of ``task`` and the masked positions, drawn from a
    generator seeded by ``(config.seed, step)`` alone (no state carried over from earlier steps)."""
    c, gen = config, generator(config.seed, step)
    tokens = sequences(task, c.batch, c.seq_len, c.vocab, c.zipf, gen)
    return batch_for(c.objective, tokens, c.vocab, c.mask_rate, gen)


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

    The same sum without the self-pairs ``j = i`` (:func:`attnstruct.gradient.outer_product_sum`) is scored as
    ``symmetry_without_self`` and ``directionality_without_self`` (final sum: ``update_without_self``).
    """
    d, n = model.embed.shape[1], tokens.shape[1]
    total = torch.zeros(d, d, dtype=torch.float64)
    without_self = torch.zeros(d, d, dtype=torch.float64)
    beta_total = torch.zeros(n, n, dtype=torch.float64)
    out = {k: [] for k in ("symmetry", "directionality", "symmetry_without_self", "directionality_without_self")}
    done = 0
    for stop in checkpoints:
        while done < stop:
            batch = batch_for(objective, tokens[done : done + 1], model.vocab, mask_rate, gen)
            with torch.no_grad():
                arguments = model.arguments(*batch)
                grad, beta = G.analytic_gradient(*arguments)
                without_self -= G.outer_product_sum(beta, arguments[0], include_self=False)[0]
            total -= grad[0]
            beta_total += beta[0, 0]
            done += 1
        for suffix, m in (("", total), ("_without_self", without_self)):
            out["symmetry" + suffix].append(float(symmetry_score(m)))
            out["directionality" + suffix].append(float(directionality_score(m)))
    out["update"], out["update_without_self"] = total.numpy(), without_self.numpy()
    out["beta"] = beta_total.numpy()
    return out


def beta_symmetry(beta: torch.Tensor) -> float:
    """Symmetry score of the coefficients summed over the batch, ``sum_b beta_b`` ``[N, N]``: +1 when
    ``beta_ij = beta_ji`` on aggregate (the assumption behind the symmetric-update argument)."""
    return float(symmetry_score(beta.sum((0, 1))))


RECORDED = ("loss", "symmetry", "directionality", "beta_symmetry")
HELD_OUT_SEQUENCES = 1024  # at least this many fresh sequences behind a run's held-out loss


def held_out_batch(config: CopyTaskConfig, task: str, n_sequences: int = HELD_OUT_SEQUENCES):
    """:func:`training_batch` of the ``k = ceil(n_sequences / batch)`` steps after a run's last, ``steps + 1 ..
    steps + k``, joined along the batch: sequences the run never trained on. Input ids, targets, predicted
    positions ``[k * batch, N]`` and the context mask ``[N, N]``."""
    n_batches = -(-int(n_sequences) // config.batch)
    parts = [training_batch(config, task, config.steps + 1 + k) for k in range(n_batches)]
    return (*(torch.cat([p[i] for p in parts]) for i in range(3)), parts[0][3])


def train(config: CopyTaskConfig, task: str = "copy") -> dict:
    """Train :class:`OneLayer` with Adam (or plain SGD, ``optimizer="sgd"``) on ``task`` (one of :data:`TASKS`;
    batches from :func:`training_batch`); every ``every`` steps record ``step`` and :data:`RECORDED`: the loss,
    both scores of ``W_qk`` and :func:`beta_symmetry`. Returns arrays keyed by name, the final ``wqk`` and
    ``held_out_loss``, the final model's loss on :func:`held_out_batch` (mean over its predicted tokens)."""
    c = config
    one_of(task, TASKS, "task")
    model = OneLayer(c.vocab, c.seq_len, c.d_model, c.factorised, torch.Generator().manual_seed(c.seed))
    optimiser = (torch.optim.Adam if c.optimizer == "adam" else torch.optim.SGD)(model.parameters(), lr=c.lr)
    record = {k: [] for k in ("step", *RECORDED)}
    for step in range(c.steps + 1):
        data = training_batch(c, task, step)
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
    with torch.no_grad():
        out["held_out_loss"] = float(model.loss(*held_out_batch(c, task)))
    return out


PARAMETERISATIONS = {False: "W_qk", True: "W_q W_k^T"}


def runs_dataset(runs: dict) -> xr.Dataset:
    """One dataset of :data:`RECORDED` over ``(task, objective, parameterisation, seed, step)`` and of
    ``held_out_loss`` over ``(task, objective, parameterisation, seed)`` from ``runs``, keyed ``(task, objective,
    factorised, seed)`` with :func:`train`'s records (all recorded at the same steps); combinations not trained
    are NaN."""
    if not runs:
        raise ValueError("runs must not be empty")
    keys = list(runs)
    axes = [list(dict.fromkeys(k[i] for k in keys)) for i in range(4)]
    steps = next(iter(runs.values()))["step"]
    shape = (*map(len, axes), len(steps))
    arrays = {v: np.full(shape, np.nan) for v in RECORDED}
    held_out = np.full(shape[:-1], np.nan)
    for key, rec in runs.items():
        if not np.array_equal(rec["step"], steps):
            raise ValueError(f"run {key} was recorded at other steps than the first run")
        index = tuple(axis.index(k) for axis, k in zip(axes, key))
        for v in RECORDED:
            arrays[v][index] = rec[v]
        held_out[index] = rec["held_out_loss"]
    dims = ("task", "objective", "parameterisation", "seed", "step")
    coords = dict(zip(dims, [axes[0], axes[1], [PARAMETERISATIONS[f] for f in axes[2]], axes[3], steps]))
    variables = {v: (dims, a) for v, a in arrays.items()} | {"held_out_loss": (dims[:-1], held_out)}
    return xr.Dataset(variables, coords=coords)
