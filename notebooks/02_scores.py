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
# # 02 · The two scores: definitions, invariants and null distributions
#
# *Companion to Saponati et al., ICML 2025 (arXiv:2502.10927): the symmetry and directionality scores used
# in every figure of the paper.*
#
# A score is only as useful as our sense of what it does *not* measure and of what it reads on a matrix
# with no structure at all. This notebook states the two definitions, checks their invariances, measures
# their null distributions for random matrices and random factor products, shows how directionality
# depends on its threshold, and compares scoring each head with scoring the sum over heads.
#
# It follows notebook 01 and comes before every notebook that reads a score against its null: the
# pretrained models (03), the gradient toys (04) and the training runs (05 to 07).

# %% tags=["parameters"]
seed = 0  # seeds every random draw in this notebook
d_models = [64, 128, 256, 512]  # model widths for the null distributions
n_heads = [1, 4, 8]  # head counts for the factor-product nulls; d_head is d_model / H
n_draws = 50  # draws per null ensemble
num_stds = [0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0]  # directionality thresholds to sweep
sweep_d_model = 256  # width of the matrices in the threshold sweep
tying_heads = 4  # heads in the per-head versus summed comparison
tying_d_model = 128  # width in the per-head versus summed comparison
results_dir = "../build/interactive/results"  # where the dataset goes
figures_dir = "../build/interactive/figures"  # where the figures go

# %%
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
import torch
import xarray as xr

import attnstruct as at
from attnstruct import null, pipeline, plotting, prose, results, toys

plotting.set_style()
results_dir, figures_dir = Path(results_dir), Path(figures_dir)

# %% [markdown]
# ## 1. Definitions
#
# For $M \in \mathbb{R}^{d\times d}$ with symmetric part $M_s = \frac12(M+M^\top)$ and skew part
# $M_n = \frac12(M - M^\top)$:
#
# $$\text{symmetry}(M) = \frac{\|M_s\|_F^2 - \|M_n\|_F^2}{\|M\|_F^2} = \frac{\operatorname{tr}(M M)}{\operatorname{tr}(M^\top M)} \in [-1, 1].$$
#
# With row norms $r_i = \|M_{i,:}\|$, column norms $c_j = \|M_{:,j}\|$, thresholds
# $\tau_r = \bar r + k\, \mathrm{std}(r)$ and $\tau_c = \bar c + k\,\mathrm{std}(c)$ ($k$ = `num_std` = 2, unbiased std),
#
# $$\text{directionality}(M) = \frac{R - C}{R + C},\quad R = \sum_i (r_i - \tau_r)_+,\quad C = \sum_j (c_j - \tau_c)_+ ,$$
#
# and 0 when $R = C = 0$. Negative values mean column dominance.
#
# These are the values the paper plots. The authors' code *stores* $\|M_s\|^2/\|M\|^2 \in [0,1]$ and the
# opposite sign of directionality and converts at plot time; `attnstruct` returns the plotted convention
# and offers the stored one only by keyword (`convention="raw"`). The two are related by
# $s_\text{paper} = 2 s_\text{raw} - 1$ and $d_\text{paper} = -d_\text{raw}$:

# %%
m = toys.example_matrix("columns", 64, toys.generator(seed, 0))
paper, raw = at.scores(m), at.scores(m, convention="raw")
pd.DataFrame(
    {
        "paper (default)": [paper.symmetry.item(), paper.directionality.item()],
        "raw (authors' storage)": [raw.symmetry.item(), raw.directionality.item()],
    },
    index=["symmetry", "directionality"],
).round(4)

# %% [markdown]
# ## 2. Invariants
#
# Which transformations leave the scores unchanged tells what they measure.
#
# * **Scale** $cM$, $c \ne 0$: both scores are ratios of quadratic (symmetry) or linear (directionality)
#   quantities, so both are unchanged, also for $c < 0$.
# * **Transpose** $M^\top$: symmetry unchanged; rows and columns swap, so directionality flips sign.
# * **Permutation similarity** $PMP^\top$ (relabelling the coordinates): both unchanged.
# * **Orthogonal similarity** $QMQ^\top$ (a rotation of the embedding space): symmetry unchanged, because
#   $\operatorname{tr}(M M)$ and $\|M\|_F$ are; directionality **changes**, because row and column norms
#   are tied to the coordinate axes. Directionality therefore assumes that the residual stream's
#   coordinate basis means something (it does in trained models, where a few directions carry outsized
#   activations), while symmetry is a property of the bilinear form itself.

# %%
gen = toys.generator(seed, 1)
d = 128
m = toys.example_matrix("columns", d, gen)
q, _ = torch.linalg.qr(torch.randn(d, d, generator=gen, dtype=torch.float64))
p = torch.eye(d, dtype=torch.float64)[torch.randperm(d, generator=gen)]
transforms = {
    "M": m,
    "3 M": 3 * m,
    "-0.5 M": -0.5 * m,
    "M^T": m.T,
    "P M P^T (permutation)": p @ m @ p.T,
    "Q M Q^T (rotation)": q @ m @ q.T,
}
invariants = pd.DataFrame(
    {
        name: {"symmetry": at.symmetry_score(x).item(), "directionality": at.directionality_score(x).item()}
        for name, x in transforms.items()
    }
).T
invariants.round(4)

# %% [markdown]
# ## 3. Null distributions: what does "no structure" score?
#
# Three ensembles over model widths $d$:
#
# * `gaussian`: $d \times d$ with i.i.d. normal entries;
# * `factors H=h, layer`: the layer matrix $W_{qk} = \sum_h W_q^h (W_k^h)^\top$ (in `nn.Linear` weights
#   `sum_h W_q[h].T @ W_k[h]`) with independent Gaussian factors and $d_{head} = d/h$, which is what an
#   untrained layer scores;
# * `factors H=h, head`: one head's $W_{qk}^h = W_q^h (W_k^h)^\top$ from the same draws (rank $d/h$).

# %%
null_ds = null.null_distribution(d_models, n_heads, n_draws, seed)
summary = (
    null_ds.quantile([0.25, 0.5, 0.75], dim="draw")
    .to_dataframe()[["symmetry", "directionality"]]
    .unstack("quantile")
    .round(3)
)
summary

# %%
fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), sharex=True)
palette = dict(zip(null_ds.ensemble.values, sns.color_palette("viridis", len(null_ds.ensemble))))
for ax, var in zip(axes, ("symmetry", "directionality")):
    for ens in null_ds.ensemble.values:
        cell = null_ds[var].sel(ensemble=ens)
        if bool(cell.isnull().all()):
            continue
        q25, q50, q75 = (cell.quantile(q, dim="draw") for q in (0.25, 0.5, 0.75))
        style = "--" if ens.endswith("head") else "-"
        ax.plot(null_ds.d_model, q50, style, marker="o", color=palette[ens], label=ens)
        ax.fill_between(null_ds.d_model, q25, q75, color=palette[ens], alpha=0.15)
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("$d_{model}$")
    ax.set_title(f"{var}: median and IQR over {n_draws} draws")
axes[0].set_ylabel("score")
axes[1].legend(loc="center left", bbox_to_anchor=(1.0, 0.5))
plotting.savefig(fig, figures_dir / "02_null_distributions")
plt.show()

# %% [markdown]
# Symmetry of unstructured matrices concentrates at 0, and its spread shrinks as $d$ grows: already at
# $d = 64$ the quartiles are within a few hundredths of 0. Directionality is far noisier: whether a chance
# outlier row or column crosses the threshold decides the score. Its interquartile range is wide at small
# widths and narrows only slowly (the table above, and the ranges measured below). A single layer's
# directionality inside that range is therefore no evidence of column dominance; the paper's claims rest on
# medians over many layers and models, and that is how they should be read (notebook 03 compares each
# pretrained model's median over layers with the null of that median).

# %%
d_ref = 256 if 256 in d_models else d_models[len(d_models) // 2]
spread = null_ds.directionality.sel(d_model=d_ref).quantile([0.25, 0.75], dim="draw")
print(f"directionality IQR at d_model={d_ref}:")
for ens in null_ds.ensemble.values:
    lo, hi = spread.sel(ensemble=ens).values
    if np.isfinite(lo):
        print(f"  {ens:<22} [{lo:+.2f}, {hi:+.2f}]")

layer_ensembles = [e for e in null_ds.ensemble.values if e.endswith(", layer")]
layer_q = null_ds.sel(ensemble=layer_ensembles).quantile([0.25, 0.75], dim="draw")
gauss_q = null_ds.sel(ensemble="gaussian").quantile([0.25, 0.75], dim="draw")


def measured_iqr(low, high, digits=2):
    """'low to high at $d$ = d; ...' over the widths."""
    pairs = zip(null_ds.d_model.values, low.values, high.values, strict=True)
    return "; ".join(f"{prose.signed(lo, digits)} to {prose.signed(hi, digits)} at $d$ = {d}" for d, lo, hi in pairs)


def layer_iqr(var, digits=2):
    """Per width, the lowest first and highest third quartile over the layer ensembles."""
    q = layer_q[var]
    return measured_iqr(q.sel(quantile=0.25).min("ensemble"), q.sel(quantile=0.75).max("ensemble"), digits)


prose.show(
    f"Measured in this run ({prose.count(n_draws, 'draw')} per cell), the interquartile range of one random layer's "
    f"directionality lies within {layer_iqr('directionality')} (the lowest first and highest third quartile over "
    f"the layer ensembles, H = {', '.join(str(h) for h in n_heads)}); for an i.i.d. Gaussian matrix it is "
    f"{measured_iqr(gauss_q.directionality.sel(quantile=0.25), gauss_q.directionality.sel(quantile=0.75))}. "
    f"The layer ensembles' symmetry: {layer_iqr('symmetry', 3)}."
)

# %% [markdown]
# ## 4. How much does directionality depend on its threshold?
#
# The threshold mean + $k$ std with $k = 2$ is a choice. We sweep $k$ for Gaussian matrices and for
# Gaussian matrices with three planted outlier columns (or rows) scaled by a gain.

# %%
sweep = null.num_std_sweep(sweep_d_model, num_stds, n_draws, seed)
fig, ax = plt.subplots(figsize=(7, 4.2))
colors = {"gaussian": plotting.NEUTRAL_COLOR}
colors.update(
    {
        e: c
        for e, c in zip(
            [e for e in sweep.ensemble.values if e.startswith("columns")],
            sns.light_palette(plotting.DECODER_COLOR, 5)[2:],
        )
    }
)
colors.update(
    {
        e: c
        for e, c in zip([e for e in sweep.ensemble.values if e.startswith("rows")], sns.color_palette("Oranges", 5)[2:])
    }
)
for ens in sweep.ensemble.values:
    cell = sweep.directionality.sel(ensemble=ens)
    q25, q50, q75 = (cell.quantile(q, dim="draw") for q in (0.25, 0.5, 0.75))
    ax.plot(sweep.num_std, q50, marker="o", color=colors[ens], label=ens)
    ax.fill_between(sweep.num_std, q25, q75, color=colors[ens], alpha=0.15)
ax.axvline(2.0, color="black", ls=":", lw=1)
ax.axhline(0, color="black", lw=0.8)
ax.set_xlabel("threshold num_std (the paper uses 2)")
ax.set_ylabel("directionality")
ax.set_title(f"Directionality against its threshold ($d$ = {sweep_d_model})")
ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5))
plotting.savefig(fig, figures_dir / "02_threshold_sensitivity")
plt.show()

# %% [markdown]
# For planted structure the sign is stable across thresholds, and higher thresholds only sharpen it
# towards $\pm 1$. For Gaussian matrices the median stays near 0, but the spread grows with the threshold:
# when only one chance outlier crosses a high threshold, it alone sets the score to $\pm 1$. A strong
# outlier also raises the std that sets the threshold, so a larger gain does not always give a more
# extreme score at $k = 2$ (compare the gains in the plot). The sign of directionality does not hinge on
# the choice $k = 2$; its magnitude does.
#
# ## 5. Per head or summed over heads?
#
# The paper's tables score the layer matrix $\sum_h W_q^h (W_k^h)^\top$; the authors' training logs scored
# each head. To see how the two relate, we interpolate between a symmetric initialisation and
# independent factors: $W_q = \cos\theta\, W_k + \sin\theta\, G$ with $G$ independent of $W_k$.

# %%
thetas = np.linspace(0, np.pi / 2, 7)
tying = null.tying_sweep(thetas, tying_heads, tying_d_model, n_draws, seed)
fig, ax = plt.subplots(figsize=(6.5, 4))
ax.plot(
    np.degrees(tying.theta),
    tying.symmetry.median("draw"),
    marker="o",
    color=plotting.ENCODER_COLOR,
    label="layer (sum over heads)",
)
ax.plot(
    np.degrees(tying.theta),
    tying.head_symmetry.median(("draw", "head")),
    marker="s",
    ls="--",
    color=plotting.NEUTRAL_COLOR,
    label="single heads",
)
ax.set_xlabel(r"$\theta$ (degrees): 0 = $W_q = W_k$, 90 = independent")
ax.set_ylabel("symmetry (median)")
ax.set_title(f"Per head versus summed ({tying_heads} heads, $d$ = {tying_d_model})")
ax.legend()
plotting.savefig(fig, figures_dir / "02_head_vs_layer")
plt.show()
difference = (tying.symmetry - tying.head_symmetry.mean("head")).median("draw")
print("median (layer - mean head) symmetry by theta:", np.round(difference.values, 3))

# %% [markdown]
# Both start at exactly 1 for $W_q = W_k$ and reach 0 for independent factors, but in between the summed
# layer matrix is *more* symmetric than its heads: the heads' skew-symmetric parts are independent and
# partly cancel in the sum, while their symmetric parts (all positive semi-definite contributions from
# $W_k^h (W_k^h)^\top$) add up. Per-head and per-layer scores are different quantities, and comparisons must
# not mix them.
#
# ## 6. Save

# %%
parameters = pipeline.notebook_parameters("02_scores", globals())
invariants_ds = xr.Dataset.from_dataframe(invariants.rename_axis("transform")).rename(
    symmetry="invariant_symmetry", directionality="invariant_directionality"
)
dataset = xr.merge(
    [
        null_ds,
        sweep.rename(ensemble="planted", directionality="sweep_directionality", symmetry="sweep_symmetry"),
        tying.rename(symmetry="tying_symmetry", head_symmetry="tying_head_symmetry"),
        invariants_ds,
    ],
    combine_attrs="drop",
)
dataset.attrs = results.provenance_attrs(
    parameters=parameters,
    scored_matrix=(
        "symmetry/directionality: random d_model x d_model matrices of each ensemble (gaussian; "
        "sum_h W_q^h (W_k^h)^T, in nn.Linear weights sum_h W_q[h]^T W_k[h], or one head's W_q^h (W_k^h)^T, with "
        "Gaussian factors); sweep_*: Gaussian and "
        "planted-outlier matrices; tying_*: partly tied factors; invariant_*: transforms of one matrix"
    ),
    title="02 scores: invariants, null distributions, threshold sensitivity, per head versus summed",
)
results.save_dataset(dataset, results_dir / "02_scores.nc")
dataset
