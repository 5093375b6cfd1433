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
# This notebook checks the identity on a real attention layer, splits $W_{qk}$ into its symmetric and
# skew-symmetric parts, and shows what the paper's two scores see.
#
# > Convention note. PyTorch stores a head's query weights as an `nn.Linear` weight of shape
# > `[d_head, d_model]` ($q = W x + b$), i.e. the transpose of the paper's $W_q^h$: the block `W_q[h]` is
# > $(W_q^h)^\top$. In code the head's matrix is therefore `M_h = W_q[h].T @ W_k[h]`, which is the paper's
# > $W_{qk}^h = W_q^h (W_k^h)^\top$, and the layer's is `sum_h W_q[h].T @ W_k[h]` (`attnstruct.wqk`).

# %% tags=["parameters"]
seed = 0  # seeds the model initialisation, the inputs and the example matrices
d_model = 64  # width of the toy BERT layer
n_heads = 4  # attention heads per layer
n_layers = 2  # layers of the toy BERT
seq_len = 12  # tokens in the test sequence
example_dim = 48  # size of the example matrices drawn below
null_draws = 200  # random matrices per null distribution that the scores are compared with
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
from attnstruct import evidence, null, pipeline, plotting, prose, results, toys

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
# random values: the check then covers the bias terms too. With biases, $q_i = (W_q^h)^\top x_i + b_q$ and
# $k_j = (W_k^h)^\top x_j + b_k$, so the logit of head $h$ is
#
# $$q_i^\top k_j = x_i^\top M_h x_j + x_i^\top W_q^h b_k + b_q^\top (W_k^h)^\top x_j + b_q^\top b_k,
#   \qquad M_h = W_{qk}^h,$$
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
# Below: layer 0 of the toy BERT (summed over heads). It is untrained: BERT draws $W_q$ and $W_k$ with
# i.i.d. Gaussian entries, so the layer is a draw of the null ensemble of notebook 02 (`factors H=h, layer`),
# and its symmetry is compared with that ensemble's draws of the same width and head count.

# %%
w_q, w_k, _, _ = layer_factors(model.encoder.layer[0])
m_layer = at.wqk(w_q, w_k)  # sum over heads, [d_model, d_model]
m_s, m_n = at.symmetric_part(m_layer), at.skew_part(m_layer)
norms = {name: float((part**2).sum()) for name, part in [("M", m_layer), ("M_s", m_s), ("M_n", m_n)]}
print(f"||M||^2 = {norms['M']:.4f}   ||M_s||^2 + ||M_n||^2 = {norms['M_s'] + norms['M_n']:.4f}")
layer0_null = evidence.compare_with_null(
    float(at.symmetry_score(m_layer)),
    evidence.null_median_over_layers("symmetry", d_model, n_heads, 1, n_draws=null_draws, seed=seed),
)
prose.show(
    f"Symmetry of layer 0 (untrained): {prose.signed(layer0_null.value, 3)}, percentile "
    f"{prose.number(layer0_null.percentile, 1)} of {null_draws} random layers of the same shape (95% range "
    f"{prose.signed(layer0_null.null_low, 3)} to {prose.signed(layer0_null.null_high, 3)}): "
    + ("outside that range." if layer0_null.outside else "inside it, so neither part dominates beyond chance.")
)

limit = float(m_layer.abs().max())
fig, axes = plt.subplots(1, 3, figsize=(11, 3.6))
for ax, part, title in zip(
    axes, (m_layer, m_s, m_n), ("$W_{qk}$ (layer 0)", "symmetric part $M_s$", "skew part $M_n$")
):
    image = plotting.matrix_heatmap(ax, part, title=title, limit=limit, colorbar=False)
fig.colorbar(image, ax=list(axes), fraction=0.02, pad=0.02)
fig.suptitle("An untrained layer: its symmetric and skew parts", y=1.02)
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
# next (rerun with another `seed`), while symmetry stays close to 0. Notebook 02 measures both null spreads.
# Here each example is placed among i.i.d. Gaussian matrices of its size (the `gaussian` ensemble of
# `null.null_distribution`): only a score outside that null's 95% range says something about structure.

# %%
gaussian_null = null.null_distribution([example_dim], [1], null_draws, seed).sel(ensemble="gaussian")
rows = []
for kind in kinds:
    for score in ("symmetry", "directionality"):
        found = evidence.compare_with_null(float(getattr(example_scores[kind], score)), gaussian_null[score].values[0])
        rows.append(
            {
                "example": kind,
                "score": score,
                "value": found.value,
                "percentile": found.percentile,
                "null_low": found.null_low,
                "null_high": found.null_high,
                "outside": found.outside,
            }
        )
example_null = pd.DataFrame(rows).set_index(["example", "score"])
print(example_null.round(3).to_string())
direc = example_null.xs("directionality", level="score")
outside = [f"{kind} ({score})" for kind, score in example_null.index[example_null.outside.astype(bool)]]


def placed(kind):
    row = direc.loc[kind]
    where = "outside" if row.outside else "inside"
    return f"{kind} {prose.signed(row.value)} (percentile {prose.number(row.percentile, 1)}, {where})"


prose.show(
    f"Directionality of {null_draws} Gaussian matrices of size {example_dim}: 95% range "
    f"{prose.signed(direc.null_low.iloc[0])} to {prose.signed(direc.null_high.iloc[0])}. The examples: "
    f"{', '.join(placed(kind) for kind in kinds)}. Outside the null's range: {', '.join(outside) or 'none'}."
)

# %% [markdown]
# How directionality decides: the row and column norms of the "dominant columns" example, with the
# mean + 2 std thresholds. The three planted columns exceed theirs by far; a row or two may cross its
# threshold by chance, but only just, so $C \gg R$ and the score is negative. The score keeps only the
# balance $(R - C)/(R + C)$ of the two excesses, not their size: a Gaussian matrix whose one chance outlier
# barely crosses its threshold scores $\pm 1$ (the null's range above), with excesses as small as the
# Gaussian example's $R$ and $C$ below. That is why, at this size, the planted examples' directionality
# need not lie outside the Gaussian null's range (the sentence above says where it lies), although their
# excesses are far larger.

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
for kind in ("columns", "gaussian"):
    row_excess, col_excess = at.row_column_excess(examples[kind])
    print(
        f"{kind:<9} R = {float(row_excess):.2f}, C = {float(col_excess):.2f}, "
        f"(R - C)/(R + C) = {float(at.directionality_score(examples[kind])):+.3f}"
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

layer_null = {
    score: evidence.null_median_over_layers(score, d_model, n_heads, 1, n_draws=null_draws, seed=seed)
    for score in ("symmetry", "directionality")
}
for index, summed in enumerate(layer_scores):
    found = {s: evidence.compare_with_null(float(getattr(summed, s)), layer_null[s]) for s in layer_null}
    prose.show(
        f"Layer {index}, summed over heads, against {null_draws} random layers of the same shape: "
        + "; ".join(
            f"{s} {prose.signed(f.value, 3)} at percentile {prose.number(f.percentile, 1)} (95% range "
            f"{prose.signed(f.null_low, 3)} to {prose.signed(f.null_high, 3)}, {'outside' if f.outside else 'inside'})"
            for s, f in found.items()
        )
        + "."
    )

# %% [markdown]
# The untrained layers are draws of that null ensemble, so their scores read as chance (above: where they
# fall in it); in particular a directionality far from 0 here is no evidence of column dominance, however
# large it looks. Structure shows only as a score outside the null's range, as for the tied layer's
# symmetry ($W_q = W_k$, +1) above. Pretrained encoders score around +0.5 and pretrained decoders show column
# dominance (the paper, section 4; `docs/paper-notes.md`); notebooks 04 to 06 show how training produces this,
# and notebook 03 compares each pretrained model with the null of its shape.
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
            "symmetry/directionality: W_qk = sum_h W_q^h (W_k^h)^T per layer of an untrained toy BERT (d_model x "
            "d_model; in nn.Linear weights sum_h W_q[h]^T W_k[h]); head_*: W_q^h (W_k^h)^T per head; example_*: the "
            "example matrices of section 3"
        ),
        title="01 bilinear form: identity check and scores of a toy BERT",
    ),
)
results.save_dataset(dataset, results_dir / "01_bilinear_form.nc")
dataset
