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
# # 01 · Self-attention as a bilinear form
#
# *Companion to Saponati, Sager, Vilimelis Aceituno, Stadelmann & Grewe, "The underlying structures of
# self-attention: symmetry, directionality, and emergent dynamics in Transformer training", ICML 2025
# (arXiv:2502.10927), section 2.*
#
# Before softmax, a self-attention head compares every query with every key. Written out for token
# embeddings $x_i \in \mathbb{R}^{d}$ (the rows of $X$), the comparison is a **bilinear form**:
#
# $$\hat a_{ij} = q_i^\top k_j = (W_q^\top x_i)^\top (W_k^\top x_j) = x_i^\top \underbrace{W_q W_k^\top}_{W_{qk}} x_j
#   = \langle x_i, x_j \rangle_{W_{qk}}, \qquad \hat A = X W_{qk} X^\top .$$
#
# So all a head "knows" about how tokens should attend to each other sits in one $d \times d$ matrix
# $W_{qk}$, the geometry under which the head compares tokens. The paper asks what *shape* training gives
# this matrix: **symmetric** ($x_i$ attends to $x_j$ as much as $x_j$ to $x_i$) or **directional** (a few
# dominant columns: some tokens are attended to by everything).
#
# This notebook checks the identity on a real attention layer, splits $W_{qk}$ into its symmetric and
# skew-symmetric parts, and shows what the paper's two scores see.
#
# > Convention note. PyTorch stores a head's query weights as an `nn.Linear` weight of shape
# > `[d_head, d_model]` ($q = W x + b$), i.e. the transpose of the paper's $W_q$. In code the head's matrix
# > is therefore `M_h = W_q[h].T @ W_k[h]`, which is the paper's $W_q^h {W_k^h}^\top$.

# %% tags=["parameters"]
seed = 0  # seeds the model initialisation, the inputs and the example matrices
d_model = 64  # width of the toy BERT layer
n_heads = 4  # attention heads per layer
n_layers = 2  # layers of the toy BERT
seq_len = 12  # tokens in the test sequence
example_dim = 48  # size of the example matrices drawn below
results_dir = "../build/interactive/results"  # where the dataset goes
figures_dir = "../build/interactive/figures"  # where the figures go

# %% [markdown]
# ## Setup
# Every computation lives in the `attnstruct` package; this notebook only calls it and draws.

# %%
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
import xarray as xr
from transformers import BertConfig, BertModel

import attnstruct as at
from attnstruct import pipeline, plotting, results, toys

plotting.set_style()
torch.manual_seed(seed)
results_dir, figures_dir = Path(results_dir), Path(figures_dir)
if d_model % n_heads:
    raise ValueError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads})")
d_head = d_model // n_heads

# %% [markdown]
# ## 1. The identity on a real attention layer
#
# We build a small BERT from a configuration (no download; random weights are enough to test an
# identity). BERT initialises the query/key biases at zero, trained checkpoints do not, so we give them
# random values: the check then covers the bias terms too. With biases the logit of head $h$ is
#
# $$q_i^\top k_j = x_i^\top M_h x_j + x_i^\top W_q^{h\top} b_k + b_q^\top W_k^h x_j + b_q^\top b_k,$$
#
# and attention uses $\mathrm{softmax}_j(q_i^\top k_j/\sqrt{d_{head}})$. The first term is the bilinear form the
# scores look at; the second and fourth are constant along $j$ and vanish in the softmax; the third, a
# key-side bias, is a real effect that $W_{qk}$ leaves out.

# %%
config = BertConfig(
    vocab_size=200,
    hidden_size=d_model,
    num_hidden_layers=n_layers,
    num_attention_heads=n_heads,
    intermediate_size=4 * d_model,
    max_position_embeddings=max(64, seq_len),
    hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0,
)
model = BertModel(config, add_pooling_layer=False).eval()
model.set_attn_implementation("eager")  # eager attention returns the attention probabilities
with torch.no_grad():
    for layer in model.encoder.layer:
        layer.attention.self.query.bias.normal_(0, 0.5)
        layer.attention.self.key.bias.normal_(0, 0.5)

tokens = torch.randint(0, config.vocab_size, (1, seq_len))
with torch.no_grad():
    out = model(tokens, output_hidden_states=True, output_attentions=True)


def layer_factors(layer):
    """Per-head query/key weights [H, d_head, d_model] and biases [H, d_head] of one BERT layer."""
    attn = layer.attention.self
    return (
        at.split_heads(attn.query.weight, n_heads),
        at.split_heads(attn.key.weight, n_heads),
        attn.query.bias.reshape(n_heads, d_head),
        attn.key.bias.reshape(n_heads, d_head),
    )


rows = []
for index, layer in enumerate(model.encoder.layer):
    attn = layer.attention.self
    w_q, w_k, b_q, b_k = layer_factors(layer)
    x = out.hidden_states[index][0].double()  # the layer's input, [N, d_model]
    with torch.no_grad():
        q = (x @ attn.query.weight.double().T + attn.query.bias.double()).reshape(seq_len, n_heads, d_head)
        k = (x @ attn.key.weight.double().T + attn.key.bias.double()).reshape(seq_len, n_heads, d_head)
    qk = torch.einsum("ihd,jhd->hij", q, k)  # Q K^T per head, [H, N, N]
    bilinear = at.bilinear_logits(x, w_q, w_k, b_q, b_k)  # X M_h X^T + bias terms, [H, N, N]
    probs = torch.softmax(bilinear / d_head**0.5, dim=-1)
    rows.append(
        {
            "layer": index,
            "max |QK^T - bilinear|": float((qk - bilinear).abs().max()),
            "max |softmax - model attention|": float((probs - out.attentions[index][0].double()).abs().max()),
        }
    )
check = pd.DataFrame(rows).set_index("layer")
check

# %% [markdown]
# Both differences sit at floating-point rounding (the model runs in float32): the bilinear form, plus its
# bias terms, *is* the attention logit, and softmax of it reproduces the probabilities the model itself
# returns. The same check, run on every architecture the project reads, is how `attnstruct` proves that it
# extracts $W_q$ and $W_k$ correctly.

# %%
if check["max |softmax - model attention|"].max() > 1e-5 or check["max |QK^T - bilinear|"].max() > 1e-4:
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
# Below: layer 0 of the toy BERT (summed over heads), which is untrained, so neither part dominates.

# %%
w_q, w_k, _, _ = layer_factors(model.encoder.layer[0])
m_layer = at.wqk(w_q, w_k)  # sum over heads, [d_model, d_model]
m_s, m_n = at.symmetric_part(m_layer), at.skew_part(m_layer)
norms = {name: float((part**2).sum()) for name, part in [("M", m_layer), ("M_s", m_s), ("M_n", m_n)]}
print(f"||M||^2 = {norms['M']:.4f}   ||M_s||^2 + ||M_n||^2 = {norms['M_s'] + norms['M_n']:.4f}")
print(f"symmetry score of layer 0 (untrained): {at.symmetry_score(m_layer):+.3f}")

limit = float(m_layer.abs().max())
fig, axes = plt.subplots(1, 3, figsize=(11, 3.6))
for ax, part, title in zip(
    axes, (m_layer, m_s, m_n), ("$W_{qk}$ (layer 0)", "symmetric part $M_s$", "skew part $M_n$")
):
    image = plotting.matrix_heatmap(ax, part, title=title, limit=limit, colorbar=False)
fig.colorbar(image, ax=list(axes), fraction=0.02, pad=0.02)
fig.suptitle("An untrained layer: symmetric and skew parts carry similar energy", y=1.02)
plotting.savefig(fig, figures_dir / "01_decomposition")
plt.show()

# %% [markdown]
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

# %%
kinds = ("gaussian", "symmetric", "skew", "columns", "rows")
titles = ("i.i.d. Gaussian", "symmetric", "skew-symmetric", "3 dominant columns", "3 dominant rows")
gen = toys.generator(seed, 1)
examples = {kind: toys.example_matrix(kind, example_dim, gen) for kind in kinds}
example_scores = {kind: at.scores(m) for kind, m in examples.items()}

fig, axes = plt.subplots(1, len(kinds), figsize=(3.1 * len(kinds), 3.4))
for ax, kind, title in zip(axes, kinds, titles):
    s = example_scores[kind]
    plotting.matrix_heatmap(ax, examples[kind], colorbar=False)
    ax.set_title(f"{title}\nsym {plotting.signed(s.symmetry)}   dir {plotting.signed(s.directionality)}", fontsize=10)
plotting.savefig(fig, figures_dir / "01_examples")
plt.show()

# %% [markdown]
# A caution about directionality on unstructured matrices: whether a chance outlier row or column crosses
# the threshold decides the score, so at this size it swings widely around 0 from one random draw to the
# next (rerun with another `seed`), while symmetry stays close to 0. Notebook 03 measures both null spreads; keep them in mind before reading meaning into one
# layer's directionality.

# %% [markdown]
# How directionality decides: the row and column norms of the "dominant columns" example, with the
# mean + 2 std thresholds. The three planted columns exceed theirs by far; a row or two may cross its
# threshold by chance, but only just, so $C \gg R$ and the score is close to -1.

# %%
m = examples["columns"]
row_norms, col_norms = m.norm(dim=1), m.norm(dim=0)
fig, axes = plt.subplots(1, 2, figsize=(10, 3), sharey=True)
for ax, values, name, color in zip(
    axes, (row_norms, col_norms), ("row", "column"), (plotting.NEUTRAL_COLOR, plotting.DECODER_COLOR)
):
    threshold = float(values.mean() + 2 * values.std())
    ax.bar(np.arange(len(values)), values.numpy(), color=color)
    ax.axhline(threshold, color="black", lw=1, ls="--", label="mean + 2 std")
    ax.set_xlabel(f"{name} index")
    ax.set_title(f"{name} norms")
axes[0].set_ylabel("Euclidean norm")
axes[0].legend()
plotting.savefig(fig, figures_dir / "01_directionality_norms")
plt.show()
row_excess, col_excess = at.row_column_excess(m)
print(
    f"R = {float(row_excess):.2f}, C = {float(col_excess):.2f}, (R - C)/(R + C) = {float(at.directionality_score(m)):+.3f}"
)

# %% [markdown]
# ## 4. One matrix per head, or one per layer?
#
# A layer with $H$ heads has $H$ bilinear forms $M_h = W_q^h {W_k^h}^\top$, each of rank at most $d_{head}$.
# The paper's tables score **their sum** $\sum_h M_h$ (a full-rank $d \times d$ matrix per layer); the
# authors' training logs scored each head separately. The two are different quantities: a sum of
# matrices can be more or less symmetric than its terms. We report both throughout, named.
#
# A symmetric initialisation ($W_q = W_k$, notebook 05) makes every $M_h = W_k^{h\top} W_k^h$ symmetric
# and positive semi-definite, so every head and their sum score exactly +1 and 0.

# %%
head_scores = [at.factor_scores(*layer_factors(layer)[:2]) for layer in model.encoder.layer]
layer_scores = [at.factor_scores(*layer_factors(layer)[:2], sum_heads=True) for layer in model.encoder.layer]
tied = at.factor_scores(w_k, w_k, sum_heads=True)
for index, (per_head, summed) in enumerate(zip(head_scores, layer_scores)):
    print(
        f"layer {index}: per head sym {np.round(per_head.symmetry.numpy(), 3)}, dir {np.round(per_head.directionality.numpy(), 3)}"
        f" | summed sym {float(summed.symmetry):+.3f}, dir {float(summed.directionality):+.3f}"
    )
print(f"W_q = W_k (layer 0 keys): sym {float(tied.symmetry):+.3f}, dir {float(tied.directionality):+.3f}")

# %% [markdown]
# The untrained model's symmetry sits near 0, as for unstructured matrices; its directionality, like the
# Gaussian example's, can land far from 0 by chance (notebook 03 measures that null spread). Pretrained encoders score around +0.5 and pretrained decoders show column
# dominance; notebooks 04 to 06 show how training produces this.
#
# ## 5. Save the results

# %%
parameters = pipeline.notebook_parameters("01_bilinear_form", globals())
dataset = xr.Dataset(
    {
        "symmetry": ("layer", [float(s.symmetry) for s in layer_scores]),
        "directionality": ("layer", [float(s.directionality) for s in layer_scores]),
        "head_symmetry": (("layer", "head"), np.stack([s.symmetry.numpy() for s in head_scores])),
        "head_directionality": (("layer", "head"), np.stack([s.directionality.numpy() for s in head_scores])),
        "example_symmetry": ("example", [float(example_scores[k].symmetry) for k in kinds]),
        "example_directionality": ("example", [float(example_scores[k].directionality) for k in kinds]),
        "logit_max_abs_error": ("layer", check["max |QK^T - bilinear|"].values),
        "attention_max_abs_error": ("layer", check["max |softmax - model attention|"].values),
    },
    coords={"layer": np.arange(n_layers), "head": np.arange(n_heads), "example": list(kinds)},
    attrs=results.provenance_attrs(
        parameters=parameters,
        scored_matrix=(
            "symmetry/directionality: sum_h W_q^h W_k^h^T per layer of an untrained toy BERT (d_model x d_model); "
            "head_*: W_q^h W_k^h^T per head; example_*: the example matrices of section 3"
        ),
        title="01 bilinear form: identity check and scores of a toy BERT",
    ),
)
results.save_dataset(dataset, results_dir / "01_bilinear_form.nc")
dataset
