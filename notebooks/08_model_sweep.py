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

# %% [markdown]
# **Learning goals.** After this notebook you can:
#
# * score a whole list of models with one resumable sweep and read its dataset over `(model, stack, layer)`;
# * compute the paper's population statistic, the median over stacks of each stack's median over layers, per
#   role, and ask whether the encoder/decoder ordering holds across models;
# * compare our scores with the values the authors reported, model by model, and explain the largest
#   disagreements by the known problems of their extraction;
# * judge a population median against the null of random layers.

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
import numpy as np
import pandas as pd

from attnstruct import evidence, paper_comparison, plotting, pretrained, results, sweep, zoo
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

# %% tags=["nbval-check-output"]
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

# %% [markdown]
# ## Exercises
#
# One exercise on the sweep's dataset: the paper's population statistic, computed by hand, and judged against
# random layers.

# %% [markdown]
# ### Exercise 08.1: the more symmetric role, against the null
#
# From `dataset` (the sweep's scores over `(model, stack, layer)`), compute for each role, `encoder` and
# `decoder` (leave out `cross`), the median over its stacks of each stack's median symmetry over layers: one
# number per role, the statistic behind the paper's figure. Set `ex_larger` to the role with the larger value
# and `ex_value` to that value. Predict first which role it will be.
#
# Then decide whether `ex_value` lies outside the 95% range (the 2.5% and 97.5% quantiles) of `ex_null`, given
# in the cell: the symmetries of random layers $\sum_h W_q[h]^\top W_k[h]$ with Gaussian factors, width $64$
# and $4$ heads. A random layer's symmetry spreads less, and sits closer to 0, the wider the layer (notebook
# 02), and every model of the zoo is wider (notebook 03's table), so this range is wider than theirs: a value
# outside it lies outside their nulls too. Set `ex_outside` to `True` or `False`. Hints: a stack without layers
# is all NaN in `dataset`; `DataArray.to_dataframe()` and `groupby` or `median(skipna=True)` help.

# %% nbgrader={"grade": false, "grade_id": "ex-08-1", "locked": false, "schema_version": 3, "solution": true}
ex_null = evidence.null_median_over_layers("symmetry", 64, 4, 1, n_draws=400, seed=0)  # [400] random layers
### BEGIN SOLUTION
ex_frame = dataset["symmetry"].to_dataframe().reset_index().dropna(subset=["symmetry"])
ex_per_stack = ex_frame[ex_frame["stack"] != "cross"].groupby(["model", "stack"])["symmetry"].median()
ex_per_role = ex_per_stack.groupby(level="stack").median()
ex_larger, ex_value = ex_per_role.idxmax(), float(ex_per_role.max())
ex_low, ex_high = np.quantile(ex_null, [0.025, 0.975])
ex_outside = bool(ex_value < ex_low or ex_value > ex_high)
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "ex-08-1-check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
groups = paper_comparison.group_medians(pretrained.summary(dataset)).set_index("stack")["symmetry_median"]
assert ex_larger == groups.idxmax(), f"the larger role is {groups.idxmax()!r} by the package's group medians"
assert abs(ex_value - groups.max()) < 1e-12, "the value differs: median over layers first, then over stacks"
verdict = evidence.compare_with_null(ex_value, ex_null)
assert bool(ex_outside) == verdict.outside, "compare the value with the null's 2.5% and 97.5% quantiles"
print(
    f"{ex_larger} stacks: median symmetry {ex_value:+.3f}; outside the null's 95% range "
    f"[{verdict.null_low:+.3f}, {verdict.null_high:+.3f}]: {verdict.outside}"
)

# %% [markdown]
# ## What to take away
#
# * The paper's claim about encoders and decoders is a claim about populations: the median over models of
#   each model's median over layers, per role. A few models can agree with it or not; only many models test it.
# * A sweep is a list of models scored into one dataset, resumable model by model; failures are listed, not
#   hidden, and the dataset records where every model came from.
# * A point-by-point comparison with published numbers needs the reasons they may be wrong: the authors'
#   entries with a known extraction problem (grouped-query pairing, fused QKV weights, cross-attention scored
#   as self-attention) are expected to differ from ours, so the comparison is drawn by caveat and every large
#   disagreement carries its explanation, or says that none is known.
# * A population median is judged like a single model's: against random layers, whose symmetry is close to 0
#   and whose spread shrinks with the width.

# %% [markdown]
# ## Knobs to try
#
# * `models = "all"` (after `attnstruct fetch-models --set all`): seven zoo models instead of three, more points
#   per role, and more of them in the authors' list to compare with.
# * `models = "paper"` on a machine with hub access (and `device = "cuda"` if it has a GPU): the authors' list
#   of about 150 models; the first run fetches only the query/key bytes, a rerun resumes.
# * `models = ["minilm-l6", "whisper-base"]` (or a text file of hub ids and paths): a sweep of your own list.
# * `per_head = True`: every head's scores stored as well (larger files), to look for heads that differ from
#   their layer; `n_disagreements` up lists more of the disagreement table.
