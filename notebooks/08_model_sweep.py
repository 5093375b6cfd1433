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
# # 08 · The model sweep: every model, encoders against decoders
#
# *Companion to Saponati et al., ICML 2025 (arXiv:2502.10927), the pretrained-model figures of section 4
# (median score over layers against model size, encoders in navy, decoders in purple, for language, vision
# and audio models).*
#
# Notebook 03 looked closely at a few checkpoints. This one is the population view: it scores a whole list
# of models with `attnstruct sweep` and draws them together. The list is a parameter:
#
# * `core` or `all`: the packaged checkpoints of the model zoo, offline (the quick profile);
# * `paper`: the authors' list of about 150 hub models, resolved by hub id. Only the query/key bytes of each
#   safetensors repository are fetched, so this needs hub access but not the models' full weights; on a
#   GPU machine it is the paper profile (`make reproduce PROFILE=paper`);
# * a text or CSV file of hub ids and local paths, or a Python list of them.
#
# The sweep is resumable: every scored model is a file under the results folder, and a rerun scores only
# what is missing. Models that cannot be scored (not found, gated, an architecture the project does not
# read) are listed, not fatal.

# %% tags=["parameters"]
models = "core"  # "core" or "all" (packaged zoo), "paper" (authors' list, needs hub access), a list file, or a list
device = "auto"  # auto (CUDA when there is one), cpu or cuda
per_head = False  # also store every head's scores
workers = 2  # models scored at once
n_disagreements = 10  # rows of the disagreement table
results_dir = "../build/interactive/results"  # where the datasets go
figures_dir = "../build/interactive/figures"  # where the figures go

# %%
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from attnstruct import paper_comparison, plotting, pretrained, results, sweep, zoo
from attnstruct.block_scores import resolve_device

plotting.set_style()
results_dir, figures_dir = Path(results_dir), Path(figures_dir)
sweep_dir = results_dir / "08_model_sweep"

# %% [markdown]
# ## 1. The list, and the sweep
#
# The device is checked first: asking for `cuda` on a machine without one stops here with one line.

# %%
where = resolve_device(device)
if isinstance(models, str) and models in ("core", "all"):
    names = [e.name for e in zoo.entries(models)]
    missing = [n for n in names if not zoo.is_fetched(n)]
    if missing:
        raise RuntimeError(f"not fetched yet: {missing}; run: attnstruct fetch-models {' '.join(missing)}")
elif isinstance(models, str):
    names = sweep.read_model_list(models)
else:
    names = list(models)
run = sweep.run_sweep(names, sweep_dir, device=where, per_head=per_head, workers=workers, progress=True)
print(
    f"{len(names)} models on {where}: {len(run.scored)} scored now, {len(run.skipped)} done before, "
    f"{len(run.failures)} failed"
)
pd.DataFrame(run.failures, columns=["model", "kind", "reason"])

# %%
if run.path is None:
    raise RuntimeError(f"no model could be scored; see {sweep_dir / 'failures.csv'}")
dataset = results.load_dataset(run.path)
summary = pretrained.summary(dataset).merge(
    pd.DataFrame({"model": dataset.model.values, "family": dataset.family.values}), on="model"
)
summary.round(3)

# %% [markdown]
# ## 2. The paper's main figure, with every scored model
#
# Median over layers with interquartile bars, against the number of parameters (counted as
# `model.num_parameters()` counts them, from the checkpoint's headers). Encoder stacks (bidirectional
# self-attention) in navy, decoder stacks (causal self-attention) in purple; an encoder-decoder model gives
# one point per stack. Faint open circles are the values **reported by Saponati et al. (2025)** for all
# their models, drawn for comparison; they are not our measurements.

# %%
reference = pretrained.reference_table()
own = summary[summary["stack"] != "cross"]
fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharex=True)
for ax, var in zip(axes, ("symmetry", "directionality"), strict=True):
    for role, color in (("encoder", plotting.ENCODER_COLOR), ("decoder", plotting.DECODER_COLOR)):
        plotting.reported_points(ax, reference, role, var, color)
        mine = own[own["stack"] == role]
        median = mine[f"{var}_median"]
        ax.errorbar(
            mine.n_params,
            median,
            yerr=[median - mine[f"{var}_q25"], mine[f"{var}_q75"] - median],
            fmt="o",
            color=color,
            ms=7,
            capsize=2,
            mec="white",
            label=f"{role} stacks, this sweep",
        )
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("parameters")
    ax.set_title(f"{var} (median over layers, IQR)")
axes[0].set_ylabel("score")
axes[1].legend(loc="center left", bbox_to_anchor=(1.0, 0.5))
plotting.savefig(fig, figures_dir / "08_population")
plt.show()

# %% [markdown]
# What the figure shows, computed from the sweep (symmetry's null spread is about $\pm 0.01$ at these
# widths and directionality's about $\pm 0.2$ per layer, notebook 02):

# %%
table = paper_comparison.agreement(summary, reference)
for line in paper_comparison.describe(summary, table):
    print(line)

# %% [markdown]
# ## 3. Point by point against the authors' values
#
# For every model and stack that the authors also scored: our median against theirs. Points on the
# diagonal agree. Colours mark the authors' own entries that their extraction likely got wrong: grouped-query
# head pairing, fused QKV weights split the wrong way, and the rest (random initialisation, cross-attention
# scored as self-attention, bidirectional "decoders").

# %%
CAVEAT_COLORS = {
    "": plotting.NEUTRAL_COLOR,
    "gqa_head_pairing_suspect": "#e76f51",
    "fused_qkv_branch_suspect": "#e9c46a",
}
fig, axes = plt.subplots(1, 2, figsize=(11, 5))
for ax, var in zip(axes, ("symmetry", "directionality"), strict=True):
    for caveat, part in table.groupby(table["caveats"].where(table["caveats"].isin(CAVEAT_COLORS), "other")):
        ax.scatter(
            part[f"paper_{var}"],
            part[f"ours_{var}"],
            s=22,
            color=CAVEAT_COLORS.get(caveat, "#2a9d8f"),
            label=caveat or "no known caveat",
        )
    ax.plot([-1, 1], [-1, 1], color="black", lw=0.8)
    ax.set_xlim(-1.05, 1.05)
    ax.set_ylim(-1.05, 1.05)
    ax.set_xlabel("reported by the paper")
    ax.set_ylabel("this sweep")
    ax.set_title(var)
    if table.empty:
        ax.text(-0.5, 0.5, "no scored model is\nin the authors' list", ha="center", va="center")
if not table.empty:
    axes[1].legend(loc="center left", bbox_to_anchor=(1.0, 0.5))
plotting.savefig(fig, figures_dir / "08_agreement")
plt.show()

# %% [markdown]
# The largest disagreements, each with the explanation when one is known:

# %%
worst = paper_comparison.largest_disagreements(table, n_disagreements)
worst[
    ["model", "stack", "ours_symmetry", "paper_symmetry", "ours_directionality", "paper_directionality", "explanation"]
].round(3)

# %% [markdown]
# ## 4. The dataset
#
# One dataset over `(model, stack, layer)`, with each model's role, family, parameter count, source, revision
# and the bytes fetched as coordinates; the sweep's own files stay under the results folder for a resumed run.

# %%
dataset.attrs = results.provenance_attrs(
    parameters={
        "models": models,
        "device": device,
        "per_head": per_head,
        "workers": workers,
        "n_disagreements": n_disagreements,
    },
    scored_matrix=dataset.attrs["scored_matrix"],
    failures=len(run.failures),
)
results.save_dataset(dataset, results_dir / "08_model_sweep.nc")
dataset
