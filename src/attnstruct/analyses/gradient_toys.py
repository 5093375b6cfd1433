"""What notebook 04 reads and decides from its parts (:mod:`attnstruct.analyses.gradient_toy_runs`), and its sentences.

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
  between random matrices (:func:`attnstruct.analyses.gradient_toy_runs.null_of_the_difference`); per task, the
  parameterisations read together with :func:`attnstruct.stats.overall`.
* **The beta proxy.** The symmetry of the summed coefficients, median over training, masked LM minus next-token
  prediction per seed (:func:`proxy_effects`), read beside the gap in final symmetry of ``W_qk``.
* **Against the null.** Single values (one run, one summed update) are described by where they sit in the null of
  one random ``W_qk`` (percentile, inside or beyond its 95% range), without a verdict.

Every ``describe_*`` function returns Markdown (or plain text for the printed claims) computed from the data.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
import torch
import xarray as xr

from .. import stats
from ..report.prose import count, listing, number, signed, span
from ..scores import symmetry_score
from ..tasks import toy_tasks
from .gradient_toy_runs import SCORES, null_of_the_difference

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

    ``training``: :func:`attnstruct.analyses.gradient_toy_runs.training_runs`' dataset. Indexed by ``task,
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
    against :func:`~attnstruct.analyses.gradient_toy_runs.null_of_the_difference` (width ``d_model``, ``n_null``
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


def null_position(value: float, pool) -> str:
    """Where one value sits in the null sample ``pool``: ``inside the null's 95% range, percentile 40`` or
    ``above (below) the null's 95% range, percentile 99``."""
    c = stats.compare_with_null(value, pool)
    place = "inside" if not c.outside else "above" if c.value > c.null_high else "below"
    return f"{place} the null's 95% range, percentile {c.percentile:.0f}"


def null_positions(values, pool) -> str:
    """Where several values sit in the null sample ``pool``: ``3 values: 2 above the null's 95% range, 0 below it,
    1 inside it`` (one value: :func:`null_position`)."""
    values = np.ravel(np.asarray(values, dtype=float))
    if len(values) == 0:
        raise ValueError("values must not be empty")
    if len(values) == 1:
        return null_position(values[0], pool)
    comparisons = [stats.compare_with_null(v, pool) for v in values]
    above = sum(c.outside and c.value > c.null_high for c in comparisons)
    below = sum(c.outside and c.value < c.null_low for c in comparisons)
    inside = len(values) - above - below
    return f"{len(values)} values: {above} above the null's 95% range, {below} below it, {inside} inside it"


def describe_nulls(nulls: xr.Dataset, d_model: int) -> str:
    """The null every score is read against: its size, width and 95% range per score."""
    ranges = {s: np.quantile(nulls[f"null_{s}"], [0.025, 0.975]) for s in SCORES}
    matrices = count(nulls.sizes["null_draw"], "random single-head matrix", "random single-head matrices")
    return (
        f"The null: {matrices} $W_{{qk}} = W_q^\\top W_k$ of width {d_model}. The central 95% of their scores: "
        f"symmetry {span(ranges['symmetry'])}, directionality {span(ranges['directionality'])}."
    )


def describe_autograd_check(errors: Mapping[str, float], tolerance: float = 1e-12) -> str:
    """One line per objective: whether the analytic gradient equals autograd's within ``tolerance`` (relative)."""
    return "\n".join(
        f"{objective:<14} analytic gradient equals autograd's (max relative difference < {tolerance:g}): "
        f"{error < tolerance}"
        for objective, error in errors.items()
    )


def describe_pair_asymmetry(roles: xr.Dataset) -> str:
    """Per objective: the largest pair probability and ``max |P - P^T|`` from each number of sampled sequences."""
    lines = [f"P(i query, j context) from sampled sequences of length {roles.sizes['position']}:"]
    for objective in roles.objective.values:
        estimates = ", ".join(
            f"{float(a):.3f} from {int(n)} sequences"
            for n, a in zip(roles.role_sequences.values, roles.pair_asymmetry.sel(objective=objective).values)
        )
        largest = float(roles.pair_probability.sel(objective=objective).max())
        lines.append(f"{objective:<14} largest entry {largest:.3f};  max |P - P^T|: {estimates}")
    return "\n".join(lines)


def describe_roles(roles: xr.Dataset) -> str:
    """Per objective: the terms per sequence in which a position is query (row sums of the pair matrix) and
    context (column sums), their largest difference at one position, and the first and last positions'."""
    lines = []
    for objective in roles.objective.values:
        p = roles.pair_probability.sel(objective=objective).values
        query, context = p.sum(1), p.sum(0)
        lines.append(
            f"- {OBJECTIVE_NAMES[str(objective)]} ({objective}): as query {span(query, fmt=number)} and as context "
            f"{span(context, fmt=number)} terms per sequence; the largest difference between the two at one "
            f"position is {number(np.abs(query - context).max())}; position 0 is context in {number(context[0])} "
            f"and query in {number(query[0])}, the last position context in {number(context[-1])} and query in "
            f"{number(query[-1])}."
        )
    return "Terms per sequence by position:\n\n" + "\n".join(lines)


def describe_markov_task(vocab: int, seq_len: int, zipf: float, seed: int) -> str:
    """The Markov task's fixed transition matrix (seed, concentration, the median probability of a token's most
    likely successor, its symmetry score) and one example sequence of each task (drawn with ``seed``)."""
    transitions = toy_tasks.markov_transitions(vocab)
    gen = torch.Generator().manual_seed(seed)
    examples = "\n".join(
        f"- {task} task: `{toy_tasks.sequences(task, 1, seq_len, vocab, zipf, gen)[0].tolist()}`"
        for task in toy_tasks.TASKS
    )
    return (
        f"Markov task: rows drawn from Dirichlet(concentration {toy_tasks.MARKOV_CONCENTRATION}) with seed "
        f"{toy_tasks.MARKOV_SEED}; a token's most likely successor has probability "
        f"{number(transitions.max(1).values.median())} (median over tokens); the symmetry score of the transition "
        f"matrix is {signed(symmetry_score(transitions))}. One sequence of each task:\n\n{examples}"
    )


def describe_accumulated(accumulated: xr.Dataset, nulls: xr.Dataset) -> str:
    """Per task and objective, the summed update after all sequences: its symmetry with and without the
    self-pairs and its directionality, each placed in the null of one random ``W_qk``."""
    last = accumulated.isel(n_sequences=-1)
    lines = []
    for task in last.task.values:
        for objective in last.objective.values:
            cell = last.sel(task=task, objective=objective)
            with_self, without = float(cell.accumulated_symmetry), float(cell.accumulated_symmetry_without_self)
            direction = float(cell.accumulated_directionality)
            lines.append(
                f"- {task} task, {objective}: symmetry {signed(with_self)} with the self-pairs "
                f"({null_position(with_self, nulls.null_symmetry)}) and {signed(without)} without them "
                f"({null_position(without, nulls.null_symmetry)}); directionality {signed(direction)} "
                f"({null_position(direction, nulls.null_directionality)})."
            )
    n = int(last.n_sequences)
    return f"The update summed over {count(n, 'sequence')} at initialisation:\n\n" + "\n".join(lines)


def describe_learning(table: pd.DataFrame, margin: float = LEARNING_MARGIN) -> str:
    """How many runs met the learning criterion (Adam and plain SGD), and which did not."""
    lines = []
    for optimizer, name in (("adam", "Adam"), ("sgd", "plain-SGD")):
        if optimizer not in table.index.get_level_values("optimizer"):
            continue
        rows = table.xs(optimizer, level="optimizer")
        lines.append(f"{int(rows['met'].sum())} of {count(len(rows), f'{name} run')} meet it")
    missed = table[~table["met"]]
    text = (
        f"The criterion: a run has learned when its final loss lies at least {number(margin)} nats below the entropy "
        f"of the tokens its objective predicts. {'; '.join(lines)}."
    )
    if missed.empty:
        return text
    misses = [
        f"{task}, {objective}, {parameterisation}{'' if optimizer == 'adam' else ', SGD'}, seed {seed} "
        f"(loss {number(row.loss)} against {number(row.yardstick)})"
        for (task, objective, parameterisation, optimizer, seed), row in missed.iterrows()
    ]
    return text + " Not met: " + "; ".join(misses) + "."


def describe_final_scores(training: xr.Dataset, nulls: xr.Dataset, table: pd.DataFrame) -> str:
    """Per task, objective and parameterisation: the final scores of ``W_qk`` over seeds and where they sit in the
    null of one random ``W_qk``; runs that did not learn are marked."""
    final, lines = training.isel(step=-1), []
    for task in final.task.values:
        for objective in final.objective.values:
            for parameterisation in final.parameterisation.values:
                where = dict(task=str(task), objective=str(objective), parameterisation=str(parameterisation))
                readings = [
                    f"{score} {listing(final[score].sel(where).values)} "
                    f"({null_positions(final[score].sel(where).values, nulls[f'null_{score}'])})"
                    for score in SCORES
                ]
                note = "" if runs_learned(table, **where) else " These runs did not all meet the learning criterion."
                lines.append(f"- {task} task, {objective}, {parameterisation}: " + "; ".join(readings) + "." + note)
    return (
        f"Final scores of $W_{{qk}}$ ({count(final.sizes['seed'], 'seed')}), against the null of one random "
        f"$W_{{qk}}$:\n\n" + "\n".join(lines)
    )


def describe_objective_effects(effects: Mapping[tuple[str, str, str], stats.Effect]) -> str:
    """One bullet per effect of :func:`objective_effects`: its sentence (estimate, interval, p, null, verdict)."""
    return "\n".join(f"- {effect.sentence()}." for effect in effects.values())


def describe_orderings(training: xr.Dataset, effects: Mapping[tuple[str, str, str], stats.Effect]) -> str:
    """Per task, the mean final symmetry over seeds of each objective per parameterisation (a description), and the
    symmetry effects of both parameterisations read together (:func:`attnstruct.stats.overall`); then every task."""
    final = training.symmetry.isel(step=-1).mean("seed")
    lines = []
    for task in training.task.values:
        means = "; ".join(
            f"{p}: masked LM {signed(final.sel(task=task, objective='bidirectional', parameterisation=p))}, "
            f"next-token prediction {signed(final.sel(task=task, objective='causal', parameterisation=p))}"
            for p in training.parameterisation.values
        )
        verdict = stats.overall([e for (t, _, s), e in effects.items() if t == task and s == "symmetry"])
        lines.append(
            f"- {task} task, mean final symmetry over {count(training.sizes['seed'], 'seed')} ({means}). "
            f"Masked LM ends the more symmetric, both parameterisations read together: *{verdict}*."
        )
    every = stats.overall([e for (_, _, s), e in effects.items() if s == "symmetry"])
    return "\n".join(lines) + f"\n\nThe same prediction over every task and parameterisation: *{every}*."


def describe_proxy(
    training: xr.Dataset,
    proxies: Mapping[str, stats.Effect],
    effects: Mapping[tuple[str, str, str], stats.Effect],
) -> str:
    """Per task: the beta proxy's median and range over training and seeds per objective (``W_qk`` runs), its
    paired effect between the objectives, the same for the final symmetry of ``W_qk``, and the two read together
    (:func:`attnstruct.stats.overall`: the mechanism's account needs both in the predicted direction)."""
    beta = training.beta_symmetry.sel(parameterisation="W_qk")
    lines = []
    for task, proxy in proxies.items():
        values = {o: beta.sel(task=task, objective=o).values.ravel() for o in beta.objective.values}
        level = "; ".join(f"{OBJECTIVE_NAMES[str(o)]} {signed(np.median(v))} ({span(v)})" for o, v in values.items())
        wqk = effects[task, "W_qk", "symmetry"]
        together = stats.overall([proxy, wqk])
        lines.append(
            f"- {task} task: the proxy's median over training and seeds (its range): {level}.\n"
            f"  - The proxy: {proxy.sentence()}.\n"
            f"  - $W_{{qk}}$: {wqk.sentence()}.\n"
            f"  - Both in the predicted direction, read together: *{together}*."
        )
    return "The proxy $\\beta_{ij} = \\beta_{ji}$ (symmetry of the summed $\\beta$), per task:\n\n" + "\n".join(lines)
