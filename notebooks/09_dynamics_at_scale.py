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
# # 09 · The claim at scale, without training: matched pairs, public training series, continued training
#
# *Companion to Saponati et al., ICML 2025 (arXiv:2502.10927): the claim of section 4 (bidirectional training makes
# $W_{qk}$ symmetric, autoregressive training does not) and its emergent dynamics, tested on checkpoints trained by
# others, at budgets far beyond the paper's.*
#
# The paper's evidence comes in two kinds, and neither isolates the objective at scale. Its pretrained comparison
# (notebooks 03 and 08) sets encoders against decoders that differ in data, size, tokenizer and recipe as well as
# in the objective. Its training runs (notebook 05) isolate the objective, but they are small, with one run per
# setting. Public checkpoints allow a stronger test at no cost of training:
#
# * **Matched pairs.** The Ettin suite trains an encoder (masked language modelling) and a decoder (next-token
#   prediction) of each of six sizes on the same data, with the same recipe and shapes: only the objective and the
#   attention mask differ, which is exactly the contrast the claim is about. The unit of the test is the size.
# * **Training series with seeds.** Pythia's decoders keep 154 checkpoints of training as git branches, and the
#   PolyPythias repeat the run with nine more seeds; MultiBERTs keep intermediate checkpoints of five encoder seeds.
#   These are the dynamics of the paper's section 4 at thousands of times its budget, with an interval over seeds.
# * **Cross-objective continued training.** Ettin also trains each final decoder on as an encoder, and each encoder
#   on as a decoder. If the objective shapes $W_{qk}$, a decoder trained on bidirectionally should gain symmetry.
#
# Every checkpoint is read by byte ranges: the reader fetches the index of each file (a safetensors header, or the
# directory and the pickled index of a torch `pytorch_model.bin`, unpickled by a reader that allows tensors and
# plain containers only) and then only the bytes of the query and key weights, a small share of each file.
#
# **Offline, the same code path.** The quick profile reads a series the package makes itself: notebook 05's
# encoder and decoder runs keep their weights every few steps as checkpoint folders of the same form as the
# public ones, and each final run is trained on for a few more steps with the other objective, and, as its control,
# with its own. The paper profile (`source = "hub"`) reads the public series named in the parameters; it needs hub
# access and no GPU.
#
# Offline, the matched pairs are notebook 05's final encoders and decoders, read with 05's statistic and null: their
# verdict is 05's primary claim read a second time, a check of this notebook's code path and not new evidence. It is
# therefore a secondary claim here, counted once, in 05. What is new offline is the continued training and its
# control.

# %% [markdown]
# **Learning goals.** After this notebook you can:
#
# * say why a matched encoder-decoder pair tests the objective where a population of unrelated models cannot, and
#   read a paired effect whose units are model sizes;
# * read a checkpoint series (revisions of a repository, ordered by training step) into one dataset, and draw a
#   score against tokens seen with a band over seeds;
# * read what continued training with the other objective does to $W_{qk}$, before against after;
# * tell how many bytes a reading of only the query and key weights costs, and compute it from a model's shape.

# %% tags=["parameters"]
source = "local"  # "local": notebook 05's runs as a checkpoint series (offline); "hub": the public series below
trajectories = ["pythia-160m", "multiberts", "ettin-150m-encoder", "ettin-150m-decoder", "olmo-1b"]  # hub series
pairs = ["ettin"]  # matched encoder-decoder pairs read from the hub
crosses = ["ettin decoder continued as encoder", "ettin encoder continued as decoder"]  # continued training
max_checkpoints = 12  # checkpoints kept per seed of a hub trajectory, spread evenly in log(1 + step)
continue_steps = 100  # local: steps of training each final run on with the other objective
continue_warmup = 20  # local: warm-up steps of the continued runs
continue_every = 25  # local: the continued runs' record and evaluation interval
n_null_draws = 200  # untrained stacks drawn for each null
workers = 2  # local: runs trained side by side (processes); hub: checkpoints read at once (threads)
threads_per_worker = 1  # local: torch threads per process
device = "cpu"  # where the scores are computed: "cpu", "cuda" or "auto"
cache_dir = None  # attnstruct cache (corpus, tokenizer); None: the default
results_dir = None  # where the datasets go; None: results/ of the work folder (attnstruct.work)
figures_dir = None  # where the figures go; None: figures/ of the work folder

# %%
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.lines import Line2D

from attnstruct import notebooks, reference, results, work
from attnstruct.analyses import local_series
from attnstruct.analyses import nb09_dynamics_at_scale as at_scale
from attnstruct.checkpoints import hub_costs, sweep
from attnstruct.checkpoints import series as public
from attnstruct.devices import resolve_device
from attnstruct.report import plotting, prose

plotting.set_style()
results_dir, figures_dir = work.output_dirs(results_dir, figures_dir)
parameters = notebooks.notebook_parameters("09_dynamics_at_scale", globals())  # recorded with the dataset
if source not in ("local", "hub"):
    raise ValueError(f"source must be 'local' or 'hub', got {source!r}")
where = resolve_device(device)  # a device that is not there stops here, in one line
sweep_dir = results_dir / "09_dynamics_at_scale"

# %% [markdown]
# ## 1. The series
#
# Every checkpoint enters the analysis as an **entry**: its kind (a member of a matched pair, a point of a
# trajectory, or the before or after of continued training), its series, its role (the attention of its
# objective: bidirectional encoder or causal decoder), its unit (a size or a seed) and, for trajectories, its
# training step and the tokens seen by then. One checkpoint may be several entries: the last snapshot of a local
# run is a point of its trajectory, a member of its seed's pair, and the start of its continued run.
#
# Locally, the runs are notebook 05's, found by its parameters (read from its dataset when it has run, else its
# defaults) and trained here only if they are not stored. On the hub, a trajectory's revisions are listed
# (`attnstruct revisions`) and thinned to `max_checkpoints` per seed, evenly in $\log(1 + \mathrm{step})$, where the
# early dynamics show; before the first is read, the plan says what the reading will cost in the hub's metered
# requests (resolver and API calls, counted in 5-minute windows), bytes and time at the anonymous and a free
# account's quota.

# %% tags=["slow"]
if source == "local":
    runs05 = local_series.notebook_05_parameters(results_dir)
    made = local_series.make_series(
        runs05,
        results_dir / "text_runs",
        continue_steps=continue_steps,
        continue_warmup=continue_warmup,
        continue_every=continue_every,
        workers=workers,
        threads_per_worker=threads_per_worker,
        cache=cache_dir,
    )
    entries = made.entries
    unigram = local_series.notebook_05_tokens(runs05, cache_dir).unigram_entropy()
    learned = made.learned(unigram)
else:
    entries = public.entries(trajectories, pairs, crosses, max_checkpoints=max_checkpoints)
    learned = {}  # published models: trained to the end by their authors
    print(hub_costs.series_cost(entries).summary(workers=workers))  # before the first checkpoint is read
at_scale.series_table(entries)

# %% [markdown]
# ## 2. The analysis plan, declared before any score is read
#
# The claims follow from the series, not from their scores. Each matched-pair series' symmetry claim is
# **primary**: the encoder of a pair ends more symmetric than its decoder. With several primary claims, their
# p-values are corrected together by Holm's method. The local pairs are the exception: they re-read notebook 05's
# runs, so their claim is secondary (05 states it). Everything else is **secondary**, reported uncorrected: the
# pairs' directionality (the decoder more column-dominant), each trajectory's last checkpoints against an untrained
# layer of their shape (an encoder's symmetry above it, a decoder's directionality below it), each
# continued-training series (symmetry gained when trained on as an encoder, lost as a decoder), and, locally, each
# continuation against its control: the change under the other objective minus the change under the same one.
#
# The null of each question: a pair of the local series shares its initial weights (an encoder and a decoder of
# one seed start from the same draw), so its objectives' labels are swapped within seeds; Ettin's pairs were
# trained from independent starts, so their null is the difference of two untrained stacks of each pair's shapes.
# A trajectory's last checkpoints are read against the mean over as many untrained models of their shape, and
# continued training against its before and after swapped within units. The last columns give the smallest p each
# design can reach with its number of units.

# %%
plan = at_scale.declared_plan(entries)
prose.show(prose.markdown_table(plan.table()))
pairs_source = at_scale.pairs_source(entries)
if pairs_source.rereads_05:
    prose.say(
        "The **{series}** are notebook 05's own runs, read with its statistic and null: their verdict below "
        "checks this notebook's code path against 05's and is no second confirmation.",
        pairs_source,
    )

# %% [markdown]
# ## 3. Reading the checkpoints, byte range by byte range
#
# The checkpoints are scored by the project's one sweep (`attnstruct sweep`): one dataset per checkpoint, resumable,
# each failure listed with its kind rather than fatal. A local snapshot is read by the same range reader as a hub
# file, from the disk instead of the network, so the bytes below are what a reading of the same files from the
# hub would transfer.
#
# A published series is not always what its names claim. Some branches of Pythia and OLMo carry weights copied from
# a later checkpoint (EleutherAI/pythia#205 and #206, allenai/OLMo#915): scored as they are, they would draw a false
# plateau, the same scores at two different steps. The hub states the sha256 of every weight file, so the sweep
# records each checkpoint's digest (`weights_sha256`, without downloading a byte for it) and names every group of
# byte-identical checkpoints. Of such a group within one run, a trajectory keeps only the latest checkpoint, where
# those weights were trained; the sentence below the count names the ones left out, and with which they agree.

# %% tags=["slow"]
models = list(dict.fromkeys(entries["model"]))
swept = sweep.run_sweep(models, sweep_dir / "sweep", device=where, workers=workers, progress=False)
ds, missing = at_scale.checkpoint_scores(entries, results.load_dataset(swept.path))
scored = at_scale.scored(ds, missing)
prose.say(
    "{checkpoints} scored ({entries}, a checkpoint used by several analyses counted once; {parameters} M parameters)."
    if scored.sizes_known
    else "{checkpoints} scored ({entries}, a checkpoint used by several analyses counted once).",
    scored,
)
prose.say(
    "Every checkpoint named was scored."
    if scored.all_scored
    else "Not scored, and left out (the sweep's `failures.csv` says why): {missing}.",
    scored,
)
if scored.digests_known:
    prose.say(
        "Left out of the trajectories, as byte-identical to a later checkpoint of their run by the hub's digests: "
        "{left_out}."
        if scored.any_copies
        else "No two checkpoints of a run hold byte-identical weights, by the hub's digests.",
        scored,
    )

# %%
file_bytes = local_series.weight_file_bytes(entries) if source == "local" else None
needed = at_scale.bytes_needed(ds, file_bytes)
read = at_scale.bytes_read(needed)
prose.say(
    "Reading the query and key weights of {checkpoints} transferred {total} ({per_checkpoint} per checkpoint, "
    "{share} of their weight files)."
    if read.share_known
    else "Reading the query and key weights of {checkpoints} transferred {total} ({per_checkpoint} per checkpoint).",
    read,
)
needed

# %% [markdown]
# ## 4. Matched pairs: the objective alone
#
# Each unit is drawn as its encoder and its decoder, median over layers, with the central 95% of an untrained stack
# of that unit's shape in grey: the chance level. The claim predicts every encoder above its decoder in symmetry,
# and, for directionality, the decoder lower (more column-dominant).

# %%
pair_effects = at_scale.pair_effects(ds, plan, n_draws=n_null_draws, learned=learned)
for effect in pair_effects:
    print(prose.effect_line(effect))

# %% tags=["hide-input"]
COLORS = {"encoder": plotting.ENCODER_COLOR, "decoder": plotting.DECODER_COLOR}
fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), squeeze=False)
for ax, score in zip(axes[0], at_scale.SCORES):
    for series in at_scale.series_of(ds, "pair"):
        members = at_scale.entries_of(ds, "pair", series)
        units = list(dict.fromkeys(members["unit"].values))
        values = at_scale.median_over_layers(members, score).values
        unit_of = members["unit"].values
        for role in ("encoder", "decoder"):
            mine = members["role"].values == role
            ax.plot([units.index(u) for u in unit_of[mine]], values[mine], "o", color=COLORS[role])
        for i, unit in enumerate(units):
            both = values[unit_of == unit]
            ax.plot([i, i], [both.min(), both.max()], color="0.6", lw=1, zorder=0)
            shape = at_scale.shape_of(members, int(np.flatnonzero(unit_of == unit)[0]))
            null = at_scale.untrained_null(score, shape, n_null_draws, 0)
            ax.fill_between([i - 0.3, i + 0.3], *np.quantile(null, [0.025, 0.975]), color="0.85", lw=0, zorder=-1)
        ax.set_xticks(range(len(units)), units)
    ax.axhline(0, color="0.5", lw=0.5)
    ax.set(ylabel=f"median {score} over layers", title=f"{score}: matched encoder and decoder")
handles = [Line2D([], [], marker="o", ls="", color=COLORS[r], label=r) for r in COLORS]
handles.append(plt.Rectangle((0, 0), 1, 1, color="0.85", label="untrained stack of that shape (95%)"))
axes[0, -1].legend(handles=handles, fontsize=8, loc="center left", bbox_to_anchor=(1.02, 0.5))
counts = ", ".join(prose.fill("{more} of {total} ({series})", pair) for pair in at_scale.pairs(ds))
plotting.message_title(fig, "The encoder is the more symmetric of its matched pair in " + counts)
fig.tight_layout()
_ = plotting.savefig(fig, figures_dir / "09_matched_pairs")

# %%
for pair in at_scale.pairs(ds):
    prose.say(
        "**{series}:** the encoder is the more symmetric of its pair in {more} of {units} (encoder minus "
        "decoder {gap}).",
        pair,
    )
prose.say("Verdicts: {counts}.", at_scale.verdict_counts(pair_effects))

# %% [markdown]
# ## 5. Trajectories: the scores against the tokens seen
#
# One thin line per seed, the band between the seeds' lowest and highest value at each checkpoint, and the mean
# over seeds in bold. The horizontal axis is the number of tokens seen, on a log scale, so that a run of a few
# million tokens and one of hundreds of billions share one figure; where a series does not state its tokens per
# step (Ettin's phases), it is drawn against its checkpoint index instead, in a panel of its own. The authors'
# runs (their result files, median over layers, encoders solid and decoders dashed) are drawn in grey on the same
# axes, at their batch of 32 sequences on each of 8 accumulation steps, 512 tokens each.

# %%
trajectory_effects = at_scale.trajectory_effects(ds, plan, n_draws=n_null_draws, learned=learned)
for effect in trajectory_effects:
    print(prose.effect_line(effect))

# %% tags=["hide-input"]
authors = at_scale.authors_runs_on_tokens(reference.training_dynamics())
by_axis = at_scale.trajectory_axes(ds)
rows = [axis for axis in ("tokens", "checkpoint") if by_axis[axis]]
fig, axes = plt.subplots(len(rows), 2, figsize=(11, 3.8 * len(rows)), squeeze=False)
for row, axis in enumerate(rows):
    extra = []
    for ax, score in zip(axes[row], at_scale.SCORES):
        if axis == "tokens":  # the authors' runs in grey, encoders solid and decoders dashed
            for mode, run in authors.groupby("mode"):
                for _, one in run.groupby(["n_layers", "dataset"]):
                    ax.plot(one["tokens"], one[score], color="0.6", lw=0.8, ls="-" if mode == "encoder" else "--")
            extra = [
                Line2D([], [], color="0.6", ls="-", label="authors' encoders"),
                Line2D([], [], color="0.6", ls="--", label="authors' decoders"),
            ]
            ax.set_xscale("log")
        for series in by_axis[axis]:
            role = str(at_scale.entries_of(ds, "trajectory", series)["role"].values[0])
            grid = at_scale.trajectory_grid(ds, series, score, axis)  # [position, seed]
            if axis == "tokens":
                grid = grid[grid.index > 0]  # the untrained start has no place on a log axis
            for seed in grid.columns:
                ax.plot(grid.index, grid[seed], color=COLORS[role], lw=0.6, alpha=0.5)
            ax.fill_between(grid.index, grid.min(axis=1), grid.max(axis=1), color=COLORS[role], alpha=0.15, lw=0)
            ax.plot(grid.index, grid.mean(axis=1), color=COLORS[role], lw=2, label=series)
        ax.axhline(0, color="0.5", lw=0.5)
        xlabel = "tokens seen" if axis == "tokens" else "checkpoint, in training order"
        ax.set(xlabel=xlabel, ylabel=f"median {score} over layers", title=f"{score} over training")
    handles, _ = axes[row, -1].get_legend_handles_labels()
    axes[row, -1].legend(handles=handles + extra, fontsize=8, loc="center left", bbox_to_anchor=(1.02, 0.5))
finals = ", ".join(prose.fill("{series} {final}", trajectory) for trajectory in at_scale.trajectories(ds))
plotting.message_title(fig, "Median symmetry at the last checkpoint, mean over seeds: " + finals)
fig.tight_layout()
_ = plotting.savefig(fig, figures_dir / "09_trajectories")

# %%
for trajectory in at_scale.trajectories(ds):
    prose.say(
        "**{series}** ({seeds}, to {reaches} tokens): median symmetry peaks at {peak} and ends at {end}, mean over "
        "seeds."
        if trajectory.on_tokens
        else "**{series}** ({seeds}, to step {reaches}): median symmetry peaks at {peak} and ends at {end}, mean over "
        "seeds.",
        trajectory,
    )
prose.say("Verdicts at the last checkpoint: {counts}.", at_scale.verdict_counts(trajectory_effects))

# %% [markdown]
# ## 6. Continued training with the other objective
#
# Each line joins a model before and after it was trained on with the other objective. If the objective shapes
# $W_{qk}$, the lines of a decoder continued as an encoder rise in symmetry and those of an encoder continued as a
# decoder fall. Locally, the continued runs are short (`continue_steps`) and start again with a warm-up; Ettin's
# continue for tens of billions of tokens.
#
# A restart alone moves the scores: the learning rate warms up again, and notebook 05's runs gain symmetry early
# whatever their objective. Locally, each final run is therefore also continued with its **own** objective, from the
# same snapshot, with the same warm-up and steps (dashed lines). The objective's effect is the change under the other
# objective minus the change under the same one, seed by seed, tested by flipping the signs of those differences.

# %%
cross_effects = at_scale.cross_effects(ds, plan, learned=learned)
for effect in cross_effects:
    print(prose.effect_line(effect))

# %% tags=["hide-input"]
crossing = at_scale.series_of(ds, "cross")
fig, axes = plt.subplots(1, max(1, len(crossing)), figsize=(5 * max(1, len(crossing)), 3.6), squeeze=False)
controls = dict(at_scale.contrasted(ds))
for ax, series in zip(axes[0], crossing):
    table = at_scale.before_and_after(ds, series)
    role = str(at_scale.entries_of(ds, "cross", series)["role"].values[0])
    for _, row in table.iterrows():
        ax.plot([0, 1], [row["before"], row["after"]], "o-", color=COLORS[role], alpha=0.7)
    if series in controls:  # the same start continued with its own objective, dashed, in its role's colour
        control = controls[series]
        same_role = str(at_scale.entries_of(ds, "control", control)["role"].values[0])
        for _, row in at_scale.before_and_after(ds, control, kind="control").iterrows():
            ax.plot([0, 1], [row["before"], row["after"]], "o--", color=COLORS[same_role], alpha=0.5)
        ax.legend(
            handles=[
                Line2D([], [], color=COLORS[role], marker="o", label=f"continued as {role}"),
                Line2D([], [], color=COLORS[same_role], marker="o", ls="--", label=f"continued as {same_role}"),
            ],
            fontsize=8,
            loc="upper left",
            bbox_to_anchor=(0.0, -0.15),
        )
    ax.set_xticks([0, 1], ["before", "after"])
    ax.axhline(0, color="0.5", lw=0.5)
    ax.set(ylabel="median symmetry over layers", title=series)
changes = "; ".join(prose.fill("{series}: {mean_change}", cross) for cross in at_scale.crosses(ds))
plotting.message_title(fig, "Median symmetry after minus before continued training, mean over units: " + changes)
fig.tight_layout()
_ = plotting.savefig(fig, figures_dir / "09_continued_training")

# %%
for cross in at_scale.crosses(ds):
    prose.say("**{series}:** median symmetry {direction} in {moved} of {units} (after minus before {change}).", cross)
prose.say("Verdicts: {counts}.", at_scale.verdict_counts(cross_effects))

# %%
contrast_effects = at_scale.contrast_effects(ds, plan, learned=learned)
for effect in contrast_effects:
    print(prose.effect_line(effect))
for contrast in at_scale.contrasts(ds):
    prose.say(
        "**{series}** against **{control}**: median symmetry {direction} further under the other objective in "
        "{further} of {units} (the change under the other objective minus under the same, mean {contrast}; the "
        "control alone changed by {same_change}).",
        contrast,
    )

# %% [markdown]
# ## 7. The verdicts together, and the dataset
#
# The primary claims first, then the count of every claim's verdict; a series whose runs did not learn their
# objective is not judged. The dataset keeps every entry's layer scores, its series, role, unit and training
# position, the checkpoints that could not be scored, and the verdicts.

# %%
effects = [*pair_effects, *trajectory_effects, *cross_effects, *contrast_effects]
runs = at_scale.learned_runs(learned)
prose.say(
    "Every run behind these series met its loss target."
    if runs.all_learned
    else "The runs behind {not_learned} did not meet their loss targets: their claims are not judged.",
    runs,
)
for primary in at_scale.primary_verdicts(effects):
    prose.say("Primary: {claim}: **{verdict}** ({estimate}, n = {n}).", primary)
prose.say("All claims: {counts}.", at_scale.verdict_counts(effects))
dataset = at_scale.result_dataset(
    ds, parameters=parameters, effects=effects, missing=missing, source=source, relative_to=results_dir
)
path = results.save_dataset(dataset, results_dir / "09_dynamics_at_scale.nc")
print(f"wrote {path.name}: {dict(dataset.sizes)}")

# %% [markdown]
# ## Exercises

# %% [markdown]
# ### Exercise 09.1: the bytes of a range read
#
# > **Difficulty** 2/5 · **Importance** 2/5 · **About** 10 min
#
# A range read of a checkpoint transfers its index and the query and key weights. Write
# `ex_query_key_bytes(n_layers, d_model, n_heads, d_head, n_kv_heads, bytes_per_value, bias)` that returns the bytes of
# the query and key weights and, when `bias` is true, of their biases: each layer has a query weight of
# `n_heads * d_head` rows and a key weight of `n_kv_heads * d_head` rows, each row `d_model` values, and one bias value
# per row. Then use it for Pythia-160m (12 layers, width 768, 12 heads of 64, float16, with biases): set
# `ex_pythia_mb` to that number of bytes in megabytes (one megabyte is a million bytes). Predict first: is it closer to
# a megabyte, ten, or a hundred?


# %% nbgrader={"grade": false, "grade_id": "ex-09-1", "locked": false, "schema_version": 3, "solution": true}
### BEGIN SOLUTION
def ex_query_key_bytes(n_layers, d_model, n_heads, d_head, n_kv_heads, bytes_per_value, bias):
    rows = (n_heads + n_kv_heads) * d_head
    return n_layers * rows * (d_model + (1 if bias else 0)) * bytes_per_value


ex_pythia_mb = ex_query_key_bytes(12, 768, 12, 64, 12, 2, True) / 1e6
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "ex-09-1-check", "locked": true, "points": 2, "schema_version": 3, "solution": false}
for shape in ((12, 768, 12, 64, 12), (28, 1792, 28, 64, 28), (4, 64, 4, 16, 2)):
    for bytes_per_value, bias in ((4, False), (2, True)):
        expected = public.query_key_bytes(*shape[:4], n_kv_heads=shape[4], bytes_per_value=bytes_per_value, bias=bias)
        assert ex_query_key_bytes(*shape, bytes_per_value, bias) == expected, (
            f"ex_query_key_bytes{(*shape, bytes_per_value, bias)} = {ex_query_key_bytes(*shape, bytes_per_value, bias)}:"
            " count the rows of both weights, d_model values per row, one bias per row"
        )
expected_mb = public.query_key_bytes(12, 768, 12, 64, bytes_per_value=2, bias=True) / 1e6
assert abs(ex_pythia_mb - expected_mb) < 1e-9, f"ex_pythia_mb = {ex_pythia_mb}: bytes divided by a million"
print("ex_query_key_bytes agrees with the package on every shape, and ex_pythia_mb with it")

# %% [markdown]
# ## What to take away
#
# * A matched pair, an encoder and a decoder that differ only in the objective and the mask, tests the paper's claim
#   directly; a population of unrelated models mixes the objective with everything else that differs between them.
# * Checkpoints trained by others are an experiment that costs no training: a series of revisions, read by byte
#   ranges, shows the scores emerge over hundreds of billions of tokens, with an interval over seeds where the
#   series has seeds.
# * Continued training with the other objective asks whether $W_{qk}$ follows the objective it is trained on now or
#   keeps the structure of the one it started with.
# * A verdict rests on its units: six sizes, five or ten seeds. One run per setting, as in the paper, can describe
#   but cannot test.

# %% [markdown]
# ## Knobs to try
#
# * `source = "hub"` on a machine with hub access: the public series of `trajectories`, `pairs` and `crosses`
#   (`make notebook NB=09 PROFILE=paper`); `max_checkpoints` sets how many checkpoints of each seed are read.
# * `trajectories = ["pythia-160m"]`: one series of ten seeds alone; a quicker first look at the hub.
# * `continue_steps`: how long the local runs are trained on with the other objective; does a longer continuation
#   move the decoder's symmetry further?
# * `n_null_draws`: more untrained stacks for each null (a steadier 95% range, a slower notebook).
