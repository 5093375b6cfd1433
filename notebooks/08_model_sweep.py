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
# # 08 · The model sweep: every model, encoders against decoders
#
# *Companion to Saponati et al., ICML 2025 (arXiv:2502.10927), the pretrained-model figures of section 4
# (median score over layers against model size, encoders in navy, decoders in purple, for language, vision
# and audio models).*
#
# Notebook 03 looked closely at a few checkpoints. This one is the population view: it scores a whole list
# of models with `attnstruct sweep` and draws them together. The list is a parameter:
#
# * a selection of the packaged checkpoints of the model zoo, offline: `permissive` (the quick profile: every packaged
#   checkpoint whose licence allows any use, text encoders and decoders, Whisper in two sizes and two vision
#   transformers), `core` (three of them, the course profile), `non-commercial` or `all`. The checkpoints of the
#   non-commercial set (licences that forbid commercial use) are added when they were fetched
#   (`also_if_fetched`), never fetched here, and every table, figure and dataset that uses one says so;
# * `paper`: the authors' list of about 150 hub models, resolved by hub id. Only the query/key bytes of each
#   safetensors repository are fetched, so this needs hub access but not the models' full weights; on a
#   GPU machine it is the paper profile (`make reproduce PROFILE=paper`);
# * a text or CSV file of hub ids and local paths, or a Python list of them.
#
# The sweep is resumable: every scored model is a file under the results folder, and a rerun scores only
# what is missing. Models that cannot be scored (not found, gated, an architecture the project does not
# read) are listed, not fatal.
#
# Every table, number and verdict below comes from the package (`attnstruct.analyses.nb08_model_sweep`, with the
# shared `pretrained_scores` and `paper_comparison`, and `attnstruct.stats` for the one verdict rule); the notebook
# tells the story in sentence templates filled with those facts, and draws the figures.

# %% [markdown]
# **Learning goals.** After this notebook you can:
#
# * score a whole list of models with one resumable sweep and read its dataset over `(model, stack, layer)`;
# * compute the paper's population statistic, the median over stacks of each stack's median over layers, per
#   role, and put the encoder/decoder ordering to a test across models, knowing how many models that test needs;
# * compare our scores with the values the authors reported, model by model, and explain the largest
#   disagreements by the known problems of their extraction;
# * judge a population median against the null of random layers.

# %% tags=["parameters"]
models = "permissive"  # zoo selection (core, permissive, non-commercial, all), "paper" (hub), a list file, a list
also_if_fetched = "non-commercial"  # a zoo selection added where fetched (never fetched here); "": none
device = "auto"  # auto (CUDA when there is one), cpu or cuda
per_head = False  # also store every head's scores
workers = 2  # models scored at once
n_disagreements = 10  # rows of the disagreement table
results_dir = None  # where the datasets go; None: results/ of the work folder (attnstruct.work)
figures_dir = None  # where the figures go; None: figures/ of the work folder

# %%
import matplotlib.pyplot as plt
import numpy as np

from attnstruct import notebooks, reference, results, stats, work
from attnstruct.analyses import nb08_model_sweep as sweep_study
from attnstruct.analyses import paper_comparison, pretrained_scores
from attnstruct.checkpoints import sweep
from attnstruct.devices import resolve_device
from attnstruct.report import plotting, prose

plotting.set_style()
results_dir, figures_dir = work.output_dirs(results_dir, figures_dir)
sweep_dir = results_dir / "08_model_sweep"

# %% [markdown]
# ## 1. The list, and the sweep
#
# The device is checked first: asking for `cuda` on a machine without one stops here with one line. Then the
# list is resolved (a zoo selection must have been fetched, and stops the notebook with the command that
# fetches it otherwise) and scored: each model by the project's one scoring path, into the one per-model
# dataset that notebooks 03 and 07 build too (`attnstruct.checkpoints.tables.model_dataset`). Its role comes
# from the stacks of its attention blocks by one rule: cross-attention, or both an encoder and a decoder
# self-attention stack, make an *encoder-decoder*; causal decoder self-attention alone a *decoder*;
# bidirectional encoder self-attention alone an *encoder*, or a *vision encoder* for a vision transformer (ViT,
# DINOv2, CLIP's vision tower, Swin), which the paper draws apart from its language models and which stays a group of
# its own here. Below the count of what was scored, a table lists the models that could not be, each with the kind
# of failure and its reason in one line.

# %%
where = resolve_device(device)
names = sweep_study.model_names(models, also_if_fetched=also_if_fetched)
run = sweep.run_sweep(names, sweep_dir, device=where, per_head=per_head, workers=workers, progress=True)
outcome = sweep_study.run_outcome(run, names, where)
prose.say("{models} on {device}: {scored} scored now, {skipped} done before, {failed} failed.", outcome)
licences = pretrained_scores.licence_use(names)
if licences.non_commercial:
    prose.say(
        "**Non-commercial licence:** {models} may not be used commercially; the tables, figures and dataset below "
        "that use them say so.",
        licences,
    )
sweep_study.failures(run)

# %% [markdown]
# The summary has one row per model and stack: its role and family, whether its attention is `self` or
# `cross` and whether it is rotary (notebook 03, section 2, explains both caveats), its parameter count and
# number of layers, the median and quartiles over layers of both scores, the paper's per-model statistic, and
# whether the model's licence forbids commercial use (`non_commercial`).

# %%
dataset = sweep_study.load_scores(run, sweep_dir)
summary = pretrained_scores.stack_summary(dataset)
pretrained_scores.with_licences(summary).round(3)

# %% [markdown]
# **The analysis plan.** The sweep's claim is the paper's: encoder stacks are more symmetric than decoder stacks.
# Checkpoints come in families (the sizes and fine-tunes of one model), so the **primary** claim counts one unit
# per model family (each model's family is its `model_type`), the median of a family's stacks of each role, and
# compares the families of encoder-only models with those of decoder-only models, as the paper's language figure
# does (encoder-decoder models and vision encoders are not units of it), by a permutation test, corrected by Holm's
# method over
# the primary family. Two **secondary** claims are reported uncorrected: the same on directionality, and the
# comparison with one unit per stack. The table says, for the models of this sweep, the smallest p each test can
# reach; the verdicts are in section 2.

# %%
model_types = dict(zip(dataset.model.values, dataset.family.values))
sweep_plan = sweep_study.PLAN
reach = sweep_study.smallest_p_by_claim(summary, model_types)
if reach:
    plan_reach = stats.plan_reach(sweep_plan, reach)
    prose.say(
        "{primary}, corrected by Holm's method, and {secondary}, reported uncorrected. After the correction the "
        "smallest p a primary claim can reach is {smallest}, below alpha = {alpha}: a verdict can be reached. With "
        "all {claims} claims primary it would be {every}."
        if plan_reach.reachable
        else "{primary}, corrected by Holm's method, and {secondary}, reported uncorrected. After the correction the "
        "smallest p a primary claim can reach is {smallest}, not below alpha = {alpha}: whatever the runs show, the "
        "primary claims read *{verdict}*. With all {claims} claims primary it would be {every}.",
        plan_reach,
    )
prose.show(prose.markdown_table(sweep_plan.table(reach)))
families = sweep_study.family_design(summary, model_types)
if families.tested:
    prose.say(
        "The primary claim counts the families of the encoder-only models ({encoders}) against those of the "
        "decoder-only models ({decoders}): with {design}, the smallest p the {test} test can reach is {smallest}, "
        "below alpha = {alpha}, so this sweep can decide it either way."
        if families.reachable
        else "The primary claim counts the families of the encoder-only models ({encoders}) against those of the "
        "decoder-only models ({decoders}): with {design}, the smallest p the {test} test can reach is {smallest}, not "
        "below alpha = {alpha}, so it reads *{verdict}* whatever the scores; it takes {needed}.",
        families,
    )

# %% [markdown]
# ## 2. The paper's main figure, with every scored model
#
# Median over layers with interquartile bars, against the number of parameters (counted as
# `model.num_parameters()` counts them, from the checkpoint's headers). Encoder stacks (bidirectional
# self-attention) in navy, decoder stacks (causal self-attention) in purple; an encoder-decoder model gives
# one point per stack, the two drawn slightly apart; vision encoders in amber, a group of their own. Small pale
# dots are the values **reported by Saponati et al. (2025)** for their models without a known problem, open
# circles their entries with a known extraction problem (the caveats of section 3), all drawn for comparison; they are not our measurements. With a few
# models each of ours has its own marker and legend entry; with many, one marker per role. The function is the
# one notebook 03 uses (`plotting.main_figure`), there without the caveat rows.

# %%
authors = reference.reference_table()

# %% tags=["hide-input"]
fig = plotting.main_figure(summary, authors, caveat_rows=True)
roles = paper_comparison.roles_beside_paper(summary, authors)
title = prose.fill(
    "Encoder stacks are {compared} decoder stacks: median symmetry {encoders} against {decoders} in this sweep "
    "({stacks}), {paper_encoders} against {paper_decoders} as reported by the paper"
    if roles.both_roles
    else "{present} in this sweep: median symmetry {present_median}",
    roles,
)
if licences.non_commercial:
    title += prose.fill(" (with non-commercial checkpoints: {models})", licences)
plotting.message_title(fig, title)
plotting.savefig(fig, figures_dir / "08_population")
plt.show()

# %% [markdown]
# What the figure shows, computed from the sweep: per role, how many stacks, the median over stacks of their
# median scores and the range, then the share of (encoder, decoder) pairs in which the encoder stack is the
# more symmetric and the less column-dominant, and, where the authors scored the same models, how far our
# medians lie from theirs. These are descriptions of the stacks scored, not tests. For scale: a random layer's
# symmetry spreads far less than its directionality at these widths (notebook 02), so a gap in symmetry
# between roles means more than one of the same size in directionality.

# %% tags=["nbval-check-output"]
table = paper_comparison.agreement(summary, authors)
for group in sweep_study.role_groups(summary):
    print(
        prose.fill(
            "{stacks}: median symmetry {symmetry} (range {symmetry_low} to {symmetry_high}), median directionality "
            "{directionality} (range {directionality_low} to {directionality_high}).",
            group,
        )
    )
order = sweep_study.pair_order(summary)
if order.has_pairs:
    print(
        prose.fill(
            "An encoder stack is more symmetric than a decoder stack in {more_symmetric} of (encoder, decoder) pairs, "
            "and less column-dominant (higher directionality) in {less_column_dominant}.",
            order,
        )
    )
for gap in sweep_study.paper_gaps(table):
    print(
        prose.fill(
            "{stacks} also reported by the authors {caveat}: median |ours - theirs| {symmetry} in symmetry, "
            "{directionality} in directionality.",
            gap,
        )
    )
if table.empty:
    print("None of the scored models is in the authors' list, so there is nothing to compare point by point.")

# %% [markdown]
# The paper's claim is about populations, so here it is put to the project's one rule (`attnstruct.stats`):
# the difference between the encoder stacks' and the decoder stacks' mean median symmetry, with a bootstrap
# interval over stacks and a two-sample permutation test, a stack being the unit (a secondary claim of the plan),
# and then the plan's primary claim, the same with one unit per model family. The rule says *holds* only
# when the interval excludes 0 on the predicted side and the test's p is below alpha, and *cannot tell at
# this scale* whenever the design cannot reach such a p: a permutation test of $n$ against $m$ stacks cannot
# go below one split in $\binom{n+m}{n}$. The sentence says which applies to this run, computed from its
# numbers of stacks; the packaged zoo is far too small for a verdict, the authors' list is not.

# %%
verdicts = sweep_study.effects(summary, model_types)  # every verdict of this notebook, under its plan
stacks = sweep_study.stack_test(summary, effect=next((e for e in verdicts if e.unit == "stack"), None))
if stacks.tested:
    design = paper_comparison.stack_reach(summary)  # what the stacks can show at all
    prose.show(
        prose.fill("As a test over stacks, {test}.", stacks)
        + " "
        + prose.fill(
            "With {design}, the smallest p the {test} test can reach is {smallest}, below alpha = {alpha}: the design "
            "can reach a verdict either way."
            if design.reachable
            else "With {design}, the smallest p the {test} test can reach is {smallest}, not below alpha = "
            "{alpha}: the test reads *{verdict}* whatever the data show, since the design cannot reach a verdict; it "
            "takes at least {needed}.",
            design,
        )
    )
else:
    prose.show("Without an encoder and a decoder stack there is nothing to compare.")
for effect in verdicts:
    if effect.unit == "family":
        print(prose.effect_line(effect))

# %% [markdown]
# ## 3. Point by point against the authors' values
#
# For every model and stack that the authors also scored: our median against theirs. Points on the
# diagonal agree. Colours mark the authors' own entries that their extraction likely got wrong: grouped-query
# head pairing, fused QKV weights split the wrong way, and the rest (random initialisation, cross-attention
# scored as self-attention, bidirectional "decoders"). An entry with a caveat is expected to sit off the
# diagonal; one without a caveat that sits far from it is a disagreement nobody has explained yet. A sweep with no
# model of the authors' list (the packaged zoo) draws no figure and says so in one line.

# %% tags=["hide-input"]
compared = sweep_study.with_caveat_groups(table)
if compared.empty:
    print("No model of this sweep is in the authors' list: there is nothing to compare point by point.")
else:
    fig, axes = plt.subplots(1, 2, figsize=(11, 5))
    for ax, var in zip(axes, ("symmetry", "directionality"), strict=True):
        for group, part in compared.groupby("caveat_group"):
            color = plotting.CAVEAT_COLORS[group]
            ax.scatter(part[f"paper_{var}"], part[f"ours_{var}"], s=22, color=color, label=group)
        ax.plot([-1, 1], [-1, 1], color="black", lw=0.8)
        ax.set(xlim=(-1.05, 1.05), ylim=(-1.05, 1.05), xlabel="reported by the paper", ylabel="this sweep", title=var)
    axes[1].legend(loc="center left", bbox_to_anchor=(1.0, 0.5))
    gaps = sweep_study.agreement_gaps(compared)
    title = prose.fill(
        "{stacks} also scored by the paper: median |ours - theirs| {symmetry} in symmetry, {directionality} in "
        "directionality",
        gaps,
    )
    plotting.message_title(fig, title)
    plotting.savefig(fig, figures_dir / "08_agreement")
    plt.show()

# %% [markdown]
# The largest disagreements, each with the explanation when one is known (ranked by the larger of the two
# absolute differences, symmetry or directionality):

# %%
worst = paper_comparison.largest_disagreements(table, n_disagreements)
worst[
    ["model", "stack", "ours_symmetry", "paper_symmetry", "ours_directionality", "paper_directionality", "explanation"]
].round(3)

# %% [markdown]
# ## 4. The dataset
#
# One dataset over `(model, stack, layer)`, with each model's role, family, parameter count, source, location,
# revision and the bytes fetched as coordinates, each stack's `extras` (comma-separated) and each model's
# `relative_depth`; the sweep's own files stay under the results folder for a resumed run. Its layout is the
# one of notebook 03's dataset, so that the two can be read by the same code.

# %%
parameters = notebooks.notebook_parameters("08_model_sweep", globals())  # recorded with the dataset
dataset = sweep_study.results_dataset(dataset, parameters=parameters, failures=len(run.failures), effects=verdicts)
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
# > **Difficulty** 2/5 · **Importance** 4/5 · **About** 10 min
#
# From `dataset` (the sweep's scores over `(model, stack, layer)`), compute for each role, `encoder` and
# `decoder` (leave out `cross`, and the models whose `role` is `vision encoder`), the median over its stacks of each stack's median symmetry over layers: one
# number per role, the statistic behind the paper's figure. Set `ex_larger` to the role with the larger value
# and `ex_value` to that value. Predict first which role it will be.
#
# Then decide whether `ex_value` lies outside the 95% range (the `0.025` and `0.975` quantiles) of `ex_null`, given
# in the cell: the symmetries of random layers $\sum_h W_q[h]^\top W_k[h]$ with Gaussian factors, width $64$
# and $4$ heads. A random layer's symmetry spreads less, and sits closer to 0, the wider the layer (notebook
# 02), and every model of the zoo is wider (notebook 03's table), so this range is wider than theirs: a value
# outside it lies outside their nulls too. Set `ex_outside` to `True` or `False`. Hints: a stack without layers
# is all NaN in `dataset`; `DataArray.to_dataframe()` keeps each model's `role` as a column; `groupby` or
# `median(skipna=True)` help.

# %% nbgrader={"grade": false, "grade_id": "ex-08-1", "locked": false, "schema_version": 3, "solution": true}
ex_null = stats.null_median_over_layers("symmetry", 64, 4, 1, n_draws=400, seed=0)  # [400] random layers
### BEGIN SOLUTION
ex_frame = dataset["symmetry"].to_dataframe().reset_index().dropna(subset=["symmetry"])
ex_frame = ex_frame[(ex_frame["stack"] != "cross") & (ex_frame["role"] != "vision encoder")]
ex_per_stack = ex_frame.groupby(["model", "stack"])["symmetry"].median()
ex_per_role = ex_per_stack.groupby(level="stack").median()
ex_larger, ex_value = ex_per_role.idxmax(), float(ex_per_role.max())
ex_low, ex_high = np.quantile(ex_null, [0.025, 0.975])
ex_outside = bool(ex_value < ex_low or ex_value > ex_high)
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "ex-08-1-check", "locked": true, "points": 2, "schema_version": 3, "solution": false}
groups = paper_comparison.group_medians(pretrained_scores.stack_summary(dataset)).set_index("stack")["symmetry_median"]
assert ex_larger == groups.idxmax(), (
    f"ex_larger = {ex_larger!r} is not the role with the larger median symmetry by the package's group medians"
)
assert abs(ex_value - groups.max()) < 1e-12, "the value differs: median over layers first, then over stacks"
verdict = stats.compare_with_null(ex_value, ex_null)
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
# * `models = "core"`: the three checkpoints of the course profile, in seconds; `models = "all"` (after
#   `attnstruct fetch-models --set all`, which fetches the non-commercial set too): all eighteen.
# * `also_if_fetched = ""`: only the permissive checkpoints, even where the non-commercial ones are fetched.
# * `models = "paper"` on a machine with hub access (and `device = "cuda"` if it has a GPU): the authors' list
#   of about 150 models; the first run fetches only the query/key bytes, a rerun resumes.
# * `models = ["minilm-l6", "whisper-base"]` (or a text file of hub ids and paths): a sweep of your own list.
# * `per_head = True`: every head's scores stored as well (larger files), to look for heads that differ from
#   their layer; `n_disagreements` up lists more of the disagreement table.
