# ---
# jupyter:
#   jupytext:
#     notebook_metadata_filter: -jupytext.text_representation.jupytext_version
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#   kernelspec:
#     display_name: Python 3 (attnstruct)
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
#
# **How to read this notebook.** The code cells call the package: what is computed lives in
# `attnstruct.analyses.nb04_gradient_structure` (the nulls, the pair probabilities, the accumulated updates and the
# training runs, each an `xarray` dataset), with what is read from them (the learning criterion, the effects between
# the objectives and the facts every sentence below states; the sentences are templates in this notebook). The
# numbers in those sentences come from the runs of this execution: with other parameters, other numbers.

# %% [markdown]
# **Learning goals.** After this notebook you can:
#
# - derive $\partial\mathcal L/\partial W_{qk}$ as a sum of outer products $\beta_{ij}\, x_i x_j^\top$, the softmax
#   step included, and check the derivation against autograd;
# - read an objective's pair probabilities $P(i \text{ query}, j \text{ context})$ and tell whether it uses both
#   directions of a pair alike (masked LM) or one only (next-token prediction), where per-position counts mislead;
# - explain why symmetric pairs are not enough: the update is symmetric only as far as $\beta_{ij} \approx
#   \beta_{ji}$, while the self-pairs $x_i x_i^\top$ are symmetric whatever $\beta$;
# - check that a toy model learned its task (its loss against that of a predictor that ignores the context)
#   before reading anything into its scores;
# - read a toy experiment's scores against a null and across seeds before calling a difference between objectives.

# %% tags=["parameters"]
seed = 0  # first seed; the training runs use seed, seed + 1, ...
n_seeds = 5  # training runs per task, objective and parameterisation (5: the fewest a sign-flip test decides)
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
workers = 2  # training runs side by side (processes of one thread each)
results_dir = None  # where the dataset goes; None: results/ of the work folder (attnstruct.work)
figures_dir = None  # where the figures go; None: figures/ of the work folder

# %%
import matplotlib.pyplot as plt
import numpy as np
import torch

from attnstruct import gradient, notebooks, results, stats, work
from attnstruct.analyses import nb04_gradient_structure as toys
from attnstruct.analyses import plans
from attnstruct.report import plotting, prose
from attnstruct.scores import symmetry_score
from attnstruct.tasks import toy_tasks
from attnstruct.teaching.exercise_runs import copy_exercise_sign, copy_exercise_symmetry

plotting.set_style()
torch.set_num_threads(1)
results_dir, figures_dir = work.output_dirs(results_dir, figures_dir)
parameters = notebooks.notebook_parameters("04_gradient_structure", globals())  # recorded with the dataset
if n_seeds < 1 or steps < every or seq_len % 2 or n_sequences < 1 or n_null < 2:
    raise ValueError("need n_seeds >= 1, steps >= every, an even seq_len, n_sequences >= 1 and n_null >= 2")
OBJECTIVES = {"bidirectional": plotting.ENCODER_COLOR, "causal": plotting.DECODER_COLOR}

# %% [markdown]
# **The analysis plan, declared before any run.** Section 3 compares the two objectives on two tasks, with $W_{qk}$
# trained as one matrix or as the product of two, in both scores, and section 4 compares a proxy of the argument;
# that is many claims, and testing each at the level alpha would let some read *holds* by luck. They are declared
# here as one family. The **primary** claim is the argument's own prediction on the task built for it: on the copy
# task, with $W_{qk}$ trained as one matrix, masked LM ends more symmetric than next-token prediction. Every other
# claim is **secondary**, reported uncorrected and labelled so. The table gives each claim's unit, statistic, test
# and null, and the smallest p the paired test can reach with `n_seeds` seeds, before and after Holm's correction.

# %%
reach = plans.seed_reach(toys.PLAN, n_seeds)
plan_reach = stats.plan_reach(toys.PLAN, reach)
prose.say(
    "{primary}, corrected by Holm's method, and {secondary}, reported uncorrected. After the correction the smallest p "
    "a primary claim can reach is {smallest}, below alpha = {alpha}: a verdict can be reached. With all {claims} "
    "claims primary it would be {every}."
    if plan_reach.reachable
    else "{primary}, corrected by Holm's method, and {secondary}, reported uncorrected. After the correction the "
    "smallest p a primary claim can reach is {smallest}, not below alpha = {alpha}: whatever the runs show, the "
    "primary claims read *{verdict}*. With all {claims} claims primary it would be {every}.",
    plan_reach,
)
prose.show(prose.markdown_table(toys.PLAN.table(reach)))

# %% [markdown]
# **The null: what a matrix without structure scores.** Both scores of this project, symmetry and
# directionality, take a value for any matrix, structured or not. A random $W_{qk}$ does not score zero: its
# symmetric and skew-symmetric parts carry about the same energy, but a product $W_q^\top W_k$ of two random
# factors leans slightly towards symmetry, and directionality at a small width swings over its whole scale from
# one draw to the next. So a score means something only against what matrices without structure score.
#
# The null of this notebook is `n_null` draws of a random single-head $W_{qk} = W_q^\top W_k$ of width
# `d_model`, Gaussian factors (`attnstruct.stats.null_median_over_layers` with one head and one layer), the
# shape of the toy model's $W_{qk}$. We use it in two ways. One value, one run's final score say, is placed in
# it: its percentile, and whether it lies inside the central 95% of the null's draws or above or below it. That
# is a description: one value beyond the range can be luck, and we call nothing a finding on that alone. A
# difference between two objectives, averaged over seeds, is read against the null of that same average (see
# section 3b). The null's central range at this notebook's width:

# %%
nulls = toys.single_head_nulls(d_model, n_null, seed)
null = toys.null_ranges(nulls, d_model)
prose.say(
    "The null: {matrices} $W_{{qk}} = W_q^\\top W_k$ of width {width}. The central 95% of their scores: symmetry "
    "{symmetry}, directionality {directionality}.",
    null,
)

# %% [markdown]
# ## 1. The gradient, written out
#
# One attention head over token embeddings $x_1, \dots, x_N$ (rows of $X$), with context sets $D_i$:
#
# $$a_{ij} = s\, x_i^\top W_{qk} x_j,\qquad P_{ij} = \operatorname{softmax}_{j \in D_i}(a_{ij}),\qquad
#   y_i = \Big(\sum_j P_{ij}\, x_j W_v\Big) W_o,\qquad \mathcal L = \tfrac{1}{|\mathcal P|}\sum_{i \in \mathcal P} \operatorname{CE}(y_i U^\top, t_i).$$
#
# Here $s$ is the scale ($d^{-1/2}$), $W_v$ and $W_o$ the value and output maps, $U$ the unembedding, $t_i$ the
# token position $i$ must predict and $\mathcal P$ the set of predicted positions (the masked ones under masked
# LM, all but the last under next-token prediction).
#
# Write $g_i = \partial\mathcal L/\partial y_i$ and $\delta_i = g_i W_o^\top$, the gradient that reaches the
# attention output of query $i$. With the values $v_j = x_j W_v$, the output of query $i$ is $\sum_j P_{ij} v_j$,
# so $\partial\mathcal L/\partial P_{ij} = \delta_i \cdot v_j$: the weight on context token $j$ should grow when its
# value points along the direction that lowers the loss. Through the softmax, whose Jacobian is
# $\partial P_{ij}/\partial a_{ik} = P_{ij}(\mathbb 1[j = k] - P_{ik})$,
#
# $$\frac{\partial\mathcal L}{\partial a_{ij}} = P_{ij}\Big(\delta_i\cdot v_j - \sum_k P_{ik}\, \delta_i\cdot v_k\Big):$$
#
# the attention weight times how much better than the query's average value token $j$'s value does. These
# coefficients sum to zero over each query's context. Since $\partial a_{ij}/\partial W_{qk} = s\, x_i x_j^\top$,
#
# $$\frac{\partial \mathcal L}{\partial W_{qk}} = \sum_i \sum_{j \in D_i} \beta_{ij}\, x_i x_j^\top,\qquad
#   \beta_{ij} = s\,\frac{\partial\mathcal L}{\partial a_{ij}} .$$
#
# Each term adds the query embedding $x_i$ to the column space of the update and the context embedding $x_j$
# to its row space. `attnstruct.gradient.analytic_gradient` computes exactly this, term by term over a batch,
# and returns the coefficients $\beta$ with it. Here is the check against autograd on random float64 inputs
# (`toys.autograd_check`: four sequences of nine positions, two heads; the tests repeat it for other
# shapes and context sets). Relative differences at the level of float64 rounding mean the two computations
# agree:

# %% tags=["nbval-check-output"]
errors = toys.autograd_check(seed)
for agreement in toys.autograd_agreement(errors):
    print(
        prose.fill(
            "{objective:<14} analytic gradient equals autograd's (max relative difference < {tolerance}): {equal}",
            agreement,
        )
    )

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
# The pair probabilities are estimated from sampled masked-LM and next-token batches of the copy task
# (`attnstruct.gradient.pair_frequencies` over `toys.ROLE_SEQUENCES` sequences; only the masks and
# targets matter, no model is involved). Each matrix is compared with its transpose, twice: from the first
# hundredth of the sample and from all of it. An asymmetry that shrinks as more sequences are sampled is
# sampling noise; one that stays is structure.

# %% tags=["nbval-check-output"]
roles = toys.pair_roles(seq_len, vocab, zipf, mask_rate, seed)
print(f"P(i query, j context) from sampled sequences of length {roles.sizes['position']}:")
for asymmetry in toys.pair_asymmetry(roles):
    print(prose.fill("{objective:<14} largest entry {largest};  max |P - P^T|: {estimates}", asymmetry))

# %% [markdown]
# Top: per position, the number of terms $x_i x_j^\top$ per sequence in which it is the query (row sums of the
# pair matrix, grey) and the context (column sums, in the objective's colour). Bottom: the pair matrices
# themselves, query position down, context position across, each on its own grey scale from white (pairs that
# never occur) to its largest entry.

# %% tags=["hide-input"]
fig, axes = plt.subplots(2, 2, figsize=(11, 8.5), layout="constrained")
positions = roles.position.values
for column, (objective, color) in enumerate(OBJECTIVES.items()):
    p = roles.pair_probability.sel(objective=objective).values
    ax = axes[0, column]
    ax.bar(positions - 0.2, p.sum(1), width=0.4, color=plotting.NEUTRAL_COLOR, label="as query")
    ax.bar(positions + 0.2, p.sum(0), width=0.4, color=color, label="as context")
    ax.set(title=f"{objective}: terms per position", xlabel="position", ylabel="terms per sequence")
    ax.set_ylim(0, 1.2 * max(p.sum(1).max(), p.sum(0).max()))
    ax.legend(loc="upper center", ncol=2)
    # each matrix on its own scale, from 0 to its largest entry: masked LM spreads its pairs thinly over every
    # position, so on next-token prediction's scale (up to 1) it would be one flat light field
    image = axes[1, column].imshow(p, cmap="Greys", vmin=0, vmax=p.max() or 1.0, interpolation="nearest")
    axes[1, column].set(title=f"{objective}: P(i query, j context)", xlabel="context position j")
    axes[1, column].set(ylabel="query position i", yticks=positions[::2])
    fig.colorbar(image, ax=axes[1, column], shrink=0.8, label="probability (own scale)")
for ax in axes.flat:
    ax.set_xticks(positions[::2])
shares = toys.context_before_query(roles)
plotting.message_title(
    fig,
    prose.fill(
        "Context before query: {causal} of next-token prediction's pairs, {bidirectional} of masked LM's", shares
    ),
)
plotting.savefig(fig, figures_dir / "04_role_counts")
plt.show()

# %% [markdown]
# **Reading the figure.** The margins of a symmetric matrix are equal, so under masked LM the two bars must
# agree at every position up to sampling noise, and its pair matrix is flat: one shade everywhere, the self-pairs
# included. Under next-token prediction the bars mirror each other, since early positions are context in many
# terms and query in few, late positions the other way round; its matrix is a triangle, and the upper half,
# the other direction of every pair, stays white. The counts behind the bars:

# %%
prose.show(
    "Terms per sequence by position:\n\n"
    + "\n".join(
        prose.fill(
            "- {name} ({objective}): as query {query} and as context {context} terms per sequence; the largest "
            "difference between the two at one position is {largest_difference}; position 0 is context in "
            "{first_context} and query in {first_query}, the last position context in {last_context} and query in "
            "{last_query}.",
            role,
        )
        for role in toys.role_counts(roles)
    )
)

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
# Dirichlet distribution with a fixed seed, the same matrix for every run; its constants are printed below). A
# next token depends only on the current one, so next-token prediction can be served by the query's own position
# (a self-pair); a masked token is read off its two neighbours, through a transition matrix that is not
# symmetric.
#
# Model: one layer with token and position embeddings (plus a mask token), one head, values, output, tied
# unembedding (`toy_tasks.OneLayer`). Everything is trained. Both tasks use the same settings, and in a run of
# one seed both objectives see the same token sequences at every step. These runs train with a small loop of
# their own (`toy_tasks.train`), not with the project's training engine, because they treat $W_{qk}$ itself as a
# parameter and record the coefficients $\beta$ of the analytic gradient along the way.

# %%
markov = toys.markov_task(vocab)
prose.say(
    "Markov task: rows drawn from Dirichlet(concentration {concentration}) with seed {seed}; a token's most likely "
    "successor has probability {top_successor} (median over tokens); the symmetry score of the transition matrix is "
    "{symmetry}. One sequence of each task:",
    markov,
)
prose.show(
    "\n".join(
        prose.fill("- {task} task: `{tokens}`", example)
        for example in toys.example_sequences(vocab, seq_len, zipf, seed + 500)
    )
)

# %% [markdown]
# ### 3a. The accumulated update at initialisation, with and without the self-pairs
#
# Before any training, we sum the update directions $-\partial\mathcal L/\partial W_{qk}$ over
# `n_sequences` sequences and score the sum after each number of sequences: once with every pair, and once
# without the self-pairs $j = i$ (`attnstruct.gradient.outer_product_sum` with `include_self=False`). The model is
# the untrained one-layer model of seed `seed`, with $W_{qk}$ as the parameter; its weights do not move while we
# sum (`toys.accumulated_at_initialisation`). This is the first step of training seen from close
# up: the direction plain gradient descent would take, before it has changed anything.
#
# In the left panels, solid lines sum all pairs and dashed lines leave out the self-pairs; the grey band is the
# central 95% range of the null for symmetry and the dashed grey line its median. A single sequence gives a
# noisy sum; as more sequences are added the score settles towards that of the expected update. The heatmaps
# show the summed coefficients $\sum \beta_{ij}$ by query position $i$ (down) and context position $j$ (across),
# red positive and blue negative: where the update's terms come from. Their colour scale is clipped at the 95th
# percentile of $|\beta|$ (the colour bar's arrows), so that the few large coefficients of the first positions do not
# wash out the rest; pairs that never enter the update are grey.

# %%
accumulated = toys.accumulated_at_initialisation(parameters)
summed = accumulated.n_sequences.values

# %% tags=["hide-input"]
fig, axes = plt.subplots(2, 3, figsize=(15, 8.5), layout="constrained")
for row, task in zip(axes, toy_tasks.TASKS, strict=True):
    for objective, color in OBJECTIVES.items():
        cell = accumulated.sel(task=task, objective=objective)
        row[0].plot(summed, cell.accumulated_symmetry, marker="o", color=color, label=f"{objective}, all pairs")
        row[0].plot(
            summed, cell.accumulated_symmetry_without_self, "--", marker="o", color=color, label=f"{objective}, j ≠ i"
        )
    plotting.null_band(row[0], nulls.null_symmetry, "null")
    row[0].set_xscale("log", base=2)
    row[0].set_xticks(summed, [str(c) for c in summed])
    row[0].set(xlabel="sequences summed", ylabel="symmetry of the summed update", title=f"{task} task")
    for ax, objective in zip(row[1:], OBJECTIVES, strict=True):
        beta = accumulated.accumulated_beta.sel(task=task, objective=objective)
        plotting.coefficient_heatmap(ax, beta, title=f"{task}, {objective}: summed beta")
        ax.set(xticks=positions[::2], yticks=positions[::2], xlabel="context position j", ylabel="query position i")
axes[0, 0].legend(fontsize="small")
plotting.message_title(
    fig,
    ",\n".join(
        prose.fill(
            "Summed over {sequences}, the masked-LM update is {relation} the next-token one on the {task} task "
            "({masked} vs {causal})"
            if summed_task.first
            else "{short} on the {task} task ({masked} vs {causal})",
            summed_task,
        )
        for summed_task in toys.accumulated_by_task(accumulated)
    ),
)
plotting.savefig(fig, figures_dir / "04_accumulated_updates")
plt.show()

# %% [markdown]
# **Reading the figure.** The heatmaps show where the coefficients sit: masked LM spreads them over all pairs,
# next-token prediction fills only the lower triangle ($j \le i$), so every pair but the self-pairs enters in one
# direction. The gap between a solid line and its dashed twin is what the self-pairs add. The self-pairs
# $x_i x_i^\top$ are symmetric matrices, so they add symmetry to every summed update, whatever the objective; a
# causal update can therefore score above the null without a single pair used in both directions. Where each
# final sum sits, with and without them, in the null of one random $W_{qk}$:

# %%
summed_over = prose.count(int(accumulated.n_sequences[-1]), "sequence")
prose.show(
    f"The update summed over {summed_over} at initialisation:\n\n"
    + "\n".join(
        prose.fill(
            "- {task} task, {objective}: symmetry {with_self} with the self-pairs ({with_self_side} the null's 95% "
            "range, percentile {with_self_percentile}) and {without_self} without them ({without_self_side} it, "
            "percentile {without_self_percentile}); directionality {directionality} ({directionality_side} its null's "
            "95% range, percentile {directionality_percentile}).",
            cell,
        )
        for cell in toys.accumulated_against_null(accumulated, nulls)
    )
)

# %% [markdown]
# ### 3b. Training, with $W_{qk}$ as the parameter and factorised as $W_q W_k^\top$
#
# The theory treats $W_{qk}$ as the parameter and plain gradient steps. Real models train $W_q$ and $W_k$
# separately, so an update of $W_{qk}$ is $\Delta W_q W_k^\top + W_q \Delta W_k^\top + \dots$, and Adam
# rescales each coordinate. We train both ways, with Adam, on both tasks, for `n_seeds` seeds each, and score
# $W_{qk}$ every `every` steps. Two runs with plain SGD (copy task, $W_{qk}$ as the parameter, learning rate
# `sgd_lr`, one per objective) come closest to the theory's setting. Every batch is drawn afresh from the
# run's seed and step, so a run never sees the same sequences twice.

# %% tags=["slow"]
training = toys.training_runs(parameters, results_dir / "toy_runs")  # stored there, reused

# %% [markdown]
# **Did the runs learn?** A score of a model that has not learned its task says nothing about the task, so we
# check learning before reading any score. The yardstick is the loss of the best predictor that ignores the
# context: it predicts every target with the frequencies of the target tokens, and its cross-entropy is their
# entropy $-\sum_v p_v \log p_v$ (`toy_tasks.target_entropy`, estimated from
# `toys.YARDSTICK_SEQUENCES` sampled sequences of the task, the targets of each objective). A run
# whose loss is not below it has learned, at most, the token frequencies. The criterion
# (`toys.learning_table`): the final model's loss on fresh sequences it never trained on
# (`toy_tasks.HELD_OUT_SEQUENCES` of them) lies at least `toys.LEARNING_MARGIN` nats below the yardstick.
#
# Why that margin: on the copy task, next-token prediction can gain at most a little more than half of the
# yardstick, since the first half of each sequence is unpredictable; on the Markov task the best a next-token
# predictor can do is the chain's conditional entropy. The margin asks for a clear part of that room, and lies
# well above the sampling noise of a held-out loss over that many sequences. A run that meets it uses the
# context. Every effect below is computed only from runs that all met it; otherwise it says that the runs did
# not learn. The table lists each run's held-out loss, the yardstick, the distance between them (`below`) and
# whether it met the criterion:

# %%
learning = toys.learning_table(training)
learned = toys.learning_summary(learning)
prose.show(
    prose.fill(
        "The criterion: a run has learned when its final loss lies at least {margin} nats below the entropy of the "
        "tokens its objective predicts. {adam_met} of {adam_runs} meet it",
        learned,
    )
    + prose.fill("; {sgd_met} of {sgd_runs} meet it." if learned.has_sgd else ".", learned)
    + prose.fill("" if learned.all_met else " Not met: {misses}.", learned)
)
learning.round(3)

# %% [markdown]
# In the figure, each line is the median over the `n_seeds` seeds and its shaded band the range over seeds;
# solid lines train $W_{qk}$ as the parameter, dashed lines the factorised $W_q W_k^\top$. The loss panels
# (training loss on each step's batch) carry each objective's learning threshold, the yardstick minus the
# margin, as a dotted line, and each run's held-out loss as a cross at the last step: a run has learned when its
# cross lies below its threshold. On the copy task, the plain-SGD runs are added to the symmetry panel (dotted). The
# grey band is the central 95% range of the null. Directionality is not drawn: at this width its null spans almost
# its whole scale (its range is stated at the top of the notebook), so its lines carry no finding; the line under the
# figure counts the final scores inside that range, and the next cell places each of them.

# %% tags=["hide-input"]
STYLES = {"W_qk": "-", "W_q W_k^T": "--"}
fig, axes = plt.subplots(2, 2, figsize=(13, 8.5), sharex=True, layout="constrained")
for row, task in zip(axes, toy_tasks.TASKS, strict=True):
    for objective, color in OBJECTIVES.items():
        for parameterisation, style in STYLES.items():
            pick = training.sel(task=task, objective=objective, parameterisation=parameterisation)
            label = f"{objective}, {parameterisation}" if task == toy_tasks.TASKS[0] else None
            plotting.median_and_range(row[0], pick.loss, color, style, label)
            row[0].plot([pick.step[-1]] * n_seeds, pick.held_out_loss, "x", color=color, ms=8)
            plotting.median_and_range(row[1], pick.symmetry, color, style)
        threshold = float(training.target_entropy.sel(task=task, objective=objective)) - toys.LEARNING_MARGIN
        row[0].axhline(threshold, color=color, ls=":", lw=1.5)
    row[0].set(ylabel="loss (cross-entropy, nats)", title=f"{task} task: loss")
    row[1].set(ylabel="symmetry of W_qk", title=f"{task} task: symmetry")
    row[1].axhspan(*np.quantile(nulls.null_symmetry, [0.025, 0.975]), color=plotting.NEUTRAL_COLOR, alpha=0.2, lw=0)
    row[1].axhline(0, color="black", lw=0.8)
for objective, color in OBJECTIVES.items():
    sgd = training.sgd_symmetry.sel(objective=objective)
    axes[0, 1].plot(sgd.step, sgd, ":", color=color, lw=2, label=f"{objective}, W_qk, SGD")
for ax in axes[1]:
    ax.set_xlabel("step")
handles, labels = axes[0, 0].get_legend_handles_labels()
sgd_handles, sgd_labels = axes[0, 1].get_legend_handles_labels()
null_patch = plt.matplotlib.patches.Patch(color=plotting.NEUTRAL_COLOR, alpha=0.2, label="null, central 95%")
threshold_line = plt.matplotlib.lines.Line2D([], [], color="black", ls=":", label="learning threshold")
held_out_mark = plt.matplotlib.lines.Line2D([], [], color="black", marker="x", ls="", label="held-out loss")
fig.legend(
    [*handles, *sgd_handles, null_patch, threshold_line, held_out_mark],
    [*labels, *sgd_labels, *(h.get_label() for h in (null_patch, threshold_line, held_out_mark))],
    loc="outside right center",
    title=f"median over {prose.count(n_seeds, 'seed')}\n(band: range over seeds)",
)
plotting.message_title(
    fig,
    ",\n".join(
        prose.fill(
            "Masked LM ends {relation} next-token prediction on the {task} task ({masked} vs {causal})"
            if final_task.first
            else "{short} on the {task} task ({masked} vs {causal})",
            final_task,
        )
        for final_task in toys.final_symmetry_by_task(training)
    )
    + "; mean over seeds of the final symmetry of W_qk",
)
inside_null = toys.directionality_inside_null(training, nulls.null_directionality)
fig.text(
    0.5,
    -0.02,
    prose.fill(
        "Directionality (not drawn): {inside} of {finals} lie inside the null's central 95% ({low} to {high}), where "
        "a random W_qk of this width lands",
        inside_null,
    ),
    ha="center",
)
plotting.savefig(fig, figures_dir / "04_training")
plt.show()

# %% [markdown]
# Each run's final scores, and where they sit in the null of one random single-head $W_{qk}$ of the same width.
# These are descriptions of single runs: a score inside the null's range is what a random matrix of this width
# gives, whichever side of zero it falls on, and a score beyond it, in one run, can still be luck.

# %%
prose.show(
    f"Final scores of $W_{{qk}}$ ({prose.count(n_seeds, 'seed')}), against the null of one random $W_{{qk}}$:\n\n"
    + "\n".join(
        prose.fill(
            "- {task} task, {objective}, {parameterisation}: symmetry {symmetry} (of {seeds}: {symmetry_above} above "
            "the null's 95% range, {symmetry_below} below, {symmetry_inside} inside); directionality {directionality} "
            "({directionality_above} above its null's range, {directionality_below} below, {directionality_inside} "
            "inside)."
            if final.learned
            else "- {task} task, {objective}, {parameterisation}: symmetry {symmetry} (of {seeds}: {symmetry_above} "
            "above the null's 95% range, {symmetry_below} below, {symmetry_inside} inside); directionality "
            "{directionality} ({directionality_above} above its null's range, {directionality_below} below, "
            "{directionality_inside} inside). These runs did not all meet the learning criterion.",
            final,
        )
        for final in toys.final_scores(training, nulls, learning)
    )
)

# %% [markdown]
# **Which objective ends the more symmetric.** The argument of section 3 of the paper predicts masked LM above
# next-token prediction in final symmetry, and, for directionality, the causal $W_{qk}$ the more
# column-dominant (next-token prediction minus masked LM negative).
#
# *A paired effect over seeds.* In a run of seed $k$ both objectives start from the same weights and see the same
# sequences, so the two runs of one seed form a pair, and the difference within the pair removes what the seed
# alone decides. The effect is the mean of these differences over the `n_seeds` seeds, with three pieces of
# evidence: a bootstrap 95% interval of that mean over seeds; a sign-flip test, whose p-value is the share of the
# $2^n$ ways of flipping the signs of the $n$ differences that give a mean at least as far on the predicted side
# (exact for few seeds); and the null of the mean, what the same mean difference would be between pairs of random
# matrices of this width (`stats.null_of_the_mean`, the average of `n_seeds` draws, narrower than the null of one
# draw by about the square root of the number of seeds).
#
# *The rule* (`attnstruct.stats.decide`). An effect *holds* when the interval lies on the predicted side of zero,
# p is below alpha and the mean lies beyond the null's range on that side; it *does not hold* when the interval
# lies on the other side and the opposite test is significant; otherwise we *cannot tell at this scale*, and the
# reason says why. Runs that did not learn give *cannot tell at this scale* with that reason, whatever their
# numbers. With few seeds the test cannot reach a small p at all, however large the differences are:

# %%
design = stats.design_reach(n_seeds)
prose.say(
    "With {design}, the smallest p a one-sided {test} test can reach is {smallest}, below alpha = {alpha}: the "
    "design can reach a verdict either way."
    if design.reachable
    else "With {design}, the smallest p a one-sided {test} test can reach is {smallest}, not below alpha = "
    "{alpha}: each paired effect over these seeds reads *{verdict}* whatever the data show, since the design "
    "cannot reach a verdict; it takes at least {needed}.",
    design,
)
effects = toys.objective_effects(training, d_model=d_model, n_null=n_null, seed=seed)
prose.show("\n".join(f"- {prose.effect_line(effect)}." for effect in effects.values()))

# %% [markdown]
# Per task, the mean final symmetry of each objective (a description of the means, which alone decide nothing),
# and the symmetry prediction read for both parameterisations together (`stats.overall`: *holds* only when each
# effect does, *does not hold* when one effect clearly goes the other way). The summary is the plan's primary claim
# after Holm's correction (`stats.primary_verdict`); the other tasks and parameterisations are secondary:

# %%
summary = toys.primary_summary(effects)
prose.show(
    "\n".join(
        prose.fill(
            "- {task} task, mean final symmetry over {seeds} ({means}). Masked LM ends the more symmetric, both "
            "parameterisations read together: *{verdict}*.",
            ordering,
        )
        for ordering in toys.orderings(training, effects)
    )
    + prose.fill("\n\nIn summary, the plan's primary claim ({primary}) after Holm's correction: *{verdict}*.", summary)
)

# %% [markdown]
# For comparison, in the authors' own training runs the 4-layer decoders ended with negative symmetry, and
# directionality did not separate encoders from decoders cleanly (the paper's section 4, training from scratch;
# authors' result files, `docs/paper-notes.md`).
#
# ## 4. The assumption behind "bidirectional means symmetric"
#
# Pairing the terms $(i, j)$ and $(j, i)$ gives
# $\sum_i \beta_{ii} K_{ii} + \sum_{i<j} \big[\tfrac{\beta_{ij} + \beta_{ji}}{2}(K_{ij} + K_{ij}^\top) + \tfrac{\beta_{ij} - \beta_{ji}}{2}(K_{ij} - K_{ij}^\top)\big]$,
# with $K_{ij} = x_i x_j^\top$. Beyond the symmetric self-pair terms $K_{ii}$, the update is symmetric only to
# the extent that $\beta_{ij} \approx \beta_{ji}$ on aggregate: symmetric pair probabilities (section 2) say that
# both directions of a pair enter equally often, not that they enter with equal weight. As a proxy for that, we
# measure the symmetry score of $\sum \beta$ over a batch (positions $\times$ positions) along training;
# $\beta_{ij} = \beta_{ji}$ would score $+1$. For the causal objective $\sum\beta$ is lower-triangular, so its
# score comes from its diagonal, the self-pairs, alone: a high causal value says that the coefficients sit on the
# query's own position, not that $\beta_{ij} \approx \beta_{ji}$ for $i \ne j$.
#
# If the argument explains the difference between the objectives, the proxy should separate them in the same
# direction as the final symmetry of $W_{qk}$ does. We read both as paired effects over seeds: the proxy's effect
# is each run's median over training of the proxy, masked LM minus next-token prediction (no null: a random matrix
# has no coefficients), and the $W_{qk}$ effect is the one of section 3b. Read together with `stats.overall`, the
# account *holds* only when both do. In the figure ($W_{qk}$ as the parameter), each line is the median over
# seeds and its band the range over seeds.

# %% tags=["hide-input"]
fig, axes = plt.subplots(1, 2, figsize=(13, 4), sharey=True, layout="constrained")
for ax, task in zip(axes, toy_tasks.TASKS, strict=True):
    for objective, color in OBJECTIVES.items():
        pick = training.beta_symmetry.sel(task=task, objective=objective, parameterisation="W_qk")
        plotting.median_and_range(ax, pick, color, label=objective)
    ax.axhline(0, color="black", lw=0.8)
    ax.set(title=f"{task} task", xlabel="step")
axes[0].set_ylabel("symmetry of summed beta")
axes[0].legend()
plotting.message_title(
    fig,
    ",\n".join(
        prose.fill(
            "Masked LM's summed coefficients are {relation} next-token prediction's on the {task} task ({masked} vs "
            "{causal})"
            if beta_task.first
            else "{short} on the {task} task ({masked} vs {causal})",
            beta_task,
        )
        for beta_task in toys.beta_by_task(training)
    )
    + ", median over steps, mean over seeds",
)
plotting.savefig(fig, figures_dir / "04_beta_symmetry")
plt.show()

# %% [markdown]
# **Reading the figure.** A masked-LM line near $+1$ would say that the coefficients of the two directions of a
# pair match; a line near zero that they are unrelated, so that the symmetric pair probabilities do not carry over
# into a symmetric update. A causal line is the share of the coefficients' energy on the diagonal. The proxy per
# task, with its effect and the $W_{qk}$ effect side by side:

# %%
proxies = toys.proxy_effects(training, seed=seed)
prose.show(
    "The proxy $\\beta_{ij} = \\beta_{ji}$ (symmetry of the summed $\\beta$), per task:\n\n"
    + "\n".join(
        prose.fill(
            "- {task} task: the proxy's median over training and seeds (its range): {level}.\n"
            "  - The proxy: {proxy}.\n"
            "  - $W_{{qk}}$: {wqk}.\n"
            "  - Both in the predicted direction, read together: *{together}*.",
            reading,
        )
        for reading in toys.proxy_readings(training, proxies, effects)
    )
)

# %% [markdown]
# ## 5. Save
#
# One dataset keeps every part of this notebook (`toys.result_dataset`): the nulls, the pair probabilities,
# the accumulated updates, every training run with its held-out loss and the yardsticks, with the parameters and
# versions that made them. Every sentence above can be recomputed from it with the functions of
# `attnstruct.analyses.nb04_gradient_structure`.

# %%
verdicts = [*effects.values(), *proxies.values()]  # every verdict of this notebook, decided under its plan
dataset = toys.result_dataset(parameters, [nulls, roles, accumulated, training], effects=verdicts)
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
# > **Difficulty** 4/5 · **Importance** 4/5 · **About** 20 min
#
# One query's scores $a = (a_1, \dots, a_n)$ become the attention weights $P = \operatorname{softmax}(a)$. Given
# the upstream gradient $g_j = \partial\mathcal L/\partial P_j$, derive $\partial\mathcal L/\partial a_k$ and
# write `ex_score_gradient(a, g)`, which returns it as a tensor of shape `[n]` (`a` and `g`: float64 tensors of
# shape `[n]`). Hint: $\partial P_j/\partial a_k = P_j(\delta_{jk} - P_k)$. The check compares your function
# with torch autograd on random rows, through a loss that goes via values and an unembedding as in section 1.
# Under a causal mask a query's row contains only its context scores $a_{ij}$, $j \le i$: the same function
# applies to that shorter row.


# %% nbgrader={"grade": false, "grade_id": "ex-04-1", "locked": false, "schema_version": 3, "solution": true}
def ex_score_gradient(a, g):
    """dL/da for one row of scores ``a`` [n], from the upstream gradient ``g = dL/dP`` [n]."""
    ### BEGIN SOLUTION
    p = torch.softmax(a, dim=-1)
    return p * (g - (p * g).sum())
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex-04-1-check", "locked": true, "points": 4, "schema_version": 3, "solution": false}
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
# > **Difficulty** 2/5 · **Importance** 4/5 · **About** 10 min
#
# Next-token prediction on one sequence of length $n$, as `attnstruct.tasks.toy_tasks.batch_for` sets it up: the
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


# %% nbgrader={"grade": true, "grade_id": "ex-04-2-check", "locked": true, "points": 2, "schema_version": 3, "solution": false}
for n in (2, 3, 8, 16):
    _, _, predict_check, mask_check = toy_tasks.batch_for(
        "causal", torch.zeros(1, n, dtype=torch.int64), 1, 0.5, torch.Generator().manual_seed(0)
    )
    expected_pairs = {(i, j) for i in range(n) for j in range(n) if predict_check[0, i] and mask_check[i, j]}
    mine = {tuple(int(k) for k in pair) for pair in ex_causal_pairs(n)}
    assert mine == expected_pairs, (
        f"n = {n}: {len(expected_pairs - mine)} (query, context) pairs missing and {len(mine - expected_pairs)} "
        "pairs that are not (query, context) pairs; remember j <= i and that the last position predicts nothing"
    )
    _, as_context_check = gradient.role_counts(predict_check, mask_check)
    assert [int(c) for c in ex_times_as_context(n)] == as_context_check.int().tolist(), (
        f"n = {n}: ex_times_as_context disagrees with attnstruct.gradient.role_counts"
    )
print("ex_causal_pairs and ex_times_as_context agree with the package's batches for n = 2, 3, 8 and 16")

# %% [markdown]
# ### Exercise 04.3: symmetric coefficients give a symmetric update
#
# > **Difficulty** 2/5 · **Importance** 5/5 · **About** 15 min
#
# Write `ex_update(x, beta)`, which returns $M = \sum_{i,j} \beta_{ij}\, x_i x_j^\top$ for embeddings `x` of shape
# `[N, d]` (rows $x_i$) and coefficients `beta` of shape `[N, N]` (NumPy arrays; hint: a product of three
# matrices), and `ex_symmetric_part(beta)`, which returns $\tfrac12(\beta + \beta^\top)$. The check then tests
# on random inputs that (a) a symmetric $\beta$ gives a symmetric update (symmetry score $+1$), (b) the
# self-pairs alone, a diagonal $\beta$, give a symmetric update whatever their values, and (c) the symmetric
# part $\tfrac12(M + M^\top)$ of any update is the update of $\tfrac12(\beta + \beta^\top)$: only the
# antisymmetric part of $\beta$ makes an update asymmetric (section 4). Before you run it, convince yourself
# of (c) on paper: what is the transpose of $x_i x_j^\top$?
#
# Write your argument for (c) in the cell after the check.


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


# %% nbgrader={"grade": true, "grade_id": "ex-04-3-check", "locked": true, "points": 2, "schema_version": 3, "solution": false}
check_rng = np.random.default_rng(0)
x_check, beta_check = check_rng.normal(size=(6, 8)), check_rng.normal(size=(6, 6))
reference = gradient.outer_product_sum(torch.tensor(beta_check)[None, None], torch.tensor(x_check)[None])[0].numpy()
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

# %% [markdown] nbgrader={"grade": true, "grade_id": "ex-04-3-explain", "locked": false, "points": 1, "schema_version": 3, "solution": true}
# **The argument for (c).** The transpose of $x_i x_j^\top$ is $x_j x_i^\top$, so $M^\top = \sum_{i,j} \beta_{ij}\, x_j
# x_i^\top = \sum_{i,j} \beta_{ji}\, x_i x_j^\top$, the update of $\beta^\top$. The update is linear in $\beta$, so
# $\tfrac12(M + M^\top)$ is the update of $\tfrac12(\beta + \beta^\top)$ and $\tfrac12(M - M^\top)$ that of the
# antisymmetric rest. Hence (a) and (b): a symmetric or diagonal $\beta$ has no antisymmetric rest, and only pairs
# with $\beta_{ij} \neq \beta_{ji}$ make an update asymmetric.

# %% [markdown]
# ### Exercise 04.4: another optimiser and mask rate, predict the sign, then run it
#
# > **Difficulty** 2/5 · **Importance** 4/5 · **About** 6 min
#
# Section 3b trains with Adam, masks few tokens under masked LM (`mask_rate`), and adds plain SGD on the copy
# task at that mask rate. Change both: a small copy task (vocabulary $16$, sequences of length $8$, width $16$,
# batches of $32$, $W_{qk}$ as the parameter) trained for $150$ steps of plain SGD, with half of the tokens masked
# under masked LM (`attnstruct.teaching.exercise_runs.COPY_EXERCISE`), once with masked LM and once with next-token
# prediction. Predict the sign of (final symmetry of $W_{qk}$ under next-token prediction) minus (final symmetry
# under masked LM): set `ex_predicted_sign` to `+1` or `-1` and write your reason in a comment, from section 2
# (which pairs each objective uses, and does the mask rate change their symmetry?) and section 3 (what relation
# the copy task asks for). The check trains both runs, about two seconds, and compares; the sign it grades is the
# same in at least $19$ of $20$ seeds (a test proves it).
#
# Then write the reason in the cell after the check: it is graded by hand.

# %% nbgrader={"grade": false, "grade_id": "ex-04-4", "locked": false, "schema_version": 3, "solution": true}
### BEGIN SOLUTION
# Neither the optimiser nor the mask rate chooses the pairs' directions: masked LM's pair probabilities stay
# symmetric at any mask rate, and it reads a token off its copy, a relation used in both directions; next-token
# prediction needs "one after my copy", looked up backwards only, which a symmetric W_qk cannot serve.
ex_predicted_sign = -1
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "ex-04-4-check", "locked": true, "points": 2, "schema_version": 3, "solution": false}
assert ex_predicted_sign in (-1, +1), "set ex_predicted_sign to +1 or -1"
assert ex_predicted_sign == copy_exercise_sign(seed=0), (
    "the runs give the other sign: which relation does each objective need on the copy task, and is it symmetric?"
)
sgd_symmetry = copy_exercise_symmetry(seed=0)
print(
    f"right: final symmetry of W_qk, next-token prediction {sgd_symmetry['causal']:+.2f}, "
    f"masked LM {sgd_symmetry['bidirectional']:+.2f}"
)

# %% [markdown] nbgrader={"grade": true, "grade_id": "ex-04-4-explain", "locked": false, "points": 1, "schema_version": 3, "solution": true}
# **Why the sign is negative.** Neither the optimiser nor the mask rate decides which pairs enter in which
# direction: under masked LM a masked token's context is every other position, so the matrix of pair probabilities
# stays symmetric at any mask rate, and the copy task asks it to read a token off its copy, a relation used in both
# directions. Next-token prediction needs the token one after the copy, looked up backwards only: an asymmetric
# relation that a symmetric $W_{qk}$ cannot serve. So next-token prediction ends the less symmetric.

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
