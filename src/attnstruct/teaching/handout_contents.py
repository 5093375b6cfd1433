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
from pathlib import Path

import pandas as pd
import xarray as xr

from .. import stats
from ..analyses import (
    nb04_gradient_structure,
    nb07_vision,
    null_ensembles,
    paper_comparison,
    plans,
    pretrained_ordering,
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
HEADLINES = {
    "03_pretrained_models": pretrained_ordering.STACK_CLAIM,
    "04_gradient_structure": nb04_gradient_structure.PRIMARY,
    "05_training_dynamics": plans.plan_of("05_training_dynamics").primary[0].name,
    "06_symmetric_init": plans.plan_of("06_symmetric_init").primary[0].name,
    "07_vision": nb07_vision.PRIMARY,
    "08_model_sweep": plans.plan_of("08_model_sweep").primary[0].name,
}


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


@dataclass
class Slide:
    """One slide: its notebook and figure, a message title, the number it shows and where that number comes from;
    ``missing`` says which notebook to run when the build lacks the figure or the dataset."""

    notebook: str
    figure: str
    title: str
    number: str = ""
    source: str = ""
    missing: str = ""
    image: Path | None = None


def _stacks(ds: xr.Dataset) -> pd.DataFrame:
    """Encoder and decoder self-attention stacks: count and median of their median symmetry over layers."""
    return paper_comparison.group_medians(pretrained_scores.stack_summary(ds)).set_index("stack")


def _s01(build: Build):
    s = float(build.notebook_dataset("01_bilinear_form").symmetry.sel(layer=0))
    title = (
        f"An untrained layer's W_qk splits into a symmetric and a skew part: the symmetric part carries "
        f"{percent((1 + s) / 2)} of its energy, so its symmetry score is {signed(s)}"
    )
    return title, f"symmetry of layer 0: {signed(s)}", "symmetry (layer 0)"


def _s02(build: Build):
    null = build.notebook_dataset("02_scores")[["symmetry", "directionality"]]
    d = int(null.d_model.max())
    q = null_ensembles.null_quartiles(null).loc[("gaussian", d)]
    sym, dirs = (signed(q[(v, 0.25)], 3) + " to " + signed(q[(v, 0.75)], 3) for v in ("symmetry", "directionality"))
    title = (
        f"Unstructured matrices: at d = {d} the middle half of i.i.d. Gaussian draws scores symmetry {sym}, "
        f"but directionality {dirs}"
    )
    return title, f"directionality IQR, i.i.d. Gaussian, d = {d}: {dirs}", "directionality (ensemble gaussian)"


def _s03(build: Build, notebook: str = "03_pretrained_models", what: str = "this build's checkpoints"):
    g = _stacks(build.notebook_dataset(notebook))
    n_enc, n_dec = int(g.loc["encoder", "n"]), int(g.loc["decoder", "n"])
    title = (
        f"Encoder stacks score a median symmetry of {signed(g.loc['encoder', 'symmetry_median'])}, decoder stacks "
        f"{signed(g.loc['decoder', 'symmetry_median'])} ({count(n_enc, 'encoder stack')} and "
        f"{count(n_dec, 'decoder stack')} of {what})"
    )
    effect = headline(build, notebook)
    number = f"{effect.claim}: {short(effect)}" if effect else "no stored verdict"
    return title, number, "symmetry, median over layers per stack; verdicts"


def _s04(build: Build):
    last = build.notebook_dataset("04_gradient_structure").isel(n_sequences=-1).sel(task="copy")
    b, c = (float(last.accumulated_symmetry.sel(objective=o)) for o in ("bidirectional", "causal"))
    n = int(last.n_sequences)
    title = (
        f"Summed over {count(n, 'sequence')} at initialisation (copy task), the update of W_qk scores symmetry "
        f"{signed(b)} under the bidirectional objective and {signed(c)} under the causal one"
    )
    return title, f"symmetry of the summed update, bidirectional: {signed(b)}", "accumulated_symmetry (copy)"


def _final_medians(ds: xr.Dataset) -> pd.Series:
    """Per objective, the last point of the figures' middle line: the median of the final symmetry pooled over
    layers and seeds (:func:`attnstruct.report.plotting.quartiles`), largest first."""
    from ..report import plotting

    last = ds.symmetry.isel(step=-1, drop=True).expand_dims(step=[0])
    mids = {str(o): float(plotting.quartiles(last.sel(objective=o))[1][0]) for o in ds.objective.values}
    return pd.Series(mids).sort_values(ascending=False)


def _s05(build: Build):
    ds = build.notebook_dataset("05_training_dynamics")
    parts = [f"{text_runs.label(o)} {signed(v)}" for o, v in _final_medians(ds).items()]
    title = (
        f"Same model, same text, two objectives: after {int(ds.step[-1])} steps the median symmetry (layers and "
        f"{count(ds.sizes['seed'], 'seed')} pooled) is {' and '.join(parts)}"
    )
    effect = headline(build, "05_training_dynamics")
    return title, f"{effect.claim}: {short(effect)}" if effect else "", "symmetry; verdicts"


def _s06(build: Build):
    ds = build.notebook_dataset("06_symmetric_init")
    effect = headline(build, "06_symmetric_init")
    side = "above" if effect.estimate < 0 else "below"
    title = (
        f"Started from W_q = W_k, the encoder ends {abs(effect.estimate):.3f} nats {side} the baseline's validation "
        f"loss after {int(ds.step[-1])} steps (mean over {count(effect.n, effect.unit)})"
    )
    return title, f"{effect.claim}: {short(effect)}", "val_loss; verdicts"


def _s07(build: Build):
    ds = build.notebook_dataset("07_vision")
    title = f"Vision Transformers after {int(ds.step[-1])} steps, median symmetry by objective: " + ", ".join(
        f"{o} {signed(v)}" for o, v in _final_medians(ds).items()
    )
    effect = headline(build, "07_vision")
    return title, f"{effect.claim}: {short(effect)}" if effect else "", "symmetry; verdicts"


def _s08(build: Build):
    return _s03(build, "08_model_sweep", "the models swept")


SLIDES: tuple[tuple[str, str, Callable], ...] = (
    ("01_bilinear_form", "01_decomposition", _s01),
    ("02_scores", "02_null_distributions", _s02),
    ("03_pretrained_models", "03_encoders_vs_decoders", _s03),
    ("04_gradient_structure", "04_accumulated_updates", _s04),
    ("05_training_dynamics", "05_scores_over_training", _s05),
    ("06_symmetric_init", "06_validation_loss", _s06),
    ("07_vision", "07_scores_over_training", _s07),
    ("08_model_sweep", "08_population", _s08),
)
OPTIONAL = {"08_model_sweep"}  # a build may leave it out; its slide is then left out too


def run_hint(notebook: str) -> str:
    return f"run notebook {notebook[:2]} (`make notebook NB={notebook}`, or `make reproduce`)"


def slides(build: Build) -> list[Slide]:
    """One :class:`Slide` per notebook of :data:`SLIDES` (08 only when the build ran it)."""
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
                title, number, variable = make(build)
            except (KeyError, ValueError, IndexError) as err:  # a dataset of an older notebook: run it again
                missing = f"results/{notebook}.nc lacks what this slide reads ({type(err).__name__}: {err})"
        if missing:
            title = f"Notebook {notebook[:2]}: not in this build"
            out.append(Slide(notebook, figure, title, missing=f"{missing}: {run_hint(notebook)}."))
            continue
        source = f"notebook {notebook}, dataset results/{notebook}.nc ({variable})"
        out.append(Slide(notebook, figure, title, number, source, image=image))
    return out


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
