"""Notebook 04: the gradient's structure on two toy tasks, masked LM against next-token prediction.

What it computes: the nulls, the check against autograd, the pair probabilities, the accumulated updates at
initialisation and the training runs of the two toy tasks, each part an ``xarray.Dataset``;
:func:`result_dataset` joins the parts into the notebook's dataset with its provenance. Every part draws from
generators seeded by the notebook's ``seed`` with fixed offsets (``+ 100`` the sequences of the accumulated updates,
``+ 200`` their masks, ``+ 300`` the pair probabilities, ``+ 400`` the learning yardsticks; the training runs seed by
``(seed + k, step)``), so equal parameters give an equal dataset.

What it reads and decides from them:

* **Learning first.** A run has learned when its final loss lies at least :data:`LEARNING_MARGIN` nats below the
  entropy of the tokens its objective predicts (``target_entropy``, the loss of the best predictor that ignores
  the context; :func:`learning_table`). The final loss is the final model's on fresh sequences
  (``held_out_loss``). Effects of runs that did not all learn say "the runs did not learn" (``learned=False``
  in :mod:`attnstruct.stats`), never a verdict. The margin asks for a clear part of the room the tasks leave
  (next-token prediction on the copy task can gain at most ``8/15`` of the entropy at ``seq_len = 16``, about
  1.8 nats; on the Markov task the chain's conditional entropy lies about 1.7 nats below it) and lies far above
  the sampling noise of a held-out loss over :data:`~attnstruct.tasks.toy_tasks.HELD_OUT_SEQUENCES` sequences
  (a few hundredths of a nat).
* **Objectives against each other.** Per task and parameterisation, the final score of one objective minus the
  other's (:data:`COMPARISONS`), paired by seed (:func:`objective_effects`), against the null of that mean difference
  between random matrices (:func:`null_of_the_difference`); per task, the
  parameterisations read together with :func:`attnstruct.stats.overall`.
* **The beta proxy.** The symmetry of the summed coefficients, median over training, masked LM minus next-token
  prediction per seed (:func:`proxy_effects`), read beside the gap in final symmetry of ``W_qk``.
* **Against the null.** Single values (one run, one summed update) are described by where they sit in the null of
  one random ``W_qk`` (percentile, inside or beyond its 95% range), without a verdict.

The facts its sentences and figure titles state come as records (``...Facts``), formatted by
:mod:`attnstruct.report.prose`; the sentences are templates in the notebook.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import xarray as xr

from .. import gradient as G
from .. import results, stats, work
from .._version import __version__
from ..report.prose import compared, count, effect_line, listing, number, percent, signed, span
from ..scores import symmetry_score
from ..tasks import toy_tasks
from ..training import run_folder
from ..training.processes import run_in_processes

SCORES = stats.SCORES  # ("symmetry", "directionality")
ROLE_SEQUENCES = 20000  # sampled sequences for the pair probabilities (masks and targets only, no model)
YARDSTICK_SEQUENCES = 20000  # sampled sequences for the entropy of the target tokens
ACCUMULATION_CHECKPOINTS = (1, 4, 16, 64, 256)  # sums scored after this many sequences (and after all of them)
ACCUMULATED = ("symmetry", "directionality", "symmetry_without_self", "directionality_without_self")


def single_head_nulls(d_model: int, n_null: int, seed: int) -> xr.Dataset:
    """``null_symmetry`` ``[null_draw]`` and ``null_directionality`` ``[null_draw_or_transpose]``: the scores of
    ``n_null`` random single-head ``W_qk = W_q^T W_k`` of width ``d_model``
    (:func:`attnstruct.stats.null_median_over_layers`, one head, one layer), what a toy model's ``W_qk`` is read
    against; directionality's ``2 n_null`` values are those draws and their transposes, centred at 0 exactly."""
    pools = {score: stats.null_median_over_layers(score, d_model, 1, 1, n_draws=n_null, seed=seed) for score in SCORES}
    return xr.Dataset(
        {
            "null_symmetry": ("null_draw", pools["symmetry"]),
            "null_directionality": ("null_draw_or_transpose", pools["directionality"]),
        },
        coords={"null_draw": np.arange(n_null), "null_draw_or_transpose": np.arange(2 * n_null)},
    )


def null_of_the_difference(score: str, d_model: int, n_null: int, n_seeds: int, seed: int) -> np.ndarray:
    """The null of a mean over ``n_seeds`` of (one random ``W_qk``'s ``score`` minus another's):
    :func:`attnstruct.stats.null_of_the_mean` of :func:`single_head_nulls`' draws minus independent draws
    (``seed + 1``), for directionality with each sample's negation (:func:`attnstruct.stats.symmetrised`). What a
    paired effect between two objectives is read against."""
    pool = stats.null_median_over_layers(score, d_model, 1, 1, n_draws=n_null, seed=seed)
    minus = stats.null_median_over_layers(score, d_model, 1, 1, n_draws=n_null, seed=seed + 1)
    null = stats.null_of_the_mean(pool, n_seeds, minus=minus, seed=seed)
    return stats.symmetrised(null) if score == "directionality" else null


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
    "attnstruct.analyses.nb04_gradient_structure",
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


def result_dataset(parameters: Mapping, parts: Sequence[xr.Dataset], effects: Sequence = ()) -> xr.Dataset:
    """The notebook's dataset: the ``parts`` (:func:`single_head_nulls`, :func:`pair_roles`,
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


# ---------------------------------------------------------------------------------------- what is read and decided

LEARNING_MARGIN = 0.5  # nats below the entropy of the target tokens that a run's final loss must reach
ALPHA = 0.05
# each score's paired effect: (treated, baseline, predicted sign of treated minus baseline), per the argument
COMPARISONS = {"symmetry": ("bidirectional", "causal", +1), "directionality": ("causal", "bidirectional", -1)}
OBJECTIVE_NAMES = {"bidirectional": "masked LM", "causal": "next-token prediction"}


def objective_claim(task: str, parameterisation: str, score: str) -> str:
    treated, baseline, _ = COMPARISONS[score]
    return f"{task} task, {parameterisation}: final {score}, {treated} minus {baseline}"


def proxy_claim(task: str) -> str:
    return f"{task} task, median symmetry of summed beta, bidirectional minus causal"


PRIMARY = objective_claim("copy", "W_qk", "symmetry")  # the paper's argument, on the task built for it
_PAIRED = "sign-flip over seeds, paired (the two objectives' runs of a seed), and beyond the null's 95% range"
PLAN = stats.Plan(
    "04_gradient_structure",
    tuple(
        stats.Claim(
            objective_claim(task, parameterisation, score),
            "seed",
            f"the final {score} of W_qk, {COMPARISONS[score][0]} minus {COMPARISONS[score][1]} of one seed, mean over "
            "seeds",
            _PAIRED,
            "the mean difference between as many pairs of random matrices of this width (null_of_the_difference)",
            role="primary" if objective_claim(task, parameterisation, score) == PRIMARY else "secondary",
        )
        for task in toy_tasks.TASKS
        for parameterisation in toy_tasks.PARAMETERISATIONS.values()
        for score in SCORES
    )
    + tuple(
        stats.Claim(
            proxy_claim(task),
            "seed",
            "the symmetry of the summed coefficients beta, median over the recorded steps, bidirectional minus "
            "causal of one seed, mean over seeds",
            "sign-flip over seeds",
            "none beyond the test (a random matrix has no coefficients)",
            role="secondary",
        )
        for task in toy_tasks.TASKS
    ),
)


def learning_table(training: xr.Dataset, margin: float = LEARNING_MARGIN) -> pd.DataFrame:
    """One row per run: ``loss`` (``held_out_loss``: the final model's loss on fresh sequences), ``yardstick``
    (``target_entropy`` of its task and objective), ``below`` (yardstick minus loss) and ``met`` (``below >=
    margin``; a NaN loss never meets it).

    ``training``: :func:`training_runs`' dataset. Indexed by ``task,
    objective, parameterisation, optimizer, seed``; the Adam runs first, then the plain-SGD runs (copy task,
    ``W_qk``, the first seed).
    """
    if not margin > 0:
        raise ValueError(f"margin must be positive, got {margin!r}")
    rows = []
    for key, loss in training.held_out_loss.to_series().items():
        rows.append((*key[:3], "adam", key[3], loss))
    if "sgd_held_out_loss" in training:
        for objective, loss in training.sgd_held_out_loss.to_series().items():
            rows.append(("copy", objective, "W_qk", "sgd", int(training.seed[0]), loss))
    names = ["task", "objective", "parameterisation", "optimizer", "seed", "loss"]
    table = pd.DataFrame(rows, columns=names).set_index(names[:-1])
    entropy = training.target_entropy
    table["yardstick"] = [float(entropy.sel(task=t, objective=o)) for t, o, *_ in table.index]
    table["below"] = table["yardstick"] - table["loss"]
    table["met"] = table["below"] >= margin
    return table


def runs_learned(table: pd.DataFrame, **where) -> bool:
    """Whether every run of ``table`` (:func:`learning_table`) whose index levels equal ``where`` met the
    criterion (Adam runs unless ``optimizer`` is given); no such run is an error."""
    where = {"optimizer": "adam", **where}
    try:
        rows = table.xs(tuple(where.values()), level=list(where), drop_level=False)
    except KeyError:
        rows = table.iloc[:0]
    if rows.empty:
        raise ValueError(f"no run matches {where}")
    return bool(rows["met"].all())


def objective_effects(
    training: xr.Dataset, *, d_model: int, n_null: int, seed: int, margin: float = LEARNING_MARGIN
) -> dict[tuple[str, str, str], stats.Effect]:
    """Per ``(task, parameterisation, score)``: the paired effect over seeds of the final ``score``, masked LM
    minus next-token prediction for symmetry (predicted positive), next-token prediction minus masked LM for
    directionality (predicted negative: the causal ``W_qk`` the more column-dominant; :data:`COMPARISONS`),
    against :func:`null_of_the_difference` (width ``d_model``, ``n_null``
    draws), gated on :func:`runs_learned` of that task and parameterisation."""
    final, table, n_seeds = training.isel(step=-1), learning_table(training, margin), training.sizes["seed"]
    null = {score: null_of_the_difference(score, d_model, n_null, n_seeds, seed) for score in SCORES}
    effects = {}
    for task in training.task.values:
        for parameterisation in training.parameterisation.values:
            pick = final.sel(task=task, parameterisation=parameterisation)
            learned = runs_learned(table, task=task, parameterisation=parameterisation)
            for score in SCORES:
                treated, baseline, sign = COMPARISONS[score]
                effects[str(task), str(parameterisation), score] = stats.paired_effect(
                    pick[score].sel(objective=treated).values,
                    pick[score].sel(objective=baseline).values,
                    claim=objective_claim(str(task), str(parameterisation), score),
                    predicted_sign=sign,
                    null_samples=null[score],
                    seed=seed,
                    learned=learned,
                )
    return dict(zip(effects, PLAN.decide(list(effects.values()))))


def proxy_effects(training: xr.Dataset, *, seed: int, margin: float = LEARNING_MARGIN) -> dict[str, stats.Effect]:
    """Per task: the paired effect over seeds of the beta proxy (``beta_symmetry``, ``W_qk`` as the parameter,
    median over the recorded steps of each run), masked LM minus next-token prediction, predicted positive; no
    null (a random matrix has no coefficients); gated on :func:`runs_learned` of the task's ``W_qk`` runs."""
    table = learning_table(training, margin)
    per_seed = training.beta_symmetry.sel(parameterisation="W_qk").median("step")
    effects = {
        str(task): stats.paired_effect(
            per_seed.sel(task=task, objective="bidirectional").values,
            per_seed.sel(task=task, objective="causal").values,
            claim=proxy_claim(str(task)),
            seed=seed,
            learned=runs_learned(table, task=task, parameterisation="W_qk"),
        )
        for task in training.task.values
    }
    return dict(zip(effects, PLAN.decide(list(effects.values()))))


def null_side(value: float, pool) -> tuple[str, str]:
    """Where one value sits in the null sample ``pool``: ``("inside" | "above" | "below", percentile)``, the side
    of the null's central 95% range and the value's percentile in the null (``"40"``)."""
    c = stats.compare_with_null(value, pool)
    side = "inside" if not c.outside else "above" if c.value > c.null_high else "below"
    return side, f"{c.percentile:.0f}"


def null_sides(values, pool) -> tuple[str, str, str]:
    """How many of ``values`` sit above, below and inside the null sample ``pool``'s central 95% range, as counts."""
    values = np.ravel(np.asarray(values, dtype=float))
    if len(values) == 0:
        raise ValueError("values must not be empty")
    sides = [null_side(v, pool)[0] for v in values]
    return tuple(str(sides.count(side)) for side in ("above", "below", "inside"))


@dataclass(frozen=True)
class NullFacts:
    """The null every score is read against: its draws (``matrices``), ``width`` and the central 95% of each score."""

    matrices: str
    width: str
    symmetry: str
    directionality: str


def null_ranges(nulls: xr.Dataset, d_model: int) -> NullFacts:
    """The size, width and 95% range per score of :func:`single_head_nulls`."""
    ranges = {s: np.quantile(nulls[f"null_{s}"], [0.025, 0.975]) for s in SCORES}
    return NullFacts(
        matrices=count(nulls.sizes["null_draw"], "random single-head matrix", "random single-head matrices"),
        width=str(d_model),
        symmetry=span(ranges["symmetry"]),
        directionality=span(ranges["directionality"]),
    )


@dataclass(frozen=True)
class AutogradFacts:
    """Per objective: whether the analytic gradient equals autograd's (``equal``) within ``tolerance`` (relative)."""

    objective: str
    tolerance: str
    equal: bool


def autograd_agreement(errors: Mapping[str, float], tolerance: float = 1e-12) -> list[AutogradFacts]:
    """:func:`autograd_check`'s largest relative differences read against ``tolerance``, one record per objective."""
    return [
        AutogradFacts(str(objective), f"{tolerance:g}", bool(error < tolerance)) for objective, error in errors.items()
    ]


@dataclass(frozen=True)
class PairAsymmetryFacts:
    """Per objective: the largest pair probability and ``max |P - P^T|`` from each number of sampled sequences
    (``estimates``: ``0.012 from 2000 sequences, ...``); ``length`` of the sequences."""

    objective: str
    length: str
    largest: str
    estimates: str


def pair_asymmetry(roles: xr.Dataset) -> list[PairAsymmetryFacts]:
    """How far the sampled pair probabilities of :func:`pair_roles` are from symmetric, per objective."""
    facts = []
    for objective in roles.objective.values:
        estimates = ", ".join(
            f"{float(a):.3f} from {int(n)} sequences"
            for n, a in zip(roles.role_sequences.values, roles.pair_asymmetry.sel(objective=objective).values)
        )
        largest = float(roles.pair_probability.sel(objective=objective).max())
        facts.append(PairAsymmetryFacts(str(objective), str(roles.sizes["position"]), f"{largest:.3f}", estimates))
    return facts


@dataclass(frozen=True)
class RoleFacts:
    """Per objective (``name`` its plain name): the terms per sequence in which a position is ``query`` (row sums of
    the pair matrix) and ``context`` (column sums), their ``largest_difference`` at one position, and the first and
    last positions' counts."""

    name: str
    objective: str
    query: str
    context: str
    largest_difference: str
    first_context: str
    first_query: str
    last_context: str
    last_query: str


def role_counts(roles: xr.Dataset) -> list[RoleFacts]:
    """The margins of each objective's pair matrix (:func:`pair_roles`)."""
    facts = []
    for objective in roles.objective.values:
        p = roles.pair_probability.sel(objective=objective).values
        query, context = p.sum(1), p.sum(0)
        facts.append(
            RoleFacts(
                name=OBJECTIVE_NAMES[str(objective)],
                objective=str(objective),
                query=span(query, fmt=number),
                context=span(context, fmt=number),
                largest_difference=number(np.abs(query - context).max()),
                first_context=number(context[0]),
                first_query=number(query[0]),
                last_context=number(context[-1]),
                last_query=number(query[-1]),
            )
        )
    return facts


@dataclass(frozen=True)
class MarkovFacts:
    """The Markov task's fixed transition matrix: its Dirichlet ``concentration`` and ``seed``, the median
    probability of a token's most likely successor (``top_successor``) and the matrix's ``symmetry``."""

    concentration: str
    seed: str
    top_successor: str
    symmetry: str


def markov_task(vocab: int) -> MarkovFacts:
    """What the Markov task's transitions (:func:`attnstruct.tasks.toy_tasks.markov_transitions`) look like."""
    transitions = toy_tasks.markov_transitions(vocab)
    return MarkovFacts(
        concentration=str(toy_tasks.MARKOV_CONCENTRATION),
        seed=str(toy_tasks.MARKOV_SEED),
        top_successor=number(transitions.max(1).values.median()),
        symmetry=signed(symmetry_score(transitions)),
    )


@dataclass(frozen=True)
class ExampleSequenceFacts:
    """One sequence of a ``task``, its ``tokens`` as a list."""

    task: str
    tokens: str


def example_sequences(vocab: int, seq_len: int, zipf: float, seed: int) -> list[ExampleSequenceFacts]:
    """One example sequence of each task, drawn with ``seed``."""
    gen = torch.Generator().manual_seed(seed)
    return [
        ExampleSequenceFacts(task, str(toy_tasks.sequences(task, 1, seq_len, vocab, zipf, gen)[0].tolist()))
        for task in toy_tasks.TASKS
    ]


@dataclass(frozen=True)
class AccumulatedFacts:
    """Per task and objective, the summed update after all its sequences: its symmetry with and without the
    self-pairs and its directionality, each with its place in the null of one random ``W_qk`` (:func:`null_side`:
    ``*_side`` inside, above or below the null's central 95% range; ``*_percentile`` its percentile there)."""

    task: str
    objective: str
    with_self: str
    with_self_side: str
    with_self_percentile: str
    without_self: str
    without_self_side: str
    without_self_percentile: str
    directionality: str
    directionality_side: str
    directionality_percentile: str


def accumulated_against_null(accumulated: xr.Dataset, nulls: xr.Dataset) -> list[AccumulatedFacts]:
    """:func:`accumulated_at_initialisation`'s final sums placed in :func:`single_head_nulls`."""
    last = accumulated.isel(n_sequences=-1)
    facts = []
    for task in last.task.values:
        for objective in last.objective.values:
            cell = last.sel(task=task, objective=objective)
            with_self, without = float(cell.accumulated_symmetry), float(cell.accumulated_symmetry_without_self)
            direction = float(cell.accumulated_directionality)
            facts.append(
                AccumulatedFacts(
                    str(task),
                    str(objective),
                    signed(with_self),
                    *null_side(with_self, nulls.null_symmetry),
                    signed(without),
                    *null_side(without, nulls.null_symmetry),
                    signed(direction),
                    *null_side(direction, nulls.null_directionality),
                )
            )
    return facts


@dataclass(frozen=True)
class LearningFacts:
    """How many runs met the learning criterion: ``margin`` in nats, the Adam runs' ``adam_met`` of ``adam_runs``,
    the plain-SGD runs' (``has_sgd``), and the runs that did not (``misses``, one ``task, objective, ...`` each,
    joined by ``;``; ``all_met`` when none)."""

    margin: str
    adam_met: str
    adam_runs: str
    has_sgd: bool
    sgd_met: str
    sgd_runs: str
    all_met: bool
    misses: str


def learning_summary(table: pd.DataFrame, margin: float = LEARNING_MARGIN) -> LearningFacts:
    """:func:`learning_table` counted by optimizer, and its misses."""
    counted = {}
    for optimizer, name in (("adam", "Adam"), ("sgd", "plain-SGD")):
        if optimizer in table.index.get_level_values("optimizer"):
            rows = table.xs(optimizer, level="optimizer")
            counted[optimizer] = (str(int(rows["met"].sum())), count(len(rows), f"{name} run"))
    missed = table[~table["met"]]
    misses = [
        f"{task}, {objective}, {parameterisation}{'' if optimizer == 'adam' else ', SGD'}, seed {seed} "
        f"(loss {number(row.loss)} against {number(row.yardstick)})"
        for (task, objective, parameterisation, optimizer, seed), row in missed.iterrows()
    ]
    adam, sgd = counted.get("adam", ("0", count(0, "Adam run"))), counted.get("sgd", ("", ""))
    return LearningFacts(number(margin), *adam, "sgd" in counted, *sgd, missed.empty, "; ".join(misses))


@dataclass(frozen=True)
class FinalScoresFacts:
    """Per task, objective and parameterisation: the final scores of ``W_qk`` over ``seeds`` and how many of them sit
    above, below and inside the null of one random ``W_qk`` (:func:`null_sides`); ``learned``: every one of these
    runs met the learning criterion."""

    task: str
    objective: str
    parameterisation: str
    seeds: str
    symmetry: str
    symmetry_above: str
    symmetry_below: str
    symmetry_inside: str
    directionality: str
    directionality_above: str
    directionality_below: str
    directionality_inside: str
    learned: bool


def final_scores(training: xr.Dataset, nulls: xr.Dataset, table: pd.DataFrame) -> list[FinalScoresFacts]:
    """The final scores of :func:`training_runs` placed in :func:`single_head_nulls`, gated by :func:`runs_learned`."""
    final, facts = training.isel(step=-1), []
    for task in final.task.values:
        for objective in final.objective.values:
            for parameterisation in final.parameterisation.values:
                where = dict(task=str(task), objective=str(objective), parameterisation=str(parameterisation))
                values = {score: final[score].sel(where).values for score in SCORES}
                facts.append(
                    FinalScoresFacts(
                        *where.values(),
                        count(len(values["symmetry"]), "seed"),
                        listing(values["symmetry"]),
                        *null_sides(values["symmetry"], nulls["null_symmetry"]),
                        listing(values["directionality"]),
                        *null_sides(values["directionality"], nulls["null_directionality"]),
                        runs_learned(table, **where),
                    )
                )
    return facts


@dataclass(frozen=True)
class OrderingFacts:
    """Per ``task``: the mean final symmetry over ``seeds`` of each objective per parameterisation (``means``), and
    the ``verdict`` of the symmetry effects of both parameterisations read together."""

    task: str
    seeds: str
    means: str
    verdict: str


def orderings(training: xr.Dataset, effects: Mapping[tuple[str, str, str], stats.Effect]) -> list[OrderingFacts]:
    """Per task, :func:`attnstruct.stats.overall` of :func:`objective_effects`' symmetry effects, beside the means."""
    final = training.symmetry.isel(step=-1).mean("seed")
    facts = []
    for task in training.task.values:
        means = "; ".join(
            f"{p}: masked LM {signed(final.sel(task=task, objective='bidirectional', parameterisation=p))}, "
            f"next-token prediction {signed(final.sel(task=task, objective='causal', parameterisation=p))}"
            for p in training.parameterisation.values
        )
        verdict = stats.overall([e for (t, _, s), e in effects.items() if t == task and s == "symmetry"])
        facts.append(OrderingFacts(str(task), count(training.sizes["seed"], "seed"), means, str(verdict)))
    return facts


@dataclass(frozen=True)
class OverallFacts:
    """The summary ``verdict``: that of the plan's ``primary`` claim after Holm's correction."""

    verdict: str
    primary: str


def primary_summary(effects: Mapping[tuple[str, str, str], stats.Effect]) -> OverallFacts:
    """:func:`attnstruct.stats.primary_verdict` of :func:`objective_effects` (decided under :data:`PLAN`): the
    summary follows the primary claim, :data:`PRIMARY`; the other tasks and parameterisations are secondary."""
    return OverallFacts(str(stats.primary_verdict(list(effects.values()))), PRIMARY)


@dataclass(frozen=True)
class ProxyFacts:
    """Per ``task``: the beta proxy's median and range over training and seeds per objective (``level``), the
    proxy's and ``W_qk``'s paired effects in the words of :mod:`attnstruct.stats` (``proxy``, ``wqk``), and the
    verdict of the two read together (``together``)."""

    task: str
    level: str
    proxy: str
    wqk: str
    together: str


def proxy_readings(
    training: xr.Dataset,
    proxies: Mapping[str, stats.Effect],
    effects: Mapping[tuple[str, str, str], stats.Effect],
) -> list[ProxyFacts]:
    """Per task: :func:`proxy_effects` beside the final symmetry of ``W_qk``, and both read together
    (:func:`attnstruct.stats.overall`: the mechanism's account needs both in the predicted direction)."""
    beta = training.beta_symmetry.sel(parameterisation="W_qk")
    facts = []
    for task, proxy in proxies.items():
        values = {o: beta.sel(task=task, objective=o).values.ravel() for o in beta.objective.values}
        level = "; ".join(f"{OBJECTIVE_NAMES[str(o)]} {signed(np.median(v))} ({span(v)})" for o, v in values.items())
        wqk = effects[task, "W_qk", "symmetry"]
        together = stats.overall([proxy, wqk])
        facts.append(ProxyFacts(str(task), level, effect_line(proxy), effect_line(wqk), str(together)))
    return facts


# ---------------------------------------------------------------------------------------------- figure titles


@dataclass(frozen=True)
class PairShareFacts:
    """Per objective, the share of the off-diagonal pairs' probability that lies below the diagonal (the context
    before the query)."""

    causal: str
    bidirectional: str


def context_before_query(roles: xr.Dataset) -> PairShareFacts:
    """The lower triangle's share of :func:`pair_roles`' off-diagonal probability, per objective."""
    shares = {}
    for objective in roles.objective.values:
        p = np.asarray(roles.pair_probability.sel(objective=objective).values, dtype=float)
        lower, upper = np.tril(p, -1).sum(), np.triu(p, 1).sum()
        shares[str(objective)] = percent(lower / (lower + upper))
    return PairShareFacts(causal=shares["causal"], bidirectional=shares["bidirectional"])


@dataclass(frozen=True)
class TaskComparisonFacts:
    """Per ``task``: masked LM's symmetry (``masked``) against next-token prediction's (``causal``); ``relation``
    (``more symmetric than``, ``less symmetric than``, ``as symmetric as``) and its short form ``short`` (``more``,
    ``less``, ``as symmetric``), compared at two decimals; ``first``: the first task, ``sequences`` summed (for the
    accumulated update), ``parameterisation`` read."""

    task: str
    masked: str
    causal: str
    relation: str
    short: str
    first: bool
    sequences: str = ""
    parameterisation: str = ""


def _by_task(values: xr.DataArray, **extra) -> list[TaskComparisonFacts]:
    facts = []
    for k, task in enumerate(values.task.values):
        bid, causal = (float(values.sel(task=task, objective=o)) for o in ("bidirectional", "causal"))
        relation = compared(bid, causal, "more symmetric than", "less symmetric than", "as symmetric as")
        short = compared(bid, causal, "more", "less", "as symmetric")
        facts.append(TaskComparisonFacts(str(task), signed(bid), signed(causal), relation, short, k == 0, **extra))
    return facts


def accumulated_by_task(accumulated: xr.Dataset) -> list[TaskComparisonFacts]:
    """The update summed at initialisation: per task, the final symmetry of masked LM's sum against next-token
    prediction's."""
    n = int(accumulated.n_sequences[-1])
    return _by_task(accumulated.accumulated_symmetry.isel(n_sequences=-1), sequences=count(n, "sequence"))


def final_symmetry_by_task(training: xr.Dataset, parameterisation: str = "W_qk") -> list[TaskComparisonFacts]:
    """Per task, the mean over seeds of masked LM's final symmetry against next-token prediction's (their difference
    is the estimate of :func:`objective_effects`' symmetry claim)."""
    last = training.symmetry.sel(parameterisation=parameterisation).isel(step=-1).mean("seed")
    return _by_task(last, parameterisation=parameterisation)


def beta_by_task(training: xr.Dataset) -> list[TaskComparisonFacts]:
    """The proxy (``beta_symmetry``, ``W_qk`` runs): per task, each run's median over the recorded steps, mean over
    seeds, of each objective (their difference is the estimate of :func:`proxy_effects`)."""
    return _by_task(training.beta_symmetry.sel(parameterisation="W_qk").median("step").mean("seed"))


@dataclass(frozen=True)
class InsideNullFacts:
    """How many of the runs' final directionality scores (Adam, both parameterisations) lie ``inside`` the central
    95% (``low`` to ``high``) of the null draws, of ``finals``."""

    inside: str
    finals: str
    low: str
    high: str


def directionality_inside_null(training: xr.Dataset, null: Sequence[float]) -> InsideNullFacts:
    """The final directionality of :func:`training_runs` counted inside the null's central 95%."""
    low, high = np.quantile(np.asarray(null, dtype=float), [0.025, 0.975])
    final = training.directionality.isel(step=-1).values.ravel()
    final = final[np.isfinite(final)]
    inside = int(((final >= low) & (final <= high)).sum())
    return InsideNullFacts(str(inside), count(len(final), "final score"), signed(low), signed(high))
