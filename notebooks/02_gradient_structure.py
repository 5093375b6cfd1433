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
# # 02 · The gradient of $W_{qk}$: a sum of outer products, and what the objective does to it
#
# *Companion to Saponati et al., ICML 2025 (arXiv:2502.10927), section 3: the implicit weight updates of
# $W_{qk}$ and how bidirectional and autoregressive training shape them.*
#
# The claim: the gradient of a token-prediction loss with respect to $W_{qk}$ is a weighted sum of rank-1
# matrices $x_i x_j^\top$, one for every pair (query position $i$, context token $j$). Which pairs appear is
# set by the objective. Bidirectional training uses every pair in both directions, which favours symmetric
# updates. Autoregressive training uses only $j \le i$, one direction per pair, which does not.
# This notebook derives the gradient, checks it against autograd, and tests the consequence on a toy task
# where both objectives have to attend to another position.

# %% tags=["parameters"]
seed = 0  # first seed; the training runs use seed, seed + 1, ...
n_seeds = 2  # training runs per objective and parameterisation
vocab = 64  # toy vocabulary (Zipf-distributed tokens)
seq_len = 16  # sequence length (first half random, second half a copy)
d_model = 32  # embedding width
steps = 1000  # Adam steps per training run
batch = 64  # sequences per step
lr = 0.003  # Adam learning rate
sgd_lr = 0.05  # learning rate of the plain-SGD comparison runs
mask_rate = 0.15  # masked-LM masking probability
zipf = 1.0  # Zipf exponent of the token frequencies
every = 50  # record scores every this many steps
n_sequences = 512  # sequences for the accumulated updates at initialisation
results_dir = "../build/interactive/results"  # where the dataset goes
figures_dir = "../build/interactive/figures"  # where the figures go

# %%
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch
import xarray as xr

from attnstruct import copy_task, pipeline, plotting, results
from attnstruct import gradient as G

plotting.set_style()
torch.set_num_threads(1)
results_dir, figures_dir = Path(results_dir), Path(figures_dir)
parameters = pipeline.notebook_parameters("02_gradient_structure", globals())  # recorded with the dataset
if n_seeds < 1 or steps < every or seq_len % 2 or n_sequences < 1:
    raise ValueError("need n_seeds >= 1, steps >= every, an even seq_len and n_sequences >= 1")
OBJECTIVES = {"bidirectional": plotting.ENCODER_COLOR, "causal": plotting.DECODER_COLOR}

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

# %%
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
    print(f"{objective:<14} max relative difference analytic vs autograd: {error:.1e}")

# %% [markdown]
# ## 2. Who is query and who is context
#
# Swapping the order of the double sum groups the terms by context token: $\sum_i\sum_{j\in D_i} = \sum_j
# \sum_{i \in P_j}$, with $P_j = \{i : j \in D_i\}$ the queries that token $j$ helps. A token that is
# context for many queries adds its embedding to the **row** space many times; a token that is a query
# adds its embedding to the **column** space. The objective sets these role counts. Under masked LM every
# position is context for every query, and each position is a query with the same probability. Under
# next-token prediction, position $j$ is context for the $N - j$ later queries.

# %%
roles = {}
fig, axes = plt.subplots(1, 2, figsize=(11, 3.6), sharey=True)
for ax, objective in zip(axes, OBJECTIVES, strict=True):
    tokens = copy_task.repeated_sequences(2000, seq_len, vocab, zipf, gen)
    _, _, predict_o, mask_o = copy_task.batch_for(objective, tokens, vocab, mask_rate, gen)
    as_query, as_context = G.role_counts(predict_o, mask_o)
    roles[objective] = (as_query / len(tokens), as_context / len(tokens))
    positions = np.arange(seq_len)
    ax.bar(positions - 0.2, roles[objective][1], width=0.4, color=OBJECTIVES[objective], label="as context")
    ax.bar(positions + 0.2, roles[objective][0], width=0.4, color=plotting.NEUTRAL_COLOR, label="as query")
    ax.set_title(objective)
    ax.set_xlabel("position")
axes[0].set_ylabel("times per sequence")
axes[0].legend()
plotting.savefig(fig, figures_dir / "02_role_counts")
plt.show()

# %% [markdown]
# ## 3. A task where attention has to look elsewhere
#
# Each sequence is $N/2$ Zipf-distributed tokens followed by the same tokens again. A masked token can be
# read off its copy, $N/2$ positions away in either direction. A next token in the second half can be read
# off the first half, $N/2 - 1$ positions back (the first half itself is unpredictable). So both objectives
# need attention between positions, but masked LM can use both directions and next-token prediction only
# looks back.
#
# One layer: token and position embeddings (plus a mask token), one head, values, output, tied unembedding.
# Everything is trained.
#
# ### 3a. The accumulated update at initialisation
#
# Before any training, we sum the update directions $-\partial\mathcal L/\partial W_{qk}$ over
# `n_sequences` sequences and score the sum.

# %%
checkpoints = sorted({c for c in (1, 4, 16, 64, 256) if c < n_sequences} | {n_sequences})
accumulated = {}
for objective in OBJECTIVES:
    model = copy_task.OneLayer(vocab, seq_len, d_model, factorised=False, gen=torch.Generator().manual_seed(seed))
    data = copy_task.repeated_sequences(n_sequences, seq_len, vocab, zipf, torch.Generator().manual_seed(seed + 100))
    accumulated[objective] = copy_task.accumulated_updates(
        model, data, objective, checkpoints, mask_rate=mask_rate, gen=torch.Generator().manual_seed(seed + 200)
    )
fig, axes = plt.subplots(1, 3, figsize=(15, 4))
for objective, color in OBJECTIVES.items():
    axes[0].plot(checkpoints, accumulated[objective]["symmetry"], marker="o", color=color, label=objective)
axes[0].set_xscale("log", base=2)
axes[0].set_xlabel("sequences summed")
axes[0].set_ylabel("symmetry of the summed update")
axes[0].legend()
for ax, objective in zip(axes[1:], OBJECTIVES, strict=True):
    plotting.matrix_heatmap(ax, accumulated[objective]["beta"], title=f"{objective}: summed beta")
    ax.set_xlabel("context position j")
    ax.set_ylabel("query position i")
plotting.savefig(fig, figures_dir / "02_accumulated_updates")
plt.show()
for objective in OBJECTIVES:
    print(
        f"{objective:<14} summed update after {n_sequences} sequences: symmetry "
        f"{accumulated[objective]['symmetry'][-1]:+.3f}, directionality {accumulated[objective]['directionality'][-1]:+.3f}"
    )

# %% [markdown]
# The right panels show where the coefficients sit. Masked LM spreads them over all pairs, the copy
# offsets $\pm N/2$ included; next-token prediction fills only the lower triangle ($j \le i$), so every pair
# enters in one direction. Already at initialisation the summed masked-LM update is the more symmetric of the
# two (printed above). The directionality of the summed updates is printed too. In the quick profile it is
# the masked-LM sum that shows column dominance (strongly negative), the opposite of the paper's expectation
# that column dominance marks the causal objective. Training shows whether either pattern persists once the
# weights move.
#
# ### 3b. Training, with $W_{qk}$ as the parameter and factorised as $W_q W_k^\top$
#
# The theory treats $W_{qk}$ as the parameter and plain gradient steps. Real models train $W_q$ and $W_k$
# separately, so an update of $W_{qk}$ is $\Delta W_q W_k^\top + W_q \Delta W_k^\top + \dots$, and Adam
# rescales each coordinate. We train both ways, with Adam, and score $W_{qk}$ along the way.

# %%
runs = {}
for objective in OBJECTIVES:
    for factorised in (False, True):
        for k in range(n_seeds):
            config = copy_task.CopyTaskConfig.from_params(
                parameters, objective=objective, factorised=factorised, seed=seed + k, optimizer="adam"
            )
            runs[objective, factorised, seed + k] = copy_task.train(config)
sgd_runs = {
    objective: copy_task.train(
        copy_task.CopyTaskConfig.from_params(
            parameters, objective=objective, factorised=False, lr=sgd_lr, optimizer="sgd"
        )
    )
    for objective in OBJECTIVES
}
recorded_steps = next(iter(runs.values()))["step"]
fig, axes = plt.subplots(1, 3, figsize=(16, 4.2), sharex=True)
for (objective, factorised, s), rec in runs.items():
    style = "--" if factorised else "-"
    label = f"{objective}, {'W_q W_k^T' if factorised else 'W_qk'}" if s == seed else None
    for ax, var in zip(axes, ("loss", "symmetry", "directionality"), strict=True):
        ax.plot(rec["step"], rec[var], style, color=OBJECTIVES[objective], alpha=0.8, label=label)
for objective, rec in sgd_runs.items():
    axes[1].plot(rec["step"], rec["symmetry"], ":", color=OBJECTIVES[objective], lw=2, label=f"{objective}, W_qk, SGD")
for ax, var in zip(axes, ("loss", "symmetry", "directionality"), strict=True):
    ax.set_title(var)
    ax.set_xlabel("step")
axes[1].axhline(0, color="black", lw=0.8)
axes[2].axhline(0, color="black", lw=0.8)
fig.legend(*axes[1].get_legend_handles_labels(), loc="center left", bbox_to_anchor=(1.0, 0.5))
plotting.savefig(fig, figures_dir / "02_training")
plt.show()

# %%
final = {
    (objective, "W_q W_k^T" if factorised else "W_qk", s): (
        rec["symmetry"][-1],
        rec["directionality"][-1],
        rec["loss"][-1],
    )
    for (objective, factorised, s), rec in runs.items()
}
for key, (sym, direc, loss_value) in final.items():
    print(
        f"{key[0]:<14} {key[1]:<10} seed {key[2]}: symmetry {sym:+.3f}  directionality {direc:+.3f}  loss {loss_value:.2f}"
    )
for objective, rec in sgd_runs.items():
    print(
        f"{objective:<14} W_qk, SGD  seed {seed}: symmetry {rec['symmetry'][-1]:+.3f}  "
        f"directionality {rec['directionality'][-1]:+.3f}  loss {rec['loss'][-1]:.2f}"
    )

# %% [markdown]
# Compare the two colours in the middle panel. In this toy, masked LM drives $W_{qk}$ to strongly positive
# symmetry, and next-token prediction does not; it may even go negative, as the paper's 4-layer decoders did
# (the paper's section 4, training from scratch). Training the factors $W_q, W_k$ instead of $W_{qk}$ (dashed), or plain SGD instead of
# Adam (dotted, $W_{qk}$ as the parameter), does not change that ordering.
# The printed values are the evidence: if a run disagrees, the text above is wrong for it.
#
# Directionality does not separate the objectives here: the two colours overlap, and they swing from run to
# run. The paper's own training runs found the same (the paper's section 4, training from scratch). Column dominance is not a reliable
# signature of the causal objective in this toy.
#
# ## 4. The assumption behind "bidirectional means symmetric"
#
# Pairing the terms $(i, j)$ and $(j, i)$ gives
# $\sum_{i<j} \big[\tfrac{\beta_{ij} + \beta_{ji}}{2}(K_{ij} + K_{ij}^\top) + \tfrac{\beta_{ij} - \beta_{ji}}{2}(K_{ij} - K_{ij}^\top)\big]$.
# The update is symmetric only to the extent that $\beta_{ij} \approx \beta_{ji}$ on aggregate. We measure the
# symmetry score of $\sum \beta$ over a batch (positions $\times$ positions) along training. For the causal
# objective $\sum\beta$ is lower-triangular, so only its diagonal can make it look symmetric.

# %%
fig, ax = plt.subplots(figsize=(7, 4))
for (objective, factorised, s), rec in runs.items():
    if not factorised:
        ax.plot(
            rec["step"],
            rec["beta_symmetry"],
            color=OBJECTIVES[objective],
            alpha=0.8,
            label=objective if s == seed else None,
        )
ax.axhline(0, color="black", lw=0.8)
ax.set_xlabel("step")
ax.set_ylabel("symmetry of summed beta")
ax.legend()
plotting.savefig(fig, figures_dir / "02_beta_symmetry")
plt.show()
for objective in OBJECTIVES:
    values = np.concatenate([rec["beta_symmetry"] for (o, f, _), rec in runs.items() if o == objective and not f])
    print(
        f"{objective:<14} symmetry of summed beta over training: median {np.median(values):+.2f}, "
        f"range [{values.min():+.2f}, {values.max():+.2f}]"
    )

# %% [markdown]
# The aggregate coefficients are far from symmetric in either objective ($\beta_{ij} = \beta_{ji}$ would score
# +1). So the symmetry of the trained masked-LM $W_{qk}$ does not come from $\beta_{ij} \approx \beta_{ji}$ batch by
# batch. It accumulates over training: the copy positions are used in both directions, and the small
# asymmetric parts do not line up from step to step. The simple argument is a tendency, not a theorem.
#
# ## 5. Save

# %%
names = ["bidirectional", "causal"]
params_ = ["W_qk", "W_q W_k^T"]
seeds = [seed + k for k in range(n_seeds)]
shape = (2, 2, n_seeds, len(recorded_steps))
arrays = {v: np.empty(shape) for v in ("loss", "symmetry", "directionality", "beta_symmetry")}
for (objective, factorised, s), rec in runs.items():
    for v in arrays:
        arrays[v][names.index(objective), int(factorised), seeds.index(s)] = rec[v]
dims = ("objective", "parameterisation", "seed", "step")
dataset = xr.Dataset(
    {v: (dims, a) for v, a in arrays.items()}
    | {
        "accumulated_symmetry": (("objective", "n_sequences"), [accumulated[o]["symmetry"] for o in names]),
        "accumulated_directionality": (("objective", "n_sequences"), [accumulated[o]["directionality"] for o in names]),
        "sgd_symmetry": (("objective", "step"), [sgd_runs[o]["symmetry"] for o in names]),
        "sgd_directionality": (("objective", "step"), [sgd_runs[o]["directionality"] for o in names]),
        "role_query": (("objective", "position"), [roles[o][0].numpy() for o in names]),
        "role_context": (("objective", "position"), [roles[o][1].numpy() for o in names]),
    },
    coords={
        "objective": names,
        "parameterisation": params_,
        "seed": seeds,
        "step": recorded_steps,
        "n_sequences": checkpoints,
        "position": np.arange(seq_len),
    },
)
dataset.attrs = results.provenance_attrs(
    parameters=parameters,
    scored_matrix="W_qk of a one-layer, one-head attention model on the copy task (d_model x d_model); "
    "accumulated_*: the summed update -dL/dW_qk at initialisation",
    title="02 gradient structure: toy updates and training, bidirectional versus causal",
)
results.save_dataset(dataset, results_dir / "02_gradient_structure.nc")
dataset
