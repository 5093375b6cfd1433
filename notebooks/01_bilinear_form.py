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
# # 01 · Self-attention as a bilinear form
#
# *Companion to Saponati, Sager, Vilimelis Aceituno, Stadelmann & Grewe, "The underlying structures of
# self-attention: symmetry, directionality, and emergent dynamics in Transformer training", ICML 2025
# (arXiv:2502.10927), section 2.*
#
# Before softmax, a self-attention head compares every query with every key. Written out for token
# embeddings $x_i \in \mathbb{R}^{d}$ (the rows of $X$) and head $h$ with $Q^h = X W_q^h$, $K^h = X W_k^h$
# ($W_q^h, W_k^h \in \mathbb{R}^{d \times d_{head}}$, the paper's row-vector convention), the comparison is a
# **bilinear form**:
#
# $$\hat a_{ij} = q_i^\top k_j = ((W_q^h)^\top x_i)^\top ((W_k^h)^\top x_j)
#   = x_i^\top \underbrace{W_q^h (W_k^h)^\top}_{W_{qk}^h} x_j
#   = \langle x_i, x_j \rangle_{W_{qk}^h}, \qquad \hat A^h = Q^h (K^h)^\top = X W_{qk}^h X^\top .$$
#
# So all a head "knows" about how tokens should attend to each other sits in one $d \times d$ matrix
# $W_{qk}^h$, the geometry under which the head compares tokens; a layer's matrix is the sum over its heads,
# $W_{qk} = \sum_h W_q^h (W_k^h)^\top$ (section 4 below). The paper asks what *shape* training gives
# this matrix: **symmetric** ($x_i$ attends to $x_j$ as much as $x_j$ to $x_i$) or **directional** (a few
# dominant columns: some tokens are attended to by everything).
#
# This notebook checks the identity on a toy BERT layer (random weights), splits $W_{qk}$ into its symmetric and
# skew-symmetric parts, and shows what the paper's two scores see.
#
# > Convention note. PyTorch stores a head's query weights as an `nn.Linear` weight of shape
# > `[d_head, d_model]` ($q = W x + b$), i.e. the transpose of the paper's $W_q^h$: the block `W_q[h]` is
# > $(W_q^h)^\top$. In code the head's matrix is therefore `M_h = W_q[h].T @ W_k[h]`, which is the paper's
# > $W_{qk}^h = W_q^h (W_k^h)^\top$, and the layer's is `sum_h W_q[h].T @ W_k[h]` (`attnstruct.wqk`).

# %% [markdown]
# **Learning goals.** After this notebook you can:
#
# * write a head's pre-softmax scores as the bilinear form $x_i^\top W_{qk}^h x_j$ plus bias terms, and say which
#   bias term changes attention;
# * split a matrix into its symmetric and skew-symmetric parts and read the symmetry score as the balance of
#   their energies;
# * compute directionality from row and column norms, and place a score against a null distribution before
#   reading structure into it;
# * tell the per-head matrices $W_q^h (W_k^h)^\top$ from the layer's sum, and why their scores differ.

# %% tags=["parameters"]
seed = 0  # seeds the model initialisation, the inputs and the example matrices
d_model = 64  # width of the toy BERT layer
n_heads = 4  # attention heads per layer
n_layers = 2  # layers of the toy BERT
seq_len = 12  # tokens in the test sequence
example_dim = 48  # size of the example matrices drawn below
null_draws = 200  # random matrices per null distribution that the scores are compared with
results_dir = None  # where the dataset goes; None: results/ of the work folder (attnstruct.work)
figures_dir = None  # where the figures go; None: figures/ of the work folder

# %% [markdown]
# ## Setup
#
# Every computation lives in the `attnstruct` package: the bilinear form and its parts in `attnstruct.bilinear`
# (also reachable as `at.wqk`, `at.symmetric_part`, ...), the two scores in `attnstruct.scores` (`at.scores`,
# `at.factor_scores`), and what this notebook checks and reads in `attnstruct.analyses.nb01_bilinear_form`. The
# cells below call those functions and draw the figures; a sentence that states a number is a template filled with
# the facts those functions return, never typed.

# %%
import matplotlib.pyplot as plt
import numpy as np
import torch

import attnstruct as at
from attnstruct import notebooks, results, work
from attnstruct.analyses import nb01_bilinear_form as bilinear_study
from attnstruct.report import plotting, prose

plotting.set_style()
results_dir, figures_dir = work.output_dirs(results_dir, figures_dir)
parameters = notebooks.notebook_parameters("01_bilinear_form", globals())  # recorded with the dataset

# %% [markdown]
# ## 1. The identity on a toy BERT layer
#
# We build a small BERT from a configuration (no download; random weights are enough to test an
# identity). BERT initialises the query/key biases at zero, trained checkpoints do not, so we give them
# random values: the check then covers the bias terms too. With biases, $q_i = (W_q^h)^\top x_i + b_q$ and
# $k_j = (W_k^h)^\top x_j + b_k$, so the logit of head $h$ is
#
# $$q_i^\top k_j = x_i^\top M_h x_j + x_i^\top W_q^h b_k + b_q^\top (W_k^h)^\top x_j + b_q^\top b_k,
#   \qquad M_h = W_{qk}^h,$$
#
# and attention uses $\mathrm{softmax}_j(q_i^\top k_j/\sqrt{d_{head}})$. The first term is the bilinear form the
# scores look at; the second and fourth are constant along $j$ and vanish in the softmax; the third, a
# key-side bias, is a real effect that $W_{qk}$ leaves out.
#
# The check runs the model on a random sentence of `seq_len` tokens and keeps, for every layer, the input that
# reaches its attention. From that input it computes the logits twice: once as the model does, by projecting to
# queries and keys and taking $Q K^\top$, and once from the factors alone, as $X M_h X^\top$ plus the three bias
# terms (`attnstruct.bilinear.bilinear_logits`). It then compares the softmax of the second with the attention
# probabilities that the model itself returns. The table gives the largest absolute difference of each, over
# every head and every pair of positions.

# %%
model, tokens = bilinear_study.toy_bert(d_model, n_heads, n_layers, seq_len, seed)
check = bilinear_study.identity_check(model, tokens)
check

# %% [markdown]
# Both differences sit at floating-point rounding (the model runs in float32): the bilinear form, plus its
# bias terms, *is* the attention logit, and softmax of it reproduces the probabilities the model itself
# returns. The same check, run on every architecture the project reads, is how `attnstruct` proves that it
# extracts $W_q$ and $W_k$ correctly.

# %% tags=["nbval-check-output"]
logits_agree = bool(check["max |QK^T - bilinear|"].max() < 1e-10)
attention_agrees = bool(check["max |softmax - model attention|"].max() < 1e-6)
print(f"Q K^T = X M_h X^T + bias terms, every layer and head (max abs error < 1e-10): {logits_agree}")
print(f"softmax of it = the model's attention, float32 model (max abs error < 1e-6): {attention_agrees}")
if not (logits_agree and attention_agrees):
    raise RuntimeError("the bilinear form does not reproduce the layer's attention; extraction is wrong")

# %% [markdown]
# ## 2. Symmetric and skew-symmetric parts
#
# Every square matrix splits uniquely into a symmetric and a skew-symmetric part,
#
# $$M = M_s + M_n,\qquad M_s = \tfrac12 (M + M^\top),\qquad M_n = \tfrac12 (M - M^\top),$$
#
# and the two are orthogonal in the Frobenius inner product, so $\|M\|_F^2 = \|M_s\|_F^2 + \|M_n\|_F^2$.
# The symmetric part scores pairs the same way in both directions ($x_i^\top M_s x_j = x_j^\top M_s x_i$);
# the skew part scores them with opposite signs. The paper's **symmetry score** measures which part
# carries the energy:
#
# $$s(M) = \frac{\|M_s\|_F^2 - \|M_n\|_F^2}{\|M\|_F^2} \in [-1, 1].$$
#
# Below: layer 0 of the toy BERT (summed over heads). It is untrained: BERT draws $W_q$ and $W_k$ with
# i.i.d. Gaussian entries, so the layer is a draw of a null ensemble. This is a preview: notebook 02 builds the
# null ensembles and how a score is read against them (its `factors H=h, layer` ensemble is this one). Here the
# layer's symmetry is compared with that ensemble's draws of the same width and head count: `null_draws`
# random layers, each a sum over `n_heads` heads of products of independent Gaussian factors. A value inside
# the central 95% of those draws is what chance gives; only a value outside it would say that one part carries
# more energy than chance lets it. The first printed line checks the energy identity on this matrix.

# %%
w_q, w_k, _, _ = bilinear_study.layer_factors(model.encoder.layer[0], n_heads)
m_layer = at.wqk(w_q, w_k)  # sum over heads, [d_model, d_model]
m_s, m_n = at.symmetric_part(m_layer), at.skew_part(m_layer)
energy = {name: float((part**2).sum()) for name, part in [("M", m_layer), ("M_s", m_s), ("M_n", m_n)]}
print(f"||M||^2 = {energy['M']:.4f}   ||M_s||^2 + ||M_n||^2 = {energy['M_s'] + energy['M_n']:.4f}")
head_scores, layer_scores = bilinear_study.head_and_layer_scores(model)
layer_places = bilinear_study.place_layers(layer_scores, d_model, n_heads, null_draws, seed)
first_layer = bilinear_study.first_layer_among_random(layer_places, null_draws)
prose.say(
    "Symmetry of layer 0 (untrained): {symmetry}, percentile {symmetry_percentile} of {draws} random layers of the "
    "same shape (95% range {symmetry_low} to {symmetry_high}): outside that range."
    if first_layer.symmetry_outside
    else "Symmetry of layer 0 (untrained): {symmetry}, percentile {symmetry_percentile} of {draws} random layers of "
    "the same shape (95% range {symmetry_low} to {symmetry_high}): inside it, so neither part dominates beyond chance.",
    first_layer,
)

# %% tags=["hide-input"]
limit = float(m_layer.abs().max())
fig, axes = plt.subplots(1, 3, figsize=(11, 3.6))
for ax, part, title in zip(
    axes, (m_layer, m_s, m_n), ("$W_{qk}$ (layer 0)", "symmetric part $M_s$", "skew part $M_n$")
):
    image = plotting.matrix_heatmap(ax, part, title=title, limit=limit, colorbar=False)
fig.colorbar(image, ax=list(axes), fraction=0.02, pad=0.02)
shares = bilinear_study.energy_shares(energy)
title = prose.fill(
    "An untrained layer: its symmetric part carries {symmetric} of the energy, its skew part {skew}", shares
)
plotting.message_title(fig, title)
plotting.savefig(fig, figures_dir / "01_decomposition")
plt.show()

# %% [markdown]
# The three panels share one colour scale, so their entries compare directly. The symmetric part is the mirror
# image of itself across the diagonal, the skew part the negative mirror image, with a zero diagonal. In an
# untrained layer neither pattern stands out: the two parts carry about the same energy, which is what a
# symmetry score near the middle of its null says.
#
# ## 3. What the scores see
#
# **Symmetry** is +1 for a symmetric matrix, -1 for a skew-symmetric one and close to 0 for a matrix with
# independent entries. **Directionality** looks at the Euclidean norms of rows ($r_i$) and columns ($c_j$):
# with thresholds $\tau = \text{mean} + 2\,\text{std}$ of each set of norms, it sums the excess of the
# outlying rows, $R = \sum_i (r_i - \tau_r)_+$, and of the outlying columns, $C$, and reports
#
# $$\mathrm{dir}(M) = \frac{R - C}{R + C} \in [-1, 1].$$
#
# Negative values mean **column dominance**: a few columns, that is a few key-side directions $x_j$, carry
# outsized weight, so some tokens are attended to by everything. This is the signature the paper links to
# autoregressive training. A symmetric matrix has identical row and column norms and scores exactly 0.
#
# Five example matrices of size `example_dim` show what each score responds to: one with i.i.d. Gaussian
# entries (no structure), its symmetric and its skew-symmetric part (symmetry at its two extremes), and two
# Gaussian matrices with three columns, or three rows, scaled up (`attnstruct.random_matrices.example_matrix`).
# Each panel's title gives its two scores.

# %%
matrices = bilinear_study.example_matrices(example_dim, seed)
example_scores = {kind: at.scores(m) for kind, m in matrices.items()}

# %% tags=["hide-input"]
# One colour scale for all five panels, symmetric about 0, set by the unplanted examples' largest entry: the
# planted columns and rows (the examples' `gain` times larger) saturate it.
limit = max(float(matrices[kind].abs().max()) for kind in ("gaussian", "symmetric", "skew"))
fig, axes = plt.subplots(1, len(matrices), figsize=(3.1 * len(matrices), 3.4))
for ax, (kind, m) in zip(axes, matrices.items()):
    s = example_scores[kind]
    image = plotting.matrix_heatmap(ax, m, colorbar=False, limit=limit)
    title = bilinear_study.EXAMPLE_TITLES[kind]
    ax.set_title(f"{title}\nsym {prose.signed(s.symmetry)}   dir {prose.signed(s.directionality)}", fontsize=10)
colorbar = fig.colorbar(image, ax=list(axes), fraction=0.012, pad=0.015, extend="both")
colorbar.set_label("entry")
structured = bilinear_study.structured_example_scores(example_scores)
title = prose.fill(
    "Symmetry answers to mirror structure ({symmetric} symmetric, {skew} skew), directionality to dominant columns "
    "({columns}) and rows ({rows})",
    structured,
)
plotting.message_title(fig, title)
plotting.savefig(fig, figures_dir / "01_examples")
plt.show()

# %% [markdown]
# The five panels share one colour scale, symmetric about 0, so their entries compare directly: the planted
# columns and rows, several times larger than the rest, saturate it (the colour bar's arrows).
#
# A caution about directionality on unstructured matrices: whether a chance outlier row or column crosses
# the threshold decides the score, so at this size it swings widely around 0 from one random draw to the
# next (rerun with another `seed`), while symmetry stays close to 0. Notebook 02 measures both null spreads;
# as a preview of it, each example is placed among `null_draws` i.i.d. Gaussian matrices of its size (the `gaussian` ensemble
# of `attnstruct.analyses.null_ensembles.null_distribution`): only a score outside that null's 95% range says
# something about structure. The table gives, for every example and score, the value, its percentile among the
# random matrices, the null's range and whether the value lies outside it.

# %%
example_places = bilinear_study.place_examples(matrices, null_draws, seed)
print(example_places.round(3).to_string())
examples_null = bilinear_study.examples_among_gaussian(example_places, null_draws, example_dim)
prose.say(
    "Among {draws} Gaussian matrices of size {size}, directionality's 95% range is {low} to {high}; the example "
    "scores outside their null's range: {outside}."
    if examples_null.any_outside
    else "Among {draws} Gaussian matrices of size {size}, directionality's 95% range is {low} to {high}; no example "
    "score lies outside its null's range.",
    examples_null,
)

# %% [markdown]
# **Predict, then run.** Edit the matrix below (a mirrored pair, a one-way link, a column raised; change any of
# them), write down your prediction of both scores, then run the cell. Which edit moves symmetry towards +1,
# which towards -1, and which makes directionality negative?

# %%
sandbox = torch.zeros(8, 8, dtype=torch.float64)
sandbox[0, 1] = sandbox[1, 0] = 1.0  # a mirrored pair: symmetric structure
sandbox[2, 3] = 1.0  # a one-way link: half symmetric, half skew
sandbox[:, 5] += 3.0  # one column raised: a key every query attends to
sandbox_scores = at.scores(sandbox)
print(f"symmetry {prose.signed(sandbox_scores.symmetry)}, directionality {prose.signed(sandbox_scores.directionality)}")

# %% [markdown]
# How directionality decides: the row and column norms of the "dominant columns" example, with the
# mean + 2 std thresholds. The three planted columns exceed theirs by far; a row or two may cross its
# threshold by chance, but only just, so $C \gg R$ and the score is negative. The score keeps only the
# balance $(R - C)/(R + C)$ of the two excesses, not their size: a Gaussian matrix whose one chance outlier
# barely crosses its threshold scores $\pm 1$ (the null's range above), with excesses as small as the
# Gaussian example's $R$ and $C$ below. That is why, at this size, the planted examples' directionality
# need not lie outside the Gaussian null's range (the table above says where it lies), although their
# excesses are far larger.

# %% tags=["hide-input"]
m = matrices["columns"]
fig, axes = plt.subplots(1, 2, figsize=(10, 3), sharey=True)
for ax, values, name, color in zip(
    axes, (m.norm(dim=1), m.norm(dim=0)), ("row", "column"), (plotting.NEUTRAL_COLOR, plotting.DECODER_COLOR)
):
    ax.bar(np.arange(len(values)), values.numpy(), color=color)
    ax.axhline(float(values.mean() + 2 * values.std()), color="black", lw=1, ls="--", label="mean + 2 std")
    ax.set_xlabel(f"{name} index")
    ax.set_title(f"{name} norms")
axes[0].set_ylabel("Euclidean norm")
axes[0].legend()
norms = bilinear_study.dominant_columns(m, float(example_scores["columns"].directionality))
title = prose.fill(
    "{columns} and {rows} pass their threshold: C = {C} against R = {R}, so directionality is {directionality}", norms
)
plotting.message_title(fig, title)
plotting.savefig(fig, figures_dir / "01_directionality_norms")
plt.show()

# %%
for kind in ("columns", "gaussian"):
    row_excess, col_excess = at.row_column_excess(matrices[kind])
    print(
        f"{kind:<9} R = {float(row_excess):.2f}, C = {float(col_excess):.2f}, "
        f"(R - C)/(R + C) = {float(at.directionality_score(matrices[kind])):+.3f}"
    )

# %% [markdown]
# ## 4. One matrix per head, or one per layer?
#
# A layer with $H$ heads has $H$ bilinear forms $M_h = W_{qk}^h = W_q^h (W_k^h)^\top$, each of rank at most
# $d_{head}$. The paper's tables score **their sum** $W_{qk} = \sum_h M_h$ (a full-rank $d \times d$ matrix
# per layer); the authors' training logs scored each head separately. The two are different quantities: a
# sum of matrices can be more or less symmetric than its terms. We report both throughout, named.
#
# A symmetric initialisation ($W_q^h = W_k^h$, notebook 06) makes every $M_h = W_k^h (W_k^h)^\top$ symmetric
# and positive semi-definite, so every head and their sum score exactly +1 and 0. The printout gives each
# layer's scores per head and summed, then those of layer 0 with its queries tied to its keys; the sentences
# place each layer's summed scores among random layers of its shape, as section 2 did for layer 0's symmetry.

# %%
tied = at.factor_scores(w_k, w_k, sum_heads=True)
for index, (per_head, summed) in enumerate(zip(head_scores, layer_scores)):
    print(
        f"layer {index}: per head sym {np.round(per_head.symmetry.numpy(), 3)}, dir {np.round(per_head.directionality.numpy(), 3)}"
        f" | summed sym {float(summed.symmetry):+.3f}, dir {float(summed.directionality):+.3f}"
    )
print(f"W_q = W_k (layer 0 keys): sym {float(tied.symmetry):+.3f}, dir {float(tied.directionality):+.3f}")
for placed_layer in bilinear_study.layers_among_random(layer_places, null_draws):
    prose.say(
        "Layer {layer}, summed over heads, against {draws} random layers of the same shape: symmetry {symmetry} at "
        "percentile {symmetry_percentile} (95% range {symmetry_low} to {symmetry_high}, {symmetry_where}); "
        "directionality {directionality} at percentile {directionality_percentile} (95% range {directionality_low} "
        "to {directionality_high}, {directionality_where}).",
        placed_layer,
    )

# %% [markdown]
# The untrained layers are draws of that null ensemble, so their scores read as chance (above: where they
# fall in it); in particular a directionality far from 0 here is no evidence of column dominance, however
# large it looks. Structure shows only as a score outside the null's range, as for the tied layer's
# symmetry ($W_q = W_k$, +1) above. Pretrained encoders score well above their nulls and pretrained decoders
# show column dominance (the paper, section 4; the numbers are in `docs/paper-notes.md`); notebooks 04 to 06
# show how training produces this, and notebook 03 compares each pretrained model with the null of its shape.
#
# ## 5. Save the results
#
# One dataset holds what this notebook measured: each layer's scores summed over heads and per head, the example
# matrices' scores, and the largest errors of the identity check, with the parameters and the library versions
# that produced them in its attributes.

# %%
dataset = bilinear_study.results_dataset(head_scores, layer_scores, example_scores, check)
dataset.attrs = results.provenance_attrs(
    parameters=parameters,
    scored_matrix=(
        "symmetry/directionality: W_qk = sum_h W_q^h (W_k^h)^T per layer of an untrained toy BERT (d_model x "
        "d_model; in nn.Linear weights sum_h W_q[h]^T W_k[h]); head_*: W_q^h (W_k^h)^T per head; example_*: the "
        "example matrices of section 3"
    ),
    title="01 bilinear form: identity check and scores of a toy BERT",
)
results.save_dataset(dataset, results_dir / "01_bilinear_form.nc")
dataset

# %% [markdown]
# ## Exercises
#
# Each exercise has a cell to complete and a locked check cell that runs it on small inputs of its own (not
# the parameters above), against `attnstruct` or PyTorch. Names you define start with `ex_`.
#
# ### Exercise 01.1: the logits of a head with biases, through $W_{qk}$
#
# > **Difficulty** 3/5 · **Importance** 4/5 · **About** 15 min
#
# Write `ex_logits(x, w_q, w_k, b_q, b_k)`: the pre-softmax scores $q_i^\top k_j$ of one head, an $N \times N$
# matrix, for inputs `x` ($N \times d$), `nn.Linear` weights `w_q`, `w_k` ($d_{head} \times d$, so that the
# query of token $i$ is `w_q @ x[i] + b_q`) and biases `b_q`, `b_k` ($d_{head}$). Do not form $Q$ or $K$: use
# the head's matrix `m = w_q.T @ w_k` and the bias vectors, as in the four-term formula of section 1. The check
# builds a query and a key `nn.Linear` layer with random biases and compares your matrix with `Q @ K.T`.
#
# Hint: expand `(w_q @ x[i] + b_q) @ (w_k @ x[j] + b_k)`. Besides the bilinear term, one term depends on $i$
# only (a column), one on $j$ only (a row) and one on neither (a number); `[:, None]` and `[None, :]` place
# them.


# %% nbgrader={"grade": false, "grade_id": "ex-01-1", "locked": false, "schema_version": 3, "solution": true}
def ex_logits(x, w_q, w_k, b_q, b_k):
    """q_i . k_j for x [N, d], w_q, w_k [d_head, d] (nn.Linear layout), b_q, b_k [d_head]; returns [N, N]."""
    ### BEGIN SOLUTION
    m = w_q.T @ w_k  # the head's bilinear form, [d, d]
    query_side = (x @ w_q.T @ b_k)[:, None]  # x_i^T W_q^T b_k: constant along j, no effect on softmax_j
    key_side = (x @ w_k.T @ b_q)[None, :]  # b_q^T W_k x_j: changes attention, and W_qk leaves it out
    return x @ m @ x.T + query_side + key_side + b_q @ b_k
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex-01-1-check", "locked": true, "points": 3, "schema_version": 3, "solution": false}
chk_gen = torch.Generator().manual_seed(11)
for chk_n, chk_d, chk_dh in [(5, 8, 4), (9, 6, 2)]:
    chk_query = torch.nn.Linear(chk_d, chk_dh, dtype=torch.float64)
    chk_key = torch.nn.Linear(chk_d, chk_dh, dtype=torch.float64)
    with torch.no_grad():
        for chk_p in [*chk_query.parameters(), *chk_key.parameters()]:
            chk_p.copy_(torch.randn(chk_p.shape, generator=chk_gen, dtype=torch.float64))
        chk_x = torch.randn(chk_n, chk_d, generator=chk_gen, dtype=torch.float64)
        chk_expected = chk_query(chk_x) @ chk_key(chk_x).T
        chk_got = torch.as_tensor(
            ex_logits(chk_x, chk_query.weight, chk_key.weight, chk_query.bias, chk_key.bias), dtype=torch.float64
        )
        chk_no_bias = float((chk_x @ chk_query.weight.T @ chk_key.weight @ chk_x.T - chk_expected).abs().max())
    assert tuple(chk_got.shape) == (chk_n, chk_n), (
        f"expected an [N, N] = [{chk_n}, {chk_n}] matrix, got {tuple(chk_got.shape)}"
    )
    chk_error = float((chk_got - chk_expected).abs().max())
    assert chk_error < 1e-10, (
        f"max |yours - Q K^T| = {chk_error:.3g} (the bilinear term alone is off by {chk_no_bias:.3g}): "
        "check each of the three bias terms and where it broadcasts"
    )
print("your bilinear form plus bias terms reproduces Q K^T")

# %% [markdown]
# ### Exercise 01.2: the symmetric/skew split and the energy identity
#
# > **Difficulty** 1/5 · **Importance** 4/5 · **About** 8 min
#
# Write `ex_split(m)` returning the pair $(M_s, M_n)$ of a square matrix. The check verifies $M = M_s + M_n$,
# the symmetry of $M_s$ and skew-symmetry of $M_n$, agreement with `attnstruct.symmetric_part`/`skew_part`, and
# the identity $\|M\|_F^2 = \|M_s\|_F^2 + \|M_n\|_F^2$ on random matrices of several sizes.
#
# Then convince yourself why the identity holds: the cross term is $2\langle M_s, M_n\rangle_F =
# 2\operatorname{tr}(M_s^\top M_n)$; what is $\operatorname{tr}(S^\top A)$ for a symmetric $S$ and a skew $A$?
#
# In the cell after the check, write why the identity holds.


# %% nbgrader={"grade": false, "grade_id": "ex-01-2", "locked": false, "schema_version": 3, "solution": true}
def ex_split(m):
    """(M_s, M_n): the symmetric and skew-symmetric parts of a square matrix m [d, d]."""
    ### BEGIN SOLUTION
    return (m + m.T) / 2, (m - m.T) / 2
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex-01-2-check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
chk_gen = torch.Generator().manual_seed(12)
for chk_d in (2, 7, 30):
    chk_m = torch.randn(chk_d, chk_d, generator=chk_gen, dtype=torch.float64)
    chk_s, chk_n = (torch.as_tensor(part, dtype=torch.float64) for part in ex_split(chk_m))
    assert torch.allclose(chk_s + chk_n, chk_m, atol=1e-12), "M_s + M_n must give back M"
    assert torch.allclose(chk_s, chk_s.T, atol=1e-12), "M_s must be symmetric: M_s^T = M_s"
    assert torch.allclose(chk_n, -chk_n.T, atol=1e-12), "M_n must be skew-symmetric: M_n^T = -M_n"
    assert torch.allclose(chk_s, at.symmetric_part(chk_m)) and torch.allclose(chk_n, at.skew_part(chk_m)), (
        "your parts differ from attnstruct.symmetric_part / skew_part"
    )
    chk_total, chk_sum = float((chk_m**2).sum()), float((chk_s**2).sum() + (chk_n**2).sum())
    assert abs(chk_total - chk_sum) < 1e-12 * chk_total, f"||M||^2 = {chk_total}, ||M_s||^2 + ||M_n||^2 = {chk_sum}"
print("M = M_s + M_n and ||M||^2 = ||M_s||^2 + ||M_n||^2 hold for your split")

# %% [markdown] nbgrader={"grade": true, "grade_id": "ex-01-2-explain", "locked": false, "points": 1, "schema_version": 3, "solution": true}
# **Why the identity holds.** The cross term is $2\operatorname{tr}(M_s^\top M_n) = 2\operatorname{tr}(S A)$ for a
# symmetric $S$ and a skew $A$. Transposing inside the trace changes nothing: $\operatorname{tr}(SA) =
# \operatorname{tr}((SA)^\top) = \operatorname{tr}(A^\top S^\top) = -\operatorname{tr}(AS) = -\operatorname{tr}(SA)$,
# so it is its own negative, zero. Symmetric and skew matrices are orthogonal in the Frobenius inner product, and
# the squared norms add as for two perpendicular vectors.

# %% [markdown]
# ### Exercise 01.3: the symmetry of a rank-one form
#
# > **Difficulty** 3/5 · **Importance** 3/5 · **About** 15 min
#
# A head with $d_{head} = 1$ has the rank-one matrix $M = x y^\top$ (in code `torch.outer(x, y)`). Show that its
# symmetry score is $\cos^2$ of the angle between $x$ and $y$: work out $\operatorname{tr}(M M)$ and
# $\|M\|_F^2$ by hand, then write `ex_rank_one_symmetry(x, y)` from $x$ and $y$ alone, without forming $M$. The
# check compares it with `attnstruct.symmetry_score(torch.outer(x, y))` on random vectors and on a few special
# pairs. What does it tell you about the sign a rank-one head can score?
#
# Answer that in the cell after the check.


# %% nbgrader={"grade": false, "grade_id": "ex-01-3", "locked": false, "schema_version": 3, "solution": true}
def ex_rank_one_symmetry(x, y):
    """Symmetry score of M = x y^T for vectors x, y [d], without forming M."""
    ### BEGIN SOLUTION
    return float((x @ y) ** 2 / ((x @ x) * (y @ y)))  # tr(MM) = (y.x)^2, ||M||^2 = |x|^2 |y|^2
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex-01-3-check", "locked": true, "points": 3, "schema_version": 3, "solution": false}
chk_gen = torch.Generator().manual_seed(13)
chk_pairs = [tuple(torch.randn(2, chk_d, generator=chk_gen, dtype=torch.float64)) for chk_d in (2, 3, 8, 40, 40)]
chk_x = torch.randn(6, generator=chk_gen, dtype=torch.float64)
chk_orth = torch.randn(6, generator=chk_gen, dtype=torch.float64)
chk_orth = chk_orth - (chk_orth @ chk_x) / (chk_x @ chk_x) * chk_x  # orthogonal to chk_x
chk_pairs += [(chk_x, chk_x), (chk_x, -2 * chk_x), (chk_x, chk_orth)]
for chk_a, chk_b in chk_pairs:
    chk_got = float(ex_rank_one_symmetry(chk_a, chk_b))
    chk_want = float(at.symmetry_score(torch.outer(chk_a, chk_b)))
    assert abs(chk_got - chk_want) < 1e-10, f"d = {len(chk_a)}: yours {chk_got:+.6f}, attnstruct {chk_want:+.6f}"
print("symmetry(x y^T) = cos^2(x, y) on every pair")

# %% [markdown] nbgrader={"grade": true, "grade_id": "ex-01-3-explain", "locked": false, "points": 1, "schema_version": 3, "solution": true}
# **The sign a rank-one head can score.** $\operatorname{tr}(MM) = \operatorname{tr}(x y^\top x y^\top) =
# (y^\top x)^2$ and $\|M\|_F^2 = \|x\|^2 \|y\|^2$, so the score is $\cos^2$ of the angle between $x$ and $y$: never
# negative. A head with $d_{head} = 1$ scores between $0$ (query and key directions orthogonal) and $+1$ (parallel
# or opposite); a negative score needs a rank of at least two.

# %% [markdown]
# ### Exercise 01.4: one matrix per head, or one per layer
#
# > **Difficulty** 3/5 · **Importance** 4/5 · **About** 15 min
#
# Section 4 warned that the layer's sum $\sum_h W_q^h (W_k^h)^\top$ can be more symmetric than its heads. Make
# it extreme: set `ex_w_q` and `ex_w_k`, per-head weights of shape `[H, d_head, d_model]` (the `nn.Linear`
# layout of `bilinear_study.layer_factors`, $H \ge 2$), such that **every head** scores symmetry exactly 0 while **the layer**
# scores exactly +1. Two heads with $d_{head} = 1$ and $d_{model} = 2$ are enough.
#
# Hints: a head with $d_{head} = 1$ is the rank-one matrix of Exercise 01.3; when does it score 0? Then ask
# the converse: can every head score +1 and the layer less? (What is a sum of symmetric matrices?)
#
# Answer the converse, with its reason, in the cell after the check.

# %% nbgrader={"grade": false, "grade_id": "ex-01-4", "locked": false, "schema_version": 3, "solution": true}
### BEGIN SOLUTION
# head 0: query e_1, key e_2 (M_0 = e_1 e_2^T); head 1: query e_2, key e_1 (M_1 = e_2 e_1^T); the sum is symmetric
ex_w_q = torch.tensor([[[1.0, 0.0]], [[0.0, 1.0]]], dtype=torch.float64)
ex_w_k = torch.tensor([[[0.0, 1.0]], [[1.0, 0.0]]], dtype=torch.float64)
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "ex-01-4-check", "locked": true, "points": 3, "schema_version": 3, "solution": false}
chk_w_q, chk_w_k = torch.as_tensor(ex_w_q, dtype=torch.float64), torch.as_tensor(ex_w_k, dtype=torch.float64)
assert chk_w_q.ndim == 3 and chk_w_q.shape == chk_w_k.shape and chk_w_q.shape[0] >= 2, (
    f"need two arrays of the same shape [H, d_head, d_model] with H >= 2, got {tuple(chk_w_q.shape)} and "
    f"{tuple(chk_w_k.shape)}"
)
chk_heads = at.factor_scores(chk_w_q, chk_w_k)  # one score per head, [H]
chk_layer = at.factor_scores(chk_w_q, chk_w_k, sum_heads=True)  # the sum over heads
assert bool((chk_heads.symmetry.abs() < 1e-12).all()), f"every head must score 0; yours: {chk_heads.symmetry.tolist()}"
assert float(chk_layer.symmetry) > 1 - 1e-12, f"the layer must score +1; yours: {float(chk_layer.symmetry):+.6f}"
print("every head scores 0, their sum +1")

# %% [markdown] nbgrader={"grade": true, "grade_id": "ex-01-4-explain", "locked": false, "points": 1, "schema_version": 3, "solution": true}
# **Why heads at 0 can sum to +1, and not the converse.** Each head is rank one, $x y^\top$ with $x \perp y$,
# so it scores $\cos^2 = 0$ (Exercise 01.3). The two heads' matrices $e_1 e_2^\top$ and $e_2 e_1^\top$ are each
# other's transposes, so their sum is symmetric and scores $+1$. The converse cannot happen: a head scores $+1$ only
# when its matrix is symmetric, and a sum of symmetric matrices is symmetric, so heads all at $+1$ give a layer at
# $+1$ (unless the sum is zero).

# %% [markdown]
# ## What to take away
#
# * Before the softmax, a head compares tokens through one $d \times d$ matrix, $W_{qk}^h = W_q^h (W_k^h)^\top$:
#   the logit is the bilinear form $x_i^\top W_{qk}^h x_j$ plus bias terms, of which only the key-side one changes
#   attention. Scoring $W_{qk}$ is scoring what the head can compare.
# * Every matrix splits into Frobenius-orthogonal symmetric and skew parts; the symmetry score is the balance of
#   their energies, and a rank-one form $x y^\top$ is never skew-dominated (its score is $\cos^2(x, y)$).
# * Directionality weighs outlying rows against outlying columns; on unstructured matrices it swings widely,
#   so a score says something only when it falls outside the null distribution of its shape.
# * Per-head matrices and their sum over heads are different quantities: the sum can be more symmetric than
#   every one of its heads.

# %% [markdown]
# ## Knobs to try
#
# * `seed`: another model, input and set of examples. The identity checks still hold to rounding; the Gaussian
#   example's directionality jumps around while its symmetry stays near 0.
# * `example_dim` up (e.g. 192): the unstructured examples' symmetry moves closer to 0, while the Gaussian
#   null's range of directionality narrows only slowly.
# * `null_draws` up (e.g. 1000): the percentiles and 95% ranges quoted against the null settle (less jitter
#   between seeds), at a cost linear in the draws.
# * `n_heads` at fixed `d_model` (it must divide it): each head's matrix has lower rank $d/H$ while the layer's
#   sum stays full rank; compare the per-head and summed scores printed in section 4.
