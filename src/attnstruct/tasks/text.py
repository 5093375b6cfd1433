"""Language modelling from scratch: the BERT-like model of :mod:`attnstruct.training.model` as encoder or decoder.

The paper's two training modes (its section 4, models trained from scratch), on the same text, tokenizer,
initialisation and hyperparameters; the loop is :func:`attnstruct.training.engine.train`:

* ``"mlm"``: masked language modelling with bidirectional attention. 15% of positions are selected; of those 80%
  become ``[MASK]``, 10% a random token, 10% stay; the loss covers the selected positions.
* ``"next-token"``: causal attention and a next-token loss at *every* position. The authors' decoder runs used
  the masked-LM collator (a loss on about 15% of positions, with corrupted inputs); that flaw is corrected here
  and can be reproduced with ``"next-token-mlm-collator"`` for comparison.

Initialisations (:func:`initialise`, the paper's symmetric initialisation experiment and its controls):
``bert``, ``symmetric``, ``symmetric-matched``, ``default-scale``.

The batch of step ``s`` (windows and masks) is drawn from a generator seeded with ``(seed, s)`` only
(:func:`make_batch`); validation uses the same held-out windows and masks at every evaluation. The initial
weights come from ``init_seed`` when it is set, else from ``seed``: two runs of one ``seed`` and different
``init_seed`` see the same batches from different starts (notebook 06's placebo). ``init_from`` continues
training from a snapshot folder of another run (:mod:`attnstruct.training.snapshots`; a relative path is read from
the runs folder of :func:`train_many`) with this run's objective: a decoder trained on as an encoder, say (notebook
09's cross-objective runs); the batches are still drawn from ``(seed, step)``, steps counted from 1 again.

The corpus (:mod:`attnstruct.tasks.run_tokens`): the packaged plays or one UTF-8 text file with the BPE trained here
(``tokenizer="bpe"``, ``vocab_size``), as :mod:`attnstruct.tasks.plays_and_text_files` reads them; anything else is a
*prepared corpus*, tokenised once by :mod:`attnstruct.tasks.prepared_corpus` (a hub dataset ``hf://datasets/ORG/NAME[@REV]``
with ``corpus_config``, ``corpus_split``, ``corpus_field``; a named corpus; parquet, jsonl or text files or a
folder of them; a tokenizer by hub id or ``tokenizer.json`` path; ``max_tokens``; ``preprocessing``) or a prepared
folder itself, and read by memory map: the windows of a batch are the only tokens read, drawn from ``(seed, step)``
exactly as from the plays. The model's vocabulary is then the tokenizer's, the mask id the tokenizer's (masked LM
needs one), and the random tokens of BERT's 10% come from the whole vocabulary, as Hugging Face's collator draws
them.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import torch
import xarray as xr
from torch.nn import functional as F

from ..training import engine
from ..training import processes as many_runs
from ..training.config import one_of
from ..training.model import LanguageModel, attention_layers
from . import plays_and_text_files
from .run_tokens import corpus_data, corpus_tokenizer
from .text_config import INITS, TextConfig

__all__ = [
    "Batch",
    "TextTask",
    "corpus_data",
    "corpus_tokenizer",
    "train",
    "train_many",
]

VAL_SEED = 20250214  # the validation windows and masks are the same for every run


# ---------------------------------------------------------------------------------------------- batches


@dataclass(frozen=True)
class Batch:
    """Model inputs ``[B, T]``, the positions that carry a loss (bool ``[B, T]``) and their targets ``[n]``;
    ``positions`` (int64 ``[n]``) are the selected positions' indices in the flattened ``[B * T]``, found on the
    CPU when the batch is made, so that the loss gathers them on a device without waiting for it."""

    inputs: torch.Tensor
    selected: torch.Tensor
    targets: torch.Tensor
    positions: torch.Tensor | None = None

    def __post_init__(self):
        if self.positions is None:
            object.__setattr__(self, "positions", self.selected.reshape(-1).nonzero()[:, 0])

    def rows(self, start: int, step: int) -> Batch:
        """The rows ``start::step`` (one process's share of a global batch, or one micro-batch of it)."""
        if step == 1:
            return self
        row_of_target = self.selected.nonzero()[:, 0]
        keep = (row_of_target % step) == start
        return Batch(self.inputs[start::step], self.selected[start::step], self.targets[keep])

    def to(self, device) -> Batch:
        return Batch(*(t.to(device) for t in (self.inputs, self.selected, self.targets, self.positions)))


def draw_windows(ids, n: int, length: int, generator: torch.Generator) -> torch.Tensor:
    """``n`` random windows of ``length`` consecutive tokens of ``ids`` (a tensor, or an array such as a memory
    map, of which only the windows are read), ``[n, length]`` int64."""
    if len(ids) <= length:
        raise ValueError(f"the text has {len(ids)} tokens, fewer than one window of {length + 1}")
    starts = torch.randint(0, len(ids) - length, (n,), generator=generator)
    index = starts[:, None] + torch.arange(length)
    if isinstance(ids, torch.Tensor):
        return ids[index]
    return torch.from_numpy(ids[index.numpy()].astype("int64"))


def mask_for_mlm(
    tokens: torch.Tensor, mask_id: int, random_range: tuple[int, int], rate: float, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's corruption: select ``rate`` of positions (at least one per row); 80% -> [MASK], 10% a random token
    drawn uniformly from ``[low, high) = random_range``, 10% kept.

    Returns the corrupted inputs ``[B, T]`` and the selection ``[B, T]`` (bool).
    """
    draws = torch.rand(tokens.shape, generator=generator)
    selected = draws < rate
    selected[torch.arange(len(tokens)), draws.argmin(1)] = True
    action = torch.rand(tokens.shape, generator=generator)
    random_tokens = torch.randint(*random_range, tokens.shape, generator=generator)
    inputs = torch.where(selected & (action < 0.8), mask_id, tokens)
    inputs = torch.where(selected & (action >= 0.8) & (action < 0.9), random_tokens, inputs)
    return inputs, selected


def make_batch(config: TextConfig, data, ids, n: int, *seeds: int) -> Batch:
    """The batch for one step (or one validation batch), a pure function of the seeds; ``data`` is the corpus
    (:class:`attnstruct.tasks.plays_and_text_files.TokenData` or
    :class:`~attnstruct.tasks.plays_and_text_files.MappedTokens`), ``ids`` one of its splits."""
    generator = engine.seeded_generator(*seeds)
    windows = draw_windows(ids, n, config.seq_len + 1, generator)
    if config.objective == "mlm":
        tokens = windows[:, :-1]
        inputs, selected = mask_for_mlm(tokens, data.mask_id, data.random_tokens, config.mask_rate, generator)
        return Batch(inputs, selected, tokens[selected])
    inputs, following = windows[:, :-1], windows[:, 1:]
    if config.objective == "next-token":
        return Batch(inputs, torch.ones_like(inputs, dtype=torch.bool), following.reshape(-1))
    # The authors' decoder runs: MLM-corrupted inputs, a next-token loss only where the next token was selected.
    corrupted, chosen = mask_for_mlm(windows, data.mask_id, data.random_tokens, config.mask_rate, generator)
    selected = chosen[:, 1:]
    return Batch(corrupted[:, :-1], selected, following[selected])


# ---------------------------------------------------------------------------------------------- the model


def initialise(model: LanguageModel, init: str, generator: torch.Generator) -> None:
    """Apply an initialisation variant on top of BERT's (the paper's symmetric initialisation, section 4).

    * ``"bert"``: BERT's ``N(0, 0.02)`` weights, zero biases (the baseline).
    * ``"symmetric"``: the authors' method. Q, K and V of every layer are re-created with PyTorch's default
      ``nn.Linear`` initialisation (weights and biases ``U(+-1/sqrt(d))``), then ``W_q := W_k``. This also
      changes the Q/K/V scale and re-draws V: the confound.
    * ``"symmetric-matched"``: BERT's initialisation, then ``W_q := W_k`` per layer (so per head). Every weight
      keeps the baseline's distribution; only the Q-K coupling differs. The control that removes the confound.
    * ``"default-scale"``: Q, K, V re-created as in ``"symmetric"`` but without ``W_q := W_k``: the confound alone.
    """
    one_of(init, INITS, "init")
    if init == "bert":
        return
    with torch.no_grad():
        for layer in attention_layers(model):
            if init in ("symmetric", "default-scale"):
                for linear in (layer.query, layer.key, layer.value):
                    bound = 1.0 / math.sqrt(linear.in_features)  # nn.Linear.reset_parameters' distribution
                    linear.weight.uniform_(-bound, bound, generator=generator)
                    linear.bias.uniform_(-bound, bound, generator=generator)
            if init in ("symmetric", "symmetric-matched"):
                layer.query.weight.copy_(layer.key.weight)


def build_model(config: TextConfig, vocab_size: int, runs_dir=None) -> LanguageModel:
    """The model of a run, initialised from ``config.weights_seed`` alone, or with the weights of the snapshot
    ``config.init_from`` (a relative path is read from ``runs_dir``, the folder of the runs, so that the run's
    parameters, and its reuse key, do not depend on where that folder is); the global RNG is left as it was."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.weights_seed)  # the construction's draws, then BERT's initialisation
        model = LanguageModel(config.model_config(vocab_size))
    initialise(model, config.init, engine.seeded_generator(config.weights_seed, 7))
    if config.init_from is not None:
        start = Path(config.init_from)
        start = start if start.is_absolute() or runs_dir is None else Path(runs_dir) / start
        model.load_state_dict(_snapshot_weights(str(start), model))
    return model


def _snapshot_weights(folder: str, model: LanguageModel) -> dict[str, torch.Tensor]:
    """The state dict of the snapshot in ``folder``, checked against ``model``'s tensors (one-line errors)."""
    from ..training import snapshots

    state = snapshots.read_weights(folder)
    expected = {name: tuple(t.shape) for name, t in model.state_dict().items()}
    found = {name: tuple(t.shape) for name, t in state.items()}
    if found != expected:
        different = sorted(set(found) ^ set(expected)) or [n for n in expected if found.get(n) != expected[n]]
        raise ValueError(f"init_from: {folder} holds another model shape than this run's ({', '.join(different[:3])})")
    return state


def summed_loss(model: LanguageModel, batch: Batch, causal: bool) -> tuple[torch.Tensor, int]:
    """Sum of the cross-entropies over the selected positions, and their number.

    Only the selected positions go through the output projection (the LM head is the most expensive layer).
    """
    hidden = model.hidden(batch.inputs, causal).flatten(0, 1)
    every_position = batch.selected.numel() == len(batch.targets)
    logits = model.head(hidden if every_position else hidden.index_select(0, batch.positions))
    return F.cross_entropy(logits.float(), batch.targets, reduction="sum"), len(batch.targets)


# ---------------------------------------------------------------------------------------------- the task


class TextTask:
    """The engine's task for one text run (:class:`attnstruct.training.engine.Task`).

    ``cache``: the attnstruct cache holding the packaged corpus and the trained tokenizers (None: the default).
    """

    EVALUATIONS: ClassVar[dict[str, str]] = {"val_loss": "loss on fixed held-out windows (NaN between evaluations)"}

    def __init__(self, config: TextConfig, cache: str | os.PathLike | None = None, runs_dir=None):
        self.config, self.cache, self.runs_dir = config, cache, runs_dir

    def __getstate__(self) -> dict:  # a spawned worker loads the (cached) tokens itself
        return {"config": self.config, "cache": self.cache, "runs_dir": self.runs_dir}

    @functools.cached_property
    def data(self) -> plays_and_text_files.TokenData | plays_and_text_files.MappedTokens:
        return corpus_data(self.config, self.cache)

    @functools.cached_property
    def validation(self) -> list[Batch]:
        config, data = self.config, self.data
        return [make_batch(config, data, data.val, config.batch_size, VAL_SEED, i) for i in range(config.eval_batches)]

    @property
    def tokens_per_step(self) -> int:
        """Tokens of text one optimiser step sees: ``batch_size`` windows of ``seq_len`` tokens."""
        return self.config.batch_size * self.config.seq_len

    def prepare(self) -> None:
        self.data  # noqa: B018  (tokenise once, and fail here on a bad corpus)

    def build_model(self) -> LanguageModel:
        return build_model(self.config, self.data.vocab_size, self.runs_dir)

    def batch(self, step: int) -> Batch:
        return make_batch(self.config, self.data, self.data.train, self.config.batch_size, self.config.seed, step)

    def loss(self, model: LanguageModel, batch: Batch) -> tuple[torch.Tensor, int]:
        return summed_loss(model, batch, self.config.causal)

    def evaluate(self, model: LanguageModel, device) -> dict[str, float]:
        return {"val_loss": engine.mean_loss(self, model, self.validation, device, self.config.accumulate)}

    def attrs(self) -> dict:
        data = self.data
        if isinstance(data, plays_and_text_files.MappedTokens):
            return data.attrs()
        return {"corpus": data.source, "corpus_tokens": f"{len(data.train)} train / {len(data.val)} validation"}


def train(config: TextConfig, run_dir=None, *, cache=None, progress: bool = False, callback=None) -> xr.Dataset:
    """:func:`attnstruct.training.engine.train` of one :class:`TextTask`."""
    return engine.train(TextTask(config, cache), run_dir, progress=progress, callback=callback)


def train_many(
    configs: Sequence[TextConfig],
    out_dir,
    *,
    workers: int = 2,
    threads_per_worker: int = 1,
    cache=None,
    progress: bool = True,
    snapshot_every: int | None = None,
) -> xr.Dataset:
    """:func:`attnstruct.training.processes.train_many` of one :class:`TextTask` per configuration; each run lives in
    ``out_dir/<run_name>/`` (resumable); ``snapshot_every`` keeps its weights as a local checkpoint series
    (:mod:`attnstruct.training.snapshots`)."""
    tasks = [TextTask(config, cache, out_dir) for config in configs]
    return many_runs.train_many(
        tasks,
        out_dir,
        workers=workers,
        threads_per_worker=threads_per_worker,
        progress=progress,
        snapshot_every=snapshot_every,
    )
