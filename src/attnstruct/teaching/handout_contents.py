"""What the handouts say, read from a build: the slides' message titles, the cheat sheet's rows, the quiz.

``attnstruct.teaching.handouts`` writes the pages; this module holds their content, computed from the executed
notebooks (``<build>/notebooks/NN_*.ipynb``), the figures (``figures/*.png``) and the datasets (``results/*.nc``)
that ``make reproduce`` wrote. Every number comes from a dataset through the package's own functions
(:func:`attnstruct.analyses.pretrained_scores.stack_summary`, :func:`attnstruct.analyses.text_runs.final_median`,
...) and every verdict is the one the notebook stored in its dataset's ``verdicts`` attribute (read back as an
:class:`attnstruct.stats.Effect`), never decided here again.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from html import escape
from os.path import relpath
from pathlib import Path

import pandas as pd
import xarray as xr

from .. import stats
from ..analyses import (
    findings as companion_findings,
)
from ..analyses import (
    nb09_dynamics_at_scale,
    null_ensembles,
    paper_comparison,
    pretrained_scores,
    text_runs,
)
from ..report.prose import count, percent, signed


class HandoutError(Exception):
    """Bad input to the handouts: no executed notebooks, an unreadable notebook or dataset, a failed print."""


# The experiments with a headline claim, and that claim in the notebook's dataset (its `verdicts` attribute), by the
# name its analysis declares.
EXPERIMENTS = {
    "03_pretrained_models": "Pretrained stacks (03)",
    "04_gradient_structure": "Toy gradient training (04)",
    "05_training_dynamics": "Training from scratch (05)",
    "06_symmetric_init": "Symmetric initialisation (06)",
    "07_vision": "Vision objectives (07)",
    "08_model_sweep": "Model sweep (08)",
}
HEADLINES = {h.notebook: h.claim for h in companion_findings.HEADLINES if h.notebook in EXPERIMENTS}
"""The companion's headline claims (:data:`attnstruct.analyses.findings.HEADLINES`), by notebook."""


@dataclass
class Build:
    """A build folder: which notebooks ran (papermill finished without an exception), and its datasets, read once."""

    root: Path
    ran: dict[str, bool]  # notebook stem -> whether its executed copy finished
    _datasets: dict[str, xr.Dataset | None] = field(default_factory=dict)

    def notebook_dataset(self, notebook: str) -> xr.Dataset | None:
        """``results/<notebook>.nc`` (None when the build has none); :class:`HandoutError` when it cannot be read."""
        if notebook not in self._datasets:
            from ..results import load_dataset

            path = self.root / "results" / f"{notebook}.nc"
            try:
                self._datasets[notebook] = load_dataset(path) if path.is_file() else None
            except Exception as err:  # noqa: BLE001 - any unreadable dataset is bad input, named in one line
                raise HandoutError(f"dataset {path} cannot be read: {type(err).__name__}") from None
        return self._datasets[notebook]

    def figure(self, stem: str) -> Path | None:
        """``figures/<stem>.png``, or None when the build has no such figure."""
        path = self.root / "figures" / f"{stem}.png"
        return path if path.is_file() else None


def read_build(build_dir: Path) -> Build:
    """The build at ``build_dir``: its executed notebooks (at least one) and whether each finished."""
    import nbformat

    nb_dir = Path(build_dir) / "notebooks"
    executed = sorted(nb_dir.glob("[0-9][0-9]_*.ipynb")) if nb_dir.is_dir() else []
    if not executed:
        raise HandoutError(f"no executed notebooks in {nb_dir}; run `make reproduce` (or `attnstruct reproduce`) first")
    ran = {}
    for path in executed:
        try:
            meta = nbformat.read(path, as_version=4).metadata.get("papermill", {})
        except Exception as err:  # noqa: BLE001 - any unreadable file is bad input, named in one line
            raise HandoutError(f"executed notebook {path} cannot be read: {type(err).__name__}") from None
        ran[path.stem] = meta.get("duration") is not None and not meta.get("exception")
    return Build(Path(build_dir), ran)


def stored_effects(ds: xr.Dataset) -> dict[str, stats.Effect]:
    """The effects a notebook decided and stored in its dataset (``attrs["verdicts"]``, the JSON of
    :func:`attnstruct.stats.verdict_table`), by claim; their verdicts are the notebook's, read back unchanged."""
    table = json.loads(ds.attrs.get("verdicts", "{}") or "{}")
    names = set(stats.Effect.__dataclass_fields__) - {"claim", "null"}
    out = {}
    for claim, row in table.items():
        row = {k: (math.nan if v is None else v) for k, v in row.items()}
        null = None
        if int(row.get("n_null", 0) or 0) > 0:
            keys = ("null_value", "null_percentile", "null_z", "null_low", "null_high", "null_median")
            null = stats.NullComparison(*(float(row[k]) for k in keys), int(row["n_null"]))
        fields = {k: row[k] for k in names if k in row}
        out[claim] = stats.Effect(claim=claim, null=null, **{**fields, "n": int(fields["n"])})
    return out


def headline(build: Build, notebook: str) -> stats.Effect | None:
    """The stored effect of ``notebook``'s headline claim (:data:`HEADLINES`), or None when the build lacks it."""
    ds = build.notebook_dataset(notebook)
    return None if ds is None else stored_effects(ds).get(HEADLINES[notebook])


def short(effect: stats.Effect) -> str:
    """``+0.07 (95% CI [+0.03, +0.11], n = 5 seeds): holds``: the estimate, its interval and the stored verdict."""
    where = f"{effect.level:.0%} CI [{signed(effect.low)}, {signed(effect.high)}], " if effect.n > 1 else ""
    digits = 3 if abs(effect.estimate) < 0.05 else 2
    return f"{signed(effect.estimate, digits)} ({where}n = {count(effect.n, effect.unit)}): {effect.verdict}"


# ------------------------------------------------------------------------------------------------- the slides

Notes = tuple[tuple[str, str], ...]  # the questions students ask on a slide, each with its answer


@dataclass
class Slide:
    """One figure slide: its notebook and figure, a message title, the number line under the figure and where its
    numbers come from; ``missing`` says which notebook to run when the build lacks the figure or the dataset.

    ``values`` are the statistics the title and the number line print, by name: every signed number on the slide is
    one of them, computed from the dataset the way the figure under it draws it (a verdict is the notebook's stored
    word, never a second estimate). ``notes`` are the speaker notes."""

    notebook: str
    figure: str
    title: str
    number: str = ""
    source: str = ""
    missing: str = ""
    image: Path | None = None
    values: dict[str, float] = field(default_factory=dict)
    notes: Notes = ()


@dataclass(frozen=True)
class Equation:
    """An equation slide: a title, the equations (``math``: MathML, typeset by the browser, nothing loaded), a
    line of text under them and the speaker notes."""

    key: str
    title: str
    math: str
    text: str
    notes: Notes


def _stacks(ds: xr.Dataset) -> pd.DataFrame:
    """Encoder and decoder self-attention stacks: count and median of their median symmetry over layers."""
    return paper_comparison.group_medians(pretrained_scores.stack_summary(ds)).set_index("stack")


def _verdict(build: Build, notebook: str) -> str:
    """``verdict of its headline claim (CLAIM): holds, n = 5 seeds``: the stored word, without a second estimate."""
    effect = headline(build, notebook)
    if effect is None:
        return "no stored verdict"
    return f"verdict of the headline claim ({effect.claim}): {effect.verdict}, n = {count(effect.n, effect.unit)}"


def _s01(build: Build):
    s = float(build.notebook_dataset("01_bilinear_form").symmetry.sel(layer=0))
    title = (
        f"An untrained layer's W_qk splits into a symmetric and a skew part: the symmetric part carries "
        f"{percent((1 + s) / 2)} of its energy, the skew part {percent((1 - s) / 2)}"
    )
    return title, f"symmetry of layer 0: {signed(s)}", "symmetry (layer 0)", {"symmetry of layer 0": s}


def _s02(build: Build):
    null = build.notebook_dataset("02_scores")[["symmetry", "directionality"]]
    d = int(null.d_model.max())
    q = null_ensembles.null_quartiles(null).loc[("gaussian", d)]
    values = {f"{v} {k}": float(q[(v, k)]) for v in ("symmetry", "directionality") for k in (0.25, 0.75)}
    sym, dirs = (f"{signed(values[f'{v} 0.25'], 3)} to {signed(values[f'{v} 0.75'], 3)}" for v in SCORE_NAMES)
    title = (
        f"Unstructured matrices: at d = {d} the middle half of i.i.d. Gaussian draws scores symmetry {sym}, "
        f"but directionality {dirs}"
    )
    number = f"interquartile ranges over draws, i.i.d. Gaussian, d = {d}: symmetry {sym}; directionality {dirs}"
    return title, number, "symmetry, directionality (ensemble gaussian)", values


def _s03(build: Build, notebook: str = "03_pretrained_models", what: str = "this build's checkpoints"):
    g = _stacks(build.notebook_dataset(notebook))
    n_enc, n_dec = int(g.loc["encoder", "n"]), int(g.loc["decoder", "n"])
    enc, dec = float(g.loc["encoder", "symmetry_median"]), float(g.loc["decoder", "symmetry_median"])
    title = (
        f"Encoder stacks score a median symmetry of {signed(enc)}, decoder stacks {signed(dec)} "
        f"({count(n_enc, 'encoder stack')} and {count(n_dec, 'decoder stack')} of {what})"
    )
    values = {"encoder stacks": enc, "decoder stacks": dec}
    return title, _verdict(build, notebook), "symmetry, median over layers per stack; verdicts", values


def _s04(build: Build):
    last = build.notebook_dataset("04_gradient_structure").isel(n_sequences=-1).sel(task="copy")
    b, c = (float(last.accumulated_symmetry.sel(objective=o)) for o in ("bidirectional", "causal"))
    n = int(last.n_sequences)
    title = (
        f"Summed over {count(n, 'sequence')} at initialisation (copy task), the update of W_qk scores symmetry "
        f"{signed(b)} under the bidirectional objective and {signed(c)} under the causal one"
    )
    number = f"symmetry of the summed update, copy task: bidirectional {signed(b)}, causal {signed(c)}"
    return title, number, "accumulated_symmetry (copy)", {"bidirectional": b, "causal": c}


def _final_means(ds: xr.Dataset) -> pd.Series:
    """Per objective, the end of 05's bold line: the median over layers of the final symmetry, mean over seeds."""
    last = text_runs.median_over_layers(ds, "symmetry").isel(step=-1).mean("seed")
    return pd.Series({str(o): float(last.sel(objective=o)) for o in ds.objective.values})


def _final_seed_means(ds: xr.Dataset) -> pd.Series:
    """Per objective, the last point of 07's line: each seed's median over layers of the final symmetry, mean over
    seeds (the statistic its verdicts read), largest first."""
    last = ds.symmetry.isel(step=-1).median("layer").mean("seed")
    return pd.Series({str(o): float(last.sel(objective=o)) for o in ds.objective.values}).sort_values(ascending=False)


def _s05(build: Build):
    ds = build.notebook_dataset("05_training_dynamics")
    ends = _final_means(ds)
    parts = [f"{text_runs.label(o)} {signed(v)}" for o, v in ends.items()]
    title = (
        f"Same model, same text, two objectives: after {int(ds.step[-1])} steps the median symmetry over layers "
        f"(mean over {count(ds.sizes['seed'], 'seed')}) is {' and '.join(parts)}"
    )
    values = {str(o): float(v) for o, v in ends.items()}
    number = _verdict(build, "05_training_dynamics")
    if len(ends) == 2:
        (first, a), (second, b) = ends.items()
        values[f"{first} minus {second}"] = a - b
        number = f"{text_runs.label(first)} minus {text_runs.label(second)}: {signed(a - b)}; {number}"
    return title, number, "symmetry, median over layers, mean over seeds; verdicts", values


def _s06(build: Build):
    ds = build.notebook_dataset("06_symmetric_init")
    objective = str(ds.objective.values[0])
    losses = ds.val_loss.sel(objective=objective)
    placebo = ds.placebo_val_loss.sel(objective=objective)
    ahead = {"symmetric": placebo - losses.sel(init="symmetric"), "baseline": placebo - losses.sel(init="bert")}
    last = {k: v.dropna("step", how="all").isel(step=-1).mean("seed") for k, v in ahead.items()}
    values = {f"placebo minus {k}": float(v) for k, v in last.items()}
    sym, base = (signed(values[f"placebo minus {k}"], 3) for k in ("symmetric", "baseline"))
    title = (
        f"Started from W_q = W_k: final validation loss, placebo minus arm, {sym} nats; the baseline's {base} "
        f"(mean over {count(ds.sizes['seed'], 'seed')}, {objective}; above 0 is ahead of the placebo)"
    )
    return title, _verdict(build, "06_symmetric_init"), "val_loss, placebo_val_loss; verdicts", values


def _s07(build: Build):
    ds = build.notebook_dataset("07_vision")
    ends = _final_seed_means(ds)
    title = f"Vision Transformers after {int(ds.step[-1])} steps, median symmetry over layers (mean over seeds): " + (
        ", ".join(f"{o} {signed(v)}" for o, v in ends.items())
    )
    values = {str(o): float(v) for o, v in ends.items()}
    return title, _verdict(build, "07_vision"), "symmetry, median over layers, mean over seeds; verdicts", values


def _s08(build: Build):
    return _s03(build, "08_model_sweep", "the models swept")


def _s09(build: Build):
    ds = build.notebook_dataset("09_dynamics_at_scale")
    values, parts = {}, []
    for pair in nb09_dynamics_at_scale.pairs(ds):
        gaps = pair_gaps(ds, pair.series)
        values |= {f"{pair.series} smallest gap": float(gaps.min()), f"{pair.series} largest gap": float(gaps.max())}
        parts.append(
            f"{pair.series}: encoder more symmetric in {pair.more} of {pair.total}, encoder minus decoder "
            f"{signed(float(gaps.min()))} to {signed(float(gaps.max()))}"
        )
    if not parts:
        raise ValueError("no matched-pair series")
    title = "Matched encoder and decoder trained alike, median symmetry over layers: " + "; ".join(parts)
    return title, "each unit's encoder minus its decoder, median symmetry over layers", "symmetry (pairs)", values


def pair_gaps(ds: xr.Dataset, series: str) -> pd.Series:
    """Per unit of a matched-pair series of notebook 09: encoder minus decoder, median symmetry over layers (the
    grey segments of ``09_matched_pairs``)."""
    members = nb09_dynamics_at_scale.entries_of(ds, "pair", series)
    frame = pd.DataFrame(
        {
            "unit": members["unit"].values,
            "role": members["role"].values,
            "s": nb09_dynamics_at_scale.median_over_layers(members, "symmetry").values,
        }
    ).pivot_table(index="unit", columns="role", values="s", sort=False)
    return frame["encoder"] - frame["decoder"]


SCORE_NAMES = ("symmetry", "directionality")

SLIDES: tuple[tuple[str, str, Callable], ...] = (
    ("01_bilinear_form", "01_decomposition", _s01),
    ("02_scores", "02_null_distributions", _s02),
    ("03_pretrained_models", "03_encoders_vs_decoders", _s03),
    ("04_gradient_structure", "04_accumulated_updates", _s04),
    ("05_training_dynamics", "05_scores_over_training", _s05),
    ("06_symmetric_init", "06_validation_loss", _s06),
    ("07_vision", "07_scores_over_training", _s07),
    ("08_model_sweep", "08_population", _s08),
    ("09_dynamics_at_scale", "09_matched_pairs", _s09),
)
OPTIONAL = {"08_model_sweep"}  # a build may leave it out; its slide is then left out too
LATER_FIGURES: dict[str, str] = {  # number -> key figure of a notebook after 09 (default: its first figure)
    "10": "10_directionality_by_normalisation",
}

NOTES: dict[str, Notes] = {
    "bilinear": (
        ("Why W_q W_kᵀ and not W_q and W_k apart?",
         "The logits only ever see the product: any invertible A gives W_q A and W_k A⁻ᵀ the same scores, so "
         "W_qk is what training can shape and what the scores read."),
        ("Why sum over heads?",
         "A layer's logit map is the sum of its heads' bilinear forms read as one d × d matrix; the paper scores "
         "both, notebook 02 compares them."),
    ),
    "scores": (
        ("Why does a random matrix score about 0 in symmetry but not in directionality?",
         "Its symmetric and skew parts share the energy equally; directionality counts outlying row and column "
         "norms, which a finite random matrix has by chance, so its null is wider (notebook 02)."),
        ("Why mean + 2 std for the threshold?",
         "It keeps only clearly outlying norms; notebook 02 sweeps the multiplier and shows the sign holds."),
        ("Does the sign convention match the paper's code?",
         "The code stores (1 + s)/2 and −dir; the slides and notebooks use s and dir as defined here."),
    ),
    "gradient": (
        ("Why does a bidirectional objective make W_qk symmetric?",
         "Every pair (i, j) enters in both orders, β_ij x_i x_jᵀ + β_ji x_j x_iᵀ, symmetric as far as "
         "β_ij ≈ β_ji; the symmetric parts add up over training."),
        ("And a causal one?",
         "Only j ≤ i enters: early positions are keys for many queries, so a few columns grow: column dominance, "
         "negative directionality."),
    ),
    "01_bilinear_form": (
        ("Is this layer trained?", "No: a random-weight layer of the toy's shape; it sets the chance level."),
        ("Why do the two parts add up to 100%?", "‖M‖² = ‖M_s‖² + ‖M_n‖²: the parts are orthogonal."),
    ),
    "02_scores": (
        ("Why compare to a null at all?",
         "A score means something only beside what unstructured matrices of the same shape score."),
        ("Why does the directionality band not shrink like symmetry's?",
         "Its threshold picks out the largest norms of each draw, a few values, not an average over d²."),
    ),
    "03_pretrained_models": (
        ("Are a few checkpoints enough to conclude?",
         "No: the verdict counts model families; the build's few stacks usually leave it at cannot tell."),
        ("Why the median over layers?", "It is the paper's statistic, robust to an odd first or last layer."),
    ),
    "04_gradient_structure": (
        ("Is this the trained model?",
         "No: the update at initialisation, summed over sequences; it isolates the pairs each objective feeds in."),
    ),
    "05_training_dynamics": (
        ("Why is the gap small?",
         "The runs are short and small; the verdict uses the seeds as units and says whether it can tell."),
        ("Why does symmetry rise then fall?", "See the lecture path's answer on the transient (notebook 05)."),
    ),
    "06_symmetric_init": (
        ("What is the placebo?",
         "The baseline started from other random weights with the same batches: the gap any restart makes."),
        ("Which sign means faster?", "Baseline minus arm: above 0 the arm's loss is lower, it is ahead."),
    ),
    "07_vision": (
        ("Why several vision objectives?",
         "Masked and classification objectives are bidirectional, next-patch is causal: the same prediction as text."),
    ),
    "08_model_sweep": (
        ("Why families as units?", "Models of one family share data and recipe; counting them apart overstates n."),
    ),
    "09_dynamics_at_scale": (
        ("What is a matched pair?",
         "An encoder and a decoder trained alike (data, size, recipe) apart from the mask; offline, 05's runs."),
    ),
}  # fmt: skip
TITLE_NOTES: Notes = (
    (
        "What will we be able to say at the end?",
        "Whether bidirectional training makes W_qk more symmetric than causal training, with this build's verdicts.",
    ),
)
LATER_NOTES: Notes = (
    ("Where is this notebook's claim?", "In its notebook page and dataset; this slide shows its first figure."),
)


def _mi(name: str) -> str:
    """MathML of a name with subscripts and superscripts in the handouts' notation (``W_qk``, ``x_i^T``)."""
    import re

    m = re.fullmatch(r"([^_^]+)(?:_([^_^]+))?(?:\^([^_^]+))?", name)
    base, sub, sup = m.groups()
    base = f"<mi>{base}</mi>" if len(base) == 1 else f'<mi mathvariant="normal">{base}</mi>'
    if sub and sup:
        return f"<msubsup>{base}<mi>{sub}</mi><mi>{sup}</mi></msubsup>"
    if sub:
        return f"<msub>{base}<mi>{sub}</mi></msub>"
    return f"<msup>{base}<mi>{sup}</mi></msup>" if sup else base


def _row(*parts: str) -> str:
    """A MathML row of names (:func:`_mi`) and operators (``o:+``) and raw MathML (``<...``)."""
    out = []
    for p in parts:
        out.append(p if p.startswith("<") else f"<mo>{p[2:]}</mo>" if p.startswith("o:") else _mi(p))
    return "<mrow>" + "".join(out) + "</mrow>"


def _frac(top: str, bottom: str) -> str:
    return f"<mfrac>{top}{bottom}</mfrac>"


def _math(*rows: str) -> str:
    return "".join(f'<math display="block">{r}</math>' for r in rows)


NORM_S = "<msubsup><mrow><mo>‖</mo><msub><mi>M</mi><mi>s</mi></msub><mo>‖</mo></mrow><mi>F</mi><mn>2</mn></msubsup>"
NORM_N = "<msubsup><mrow><mo>‖</mo><msub><mi>M</mi><mi>n</mi></msub><mo>‖</mo></mrow><mi>F</mi><mn>2</mn></msubsup>"
NORM = "<msubsup><mrow><mo>‖</mo><mi>M</mi><mo>‖</mo></mrow><mi>F</mi><mn>2</mn></msubsup>"
T = '<mi mathvariant="normal">T</mi>'
SUM_I = "<munder><mo>∑</mo><mi>i</mi></munder>"
SUM_H = "<munder><mo>∑</mo><mi>h</mi></munder>"
SUM_J = "<munder><mo>∑</mo><mrow><mi>j</mi><mo>∈</mo><msub><mi>D</mi><mi>i</mi></msub></mrow></munder>"

EQUATIONS = (
    Equation(
        "bilinear",
        "The logits are a bilinear form: a_ij = x_iᵀ W_qk x_j, one d × d matrix per head",
        _math(
            _row("a_ij", "o:=", f"<msubsup><mi>x</mi><mi>i</mi>{T}</msubsup>", "W_qk", "x_j", "o:,"),
            _row("W_qk", "o:=", "W_q", f"<msubsup><mi>W</mi><mi>k</mi>{T}</msubsup>", "o:,",
                 "<mspace width=\"1em\"/>", "M", "o:=", SUM_H, "W_qk^h"),
        ),
        "Tokens x_i ∈ ℝ^d as rows of X; W_q, W_k ∈ ℝ^(d × d_h). Query i attends to key j through W_qk.",
        NOTES["bilinear"],
    ),
    Equation(
        "scores",
        "Two scores of W_qk: symmetry and directionality, both in [−1, 1]",
        _math(
            _row("s(M)", "o:=", _frac(_row(NORM_S, "o:−", NORM_N), NORM), "o:,",
                 "M_s", "o:=", _frac(_row("M", "o:+", f"<msup><mi>M</mi>{T}</msup>"), "<mn>2</mn>"), "o:,",
                 "M_n", "o:=", _frac(_row("M", "o:−", f"<msup><mi>M</mi>{T}</msup>"), "<mn>2</mn>")),
            _row("dir(M)", "o:=", _frac(_row("R", "o:−", "C"), _row("R", "o:+", "C")), "o:,",
                 "R", "o:=", SUM_I, "<mo>max</mo>", "o:(", "r_i", "o:−", "τ_r", "o:,", "<mn>0</mn>", "o:)"),
        ),
        "s = +1 symmetric, −1 skew, ≈ 0 i.i.d. Gaussian. r_i = ‖M[i,:]‖, column norms c_j likewise give C; "
        "τ = mean + 2·std. dir < 0: a few columns (keys) dominate; any symmetric M scores 0.",
        NOTES["scores"],
    ),
    Equation(
        "gradient",
        "The gradient of W_qk is a sum of outer products of token embeddings",
        _math(_row(_frac("<mrow><mo>∂</mo><mi>L</mi></mrow>", _row("<mo>∂</mo>", "W_qk")), "o:=", SUM_I, SUM_J,
                   "β_ij", "x_i", f"<msubsup><mi>x</mi><mi>j</mi>{T}</msubsup>")),
        "Bidirectional: D_i = all j, each pair in both orders. Causal: D_i = {j ≤ i}. Notebook 04 sums these "
        "updates at initialisation.",
        NOTES["gradient"],
    ),
)  # fmt: skip


def run_hint(notebook: str) -> str:
    return f"run notebook {notebook[:2]} (`make notebook NB={notebook}`, or `make reproduce`)"


def _later_slides(build: Build) -> list[Slide]:
    """One slide per notebook after 09 that the build ran (10 when it exists), with its key figure: the one
    :data:`LATER_FIGURES` names, else its first figure; none when there is no such notebook."""
    out = []
    for notebook in sorted(n for n in build.ran if n[:2].isdigit() and int(n[:2]) >= 10):
        figures = sorted((build.root / "figures").glob(f"{notebook[:2]}_*.png"))
        named = build.figure(LATER_FIGURES.get(notebook[:2], ""))
        image = named or (figures[0] if figures else None)
        title = f"Notebook {notebook[:2]} ({notebook[3:].replace('_', ' ')}): its key figure"
        if image is None or not build.ran[notebook]:
            out.append(Slide(notebook, "", title, missing=f"This build has no figure of it: {run_hint(notebook)}."))
        else:
            source = f"notebook {notebook}, figure {image.name}"
            out.append(Slide(notebook, image.stem, title, source=source, image=image, notes=LATER_NOTES))
    return out


def slides(build: Build) -> list[Slide]:
    """One :class:`Slide` per notebook of :data:`SLIDES` (08 only when the build ran it), then one per notebook
    after 09 that the build ran."""
    out = []
    for notebook, figure, make in SLIDES:
        if notebook in OPTIONAL and not build.ran.get(notebook) and build.figure(figure) is None:
            continue
        image, missing = build.figure(figure), ""
        if image is None or not build.ran.get(notebook) or build.notebook_dataset(notebook) is None:
            lacks = f"figures/{figure}.png" if image is None else f"results/{notebook}.nc or a finished notebook"
            missing = f"This build has no {lacks}"
        else:
            try:
                title, number, variable, values = make(build)
            except (KeyError, ValueError, IndexError) as err:  # a dataset of an older notebook: run it again
                missing = f"results/{notebook}.nc lacks what this slide reads ({type(err).__name__}: {err})"
        if missing:
            title = f"Notebook {notebook[:2]}: not in this build"
            out.append(
                Slide(notebook, figure, title, missing=f"{missing}: {run_hint(notebook)}.", notes=NOTES[notebook])
            )
            continue
        source = f"notebook {notebook}, dataset results/{notebook}.nc ({variable})"
        out.append(Slide(notebook, figure, title, number, source, image=image, values=values, notes=NOTES[notebook]))
    return out + _later_slides(build)


STUDENTS, INSTRUCTOR = "students", "instructor"
HANDOUT_FILES = (
    (f"{STUDENTS}/slides.html", "the slides, to present and to share"),
    (f"{STUDENTS}/cheat-sheet.html", "the one-page cheat sheet"),
    (f"{STUDENTS}/quiz.html", "the quiz, without answers"),
    (f"{INSTRUCTOR}/slides.html", "the slides with speaker notes (S shows them)"),
    (f"{INSTRUCTOR}/quiz-answers.html", "the quiz's answer key"),
)
"""The handouts' pages, relative to the handouts folder, and what each is (the lecture path lists them)."""


def lecture_block(build_dir: Path, book_page_dir: Path | None = None) -> str:
    """Markdown for the lecture path: a link to each of :data:`HANDOUT_FILES` (relative to ``book_page_dir``, the
    folder of the page that shows it; default the instructor book's, ``build_dir/book/instructor``), or a line
    saying to run ``make handouts`` when the build has none."""
    folder = Path(build_dir) / "handouts"
    page_dir = Path(book_page_dir) if book_page_dir is not None else Path(build_dir) / "book" / "instructor"
    if not (folder / HANDOUT_FILES[0][0]).is_file():
        return "*The handouts (slides, cheat sheet, quiz) are not built yet: run `make handouts`.*"
    links = []
    for name, what in HANDOUT_FILES:
        href = Path(relpath(folder / name, page_dir)).as_posix()
        links.append(f'<a href="{escape(href)}">{escape(name)}</a> ({what})')
    return "**Handouts** (`make handouts`; share only `students/`): " + "; ".join(links) + "."


# --------------------------------------------------------------------------------------------- the cheat sheet


def paper_claims() -> list[tuple[str, str, str]]:
    """(claim, where in the paper, the value the authors' result files give) from ``attnstruct.reference``."""
    from .. import reference

    groups = paper_comparison.reported_group_medians(reference.reference_table()).set_index("stack")
    enc, dec = groups.loc["encoder"], groups.loc["decoder"]
    runs = reference.training_dynamics()
    end = runs[(runs["n_layers"] == 12) & (runs["mode"] == "encoder")].sort_values("step").groupby("dataset").last()
    init = reference.symmetric_init()
    gains = init[init["mode"] == "encoder"]
    never = int(gains["speedup"].isna().sum())
    return [
        (
            "Bidirectional training makes W_qk symmetric; autoregressive training makes it directional "
            "(column-dominant), through the pairs of positions in the gradient",
            "§3 (implicit updates of W_qk); abstract",
            "argument",
        ),
        (
            "Pretrained encoders are more symmetric than decoders; decoders are column-dominant",
            "§4, figures of median score against model size",
            f"median symmetry {signed(enc['symmetry_median'])} ({int(enc['n'])} encoder rows) vs "
            f"{signed(dec['symmetry_median'])} ({int(dec['n'])} decoder rows); directionality "
            f"{signed(enc['directionality_median'])} vs {signed(dec['directionality_median'])}",
        ),
        (
            "Encoders trained from scratch become symmetric over training",
            "§4, training-dynamics figures",
            f"12-layer encoders end at {signed(end['symmetry'].min())} to {signed(end['symmetry'].max())} "
            f"after {int(end['step'].max()):,} steps",
        ),
        (
            "Symmetric initialisation (W_q = W_k) speeds up encoder training",
            "§4, symmetric-initialisation table",
            f"speed-ups {percent(gains['speedup'].min())} to {percent(gains['speedup'].max())} "
            f"over {count(len(gains) - never, 'encoder run')}; {count(never, 'run')} never reached the baseline",
        ),
    ]


def findings(build: Build) -> list[tuple[str, str, str]]:
    """(what, headline claim, its estimate and stored verdict) per notebook with a headline in this build."""
    rows = []
    for notebook, what in EXPERIMENTS.items():
        effect = headline(build, notebook) if build.ran.get(notebook) else None
        if effect is None:
            rows.append((what, HEADLINES[notebook], f"not in this build: {run_hint(notebook)}"))
        else:
            rows.append((what, effect.claim, short(effect)))
    return rows
