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
# # 02 · The two scores: definitions, invariants and null distributions
#
# *Companion to Saponati et al., ICML 2025 (arXiv:2502.10927): the symmetry and directionality scores used
# in every figure of the paper.*
#
# A score is only as useful as our sense of what it does *not* measure and of what it reads on a matrix
# with no structure at all. This notebook states the two definitions, checks their invariances, measures
# their null distributions for random matrices and random factor products, shows how directionality
# depends on its threshold, and compares scoring each head with scoring the sum over heads.
#
# It follows notebook 01 and comes before every notebook that reads a score against its null: the
# pretrained models (03), the gradient toys (04) and the training runs (05 to 07).

# %% [markdown]
# **Learning goals.** After this notebook you can:
#
# * compute both scores from their definitions in the paper's convention, and convert the authors' stored one;
# * say which transformations of a matrix leave each score unchanged, and why directionality depends on the
#   coordinate basis while symmetry does not;
# * read a score against the null distribution of its shape (width, head count, one head or the layer's sum);
# * judge how much directionality depends on its threshold, and why per-head and summed scores differ.

# %% tags=["parameters"]
seed = 0  # seeds every random draw in this notebook
d_models = [64, 128, 256, 512]  # model widths for the null distributions
n_heads = [1, 4, 8]  # head counts for the factor-product nulls; d_head is d_model / H
n_draws = 50  # draws per null ensemble
num_stds = [0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0]  # directionality thresholds to sweep
sweep_d_model = 256  # width of the matrices in the threshold sweep
tying_heads = 4  # heads in the per-head versus summed comparison
tying_d_model = 128  # width in the per-head versus summed comparison
results_dir = None  # where the dataset goes; None: results/ of the work folder (attnstruct.work)
figures_dir = None  # where the figures go; None: figures/ of the work folder

# %%
import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns
import torch

import attnstruct as at
from attnstruct import notebooks, random_matrices, results, work
from attnstruct.analyses import nb02_scores as two_scores
from attnstruct.analyses import null_ensembles
from attnstruct.report import plotting, prose

plotting.set_style()
results_dir, figures_dir = work.output_dirs(results_dir, figures_dir)
parameters = notebooks.notebook_parameters("02_scores", globals())  # recorded with the dataset

# %% [markdown]
# ## 1. Definitions
#
# For $M \in \mathbb{R}^{d\times d}$ with symmetric part $M_s = \frac12(M+M^\top)$ and skew part
# $M_n = \frac12(M - M^\top)$:
#
# $$\text{symmetry}(M) = \frac{\|M_s\|_F^2 - \|M_n\|_F^2}{\|M\|_F^2} = \frac{\operatorname{tr}(M M)}{\operatorname{tr}(M^\top M)} \in [-1, 1].$$
#
# With row norms $r_i = \|M_{i,:}\|$, column norms $c_j = \|M_{:,j}\|$, thresholds
# $\tau_r = \bar r + k\, \mathrm{std}(r)$ and $\tau_c = \bar c + k\,\mathrm{std}(c)$ ($k$ = `num_std` = 2, unbiased std),
#
# $$\text{directionality}(M) = \frac{R - C}{R + C},\quad R = \sum_i (r_i - \tau_r)_+,\quad C = \sum_j (c_j - \tau_c)_+ ,$$
#
# and 0 when $R = C = 0$. Negative values mean column dominance.
#
# These are the values the paper plots. The authors' code *stores* $\|M_s\|^2/\|M\|^2 \in [0,1]$ and the
# opposite sign of directionality and converts at plot time; `attnstruct` returns the plotted convention
# and offers the stored one only by keyword (`convention="raw"`). The two are related by
# $s_\text{paper} = 2 s_\text{raw} - 1$ and $d_\text{paper} = -d_\text{raw}$. The table scores one matrix with three
# dominant columns both ways; the two lines under it check the two relations on it.

# %%
conventions = two_scores.conventions(seed)
conventions.round(4)

# %% tags=["nbval-check-output"]
paper, raw = conventions["paper (default)"], conventions["raw (authors' storage)"]
print(f"symmetry: paper = 2 raw - 1: {abs(paper['symmetry'] - (2 * raw['symmetry'] - 1)) < 1e-12}")
print(f"directionality: paper = -raw: {abs(paper['directionality'] + raw['directionality']) < 1e-12}")

# %% [markdown]
# ## 2. Invariants
#
# Which transformations leave the scores unchanged tells what they measure.
#
# * **Scale** $cM$, $c \ne 0$: both scores are ratios of quadratic (symmetry) or linear (directionality)
#   quantities, so both are unchanged, also for $c < 0$.
# * **Transpose** $M^\top$: symmetry unchanged; rows and columns swap, so directionality flips sign.
# * **Permutation similarity** $PMP^\top$ (relabelling the coordinates): both unchanged.
# * **Orthogonal similarity** $QMQ^\top$ (a rotation of the embedding space): symmetry unchanged, because
#   $\operatorname{tr}(M M)$ and $\|M\|_F$ are; directionality **changes**, because row and column norms
#   are tied to the coordinate axes. Directionality therefore assumes that the residual stream's
#   coordinate basis means something (it does in trained models, where a few directions carry outsized
#   activations), while symmetry is a property of the bilinear form itself.
#
# The table applies each transformation to one matrix with three dominant columns ($d = 128$), with a random
# permutation $P$ and a random rotation $Q$, and scores the results; the four lines under it check the claims
# above, each against the matrix $M$ itself, to rounding.

# %%
invariants = two_scores.invariants(seed)
invariants.round(4)

# %% tags=["nbval-check-output"]
scalings, permutation, rotation = ["3 M", "-0.5 M"], ["P M P^T (permutation)"], ["Q M Q^T (rotation)"]
symmetric_ok = two_scores.unchanged(invariants, "symmetry", invariants.index)
print(f"symmetry unchanged by scaling, transpose, permutation, rotation: {symmetric_ok}")
direction_ok = two_scores.unchanged(invariants, "directionality", scalings + permutation)
print(f"directionality unchanged by scaling and permutation: {direction_ok}")
print(f"directionality flips sign under transpose: {two_scores.unchanged(invariants, 'directionality', ['M^T'], -1.0)}")
print(f"directionality changes under rotation: {not two_scores.unchanged(invariants, 'directionality', rotation)}")

# %% [markdown]
# ## 3. Null distributions: what does "no structure" score?
#
# Three ensembles over model widths $d$:
#
# * `gaussian`: $d \times d$ with i.i.d. normal entries;
# * `factors H=h, layer`: the layer matrix $W_{qk} = \sum_h W_q^h (W_k^h)^\top$ (in `nn.Linear` weights
#   `sum_h W_q[h].T @ W_k[h]`) with independent Gaussian factors and $d_{head} = d/h$, which is what an
#   untrained layer scores;
# * `factors H=h, head`: one head's $W_{qk}^h = W_q^h (W_k^h)^\top$ from the same draws (rank $d/h$).
#
# Each ensemble is drawn `n_draws` times at every width in `d_models` and, for the factor products, every head
# count in `n_heads`. The table gives the quartiles over the draws of both scores, one row per ensemble and width
# (a width that a head count does not divide has none). These are the distributions every later notebook reads a
# score against: a value is evidence of structure only where such draws rarely reach it.

# %%
null_ds = null_ensembles.null_distribution(d_models, n_heads, n_draws, seed)
null_ensembles.null_quartiles(null_ds).round(3)

# %% [markdown]
# The figure has one row per score and one column per matrix: the layer's sum over heads (left) and a single
# head (right). A point is the median over the draws and its bar the interquartile range; head counts are set
# side by side at each width so that no bar hides another, and the i.i.d. Gaussian ensemble is the grey
# reference in both columns. A width that a head count does not divide has no point, and for $H = 1$ the head
# is the layer.

# %% tags=["hide-input"]
head_counts = sorted({int(h) for h in null_ds.n_heads.values if h > 0})
head_colors = dict(zip(head_counts, sns.color_palette("viridis", len(head_counts))))
widths = null_ds.d_model.values
positions = np.arange(len(widths))
fig, axes = plt.subplots(2, 2, figsize=(11, 6.8), sharex=True, sharey="row")
for row, var in enumerate(("symmetry", "directionality")):
    for col, scope in enumerate(("layer", "head")):
        ax = axes[row, col]
        series = [("gaussian", "i.i.d. Gaussian", plotting.NEUTRAL_COLOR, "D")] + [
            (f"factors H={h}, {scope}", f"H = {h}", head_colors[h], "o") for h in head_counts
        ]
        offsets = np.linspace(-0.3, 0.3, len(series))
        for offset, (ens, label, color, marker) in zip(offsets, series):
            q25, q50, q75 = (null_ds[var].sel(ensemble=ens).quantile(q, dim="draw").values for q in (0.25, 0.5, 0.75))
            has = np.isfinite(q50)
            ax.errorbar(
                positions[has] + offset,
                q50[has],
                yerr=[q50[has] - q25[has], q75[has] - q50[has]],
                fmt=marker,
                ls="-",
                lw=0.8,
                ms=5,
                capsize=3,
                color=color,
                label=label,
            )
        ax.axhline(0, color="black", lw=0.8)
        ax.set_xticks(positions, [str(w) for w in widths])
        if row == 1:
            ax.set_xlabel("$d_{model}$")
        if col == 0:
            ax.set_ylabel(f"{var}\n(median, IQR)")
axes[0, 0].set_title("the layer: $W_{qk}$ summed over heads")
axes[0, 1].set_title("one head: $W_{qk}^h$")
handles, labels = axes[0, 0].get_legend_handles_labels()
fig.legend(handles, labels, loc="center left", bbox_to_anchor=(0.91, 0.5), title="ensemble")
widest = two_scores.widest_spread(null_ds)
plotting.message_title(
    fig,
    prose.fill(
        "Random matrices, d = {width}: symmetry's interquartile range is at most {symmetry_iqr} wide, "
        "directionality's up to {directionality_iqr}",
        widest,
    ),
)
plotting.savefig(fig, figures_dir / "02_null_distributions")
plt.show()

# %% [markdown]
# Symmetry of unstructured matrices concentrates at 0, and its spread shrinks as $d$ grows: already at
# $d = 64$ the quartiles are within a few hundredths of 0. Directionality is far noisier: whether a chance
# outlier row or column crosses the threshold decides the score. Its interquartile range is wide at small
# widths and narrows only slowly (the table above, and the ranges measured below). A single layer's
# directionality inside that range is therefore no evidence of column dominance; the paper's claims rest on
# medians over many layers and models, and that is how they should be read (notebook 03 compares each
# pretrained model's median over layers with the null of that median).
#
# The printout gives directionality's interquartile range at one width for every ensemble; the sentence under it
# the same ranges at every width, next to symmetry's.

# %%
d_ref = 256 if 256 in d_models else d_models[len(d_models) // 2]
print(f"directionality IQR at d_model={d_ref}:")
for ensemble, row in two_scores.directionality_spread(null_ds, d_ref).iterrows():
    print(f"  {ensemble:<22} [{row.low:+.2f}, {row.high:+.2f}]")
spread = two_scores.spread_by_width(null_ds)
prose.say(
    "Measured in this run ({draws} per cell), the interquartile range of one random layer's directionality lies "
    "within {layer_directionality} (the lowest first and highest third quartile over the layer ensembles, "
    "H = {heads}); for an i.i.d. Gaussian matrix it is {gaussian_directionality}. The layer ensembles' symmetry: "
    "{layer_symmetry}.",
    spread,
)

# %% [markdown]
# ## 4. How much does directionality depend on its threshold?
#
# The threshold mean + $k$ std with $k = 2$ is a choice. We sweep $k$ for Gaussian matrices and for
# Gaussian matrices with three planted outlier columns (or rows) scaled by a gain. In the figure, each line is the
# median over the draws of one ensemble and its band the interquartile range; the dotted vertical line marks the
# paper's threshold. Purple lines plant columns (negative directionality expected), orange lines rows (positive),
# and the grey line is the unstructured Gaussian matrix.

# %%
sweep = two_scores.num_std_sweep(sweep_d_model, num_stds, n_draws, seed)

# %% tags=["hide-input"]
fig, ax = plt.subplots(figsize=(7, 4.2))
colors = {"gaussian": plotting.NEUTRAL_COLOR}
colors.update(
    {
        e: c
        for e, c in zip(
            [e for e in sweep.ensemble.values if e.startswith("columns")],
            sns.light_palette(plotting.DECODER_COLOR, 5)[2:],
        )
    }
)
colors.update(
    {
        e: c
        for e, c in zip([e for e in sweep.ensemble.values if e.startswith("rows")], sns.color_palette("Oranges", 5)[2:])
    }
)
for ens in sweep.ensemble.values:
    cell = sweep.directionality.sel(ensemble=ens)
    q25, q50, q75 = (cell.quantile(q, dim="draw") for q in (0.25, 0.5, 0.75))
    ax.plot(sweep.num_std, q50, marker="o", color=colors[ens], label=ens)
    ax.fill_between(sweep.num_std, q25, q75, color=colors[ens], alpha=0.15)
ax.axvline(2.0, color="black", ls=":", lw=1)
ax.axhline(0, color="black", lw=0.8)
ax.set_xlabel("threshold num_std (the paper uses 2)")
ax.set_ylabel("directionality")
ax.set_title(f"Directionality against its threshold ($d$ = {sweep_d_model})", fontsize=11)
extremes = two_scores.threshold_extremes(sweep)
plotting.message_title(
    fig,
    prose.fill(
        "At every threshold, planted columns score at most {columns} and planted rows at least {rows}; the Gaussian "
        "median stays within {gaussian}",
        extremes,
    ),
)
ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5))
plotting.savefig(fig, figures_dir / "02_threshold_sensitivity")
plt.show()

# %% [markdown]
# For planted structure the sign is stable across thresholds, and higher thresholds only sharpen it
# towards $\pm 1$. For Gaussian matrices the median stays near 0, but the spread grows with the threshold:
# when only one chance outlier crosses a high threshold, it alone sets the score to $\pm 1$. A strong
# outlier also raises the std that sets the threshold, so a larger gain does not always give a more
# extreme score at $k = 2$ (compare the gains in the plot). The sign of directionality does not hinge on
# the choice $k = 2$; its magnitude does.
#
# ## 5. Per head or summed over heads?
#
# The paper's tables score the layer matrix $\sum_h W_q^h (W_k^h)^\top$; the authors' training logs scored
# each head. To see how the two relate, we interpolate between a symmetric initialisation and
# independent factors: $W_q = \cos\theta\, W_k + \sin\theta\, G$ with $G$ independent of $W_k$. At $\theta = 0$
# every head's $W_q^h = W_k^h$, at a right angle the two are unrelated, and in between each head is partly
# symmetric. The figure gives the median symmetry of the layer's sum and of single heads against $\theta$; the
# printed line the median gap between the layer and the mean of its heads.

# %%
thetas = np.linspace(0, np.pi / 2, 7)
tying = two_scores.tying_sweep(thetas, tying_heads, tying_d_model, n_draws, seed)

# %% tags=["hide-input"]
fig, ax = plt.subplots(figsize=(6.5, 4))
ax.plot(
    np.degrees(tying.theta),
    tying.symmetry.median("draw"),
    marker="o",
    color=plotting.ENCODER_COLOR,
    label="layer (sum over heads)",
)
ax.plot(
    np.degrees(tying.theta),
    tying.head_symmetry.median(("draw", "head")),
    marker="s",
    ls="--",
    color=plotting.NEUTRAL_COLOR,
    label="single heads",
)
ax.set_xlabel(r"$\theta$ (degrees): 0 = $W_q = W_k$, 90 = independent")
ax.set_ylabel("symmetry (median)")
ax.set_title(f"Per head versus summed ({tying_heads} heads, $d$ = {tying_d_model})", fontsize=11)
gap = two_scores.head_layer_gap(tying)
plotting.message_title(
    fig,
    prose.fill(
        "Partly tied factors: the summed layer is up to {largest} more symmetric than its heads"
        if gap.layer_leads
        else "The summed layer is never more symmetric than its heads (largest gap {largest})",
        gap,
    ),
)
ax.legend()
plotting.savefig(fig, figures_dir / "02_head_vs_layer")
plt.show()

# %%
print("median (layer - mean head) symmetry by theta:", np.round(two_scores.layer_minus_head(tying).values, 3))

# %% [markdown]
# Both start at exactly 1 for $W_q = W_k$ and reach 0 for independent factors, but in between the summed
# layer matrix is *more* symmetric than its heads: the heads' skew-symmetric parts are independent and
# partly cancel in the sum, while their symmetric parts (all positive semi-definite contributions from
# $W_k^h (W_k^h)^\top$) add up. Per-head and per-layer scores are different quantities, and comparisons must
# not mix them.
#
# ## 6. Save
#
# One dataset holds the null ensembles, the threshold sweep, the tying sweep and the invariants table, with the
# parameters and library versions that produced them in its attributes; notebook 03 and the later notebooks draw
# their own nulls with the same generators, shape by shape.

# %%
dataset = two_scores.result_dataset(null_ds, sweep, tying, invariants)
dataset.attrs = results.provenance_attrs(
    parameters=parameters,
    scored_matrix=(
        "symmetry/directionality: random d_model x d_model matrices of each ensemble (gaussian; "
        "sum_h W_q^h (W_k^h)^T, in nn.Linear weights sum_h W_q[h]^T W_k[h], or one head's W_q^h (W_k^h)^T, with "
        "Gaussian factors); sweep_*: Gaussian and "
        "planted-outlier matrices; tying_*: partly tied factors; invariant_*: transforms of one matrix"
    ),
    title="02 scores: invariants, null distributions, threshold sensitivity, per head versus summed",
)
results.save_dataset(dataset, results_dir / "02_scores.nc")
dataset

# %% [markdown]
# ## Exercises
#
# Each exercise has a cell to complete and a locked check cell that runs it on small matrices of its own (not
# the parameters above) and compares with `attnstruct`. Names you define start with `ex_`.
#
# ### Exercise 02.1: symmetry from its definition
#
# > **Difficulty** 2/5 · **Importance** 5/5 · **About** 10 min
#
# Write `ex_symmetry(m)`, the symmetry score of a square matrix from the definition of section 1, through
# $M_s$ and $M_n$ (not through `attnstruct`). The check compares it with `attnstruct.scores(m).symmetry` on
# the five example matrices of `random_matrices.example_matrix`. Read the docstring of `attnstruct.scores` first: the
# paper's score lies in $[-1, 1]$, while the authors' code stores $\|M_s\|^2 / \|M\|^2$ in $[0, 1]$.


# %% nbgrader={"grade": false, "grade_id": "ex-02-1", "locked": false, "schema_version": 3, "solution": true}
def ex_symmetry(m):
    """Symmetry score (paper convention) of a square matrix m [d, d]."""
    ### BEGIN SOLUTION
    m_s, m_n = (m + m.T) / 2, (m - m.T) / 2
    return float(((m_s**2).sum() - (m_n**2).sum()) / (m**2).sum())
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex-02-1-check", "locked": true, "points": 2, "schema_version": 3, "solution": false}
chk_gen = random_matrices.generator(21)
for chk_kind in random_matrices.KINDS:
    chk_m = random_matrices.example_matrix(chk_kind, 24, chk_gen)
    chk_got = float(ex_symmetry(chk_m))
    chk_want = float(at.scores(chk_m).symmetry)
    chk_raw = float(at.scores(chk_m, convention="raw").symmetry)
    assert not (abs(chk_got - chk_raw) < 1e-9 < abs(chk_want - chk_raw)), (
        f"{chk_kind}: you return the authors' raw ||M_s||^2 / ||M||^2 in [0, 1], not the paper's score in [-1, 1]"
    )
    assert abs(chk_got - chk_want) < 1e-10, f"{chk_kind}: yours {chk_got:+.6f}, attnstruct {chk_want:+.6f}"
print("your symmetry score matches attnstruct on every example")

# %% [markdown]
# ### Exercise 02.2: directionality from its definition
#
# > **Difficulty** 3/5 · **Importance** 5/5 · **About** 15 min
#
# Write `ex_directionality(m, num_std)` from the definition of section 1: Euclidean row and column norms,
# thresholds mean + `num_std` times the (unbiased) std of each set of norms, the summed excesses $R$ and $C$,
# and $(R - C)/(R + C)$, or 0 when both excesses are 0. The check compares it with
# `attnstruct.directionality_score` on the example matrices for several thresholds.
#
# Hint: `torch.linalg.vector_norm(m, dim=...)`; `Tensor.std()` is unbiased by default; `clamp_min(0)` keeps the
# positive parts.


# %% nbgrader={"grade": false, "grade_id": "ex-02-2", "locked": false, "schema_version": 3, "solution": true}
def ex_directionality(m, num_std=2.0):
    """Directionality score (paper convention: negative = column dominance) of a square matrix m [d, d]."""

    ### BEGIN SOLUTION
    def excess(norms):
        return (norms - (norms.mean() + num_std * norms.std())).clamp_min(0).sum()

    rows = excess(torch.linalg.vector_norm(m, dim=1))
    cols = excess(torch.linalg.vector_norm(m, dim=0))
    return 0.0 if rows + cols == 0 else float((rows - cols) / (rows + cols))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex-02-2-check", "locked": true, "points": 3, "schema_version": 3, "solution": false}
chk_gen = random_matrices.generator(22)
for chk_kind in random_matrices.KINDS:
    chk_m = random_matrices.example_matrix(chk_kind, 24, chk_gen)
    for chk_k in (1.0, 2.0, 3.0):
        chk_got = float(ex_directionality(chk_m, num_std=chk_k))
        chk_want = float(at.directionality_score(chk_m, num_std=chk_k))
        chk_raw = float(at.directionality_score(chk_m, num_std=chk_k, convention="raw"))
        assert not (abs(chk_got - chk_raw) < 1e-9 < abs(chk_want - chk_raw)), (
            f"{chk_kind}: your sign is the authors' raw convention (C - R)/(C + R); the paper's is (R - C)/(R + C)"
        )
        assert abs(chk_got - chk_want) < 1e-9, (
            f"{chk_kind}, num_std = {chk_k}: yours {chk_got:+.6f}, attnstruct {chk_want:+.6f}"
        )
print("your directionality matches attnstruct on every example and threshold")

# %% [markdown]
# ### Exercise 02.3: symmetric and directional at once
#
# > **Difficulty** 3/5 · **Importance** 3/5 · **About** 15 min
#
# Any symmetric matrix has directionality exactly 0: its $i$-th row is its $i$-th column, so the row norms are
# the column norms and $R = C$. Yet the two scores measure different things. Write
# `ex_symmetric_yet_directional(d)` returning a $d \times d$ matrix, for any $d \ge 8$, whose symmetry is above
# `0.5` **and** whose directionality is below `-0.5`: mostly symmetric, yet column-dominated. The check scores
# your matrices with `attnstruct.scores` at a few sizes.
#
# Hint: start from a symmetric matrix whose rows all have the same norm, then add a non-symmetric part that
# makes one column heavy, spread over many rows, with less energy than the symmetric part has.


# %% nbgrader={"grade": false, "grade_id": "ex-02-3", "locked": false, "schema_version": 3, "solution": true}
def ex_symmetric_yet_directional(d):
    """A d x d matrix (d >= 8) with symmetry above 0.5 and directionality below -0.5."""
    ### BEGIN SOLUTION
    m = torch.eye(d, dtype=torch.float64)  # symmetric, every row and column of norm 1
    m[1:, 0] += (d / 2 / (d - 1)) ** 0.5  # column 0 gains energy d/2 spread evenly over rows 1..d-1
    return m  # ||M||^2 = 3d/2 and tr(MM) = d: symmetry 2/3; one outlying column: directionality -1
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "ex-02-3-check", "locked": true, "points": 3, "schema_version": 3, "solution": false}
for chk_d in (8, 32, 100):
    chk_m = torch.as_tensor(ex_symmetric_yet_directional(chk_d), dtype=torch.float64)
    assert tuple(chk_m.shape) == (chk_d, chk_d), f"d = {chk_d}: expected a {chk_d} x {chk_d} matrix"
    chk_s = at.scores(chk_m)
    assert float(chk_s.symmetry) > 0.5, f"d = {chk_d}: symmetry {float(chk_s.symmetry):+.3f}, not above 0.5"
    assert float(chk_s.directionality) < -0.5, (
        f"d = {chk_d}: directionality {float(chk_s.directionality):+.3f}, not below -0.5"
    )
print("your matrices are mostly symmetric and column-dominated at every size")

# %% [markdown]
# ### Exercise 02.4: predict the invariances
#
# > **Difficulty** 2/5 · **Importance** 3/5 · **About** 10 min
#
# For each transformation of a column-dominated matrix $M$, predict what happens to each score: `"same"`,
# `"negated"` or `"changed"`. Set `ex_predictions` to a dictionary from the transformation's name to a pair
# (symmetry, directionality). The names: `"-2 M"`, `"M^T"`, `"P M P^T"` (a permutation $P$ of the coordinates
# on both sides), `"Q M Q^T"` (a random orthogonal $Q$) and `"P M"` (rows permuted, columns left alone), e.g.
# `ex_predictions = {"-2 M": ("same", "changed"), ...}`. Reason first from the definitions, and only then
# compare with section 2. The check measures both scores on random column-dominated matrices before and after
# each transformation.

# %% nbgrader={"grade": false, "grade_id": "ex-02-4", "locked": false, "schema_version": 3, "solution": true}
### BEGIN SOLUTION
ex_predictions = {
    "-2 M": ("same", "same"),  # both scores are ratios, unchanged by any nonzero scale
    "M^T": ("same", "negated"),  # tr(M M) and ||M|| are transpose-invariant; rows and columns swap
    "P M P^T": ("same", "same"),  # a relabelling of the coordinates permutes the row and column norms
    "Q M Q^T": ("same", "changed"),  # traces are rotation-invariant; row/column norms are tied to the axes
    "P M": ("changed", "same"),  # row norms permuted, columns' norms kept; but the pairing of M_ij and M_ji breaks
}
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "ex-02-4-check", "locked": true, "points": 2, "schema_version": 3, "solution": false}
chk_names = ("-2 M", "M^T", "P M P^T", "Q M Q^T", "P M")
assert isinstance(ex_predictions, dict) and set(ex_predictions) == set(chk_names), (
    f"ex_predictions needs exactly the keys {chk_names}"
)
chk_gen = random_matrices.generator(24)
chk_before, chk_after = [], {name: [] for name in chk_names}
for _ in range(5):
    chk_m = random_matrices.example_matrix("columns", 32, chk_gen)
    chk_p = torch.eye(32, dtype=torch.float64)[torch.randperm(32, generator=chk_gen)]
    chk_q, _ = torch.linalg.qr(torch.randn(32, 32, generator=chk_gen, dtype=torch.float64))
    chk_transformed = {
        "-2 M": -2 * chk_m,
        "M^T": chk_m.T,
        "P M P^T": chk_p @ chk_m @ chk_p.T,
        "Q M Q^T": chk_q @ chk_m @ chk_q.T,
        "P M": chk_p @ chk_m,
    }
    chk_before.append([float(v) for v in at.scores(chk_m)])
    for name, chk_t in chk_transformed.items():
        chk_after[name].append([float(v) for v in at.scores(chk_t)])


def chk_measured(before, after):
    """'same', 'negated' or 'changed' over all draws (to rounding)."""
    if np.allclose(after, before, rtol=0, atol=1e-9):
        return "same"
    return "negated" if np.allclose(after, -np.asarray(before), rtol=0, atol=1e-9) else "changed"


chk_before = np.array(chk_before)
for name in chk_names:
    for index, score in enumerate(("symmetry", "directionality")):
        chk_found = chk_measured(chk_before[:, index], np.array(chk_after[name])[:, index])
        assert tuple(ex_predictions[name])[index] == chk_found, (
            f"{name}: your prediction for {score} does not match what attnstruct measures; go back to its definition"
        )
print("every prediction matches the measurement")

# %% [markdown]
# ## What to take away
#
# * Symmetry is a property of the bilinear form itself: it is unchanged by any rotation of the embedding space.
#   Directionality reads row and column norms, so it is tied to the coordinate axes and assumes they mean
#   something.
# * The two scores are independent views: a symmetric matrix always has directionality 0, yet a mostly symmetric
#   matrix can be column-dominated (the third exercise builds one).
# * A score means nothing without its null: unstructured matrices put symmetry near 0 with a spread that shrinks
#   with the width, while directionality is noisy at every width, so it is read against its null and over many
#   layers.
# * Per-head and summed scores are different quantities, and the sign of directionality, not its size, is what
#   survives a change of threshold.

# %% [markdown]
# ## Knobs to try
#
# * `n_draws` up (e.g. 500): the medians and interquartile bars of the null figure settle and the jitter of the
#   medians from one width to the next fades; the cost grows linearly.
# * `d_models` with a larger width added (e.g. 1024, slow): symmetry's bars keep shrinking towards 0, while
#   directionality's narrow only slowly.
# * `num_stds` extended upwards (e.g. 5 or 6): for Gaussian matrices the spread of directionality keeps growing
#   towards $\pm 1$, while the planted ensembles keep their sign.
# * `tying_heads` up at fixed `tying_d_model` (it must divide it): each head gets a lower rank, and between the
#   two ends the summed layer's lead over its heads' symmetry grows.
