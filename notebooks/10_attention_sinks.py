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
# # 10 · Is column dominance the attention sink? The decoder signature with the softmax taken away
#
# *Companion to Saponati et al., ICML 2025 (arXiv:2502.10927), section 3 (the gradient's role asymmetry) and
# section 4 (models trained from scratch). The sink literature is summarised in `docs/paper-notes.md`.*
#
# The paper reads **column dominance** (negative directionality: a few supersized columns of $W_{qk}$) as the
# signature of autoregressive training, caused by the role asymmetry of the gradient (section 3, notebook 04). A
# rival reading has grown since: **attention sinks**. A sink is a query-independent preference for one key, usually
# the first token. It "acts more like a key bias", and it depends on the softmax normalisation: attention that is
# not normalised over the keys (a sigmoid) does not form one (Gu et al., "When Attention Sink Emerges in Language
# Models", ICLR 2025). Gated attention removes it in large models (Qiu et al., "Gated Attention for Large Language
# Models", NeurIPS 2025), and a few residual channels with huge values on the sink token carry it ("Massive
# Activations in Large Language Models", Sun et al., COLM 2024). In the bilinear form $x_i^\top W_{qk} x_j$, a
# query-independent key bias is a rank-one term $u c^\top$; if $c$ lives on a few residual channels, that is
# exactly a few dominant columns.
#
# So the same matrix pattern has two readings: the gradient's asymmetry (the paper), or the machinery of a softmax
# sink. This notebook separates them by intervention: notebook 05's Transformer, text, seeds and loss, with **only
# the attention normalisation changed**:
#
# * `softmax`: notebook 05's runs, reused;
# * `sigmoid`: each weight $\sigma(q_i \cdot k_j / \sqrt{d})$, not normalised over the keys, Gu et al.'s sink-free
#   form (no key has to take the mass a query does not want to spend);
# * `softmax-null-slot`: the softmax over the keys and one learned key/value slot every query sees, an explicit key
#   bias that can take over the sink's job.
#
# **Both outcomes, before any result.** If column dominance is sink machinery, the sigmoid decoder loses it: its
# final directionality moves toward 0, and the null-slot decoder moves the same way. If it persists with the loss and
# the causal mask unchanged, the sink is not what makes it, and the run is interventional evidence for the paper's
# mechanism. The verdicts are read as in notebook 05: one number per run, paired by seed, a bootstrap interval, a
# sign-flip test and the null of the question, under a plan declared next.

# %% [markdown]
# **Learning goals.** After this notebook you can:
#
# * state what an attention sink is, and why a query-independent key bias shows in $W_{qk}$ as dominant columns;
# * design an intervention that takes one mechanism away and keeps everything else, and declare what each outcome
#   would mean before the runs;
# * read sink diagnostics (sink mass, overlap with the first position's channels against chance, ablation against
#   random channels) on the project's own runs and on real models;
# * tell a score that tracks a mechanism from one that merely coexists with it.

# %% tags=["parameters", "text-training"]
# The text-training settings are notebook 05's (this cell's tag shares them); this cell holds what only this notebook
# takes. The softmax arm is notebook 05's runs: with the same settings and results folder they are reused, not
# trained again.
objectives = ["mlm", "next-token"]  # the softmax arm's objectives (notebook 05's runs)
seeds = [0, 1, 2, 3, 4]  # one run per arm, objective and seed; the arms are paired by seed
snapshot_every = 100  # as notebook 05: the same run names, and the final weights the sink diagnostics read
arms = {"sigmoid": ["mlm", "next-token"], "softmax-null-slot": ["next-token"]}  # attention -> objectives trained
diagnose_models = ["smollm2-135m", "minilm-l6"]  # packaged checkpoints whose sinks are read
diagnose_hub = []  # hub ids ORG/NAME[@REVISION] whose sinks are read (hub access; each downloaded whole, once)
sink_sequences = 8  # held-out windows each own decoder's sinks are read on
sink_channels = 10  # k: the first position's channels compared with the dominant columns
ablation_draws = 20  # random key-channel sets each ablation is compared with
workers = 2  # runs trained side by side (processes)
threads_per_worker = 1  # torch threads per process
cache_dir = None  # attnstruct cache (corpus, tokenizer, packaged models); None: the default
results_dir = None  # where the dataset goes; None: results/ of the work folder (attnstruct.work)
figures_dir = None  # where the figures go; None: figures/ of the work folder

# %%
import matplotlib.pyplot as plt
import numpy as np

from attnstruct import notebooks, results, stats, work
from attnstruct.analyses import nb10_attention_sinks as sinks_test
from attnstruct.analyses import plans, text_runs
from attnstruct.report import plotting, prose
from attnstruct.tasks import text, text_config

plotting.set_style()
results_dir, figures_dir = work.output_dirs(results_dir, figures_dir)
COLORS = {"mlm": plotting.ENCODER_COLOR, "next-token": plotting.DECODER_COLOR}
STYLES = {"softmax": "-", "sigmoid": "--", "softmax-null-slot": ":"}
label = text_runs.label
parameters = notebooks.notebook_parameters("10_attention_sinks", globals())  # recorded with the dataset
runs_by_arm = {"softmax": objectives, **arms}
configs = {
    attention: [
        text_config.TextConfig.from_params(parameters, objective=objective, seed=seed, init="bert", attention=attention)
        for objective in chosen
        for seed in seeds
    ]
    for attention, chosen in runs_by_arm.items()
}  # every value is checked here: a bad parameter stops the notebook before any training
settings = configs["softmax"][0]

# %% [markdown]
# ## The analysis plan, declared before the runs
#
# One primary claim, corrected by Holm's method over the primary family, and secondary claims reported uncorrected:
#
# * **primary:** the decoder's final median directionality, sigmoid minus softmax, paired by seed, predicted
#   positive (toward 0) if column dominance is sink machinery. Its null swaps the two normalisations' labels within a
#   seed. *Holds*: the sink-free decoder loses its column dominance, the paper's signature is mediated by softmax
#   sinks. *Does not hold* (the difference is negative beyond chance): the sigmoid decoder is even more
#   column-dominant. *Cannot tell*: the signature persists within what the seeds can resolve, which is what the
#   paper's mechanism predicts;
# * **secondary:** the same for the null slot; the encoder-minus-decoder gap of final median symmetry under sigmoid
#   and under softmax (the latter is notebook 05's primary claim, read again here);
# * **the loss gate:** every arm learned (its validation loss below the unigram entropy by
#   `text_runs.LOSS_MARGINS`), else its claims read *cannot tell at this scale*;
# * **described, not tested:** on the final weights of each arm's decoders, the sink mass on position 0 against the
#   uniform share, the overlap of the dominant columns with the first position's channels against chance, and the
#   change of the sink mass when those key channels are zeroed, against random channels.

# %%
plan = sinks_test.PLAN
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
# ## Training: one set of runs per normalisation
#
# Each arm is trained by `text.train_many` into the same `results_dir/text_runs` folder as notebook 05. A softmax
# run's name and configuration are notebook 05's, so after notebook 05 the softmax arm is read, not trained; a
# sigmoid run costs somewhat more than a softmax run, a null-slot run about as much as one.
#
# **The three normalisations, written out.** With logits $a_{ij} = q_i \cdot k_j / \sqrt{d_h}$ and the positions
# $j$ that query $i$ may see ($j \le i$ under the causal mask):
#
# * softmax: $\alpha_{ij} = e^{a_{ij}} / \sum_{j'} e^{a_{ij'}}$. The weights of a row sum to 1, so a query that
#   finds nothing to read must still put its attention somewhere: the opening a sink fills;
# * sigmoid: $\alpha_{ij} = \sigma(a_{ij})$, each weight on its own and no sum to meet, so there is nowhere a
#   query must put its spare attention (Gu et al.'s sink-free form);
# * softmax with a null slot: one more key $k^*$ with value $v^*$ per head, learned and visible to every query,
#   $\alpha_{ij} = e^{a_{ij}} / (e^{q_i \cdot k^* / \sqrt{d_h}} + \sum_{j'} e^{a_{ij'}})$. The spare attention has a
#   place of its own that no token's key has to provide: a key bias outside $x_i^\top W_{qk} x_j$, so the score does
#   not see it, as it does not see rotary position terms.
#
# Only the normalisation differs: the weights of a seed start the same in every arm (the slot is drawn after them),
# the batches are the same, and so is the loss.

# %% tags=["slow"]
data = text.corpus_data(settings, cache_dir)
unigram_entropy = data.unigram_entropy()
by_arm = {
    attention: text.train_many(
        chosen,
        results_dir / "text_runs",
        workers=workers,
        threads_per_worker=threads_per_worker,
        cache=cache_dir,
        snapshot_every=snapshot_every,
    ).sel(init="bert", drop=True)
    for attention, chosen in configs.items()
}
dataset = sinks_test.combined(by_arm)
print(dict(dataset.sizes))

# %% [markdown]
# ## Did every arm learn?
#
# A normalisation that trains worse could change the scores for that reason alone, so each arm must reach notebook
# 05's loss target before its scores are read.

# %%
targets = sinks_test.arm_targets(dataset, unigram_entropy)
learned = sinks_test.learned_by_arm(targets)
gate = text_runs.loss_target_facts(targets, unigram_entropy)
prose.say(
    "**Loss targets met in every run: yes** ({met} of {runs}; unigram entropy of the training tokens {unigram_entropy} "
    "nats; margins asked below it: {margins} nats)."
    if gate.all_met
    else "**Loss targets met in every run: no** ({met} of {runs}; unigram entropy of the training tokens "
    "{unigram_entropy} nats; margins asked below it: {margins} nats). Every verdict that rests on a run short of its "
    "target reads *{verdict}* ({reason}). Short of the target:",
    gate,
)
for run in text_runs.missed_targets(targets):
    prose.say("- {run} ended {distance} nats {side} the unigram entropy ({target} below asked)", run)
targets.round(3)

# %% tags=["hide-input"]
fig, ax = plt.subplots(figsize=(9, 3.6))
for attention in dataset.attention.values:
    for objective in dataset.objective.values:
        if sinks_test.trained(dataset, str(attention), str(objective)):
            val = dataset.val_loss.sel(attention=attention, objective=objective).mean("seed").dropna("step")
            ax.plot(
                val.step,
                val,
                STYLES[str(attention)],
                marker="o",
                ms=3,
                color=COLORS[str(objective)],
                label=f"{label(objective)}, {attention}",
            )
ax.axhline(unigram_entropy, color="0.5", lw=1, label="unigram entropy (no context)")
ax.set(xlabel="optimizer step", ylabel="validation loss (nats)", title="validation loss, mean over seeds")
ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.02, 0.5))
plotting.message_title(
    fig,
    prose.fill(
        "Every arm reaches its loss target" if gate.all_met else "{met} of {runs} reach their loss target", gate
    ),
)
fig.tight_layout()
_ = plotting.savefig(fig, figures_dir / "10_losses")

# %% [markdown]
# ## The verdicts
#
# Each decoder arm against the softmax decoder of the same seed (final median directionality over layers), then the
# encoder-minus-decoder symmetry gap within each normalisation. The figure draws each seed as a line across the arms.

# %%
effects = sinks_test.normalisation_effects(dataset, learned=learned)
for effect in effects:
    print(prose.effect_line(effect))
print("primary verdict:", stats.primary_verdict(effects))
for arm in sinks_test.arms_at_end(dataset):
    prose.say(
        "- {attention}, {objective}: final median directionality {directionality} (mean over seeds; {span} over "
        "seeds), symmetry {symmetry}",
        arm,
    )

# %% tags=["hide-input"]
fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
for ax, score in zip(axes, text_runs.SCORES):
    for objective in dataset.objective.values:
        table = sinks_test.final_per_seed(dataset, score, str(objective))
        if table.empty:
            continue
        positions = [list(dataset.attention.values).index(a) for a in table.columns]
        for index, (_, row) in enumerate(table.iterrows()):
            ax.plot(
                positions,
                row.to_numpy(),
                "o-",
                color=COLORS[str(objective)],
                alpha=0.6,
                lw=1,
                label=label(objective) if index == 0 else None,
            )
    ax.axhline(0, color="0.6", lw=0.8)
    ax.set_xticks(range(dataset.sizes["attention"]))
    ax.set_xticklabels([str(a) for a in dataset.attention.values])
    ax.set(ylabel=f"final median {score}", title=f"{score}: one line per seed")
axes[-1].legend(fontsize=8, loc="center left", bbox_to_anchor=(1.02, 0.5))
primary = sinks_test.primary_facts(dataset, effects)
plotting.message_title(
    fig,
    prose.fill(
        "Decoder directionality, sigmoid minus softmax: {estimate} ({verdict});\ncloser to 0 in {toward} of {seeds}"
        if primary.tested
        else "Final scores by attention normalisation (the primary claim was not tested: {verdict})",
        primary,
    ),
)
fig.tight_layout()
_ = plotting.savefig(fig, figures_dir / "10_directionality_by_normalisation")

# %% [markdown]
# ## The sinks of our own decoders
#
# Each arm's decoders, their weights at the last step, read on windows of the held-out split (`attnstruct.sinks`):
# the sink mass on position 0 against the uniform share, the dominant key columns of each layer's $W_{qk}$ against
# the `sink_channels` channels that set the first position apart (summed over layers, against chance), the change of
# the sink mass when the dominant key channels are zeroed (against as many random channels), and directionality with
# the first position's channels left out. The sink mass is each query's share of its attention under the arm's own
# normalisation: sigmoid weights are not normalised, so their share of the row's total is read; the null slot's own
# share is left out, so what is read is what the tokens keep. If column dominance is sink machinery, the sink-free
# arms should show little mass on position 0 and little overlap beyond chance.

# %%
ids = sinks_test.held_out_windows(data, sink_sequences, settings.seq_len, seed=0)
own = {}
for attention, arm_configs in configs.items():
    decoders = {
        config.seed: sinks_test.final_model(config, results_dir / "text_runs", data.vocab_size)
        for config in arm_configs
        if config.objective == "next-token"
    }
    kept = {seed: model for seed, model in decoders.items() if model is not None}
    if decoders:
        own[attention] = sinks_test.own_sink_table(kept, ids, k=sink_channels, draws=ablation_draws)
for attention, table in own.items():
    prose.say(
        "- {attention}: {diagnosed} read; sink mass on position 0 {sink_mass} (median over layers, heads and seeds) "
        "against a uniform share of {uniform}; dominant columns among the first position's channels {overlap} against "
        "{expected} by chance (beyond chance in {beyond} seeds); zeroing them changes the sink mass by {ablation}, "
        "random channels by {ablation_null}; directionality {directionality}, {without_first} without the first "
        "position's channels."
        if not table.empty
        else "- {attention}: no decoder kept its final weights: set `snapshot_every` to read their sinks.",
        sinks_test.own_sinks(table, attention),
    )

# %% [markdown]
# ## Reading the arms together
#
# The primary verdict answers the question as declared: does the decoder's directionality move up when the softmax
# goes. Whether that supports the sink reading depends on the rest: whether the sink-free arm stops near 0 or
# overshoots into row dominance, whether the same change of normalisation moves the encoder as much (then it changes
# the geometry of $W_{qk}$ for any objective, not the decoder's column dominance alone), whether the null slot (a
# softmax that offers every head an explicit key to put its spare attention on) moves the decoder as well, and
# whether the softmax decoders had a sink to remove at all.

# %%
read = sinks_test.reading(dataset, effects, own)
prose.show(
    " ".join(
        part.strip()
        for part in [
            prose.fill(
                "The sigmoid decoders end at {sigmoid} (mean over seeds), past 0 on the row side in {overshoot} of "
                "{seeds}: the change overshoots the point where column dominance vanishes. "
                if read.overshoots
                else "The sigmoid decoders end at {sigmoid} (mean over seeds), past 0 in {overshoot} of {seeds}. ",
                read,
            ),
            prose.fill(
                "Sigmoid attention moves the encoder's directionality by {encoder_shift} and the decoder's by "
                "{decoder_shift} (means over seeds of the paired differences). "
                if read.encoder_read
                else "The encoder was not trained under sigmoid attention, so whether the change is the decoder's alone "
                "is not read here. ",
                read,
            ),
            prose.fill(
                "The null slot moves the decoder's directionality by {null_estimate} against softmax ({null_verdict}). "
                if read.null_read
                else "",
                read,
            ),
            prose.fill(
                "The softmax decoders put {sink_mass} of their attention on position 0 against a uniform share of "
                "{uniform}: they have a sink to remove."
                if read.has_sink
                else "The softmax decoders put {sink_mass} of their attention on position 0 against a uniform share of "
                "{uniform}: at this scale they have no sink to remove, and their directionality is {softmax} all the "
                "same."
                if read.sinks_read and read.column_dominant
                else "The softmax decoders put {sink_mass} of their attention on position 0 against a uniform share of "
                "{uniform}: at this scale they have no sink to remove (directionality {softmax})."
                if read.sinks_read
                else "",
                read,
            ),
        ]
        if part
    )
)

# %% [markdown]
# ## The sinks of real models
#
# The same diagnostics on packaged checkpoints (`diagnose_models`) and on models named by hub id (`diagnose_hub`:
# the paper profile reads Ettin's matched encoder-decoder pairs, trained alike but for the objective, and Pythia's
# checkpoints along training), read on a held-out passage: where the sinks of trained language models sit, and
# whether their dominant columns are the sink's key channels.
#
# What to look for: a real decoder trained on billions of tokens has the sink our small runs lack, so its sink mass
# should lie far above the uniform share. If its dominant columns are the sink's key channels, they should fall among
# the channels that set the first position apart far more often than chance, and zeroing them should take the sink
# away while as many random channels do not. An encoder is read the same way on its `[CLS]` and `[SEP]` positions:
# the sink reading makes no distinction between the objectives, the paper's reading does.

# %%
real, missing = sinks_test.read_real_models(diagnose_models, diagnose_hub, cache_dir=cache_dir, k=sink_channels)
for model in sinks_test.real_models(real):
    prose.say(
        "- {model} ({role}): sink mass {sink_mass} against {uniform} uniform; dominant columns among the first "
        "position's channels {overlap} against {expected}; zeroing them {change} (random {null}); directionality "
        "{directionality}",
        model,
    )
for model in sinks_test.not_read(missing):
    prose.say("- {model} not read: {reason}", model)

# %% tags=["hide-input"]
if len(real):
    fig, axes = plt.subplots(1, 2, figsize=(10, 2.0 + 0.4 * len(real)), sharey=True)
    colors = [plotting.ENCODER_COLOR if role == "encoder" else plotting.DECODER_COLOR for role in real["role"]]
    positions = np.arange(len(real))[::-1]  # the first model on top
    axes[0].barh(positions, real["sink_mass"], color=colors)
    axes[0].plot(real["uniform"], positions, "k|", ms=14, mew=2, label="uniform share")
    axes[0].set(xlabel="sink mass (median)", title="attention on the sink positions")
    axes[1].barh(positions + 0.2, real["overlap_first"], 0.4, color=colors, label="observed")
    axes[1].barh(positions - 0.2, real["overlap_first_expected"], 0.4, color="0.7", label="by chance")
    axes[1].set(xlabel="dominant columns among first-position channels", title="overlap against chance")
    axes[0].set_yticks(positions)
    axes[0].set_yticklabels(real["model"], fontsize=8)
    handles = [h for ax in axes for h in ax.get_legend_handles_labels()[0]]
    labels = [label for ax in axes for label in ax.get_legend_handles_labels()[1]]
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=8, frameon=False)
    if len(real) <= 3:
        title = (
            "Attention on the sink positions against the uniform share: "
            + ", ".join(prose.fill("{model} {sink_mass} ({uniform})", m) for m in sinks_test.real_models(real))
            + ";\ndominant columns among the first position's channels: "
            + ", ".join(prose.fill("{model} {overlap} ({expected} by chance)", m) for m in sinks_test.real_models(real))
        )
    else:
        title = prose.fill(
            "Of {n}, {with_sink} put more than twice the uniform share on their sink positions;\nin {beyond_chance}, "
            "the dominant columns fall among the first position's channels beyond chance",
            sinks_test.real_summary(real),
        )
    plotting.message_title(fig, title.replace("`", ""))  # names as code in sentences, plain in a title
    fig.tight_layout(rect=(0, 0.35 / fig.get_figheight(), 1, 1))  # room for the legend under the panels
    _ = plotting.savefig(fig, figures_dir / "10_sinks_in_real_models")

# %% [markdown]
# Along training (the checkpoints of one hub repository read at several steps, `diagnose_hub`): if column dominance
# is sink machinery, directionality should fall as the sink forms and track its strength across the checkpoints; if
# it is the gradient's asymmetry, it may move on its own clock.

# %%
series = sinks_test.training_series(real)
for repo in sinks_test.series_facts(series):
    prose.say(
        "- {repo}, {n}: sink mass {first_sink} at step {first_step} and {last_sink} at step {last_step}; "
        "directionality {first_directionality} and {last_directionality}; their correlation over the checkpoints "
        "{correlation}",
        repo,
    )
if series.empty:
    prose.show("No hub repository was read at two or more training steps (`diagnose_hub`).")

# %% tags=["hide-input"]
if not series.empty:
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4), sharex=True)
    for index, (repo, rows) in enumerate(series.groupby("repo", sort=False)):
        steps = rows["step"].clip(lower=1)
        axes[0].plot(steps, rows["sink_mass"], "o-", color=plotting.DECODER_COLOR, label=repo)
        axes[1].plot(steps, rows["directionality"], "o-", color=plotting.DECODER_COLOR, label=repo)
        axes[0].plot(steps, rows["uniform"], "k--", lw=0.8, label="uniform share" if index == 0 else None)
    top = 1.2 * float(max(series["sink_mass"].max(), series["uniform"].max()))
    axes[0].set(xscale="log", xlabel="training step (0 drawn at 1)", ylabel="sink mass (median)", ylim=(0, top))
    axes[1].set(xscale="log", xlabel="training step (0 drawn at 1)", ylabel="directionality (median)")
    axes[1].axhline(0, color="0.6", lw=0.8)
    axes[0].legend(fontsize=8)
    title = "Sink mass and directionality along training: " + "; ".join(
        prose.fill("{repo} {first_sink} to {last_sink}, {first_directionality} to {last_directionality}", r)
        for r in sinks_test.series_facts(series)
    )
    plotting.message_title(fig, title.replace("`", ""))
    fig.tight_layout()
    _ = plotting.savefig(fig, figures_dir / "10_sinks_along_training")

# %% [markdown]
# ## The dataset
#
# One netCDF file with dims `attention`, `objective`, `seed`, `step`, `layer`, `head`; each arm's decoders' sink
# diagnostics as `sink_*` over `attention` and `seed`; the real models' diagnostics as `real_*` over `model` (no
# `model` dim when none was read); attrs carry the provenance, every run's parameters, whether every run learned, and
# under `verdicts` the claims above. `docs/paper-notes.md` and the README state their numbers from this file
# (`python -m attnstruct.analyses.documented_numbers build/quick/results`).

# %%
out = sinks_test.result_dataset(
    dataset,
    sinks=own,
    parameters=parameters,
    corpus=data.source,
    unigram_entropy=unigram_entropy,
    learned=bool(gate.all_met),
    effects=effects,
    real=real,
)
results.save_dataset(out, results_dir / "10_attention_sinks.nc")
out

# %% [markdown]
# ## Exercises

# %% [markdown]
# ### Exercise 10.1: the sink mass by hand
#
# > **Difficulty** 2/5 · **Importance** 3/5 · **About** 10 min
#
# Write `ex_sink_mass(probabilities, causal)` that takes attention weights of shape `[L, H, B, T, T]` (layer, head,
# sequence, query, key; each row sums to 1) and returns, per layer and head (`[L, H]`), the mean over sequences and
# queries of the weight on position 0. Under the causal mask leave query 0 out: it can attend to position 0 only, so
# it says nothing about a preference. Then compute `ex_uniform`, the mass a decoder with `T = 16` would put on
# position 0 if every query spread its attention evenly over the positions it sees (queries 1 to 15). Predict first:
# is it nearer 1/16 or 1/8?


# %% nbgrader={"grade": false, "grade_id": "ex-10-1", "locked": false, "schema_version": 3, "solution": true}
### BEGIN SOLUTION
def ex_sink_mass(probabilities, causal):
    first = 1 if causal else 0
    return probabilities[..., first:, 0].mean(dim=(-2, -1))


ex_uniform = sum(1 / (t + 1) for t in range(1, 16)) / 15
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "ex-10-1-check", "locked": true, "points": 2, "schema_version": 3, "solution": false}
import torch  # noqa: E402

from attnstruct.sinks import attention_mass  # noqa: E402

generator = torch.Generator().manual_seed(10)
for causal in (True, False):
    logits = torch.randn(2, 3, 4, 16, 16, generator=generator, dtype=torch.float64)
    if causal:
        logits = logits.masked_fill(torch.ones(16, 16, dtype=torch.bool).triu(1), float("-inf"))
    weights = logits.softmax(-1)
    yours = ex_sink_mass(weights, causal)
    assert tuple(yours.shape) == (2, 3), (
        f"ex_sink_mass returns shape {tuple(yours.shape)}: one value per layer and head"
    )
    assert torch.allclose(yours, attention_mass.sink_mass(weights, (0,), causal=causal)), (
        f"ex_sink_mass (causal={causal}) differs from the package's: the weight on key 0, mean over sequences and "
        "queries, query 0 left out under the causal mask"
    )
assert abs(ex_uniform - attention_mass.uniform_share(16, (0,), causal=True)) < 1e-12, (
    "ex_uniform: query t sees t + 1 positions, so gives position 0 a share 1 / (t + 1); average over queries 1 to 15"
)
print("ex_sink_mass agrees with the package with and without the causal mask, and ex_uniform with its uniform share")

# %% [markdown]
# ## What to take away
#
# * A pattern in $W_{qk}$ can have more than one cause; an intervention that removes one cause and keeps the rest
#   (the loss, the mask, the data, the seeds) tells them apart where a correlation cannot.
# * A query-independent key bias is a rank-one term of the bilinear form: on a few residual channels it shows as a
#   few dominant columns, in encoders as well as in decoders.
# * The verdict on the primary claim is declared with both readings before the runs; a *cannot tell* is read against
#   what the seeds could resolve (the plan's reach), not as a finding either way.

# %% [markdown]
# ## Knobs to try
#
# * `arms`: add `"softmax-null-slot": ["mlm", "next-token"]` to read the null slot's encoder too.
# * `seeds`: eight seeds let the primary claim survive a correction across notebooks (README's findings table).
# * `diagnose_models`: any packaged checkpoint name (`attnstruct models`).
