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
# # 07 · Vision from scratch: bidirectional ViTs against an autoregressive image model
#
# *Companion to Saponati et al., ICML 2025 (arXiv:2502.10927), the vision figures (median symmetry and
# directionality over layers of ViT, DeiT, BEiT, DINO, MAE, ... and iGPT).*
#
# The paper scores pretrained vision Transformers and finds the same split as in language: the encoders,
# trained with bidirectional attention (ViT, DeiT, BEiT, DINO, MAE), have a more symmetric $W_{qk}$ than the
# one autoregressive image model, iGPT. Their values, read from the authors' result files, are printed below
# the imports. None of those checkpoints can be installed on this project's machines, so this notebook asks
# the question from scratch: one small vision Transformer, one set of images, one initialisation, trained
# four ways.
#
# | objective | attention | loss | as in |
# |---|---|---|---|
# | `classify` | bidirectional | the digit's class, read from the `[CLS]` token's last output | ViT, DeiT |
# | `classify-mean` | bidirectional | the digit's class, read from the mean of every token's last output | ViT with pooling |
# | `masked` | bidirectional | the grey levels of masked patches | BEiT, MAE |
# | `next-patch` | causal | the grey levels of the next patch | iGPT |
#
# The theory of the paper (notebook 04) predicts a symmetric $W_{qk}$ where the gradient pairs every query
# with every key in both orders, and none where keys come before queries only (causal attention). Section 2
# works out what that means for each objective: a `[CLS]` loss is a special case, because in the last layer
# only one query, `[CLS]`, receives gradient; `classify-mean` is the same classifier with a loss that reaches
# every token. Section 6 tests the predictions, seed by seed, against random matrices of the same shape.
# If you have pretrained vision checkpoints on disk (ViT, DeiT, BEiT, DINOv2 in Hugging Face format), list
# their folders in `local_models`: they are scored with the same code and drawn beside the runs.

# %% [markdown]
# **Learning goals.** After this notebook you can:
#
# * say, for each of four vision objectives, which queries reach the loss and so which pairs of tokens enter the
#   gradient of $W_{qk}$, and what the theory predicts from that;
# * check that a model learned (losses against a uniform guess, accuracy against chance) before reading its scores;
# * read symmetry and directionality over training against random matrices of the same shape;
# * test a prediction seed by seed, and read a verdict of *cannot tell at this scale* as a statement about the
#   number of seeds.

# %% tags=["parameters"]
objectives = ["classify", "classify-mean", "masked", "next-patch"]  # any of attnstruct.vision.OBJECTIVES
seed = 0  # first seed; the runs use seed, seed + 1, ...
n_seeds = 3  # runs per objective (5 are needed for a one-sided sign-flip test to reach p < 0.05)
steps = 800  # AdamW steps per run
batch_size = 32  # images per step
lr = 0.001  # peak learning rate (linear warm-up, cosine decay)
warmup = 100  # warm-up steps
schedule = "cosine"  # after warm-up: "cosine" decay to 0, "linear" decay to 0, or "constant"
weight_decay = 0.05  # AdamW weight decay (not on biases, LayerNorms and special tokens)
clip = 1.0  # gradient-norm clipping
mask_rate = 0.4  # share of patches masked by the masked objective
d_model = 64  # embedding width
n_layers = 4  # Transformer blocks
n_heads = 4  # attention heads per block
ffn_mult = 4  # feed-forward width as a multiple of d_model
norm = "pre"  # "pre" LayerNorm (as ViT, BEiT, iGPT) or "post"
patch_size = 2  # patch side in pixels (1: pixels as tokens, as iGPT)
levels = 4  # grey levels of the pixel targets (masked and next-patch objectives)
dropout = 0.0  # dropout in the blocks
log_every = 50  # record scores every this many steps
eval_every = 250  # validation loss every this many steps
checkpoint_every = 500  # resumable checkpoints (runs kept in a folder only)
source = "sklearn-digits"  # images: "sklearn-digits" (scikit-learn's load_digits) or "synthetic-digits"
n_images = 1797  # images rendered by the synthetic source (load_digits has 1797)
val_fraction = 0.2  # share of the images held out for validation (a fixed split)
n_null_draws = 400  # random models per null distribution (section 6)
workers = 2  # runs trained side by side, one thread each
device = "cpu"  # "cpu", "cuda" or "auto" (GPU runs are not bit-reproducible)
amp = False  # bfloat16 autocast on CUDA
local_models = []  # local vision checkpoints to score: folder paths, or [name, path] pairs
results_dir = "../build/interactive/results"  # where the dataset goes
figures_dir = "../build/interactive/figures"  # where the figures go

# %%
import time
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
import xarray as xr

from attnstruct import factor_scores, paper_comparison, pipeline, plotting, pretrained, prose, results, symmetry_score
from attnstruct import images as I
from attnstruct import vision as V
from attnstruct import vision_verdicts as VV
from attnstruct.extract import count_parameters
from attnstruct.transformer import attention_layers, query_key_factors

plotting.set_style()
torch.set_num_threads(1)
results_dir, figures_dir = Path(results_dir), Path(figures_dir)
if not isinstance(n_seeds, int) or n_seeds < 1:
    raise ValueError(f"n_seeds must be a positive integer, got {n_seeds!r}")
unknown = sorted(set(objectives) - set(V.OBJECTIVES))
if unknown or not objectives or len(set(objectives)) != len(objectives):
    raise ValueError(f"objectives must be distinct names from {V.OBJECTIVES}, got {objectives!r}")
parameters = pipeline.notebook_parameters("07_vision", globals())  # recorded with the dataset
objectives = [o for o in V.OBJECTIVES if o in objectives]  # one order everywhere
configs = [
    V.VisionConfig.from_params(parameters, objective=objective, seed=seed + k)
    for objective in objectives
    for k in range(n_seeds)
]
COLORS = {
    "classify": "#4f7fd1",
    "classify-mean": "#35a7c9",
    "masked": plotting.ENCODER_COLOR,
    "next-patch": plotting.DECODER_COLOR,
}  # blue: bidirectional
LABELS = {
    "classify": "classify ([CLS], bidirectional, ViT)",
    "classify-mean": "classify-mean (pooled, bidirectional)",
    "masked": "masked (bidirectional, BEiT)",
    "next-patch": "next-patch (causal, iGPT)",
}
reported = paper_comparison.reported_vision(pretrained.reference_table())  # the authors' values
prose.show(VV.describe_reported(reported))

# %% [markdown]
# ## 1. Images and patches
#
# scikit-learn's `load_digits` (1,797 handwritten digits, 8x8 pixels, 17 grey levels, shipped inside the
# scikit-learn wheel, so nothing is downloaded) is the default image set. `source = "synthetic-digits"`
# renders digits instead: a 5x7 bitmap font under random rotation, scale, shear, shift, stroke width,
# contrast and noise, at the same size and grey levels (`attnstruct.images.synthetic_digits`). Either way the
# image set and its train/validation split are fixed, whatever the seed.
#
# Each image is cut into non-overlapping `patch_size` x `patch_size` patches in raster order (left to right,
# top to bottom); a patch is one token, embedded by a linear map, as in ViT. Position 0 holds one extra
# learned token: `[CLS]` for `classify`, the start of the image for the others (`classify-mean` pools it
# with the patches).

# %%
data = I.load_images(source, n_images, val_fraction)
print(f"{data.source}: {len(data.train_images)} training and {len(data.val_images)} validation images")
example = configs[0]
patches = I.patchify(data.train_images[:1], patch_size)
mask = V.random_patch_mask(1, patches.shape[1], mask_rate, torch.Generator().manual_seed(seed))
fig, axes = plt.subplots(2, 8, figsize=(12, 3.4))
for i, ax in enumerate(axes[0]):
    ax.imshow(data.train_images[i], cmap="gray_r", vmin=0, vmax=1)
    ax.set_title(f"label {int(data.train_labels[i])}", fontsize=9)
grid = int(np.sqrt(patches.shape[1]))
shown = {
    "image": data.train_images[0],
    f"{grid}x{grid} patches": data.train_images[0],
    "masked input": I.unpatchify(torch.where(mask[..., None], torch.nan, patches), patch_size, 8, 8)[0],
    f"{levels}-level targets": I.unpatchify(I.quantise(patches, levels).float() / (levels - 1), patch_size, 8, 8)[0],
}
greys = plt.get_cmap("gray_r").copy()
greys.set_bad(plotting.ENCODER_COLOR, 0.35)  # masked patches
for ax, (title, image) in zip(axes[1], shown.items()):
    ax.imshow(image, cmap=greys, vmin=0, vmax=1)
    ax.set_title(title, fontsize=9)
    if "patches" in title:
        for edge in np.arange(patch_size, 8, patch_size) - 0.5:
            ax.axhline(edge, color=plotting.DECODER_COLOR, lw=1)
            ax.axvline(edge, color=plotting.DECODER_COLOR, lw=1)
order = np.arange(grid * grid).reshape(grid, grid)
axes[1][4].imshow(order, cmap="Purples")
for (r, c), k in np.ndenumerate(order):
    axes[1][4].text(c, r, str(k), ha="center", va="center", fontsize=7)
axes[1][4].set_title("causal order", fontsize=9)
for ax in axes.flat:
    ax.set_xticks([])
    ax.set_yticks([])
for ax in axes[1][5:]:
    ax.axis("off")
_ = plotting.savefig(fig, figures_dir / "07_images")
plt.show()

# %% [markdown]
# ## 2. One model, four objectives, and what the theory predicts for each
#
# The model is the project's BERT-like `Encoder` (notebook 05) with pre-LN blocks, as ViT, BEiT and iGPT
# use. The trunk (patch embedding, special tokens, blocks) is initialised from the seed alone, so the four
# objectives of one seed start from the same weights and see the same images in the same order. They
# differ in the attention mask, in where the loss sits, and in the last linear layer:
#
# * `classify`: cross-entropy of the 10 classes from the last layer's output at the `[CLS]` position. All
#   positions attend to all.
# * `classify-mean`: the same cross-entropy from the mean of the last layer's outputs at all positions (the
#   special token and every patch). All positions attend to all.
# * `masked`: a `mask_rate` share of the patches (at least one) is replaced by a learned `[MASK]`
#   embedding; each masked patch's pixels are predicted as one of `levels` grey levels (BEiT predicts
#   discrete visual tokens; a grey level is the simplest discrete token).
# * `next-patch`: causal attention; the output at position $t$ (the start token and patches $< t$)
#   predicts the grey levels of patch $t$. With `patch_size = 1` this is iGPT's next-pixel task.
#
# Every `log_every` steps each run records the symmetry and directionality of every layer's matrix and of
# every head's. In the paper's row-vector form a head's matrix is $W_{qk}^h = W_q^h (W_k^h)^\top$ and a
# layer's is $W_{qk} = \sum_h W_q^h (W_k^h)^\top$; in `nn.Linear` weights that is `W_q[h]^T W_k[h]`, summed
# over heads (notebook 01).
#
# **The gradient's pairs.** Write $x_1, \dots, x_N$ for a layer's (normalised) inputs, $a_{ij} = x_i^\top
# W_{qk}^h x_j / \sqrt{d_h}$ for head $h$'s logits, $\alpha_{ij}$ for its attention weights, $v_j$ for the
# values and $\delta_i$ for the gradient of the loss with respect to query $i$'s attention output. Then
#
# $$\frac{\partial L}{\partial W_{qk}^h} = \frac{1}{\sqrt{d_h}} \sum_{\text{images}} \sum_{i,j} g_{ij}\, x_i x_j^\top,
# \qquad g_{ij} = \alpha_{ij}\Big(\delta_i \cdot v_j - \sum_k \alpha_{ik}\, \delta_i \cdot v_k\Big).$$
#
# Query $i$ stands on the left of every term it enters, and a query whose output never reaches the loss
# ($\delta_i = 0$) enters none. The theory's symmetric drive needs each pair in both orders, $x_i x_j^\top$
# and $x_j x_i^\top$; a causal mask keeps only $j \le i$ ($g_{ij} = 0$ for $j > i$), so the early tokens'
# keys enter many terms (column dominance) and no pair of distinct tokens appears both ways.
#
# * `masked` and `classify-mean`: every token is a query below the last layer, and in the last layer every
#   token (`classify-mean`) or every masked token (`masked`). Predicted: symmetric.
# * `next-patch`: keys before queries in every layer. Predicted: no symmetric drive, negative directionality.
# * `classify`: in the last layer only `[CLS]`'s output reaches the loss, so $\delta_i = 0$ for every other
#   token and each head's update is
#   $\partial L / \partial W_{qk}^{h,\mathrm{last}} \propto \sum_{\text{images}} x_{\mathrm{cls}}\, u^\top$ with
#   $u = \sum_j g_{\mathrm{cls},j}\, x_j$: one query per image, rows in the span of the `[CLS]` states, never
#   both orders. The theory predicts no symmetric drive in that layer, so a last layer that stays near the
#   random matrices' value is consistent with it, not a failure of it. Below the last layer every token reaches the loss
#   through `[CLS]`'s attention to it (as a key and as a value), so every token is a query and both orders
#   appear, with weights set by how much `[CLS]` attends to each token: a symmetric drive of a strength the
#   theory does not give. It therefore orders `classify`'s last layer below `classify-mean`'s, and says
#   nothing about `classify`'s median over layers against the other objectives.
#
# The comparisons that follow (each tested in section 6), then those the theory leaves open:

# %%
side = {+1: "positive", -1: "negative"}
prose.show(
    "**Predicted** (treated minus baseline, per seed):\n\n"
    + "\n".join(f"- {p.claim}: {side[p.sign]}; {p.why}." for p in VV.PREDICTIONS)
    + "\n\n**Not predicted:**\n\n"
    + "\n".join(f"- {line}." for line in VV.NOT_PREDICTED)
)

# %%
model = V.build_model(example)
print(f"sequence length {1 + example.n_patches}, {count_parameters(model):,} parameters (classify head)")
print(f"{len(configs)} runs: {', '.join(objectives)} x seeds {seed}..{seed + n_seeds - 1}, {steps} steps each")
start = time.perf_counter()
runs = V.train_many(configs, workers=workers)
print(f"trained in {time.perf_counter() - start:.0f} s with {workers} worker(s)")

# %% [markdown]
# ## 3. Did the models learn?
#
# Scores of a model that does not learn mean nothing, so the losses come first. The losses are different
# quantities (10 classes; `levels` grey levels per pixel of a masked patch or of the next patch); each
# should fall well below a uniform guess (dashed: $\log 10$ for the classes, $\log$ `levels` per pixel), and
# the classifiers' accuracy (last panel) well above chance (dashed: one in 10).

# %%
fig, axes = plt.subplots(1, len(objectives) + 1, figsize=(3.6 * (len(objectives) + 1), 3.6), sharex=True)
for ax, objective in zip(axes, objectives):
    cell = runs.sel(objective=objective)
    val = cell.val_loss.dropna("step", how="all")
    for s in cell.seed.values:
        ax.plot(runs.step[1:], cell.train_loss.sel(seed=s)[1:], color=COLORS[objective], lw=0.8, alpha=0.6)
    ax.plot(val.step, val.mean("seed"), "o-", color=COLORS[objective], label="validation, mean over seeds")
    chance = np.log(10 if objective in V.CLASSIFIERS else levels)
    ax.axhline(chance, color="0.4", ls="--", lw=1, label="uniform guess")
    ax.set(xlabel="step", title=LABELS[objective])
axes[0].set_ylabel("cross-entropy (nats)")
axes[0].legend(title="thin: training, per seed", fontsize=8, title_fontsize=8, loc="center right")
ax = axes[-1]
for objective in [o for o in objectives if o in V.CLASSIFIERS]:
    acc = runs.val_accuracy.sel(objective=objective).dropna("step", how="all")
    for s in acc.seed.values:
        ax.plot(acc.step, acc.sel(seed=s), "o-", color=COLORS[objective], lw=1, ms=3, alpha=0.7)
    ax.plot([], [], "o-", color=COLORS[objective], label=objective)
ax.axhline(0.1, color="0.4", ls="--", lw=1, label="chance")
ax.set(xlabel="step", ylabel="validation accuracy", ylim=(0, 1), title="classifiers: accuracy, per seed")
ax.legend(fontsize=8)
fig.tight_layout()
_ = plotting.savefig(fig, figures_dir / "07_losses")
plt.show()
prose.show("\n".join(VV.describe_learning(runs, levels)))

# %% [markdown]
# ## 4. Symmetry and directionality against training steps
#
# As in notebook 05 and the paper's figures: for each objective the median over layers (pooled over layers and
# seeds) against step, with the interquartile range drawn as error bars at a few steps, shifted a little sideways
# per objective so that they do not hide each other. The bidirectional objectives are blue, the causal one purple.
# The grey band and the dashed line are the chance level: the central 95% and the median of the median over layers
# of random matrices of this shape (section 6), where every run starts.


# %%
def band(scores: xr.DataArray, dims=("seed", "layer")) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Quartiles over ``dims`` (pooled), per step."""
    q = scores.stack(sample=dims).quantile([0.25, 0.5, 0.75], dim="sample").values
    return q[0], q[1], q[2]


def null_reference(ax, samples: np.ndarray, what: str) -> None:
    """The null as a grey band (central 95%) and a dashed line (median), both labelled."""
    low, high = np.quantile(samples, [0.025, 0.975])
    ax.axhspan(low, high, color="0.88", lw=0, zorder=0, label=f"{what}: 95% band")
    ax.axhline(np.median(samples), color="0.45", ls="--", lw=1, zorder=1, label=f"{what}: median")


def spread_bars(ax, steps, low, mid, high, k: int, n: int, color, n_bars: int = 5) -> None:
    """Error bars from ``low`` to ``high`` at up to ``n_bars`` of the record ``steps`` (the last included), shifted
    sideways for the ``k``-th of ``n`` curves."""
    steps = np.asarray(steps)
    at = np.unique(np.linspace(0, len(steps) - 1, min(n_bars, len(steps))).round().astype(int))
    shift = (k - (n - 1) / 2) * 0.012 * (steps[-1] - steps[0])
    ax.errorbar(
        steps[at] + shift,
        mid[at],
        yerr=[mid[at] - low[at], high[at] - mid[at]],
        fmt="o",
        ms=3,
        color=color,
        elinewidth=1,
        capsize=2,
    )


pools = VV.null_pools(d_model, n_heads, n_layers, n_draws=n_null_draws, seed=seed)
fig, axes = plt.subplots(1, 2, figsize=(13, 4), sharex=True)
for ax, score in zip(axes, ("symmetry", "directionality"), strict=True):
    null_reference(ax, pools[score, "median"], "random matrices")
    for k, objective in enumerate(objectives):
        low, mid, high = band(runs[score].sel(objective=objective))
        ax.plot(runs.step, mid, color=COLORS[objective], lw=2, label=LABELS[objective])
        spread_bars(ax, runs.step, low, mid, high, k, len(objectives), COLORS[objective])
    ax.set(xlabel="step", ylabel=f"{score} score", title=f"{score}: median over layers (bars: IQR)")
axes[-1].legend(fontsize=8, loc="center left", bbox_to_anchor=(1.02, 0.5))
fig.tight_layout()
_ = plotting.savefig(fig, figures_dir / "07_scores_over_training")
plt.show()
prose.show("Median symmetry over layers, mean over seeds:\n\n" + "\n".join(VV.describe_trajectories(runs)))

# %% [markdown]
# ## 5. One line per layer
#
# Each layer's score against step, averaged over seeds, with error bars from the lowest to the highest seed at a
# few steps (cividis, as notebook 05: light = deep). The grey band and dashed line are the chance level of *one*
# random layer of this shape. For `classify` the last layer is the one the theory singles out.

# %%
fig, axes = plt.subplots(
    2, len(objectives), figsize=(3.6 * len(objectives) + 1, 6.5), sharex=True, sharey="row", squeeze=False
)
shades = plt.get_cmap("cividis")(np.linspace(0, 0.9, n_layers))
for column, objective in enumerate(objectives):
    for row, score in enumerate(("symmetry", "directionality")):
        ax = axes[row, column]
        null_reference(ax, pools[score, "last"], "one random layer")
        for layer in runs.layer.values:
            per_seed = runs[score].sel(objective=objective, layer=layer)
            mean = per_seed.mean("seed").values
            ax.plot(runs.step, mean, color=shades[layer], label=f"layer {layer}")
            low, high = per_seed.min("seed").values, per_seed.max("seed").values
            spread_bars(ax, runs.step, low, mean, high, int(layer), n_layers, shades[layer], n_bars=4)
        ax.set(title=f"{objective}: {score}", ylabel=f"{score} score" if column == 0 else None)
        if row == 1:
            ax.set_xlabel("step")
axes[0, -1].legend(fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5))
fig.tight_layout()
_ = plotting.savefig(fig, figures_dir / "07_scores_per_layer")
plt.show()
prose.show("Final symmetry of each layer, mean over seeds:\n\n" + "\n".join(VV.describe_layers(runs)))

# %% [markdown]
# ## 6. Where the runs end, against random matrices and against the predictions
#
# The paper's statistic for each run: the median over layers of the final scores, with the quartiles, and
# here also the last layer's scores (`symmetry_last`). One row per objective and seed.

# %%
summary = V.final_summary(runs)
summary.round(3)

# %% [markdown]
# **Against random matrices.** Every run starts as a random model, so the first question is whether training
# moved a score beyond what random matrices of the same width, head count and layer count give:
# `n_null_draws` models with Gaussian factors, each scored as the runs are (the median over `n_layers`
# layers, or one layer for the last). For each objective: the per-seed values, their percentiles in that
# null, and how many seeds lie outside its 95% range.
#
# **Against the predictions.** Each prediction of section 2 is a difference between two objectives, paired
# by seed (same initial trunk, same images): its mean over seeds with a 95% bootstrap interval, a one-sided
# sign-flip test in the predicted direction, and the null of the same difference between random models. A
# prediction *holds* when the interval lies on the predicted side of 0, the test's p is below `alpha = 0.05`
# and the difference is beyond the null's 95% range; it *does not hold* when the interval lies on the other
# side and the opposite test is significant; otherwise the runs *cannot tell at this scale*. With `n_seeds`
# seeds a sign-flip test cannot go below $2^{-n}$, so fewer than five seeds can never reach a verdict either way.

# %%
comparison = VV.compare_objectives(
    summary, d_model=d_model, n_heads=n_heads, n_layers=n_layers, n_draws=n_null_draws, seed=seed
)
blocks = [
    ("Final median symmetry over layers", "symmetry", "median"),
    ("Final symmetry of the last layer", "symmetry", "last"),
    ("Final median directionality over layers", "directionality", "median"),
]
prose.show(
    "\n\n".join(
        f"**{title}**, per objective:\n\n" + "\n".join(VV.describe_nulls(comparison.nulls, *key))
        for title, *key in blocks
    )
)

# %%
statement = "\n".join(VV.describe_effects(comparison))
print("The predictions, each a difference paired by seed:")
for effect in comparison.effects:
    print(f"- {effect.sentence()}")
for untested in comparison.untested:
    print(f"- not tested: {untested}")
held = sum(effect.verdict == "holds" for effect in comparison.effects)
print(f"Overall: {comparison.overall} ({held} of {len(comparison.effects)} tested predictions hold).")

# %%
unpredicted = VV.describe_unpredicted(summary)
if unpredicted:
    prose.show("Where the theory predicts nothing (`classify`'s median over layers): " + " ".join(unpredicted))
columns = ["estimate", "low", "high", "n", "p_value", "null_low", "null_high", "null_percentile", "verdict"]
comparison.table()[columns].round(3) if comparison.effects else None

# %% [markdown]
# ## 7. Local vision checkpoints (optional)
#
# Any checkpoint folder the extraction code reads (ViT, DeiT, BEiT, DINOv2, ViT-MAE, ... in Hugging Face
# format, see `attnstruct score --help`) can be scored here: its blocks are read with `iter_blocks` and scored
# by `pretrained.score_checkpoint`, exactly as in notebook 06. A stack is an encoder unless its attention
# is causal. Nothing is downloaded.

# %%
scored = pretrained.score_local_checkpoints(local_models)
if scored is None:
    local = pd.DataFrame()
    print("no local checkpoints given (parameter local_models)")
else:
    local = pretrained.summary(scored)
    print(local.round(3).to_string(index=False))

# %% [markdown]
# ## 8. Beside the paper's vision models
#
# Filled markers: this notebook's runs (one per seed: the median over layers, bars the interquartile range)
# and any local checkpoints. Open circles: the values **reported by Saponati et al. (2025)** for pretrained
# vision models, grouped by how those models were trained and placed next to the objective that imitates
# them (entries with a known extraction problem left out). They are the authors' numbers, not ours, and
# come from models a thousand times larger, trained on millions of images.

# %%
groups = [
    ("classify\n(ours)", "ours", "classify"),
    ("classify-mean\n(ours)", "ours", "classify-mean"),
    ("ViT, DeiT\n(paper)", "paper", "supervised (ViT, DeiT)"),
    ("masked\n(ours)", "ours", "masked"),
    ("BEiT, MAE,\nDiT (paper)", "paper", "masked image modelling (BEiT, MAE, DiT)"),
    ("next-patch\n(ours)", "ours", "next-patch"),
    ("iGPT\n(paper)", "paper", "autoregressive (iGPT)"),
    ("DINO, GIT,\nDETR (paper)", "paper", "other encoders (DINO, DINOv2, GIT, DETR)"),
]
groups = [g for g in groups if g[1] != "ours" or g[2] in objectives]
if scored is not None:
    groups.append(("local\ncheckpoints", "local", None))
fig, axes = plt.subplots(2, 1, figsize=(12, 8), sharex=True)
for ax, var in zip(axes, ("symmetry", "directionality"), strict=True):
    for x, (label, kind, key) in enumerate(groups):
        if kind == "ours":
            rows = summary[summary.objective == key]
            offsets = np.linspace(-0.15, 0.15, len(rows)) if len(rows) > 1 else np.zeros(1)
            medians = rows[f"{var}_median"].to_numpy()
            bars = [medians - rows[f"{var}_q25"].to_numpy(), rows[f"{var}_q75"].to_numpy() - medians]
            ax.errorbar(x + offsets, medians, yerr=bars, fmt="o", color=COLORS[key], capsize=3, mec="white", ms=7)
        elif kind == "paper":
            rows = reported[reported.group == key]
            color = plotting.DECODER_COLOR if (rows.role == "decoder").all() else plotting.ENCODER_COLOR
            jitter = np.linspace(-0.2, 0.2, len(rows)) if len(rows) > 1 else np.zeros(1)
            ax.scatter(x + jitter, rows[f"{var}_median"], s=22, facecolors="none", edgecolors=color, alpha=0.6)
        else:
            rows = local[local["stack"] != "cross"]
            offsets = np.linspace(-0.15, 0.15, len(rows)) if len(rows) > 1 else np.zeros(1)
            for offset, row in zip(offsets, rows.itertuples(), strict=True):
                color = plotting.ROLE_COLORS[row.stack]
                median = getattr(row, f"{var}_median")
                bars = [[median - getattr(row, f"{var}_q25")], [getattr(row, f"{var}_q75") - median]]
                ax.errorbar(x + offset, median, yerr=bars, fmt="D", color=color, capsize=3, mec="white", ms=7)
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xticks(range(len(groups)), [g[0] for g in groups], fontsize=9)
    ax.set(title=f"{var} (median over layers)", ylabel=f"{var} score")
axes[1].scatter([], [], marker="o", color=plotting.NEUTRAL_COLOR, label="this notebook, one per seed")
axes[1].scatter([], [], facecolors="none", edgecolors=plotting.NEUTRAL_COLOR, label="reported by the paper")
if scored is not None:
    axes[1].scatter([], [], marker="D", color=plotting.NEUTRAL_COLOR, label="local checkpoints")
axes[1].legend(loc="center left", bbox_to_anchor=(1.0, 0.5))
_ = plotting.savefig(fig, figures_dir / "07_vs_paper")
plt.show()
print(
    reported.groupby("group", sort=False)[["symmetry_median", "directionality_median"]]
    .agg(["min", "median", "max"])
    .round(3)
    .to_string()
)

# %% [markdown]
# ## 9. Save
#
# The dataset holds every run's per-layer and per-head scores over training (dims `objective`, `seed`,
# `step`, `layer`, `head`), the losses, the final per-seed medians, the scores of any local checkpoints
# (dims `checkpoint`, `checkpoint_layer`), and in its attributes the verdict sentences (`statement`), the
# overall verdict and the table of effects (`verdicts`, JSON).

# %%
dataset = runs.copy()
table = summary.set_index(["objective", "seed"])
for var in ("symmetry", "directionality"):
    dataset[f"final_{var}_median"] = table[f"{var}_median"].to_xarray().sel(objective=runs.objective)
    dataset[f"final_{var}_median"].attrs["long_name"] = f"median over layers of the final {var} of each run"
if scored is not None:
    per_layer = scored[["symmetry", "directionality"]].max("stack", skipna=True)  # one self-attention stack each
    per_layer = per_layer.drop_vars([c for c in per_layer.coords if c not in ("model", "layer")])
    dataset = dataset.merge(
        per_layer.rename(model="checkpoint", layer="checkpoint_layer", symmetry="checkpoint_symmetry").rename(
            directionality="checkpoint_directionality"
        )
    )
dataset.attrs = {
    **runs.attrs,
    **results.provenance_attrs(
        parameters=parameters,
        scored_matrix="W_qk = sum_h W_q^h (W_k^h)^T per layer (and W_q^h (W_k^h)^T per head), the paper's row-vector "
        "form; in nn.Linear weights sum_h W_q[h]^T W_k[h]; of a vision Transformer trained from scratch, and "
        "(checkpoint_*) of local checkpoints",
        title="07 vision: ViT-like classification ([CLS] and pooled), masked and next-patch training, scores over "
        "training",
        images=data.source,
        statement=statement,
        verdict=comparison.overall,
        verdicts=comparison.table().to_json(orient="index") if comparison.effects else "{}",
        checkpoints="; ".join(str(m) for m in local_models),
    ),
}
results.save_dataset(dataset, results_dir / "07_vision.nc")
dataset

# %% [markdown]
# ## Exercises
#
# The exercises build tiny models of their own, with the settings in `EXERCISE` below (width 32, 2 blocks of 2
# heads, `patch_size = 2`, batches of 4 images), so that their answers do not depend on this notebook's parameters.
# They train nothing and take about a second. `exercise_config(objective)` builds the configuration of such a model,
# and `V.build_model(config)` the model, whose trunk is initialised from the seed alone (section 2).

# %%
EXERCISE = {
    "steps": 20,
    "batch_size": 4,
    "lr": 0.001,
    "warmup": 5,
    "schedule": "constant",
    "weight_decay": 0.05,
    "clip": 1.0,
    "mask_rate": 0.4,
    "log_every": 20,
    "eval_every": 20,
    "checkpoint_every": 20,
    "d_model": 32,
    "n_layers": 2,
    "n_heads": 2,
    "ffn_mult": 4,
    "norm": "pre",
    "patch_size": 2,
    "levels": 4,
    "dropout": 0.0,
    "source": "sklearn-digits",
    "n_images": 1797,
    "val_fraction": 0.2,
    "device": "cpu",
    "amp": False,
}
exercise_images = I.load_images(EXERCISE["source"], EXERCISE["n_images"], EXERCISE["val_fraction"])


def exercise_config(objective: str, seed: int = 0) -> V.VisionConfig:
    """A tiny exercise model: the settings of ``EXERCISE`` with this objective and seed."""
    return V.VisionConfig(objective=objective, seed=seed, **EXERCISE)


def sign_of(change: float) -> int:
    """+1, 0 or -1 (0 for a change below 1e-9 in size)."""
    return 0 if abs(change) < 1e-9 else int(np.sign(change))


# %% [markdown]
# ### Exercise 07.1: what the causal mask does at step 0
#
# Write `ex_median_symmetry(model)`: the median over layers of the symmetry score of each layer's
# $W_{qk} = \sum_h W_q[h]^\top W_k[h]$ (heads summed), from the model's weights, as the training loop records it
# (`query_key_factors` and `factor_scores` with `sum_heads=True`). Then predict, for the two tiny models
# `V.build_model(exercise_config("masked"))` and `V.build_model(exercise_config("next-patch"))` before any training,
# the sign of next-patch's median symmetry minus masked's, as `ex_step0_sign` (`+1`, `0` or `-1`). The check
# compares your function with a brute-force score of each layer's matrix, and measures the sign.
#
# Hint: where does the causal mask act, on the weights or on the attention weights computed from them? And what
# does the trunk's initialisation depend on?


# %% nbgrader={"grade": false, "grade_id": "ex-07-1", "locked": false, "schema_version": 3, "solution": true}
def ex_median_symmetry(model) -> float:
    ### BEGIN SOLUTION
    w_q, w_k = query_key_factors(model)  # [layer, head, d_head, d_model] each
    return float(np.median(factor_scores(w_q, w_k, sum_heads=True).symmetry))
    ### END SOLUTION


### BEGIN SOLUTION
ex_step0_sign = 0  # the mask acts on the attention weights, not on W_q and W_k; the trunk comes from the seed alone
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "ex-07-1-check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
step0 = {}
for objective in ("masked", "next-patch"):
    model = V.build_model(exercise_config(objective))
    with torch.no_grad():
        layers = [symmetry_score(a.query.weight.double().T @ a.key.weight.double()) for a in attention_layers(model)]
    step0[objective] = float(np.median(layers))
    mine = ex_median_symmetry(model)
    assert abs(mine - step0[objective]) < 1e-9, (
        f"ex_median_symmetry gives {mine:+.6f} for {objective}; scoring each layer's W_qk gives {step0[objective]:+.6f}"
    )
gap = step0["next-patch"] - step0["masked"]
assert ex_step0_sign == sign_of(gap), (
    f"you predicted {ex_step0_sign!r}; next-patch minus masked is {gap:+.2e} at step 0"
)
print(f"right: at step 0 both models score {step0['masked']:+.3f}; any difference later comes from training")

# %% [markdown]
# ### Exercise 07.2: one query in the last layer
#
# In `classify` only `[CLS]`'s last output reaches the loss (section 2). Take the first training batch of the tiny
# models, `V.training_batch(config, exercise_images, 1)` (`EXERCISE["batch_size"]` images), and the gradient of the
# mean loss with respect to the last block's query weight $W_q$ (`model.encoder.blocks[-1].attention.query.weight`,
# all heads, `d_model` by `d_model`). Predict its rank for `classify` as `ex_rank_classify` (an expression in the
# settings), and the sign of the rank for `classify-mean` minus the rank for `classify` as `ex_rank_sign` (`+1`, `0`
# or `-1`). The check computes both gradients with autograd.
#
# Hint: $\partial L / \partial W_q = \sum_{\text{images}} \sum_i (\partial L / \partial q_i)\, x_i^\top$, one outer
# product per query $i$ whose output reaches the loss. How many such queries does an image have in the last layer
# of each objective?

# %% nbgrader={"grade": false, "grade_id": "ex-07-2", "locked": false, "schema_version": 3, "solution": true}
### BEGIN SOLUTION
ex_rank_classify = EXERCISE["batch_size"]  # one query per image ([CLS]): one outer product per image
ex_rank_sign = +1  # classify-mean: every token's query reaches the loss, many more outer products
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "ex-07-2-check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
ranks = {}
for objective in ("classify", "classify-mean"):
    config = exercise_config(objective)
    model = V.build_model(config)
    total, count = V.summed_loss(model, V.training_batch(config, exercise_images, 1), objective)
    (total / count).backward()
    ranks[objective] = int(torch.linalg.matrix_rank(model.encoder.blocks[-1].attention.query.weight.grad))
assert ex_rank_classify == ranks["classify"], (
    f"you predicted rank {ex_rank_classify!r}; the gradient for classify has rank {ranks['classify']}"
)
assert ex_rank_sign == sign_of(ranks["classify-mean"] - ranks["classify"]), (
    f"you predicted {ex_rank_sign!r}; the ranks are {ranks['classify-mean']} (classify-mean) and "
    f"{ranks['classify']} (classify)"
)
print(f"right: rank {ranks['classify']} for classify, {ranks['classify-mean']} for classify-mean")

# %% [markdown]
# ## What to take away
#
# * The gradient of $W_{qk}$ is a sum of outer products, query on the left: which queries reach the loss, and in
#   which orders pairs of tokens appear, is what the theory reads off an objective.
# * A causal mask changes nothing in the weights at step 0; it changes which pairs enter every update after it.
# * `classify` and `classify-mean` differ only in their pooling, yet their last layers receive different gradients:
#   one query per image against every token.
# * A score means something against random matrices of the same shape, and a prediction is tested over seeds:
#   with few seeds the honest verdict is *cannot tell at this scale*.

# %% [markdown]
# ## Knobs to try
#
# * `n_seeds`: five or more let the one-sided sign-flip test reach a verdict; with fewer every prediction reads
#   *cannot tell at this scale*.
# * `steps`: longer runs move the scores further from the random matrices' band, where the predicted orderings can
#   show.
# * `patch_size = 1`: pixels as tokens, as iGPT; the sequence grows to 65 tokens and the runs take longer.
# * `objectives`: drop some to train faster, or keep only `classify` and `classify-mean` to look at the last layer.
