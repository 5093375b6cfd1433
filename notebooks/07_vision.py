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
# every token.
#
# The notebook then goes step by step, and each step can stop the next one from saying anything. Section 3
# asks whether the runs learned their task at all, by a criterion fixed before looking at the scores: a run
# whose loss is no better than a guess that ignores the image has not learned, and a prediction that rests on
# it gets no verdict. Sections 4 and 5 follow the scores over training, against random matrices of the same
# shape. Section 6 tests the predictions seed by seed, and says, computed from the number of seeds, whether
# this design can reach a verdict at all. Section 7 scores real pretrained vision transformers (the packaged ones,
# and any checkpoint folders you list in `local_models`) with the same code, and section 8 puts the runs beside
# them and beside the paper's pretrained models.

# %% [markdown]
# **Learning goals.** After this notebook you can:
#
# * say, for each of four vision objectives, which queries reach the loss and so which pairs of tokens enter the
#   gradient of $W_{qk}$, and what the theory predicts from that;
# * check that a model learned before reading its scores: its loss against the best guess that ignores the image
#   (the entropy of the targets), and a classifier's accuracy against chance;
# * read symmetry and directionality over training against random matrices of the same shape;
# * test a prediction seed by seed, and read a verdict of *cannot tell at this scale* as a statement about the
#   number of seeds or about runs that did not learn, not about the theory.

# %% tags=["parameters", "vision-training"]
# Every vision-training setting can be set here or in a profile (`-p steps 2000`): the images, the patches and grey
# levels, the model's shape, the optimiser and its schedule, how often to log and evaluate, the device. Their
# defaults are this notebook's quick profile, declared once in `attnstruct.tasks.vision_config.VisionConfig`;
# `attnstruct train --task vision --help` lists each with its meaning. This cell holds what only this notebook takes.
objectives = ["classify", "classify-mean", "masked", "next-patch"]  # any of attnstruct.tasks.vision_config.OBJECTIVES
seed = 0  # first seed; the runs use seed, seed + 1, ...
n_seeds = 5  # runs per objective (5: the fewest a one-sided sign-flip test decides; section 6 prints the reach)
n_null_draws = 400  # random models per null distribution (section 6)
workers = 2  # runs trained side by side, one thread each
pretrained_models = ["dinov2-s14", "clip-vit-b16-vision"]  # packaged vision transformers drawn beside the runs
local_models = []  # local vision checkpoints to score: folder paths, or [name, path] pairs
cache_dir = None  # zoo cache folder; None means ATTNSTRUCT_CACHE or ~/.cache/attnstruct (nothing is fetched here)
results_dir = None  # where the dataset goes; None: results/ of the work folder (attnstruct.work)
figures_dir = None  # where the figures go; None: figures/ of the work folder

# %%
import time

import matplotlib.pyplot as plt
import numpy as np
import torch

from attnstruct import factor_scores, notebooks, reference, results, stats, symmetry_score, work
from attnstruct.analyses import nb07_vision as vision_study
from attnstruct.analyses import paper_comparison, plans, pretrained_vision
from attnstruct.checkpoints.extract import count_parameters
from attnstruct.report import plotting, prose
from attnstruct.tasks import images, vision
from attnstruct.training.model import attention_layers, query_key_factors

plotting.set_style()
torch.set_num_threads(1)
results_dir, figures_dir = work.output_dirs(results_dir, figures_dir)
parameters = notebooks.notebook_parameters("07_vision", globals())  # recorded with the dataset
objectives, configs = vision_study.plan_runs(parameters)  # every objective by every seed, in one order
settings = configs[0]  # what every run shares: the images, the model's shape, the optimiser, the device
COLORS, LABELS = vision_study.COLORS, vision_study.LABELS
reported = paper_comparison.reported_vision(reference.reference_table())  # the authors' values
prose.say(
    "The paper's vision encoders score a median symmetry over layers of {encoders}: supervised ViT and DeiT "
    "{supervised}, masked image modelling (BEiT, MAE, DiT) {masked}. The one autoregressive image model, iGPT, scores "
    "{igpt} (directionality {igpt_directionality}). These are the authors' values (their result files, without the "
    "entries flagged as extraction problems), not ours.",
    vision_study.reported_facts(reported),
)

# %% [markdown]
# ## 1. Images and patches
#
# scikit-learn's `load_digits` (1797 handwritten digits, 8x8 pixels, 17 grey levels, shipped inside the
# scikit-learn wheel, so nothing is downloaded) is the default image set. `source = "synthetic-digits"`
# renders digits instead: a 5x7 bitmap font under random rotation, scale, shear, shift, stroke width,
# contrast and noise, at the same size and grey levels (`attnstruct.tasks.images.synthetic_digits`). Either way
# the image set and its train/validation split are fixed, whatever the seed, so two runs that differ in their
# seed differ in their initial weights and in the order of their batches, never in the images they learn from.
#
# Each image is cut into non-overlapping `patch_size` x `patch_size` patches in raster order (left to right,
# top to bottom); a patch is one token, embedded by a linear map, as in ViT. Position 0 carries one extra
# learned token: `[CLS]` for `classify`, the start of the image for the others (`classify-mean` pools it
# with the patches).
#
# The figure shows eight training images with their labels (top) and, for the first of them (bottom), what
# each objective sees: the image, its patch grid, the input of `masked` (masked patches tinted, a
# `mask_rate` share of them), the targets of the pixel objectives (each pixel binned into `levels` grey levels),
# and the order in which `next-patch` reads the patches: patch $t$ is predicted from the patches before it.

# %%
data = images.load_images(settings.source, settings.n_images, settings.val_fraction)
print(f"{data.source}: {len(data.train_images)} training and {len(data.val_images)} validation images")
example = vision_study.example_panels(data, settings.patch_size, settings.levels, settings.mask_rate, seed)

# %% tags=["hide-input"]
fig, axes = plt.subplots(2, 8, figsize=(12, 3.4))
for ax, image, label in zip(axes[0], example.images, example.labels):
    ax.imshow(image, cmap="gray_r", vmin=0, vmax=1)
    ax.set_title(f"label {label}", fontsize=9)
greys = plt.get_cmap("gray_r").copy()
greys.set_bad(plotting.ENCODER_COLOR, 0.35)  # masked patches
for ax, (title, image) in zip(axes[1], example.panels.items()):
    ax.imshow(image, cmap=greys, vmin=0, vmax=1)
    ax.set_title(title, fontsize=9)
for edge in example.edges:  # the patch grid, on the second panel
    axes[1][1].axhline(edge, color=plotting.DECODER_COLOR, lw=1)
    axes[1][1].axvline(edge, color=plotting.DECODER_COLOR, lw=1)
axes[1][4].imshow(example.order, cmap="Purples")
for (row, column), k in np.ndenumerate(example.order):
    axes[1][4].text(column, row, str(k), ha="center", va="center", fontsize=7)
axes[1][4].set_title("causal order", fontsize=9)
for ax in axes.flat:
    ax.set_xticks([])
    ax.set_yticks([])
for ax in axes[1][5:]:
    ax.axis("off")
shown = vision_study.examples_shown(example, settings.patch_size, settings.levels)
title = prose.fill(
    "{images}, and the first as the objectives see it: {patches} of {patch_size} pixels,\n"
    "{masked} of them masked, {levels} grey levels as targets, and the causal reading order",
    shown,
)
plotting.message_title(fig, title)
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
#   random matrices' value is consistent with it, not a failure of it. Below the last layer every token reaches
#   the loss through `[CLS]`'s attention to it (as a key and as a value), so every token is a query and both
#   orders appear, with weights set by how much `[CLS]` attends to each token: a symmetric drive of a strength
#   the theory does not give. It therefore orders `classify`'s last layer below `classify-mean`'s, and says
#   nothing about `classify`'s median over layers against the other objectives.
#
# The comparisons that follow, each a difference between two objectives of the same seed and each tested in
# section 6:

# %%
predicted = [prose.fill("- {claim}: {sign}; {why}.", p) for p in vision_study.predictions_declared()]
prose.show("**Predicted** (treated minus baseline, per seed):\n\n" + "\n".join(predicted))

# %% [markdown]
# **Not predicted** (described in section 6, never given a verdict):
#
# - `classify` against `masked` or `next-patch` (median over layers): one query in the last layer, a symmetric drive
#   of unknown strength below it.
# - `classify-mean` against `masked`: both predicted symmetric, in no order.

# %% [markdown]
# **The analysis plan, declared before the runs.** The four predictions form one family of claims. The first, the
# masked objective against next-patch prediction, is the paper's own contrast (bidirectional against causal
# training of the same model) and is the **primary** claim, corrected over the primary family by Holm's method;
# the other three are **secondary**, reported uncorrected and labelled so in their verdict lines. The table gives,
# for each, the unit, the statistic, the test, the null of its question (the runs of a seed start from the same
# trunk, so the null swaps the two objectives within seeds), and the smallest p the design can reach with this
# notebook's seeds, before and after the correction.

# %%
reach = plans.seed_reach(vision_study.PLAN, n_seeds)
plan_reach = stats.plan_reach(vision_study.PLAN, reach)
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
prose.show(prose.markdown_table(vision_study.PLAN.table(reach)))

# %% [markdown]
# **Training.** The runs are trained side by side, `workers` at a time, one thread each. A run is a pure function
# of its configuration on a CPU: the batch of step $s$ (the images, and the mask of `masked`) is drawn from
# the seed and $s$ alone, so the same parameters give the same dataset, bit for bit. All four objectives have the
# same sequence length (one special token and the patches); only the last linear layer differs in size.

# %% tags=["slow"]
model = vision.build_model(configs[0])
print(
    f"sequence length {1 + configs[0].n_patches}, {count_parameters(model):,} parameters ({configs[0].objective} head)"
)
print(f"{len(configs)} runs: {', '.join(objectives)} x seeds {seed}..{seed + n_seeds - 1}, {settings.steps} steps each")
start = time.perf_counter()
runs = vision.train_many(configs, results_dir / "vision_runs", workers=workers)  # stored there, reused
print(f"trained in {time.perf_counter() - start:.0f} s with {workers} worker(s)")

# %% [markdown]
# ## 3. Did the models learn?
#
# Scores of a model that does not learn mean nothing, so the losses come first, and they decide what section 6
# may say. The losses are different quantities: the cross-entropy of the 10 classes per image for the
# classifiers, of the `levels` grey levels per target pixel for `masked` and `next-patch`. Every run starts
# near a uniform guess (dashed: $\log 10$ for the classes, $\log$ `levels` per pixel).
#
# A uniform guess is too easy a bar, though. Most pixels of a digit are background, so a model that only learned
# how often each grey level occurs, without looking at the image, would already sit well below it. The fair
# yardstick is the **context-free loss**: the best mean cross-entropy of a prediction that ignores the image,
# which is the entropy $H = -\sum_c p_c \log p_c$ of the targets' frequencies $p_c$ in the training images (the
# class frequencies of the training labels for the classifiers, the grey-level frequencies of the training pixels
# for the pixel objectives; every pixel is a `next-patch` target, and any patch is masked with the same chance).
#
# **The criterion.** A run has learned when its final validation loss lies below $(1 - m) H$, a margin $m$ of
# the context-free loss below it (`LEARNING_MARGIN` of `attnstruct.analyses.nb07_vision`, printed below as a percentage): the image
# must explain that share of the targets' entropy. Matching the frequencies explains none of it, so a run that
# passes used its input. The criterion is applied to every objective and seed (in each panel the context-free loss
# is dash-dotted, the criterion's threshold dotted); a prediction of section 6 rests on the runs of its two
# objectives, and is tested as usual only if every one of them learned. Otherwise it reads
# *cannot tell at this scale* with the reason that the runs did not learn, whatever its scores show. The
# classifiers' accuracy (last panel) should also stand well above chance (dashed: one in 10); it is shown, not used
# by the criterion.

# %%
summary = vision_study.final_summary(runs)  # per objective and seed: final scores, validation loss and accuracy
learning = vision_study.learning_table(summary, vision_study.context_free_losses(data, objectives, settings.levels))
learned = vision_study.learned_objectives(learning)
criterion = vision_study.learning_thresholds(learning)

# %% tags=["hide-input"]
fig, axes = plt.subplots(1, len(objectives) + 1, figsize=(3.6 * (len(objectives) + 1), 3.6), sharex=True)
for ax, objective in zip(axes, objectives):
    cell = runs.sel(objective=objective)
    for s in cell.seed.values:
        ax.plot(runs.step[1:], cell.train_loss.sel(seed=s)[1:], color=COLORS[objective], lw=0.8, alpha=0.6)
    val = cell.val_loss.dropna("step", how="all").mean("seed")
    ax.plot(val.step, val, "o-", color=COLORS[objective], label="validation, mean over seeds")
    ax.axhline(vision_study.uniform_loss(objective, settings.levels), color="0.4", ls="--", lw=1, label="uniform guess")
    ax.axhline(criterion.context_free[objective], color="0.4", ls="-.", lw=1, label="context-free loss")
    ax.axhline(criterion.threshold[objective], color="0.2", ls=":", lw=1.2, label="learned below this")
    ax.set(xlabel="step", title=LABELS[objective])
axes[0].set_ylabel("cross-entropy (nats)")
axes[0].legend(title="thin: training, per seed", fontsize=8, title_fontsize=8, loc="center right")
ax = axes[-1]
for objective in [o for o in objectives if o in vision.CLASSIFIERS]:
    accuracy = runs.val_accuracy.sel(objective=objective).dropna("step", how="all")
    for s in accuracy.seed.values:
        ax.plot(accuracy.step, accuracy.sel(seed=s), "o-", color=COLORS[objective], lw=1, ms=3, alpha=0.7)
    ax.plot([], [], "o-", color=COLORS[objective], label=objective)
ax.axhline(1 / data.n_classes, color="0.4", ls="--", lw=1, label="chance")
ax.set(xlabel="step", ylabel="validation accuracy", ylim=(0, 1), title="classifiers: accuracy, per seed")
ax.legend(fontsize=8)
overall = vision_study.learning_facts(learning)
title = prose.fill("Every run learned" if overall.all_learned else "{learned} of {runs} learned", overall) + prose.fill(
    ": the final validation losses explain {gain} of the targets' context-free entropy (learning asks {margin})",
    overall,
)
if overall.any_accuracy:
    title += prose.fill(";\nthe classifiers reach {accuracy} validation accuracy", overall)
plotting.message_title(fig, title)
fig.tight_layout()
_ = plotting.savefig(fig, figures_dir / "07_losses")
plt.show()

# %%
lines = []
for arm in vision_study.learning_by_objective(learning, settings.levels):
    losses = ", ".join(
        prose.fill("{loss} (seed {seed}, {met})", run) for run in vision_study.seed_losses(learning, arm.objective)
    )
    lines.append(
        prose.fill(
            "- `{objective}`: context-free loss {context_free} nats (the class frequencies of the training labels; a "
            "uniform guess scores {uniform}); learned means a final validation loss below {threshold}, {margin} below "
            "it."
            if arm.classifier
            else "- `{objective}`: context-free loss {context_free} nats (the grey-level frequencies of the training "
            "pixels; a uniform guess scores {uniform}); learned means a final validation loss below {threshold}, "
            "{margin} below it.",
            arm,
        )
        + f" Final validation loss {losses}: "
        + prose.fill(
            "{met} of {seeds} met it; final validation accuracy {accuracy} (chance {chance})."
            if arm.classifier
            else "{met} of {seeds} met it.",
            arm,
        )
    )
prose.show("\n".join(lines))
gate = vision_study.learning_gate(learned)
prose.say(
    "Every run of {objectives} met the criterion: the predictions of section 6 are tested on runs that learned."
    if gate.all_learned
    else "Not every run of {failed} met the criterion. The predictions that rest on {them} ({claims}) read "
    "*{verdict}: {reason}*, whatever their scores show."
    if gate.any_claims
    else "Not every run of {failed} met the criterion. No prediction rests on them.",
    gate,
)

# %% [markdown]
# ## 4. Symmetry and directionality against training steps
#
# As in notebook 05: for each objective, each seed's median over layers, averaged over seeds, against step (the
# statistic the verdicts of section 6 read, one number per seed), with the range over seeds drawn as error bars at a
# few steps, shifted a little sideways per objective so that they do not hide each other. The bidirectional objectives are blue, the causal one purple.
# The grey band and the dashed line are the chance level: the central 95% and the median of the median over layers
# of random matrices of this shape (section 6), where every run starts.
#
# What to look for: whether the curves leave the band at all, in which direction, and whether the blue and purple
# curves part. A curve inside the band is what an untrained model of this shape scores; the theory speaks of the
# direction training pushes $W_{qk}$, so a difference between objectives only means something once the curves
# have moved.

# %%
pools = vision_study.null_pools(settings.d_model, settings.n_heads, settings.n_layers, n_draws=n_null_draws, seed=seed)

# %% tags=["hide-input"]
fig, axes = plt.subplots(1, 2, figsize=(13, 4), sharex=True)
for ax, score in zip(axes, vision_study.SCORES, strict=True):
    plotting.null_band(ax, pools[score, "median"], "random matrices")
    for k, objective in enumerate(objectives):
        per_seed = runs[score].sel(objective=objective).median("layer")  # [seed, step]
        low, mid, high = per_seed.min("seed"), per_seed.mean("seed"), per_seed.max("seed")
        ax.plot(runs.step, mid, color=COLORS[objective], lw=2, label=LABELS[objective])
        x, y, bars = vision_study.bar_points(runs.step, low, mid, high, k, len(objectives))
        ax.errorbar(x, y, yerr=bars, fmt="o", ms=3, color=COLORS[objective], elinewidth=1, capsize=2)
    ax.set(xlabel="step", ylabel=f"{score} score", title=f"{score}: median over layers (bars: range over seeds)")
axes[-1].legend(fontsize=8, loc="center left", bbox_to_anchor=(1.02, 0.5))
ordering = vision_study.primary_ordering(summary, all(learned.values()))
title = prose.fill(
    "{treated} ends {direction} {baseline} in {score} ({place}) in {agreeing} of {seeds};\n"
    if ordering.can_tell
    else "Both scores during training ({reason});\n",
    ordering,
) + prose.fill("final median symmetry over layers (mean over seeds): {ends}", ordering)
plotting.message_title(fig, title)
fig.tight_layout()
_ = plotting.savefig(fig, figures_dir / "07_scores_over_training")
plt.show()

# %%
trajectories = [
    prose.fill("- `{objective}`: highest {peak} at step {peak_step}, {end} at the end (step {end_step}).", curve)
    for curve in vision_study.trajectories(runs)
]
prose.show("Median symmetry over layers, mean over seeds:\n\n" + "\n".join(trajectories))

# %% [markdown]
# ## 5. One line per layer
#
# Each layer's score against step, averaged over seeds, with error bars from the lowest to the highest seed at a
# few steps (cividis, as notebook 05: light = deep). The grey band and dashed line are the chance level of *one*
# random layer of this shape, which is wider than the band of a median over layers. For `classify` the last layer
# is the one the theory singles out: it is the only layer whose gradient has a single query per image, so it is
# the one to compare with the same layer of `classify-mean`.

# %% tags=["hide-input"]
fig, axes = plt.subplots(
    2, len(objectives), figsize=(3.6 * len(objectives) + 1, 6.5), sharex=True, sharey="row", squeeze=False
)
shades = plt.get_cmap("cividis")(np.linspace(0, 0.9, settings.n_layers))
for column, objective in enumerate(objectives):
    for row, score in enumerate(vision_study.SCORES):
        ax = axes[row, column]
        plotting.null_band(ax, pools[score, "last"], "one random layer")
        spread = vision_study.layer_spread(runs, score, objective)
        for layer in runs.layer.values:
            curve = spread.sel(layer=layer)
            ax.plot(runs.step, curve["mean"], color=shades[layer], label=f"layer {layer}")
            x, y, bars = vision_study.bar_points(
                runs.step, curve["low"], curve["mean"], curve["high"], int(layer), settings.n_layers, n_bars=4
            )
            ax.errorbar(x, y, yerr=bars, fmt="o", ms=3, color=shades[layer], elinewidth=1, capsize=2)
        ax.set(title=f"{objective}: {score}", ylabel=f"{score} score" if column == 0 else None)
        if row == 1:
            ax.set_xlabel("step")
axes[0, -1].legend(fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5))
ordering = vision_study.last_layer_ordering(summary, all(learned.values()))
title = prose.fill(
    "{treated} ends {direction} {baseline} in {score} ({place}) in {agreeing} of {seeds};\n"
    if ordering.can_tell
    else "Every layer during training ({reason});\n",
    ordering,
) + prose.fill("last layer's final symmetry (mean over seeds): {ends}", ordering)
plotting.message_title(fig, title)
fig.tight_layout()
_ = plotting.savefig(fig, figures_dir / "07_scores_per_layer")
plt.show()

# %%
layers = [
    prose.fill("- `{objective}`: {values} (layer {first} to {last}).", layer)
    for layer in vision_study.final_layers(runs)
]
prose.show("Final symmetry of each layer, mean over seeds:\n\n" + "\n".join(layers))

# %% [markdown]
# ## 6. Where the runs end, against random matrices and against the predictions
#
# The paper's statistic for each run: the median over layers of the final scores, with the quartiles, and
# here also the last layer's scores (`symmetry_last`), the final validation loss and, for the classifiers, the
# final validation accuracy. One row per objective and seed.

# %%
summary.round(3)

# %% [markdown]
# **Against random matrices.** Every run starts as a random model, so the first question is whether training
# moved a score beyond what random matrices of the same width, head count and layer count give:
# `n_null_draws` models with Gaussian factors, each scored as the runs are (the median over `n_layers`
# layers, or one layer for the last). For each objective: the per-seed values, their percentiles in that
# null, and how many seeds lie outside its 95% range. This is a description of each run, seed by seed; the
# tests come next.

# %%
comparison = vision_study.compare_objectives(
    summary,
    d_model=settings.d_model,
    n_heads=settings.n_heads,
    n_layers=settings.n_layers,
    n_draws=n_null_draws,
    seed=seed,
    learned=learned,
)
for heading, score, place in (
    ("Final median symmetry over layers", "symmetry", "median"),
    ("Final symmetry of the last layer", "symmetry", "last"),
    ("Final median directionality over layers", "directionality", "median"),
):
    rows = [
        prose.fill(
            "- `{objective}`: {values} over {seeds} (mean {mean}); null percentile {percentiles}; {outside} of {n} "
            "outside the null's 95% range [{null_low}, {null_high}] (centre {centre}), {above} above it.",
            row,
        )
        for row in vision_study.against_null(comparison.nulls, score, place)
    ]
    prose.show(f"**{heading}**, per objective:\n\n" + "\n".join(rows))

# %% [markdown]
# **Against the predictions.** Each prediction of section 2 is a difference between two objectives, paired
# by seed (same initial trunk, same images): its mean over seeds with a 95% bootstrap interval, a one-sided
# sign-flip test in the predicted direction, and the null of that question: the mean differences that swapping the
# two objectives within seeds gives (two random models would not do, since the runs of a seed start from the same
# weights). Each is decided under the plan of section 2. The rule is the project's one rule for every verdict:
#
# * a prediction resting on runs that did not learn (section 3) reads *cannot tell at this scale*, whatever the
#   numbers;
# * it *holds* when the interval lies on the predicted side of 0, the test's p is below `alpha = 0.05` and the
#   difference is beyond the null's 95% range;
# * it *does not hold* when the interval lies on the other side and the opposite test is significant;
# * otherwise the runs *cannot tell at this scale*.
#
# **What the design can reach.** A sign-flip test of $n$ seeds compares the observed mean with the $2^n$ means
# obtained by flipping the signs of the differences; even when every seed points the predicted way, the observed
# mean is only the largest of those $2^n$, so p cannot go below $2^{-n}$. When that floor is not below `alpha`,
# no outcome of the runs could give a verdict either way, and the honest reading is that the design is too small,
# not that the theory failed. The line below computes the floor for this notebook's seeds, and the verdicts follow.

# %%
design = stats.design_reach(comparison.n_seeds, alpha=comparison.alpha)
prose.say(
    "With {design}, the smallest p a one-sided {test} test can reach is {smallest}, below alpha = {alpha}: the "
    "design can reach a verdict either way."
    if design.reachable
    else "With {design}, the smallest p a one-sided {test} test can reach is {smallest}, not below alpha = "
    "{alpha}: every prediction reads *{verdict}* whatever the data show, since the design cannot reach "
    "a verdict; it takes at least {needed}.",
    design,
)
verdicts = vision_study.overall_verdict(comparison)
statement = [f"- {prose.effect_line(effect)}" for effect in comparison.effects]
statement += [f"- not tested: {reason}" for reason in comparison.untested]
statement.append(
    prose.fill(
        "\n**Overall, the primary prediction ({primary}) after Holm's correction: {verdict}** ({held} of {tested} "
        "tested predictions hold, {failed} do not, {undecided} cannot be told at this scale, {unlearned} of them "
        "because the runs did not learn)."
        if verdicts.any_unlearned
        else "\n**Overall, the primary prediction ({primary}) after Holm's correction: {verdict}** ({held} of "
        "{tested} tested predictions hold, {failed} do not, {undecided} cannot be told at this scale).",
        verdicts,
    )
)
prose.show("\n".join(statement))

# %% [markdown]
# Where the theory makes no prediction (`classify`'s median over layers against the other objectives), the runs
# are only described: how many seeds end on each side, and the mean difference, without a test. Then the table of
# the tested predictions: the estimate with its interval, the number of seeds, the test's p, the null's range and
# where the estimate sits in it, and the verdict.

# %%
unpredicted = [
    prose.fill(
        "`classify` ends below `{other}` in {below} of {seeds} (median symmetry over layers, mean difference "
        "{difference}).",
        pair,
    )
    for pair in vision_study.unpredicted(summary)
]
if unpredicted:
    prose.show("Where the theory predicts nothing (`classify`'s median over layers): " + " ".join(unpredicted))
comparison.table(vision_study.VERDICT_COLUMNS).round(3)

# %% [markdown]
# ## 7. Real pretrained vision transformers
#
# The small runs above can be set beside real ones. `pretrained_models` names packaged vision transformers (by
# default DINOv2 ViT-S/14 and the vision tower of CLIP ViT-B/16, the two with a permissive licence; notebook 03 reads
# them too, and the non-commercial Swin-B when it is fetched); each is read from the cache where `attnstruct
# fetch-models` put it, and one that is not fetched is named and left out (nothing is downloaded here). Any other
# checkpoint folder the extraction code reads (ViT, DeiT, BEiT, DINOv2, ViT-MAE, ... in Hugging Face format, see
# `attnstruct score --help`) can be added in `local_models`. Every one is read with `iter_blocks` and scored by
# `tables.score_checkpoint`, exactly as in notebook 03; its role comes from its blocks (`tables.role_of`): a stack with
# causal self-attention is a decoder, one with bidirectional self-attention an encoder. Each checkpoint is summarised
# as the runs are, by the median and quartiles over layers of both scores, and drawn in section 8.

# %%
scored, not_fetched = pretrained_vision.pretrained_and_local(pretrained_models, local_models, cache_dir)
local = vision_study.local_summary(scored)
checkpoints = vision_study.local_facts(local, not_fetched)
prose.say(
    "{checkpoints} scored: {names}; their summary below."
    if checkpoints.any
    else "No pretrained checkpoint scored (parameters `pretrained_models` and `local_models`).",
    checkpoints,
)
if checkpoints.any_missing:
    prose.say("Not fetched, so not drawn: {missing} (`attnstruct fetch-models NAME` fetches one).", checkpoints)
None if local.empty else local.round(3)

# %% [markdown]
# ## 8. Beside the paper's vision models
#
# Filled markers: this notebook's runs (one per seed: the median over layers, bars the interquartile range)
# and the pretrained checkpoints of section 7 (diamonds). Open circles: the values **reported by Saponati et al. (2025)** for pretrained
# vision models, grouped by how those models were trained and placed right after the objective that imitates
# them (entries with a known extraction problem left out): ViT and DeiT, which read the class from `[CLS]`,
# after `classify`; BEiT, MAE and DiT after `masked`; iGPT after `next-patch`; the encoders trained otherwise
# (DINO, DINOv2, GIT, DETR) at the right. `classify-mean`, at the left, has no counterpart among them. They are
# the authors' numbers, not ours, and come from models a thousand times larger, trained on millions of images,
# so the figure shows where the small runs sit on the same axes, not whether they reproduce the paper: that
# question is section 6's. The table under the figure gives the smallest, median and largest of the paper's
# values per group.

# %%
groups = vision_study.comparison_groups(objectives, with_local=scored is not None)
points = vision_study.comparison_points(groups, summary, reported, local)

# %% tags=["hide-input"]
markers = {"ours": "o", "local": "D"}
fig, axes = plt.subplots(2, 1, figsize=(12, 8), sharex=True)
for ax, score in zip(axes, vision_study.SCORES, strict=True):
    for (kind, color), rows in points[points.score == score].groupby(["kind", "color"], sort=False):
        if kind == "paper":
            ax.scatter(rows.x, rows["median"], s=22, facecolors="none", edgecolors=color, alpha=0.6)
        else:
            bars = [rows["median"] - rows.q25, rows.q75 - rows["median"]]
            ax.errorbar(rows.x, rows["median"], yerr=bars, fmt=markers[kind], color=color, capsize=3, mec="white", ms=7)
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xticks(range(len(groups)), [label for label, *_ in groups], fontsize=9)
    ax.set(title=f"{score} (median over layers)", ylabel=f"{score} score")
axes[1].scatter([], [], marker="o", color=plotting.NEUTRAL_COLOR, label="this notebook, one per seed")
axes[1].scatter([], [], facecolors="none", edgecolors=plotting.NEUTRAL_COLOR, label="reported by the paper")
if scored is not None:
    axes[1].scatter([], [], marker="D", color=plotting.VISION_COLOR, label="pretrained checkpoints")
axes[1].legend(loc="center left", bbox_to_anchor=(1.0, 0.5))
beside = vision_study.beside_paper(summary, reported, local)
title = prose.fill(
    "Our {runs} beside the paper's {models}:\nmedian symmetry over layers {ours} against {theirs}, {stacks} {local}"
    if beside.any_local
    else "Our {runs} beside the paper's {models}:\nmedian symmetry over layers {ours} against {theirs}",
    beside,
)
plotting.message_title(fig, title)
_ = plotting.savefig(fig, figures_dir / "07_vs_paper")
plt.show()

# %%
vision_study.reported_ranges(reported)

# %% [markdown]
# ## 9. Save
#
# The dataset contains every run's per-layer and per-head scores over training (dims `objective`, `seed`,
# `step`, `layer`, `head`), the losses, the final per-seed medians, whether each run learned (`learned`) and the
# context-free loss it was measured against (`context_free_loss`), the scores of the pretrained checkpoints (dims
# `checkpoint`, `checkpoint_layer`), and in its attributes the verdict sentences (`statement`), the overall
# verdict, the table of effects (`verdicts`, JSON) and the learning margin (`learning_margin`).

# %%
dataset = vision_study.results_dataset(
    runs,
    summary,
    learning,
    comparison,
    parameters=parameters,
    source=data.source,
    statement="\n".join(statement),
    scored=scored,
    local_models=[*(m for m in pretrained_models if m not in not_fetched), *local_models],
)
results.save_dataset(dataset, results_dir / "07_vision.nc")
dataset

# %% [markdown]
# ## Exercises
#
# The exercises build tiny models of their own, with the settings `EXERCISE` of `attnstruct.teaching.exercise_runs` (width 32, 2 blocks of 2
# heads, `patch_size = 2`, batches of 4 images), so that their answers do not depend on this notebook's parameters.
# They train nothing and take about a second. `exercise_config(objective)` builds the configuration of such a model,
# and `vision.build_model(config)` the model, whose trunk is initialised from the seed alone (section 2).

# %%
from attnstruct.teaching.exercise_runs import VISION_EXERCISE as EXERCISE
from attnstruct.teaching.exercise_runs import sign_of, vision_exercise_images
from attnstruct.teaching.exercise_runs import vision_exercise_config as exercise_config

exercise_images = vision_exercise_images()


# %% [markdown]
# ### Exercise 07.1: what the causal mask does at step 0
#
# > **Difficulty** 2/5 · **Importance** 3/5 · **About** 10 min
#
# Write `ex_median_symmetry(model)`: the median over layers of the symmetry score of each layer's
# $W_{qk} = \sum_h W_q[h]^\top W_k[h]$ (heads summed), from the model's weights, as the training loop records it
# (`query_key_factors` and `factor_scores` with `sum_heads=True`). Then predict, for the two tiny models
# `vision.build_model(exercise_config("masked"))` and `vision.build_model(exercise_config("next-patch"))` before any training,
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

# %% nbgrader={"grade": true, "grade_id": "ex-07-1-check", "locked": true, "points": 2, "schema_version": 3, "solution": false}
step0 = {}
for objective in ("masked", "next-patch"):
    model = vision.build_model(exercise_config(objective))
    with torch.no_grad():
        layers = [symmetry_score(a.query.weight.double().T @ a.key.weight.double()) for a in attention_layers(model)]
    step0[objective] = float(np.median(layers))
    mine = ex_median_symmetry(model)
    assert abs(mine - step0[objective]) < 1e-9, (
        f"ex_median_symmetry gives {mine:+.6f} for {objective}; scoring each layer's W_qk gives {step0[objective]:+.6f}"
    )
gap = step0["next-patch"] - step0["masked"]
assert ex_step0_sign == sign_of(gap), (
    f"ex_step0_sign = {ex_step0_sign!r} is not the sign at step 0; what do the two models share before training?"
)
print(f"right: at step 0 both models score {step0['masked']:+.3f}; any difference later comes from training")

# %% [markdown]
# ### Exercise 07.2: one query in the last layer
#
# > **Difficulty** 3/5 · **Importance** 3/5 · **About** 15 min
#
# In `classify` only `[CLS]`'s last output reaches the loss (section 2). Take the first training batch of the tiny
# models, `vision.training_batch(config, exercise_images, 1)` (`EXERCISE["batch_size"]` images), and the gradient of the
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

# %% nbgrader={"grade": true, "grade_id": "ex-07-2-check", "locked": true, "points": 3, "schema_version": 3, "solution": false}
ranks = {}
for objective in ("classify", "classify-mean"):
    config = exercise_config(objective)
    model = vision.build_model(config)
    total, count = vision.summed_loss(model, vision.training_batch(config, exercise_images, 1), objective)
    (total / count).backward()
    ranks[objective] = int(torch.linalg.matrix_rank(model.encoder.blocks[-1].attention.query.weight.grad))
assert ex_rank_classify == ranks["classify"], (
    f"ex_rank_classify = {ex_rank_classify!r} is not the rank of the gradient; count the queries that reach the loss"
)
assert ex_rank_sign == sign_of(ranks["classify-mean"] - ranks["classify"]), (
    f"ex_rank_sign = {ex_rank_sign!r} is not the sign of the difference of the ranks; which loss reaches more queries?"
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
