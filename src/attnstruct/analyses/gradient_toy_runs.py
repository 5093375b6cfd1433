"""What notebook 04 computes: the nulls, the check against autograd, the pair probabilities, the accumulated
updates at initialisation and the training runs of the two toy tasks, each part an ``xarray.Dataset``;
:func:`dataset` joins the parts into the notebook's dataset with its provenance.

Every part draws from generators seeded by the notebook's ``seed`` with fixed offsets (``+ 100`` the sequences of
the accumulated updates, ``+ 200`` their masks, ``+ 300`` the pair probabilities, ``+ 400`` the learning
yardsticks; the training runs seed by ``(seed + k, step)``), so equal parameters give an equal dataset. What the
notebook reads and decides from these parts is :mod:`attnstruct.analyses.gradient_toys`.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import torch
import xarray as xr

from .. import gradient as G
from .. import results, stats, work
from .._version import __version__
from ..tasks import toy_tasks
from ..training import run_folder
from ..training.processes import run_in_processes

SCORES = stats.SCORES  # ("symmetry", "directionality")
ROLE_SEQUENCES = 20000  # sampled sequences for the pair probabilities (masks and targets only, no model)
YARDSTICK_SEQUENCES = 20000  # sampled sequences for the entropy of the target tokens
ACCUMULATION_CHECKPOINTS = (1, 4, 16, 64, 256)  # sums scored after this many sequences (and after all of them)
ACCUMULATED = ("symmetry", "directionality", "symmetry_without_self", "directionality_without_self")


def score_nulls(d_model: int, n_null: int, seed: int) -> xr.Dataset:
    """``null_symmetry`` and ``null_directionality`` ``[null_draw]``: the scores of ``n_null`` random single-head
    ``W_qk = W_q^T W_k`` of width ``d_model`` (:func:`attnstruct.stats.null_median_over_layers`, one head, one
    layer), what a toy model's ``W_qk`` is read against."""
    return xr.Dataset(
        {
            f"null_{score}": (
                "null_draw",
                stats.null_median_over_layers(score, d_model, 1, 1, n_draws=n_null, seed=seed),
            )
            for score in SCORES
        },
        coords={"null_draw": np.arange(n_null)},
    )


def null_of_the_difference(score: str, d_model: int, n_null: int, n_seeds: int, seed: int) -> np.ndarray:
    """The null of a mean over ``n_seeds`` of (one random ``W_qk``'s ``score`` minus another's):
    :func:`attnstruct.stats.null_of_the_mean` of :func:`score_nulls`' draws minus independent draws (``seed + 1``).
    What a paired effect between two objectives is read against."""
    pool = stats.null_median_over_layers(score, d_model, 1, 1, n_draws=n_null, seed=seed)
    minus = stats.null_median_over_layers(score, d_model, 1, 1, n_draws=n_null, seed=seed + 1)
    return stats.null_of_the_mean(pool, n_seeds, minus=minus, seed=seed)


def autograd_check(seed: int) -> dict[str, float]:
    """Per objective, the largest difference between :func:`attnstruct.gradient.analytic_gradient` and autograd's
    gradient of the loss with respect to ``W_qk``, relative to autograd's largest entry, on random float64 inputs
    (4 sequences of 9 positions, width 8, 2 heads, 13 tokens)."""
    gen = torch.Generator().manual_seed(seed)

    def draw(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float64)

    x, w, w_v, w_o, unembed = draw(4, 9, 8), draw(2, 8, 8) * 0.5, draw(2, 8, 5), draw(2, 5, 8), draw(13, 8)
    targets = torch.randint(0, 13, (4, 9), generator=gen)
    predict = torch.ones(4, 9, dtype=torch.bool)
    errors = {}
    for objective in G.OBJECTIVES:
        mask = G.context_mask(9, objective)
        w_auto = w.clone().requires_grad_(True)
        G.loss(G.forward(x, w_auto, w_v, w_o, unembed, mask, 8**-0.5)[2], targets, predict).backward()
        analytic, _ = G.analytic_gradient(x, w, w_v, w_o, unembed, targets, predict, mask, 8**-0.5)
        errors[objective] = float((analytic - w_auto.grad).abs().max() / w_auto.grad.abs().max())
    return errors


def pair_roles(
    seq_len: int, vocab: int, zipf: float, mask_rate: float, seed: int, n_sequences: int = ROLE_SEQUENCES
) -> xr.Dataset:
    """Who is query and who is context, per objective, from ``n_sequences`` sampled copy-task batches:

    * ``pair_probability`` ``[objective, position, context_position]``: ``P(i query, j context)``
      (:func:`attnstruct.gradient.pair_frequencies`);
    * ``role_query``, ``role_context`` ``[objective, position]``: times per sequence a position is predicted and
      is context (:func:`attnstruct.gradient.role_counts`);
    * ``pair_asymmetry`` ``[objective, role_sequences]``: ``max |P - P^T|`` estimated from the first hundredth of
      the sequences and from all of them (sampling noise shrinks with more sequences, structure stays).
    """
    gen = torch.Generator().manual_seed(seed + 300)
    tokens = toy_tasks.repeated_sequences(n_sequences, seq_len, vocab, zipf, gen)
    used = [n_sequences // 100, n_sequences]
    parts = {k: [] for k in ("pair_probability", "role_query", "role_context", "pair_asymmetry")}
    for objective in G.OBJECTIVES:
        _, _, predict, mask = toy_tasks.batch_for(objective, tokens, vocab, mask_rate, gen)
        as_query, as_context = G.role_counts(predict, mask)
        parts["role_query"].append((as_query / n_sequences).numpy())
        parts["role_context"].append((as_context / n_sequences).numpy())
        parts["pair_probability"].append(G.pair_frequencies(predict, mask).numpy())
        asymmetry = [G.pair_frequencies(predict[:n], mask).numpy() for n in used]
        parts["pair_asymmetry"].append([float(np.abs(p - p.T).max()) for p in asymmetry])
    dims = {
        "pair_probability": ("objective", "position", "context_position"),
        "role_query": ("objective", "position"),
        "role_context": ("objective", "position"),
        "pair_asymmetry": ("objective", "role_sequences"),
    }
    coords = {"objective": list(G.OBJECTIVES), "position": np.arange(seq_len), "role_sequences": used}
    return xr.Dataset(
        {k: (dims[k], np.asarray(v)) for k, v in parts.items()},
        coords=coords | {"context_position": np.arange(seq_len)},
    )


def accumulated_at_initialisation(parameters: Mapping) -> xr.Dataset:
    """The summed update directions ``-dL/dW_qk`` of an untrained one-layer model (:class:`~attnstruct.tasks.
    toy_tasks.OneLayer`, ``W_qk`` as the parameter, seeded by ``seed``) over ``n_sequences`` sequences of each task
    and objective (:func:`attnstruct.tasks.toy_tasks.accumulated_updates`), scored after each number of sequences
    ``n_sequences`` (a coordinate: :data:`ACCUMULATION_CHECKPOINTS` below the total, and the total).

    ``parameters``: the notebook's (``vocab``, ``seq_len``, ``d_model``, ``mask_rate``, ``zipf``, ``n_sequences``,
    ``seed``). Variables: ``accumulated_`` + each of :data:`ACCUMULATED` ``[task, objective, n_sequences]`` and
    ``accumulated_beta`` ``[task, objective, position, context_position]``, the summed coefficients.
    """
    p, seed, n = parameters, int(parameters["seed"]), int(parameters["n_sequences"])
    checkpoints = sorted({c for c in ACCUMULATION_CHECKPOINTS if c < n} | {n})
    values = {k: np.empty((len(toy_tasks.TASKS), len(G.OBJECTIVES), len(checkpoints))) for k in ACCUMULATED}
    beta = np.empty((len(toy_tasks.TASKS), len(G.OBJECTIVES), p["seq_len"], p["seq_len"]))
    for t, task in enumerate(toy_tasks.TASKS):
        for o, objective in enumerate(G.OBJECTIVES):
            model = toy_tasks.OneLayer(
                p["vocab"], p["seq_len"], p["d_model"], factorised=False, gen=torch.Generator().manual_seed(seed)
            )
            data = toy_tasks.sequences(
                task, n, p["seq_len"], p["vocab"], p["zipf"], torch.Generator().manual_seed(seed + 100)
            )
            out = toy_tasks.accumulated_updates(
                model,
                data,
                objective,
                checkpoints,
                mask_rate=p["mask_rate"],
                gen=torch.Generator().manual_seed(seed + 200),
            )
            for k in ACCUMULATED:
                values[k][t, o] = out[k]
            beta[t, o] = out["beta"]
    dims = ("task", "objective", "n_sequences")
    variables = {f"accumulated_{k}": (dims, v) for k, v in values.items()}
    variables["accumulated_beta"] = (("task", "objective", "position", "context_position"), beta)
    coords = {
        "task": list(toy_tasks.TASKS),
        "objective": list(G.OBJECTIVES),
        "n_sequences": checkpoints,
        "position": np.arange(p["seq_len"]),
        "context_position": np.arange(p["seq_len"]),
    }
    return xr.Dataset(variables, coords=coords)


TOY_CODE = (  # the modules whose code determines the training runs
    "attnstruct.analyses.gradient_toy_runs",
    "attnstruct.gradient",
    "attnstruct.scores",
    "attnstruct.tasks.toy_tasks",
)


def training_key(parameters: Mapping) -> str:
    """sha256 (16 hex digits) of what determines :func:`training_runs`: the parameters it reads (the fields of
    :class:`~attnstruct.tasks.toy_tasks.CopyTaskConfig` but those it sets per run, ``seed``, ``n_seeds``,
    ``sgd_lr``), the attnstruct version and the code of :data:`TOY_CODE`."""
    per_run = {"objective", "factorised", "optimizer"}
    names = sorted((set(toy_tasks.CopyTaskConfig.field_names()) - per_run) | {"seed", "n_seeds", "sgd_lr"})
    record = {
        "parameters": {name: parameters[name] for name in names},
        "version": __version__,
        "code": run_folder.code_digest(TOY_CODE),
    }
    return hashlib.sha256(json.dumps(record, sort_keys=True, default=str).encode()).hexdigest()[:16]


def training_runs(parameters: Mapping, store: str | os.PathLike | None = None) -> xr.Dataset:
    """Every training run of the notebook, in one dataset; with ``store``, kept in
    ``store/toy-runs-<training_key>.nc`` and reused from there (:func:`attnstruct.work.stored_dataset`).

    * Adam: every task of :data:`~attnstruct.tasks.toy_tasks.TASKS`, objective, parameterisation (``W_qk`` and
      ``W_q W_k^T``) and seed ``seed .. seed + n_seeds - 1``: ``loss``, ``symmetry``, ``directionality`` and
      ``beta_symmetry`` ``[task, objective, parameterisation, seed, step]`` and ``held_out_loss`` (the final
      model's loss on fresh sequences) ``[task, objective, parameterisation, seed]``
      (:func:`attnstruct.tasks.toy_tasks.runs_dataset`);
    * plain SGD (learning rate ``sgd_lr``, ``W_qk`` as the parameter, the copy task, seed ``seed``):
      ``sgd_loss``, ``sgd_symmetry``, ``sgd_directionality`` ``[objective, step]``, ``sgd_held_out_loss``
      ``[objective]``;
    * ``target_entropy`` ``[task, objective]``: the entropy of the tokens each objective predicts
      (:func:`attnstruct.tasks.toy_tasks.target_entropy` over :data:`YARDSTICK_SEQUENCES` sequences), the loss of
      a predictor that ignores the context: the yardstick of learning.

    ``parameters``: the notebook's (the fields of :class:`~attnstruct.tasks.toy_tasks.CopyTaskConfig` but
    ``objective``, ``factorised`` and ``optimizer``; ``n_seeds``; ``sgd_lr``; ``workers``, the runs trained side
    by side in processes of one thread each, default 2).
    """
    if store is not None:
        path = Path(store) / f"toy-runs-{training_key(parameters)}.nc"
        return work.stored_dataset(path, lambda: training_runs(parameters), "04's training runs")
    seed = int(parameters["seed"])
    keys, jobs = [], []
    for task in toy_tasks.TASKS:
        for objective in G.OBJECTIVES:
            for factorised in (False, True):
                for k in range(int(parameters["n_seeds"])):
                    config = toy_tasks.CopyTaskConfig.from_params(
                        parameters, objective=objective, factorised=factorised, seed=seed + k, optimizer="adam"
                    )
                    keys.append((task, objective, factorised, seed + k))
                    jobs.append((config, task))
    for objective in G.OBJECTIVES:
        sgd = toy_tasks.CopyTaskConfig.from_params(
            parameters, objective=objective, factorised=False, lr=parameters["sgd_lr"], optimizer="sgd"
        )
        keys.append(("sgd", objective))
        jobs.append((sgd, "copy"))
    # one thread per run whatever the number of workers, so the runs do not depend on it
    done = run_in_processes(toy_tasks.train, jobs, int(parameters.get("workers", 2)), threads_per_worker=1)
    runs = dict(zip(keys, done))
    ds = toy_tasks.runs_dataset({key: run for key, run in runs.items() if key[0] != "sgd"})
    sgd = {
        f"sgd_{v}": (("objective", "step"), [runs["sgd", o][v] for o in G.OBJECTIVES])
        for v in ("loss", "symmetry", "directionality")
    }
    sgd["sgd_held_out_loss"] = ("objective", [runs["sgd", o]["held_out_loss"] for o in G.OBJECTIVES])
    entropy = [
        [
            toy_tasks.target_entropy(
                task,
                objective,
                seq_len=parameters["seq_len"],
                vocab=parameters["vocab"],
                zipf=parameters["zipf"],
                mask_rate=parameters["mask_rate"],
                n_sequences=YARDSTICK_SEQUENCES,
                gen=torch.Generator().manual_seed(seed + 400),
            )
            for objective in G.OBJECTIVES
        ]
        for task in toy_tasks.TASKS
    ]
    return ds.assign(sgd | {"target_entropy": (("task", "objective"), entropy)})


def dataset(parameters: Mapping, parts: Sequence[xr.Dataset], effects: Sequence = ()) -> xr.Dataset:
    """The notebook's dataset: the ``parts`` (:func:`score_nulls`, :func:`pair_roles`,
    :func:`accumulated_at_initialisation`, :func:`training_runs`) merged, with the provenance attrs of
    :func:`attnstruct.results.provenance_attrs` (``parameters`` recorded, and under ``verdicts`` the table of
    ``effects``, JSON, ``"{}"`` for none)."""
    merged = xr.merge(parts, join="exact", combine_attrs="drop")
    merged.attrs = results.provenance_attrs(
        parameters=parameters,
        scored_matrix="W_qk of a one-layer, one-head attention model on the copy and Markov tasks (d_model x d_model); "
        "accumulated_*: the summed update -dL/dW_qk at initialisation (_without_self: the pairs j = i left out; "
        "_beta: the summed coefficients by query and context position); sgd_*: plain-SGD runs on the copy task; "
        "role_*: times per sequence a position is predicted (query) and context; pair_probability: P(position "
        "query, context_position context) from sampled batches (pair_asymmetry: max |P - P^T| from role_sequences "
        "of them); held_out_loss: the final model's loss on fresh sequences; target_entropy: entropy of the "
        "predicted tokens, the loss of a context-free predictor; "
        "null_*: random single-head W_q^T W_k of width d_model",
        title="04 gradient structure: toy updates and training, bidirectional versus causal, copy and Markov tasks",
        markov_seed=toy_tasks.MARKOV_SEED,
        markov_concentration=toy_tasks.MARKOV_CONCENTRATION,
        verdicts=stats.verdict_table(effects).to_json(orient="index") if len(effects) else "{}",
    )
    return merged
