"""Train the BERT-like model of :mod:`attnstruct.transformer` as an encoder or a decoder, logging the scores.

The two objectives of ``paper-digest.md`` section 4.6, on the same data, tokenizer, initialisation and
hyperparameters:

* ``"mlm"``: masked language modelling with bidirectional attention. 15% of positions are selected; of those 80%
  become ``[MASK]``, 10% a random token, 10% stay; the loss covers the selected positions.
* ``"next-token"``: causal attention and a next-token loss at *every* position. The authors' decoder runs used
  the masked-LM collator (a loss on about 15% of positions, with corrupted inputs); that flaw is corrected here
  and can be reproduced with ``"next-token-mlm-collator"`` for comparison.

Every ``log_every`` steps (and at step 0) the run records the symmetry and directionality of every layer's
``W_qk = sum_h W_q^h^T W_k^h`` and of every head (from the factors, :func:`attnstruct.factor_scores`), the mean
training loss since the last record, and every ``eval_every`` steps the loss on fixed held-out windows.

Reproducibility: the batch of step ``s`` (windows, masks, dropout) is drawn from generators seeded with
``(seed, s)`` only, so a run resumed from a checkpoint ends with the same dataset as an uninterrupted one.
Checkpoints (model, optimiser, schedule, records) are written atomically every ``checkpoint_every`` steps.

Scale-out: the same :func:`train` runs under ``torchrun`` (``python -m attnstruct.training ...``) with
DistributedDataParallel. Every rank draws the same global batch and takes rows ``rank::world_size``; the
loss is normalised by the global number of targets, so the gradient equals the one-process gradient.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

import numpy as np
import torch
import xarray as xr
from torch import nn
from torch.nn import functional as F

from . import corpus, results
from .scores import factor_scores
from .transformer import LanguageModel, TransformerConfig, attention_layers, count_parameters, query_key_factors

OBJECTIVES = ("mlm", "next-token", "next-token-mlm-collator")
INITS = ("bert", "symmetric", "symmetric-matched", "default-scale")
SCHEDULES = ("linear", "constant")
CAUSAL = {"mlm": False, "next-token": True, "next-token-mlm-collator": True}
REFERENCE_CSV = Path(__file__).resolve().parents[2] / "data" / "reference" / "paper_training_dynamics.csv"
VAL_SEED = 20250214  # the validation windows and masks are the same for every run


@dataclass(frozen=True)
class TrainConfig:
    """Everything that determines a run. Defaults: the quick profile's calibration (issue 6)."""

    objective: str = "mlm"
    seed: int = 0
    init: str = "bert"
    steps: int = 1500
    batch_size: int = 32
    seq_len: int = 64
    lr: float = 5e-4
    warmup: int = 200
    schedule: str = "linear"
    weight_decay: float = 0.01
    clip: float = 1.0
    mask_rate: float = 0.15
    log_every: int = 50
    eval_every: int = 100
    eval_batches: int = 4
    checkpoint_every: int = 500
    d_model: int = 128
    n_layers: int = 4
    n_heads: int = 4
    dropout: float = 0.1
    norm: str = "post"
    corpus: str = "shakespeare"
    vocab_size: int = 4000
    val_fraction: float = 0.05
    device: str = "cpu"
    amp: bool = False

    def __post_init__(self):
        if self.objective not in OBJECTIVES:
            raise ValueError(f"unknown objective {self.objective!r}; choose one of {', '.join(OBJECTIVES)}")
        if self.init not in INITS:
            raise ValueError(f"unknown init {self.init!r}; choose one of {', '.join(INITS)}")
        for name in ("steps", "batch_size", "seq_len", "log_every", "eval_every", "eval_batches", "checkpoint_every"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.checkpoint_every % self.log_every or self.eval_every % self.log_every:
            raise ValueError(
                f"checkpoint_every ({self.checkpoint_every}) and eval_every ({self.eval_every}) "
                f"must be multiples of log_every ({self.log_every})"
            )
        if not 0.0 < self.mask_rate < 1.0:
            raise ValueError(f"mask_rate must be in (0, 1), got {self.mask_rate!r}")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise ValueError(f"lr must be positive, got {self.lr!r}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"unknown schedule {self.schedule!r}; choose one of {', '.join(SCHEDULES)}")
        if self.warmup < 0 or self.clip <= 0 or self.weight_decay < 0:
            raise ValueError("warmup and weight_decay must be >= 0 and clip > 0")

    @property
    def causal(self) -> bool:
        return CAUSAL[self.objective]

    def model_config(self, vocab_size: int) -> TransformerConfig:
        return TransformerConfig(
            vocab_size=vocab_size,
            max_len=self.seq_len,
            d_model=self.d_model,
            n_layers=self.n_layers,
            n_heads=self.n_heads,
            dropout=self.dropout,
            norm=self.norm,
        )

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> TrainConfig:
        return config_from_dict(cls, values, "training")

    def run_name(self) -> str:
        return f"{self.objective}-{self.init}-seed{self.seed}"


def config_from_dict(cls, values: dict, what: str):
    """``cls(**values)`` for a config dataclass, refusing unknown keys with one line that names them."""
    unknown = sorted(set(values) - {f.name for f in fields(cls)})
    if unknown:
        raise ValueError(f"unknown {what} parameters: {', '.join(unknown)}")
    return cls(**values)


# ---------------------------------------------------------------------------------------------- batches


@dataclass(frozen=True)
class Batch:
    """Model inputs ``[B, T]``, the positions that carry a loss (bool ``[B, T]``) and their targets ``[n]``."""

    inputs: torch.Tensor
    selected: torch.Tensor
    targets: torch.Tensor

    def rows(self, start: int, step: int) -> Batch:
        """The rows ``start::step`` (one rank's share of a global batch)."""
        selected = self.selected[start::step]
        row_of_target = self.selected.nonzero()[:, 0]
        keep = (row_of_target % step) == start
        return Batch(self.inputs[start::step], selected, self.targets[keep])

    def to(self, device) -> Batch:
        return Batch(self.inputs.to(device), self.selected.to(device), self.targets.to(device))


def seeded_generator(*seeds: int) -> torch.Generator:
    """A CPU generator seeded by a fixed mix of the integers (e.g. ``(seed, step)``): the same seeds, the same draws."""
    mixed = 0
    for value in seeds:
        mixed = (mixed * 1_000_003 + int(value)) % (2**63 - 1)
    return torch.Generator().manual_seed(mixed)


def draw_windows(ids: torch.Tensor, n: int, length: int, generator: torch.Generator) -> torch.Tensor:
    """``n`` random windows of ``length`` consecutive tokens, ``[n, length]``."""
    if len(ids) <= length:
        raise ValueError(f"the text has {len(ids)} tokens, fewer than one window of {length + 1}")
    starts = torch.randint(0, len(ids) - length, (n,), generator=generator)
    return ids[starts[:, None] + torch.arange(length)]


def mask_for_mlm(
    tokens: torch.Tensor, mask_id: int, vocab_size: int, n_special: int, rate: float, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's corruption: select ``rate`` of positions (at least one per row); 80% -> [MASK], 10% random, 10% kept.

    Returns the corrupted inputs ``[B, T]`` and the selection ``[B, T]`` (bool).
    """
    draws = torch.rand(tokens.shape, generator=generator)
    selected = draws < rate
    selected[torch.arange(len(tokens)), draws.argmin(1)] = True
    action = torch.rand(tokens.shape, generator=generator)
    random_tokens = torch.randint(n_special, vocab_size, tokens.shape, generator=generator)
    inputs = torch.where(selected & (action < 0.8), mask_id, tokens)
    inputs = torch.where(selected & (action >= 0.8) & (action < 0.9), random_tokens, inputs)
    return inputs, selected


def make_batch(config: TrainConfig, data: corpus.TokenData, ids: torch.Tensor, n: int, *seeds: int) -> Batch:
    """The batch for one step (or one validation batch), a pure function of the seeds."""
    generator = seeded_generator(*seeds)
    windows = draw_windows(ids, n, config.seq_len + 1, generator)
    if config.objective == "mlm":
        tokens = windows[:, :-1]
        inputs, selected = mask_for_mlm(
            tokens, data.mask_id, data.vocab_size, data.n_special, config.mask_rate, generator
        )
        return Batch(inputs, selected, tokens[selected])
    inputs, following = windows[:, :-1], windows[:, 1:]
    if config.objective == "next-token":
        return Batch(inputs, torch.ones_like(inputs, dtype=torch.bool), following.reshape(-1))
    # The authors' decoder runs: MLM-corrupted inputs, a next-token loss only where the next token was selected.
    corrupted, chosen = mask_for_mlm(
        windows, data.mask_id, data.vocab_size, data.n_special, config.mask_rate, generator
    )
    selected = chosen[:, 1:]
    return Batch(corrupted[:, :-1], selected, following[selected])


def batch_loss(model: nn.Module, batch: Batch, causal: bool, normaliser: float) -> torch.Tensor:
    """Sum of the cross-entropies over the selected positions divided by ``normaliser``.

    Only the selected positions go through the output projection (the MLM head is the most expensive layer).
    """
    module = model.module if hasattr(model, "module") else model
    hidden = model(batch.inputs, causal) if hasattr(model, "module") else module.hidden(batch.inputs, causal)
    every_position = batch.selected.numel() == len(batch.targets)
    logits = module.head(hidden.flatten(0, 1) if every_position else hidden[batch.selected])
    return F.cross_entropy(logits.float(), batch.targets, reduction="sum") / normaliser


class _HiddenOnly(nn.Module):
    """Wraps a LanguageModel so that DDP's forward returns the hidden states (the head runs outside)."""

    def __init__(self, model: LanguageModel):
        super().__init__()
        self.model = model

    def forward(self, ids, causal):
        return self.model.hidden(ids, causal)

    def head(self, hidden):
        return self.model.head(hidden)


# ---------------------------------------------------------------------------------------------- model set-up


def initialise(model: LanguageModel, init: str, generator: torch.Generator) -> None:
    """Apply an initialisation variant on top of BERT's (``paper-digest.md`` section 4.7).

    * ``"bert"``: BERT's ``N(0, 0.02)`` weights, zero biases (the baseline).
    * ``"symmetric"``: the authors' method. Q, K and V of every layer are re-created with PyTorch's default
      ``nn.Linear`` initialisation (weights and biases ``U(+-1/sqrt(d))``), then ``W_q := W_k``. This also
      changes the Q/K/V scale and re-draws V: the confound.
    * ``"symmetric-matched"``: BERT's initialisation, then ``W_q := W_k`` per layer (so per head). Every weight
      keeps the baseline's distribution; only the Q-K coupling differs. The control that removes the confound.
    * ``"default-scale"``: Q, K, V re-created as in ``"symmetric"`` but without ``W_q := W_k``: the confound alone.
    """
    if init not in INITS:
        raise ValueError(f"unknown init {init!r}; choose one of {', '.join(INITS)}")
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


def build_model(config: TrainConfig, vocab_size: int) -> LanguageModel:
    """The model of a run, initialised from ``config.seed`` alone."""
    torch.manual_seed(config.seed)
    model = LanguageModel(config.model_config(vocab_size))
    initialise(model, config.init, seeded_generator(config.seed, 7))
    return model


def build_optimizer(config: TrainConfig, model: nn.Module):
    """AdamW (weight decay off for biases and LayerNorm, as BERT) and a linear warm-up, then a linear decay to 0 at
    the last step (``schedule="linear"``, Hugging Face's default) or a constant rate (``"constant"``: a short run
    then sees the learning rate of the first steps of a long run, as the authors' first 1,000 of 200,000 did)."""
    decay, no_decay = [], []
    for name, parameter in model.named_parameters():
        (no_decay if parameter.ndim < 2 or "norm" in name else decay).append(parameter)
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=config.lr,
    )

    def factor(step: int) -> float:
        if step < config.warmup:
            return (step + 1) / config.warmup
        if config.schedule == "constant":
            return 1.0
        return max(0.0, (config.steps - step) / max(1, config.steps - config.warmup))

    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


# ---------------------------------------------------------------------------------------------- records


@dataclass
class Records:
    """What a run has logged so far (lists, one entry per record step); saved inside checkpoints."""

    step: list[int] = field(default_factory=list)
    symmetry_layer: list[list[float]] = field(default_factory=list)
    directionality_layer: list[list[float]] = field(default_factory=list)
    symmetry_head: list[list[list[float]]] = field(default_factory=list)
    directionality_head: list[list[list[float]]] = field(default_factory=list)
    train_loss: list[float] = field(default_factory=list)
    val_loss: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    score_seconds: float = 0.0

    def to_dataset(self, n_layers: int, n_heads: int) -> xr.Dataset:
        """The scores, losses and learning rate with dims ``step``, ``layer``, ``head`` (float64), no attrs."""
        ds = xr.Dataset(
            {
                "symmetry": (("step", "layer"), np.asarray(self.symmetry_layer)),
                "directionality": (("step", "layer"), np.asarray(self.directionality_layer)),
                "symmetry_head": (("step", "layer", "head"), np.asarray(self.symmetry_head)),
                "directionality_head": (("step", "layer", "head"), np.asarray(self.directionality_head)),
                "train_loss": (("step",), np.asarray(self.train_loss)),
                "val_loss": (("step",), np.asarray(self.val_loss)),
                "lr": (("step",), np.asarray(self.lr)),
            },
            coords={"step": np.asarray(self.step), "layer": np.arange(n_layers), "head": np.arange(n_heads)},
        )
        ds["symmetry"].attrs["long_name"] = "symmetry score of the layer's W_qk (heads summed)"
        ds["directionality"].attrs["long_name"] = "directionality score of the layer's W_qk (heads summed)"
        ds["train_loss"].attrs["long_name"] = "mean training loss over the steps since the previous record (NaN at 0)"
        return ds


def record_scores(model: nn.Module, records: Records) -> None:
    """Append the per-layer (heads summed) and per-head scores of the current weights."""
    w_q, w_k = query_key_factors(model)
    per_layer = factor_scores(w_q, w_k, sum_heads=True)
    per_head = factor_scores(w_q, w_k)
    records.symmetry_layer.append(per_layer.symmetry.tolist())
    records.directionality_layer.append(per_layer.directionality.tolist())
    records.symmetry_head.append(per_head.symmetry.tolist())
    records.directionality_head.append(per_head.directionality.tolist())


@torch.no_grad()
def validation_loss(model: nn.Module, config: TrainConfig, data: corpus.TokenData, device) -> float:
    """Mean loss per target over ``eval_batches`` fixed held-out batches (same windows and masks at every call)."""
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    for index in range(config.eval_batches):
        batch = make_batch(config, data, data.val, config.batch_size, VAL_SEED, index).to(device)
        total += float(batch_loss(model, batch, config.causal, 1.0))
        count += len(batch.targets)
    model.train(was_training)
    return total / count


def to_dataset(config: TrainConfig, records: Records, data: corpus.TokenData, n_params: int, **attrs) -> xr.Dataset:
    """One run's records as a dataset with dims ``step``, ``layer``, ``head`` (float64)."""
    ds = records.to_dataset(config.n_layers, config.n_heads)
    ds["val_loss"].attrs["long_name"] = "loss on fixed held-out windows (NaN between evaluations)"
    ds.attrs.update(
        results.provenance_attrs(
            parameters=config.to_dict(),
            scored_matrix="W_qk = sum_h W_q^h^T W_k^h per layer (and per head), nn.Linear layout, biases left out",
            objective=config.objective,
            init=config.init,
            seed=config.seed,
            corpus=data.source,
            corpus_tokens=f"{len(data.train)} train / {len(data.val)} validation",
            n_params=n_params,
            **attrs,
        )
    )
    return ds


# ---------------------------------------------------------------------------------------------- the loop


def _distributed() -> tuple[int, int]:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1


def _checkpoint_path(run_dir: Path) -> Path:
    return run_dir / "checkpoint.pt"


def _save_checkpoint(run_dir: Path, config: TrainConfig, step: int, model, optimizer, scheduler, records) -> None:
    state = {
        "config": config.to_dict(),
        "step": step,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "records": asdict(records),
    }
    path = _checkpoint_path(run_dir)
    temp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    torch.save(state, temp)
    os.replace(temp, path)


def _resume(run_dir: Path, config: TrainConfig, model, optimizer, scheduler) -> tuple[int, Records]:
    path = _checkpoint_path(run_dir)
    if not path.is_file():
        return 0, Records()
    state = torch.load(path, map_location="cpu", weights_only=False)
    if state["config"] != config.to_dict():
        changed = sorted(k for k in config.to_dict() if state["config"].get(k) != config.to_dict()[k])
        raise ValueError(
            f"{path} belongs to a run with other parameters ({', '.join(changed)}); remove it or change run_dir"
        )
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    return state["step"], Records(**state["records"])


def train(
    config: TrainConfig,
    run_dir: str | os.PathLike,
    *,
    cache: str | os.PathLike | None = None,
    progress: bool = True,
    callback: Callable[[int, nn.Module], None] | None = None,
) -> xr.Dataset:
    """Train one run, resuming from ``run_dir/checkpoint.pt`` if present; return (and save) its dataset.

    ``run_dir/run.nc`` is written atomically at the end; if it exists with the same parameters the run is not
    repeated. ``callback(step, model)`` is called after every optimiser step (tests use it to interrupt).
    Under ``torchrun`` (an initialised process group) only rank 0 writes files.
    """
    run_dir = Path(run_dir)
    rank, world = _distributed()
    if config.batch_size % world:
        raise ValueError(f"batch_size {config.batch_size} is not divisible by the {world} processes")
    final = run_dir / "run.nc"
    if final.is_file():
        done = results.load_dataset(final)
        if json.loads(done.attrs["parameters"]) == config.to_dict():
            return done
        raise ValueError(f"{final} holds a run with other parameters; remove it or change run_dir")
    device = torch.device(
        ("cuda" if torch.cuda.is_available() else "cpu") if config.device == "auto" else config.device
    )
    data = corpus.load_tokens(config.corpus, config.vocab_size, config.val_fraction, cache)
    run_dir.mkdir(parents=True, exist_ok=True)
    model = build_model(config, data.vocab_size).to(device)
    optimizer, scheduler = build_optimizer(config, model)
    start, records = _resume(run_dir, config, model, optimizer, scheduler)
    if world > 1:
        ddp_kwargs = {"device_ids": [device.index]} if device.type == "cuda" else {}
        runner = nn.parallel.DistributedDataParallel(_HiddenOnly(model), **ddp_kwargs)
    else:
        runner = model
    autocast = (
        torch.autocast(device.type, dtype=torch.bfloat16)
        if config.amp and device.type == "cuda"
        else contextlib.nullcontext()
    )
    if start == 0:
        _log(model, config, data, device, records, 0, float("nan"), scheduler)
    running_loss = torch.zeros((), device=device)
    bar = _progress_bar(config, start, progress and rank == 0)
    model.train()
    for step in range(start + 1, config.steps + 1):
        global_batch = make_batch(config, data, data.train, config.batch_size, config.seed, step)
        batch = global_batch.rows(rank, world).to(device)
        torch.manual_seed(seeded_generator(config.seed, step, 1).initial_seed())  # dropout of this step
        with autocast:
            loss = batch_loss(runner, batch, config.causal, len(global_batch.targets) / world)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.clip)
        optimizer.step()
        scheduler.step()
        running_loss += loss.detach()
        if callback is not None:
            callback(step, model)
        if step % config.log_every == 0:
            train_loss = running_loss / config.log_every
            if world > 1:
                torch.distributed.all_reduce(train_loss)
                train_loss /= world
            _log(model, config, data, device, records, step, float(train_loss), scheduler)
            running_loss.zero_()
            if bar is not None:
                bar.set_postfix(loss=f"{float(train_loss):.3f}", sym=f"{np.median(records.symmetry_layer[-1]):+.2f}")
            if step % config.checkpoint_every == 0 and step < config.steps and rank == 0:
                _save_checkpoint(run_dir, config, step, model, optimizer, scheduler, records)
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    ds = to_dataset(config, records, data, count_parameters(model), processes=world, device=str(device))
    if rank == 0:
        results.save_dataset(ds, final)
        _checkpoint_path(run_dir).unlink(missing_ok=True)
    return ds


def _log(model, config, data, device, records: Records, step: int, train_loss: float, scheduler) -> None:
    start = time.perf_counter()
    records.step.append(step)
    record_scores(model, records)
    records.score_seconds += time.perf_counter() - start
    records.train_loss.append(train_loss)
    records.lr.append(float(scheduler.get_last_lr()[0]))
    evaluate = step % config.eval_every == 0 or step == config.steps
    records.val_loss.append(validation_loss(model, config, data, device) if evaluate else float("nan"))


def _progress_bar(config: TrainConfig, start: int, show: bool):
    if not show:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=config.steps, initial=start, desc=config.run_name(), unit="step", file=sys.stderr)


# ---------------------------------------------------------------------------------------------- many runs


def set_worker_threads(threads: int) -> None:
    """Initialiser of the worker processes: ``threads`` torch threads each (no oversubscription)."""
    torch.set_num_threads(threads)


def _train_in_worker(config_dict: dict, run_dir: str, cache) -> str:
    train(TrainConfig(**config_dict), run_dir, cache=cache, progress=False)
    return run_dir


def run_in_processes(
    function: Callable, arguments: Sequence[tuple], workers: int, threads_per_worker: int, progress: bool = True
) -> list:
    """``[function(*a) for a in arguments]`` in ``workers`` spawned processes of ``threads_per_worker`` threads.

    Results come back in the order of ``arguments`` whatever finishes first; a progress bar counts the runs.
    ``function`` must be importable (a module-level function) and its arguments picklable.
    """
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from tqdm.auto import tqdm

    if not isinstance(workers, int) or workers < 1 or not isinstance(threads_per_worker, int) or threads_per_worker < 1:
        raise ValueError("workers and threads_per_worker must be positive integers")
    context = multiprocessing.get_context("spawn")
    size = min(workers, len(arguments))
    with ProcessPoolExecutor(
        size, mp_context=context, initializer=set_worker_threads, initargs=(threads_per_worker,)
    ) as pool:
        futures = [pool.submit(function, *args) for args in arguments]
        results = []
        with tqdm(total=len(futures), desc="runs", unit="run", file=sys.stderr, disable=not progress) as bar:
            for future in futures:
                results.append(future.result())
                bar.update(1)
    return results


def train_many(
    configs: Sequence[TrainConfig],
    out_dir: str | os.PathLike,
    *,
    workers: int = 2,
    threads_per_worker: int = 1,
    cache: str | os.PathLike | None = None,
    progress: bool = True,
) -> xr.Dataset:
    """Train several runs side by side in ``workers`` processes of ``threads_per_worker`` threads each.

    Each run lives in ``out_dir/<run_name>/`` (resumable). Returns :func:`combine` of the runs. The corpus and
    tokenizer are prepared once before the workers start.
    """
    out_dir = Path(out_dir)
    names = [c.run_name() for c in configs]
    if len(set(names)) != len(names):
        raise ValueError("two runs have the same objective, init and seed")
    for source, vocab, fraction in {(c.corpus, c.vocab_size, c.val_fraction) for c in configs}:
        corpus.load_tokens(source, vocab, fraction, cache)
    dirs = [str(out_dir / name) for name in names]
    if workers <= 1:
        for config, run_dir in zip(configs, dirs):
            train(config, run_dir, cache=cache, progress=progress)
    else:
        arguments = [(c.to_dict(), d, cache) for c, d in zip(configs, dirs)]
        run_in_processes(_train_in_worker, arguments, workers, threads_per_worker, progress)
    return combine([results.load_dataset(Path(d) / "run.nc") for d in dirs])


def combine(runs: Sequence[xr.Dataset]) -> xr.Dataset:
    """Stack runs into one dataset with dims ``objective``, ``init``, ``seed``, ``step``, ``layer``, ``head``.

    All runs must share the step grid and the model shape; the attrs keep the first run's provenance with the
    per-run parameters listed under ``runs``.
    """
    if not runs:
        raise ValueError("no runs to combine")
    keyed = []
    for ds in runs:
        keyed.append(
            ds.expand_dims(objective=[ds.attrs["objective"]], init=[ds.attrs["init"]], seed=[int(ds.attrs["seed"])])
        )
    merged = xr.combine_by_coords([ds.drop_attrs() for ds in keyed], combine_attrs="drop")
    first = {key: value.item() if isinstance(value, np.generic) else value for key, value in runs[0].attrs.items()}
    for key in ("objective", "init", "seed", "parameters", "created"):
        first.pop(key, None)
    merged.attrs.update(first)
    merged.attrs["runs"] = json.dumps([json.loads(ds.attrs["parameters"]) for ds in runs], sort_keys=True)
    merged.attrs["parameters"] = merged.attrs["runs"]
    merged.attrs["created"] = runs[-1].attrs["created"]
    return merged


def final_summary(ds: xr.Dataset, last: int = 1) -> xr.Dataset:
    """Median over layers of the last ``last`` records' mean scores, per objective/init/seed."""
    tail = ds.isel(step=slice(-last, None)).mean("step")
    return xr.Dataset(
        {
            "symmetry": tail["symmetry"].median("layer"),
            "directionality": tail["directionality"].median("layer"),
            "val_loss": ds["val_loss"].isel(step=-1),
        }
    )


def reference_dynamics(path: str | os.PathLike | None = None):
    """The authors' medians over layers during training from scratch (``data/reference``; numbers of the paper's
    repository, not ours): a DataFrame with n_layers, mode, dataset, step, symmetry, directionality."""
    import pandas as pd

    return pd.read_csv(path or REFERENCE_CSV, comment="#")


# ---------------------------------------------------------------------------------------------- command line


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m attnstruct.training",
        description="Train one encoder (mlm) or decoder (next-token) run and log W_qk scores; runs under torchrun.",
    )
    parser.add_argument("--run-dir", required=True, help="folder for checkpoint.pt and run.nc (resumes if present)")
    parser.add_argument("--cache-dir", default=None, help="attnstruct cache (corpus, tokenizers)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads per process")
    for f in fields(TrainConfig):
        kind = {bool: lambda s: s.lower() in ("1", "true", "yes")}.get(type(f.default), type(f.default))
        parser.add_argument(f"--{f.name.replace('_', '-')}", type=kind, default=f.default, help=f"default {f.default}")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m attnstruct.training`` and ``torchrun -m attnstruct.training``."""
    args = _parser().parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    values = {f.name: getattr(args, f.name) for f in fields(TrainConfig)}
    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    rank = int(os.environ.get("RANK", "0"))
    try:
        config = TrainConfig(**values)
        if distributed:
            backend = "nccl" if config.device != "cpu" and torch.cuda.is_available() else "gloo"
            torch.distributed.init_process_group(backend)
            if backend == "nccl":
                local = int(os.environ.get("LOCAL_RANK", "0"))
                torch.cuda.set_device(local)
                config = replace(config, device=f"cuda:{local}")
        ds = train(config, args.run_dir, cache=args.cache_dir, progress=sys.stderr.isatty())
    except ValueError as err:
        print(f"attnstruct training: error: {err}".replace("\n", " "), file=sys.stderr)
        return 2
    finally:
        if distributed and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
    if rank == 0:
        final = ds.isel(step=-1)
        print(
            f"{config.run_name()}: {config.steps} steps, median symmetry {float(final.symmetry.median()):+.3f}, "
            f"directionality {float(final.directionality.median()):+.3f}, val loss {float(final.val_loss):.3f}"
        )
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
