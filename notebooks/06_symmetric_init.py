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
# # 06 · Symmetric initialisation, as a designed experiment
#
# *Companion to Saponati et al., ICML 2025 (arXiv:2502.10927), section 4: the symmetric initialisation and
# its table of speed-ups. The paper's numbers quoted here are in `docs/paper-notes.md`.*
#
# If bidirectional training drives $W_{qk}$ towards symmetry (notebook 05), starting from a symmetric
# $W_{qk}$ might save the encoder that part of the journey. The paper initialises $W_q^h = W_k^h$ in every head,
# so that $W_{qk}^h = W_q^h {W_k^h}^\top = W_k^h {W_k^h}^\top$ is symmetric (positive semi-definite) at step 0,
# then trains freely, and reports that encoders reach the baseline's final training loss sooner (the numbers,
# from the authors' result files, are printed below).
#
# **The confound.** The authors' symmetric runs replaced the attention modules by fresh `nn.Linear` layers with
# PyTorch's default initialisation, $\mathcal U(\pm 1/\sqrt d)$ with non-zero biases, while the baseline kept
# BERT's normal initialisation (standard deviation `0.02`) with zero biases: the symmetric runs also started with
# larger Q/K/V weights and a re-drawn $W_v$. They used one seed and the noisy training loss. So we compare four
# initialisations of the same model (the four arms), several seeds each, on held-out loss:
#
# | arm | $W_q$, $W_k$, $W_v$ | $W_q = W_k$ at step 0 | what it tests |
# |---|---|---|---|
# | `bert` | BERT's normal, std `0.02`, biases 0 | no | the baseline |
# | `symmetric` | PyTorch default, biases $\ne 0$ | yes | the paper's method, confound included |
# | `symmetric-matched` | BERT's normal, std `0.02`, biases 0 | yes | symmetry alone |
# | `default-scale` | PyTorch default, biases $\ne 0$ | no | the confound alone |
#
# **Matched batches and a placebo.** A run's batches are a function of its seed and step, so the four arms of one
# seed see exactly the same batches: they differ in their start and in nothing else, and each arm is compared
# with the baseline of its own seed. Two runs of the same arm from two different draws of the weights already
# differ a little, so a difference is never exactly zero even when nothing was changed. The **placebo** measures
# that: the baseline once more, its weights drawn from another seed (`seed + placebo_offset`) and its batches from
# the same one. Each seed gives one placebo, compared with the baseline of its seed and with nothing else, so the
# pairs are disjoint.
#
# **Every arm against the placebo of its seed.** The baseline is one draw of the start. If it drew lucky, every arm
# compared with it looks worse by the same amount; if not, better. So every claim reads an arm against the placebo
# of the same seed instead: under no effect of the arm, the arm and the placebo are two runs of one seed's batches
# from two independent draws of the start, the sign of their difference is a coin flip, and the sign-flip test is
# exact. The mean of the baseline and the placebo would halve the noise of the control, but an arm minus the mean
# of two runs is symmetric about zero under no effect only if the losses themselves are, so the test would no
# longer be exact. The baseline minus the placebo is printed beside each verdict: the size of the luck of a draw.
#
# **The primary statistic** is the one a reader can picture: at the last step, the placebo's validation loss
# minus the arm's, paired by seed. The paper's own metric, how much sooner a run reaches the baseline's final loss,
# is reported as a secondary claim against the placebo of the same seed.
#
# **Scale.** The quick profile trains this notebook's own small model (two layers, a few hundred steps), so that
# five seeds of four arms and the placebo fit on two CPU cores; it is not notebook 05's model. The paper profile
# trains notebook 05's model, and reuses its baseline runs.

# %% [markdown]
# **Learning goals.** After this notebook you can:
#
# * say why $W_q^h = W_k^h$ makes every head's $W_{qk}$ symmetric at step 0, and why training does not keep it so;
# * separate the effect of a symmetric start from the confound of a larger initial scale, with a matched control
#   and a confound-only arm;
# * design a comparison of initialisations: the same batches for every arm, a paired statistic, and a placebo that
#   differs from the baseline in its draw of weights alone;
# * read a verdict of *cannot tell at this scale* as what it is, not a "no", and say from the smallest detectable
#   effect how large an effect the design could have missed;
# * predict from the initial scale and the objective how long a symmetric start lasts, and test it on tiny runs.

# %% tags=["parameters", "text-training"]
# Every text-training setting can be set here or in a profile (`-p steps 600`), as in notebook 05: the model's shape,
# the optimiser and its schedule, the corpus and its tokenizer, how often to log and evaluate, the device. Their
# defaults are declared once in `attnstruct.tasks.text_config.TextConfig` (notebook 05's quick profile; `attnstruct
# train --help` lists each with its meaning). This cell holds what only this notebook takes, then where its runs
# depart from those defaults.
inits = ["bert", "symmetric", "symmetric-matched", "default-scale"]  # the first is the baseline
objectives = ["mlm"]  # trained from every start; "next-token" adds the decoder
seeds = [0, 1, 2, 3, 4]  # each seed sets the batches of every arm, and the weights of all but the placebo
placebo_offset = 100  # the placebo of seed s: the baseline with weights from seed s + placebo_offset, batches from s
smoothing = 3  # evaluations in the trailing mean of the robust speed-up
workers = 2  # runs trained side by side (processes)
threads_per_worker = 1  # torch threads per process
cache_dir = None  # attnstruct cache (corpus, tokenizer); None: the default
results_dir = None  # where the dataset goes; None: results/ of the work folder (attnstruct.work)
figures_dir = None  # where the figures go; None: figures/ of the work folder
steps = 300  # optimizer steps per run: half of notebook 05's
n_layers = 2  # Transformer layers: half of notebook 05's
lr = 0.003  # AdamW peak learning rate
warmup = 50  # linear warm-up steps
log_every = 15  # scores and training loss every this many steps
eval_every = 15  # validation loss every this many steps
checkpoint_every = 150  # resumable checkpoints

# %%
import matplotlib.pyplot as plt
import numpy as np
import xarray as xr

from attnstruct import factor_scores, notebooks, results, stats, work
from attnstruct.analyses import nb06_symmetric_init as init_study
from attnstruct.analyses import plans, text_runs
from attnstruct.report import plotting, prose
from attnstruct.tasks import step_cost, text, text_config
from attnstruct.training.model import query_key_factors

plotting.set_style()
results_dir, figures_dir = work.output_dirs(results_dir, figures_dir)
init_study.check_design(inits, objectives, seeds, smoothing, placebo_offset)
# Arms in colours of their own, none in the roles' navy or purple (the objectives are the panels)
# arms are not roles: none of the role colours of `attnstruct.report.plotting` (navy, purple, teal, amber)
INIT_COLORS = {
    "bert": "0.2",
    "placebo": "0.55",
    "symmetric": "#e7298a",
    "symmetric-matched": "#66a61e",
    "default-scale": "#a6761d",
}
label = text_runs.label  # an objective's name in legends and sentences
parameters = notebooks.notebook_parameters("06_symmetric_init", globals())  # recorded with the dataset
configs = [
    text_config.TextConfig.from_params(parameters, objective=objective, init=init, seed=seed)
    for objective in objectives
    for init in inits
    for seed in seeds
]
settings = configs[0]  # what every run shares: the model's shape, the optimiser, the corpus, the device
placebo_configs = [
    text_config.TextConfig.from_params(
        parameters, objective=objective, init="bert", seed=seed, init_seed=seed + placebo_offset
    )
    for objective in objectives
    for seed in seeds
]

# %%
reported = init_study.reported_speedups()
prose.say(
    "**The paper's speed-ups** (authors' result files, their rule on the training loss, one seed each): 4-layer "
    "encoders {four}; 12-layer encoders {twelve}, and none on {never}: that symmetric run ended above the baseline's "
    "final loss (the authors' notebook printed it as a speed-up of {printed})."
    if reported.any_never
    else "**The paper's speed-ups** (authors' result files, their rule on the training loss, one seed each): 4-layer "
    "encoders {four}; 12-layer encoders {twelve}.",
    reported,
)

# %% [markdown]
# ## The analysis plan, declared before the runs
#
# This notebook reads three kinds of claim for each arm, each against the placebo of the same seed: its final
# validation loss, its speed-up, and whether the initial symmetry persists to the end. They form one declared
# family. The **primary** claim is the paper's, on the primary statistic: a symmetric start ends masked-LM training
# lower than the baseline. Every other claim is **secondary**, reported uncorrected and labelled so. The table
# gives each claim's unit, statistic, test and null, and the smallest p its design can reach with this notebook's
# seeds, before and after the correction (claims of arms or objectives not trained here are declared all the same,
# and simply not tested). The sentence above the table counts the primary and secondary claims, gives the smallest p
# a primary claim can reach after the correction, and what it would be were every claim primary.

# %%
plan = init_study.PLAN
reach = plans.seed_reach(plan, len(seeds))
plan_reach = stats.plan_reach(plan, reach)
prose.show(
    prose.fill(
        "{primary}, corrected by Holm's method, and {secondary}, reported uncorrected. After the correction the "
        "smallest p a primary claim can reach is {smallest}, ",
        plan_reach,
    )
    + prose.fill(
        "below alpha = {alpha}: a verdict can be reached."
        if plan_reach.reachable
        else "not below alpha = {alpha}: whatever the runs show, the primary claims read *{verdict}*.",
        plan_reach,
    )
    + prose.fill(" With all {claims} claims primary it would be {every}.", plan_reach)
)
prose.show(prose.markdown_table(plan.table(reach)))

# %% [markdown]
# ## The initialisations at step 0
#
# Measured on the models themselves (the first seed of the first objective): the weight scale of Q, K and V in
# the first layer, the largest bias there, and the symmetry score of every head's $W_{qk}$ (1 for a symmetric
# matrix). The first line gives the standard deviation of PyTorch's default initialisation at this width, which
# the `symmetric` and `default-scale` rows should show.

# %%
data = text.corpus_data(configs[0], cache_dir)  # the tokens every run trains on (notebook 05 describes them)

# %% tags=["nbval-check-output"]
print(
    prose.fill(
        "PyTorch's default U(±1/√d) has std 1/√(3d) = {default_std} at d = {d_model}; BERT's is {bert_std}",
        init_study.initial_scales(settings.d_model),
    )
)
print(init_study.initial_state(configs, data.vocab_size).round(4).to_string())

# %% [markdown]
# ## Training
#
# Every run has its own folder under `results_dir/text_runs/` (resumable; a run of notebook 05 with the same
# settings is reused). Validation loss is measured every `eval_every` steps on the same held-out windows for every
# run. The placebo runs are trained beside the arms. First, what they will cost: the tokens of each run, the passes
# over the training tokens, and a projected time from one step timed on this kernel's device.
#
# The cost grows with every arm and every seed: an arm is one more run per objective and seed, and its placebo is
# one more per objective and seed again. At the paper profile (its text is Wikipedia with the bert-base-uncased
# tokenizer, as the paper's was, and a run is the paper's 200,000 steps of 256 sequences of 512 tokens) the
# projection below runs to GPU-days; the verdicts need the seeds, so read the projection before choosing fewer.

# %%
step_timing = step_cost.measure(settings, settings.device, data.vocab_size, data.mask_id, steps=1, warmup=1)
every_run = configs + placebo_configs
print("\n".join(step_cost.describe_cost(every_run, step_timing, data.vocab_size, len(data.train), workers)))

# %% tags=["slow"]
runs, placebo = (
    text.train_many(
        batch, results_dir / "text_runs", workers=workers, threads_per_worker=threads_per_worker, cache=cache_dir
    )
    for batch in (configs, placebo_configs)
)
placebo = init_study.as_placebo(placebo)
print(dict(runs.sizes))

# %% [markdown]
# ## Did the runs learn?
#
# A comparison of runs that do not learn means nothing: every run's final validation loss must lie below the
# unigram entropy of the text by its objective's margin (`text_runs.LOSS_MARGINS`), as in notebook 05. A run that ends
# short of that has barely left the context-free guess. Every verdict below names the runs it rests on (one arm,
# the baseline and the placebo of its objective) and reads *cannot tell at this scale* if any of them did not
# learn.

# %%
unigram_entropy = data.unigram_entropy()
targets = text_runs.loss_targets([runs, placebo], unigram_entropy)
learned = text_runs.learned(targets)
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
targets.round(3)

# %% [markdown]
# ## Validation loss, against the placebo
#
# The placebo's validation loss minus each arm's of the **same seed** (thick: mean over seeds; thin: one line per
# seed), the statistic and the sign of the verdict lines below: above zero, the arm is ahead of the placebo. The
# grey band is the baseline read the same way, the placebo minus the baseline of its seed (the range over seeds):
# two draws of the same start on the same batches, so what a change of the draw alone gives. The title quotes each
# arm's final value, mean over seeds, with its verdict. The vertical range follows the curves, not an early spike,
# which may run off the axes.

# %%
both = xr.concat([runs[["val_loss"]], placebo[["val_loss"]]], "init")
table = init_study.speedups(runs, placebo, steps=settings.steps, smoothing=smoothing)  # one row per arm and seed
loss_effects = init_study.loss_effects(table, targets=targets)

# %% tags=["hide-input"]
fig, axes = plt.subplots(1, len(objectives), figsize=(5.5 * len(objectives) + 3.5, 4), squeeze=False)
for ax, objective in zip(axes[0], objectives):
    band = init_study.loss_gains(both, objective, init_study.BASELINE)  # [seed, step]
    ax.fill_between(
        band.step, band.min("seed"), band.max("seed"), color="0.85", lw=0, label="placebo minus baseline (range)"
    )
    ax.axhline(0, color="0.3", ls="--", lw=1, label="placebo, same seed")
    drawn = [band.isel(step=slice(1, None))]
    for init in inits[1:]:
        ahead = init_study.loss_gains(both, objective, init)  # [seed, step]
        for seed in ahead.seed.values:
            ax.plot(ahead.step, ahead.sel(seed=seed), color=INIT_COLORS[init], lw=0.7, alpha=0.5)
        ax.plot(
            ahead.step, ahead.mean("seed"), "o-", ms=3, lw=2, color=INIT_COLORS[init], label=f"placebo minus {init}"
        )
        drawn.append(ahead)
    ax.set_ylim(plotting.robust_limits(np.concatenate([d.values.ravel() for d in drawn])))  # a spike runs off
    ax.set(
        xlabel="optimizer step",
        ylabel="loss, placebo minus arm (nats)",
        title=f"{label(objective)}: above 0 is ahead",
    )
axes[0, -1].legend(fontsize=8, loc="center left", bbox_to_anchor=(1.02, 0.5))
plotting.message_title(
    fig,
    "\n".join(
        prose.fill("{objective}: " if arm.several else "", arm)
        + prose.fill(
            "{ahead} {verb} ahead of the placebo. " if arm.can_tell and arm.any_ahead else "",
            arm,
        )
        + prose.fill(
            "Final loss, placebo minus arm, mean over seeds: {ends}; baseline {baseline}"
            if arm.can_tell
            else "Each start against the placebo ({reason}); final loss, placebo minus arm: {ends}",
            arm,
        )
        for arm in init_study.losses_against_placebo(both, loss_effects, learned)
    ),
)
fig.tight_layout()
_ = plotting.savefig(fig, figures_dir / "06_validation_loss")

# %% [markdown]
# ## The primary statistic: the final validation loss
#
# For each arm and seed: the placebo's validation loss at the last step minus the arm's (positive: the arm ends
# lower). The test flips the signs of the seeds' differences. Each line also gives the smallest mean difference the
# design would detect in four experiments out of five (`attnstruct.stats.power`), from the seeds' own spread and
# after the correction: a verdict of *cannot tell* rules out effects about that large, and says nothing about
# smaller ones.
#
# Under those lines, one item per arm puts the verdict in words and sets the arm's mean gain over the placebo beside
# the baseline's gain over the same placebos: two draws of the same start, whose difference is what a new draw alone
# gives. An arm whose gain lies within that range has shown nothing that a different draw would not show as well.

# %%
for effect in loss_effects:
    print(prose.effect_line(effect, 3))
for arm in init_study.arm_verdicts(table, loss_effects, digits=3):
    verdict = prose.fill(
        "- **{init}** ({objective}): ends below the placebo of its seed"
        if arm.holds
        else "- **{init}** ({objective}): ends above the placebo of its seed"
        if arm.fails
        else "- **{init}** ({objective}): cannot be told apart from the placebo at the end",
        arm,
    )
    prose.show(
        verdict
        + prose.fill(
            " (mean gain over the placebo {estimate}; the baseline's over the same placebos: {baseline_gains}).", arm
        )
    )

# %%
init_study.speedup_summary(table)

# %% [markdown]
# ## The paper's metric: how much sooner, against the placebo
#
# * **robust**: the first step at which the arm's smoothed validation loss (trailing mean of `smoothing`
#   evaluations) reaches the baseline's final smoothed validation loss, as a fraction of the run
#   (`1 - step / steps`);
# * **paper**: the authors' rule on the logged training loss (first logged row below the baseline's last logged
#   value, `1 - index / rows`).
#
# A run that never reaches the level gets no value (NaN; the authors' notebook printed a full speed-up, `100%`, in
# that case) and counts as no speed-up (0) in the test. The placebo's speed-up is noise by construction; each
# arm's robust speed-up is compared with the placebo's of the same seed (a paired sign-flip test), a secondary
# claim. The resolution of the metric is one evaluation, `eval_every` steps.

# %%
speed_effects = init_study.speedup_effects(table, targets=targets)
for effect in speed_effects:
    print(prose.effect_line(effect))
for arm in init_study.arm_verdicts(table, speed_effects):
    verdict = prose.fill(
        "- **{init}** ({objective}): reaches the baseline's final loss sooner than the placebo does"
        if arm.holds
        else "- **{init}** ({objective}): is slower than the placebo"
        if arm.fails
        else "- **{init}** ({objective}): cannot be told apart from the placebo",
        arm,
    )
    prose.show(
        verdict
        + prose.fill(
            " (robust speed-up {robust} against the placebo's {placebo_robust}; the paper's metric gives {paper} on "
            "the same runs, and {placebo_paper} for the placebo).",
            arm,
        )
    )

# %% [markdown]
# ## Does the initial symmetry persist?
#
# Median symmetry over layers (mean over seeds, with the range over seeds as a band) for each arm. A symmetric
# start is +1; bidirectional training favours symmetric updates, autoregressive training does not, so the question
# is how fast training erodes it.
#
# The test below asks, for the first objective, whether each arm still ends above the placebo, paired by seed:
# each seed's final median symmetry of the arm minus the placebo's of the same seed.

# %%
both_symmetry = xr.concat([runs[["symmetry"]], placebo[["symmetry"]]], "init")
medians = text_runs.median_over_layers(both_symmetry, "symmetry")  # [objective, init, seed, step]
persist = init_study.persistence_effects(runs, placebo, objectives[0], targets=targets)

# %% tags=["hide-input"]
fig, axes = plt.subplots(1, len(objectives), figsize=(5.5 * len(objectives) + 4, 3.6), sharey=True, squeeze=False)
for ax, objective in zip(axes[0], objectives):
    for init in [*inits, init_study.PLACEBO]:
        median = medians.sel(objective=objective, init=init)
        ax.fill_between(runs.step, median.min("seed"), median.max("seed"), color=INIT_COLORS[init], alpha=0.15, lw=0)
        ax.plot(
            runs.step, median.mean("seed"), color=INIT_COLORS[init], label=init, ls=":" if init == "placebo" else "-"
        )
    ax.axhline(0, color="0.6", lw=0.8)
    ax.set(xlabel="optimizer step", ylabel="median symmetry", title=label(objective))
axes[0, -1].legend(fontsize=8, loc="center left", bbox_to_anchor=(1.02, 0.5))
plotting.message_title(
    fig,
    "\n".join(
        prose.fill("{objective}: " if start.several else "", start)
        + prose.fill(
            "Final median symmetry, arm minus placebo, mean over seeds: {against}; the placebo ends at {placebo}"
            if start.can_tell
            else "Each start against the placebo ({reason}); final median symmetry, arm minus placebo: {against}",
            start,
        )
        for start in init_study.symmetry_against_placebo(runs, placebo, persist, learned)
    ),
)
fig.tight_layout()
_ = plotting.savefig(fig, figures_dir / "06_symmetry_over_training")

# %% [markdown]
# The table gives each arm's final median symmetry per seed. Under it, each treated arm's persistence is a paired
# effect over seeds against the placebo of the same seed, and the paragraph ends with what this many seeds can
# reach at all: a one-sided sign-flip test over $n$ seeds has $2^n$ equally likely sign patterns under the null, so
# its p can never be smaller than $1/2^n$. When that floor is not below alpha, a persistence verdict reads *cannot
# tell* because the design is too small, whatever the symmetry does.

# %%
init_study.persistence_table(runs).round(2)

# %%
for effect in persist:
    print(prose.effect_line(effect))
persisting = init_study.persistence(runs, objectives[0])
design = stats.design_reach(runs.sizes["seed"])
prose.show(
    prose.fill(
        "**Persistence ({objective}):** after {steps} steps the median symmetry over layers ends at {ends} (mean over "
        "seeds). ",
        persisting,
    )
    + " ".join(
        prose.fill("{arm}: {estimate}, {verdict} ({reason}).", arm) for arm in init_study.persistence_verdicts(persist)
    )
    + " "
    + prose.fill("With {design}, the smallest p a one-sided {test} test can reach is {smallest}, ", design)
    + prose.fill(
        "below alpha = {alpha}: the design can reach a verdict either way."
        if design.reachable
        else "not below alpha = {alpha}: each persistence verdict reads *{verdict}* whatever the data show, since the "
        "design cannot reach a verdict; it takes at least {needed}.",
        design,
    )
)

# %% [markdown]
# ## The dataset
#
# Every arm's runs (dims `objective`, `init`, `seed`, `step`, `layer`, `head`), the placebo's losses
# (`placebo_val_loss`, `placebo_train_loss`), and per treated arm and seed the final-loss gain over the placebo and
# over the baseline and both speed-ups (`final_loss_gain_over_placebo`, `final_loss_gain`, `robust_speedup`,
# `paper_speedup`, and the placebo's under `placebo_`);
# attrs carry the provenance, under `loss_targets_met` whether every run learned, and under `verdicts` every claim
# above.

# %%
out = init_study.result_dataset(
    runs,
    placebo,
    table,
    effects=loss_effects + speed_effects + persist,
    parameters=parameters,
    unigram_entropy=unigram_entropy,
    learned=learned,
)
results.save_dataset(out, results_dir / "06_symmetric_init.nc")
out

# %% [markdown]
# ## Exercises
#
# The exercises train tiny encoders of their own, with the settings of `attnstruct.teaching.exercise_runs.EXERCISE` (notebook 05's exercise
# settings: width 32, 2 layers of 2 heads, 20 steps of 16 sequences of 32 tokens, a constant learning rate after a
# short warm-up): a few seconds per run on one thread, and the same answer whatever this notebook's parameters are.
# `exercise_config(objective, init)` builds the configuration of such a run, and `exercise_run(config)` trains it
# (or reuses it from `results_dir/exercise_runs/`) and returns its records over `step` and `layer`.

# %%
from attnstruct.teaching.exercise_runs import (  # noqa: F401
    EXERCISE,
    exercise_config,
    median_symmetry,
    scale_confound_sign,
    sign_of,
    tied_start_change_sign,
)
from attnstruct.teaching.exercise_runs import exercise_run as _exercise_run


def exercise_run(config: text_config.TextConfig) -> xr.Dataset:
    """Train a tiny run in ``results_dir/exercise_runs/`` (or reuse it there) and return its records."""
    return _exercise_run(config, results_dir / "exercise_runs", cache=cache_dir)


# %% [markdown]
# ### Exercise 06.1: a tied query and key at step 0, and after
#
# > **Difficulty** 1/5 · **Importance** 3/5 · **About** 5 min
#
# Take the tiny encoder `exercise_config("mlm", init="symmetric-matched")`. Predict two things:
#
# * `ex_step0`: the symmetry score of every layer's $W_{qk} = \sum_h W_q^h {W_k^h}^\top$ at step 0 (one number);
# * `ex_sign`: the sign of the change of the median symmetry over layers from step 0 to the last step (`+1`, `0`
#   or `-1`).
#
# The check builds the model and scores it, then trains it; the sign it grades is the same in at least $19$ of
# $20$ seeds (a test proves it).
#
# Hint: with $G = \partial L / \partial W_{qk}$, the gradients of the factors are $G W_k$ for $W_q$ and
# $G^\top W_q$ for $W_k$ (row-vector convention). Training keeps $W_q = W_k$ only if those two are equal. Is the
# gradient of a masked-LM loss an exactly symmetric matrix?

# %% nbgrader={"grade": false, "grade_id": "ex-06-1", "locked": false, "schema_version": 3, "solution": true}
### BEGIN SOLUTION
ex_step0 = 1.0  # sum_h W_k^h W_k^h^T is symmetric: its skew-symmetric part is zero
ex_sign = -1  # G is not exactly symmetric (g_ij and g_ji differ), so W_q and W_k drift apart; +1 is the maximum
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "ex-06-1-check", "locked": true, "points": 1, "schema_version": 3, "solution": false}
matched = exercise_config("mlm", init="symmetric-matched")
step0 = np.asarray(
    factor_scores(*query_key_factors(text.TextTask(matched, cache_dir).build_model()), sum_heads=True).symmetry
)
assert np.allclose(step0, ex_step0, rtol=0, atol=1e-9), (
    f"ex_step0 = {ex_step0!r} is not what the layers score at step 0; write W_qk with W_q = W_k"
)
assert ex_sign == tied_start_change_sign(results_dir / "exercise_runs", seed=0, cache=cache_dir), (
    f"ex_sign = {ex_sign!r} is not the sign the run shows; reread the hint"
)
curve = median_symmetry(exercise_run(matched))
print(f"right: every layer scores {step0.min():+.2f} at step 0; after training the median is {curve[-1]:+.2f}")

# %% [markdown]
# ### Exercise 06.2: the confound, in one sign
#
# > **Difficulty** 2/5 · **Importance** 4/5 · **About** 10 min
#
# The paper's `symmetric` initialisation also draws $W_q$, $W_k$, $W_v$ at PyTorch's default scale,
# $\mathcal U(\pm 1/\sqrt d)$ with standard deviation $1/\sqrt{3d}$, several times the standard deviation of
# BERT's normal initialisation (`0.02`) at width 32 (the table of the initialisations above measures both at this
# notebook's width). Build the tiny encoder with the paper's initialisation as `ex_paper` (`exercise_config`), and
# predict the sign of its final median symmetry minus that of the `symmetric-matched` encoder as
# `ex_confound_sign` (`+1`, `0` or `-1`). Both start at $+1$; only the scale of the start differs. The check trains
# both; the sign it grades is the same in at least $19$ of $20$ seeds.
#
# Hint: an Adam step moves each weight by about the learning rate, whatever the weight's size. Which start does the
# same number of steps overwrite sooner?

# %% nbgrader={"grade": false, "grade_id": "ex-06-2", "locked": false, "schema_version": 3, "solution": true}
### BEGIN SOLUTION
ex_paper = exercise_config("mlm", init="symmetric")
ex_confound_sign = +1  # the same Adam steps are small against larger weights: the symmetric start lasts longer
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "ex-06-2-check", "locked": true, "points": 2, "schema_version": 3, "solution": false}
assert ex_paper == exercise_config("mlm", init="symmetric"), (
    "ex_paper should be exercise_config('mlm', init='symmetric')"
)
assert ex_confound_sign == scale_confound_sign(results_dir / "exercise_runs", seed=0, cache=cache_dir), (
    f"ex_confound_sign = {ex_confound_sign!r} is not the sign the runs show; reread the hint"
)
finals = {
    init: median_symmetry(exercise_run(exercise_config("mlm", init=init)))[-1]
    for init in ("symmetric", "symmetric-matched")
}
print(f"right: symmetric ends at {finals['symmetric']:+.2f}, symmetric-matched at {finals['symmetric-matched']:+.2f}")

# %% [markdown]
# ## What to take away
#
# * $W_q^h = W_k^h$ makes every head's $W_{qk}$ symmetric (positive semi-definite) at step 0; training keeps it so
#   only if the gradient with respect to $W_{qk}$ is symmetric, which no loss makes it exactly.
# * An initialisation changes more than one thing at a time: the paper's symmetric start also changed the scale of
#   Q, K and V. A matched control (`symmetric-matched`) separates the symmetry from the scale.
# * A comparison of starts means something only on matched batches and against a placebo: the baseline from another
#   draw of its weights already ends a little above or below the baseline.
# * The theory predicts that a symmetric start lasts longer the larger the initial weights are against the
#   optimiser's steps, and shorter when the objective's gradient has no symmetric drive: Exercise 06.2 and the
#   `objectives` knob put both predictions to the test.

# %% [markdown]
# ## Knobs to try
#
# * `objectives`: add `"next-token"` to train the decoder from every start; a symmetric start is expected to fade
#   faster there, since a causal loss has no symmetric drive.
# * `seeds`: more seeds shrink the smallest detectable effect printed beside each verdict (roughly as one over the
#   square root of their number) and let the secondary claims reach smaller p.
# * `n_layers`, `steps` and `lr`: notebook 05's model (four layers, twice the steps) asks about four times the
#   compute; the paper profile trains it on a GPU.
# * `smoothing`: more evaluations in the trailing mean make the robust speed-up less sensitive to one noisy
#   evaluation, and slower to react.
