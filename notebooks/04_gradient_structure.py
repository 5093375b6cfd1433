# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 04 · The gradient of $W_{qk}$: a sum of outer products, and what the objective does to it
#
# *Companion to Saponati et al., ICML 2025 (arXiv:2502.10927), section 3: the implicit weight updates of
# $W_{qk}$ and how bidirectional and autoregressive training shape them.*
#
# The claim: the gradient of a token-prediction loss with respect to $W_{qk}$ is a weighted sum of rank-1
# matrices $x_i x_j^\top$, one for every pair (query position $i$, context token $j$). Which pairs appear is
# set by the objective. Bidirectional training uses every pair in both directions, which favours symmetric
# updates. Autoregressive training uses only $j \le i$, one direction per pair, which does not.
# This notebook derives the gradient, checks it against autograd, and tests the consequence on two toy tasks.
#
# **How the toy tasks were chosen.** The first task, a copy task, was picked after a trial run on a second
# one, a first-order Markov chain, had given the opposite ordering (next-token prediction ending with the more
# symmetric $W_{qk}$). Both tasks are shown here, side by side and with the same settings, so that neither
# result stands alone. Every score is also set against what a random matrix of the same width scores.

# %% [markdown]
# **Learning goals.** After this notebook you can:
#
# - derive $\partial\mathcal L/\partial W_{qk}$ as a sum of outer products $\beta_{ij}\, x_i x_j^\top$, the softmax
#   step included, and check the derivation against autograd;
# - read an objective's pair probabilities $P(i \text{ query}, j \text{ context})$ and tell whether it uses both
#   directions of a pair alike (masked LM) or one only (next-token prediction), where per-position counts mislead;
# - explain why symmetric pairs are not enough: the update is symmetric only as far as $\beta_{ij} \approx
#   \beta_{ji}$, while the self-pairs $x_i x_i^\top$ are symmetric whatever $\beta$;
# - read a toy experiment's scores against a null and across seeds before calling a difference between objectives.

# %% tags=["parameters"]
seed = 0  # first seed; the training runs use seed, seed + 1, ...
n_seeds = 2  # training runs per task, objective and parameterisation
vocab = 64  # toy vocabulary (Zipf-distributed tokens)
seq_len = 16  # sequence length (copy task: first half random, second half a copy)
d_model = 32  # embedding width
steps = 1000  # Adam steps per training run
batch = 64  # sequences per step
lr = 0.003  # Adam learning rate
sgd_lr = 0.05  # learning rate of the plain-SGD comparison runs
mask_rate = 0.15  # masked-LM masking probability
zipf = 1.0  # Zipf exponent of the token frequencies
every = 50  # record scores every this many steps
n_sequences = 512  # sequences for the accumulated updates at initialisation
n_null = 400  # draws of the null distribution (random single-head W_qk of width d_model)
results_dir = "../build/interactive/results"  # where the dataset goes
figures_dir = "../build/interactive/figures"  # where the figures go

# %%
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch

from attnstruct import copy_task, evidence, pipeline, plotting, prose, results
from attnstruct import gradient as G
from attnstruct.scores import symmetry_score

plotting.set_style()
torch.set_num_threads(1)
results_dir, figures_dir = Path(results_dir), Path(figures_dir)
parameters = pipeline.notebook_parameters("04_gradient_structure", globals())  # recorded with the dataset
if n_seeds < 1 or steps < every or seq_len % 2 or n_sequences < 1 or n_null < 2:
    raise ValueError("need n_seeds >= 1, steps >= every, an even seq_len, n_sequences >= 1 and n_null >= 2")
OBJECTIVES = {"bidirectional": plotting.ENCODER_COLOR, "causal": plotting.DECODER_COLOR}
TASKS = copy_task.TASKS
SCORES = ("symmetry", "directionality")
# what a random single-head W_qk = W_q^T W_k of width d_model scores: the null every score below is read against
NULL = {
    score: evidence.null_median_over_layers(score, d_model, n_heads=1, n_layers=1, n_draws=n_null, seed=seed)
    for score in SCORES
}


def against_null(value, score):
    """Where ``value`` sits among the null's scores (percentile, z, 95% range)."""
    return evidence.compare_with_null(value, NULL[score])


def null_text(c):
    return f"percentile {c.percentile:.0f} of the null, z {c.z:+.1f}"


for score in SCORES:
    low, high = np.quantile(NULL[score], [0.025, 0.975])
    print(f"null ({n_null} random single-head W_qk, width {d_model}): {score} 95% range [{low:+.2f}, {high:+.2f}]")

# %% [markdown]
# ## 1. The gradient, written out
#
# One attention head over token embeddings $x_1, \dots, x_N$ (rows of $X$), with context sets $D_i$:
#
# $$a_{ij} = s\, x_i^\top W_{qk} x_j,\qquad P_{ij} = \operatorname{softmax}_{j \in D_i}(a_{ij}),\qquad
#   y_i = \Big(\sum_j P_{ij}\, x_j W_v\Big) W_o,\qquad \mathcal L = \tfrac{1}{|\mathcal P|}\sum_{i \in \mathcal P} \operatorname{CE}(y_i U^\top, t_i).$$
#
# Write $g_i = \partial\mathcal L/\partial y_i$ and $\delta_i = g_i W_o^\top$. Then
# $\partial\mathcal L/\partial P_{ij} = \delta_i \cdot v_j$ and, through the softmax,
# $\partial\mathcal L/\partial a_{ij} = P_{ij}\big(\delta_i\cdot v_j - \sum_k P_{ik}\, \delta_i\cdot v_k\big)$. Since
# $\partial a_{ij}/\partial W_{qk} = s\, x_i x_j^\top$,
#
# $$\frac{\partial \mathcal L}{\partial W_{qk}} = \sum_i \sum_{j \in D_i} \beta_{ij}\, x_i x_j^\top,\qquad
#   \beta_{ij} = s\,\frac{\partial\mathcal L}{\partial a_{ij}} .$$
#
# Each term adds the query embedding $x_i$ to the column space of the update and the context embedding $x_j$
# to its row space. `attnstruct.gradient.analytic_gradient` computes exactly this. Here is the check against
# autograd on random float64 inputs (the tests repeat it for several heads and context sets):

# %% tags=["nbval-check-output"]
gen = torch.Generator().manual_seed(seed)
r = lambda *s: torch.randn(*s, generator=gen, dtype=torch.float64)  # noqa: E731
x, w, w_v, w_o, unembed = r(4, 9, 8), r(2, 8, 8) * 0.5, r(2, 8, 5), r(2, 5, 8), r(13, 8)
targets = torch.randint(0, 13, (4, 9), generator=gen)
predict = torch.ones(4, 9, dtype=torch.bool)
for objective in OBJECTIVES:
    mask = G.context_mask(9, objective)
    w_auto = w.clone().requires_grad_(True)
    G.loss(G.forward(x, w_auto, w_v, w_o, unembed, mask, 8**-0.5)[2], targets, predict).backward()
    analytic, beta = G.analytic_gradient(x, w, w_v, w_o, unembed, targets, predict, mask, 8**-0.5)
    error = float((analytic - w_auto.grad).abs().max() / w_auto.grad.abs().max())
    print(f"{objective:<14} analytic gradient equals autograd's (max relative difference < 1e-12): {error < 1e-12}")

# %% [markdown]
# ## 2. Who is query and who is context
#
# Swapping the order of the double sum groups the terms by context token: $\sum_i\sum_{j\in D_i} = \sum_j
# \sum_{i \in P_j}$, with $P_j = \{i : j \in D_i\}$ the queries that token $j$ helps. A token adds its
# embedding to the **row** space of the update once for every term in which it is the context, and to the
# **column** space once for every term in which it is the query. The objective sets how often each happens.
#
# Counting per position misleads here. Under masked LM a masked position is a single query, yet it enters $N$
# terms, one per context token; counted that way, every position looks like context far more often than it is
# a query. What matters for symmetry is the **pair**: the update uses both directions of a pair alike when
# $P(i \text{ query}, j \text{ context}) = P(j \text{ query}, i \text{ context})$, that is, when the matrix of pair
# probabilities (query position $\times$ context position) is symmetric. Masked LM has this: every position is
# masked with the same probability and $D_i$ is every position, so $P(i \text{ query}, j \text{ context}) = P(i
# \text{ masked})$ is the same for every pair. Next-token prediction fills only $j \le i$: its matrix is
# lower-triangular and each pair $i \ne j$ enters in one direction only. Position $j$ (counting from $0$) is
# context for the queries $i = j, \dots, N - 2$; the last position predicts nothing.
#
# One term of each sum is a self-pair, $j = i$: its matrix $x_i x_i^\top$ is symmetric whatever the
# objective. Both objectives include it ($i \in D_i$), and section 3a measures what the self-pairs add to the
# symmetry of the summed update.
#
# The pair probabilities, estimated from sampled masked-LM and next-token batches of the copy task
# (`attnstruct.gradient.pair_frequencies`), and how far each matrix is from its transpose. The estimate is
# made twice, from the first hundredth of the sample and from all of it: an asymmetry that shrinks as more
# sequences are sampled is sampling noise, one that stays is structure.

# %% tags=["nbval-check-output"]
n_role_sequences = 20000  # sampled sequences for the pair probabilities (masks and targets only, no model)
role_gen = torch.Generator().manual_seed(seed + 300)
role_tokens = copy_task.repeated_sequences(n_role_sequences, seq_len, vocab, zipf, role_gen)
roles, pair_probability = {}, {}
print(f"P(i query, j context) from sampled sequences of length {seq_len}:")
for objective in OBJECTIVES:
    _, _, predict_o, mask_o = copy_task.batch_for(objective, role_tokens, vocab, mask_rate, role_gen)
    as_query, as_context = G.role_counts(predict_o, mask_o)
    roles[objective] = (as_query / n_role_sequences, as_context / n_role_sequences)
    pair_probability[objective] = G.pair_frequencies(predict_o, mask_o).numpy()
    asymmetry = []
    for n_used in (n_role_sequences // 100, n_role_sequences):
        p = G.pair_frequencies(predict_o[:n_used], mask_o).numpy()
        asymmetry.append(f"{np.abs(p - p.T).max():.3f} from {n_used} sequences")
    print(
        f"{objective:<14} largest entry {pair_probability[objective].max():.3f};  max |P - P^T|: "
        + ", ".join(asymmetry)
    )

# %% [markdown]
# Top: per position, the number of terms $x_i x_j^\top$ per sequence in which it is the query (row sums of the
# pair matrix) and the context (column sums). Bottom: the pair matrices themselves.

# %%
fig, axes = plt.subplots(2, 2, figsize=(11, 8.5), layout="constrained")
positions = np.arange(seq_len)
for column, objective in enumerate(OBJECTIVES):
    p = pair_probability[objective]
    ax = axes[0, column]
    ax.bar(positions - 0.2, p.sum(1), width=0.4, color=plotting.NEUTRAL_COLOR, label="as query")
    ax.bar(positions + 0.2, p.sum(0), width=0.4, color=OBJECTIVES[objective], label="as context")
    ax.set_title(f"{objective}: terms per position")
    ax.set_xlabel("position")
    ax.set_ylabel("terms per sequence")
    ax.set_ylim(0, 1.2 * max(p.sum(1).max(), p.sum(0).max()))
    ax.legend(loc="upper center", ncol=2)
    image = axes[1, column].imshow(p, cmap="Greys", vmin=0, vmax=1, interpolation="nearest")
    axes[1, column].set_title(f"{objective}: P(i query, j context)")
    axes[1, column].set_xlabel("context position j")
    axes[1, column].set_ylabel("query position i")
    axes[1, column].set_yticks(positions[::2])
for ax in axes.flat:
    ax.set_xticks(positions[::2])
fig.colorbar(image, ax=axes[1], shrink=0.8, label="probability")
plotting.savefig(fig, figures_dir / "04_role_counts")
plt.show()

# %% [markdown]
# Under masked LM the two bars agree at every position up to sampling noise, as the margins of a symmetric
# matrix must, and the pair matrix is flat. Under next-token prediction the bars mirror each other (early
# positions are context in many terms and query in few, late positions the other way round), and the matrix
# is a triangle.

# %% [markdown]
# ## 3. Two toy tasks
#
# **Copy task.** Each sequence is $N/2$ Zipf-distributed tokens followed by the same tokens again. A masked
# token can be read off its copy, $N/2$ positions away in either direction. A next token in the second half
# can be read off the first half, $N/2 - 1$ positions back (the first half itself is unpredictable).
# Its masked-LM optimum is symmetric by construction: the relation a masked position must find, "is my
# copy", is itself symmetric ($i$ looks at $i + N/2$ exactly when $i + N/2$ looks at $i$, and both hold the
# same token), so a symmetric $W_{qk}$ serves it, while next-token prediction needs the directed relation
# "one position after my copy", looked up backwards only. The task favours the prediction by design.
#
# **Markov task.** Each sequence is a first-order Markov chain over the same vocabulary: a Zipf-distributed
# first token, then each token drawn from the row of one fixed random transition matrix (rows drawn from a
# Dirichlet distribution with a fixed seed, the same matrix for every run; constants printed below). A next
# token depends only on the current one, so next-token prediction can be served by the query's own position
# (a self-pair); a masked token is read off its two neighbours, through a transition matrix that is not
# symmetric.
#
# Model: one layer with token and position embeddings (plus a mask token), one head, values, output, tied
# unembedding. Everything is trained. Both tasks use the same settings, and in a run of one seed both
# objectives see the same token sequences at every step.

# %%
transitions = copy_task.markov_transitions(vocab)
print(
    f"Markov task: rows Dirichlet(concentration {copy_task.MARKOV_CONCENTRATION}), seed {copy_task.MARKOV_SEED}; "
    f"the most likely successor has probability {float(transitions.max(1).values.median()):.2f} (median over tokens); "
    f"symmetry of the transition matrix {float(symmetry_score(transitions)):+.2f}"
)
for task in TASKS:
    print(f"{task:<7} example sequence:", copy_task.sequences(task, 1, seq_len, vocab, zipf, gen)[0].tolist())

# %% [markdown]
# ### 3a. The accumulated update at initialisation, with and without the self-pairs
#
# Before any training, we sum the update directions $-\partial\mathcal L/\partial W_{qk}$ over
# `n_sequences` sequences and score the sum: once with every pair, and once without the self-pairs $j = i$
# (`attnstruct.gradient.outer_product_sum` with `include_self=False`). Solid lines: all pairs; dashed: without
# the self-pairs.

# %%
checkpoints = sorted({c for c in (1, 4, 16, 64, 256) if c < n_sequences} | {n_sequences})
accumulated = {}
for task in TASKS:
    for objective in OBJECTIVES:
        model = copy_task.OneLayer(vocab, seq_len, d_model, factorised=False, gen=torch.Generator().manual_seed(seed))
        data = copy_task.sequences(task, n_sequences, seq_len, vocab, zipf, torch.Generator().manual_seed(seed + 100))
        accumulated[task, objective] = copy_task.accumulated_updates(
            model, data, objective, checkpoints, mask_rate=mask_rate, gen=torch.Generator().manual_seed(seed + 200)
        )
fig, axes = plt.subplots(2, 3, figsize=(15, 8.5), layout="constrained")
for row, task in zip(axes, TASKS, strict=True):
    for objective, color in OBJECTIVES.items():
        acc = accumulated[task, objective]
        row[0].plot(checkpoints, acc["symmetry"], marker="o", color=color, label=f"{objective}, all pairs")
        row[0].plot(
            checkpoints, acc["symmetry_without_self"], "--", marker="o", color=color, label=f"{objective}, j ≠ i"
        )
    row[0].axhspan(*np.quantile(NULL["symmetry"], [0.025, 0.975]), color=plotting.NEUTRAL_COLOR, alpha=0.2)
    row[0].set_xscale("log", base=2)
    row[0].set_xticks(checkpoints, [str(c) for c in checkpoints])
    row[0].set_xlabel("sequences summed")
    row[0].set_ylabel("symmetry of the summed update")
    row[0].set_title(f"{task} task")
    for ax, objective in zip(row[1:], OBJECTIVES, strict=True):
        plotting.matrix_heatmap(ax, accumulated[task, objective]["beta"], title=f"{task}, {objective}: summed beta")
        ax.set_xticks(np.arange(0, seq_len, 2))
        ax.set_yticks(np.arange(0, seq_len, 2))
        ax.set_xlabel("context position j")
        ax.set_ylabel("query position i")
axes[0, 0].legend(fontsize="small")
plotting.savefig(fig, figures_dir / "04_accumulated_updates")
plt.show()
for task in TASKS:
    for objective in OBJECTIVES:
        acc = accumulated[task, objective]
        for suffix, pairs in (("", "all pairs"), ("_without_self", "j ≠ i    ")):
            scored = [
                f"{s} {acc[s + suffix][-1]:+.3f} ({null_text(against_null(acc[s + suffix][-1], s))})" for s in SCORES
            ]
            print(f"{task:<7} {objective:<14} {pairs}, {n_sequences} sequences:", ";  ".join(scored))

# %% [markdown]
# The grey band is the central $95\%$ range of the null for symmetry. The heatmaps show where the
# coefficients sit: masked LM spreads them over all pairs, next-token prediction fills only the lower
# triangle ($j \le i$), so every pair but the self-pairs enters in one direction. What the self-pairs
# contribute, and where the scores sit in the null:

# %%
lines = []
for task in TASKS:
    for objective in OBJECTIVES:
        acc = accumulated[task, objective]
        with_self, without = acc["symmetry"][-1], acc["symmetry_without_self"][-1]
        reading = copy_task.null_reading([against_null(without, "symmetry")])
        lines.append(
            f"- {task} task, {objective}: the summed update's symmetry is {prose.signed(with_self)} with the "
            f"self-pairs and {prose.signed(without)} without them (without them: {reading}); its directionality "
            f"{prose.signed(acc['directionality'][-1])} is "
            f"{copy_task.null_reading([against_null(acc['directionality'][-1], 'directionality')])}."
        )
prose.show(
    "The self-pairs $x_i x_i^\\top$ are symmetric matrices, so they add symmetry to every summed update, "
    "whatever the objective:\n\n" + "\n".join(lines)
)

# %% [markdown]
# ### 3b. Training, with $W_{qk}$ as the parameter and factorised as $W_q W_k^\top$
#
# The theory treats $W_{qk}$ as the parameter and plain gradient steps. Real models train $W_q$ and $W_k$
# separately, so an update of $W_{qk}$ is $\Delta W_q W_k^\top + W_q \Delta W_k^\top + \dots$, and Adam
# rescales each coordinate. We train both ways, with Adam, on both tasks, and score $W_{qk}$ along the way.
#
# In the figure, each line is the median over the `n_seeds` seeds and its shaded band the range over seeds;
# solid lines train $W_{qk}$ as the parameter, dashed lines the factorised $W_q W_k^\top$. Directionality gets
# one panel per parameterisation, because a single run of it can jump across its whole scale. On the copy
# task, one plain-SGD run per objective ($W_{qk}$ as the parameter) is added to the symmetry panel (dotted).
# The grey bands are the central $95\%$ ranges of the null. At small widths the directionality null is wide
# (its range is printed at the top of the notebook), and a directionality line inside it carries no finding.

# %%
runs, sgd_runs = {}, {}
for task in TASKS:
    for objective in OBJECTIVES:
        for factorised in (False, True):
            for k in range(n_seeds):
                config = copy_task.CopyTaskConfig.from_params(
                    parameters, objective=objective, factorised=factorised, seed=seed + k, optimizer="adam"
                )
                runs[task, objective, factorised, seed + k] = copy_task.train(config, task)
for objective in OBJECTIVES:
    sgd = copy_task.CopyTaskConfig.from_params(
        parameters, objective=objective, factorised=False, lr=sgd_lr, optimizer="sgd"
    )
    sgd_runs["copy", objective] = copy_task.train(sgd, "copy")
training = copy_task.runs_dataset(runs)
STYLES = {"W_qk": "-", "W_q W_k^T": "--"}
null_band = {score: np.quantile(NULL[score], [0.025, 0.975]) for score in SCORES}


def median_and_range(ax, values, color, style="-", label=None):
    """Median over seeds (line) and range over seeds (band) of ``values`` ``[seed, step]``."""
    steps_ = values.step.values
    ax.plot(steps_, values.median("seed"), style, color=color, label=label)
    ax.fill_between(steps_, values.min("seed"), values.max("seed"), color=color, alpha=0.15, lw=0)


fig, axes = plt.subplots(2, 4, figsize=(20, 8.5), sharex=True, layout="constrained")
for row, task in zip(axes, TASKS, strict=True):
    for objective, color in OBJECTIVES.items():
        for parameterisation, style in STYLES.items():
            pick = training.sel(task=task, objective=objective, parameterisation=parameterisation)
            label = f"{objective}, {parameterisation}" if task == TASKS[0] else None
            median_and_range(row[0], pick.loss, color, style, label)
            median_and_range(row[1], pick.symmetry, color, style)
            median_and_range(row[2 + list(STYLES).index(parameterisation)], pick.directionality, color, style)
    row[0].set_ylabel("loss (cross-entropy, nats)")
    row[0].set_title(f"{task} task: loss")
    row[1].set_title(f"{task} task: symmetry")
    row[1].set_ylabel("symmetry of W_qk")
    for ax, parameterisation in zip(row[2:], STYLES, strict=True):
        ax.set_title(f"{task} task: directionality, {parameterisation}")
        ax.set_ylabel("directionality of W_qk")
        ax.set_ylim(-1.08, 1.08)
    for ax, score in zip(row[1:], ("symmetry", "directionality", "directionality"), strict=True):
        ax.axhspan(*null_band[score], color=plotting.NEUTRAL_COLOR, alpha=0.2, lw=0)
        ax.axhline(0, color="black", lw=0.8)
for (task, objective), rec in sgd_runs.items():
    axes[TASKS.index(task), 1].plot(
        rec["step"], rec["symmetry"], ":", color=OBJECTIVES[objective], lw=2, label=f"{objective}, W_qk, SGD"
    )
for ax in axes[1]:
    ax.set_xlabel("step")
handles, labels = axes[0, 0].get_legend_handles_labels()
sgd_handles, sgd_labels = axes[0, 1].get_legend_handles_labels()
null_patch = plt.matplotlib.patches.Patch(color=plotting.NEUTRAL_COLOR, alpha=0.2, label="null, central 95%")
fig.legend(
    [*handles, *sgd_handles, null_patch],
    [*labels, *sgd_labels, null_patch.get_label()],
    loc="outside right center",
    title=f"median over {prose.count(n_seeds, 'seed')}\n(band: range over seeds)",
)
plotting.savefig(fig, figures_dir / "04_training")
plt.show()

# %% [markdown]
# Each run's final scores, and where each sits in the null of a random single-head $W_{qk}$ of the same width:

# %%
final = training.isel(step=-1)
for (task, objective, factorised, s), rec in runs.items():
    scored = [f"{v} {rec[v][-1]:+.3f} ({null_text(against_null(rec[v][-1], v))})" for v in SCORES]
    name = f"{task:<7} {objective:<14} {copy_task.PARAMETERISATIONS[factorised]:<10} seed {s}:"
    print(name, ";  ".join(scored), f";  loss {rec['loss'][-1]:.2f}")
for (task, objective), rec in sgd_runs.items():
    print(
        f"{task:<7} {objective:<14} W_qk, SGD  seed {seed}: symmetry {rec['symmetry'][-1]:+.3f}; "
        f"directionality {rec['directionality'][-1]:+.3f};  loss {rec['loss'][-1]:.2f}"
    )
lines = []
for task in TASKS:
    for objective in OBJECTIVES:
        for parameterisation in final.parameterisation.values:
            where = dict(task=task, objective=objective, parameterisation=parameterisation)
            readings = []
            for score in SCORES:
                values = final[score].sel(where).values
                reading = copy_task.null_reading([against_null(v, score) for v in values])
                readings.append(f"{score} {prose.listing(values)}, {reading}")
            lines.append(f"- {task} task, {objective}, {parameterisation}: " + "; ".join(readings) + ".")
direction_range = np.quantile(NULL["directionality"], [0.025, 0.975])
prose.show(
    f"Final scores of $W_{{qk}}$ against the null (at width {d_model}, the null's 95% range for directionality is "
    f"{prose.span(direction_range)}):\n\n" + "\n".join(lines)
)

# %% [markdown]
# A score inside the null's range is what a random matrix of this width gives, and is not read as a finding
# here, whichever side of zero it falls on.
#
# **Which objective ends the more symmetric.** The argument of section 3 of the paper predicts masked LM above
# next-token prediction. Per task and parameterisation, the paired effect over seeds (bidirectional minus
# causal final symmetry, paired by seed, against the difference of two random matrices), and the same for
# directionality, where the paper's reading predicts the causal objective the more column-dominant
# (negative):

# %%
null_difference = {
    score: evidence.null_difference(
        NULL[score],
        evidence.null_median_over_layers(score, d_model, n_heads=1, n_layers=1, n_draws=n_null, seed=seed + 1),
        seed=seed,
    )
    for score in SCORES
}
effects = []
for task in TASKS:
    for parameterisation in final.parameterisation.values:
        pick = final.sel(task=task, parameterisation=parameterisation)
        effects.append(
            evidence.paired_effect(
                pick.symmetry.sel(objective="bidirectional").values,
                pick.symmetry.sel(objective="causal").values,
                claim=f"{task} task, {parameterisation}: final symmetry, bidirectional minus causal",
                null_samples=null_difference["symmetry"],
                seed=seed,
            )
        )
        effects.append(
            evidence.paired_effect(
                pick.directionality.sel(objective="causal").values,
                pick.directionality.sel(objective="bidirectional").values,
                claim=f"{task} task, {parameterisation}: final directionality, causal minus bidirectional",
                predicted_sign=-1,
                null_samples=null_difference["directionality"],
                seed=seed,
            )
        )
prose.show("\n".join(f"- {e.sentence()}" for e in effects))
prose.show(copy_task.ordering_sentence(final.symmetry) + " " + copy_task.ordering_sentence(final.symmetry, "W_q W_k^T"))

# %% [markdown]
# Each verdict is the one `attnstruct.evidence.paired_effect` returns, with its reason. For comparison, in the
# authors' own training runs the 4-layer decoders ended with negative symmetry, and directionality did not
# separate encoders from decoders cleanly (the paper's section 4, training from scratch; authors' result files,
# `docs/paper-notes.md`).
#
# ## 4. The assumption behind "bidirectional means symmetric"
#
# Pairing the terms $(i, j)$ and $(j, i)$ gives
# $\sum_i \beta_{ii} K_{ii} + \sum_{i<j} \big[\tfrac{\beta_{ij} + \beta_{ji}}{2}(K_{ij} + K_{ij}^\top) + \tfrac{\beta_{ij} - \beta_{ji}}{2}(K_{ij} - K_{ij}^\top)\big]$,
# with $K_{ij} = x_i x_j^\top$. Beyond the symmetric self-pair terms $K_{ii}$, the update is symmetric only to
# the extent that $\beta_{ij} \approx \beta_{ji}$ on aggregate. As a proxy for that, we measure the symmetry
# score of $\sum \beta$ over a batch (positions $\times$ positions) along training; $\beta_{ij} = \beta_{ji}$
# would score $+1$. For the causal objective $\sum\beta$ is lower-triangular, so its score comes from its
# diagonal, the self-pairs, alone: a high causal value says that the coefficients sit on the query's own
# position, not that $\beta_{ij} \approx \beta_{ji}$ for $i \ne j$. If the argument explains the difference
# between the objectives, the proxy's gap between them should match the gap in the symmetry of $W_{qk}$
# (`attnstruct.copy_task.proxy_reading` states the rule). In the figure ($W_{qk}$ as the parameter), each line is
# the median over seeds and its band the range over seeds.

# %%
fig, axes = plt.subplots(1, 2, figsize=(13, 4), sharey=True, layout="constrained")
for ax, task in zip(axes, TASKS, strict=True):
    for objective, color in OBJECTIVES.items():
        pick = training.beta_symmetry.sel(task=task, objective=objective, parameterisation="W_qk")
        median_and_range(ax, pick, color, label=objective)
    ax.axhline(0, color="black", lw=0.8)
    ax.set_title(f"{task} task")
    ax.set_xlabel("step")
axes[0].set_ylabel("symmetry of summed beta")
axes[0].legend()
plotting.savefig(fig, figures_dir / "04_beta_symmetry")
plt.show()

beta_median = training.beta_symmetry.sel(parameterisation="W_qk").median("step")  # per task, objective, seed
lines = []
for task in TASKS:
    over_training = {
        o: training.beta_symmetry.sel(task=task, objective=o, parameterisation="W_qk").values.ravel()
        for o in OBJECTIVES
    }
    b, c = (np.median(over_training[o]) for o in OBJECTIVES)
    per_seed = {o: beta_median.sel(task=task, objective=o).values for o in OBJECTIVES}
    beta_gap = float(np.mean(per_seed["bidirectional"] - per_seed["causal"]))
    wqk = final.symmetry.sel(task=task, parameterisation="W_qk")
    wqk_gap = float((wqk.sel(objective="bidirectional") - wqk.sel(objective="causal")).mean("seed"))
    text = (
        f"- {task} task: the proxy's median over training is {prose.signed(b)} (range "
        f"{prose.span(over_training['bidirectional'])}) under masked LM and {prose.signed(c)} (range "
        f"{prose.span(over_training['causal'])}) under next-token prediction. Per seed, masked LM minus next-token "
        f"prediction: {prose.signed(beta_gap)} for the proxy against {prose.signed(wqk_gap)} for the final symmetry of "
        f"$W_{{qk}}$; {copy_task.proxy_reading(beta_gap, wqk_gap)}."
    )
    effect = evidence.paired_effect(
        per_seed["bidirectional"],
        per_seed["causal"],
        claim=f"{task} task, median symmetry of summed beta, bidirectional minus causal",
        seed=seed,
    )
    lines.append(f"{text} {effect.sentence()}.")
prose.show("The proxy $\\beta_{ij} = \\beta_{ji}$ (symmetry of the summed $\\beta$), per task:\n\n" + "\n".join(lines))

# %% [markdown]
# ## 5. Save

# %%
names = list(OBJECTIVES)
accumulated_vars = {
    f"accumulated_{v}": (("task", "objective", "n_sequences"), [[accumulated[t, o][v] for o in names] for t in TASKS])
    for v in ("symmetry", "directionality", "symmetry_without_self", "directionality_without_self")
}
dataset = training.assign(
    accumulated_vars
    | {
        "sgd_symmetry": (("objective", "step"), [sgd_runs["copy", o]["symmetry"] for o in names]),
        "sgd_directionality": (("objective", "step"), [sgd_runs["copy", o]["directionality"] for o in names]),
        "role_query": (("objective", "position"), [roles[o][0].numpy() for o in names]),
        "role_context": (("objective", "position"), [roles[o][1].numpy() for o in names]),
        "pair_probability": (("objective", "position", "context_position"), [pair_probability[o] for o in names]),
        "null_symmetry": (("null_draw",), NULL["symmetry"]),
        "null_directionality": (("null_draw",), NULL["directionality"]),
    }
).assign_coords(
    n_sequences=checkpoints,
    position=np.arange(seq_len),
    context_position=np.arange(seq_len),
    null_draw=np.arange(n_null),
)
dataset.attrs = results.provenance_attrs(
    parameters=parameters,
    scored_matrix="W_qk of a one-layer, one-head attention model on the copy and Markov tasks (d_model x d_model); "
    "accumulated_*: the summed update -dL/dW_qk at initialisation (_without_self: the pairs j = i left out); "
    "sgd_*: plain-SGD runs on the copy task; role_*: times per sequence a position is predicted (query) and "
    "context; pair_probability: P(position query, context_position context) from sampled batches; "
    "null_*: random single-head W_q^T W_k of width d_model",
    title="04 gradient structure: toy updates and training, bidirectional versus causal, copy and Markov tasks",
    markov_seed=copy_task.MARKOV_SEED,
    markov_concentration=copy_task.MARKOV_CONCENTRATION,
)
results.save_dataset(dataset, results_dir / "04_gradient_structure.nc")
dataset

# %% [markdown]
# ## Exercises
#
# Each exercise has a cell for your answer and a check cell that tests it; every check runs in seconds with
# fixed settings of its own, whatever the notebook's parameters.

# %% [markdown]
# ### Exercise 04.1: the gradient through the softmax, one row
#
# One query's scores $a = (a_1, \dots, a_n)$ become the attention weights $P = \operatorname{softmax}(a)$. Given
# the upstream gradient $g_j = \partial\mathcal L/\partial P_j$, derive $\partial\mathcal L/\partial a_k$ and
# write `ex_score_gradient(a, g)`, which returns it as a tensor of shape `[n]` (`a` and `g`: float64 tensors of
# shape `[n]`). Hint: $\partial P_j/\partial a_k = P_j(\delta_{jk} - P_k)$. The check compares your function
# with torch autograd on random rows, through a loss that goes via values and an unembedding as in section 1.
# Under a causal mask a query's row holds only its context scores $a_{ij}$, $j \le i$: the same function
# applies to that shorter row.


# %% nbgrader={"grade": false, "grade_id": "ex-04-1", "locked": false, "schema_version": 3, "solution": true}
def ex_score_gradient(a, g):
    """dL/da for one row of scores ``a`` [n], from the upstream gradient ``g = dL/dP`` [n]."""
    ### BEGIN SOLUTION
    p = torch.softmax(a, dim=-1)
    return p * (g - (p * g).sum())
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex-04-1-check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_gen = torch.Generator().manual_seed(0)
for n in (1, 2, 5, 9):
    a = torch.randn(n, generator=check_gen, dtype=torch.float64).requires_grad_(True)
    values, unembedding = (torch.randn(*shape, generator=check_gen, dtype=torch.float64) for shape in ((n, 4), (7, 4)))
    weights = torch.softmax(a, dim=-1)
    weights.retain_grad()
    row_loss = torch.nn.functional.cross_entropy((weights @ values @ unembedding.T)[None], torch.tensor([n % 7]))
    row_loss.backward()
    mine = torch.as_tensor(ex_score_gradient(a.detach(), weights.grad.detach()), dtype=torch.float64)
    assert mine.shape == a.shape, f"ex_score_gradient should return shape {tuple(a.shape)}, got {tuple(mine.shape)}"
    assert torch.allclose(mine, a.grad, rtol=1e-9, atol=1e-12), (
        f"row of length {n}: ex_score_gradient differs from autograd's dL/da; did you subtract the weighted mean "
        "sum_k P_k g_k before multiplying by P?"
    )
print("ex_score_gradient equals autograd's dL/da on rows of length 1, 2, 5 and 9")

# %% [markdown]
# ### Exercise 04.2: which positions are context under a causal mask
#
# Next-token prediction on one sequence of length $n$, as `attnstruct.copy_task.batch_for` sets it up: the
# query at position $i$ predicts token $i + 1$ from the positions $j \le i$, and the last position predicts
# nothing. Write `ex_causal_pairs(n)`, the set of all (query $i$, context $j$) pairs as tuples `(i, j)`, and
# `ex_times_as_context(n)`, a list whose entry $j$ is the number of those pairs in which position $j$ is the
# context, from a formula you derive (do not count the set). The check compares both with the package's
# batches and role counts (`attnstruct.gradient.role_counts`) for several $n$.


# %% nbgrader={"grade": false, "grade_id": "ex-04-2", "locked": false, "schema_version": 3, "solution": true}
def ex_causal_pairs(n):
    """The (query, context) pairs of next-token prediction on a sequence of length ``n``."""
    ### BEGIN SOLUTION
    return {(i, j) for i in range(n - 1) for j in range(i + 1)}
    ### END SOLUTION


def ex_times_as_context(n):
    """Entry ``j``: in how many of those pairs position ``j`` is the context."""
    ### BEGIN SOLUTION
    return [n - 1 - j for j in range(n)]
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex-04-2-check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
for n in (2, 3, 8, 16):
    _, _, predict_check, mask_check = copy_task.batch_for(
        "causal", torch.zeros(1, n, dtype=torch.int64), 1, 0.5, torch.Generator().manual_seed(0)
    )
    expected_pairs = {(i, j) for i in range(n) for j in range(n) if predict_check[0, i] and mask_check[i, j]}
    mine = {tuple(int(k) for k in pair) for pair in ex_causal_pairs(n)}
    assert mine == expected_pairs, (
        f"n = {n}: {len(expected_pairs - mine)} (query, context) pairs missing and {len(mine - expected_pairs)} "
        "pairs that are not (query, context) pairs; remember j <= i and that the last position predicts nothing"
    )
    _, as_context_check = G.role_counts(predict_check, mask_check)
    assert [int(c) for c in ex_times_as_context(n)] == as_context_check.int().tolist(), (
        f"n = {n}: ex_times_as_context disagrees with attnstruct.gradient.role_counts"
    )
print("ex_causal_pairs and ex_times_as_context agree with the package's batches for n = 2, 3, 8 and 16")

# %% [markdown]
# ### Exercise 04.3: symmetric coefficients give a symmetric update
#
# Write `ex_update(x, beta)`, which returns $M = \sum_{i,j} \beta_{ij}\, x_i x_j^\top$ for embeddings `x` of shape
# `[N, d]` (rows $x_i$) and coefficients `beta` of shape `[N, N]` (NumPy arrays; hint: a product of three
# matrices), and `ex_symmetric_part(beta)`, which returns $\tfrac12(\beta + \beta^\top)$. The check then tests
# on random inputs that (a) a symmetric $\beta$ gives a symmetric update (symmetry score $+1$), (b) the
# self-pairs alone, a diagonal $\beta$, give a symmetric update whatever their values, and (c) the symmetric
# part $\tfrac12(M + M^\top)$ of any update is the update of $\tfrac12(\beta + \beta^\top)$: only the
# antisymmetric part of $\beta$ makes an update asymmetric (section 4). Before you run it, convince yourself
# of (c) on paper: what is the transpose of $x_i x_j^\top$?


# %% nbgrader={"grade": false, "grade_id": "ex-04-3", "locked": false, "schema_version": 3, "solution": true}
def ex_update(x, beta):
    """sum_ij beta_ij x_i x_j^T, [d, d], from x [N, d] and beta [N, N]."""
    ### BEGIN SOLUTION
    return x.T @ beta @ x
    ### END SOLUTION


def ex_symmetric_part(beta):
    """(beta + beta^T) / 2."""
    ### BEGIN SOLUTION
    return (beta + beta.T) / 2
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex-04-3-check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
check_rng = np.random.default_rng(0)
x_check, beta_check = check_rng.normal(size=(6, 8)), check_rng.normal(size=(6, 6))
reference = G.outer_product_sum(torch.tensor(beta_check)[None, None], torch.tensor(x_check)[None])[0].numpy()
m_check = np.asarray(ex_update(x_check, beta_check))
assert m_check.shape == (8, 8) and np.allclose(m_check, reference), (
    "ex_update differs from attnstruct.gradient.outer_product_sum: is x_i the column factor and x_j the row factor?"
)
half = np.asarray(ex_symmetric_part(beta_check))
assert np.allclose(half, half.T) and np.allclose(beta_check - half, -(beta_check - half).T), (
    "ex_symmetric_part(beta) should be symmetric, and beta minus it antisymmetric"
)
symmetric_update = np.asarray(ex_update(x_check, half))
assert np.allclose(symmetric_update, symmetric_update.T), "(a): a symmetric beta should give a symmetric update"
assert abs(float(symmetry_score(symmetric_update)) - 1) < 1e-12, "(a): its symmetry score should be +1"
self_pairs = np.asarray(ex_update(x_check, np.diag(check_rng.normal(size=6))))
assert np.allclose(self_pairs, self_pairs.T), "(b): a diagonal beta (the self-pairs) should give a symmetric update"
assert np.allclose((m_check + m_check.T) / 2, symmetric_update), (
    "(c): the symmetric part of the update should be the update of the symmetric part of beta"
)
antisymmetric_update = np.asarray(ex_update(x_check, beta_check - half))
assert np.allclose(antisymmetric_update, -antisymmetric_update.T), "(c): the rest of beta gives the antisymmetric rest"
print(
    "symmetry score of the update: "
    + ", ".join(
        f"{name} {float(symmetry_score(m)):+.2f}"
        for name, m in (
            ("random beta", m_check),
            ("its symmetric part", symmetric_update),
            ("its antisymmetric part", antisymmetric_update),
            ("self-pairs only", self_pairs),
        )
    )
)

# %% [markdown]
# ### Exercise 04.4: change the objective, predict the sign, then run it
#
# A tiny copy task (vocabulary $16$, sequences of length $8$, width $16$, batches of $32$, $150$ Adam steps,
# $W_{qk}$ as the parameter, seed $0$) is trained once with masked LM and once with next-token prediction.
# Predict the sign of (final symmetry of $W_{qk}$ under next-token prediction) minus (final symmetry under
# masked LM), before you look at section 3b again: set `ex_predicted_sign` to `+1` or `-1` and write your
# reason in a comment, from section 2 (which pairs the objective uses) and section 3 (what relation the copy
# task asks for under each objective). The check trains both runs, a few seconds, and compares.

# %% nbgrader={"grade": false, "grade_id": "ex-04-4", "locked": false, "schema_version": 3, "solution": true}
### BEGIN SOLUTION
# Masked LM reads a token off its copy, a symmetric relation over pairs used in both directions; next-token
# prediction needs "one after my copy", looked up backwards only, which a symmetric W_qk cannot serve.
ex_predicted_sign = -1
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "ex-04-4-check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
assert ex_predicted_sign in (-1, +1), "set ex_predicted_sign to +1 or -1"
tiny = dict(vocab=16, seq_len=8, d_model=16, steps=150, batch=32, lr=0.01, every=150, seed=0)
tiny_symmetry = {
    o: copy_task.train(copy_task.CopyTaskConfig(objective=o, **tiny), "copy")["symmetry"][-1] for o in OBJECTIVES
}
measured_sign = int(np.sign(tiny_symmetry["causal"] - tiny_symmetry["bidirectional"]))
print(
    f"final symmetry of W_qk: next-token prediction {tiny_symmetry['causal']:+.2f}, masked LM "
    f"{tiny_symmetry['bidirectional']:+.2f}; sign of the difference {measured_sign:+d}"
)
assert ex_predicted_sign == measured_sign, (
    "the run gives the other sign: which relation does each objective need on the copy task, and is it symmetric?"
)

# %% [markdown]
# ## What to take away
#
# - The gradient of a token-prediction loss with respect to $W_{qk}$ is a sum of rank-1 terms
#   $\beta_{ij}\, x_i x_j^\top$, one per (query, context) pair, with $\beta_{ij}$ the softmax-weighted deviation
#   of $\delta_i \cdot v_j$ from its mean over the context.
# - The objective decides which pairs enter and how often in each direction. The lens is the matrix of pair
#   probabilities, not per-position counts: masked LM's is symmetric, next-token prediction's triangular.
# - Symmetric pairs are necessary, not sufficient: only the antisymmetric part of $\beta$ makes an update
#   asymmetric, so the update is symmetric as far as $\beta_{ij} \approx \beta_{ji}$, and the self-pairs add
#   symmetry under any objective.
# - Whether the bidirectional objective then ends with the more symmetric $W_{qk}$ is an empirical question per
#   task, to be read across seeds and against the null of a random matrix of the same width.

# %% [markdown]
# ## Knobs to try
#
# - `n_seeds` up (the paper profile uses more): the bands in the training figures become seed ranges worth
#   reading, and the paired sign-flip tests can reach a verdict (with very few seeds they cannot).
# - `d_model` up: the null bands narrow (symmetry's fast, directionality's slowly), so smaller differences
#   stand out; training takes longer.
# - `mask_rate` up: masked LM predicts more positions per sequence; the pair matrix stays symmetric with larger
#   entries, and its bars grow.
# - `n_sequences` and `steps` up: the summed update at initialisation settles (the curves of section 3a
#   flatten), and longer training shows whether the final scores have stopped moving.
