"""The two toy tasks of notebook 04: synthetic token sequences, accumulated updates of ``W_qk`` at
initialisation, and a one-layer attention model trained both ways.

Not on :mod:`attnstruct.engine`: it records ``beta`` from the analytic gradient and trains ``W_qk`` itself
as a parameter, which the engine's models do not.

Objectives on the same sequences:

* ``bidirectional`` (masked LM): each position is predicted with probability ``mask_rate``; its input is
  replaced by a mask embedding; every position is context (``D_i`` = all ``j``).
* ``causal`` (next-token): the query at position ``i`` predicts token ``i + 1`` from positions ``j <= i``.

Tasks (:data:`TASKS`, :func:`sequences`):

* ``copy`` (:func:`repeated_sequences`): the second half of every sequence repeats the first, so a token is
  predictable only from another position. The notebook's first task; it was chosen after a trial on the
  Markov task had given the opposite ordering, and both are shown.
* ``markov`` (:func:`markov_sequences`): a first-order Markov chain over the same vocabulary, one fixed
  transition matrix (:func:`markov_transitions`, seed :data:`MARKOV_SEED`): the next token depends only on
  the current one.

A training batch is a pure function of ``(seed, step)`` and the data settings (:func:`training_batch`), so
the two objectives of one seed see the same token sequences at every step.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch
import xarray as xr

from . import gradient as G
from .prose import count, percent, signed
from .scores import directionality_score, symmetry_score
from .settings import Settings, one_of, positive_integers
from .toys import generator

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


def train(config: CopyTaskConfig, task: str = "copy") -> dict:
    """Train :class:`OneLayer` with Adam (or plain SGD, ``optimizer="sgd"``) on ``task`` (one of :data:`TASKS`;
    batches from :func:`training_batch`); every ``every`` steps record ``step`` and :data:`RECORDED`: the loss,
    both scores of ``W_qk`` and :func:`beta_symmetry`. Returns arrays keyed by name and the final ``wqk``."""
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
    return out


PARAMETERISATIONS = {False: "W_qk", True: "W_q W_k^T"}


def runs_dataset(runs: dict) -> xr.Dataset:
    """One dataset of :data:`RECORDED` over ``(task, objective, parameterisation, seed, step)`` from ``runs``,
    keyed ``(task, objective, factorised, seed)`` with :func:`train`'s records (all recorded at the same steps);
    combinations not trained are NaN."""
    if not runs:
        raise ValueError("runs must not be empty")
    keys = list(runs)
    axes = [list(dict.fromkeys(k[i] for k in keys)) for i in range(4)]
    steps = next(iter(runs.values()))["step"]
    shape = (*map(len, axes), len(steps))
    arrays = {v: np.full(shape, np.nan) for v in RECORDED}
    for key, rec in runs.items():
        if not np.array_equal(rec["step"], steps):
            raise ValueError(f"run {key} was recorded at other steps than the first run")
        index = tuple(axis.index(k) for axis, k in zip(axes, key))
        for v in RECORDED:
            arrays[v][index] = rec[v]
    dims = ("task", "objective", "parameterisation", "seed", "step")
    coords = dict(zip(dims, [axes[0], axes[1], [PARAMETERISATIONS[f] for f in axes[2]], axes[3], steps]))
    return xr.Dataset({v: (dims, a) for v, a in arrays.items()}, coords=coords)


def null_reading(comparisons) -> str:
    """Words for where scores sit in their null distribution (``comparisons``: objects with ``outside``, as
    :func:`attnstruct.evidence.compare_with_null` returns): all, some or none beyond the null's 95% range."""
    flags = [bool(c.outside) for c in comparisons]
    if not flags:
        raise ValueError("comparisons must not be empty")
    k, n = sum(flags), len(flags)
    every = "" if n == 1 else f" in all {n} runs"
    if k == 0:
        return f"inside the null's 95% range{every}: no finding"
    if k == n:
        return f"beyond the null's 95% range{every}"
    return f"beyond the null's 95% range in {k} of {n} runs only: not a consistent finding"


def ordering_sentence(final: xr.DataArray, parameterisation: str = "W_qk") -> str:
    """Per task, the mean over seeds of ``final`` (a score over ``task, objective, parameterisation, seed``),
    bidirectional against causal, and whether that is the order the symmetric-update argument predicts
    (bidirectional higher); then whether the tasks agree."""
    parts, predicted = [], []
    for task in final.task.values:
        mean = final.sel(task=task, parameterisation=parameterisation).mean("seed")
        b, c = float(mean.sel(objective="bidirectional")), float(mean.sel(objective="causal"))
        predicted.append(b > c)
        order = "the order the argument predicts" if b > c else "the opposite order"
        parts.append(f"{task} task, bidirectional {signed(b)} against causal {signed(c)}: {order}")
    text = f"Mean over {count(final.sizes['seed'], 'seed')}, {parameterisation}: " + "; ".join(parts) + "."
    if all(predicted):
        return text + " Every task gives the predicted order."
    if not any(predicted):
        return text + " No task gives the predicted order."
    return text + (
        " The tasks give opposite orders: in these toys the task, not the objective alone, decides"
        " which objective ends with the more symmetric W_qk."
    )


def proxy_reading(beta_gap: float, wqk_gap: float) -> str:
    """What the gap in the ``beta_ij = beta_ji`` proxy between the objectives (bidirectional minus causal, e.g. of
    :func:`beta_symmetry`) says about the gap in final symmetry of ``W_qk`` (same order). The rule: the proxy
    accounts for the ``W_qk`` gap when it points the same way and is at least half its size; the same way but
    smaller is a weak result, the other way (or no gap) a negative one."""
    if not np.isfinite(beta_gap) or not np.isfinite(wqk_gap) or wqk_gap == 0:
        raise ValueError(f"need finite gaps and a non-zero W_qk gap, got {beta_gap!r} and {wqk_gap!r}")
    ratio = beta_gap / wqk_gap
    if ratio <= 0:
        return "the proxy's gap points the other way from the gap in W_qk: a negative result for the mechanism"
    size = f"{percent(ratio)} of its size"
    if ratio < 0.5:
        return f"the proxy's gap points the same way as the gap in W_qk but is {size}: a weak result for the mechanism"
    return f"the proxy's gap points the same way as the gap in W_qk, at {size}: the proxy follows W_qk here"
