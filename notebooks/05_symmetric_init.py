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
# # 05 · Symmetric initialisation, with the confounds removed
#
# *Companion to Saponati et al., ICML 2025 (arXiv:2502.10927), section 4: the symmetric initialisation and
# its table of speed-ups.*
#
# If bidirectional training drives $W_{qk}$ towards symmetry (notebook 04), starting from a symmetric
# $W_{qk}$ might save the encoder that part of the journey. The paper initialises $W_q^h = W_k^h$ in every head,
# so that $W_{qk}^h = {W_k^h}^\top W_k^h$ is symmetric (positive semi-definite) at step 0, then trains freely, and
# reports that 4-layer encoders reach the baseline's final training loss 25.9%, 72.9% and 68.9% sooner on three
# datasets (0% to 34.7% for 12 layers).
#
# **The confound.** The authors' symmetric runs replaced the attention modules by fresh `nn.Linear` layers with
# PyTorch's default initialisation, $\mathcal U(\pm 1/\sqrt d)$ with non-zero biases, while the baseline kept
# BERT's $\mathcal N(0, 0.02)$ with zero biases: the symmetric runs also started with about 1.8x larger Q/K/V
# weights (at $d = 256$), and a re-drawn $W_v$. They used one seed and noisy training loss. So we compare four
# initialisations of the same model, several seeds each, on held-out loss:
#
# | init | $W_q$, $W_k$, $W_v$ | $W_q = W_k$ at step 0 | what it tests |
# |---|---|---|---|
# | `bert` | $\mathcal N(0, 0.02)$, biases 0 | no | the baseline |
# | `symmetric` | PyTorch default, biases $\ne 0$ | yes | the paper's method, confound included |
# | `symmetric-matched` | $\mathcal N(0, 0.02)$, biases 0 | yes | symmetry alone (the control) |
# | `default-scale` | PyTorch default, biases $\ne 0$ | no | the confound alone |

# %% tags=["parameters"]
inits = ["bert", "symmetric", "symmetric-matched"]  # the first is the baseline; "default-scale" adds the confound alone
objectives = ["mlm", "next-token"]  # encoder (masked LM) and decoder (next token)
seeds = [0, 1, 2]  # one run per init, objective and seed
steps = 600  # optimizer steps per run
batch_size = 16  # sequences per step
seq_len = 64  # tokens per sequence
d_model = 64  # model width
n_layers = 4  # Transformer layers
n_heads = 4  # attention heads per layer
dropout = 0.0  # BERT uses 0.1; off in the quick profile
norm = "post"  # "post" (BERT) or "pre" LayerNorm
lr = 0.0005  # AdamW peak learning rate
warmup = 100  # linear warm-up steps
schedule = "linear"  # after warm-up: linear decay to 0 at the last step, or "constant"
weight_decay = 0.01  # AdamW weight decay (not on biases and LayerNorm)
clip = 1.0  # gradient-norm clipping
mask_rate = 0.15  # masked-LM selection rate (80% [MASK], 10% random, 10% kept)
vocab_size = 2000  # byte-level BPE vocabulary
corpus = "shakespeare"  # the packaged plays, or a path to a UTF-8 text file
val_fraction = 0.05  # the last share of every play held out for validation
log_every = 25  # scores and training loss every this many steps
eval_every = 25  # validation loss every this many steps
eval_batches = 2  # held-out batches per validation
checkpoint_every = 300  # resumable checkpoints
smoothing = 3  # evaluations in the trailing mean of the robust speed-up
survive_threshold = (
    0.1  # the control "keeps the speed-up" if every seed reaches the baseline's loss this fraction sooner
)
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

from attnstruct import factor_scores, pipeline, plotting, results, speedup, text
from attnstruct.transformer import query_key_factors

plotting.set_style()
results_dir, figures_dir = Path(results_dir), Path(figures_dir)
if inits[0] != "bert" or len(set(inits)) != len(inits):
    raise ValueError(f"inits must start with the baseline 'bert' and not repeat, got {inits}")
if smoothing < 1 or not 0 <= survive_threshold < 1:
    raise ValueError("smoothing must be >= 1 and survive_threshold in [0, 1)")
INIT_COLORS = {"bert": "0.2", "symmetric": "#d95f02", "symmetric-matched": "#1b9e77", "default-scale": "#7570b3"}
OBJECTIVE_NAMES = {"mlm": "encoder (masked LM)", "next-token": "decoder (next token)"}
parameters = pipeline.notebook_parameters("05_symmetric_init", globals())  # recorded with the dataset
configs = [
    text.TextConfig.from_params(parameters, objective=objective, init=init, seed=seed)
    for objective in objectives
    for init in inits
    for seed in seeds
]

# %% [markdown]
# ## The four initialisations at step 0
#
# Measured on the models themselves (seed `seeds[0]`): the weight scale of Q, K and V, the largest bias, and the
# symmetry score of every head's $W_{qk}$ (1 for a symmetric matrix).

# %%
rows = []
for init in inits:
    config = next(c for c in configs if c.init == init)
    model = text.build_model(config, vocab_size)
    layer = model.encoder.blocks[0].attention
    w_q, w_k = query_key_factors(model)
    sym = factor_scores(w_q, w_k).symmetry
    rows.append(
        {
            "init": init,
            "std W_q": float(layer.query.weight.detach().std()),
            "std W_k": float(layer.key.weight.detach().std()),
            "std W_v": float(layer.value.weight.detach().std()),
            "max |bias q,k,v|": max(float(m.bias.detach().abs().max()) for m in (layer.query, layer.key, layer.value)),
            "head symmetry (min..max)": f"{float(sym.min()):+.2f} .. {float(sym.max()):+.2f}",
        }
    )
init_table = pd.DataFrame(rows).set_index("init")
print(f"PyTorch's default U(±1/√d) has std 1/√(3d) = {1 / np.sqrt(3 * d_model):.4f} at d = {d_model}; BERT's is 0.02")
init_table.round(4)

# %% [markdown]
# ## Training
#
# Every run has its own folder under `results_dir/05_runs/` (resumable). Validation loss is measured every
# `eval_every` steps on the same held-out windows for every run.

# %%
dataset = text.train_many(
    configs, results_dir / "05_runs", workers=workers, threads_per_worker=threads_per_worker, cache=cache_dir
)
print(dict(dataset.sizes))

# %% [markdown]
# ## Validation loss
#
# Mean over seeds (line) and the range over seeds (band), relative to the baseline's final loss (dashed).

# %%
fig, axes = plt.subplots(1, len(objectives), figsize=(5.5 * len(objectives), 3.8), squeeze=False)
for ax, objective in zip(axes[0], objectives):
    for init in inits:
        val = dataset.val_loss.sel(objective=objective, init=init).dropna("step", how="all")
        ax.fill_between(val.step, val.min("seed"), val.max("seed"), color=INIT_COLORS[init], alpha=0.15, lw=0)
        ax.plot(val.step, val.mean("seed"), color=INIT_COLORS[init], label=init)
    final_baseline = dataset.val_loss.sel(objective=objective, init="bert").dropna("step", how="all").isel(step=-1)
    ax.axhline(float(final_baseline.mean()), color="0.3", ls="--", lw=1)
    top = float(dataset.val_loss.sel(objective=objective).dropna("step", how="all").isel(step=1).max())
    ax.set(xlabel="optimizer step", ylabel="validation loss (nats)", title=OBJECTIVE_NAMES.get(objective, objective))
    ax.set_ylim(top=top)
axes[0, 0].legend(fontsize=8)
fig.tight_layout()
plotting.savefig(fig, figures_dir / "05_validation_loss")

# %% [markdown]
# ## The speed-up, two ways
#
# * **robust**: the first step at which the treated run's smoothed validation loss (trailing mean of
#   `smoothing` evaluations) reaches the baseline's final smoothed validation loss, as a fraction of the run
#   (`1 - step / steps`); baseline and treated runs are paired by seed.
# * **paper**: the authors' rule on the logged training loss (first logged row below the baseline's last
#   logged value, `1 - index / rows`).
#
# A run that never reaches the level gets no value (NaN; the authors' notebook printed 100% in that case).
#
# The row `bert (placebo)` applies both metrics to two baseline runs that differ only in their seed: whatever
# speed-up it shows is noise, the floor that a real effect has to clear.


# %%
def speedups(objective: str, init: str) -> tuple[list[float], list[float]]:
    """Per seed: (robust, paper) speed-ups of ``init`` against the baseline of the same seed. For ``"bert"``
    itself, the baseline of the *next* seed is the "treated" run: a placebo that shows each metric's noise."""
    robust, paper = [], []
    for k, seed in enumerate(seeds):
        treated_seed = seeds[(k + 1) % len(seeds)] if init == "bert" else seed
        treated = dataset.sel(objective=objective, init=init, seed=treated_seed)
        baseline = dataset.sel(objective=objective, init="bert", seed=seed)
        value, _ = speedup.robust_speedup(dataset.step, treated.val_loss, baseline.val_loss, steps, smoothing)
        robust.append(value)
        paper.append(speedup.paper_speedup(treated.train_loss, baseline.train_loss))
    return robust, paper


def spread(values: list[float]) -> str:
    values = np.asarray(values)
    reached = values[np.isfinite(values)]
    if len(reached) == 0:
        return f"never (0/{len(values)} seeds)"
    text = f"{np.median(reached):.0%} [{reached.min():.0%}, {reached.max():.0%}]"
    return text if len(reached) == len(values) else f"{text}, {len(values) - len(reached)} seed(s) never"


PAPER_4_LAYER = {
    "mlm": "25.9% / 72.9% / 68.9% (Jigsaw / Wikipedia / RedPajama)",
    "next-token": "27.9% / 63.5% / 33.6% (not claimed; authors' decoders used the MLM collator)",
}
rows, speedup_values = [], {}
for objective in objectives:
    for init in inits[1:] + (["bert"] if len(seeds) > 1 else []):
        robust, paper = speedups(objective, init)
        speedup_values[objective, init] = (robust, paper)
        rows.append(
            {
                "objective": objective,
                "init": init if init != "bert" else "bert (placebo)",
                "robust speed-up, median [min, max] over seeds": spread(robust),
                "paper's metric on our runs": spread(paper),
                "paper (4 layers, symmetric)": PAPER_4_LAYER.get(objective, "") if init == "symmetric" else "",
            }
        )
speedup_table = pd.DataFrame(rows).set_index(["objective", "init"])
speedup_table

# %% [markdown]
# ## Does the speed-up survive the matched-scale control?
#
# The rule, fixed before looking: the control keeps the speed-up if **every** seed of `symmetric-matched`
# reaches the baseline's final smoothed validation loss at least `survive_threshold` of the run sooner.

# %%
verdicts = {}
for objective in objectives:
    if "symmetric-matched" not in inits:
        break
    matched, _ = speedup_values[objective, "symmetric-matched"]
    matched = np.asarray(matched)
    survives = bool(np.all(np.isfinite(matched)) and np.all(matched >= survive_threshold))
    verdicts[objective] = survives
    lines = [f"{OBJECTIVE_NAMES.get(objective, objective)}:"]
    for init in inits[1:] + (["bert"] if len(seeds) > 1 else []):
        robust, paper = speedup_values[objective, init]
        name = init if init != "bert" else "bert (placebo)"
        lines.append(f"  {name:18s} robust speed-up {spread(robust)}; paper's metric {spread(paper)}")
    verdict = "SURVIVES" if survives else "does NOT survive"
    lines.append(
        f"  -> the speed-up {verdict} the matched-scale control (rule: every seed >= {survive_threshold:.0%})."
    )
    print("\n".join(lines))

# %% [markdown]
# **What the quick profile showed** (4 layers, d_model 64, 600 steps, 3 seeds; rerun with other parameters and
# trust the printed lines, not this paragraph). No initialisation sped training up. The paper's symmetric
# initialisation never reached the baseline's final validation loss in any seed, for encoder or decoder; the
# matched-scale control reached it in one seed of three, 4% (encoder) and 0% (decoder) of the run sooner,
# less than the placebo, a baseline run of another seed (encoder 4-12%, one seed never). The paper's own
# metric, applied to the same runs, reports 29-33% for the encoder under *every* initialisation, the placebo
# included: on a flat, noisy training loss the first crossing of the baseline's last value comes early by
# chance. At this size, then, the paper's 26-73% cannot be told apart from what its metric gives for
# identical treatments, and the speed-up does not survive the control. The validation-loss curves of the
# three initialisations lie on top of each other. The initial symmetry persisted only at the paper's larger
# initial scale (final median +0.96 encoder, +0.92 decoder: at that scale 600 small steps barely move
# $W_q$ and $W_k$); at BERT's scale (the matched control) it fell to the baseline's level (+0.30 against
# +0.28 for the encoder, +0.50 against +0.57 for the decoder, whose early symmetric phase notebook 04 shows). This is a small model trained for 600 steps; the paper
# profile runs the authors' 4-layer bert-mini shape on a GPU.

# %% [markdown]
# ## Does the initial symmetry persist?
#
# Median symmetry over layers (mean over seeds) for each initialisation. A symmetric start is +1; bidirectional
# training favours symmetric updates, autoregressive training does not, so the question is how fast each
# objective erodes it.

# %%
fig, axes = plt.subplots(1, len(objectives), figsize=(5.5 * len(objectives), 3.6), sharey=True, squeeze=False)
for ax, objective in zip(axes[0], objectives):
    for init in inits:
        median = dataset.symmetry.sel(objective=objective, init=init).median("layer")
        ax.fill_between(dataset.step, median.min("seed"), median.max("seed"), color=INIT_COLORS[init], alpha=0.15, lw=0)
        ax.plot(dataset.step, median.mean("seed"), color=INIT_COLORS[init], label=init)
    ax.axhline(0, color="0.6", lw=0.8)
    ax.set(
        xlabel="optimizer step", ylabel="median symmetry over layers", title=OBJECTIVE_NAMES.get(objective, objective)
    )
axes[0, 0].legend(fontsize=8)
fig.tight_layout()
plotting.savefig(fig, figures_dir / "05_symmetry_over_training")
final_symmetry = dataset.symmetry.isel(step=-1).median("layer")
pd.DataFrame(
    {init: [f"{float(final_symmetry.sel(objective=o, init=init).mean()):+.2f}" for o in objectives] for init in inits},
    index=objectives,
)

# %% [markdown]
# ## The dataset

# %%
out = dataset.copy()
for name, index in (("robust_speedup", 0), ("paper_speedup", 1)):
    values = np.full((len(objectives), len(inits), len(seeds)), np.nan)
    for i, objective in enumerate(objectives):
        for j, init in enumerate(inits):
            if (objective, init) in speedup_values:  # for "bert": the placebo against the next seed
                values[i, j] = speedup_values[objective, init][index]
    out[name] = (("objective", "init", "seed"), values)
out.robust_speedup.attrs["long_name"] = (
    "1 - step/steps at which the smoothed validation loss reaches the baseline's final one"
)
out.paper_speedup.attrs["long_name"] = "the authors' metric on the logged training loss (1 - index/rows)"
out.attrs.update(
    results.provenance_attrs(
        parameters=parameters,
        scored_matrix=dataset.attrs["scored_matrix"],
        matched_control_keeps_speedup=str({k: "yes" if v else "no" for k, v in verdicts.items()}),
    )
)
out.attrs["runs"] = dataset.attrs["runs"]
results.save_dataset(out, results_dir / "05_symmetric_init.nc")
out
