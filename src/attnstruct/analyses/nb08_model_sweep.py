"""Notebook 08: the list of models, the sweep's outcome, its plan and verdicts, its dataset, the caveat groups of the
point-by-point comparison with the authors' values, and the facts its sentences and titles state.

The sweep itself is :func:`attnstruct.checkpoints.sweep.run_sweep`; its per-model datasets are the one per-model
dataset of :func:`attnstruct.checkpoints.tables.model_dataset`, read here by
:func:`attnstruct.analyses.pretrained_scores.stack_summary`. The comparison with the paper is
:mod:`attnstruct.analyses.paper_comparison`; the claims notebook 03 shares (one unit per model family, the test over
stacks) are :mod:`attnstruct.analyses.pretrained_ordering`'s.

**The plan** (:data:`PLAN`): the primary claim counts one unit per model family (each model's family from its
``model_type``, :func:`rows_by_family`), encoder families against decoder families in median symmetry; the same on
directionality and the test over stacks are secondary. :func:`effects` decides them, :func:`smallest_p_by_claim`
says what the swept models can reach.

What the notebook says comes from here as facts records (frozen dataclasses of strings formatted by
:mod:`attnstruct.report.prose`, plus the few data-dependent words); its sentences and figure titles are templates in
the notebook, filled by :func:`attnstruct.report.prose.say` and :func:`~attnstruct.report.prose.fill`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import xarray as xr

from .. import results, stats
from ..checkpoints import sweep, zoo
from ..checkpoints.sweep import SweepResult
from ..report import prose
from . import paper_comparison, pretrained_ordering, pretrained_scores

ZOO_SELECTIONS = zoo.SELECTIONS  # core, permissive, non-commercial, all

# The plan: the swept models counted by family, and their stacks.

FAMILY_CLAIM = "encoder minus decoder model families, median {score} (the models swept)"
PLAN = stats.Plan(
    "08_model_sweep",
    (
        pretrained_ordering.family_claim("symmetry", "primary", FAMILY_CLAIM),
        pretrained_ordering.family_claim("directionality", "secondary", FAMILY_CLAIM),
        pretrained_ordering.STACKS,
    ),
)


ROLES_COMPARED = ("encoder", "decoder")  # encoder-only against decoder-only models, as the paper's language figure


def rows_by_family(summary: pd.DataFrame, model_types) -> pd.DataFrame:
    """The self-attention stacks of the encoder-only and decoder-only models of ``summary``
    (:func:`attnstruct.analyses.pretrained_scores.stack_summary`, its ``role`` the model's), with ``model_family`` the
    family of each model (``model_types``: model -> its ``model_type``, :func:`attnstruct.stats.model_family`).
    Encoder-decoder models (Whisper) and vision encoders are groups of their own, not units of this claim."""
    rows = summary[summary["role"].isin(ROLES_COMPARED) & summary["stack"].isin(ROLES_COMPARED)]
    families = [stats.model_family(m, dict(model_types).get(m)) for m in rows["model"]]
    return rows.assign(model_family=families)


@dataclass(frozen=True)
class FamilyDesignFacts(stats.DesignReach):
    """The primary claim's design on the swept models: :func:`attnstruct.stats.design_reach` of its families (the
    fields of :class:`attnstruct.stats.DesignReach`), whether it can be tested at all (``tested``: a family of each
    role), and the ``encoders`` and ``decoders`` families (listed)."""

    tested: bool = False
    encoders: str = ""
    decoders: str = ""


def family_design(summary: pd.DataFrame, model_types) -> FamilyDesignFacts:
    """The facts of the families the primary claim counts (:func:`rows_by_family`) and of what their permutation test
    can reach."""
    rows = rows_by_family(summary, model_types)
    names = [sorted(rows.loc[rows["stack"] == r, "model_family"].unique()) for r in ROLES_COMPARED]
    encoders, decoders = (prose.listing(n, fmt=lambda v, _: str(v)) for n in names)
    if not all(names):
        untested = dict(design="", test="", smallest="", alpha="", reachable=False, needed="")
        return FamilyDesignFacts(**untested, verdict=stats.CANNOT_TELL, encoders=encoders, decoders=decoders)
    reach = stats.design_reach(
        len(names[0]), control=len(names[1]), unit="encoder family", control_unit="decoder family", balanced=True
    )
    return FamilyDesignFacts(**vars(reach), tested=True, encoders=encoders, decoders=decoders)


def effects(summary: pd.DataFrame, model_types, seed: int = 0) -> list[stats.Effect]:
    """Every verdict of notebook 08, decided under :data:`PLAN`: encoder minus decoder model families in median
    symmetry and directionality over the swept models (:func:`rows_by_family`), and the stacks'
    :func:`attnstruct.analyses.paper_comparison.role_effect`; none without an encoder and a decoder stack."""
    rows = rows_by_family(summary, model_types).assign(role=lambda r: r["stack"])
    if set(rows["role"]) != set(ROLES_COMPARED):
        return []
    by_family = pretrained_ordering.effects_by_family(rows, FAMILY_CLAIM, seed)
    return PLAN.decide([*by_family, paper_comparison.role_effect(summary, "symmetry")])


def smallest_p_by_claim(summary: pd.DataFrame, model_types) -> dict[str, float]:
    """The smallest p each claim of :data:`PLAN` can reach with the swept models' families and stacks (empty without
    a family of each role)."""
    families = pretrained_ordering.families_per_role(rows_by_family(summary, model_types))
    stacks = [len(v) for v in paper_comparison.role_values(summary)]
    if not all(families):
        return {}
    by_family = stats.smallest_two_sample_p(*families)
    return {FAMILY_CLAIM.format(score=s): by_family for s in paper_comparison.SCORES} | {
        pretrained_ordering.STACK_CLAIM: stats.smallest_two_sample_p(*stacks)
    }


# The sweep: its list, its outcome, its scores.


def model_names(models, cache_dir=None, also_if_fetched=None) -> list[str]:
    """The models to sweep: a zoo selection (:data:`ZOO_SELECTIONS`: its names, which must have been fetched),
    ``paper`` or a list file (:func:`attnstruct.checkpoints.sweep.read_model_list`), or a list of ids and paths as
    given; then the models of the zoo selection ``also_if_fetched`` (``non-commercial``) that are fetched into
    ``cache_dir``, never fetching one.

    Raises ``RuntimeError`` naming the fetch command when a zoo model of ``models`` is not fetched."""
    if isinstance(models, str) and models in ZOO_SELECTIONS:
        names = [e.name for e in pretrained_scores.fetched_entries(models, cache_dir)]
    elif isinstance(models, str):
        names = sweep.read_model_list(models)
    else:
        names = [str(m) for m in models]
    extra = zoo.entries(also_if_fetched) if also_if_fetched else []
    return names + [e.name for e in extra if e.name not in names and zoo.is_fetched(e.name, cache_dir)]


@dataclass(frozen=True)
class RunFacts:
    """What a sweep did with its list: the ``models`` listed (counted), the ``device``, how many were ``scored`` now,
    ``skipped`` (done before) and ``failed``."""

    models: str
    device: str
    scored: str
    skipped: str
    failed: str


def run_outcome(run: SweepResult, names, device) -> RunFacts:
    """The facts of the sweep ``run`` of ``names`` on ``device``."""
    return RunFacts(
        models=prose.count(len(names), "model"),
        device=str(device),
        scored=str(len(run.scored)),
        skipped=str(len(run.skipped)),
        failed=str(len(run.failures)),
    )


def failures(run: SweepResult) -> pd.DataFrame:
    """The models ``run`` could not score: ``model``, ``kind`` (what went wrong), ``reason`` (one line)."""
    return pd.DataFrame(run.failures, columns=["model", "kind", "reason"])


def load_scores(run: SweepResult, folder) -> xr.Dataset:
    """The sweep's combined dataset (``sweep.nc``); ``RuntimeError`` pointing to ``folder``'s ``failures.csv`` when
    no model could be scored."""
    if run.path is None:
        raise RuntimeError(f"no model could be scored; see {Path(folder) / 'failures.csv'}")
    return results.load_dataset(run.path)


# What the sweep found: the stacks by role, the pairs in the paper's order, the gaps to the authors' values.


@dataclass(frozen=True)
class RoleGroupFacts:
    """One role's stacks (``stacks``, counted with the role's name): the median over them of their median
    ``symmetry`` and ``directionality`` over layers, and each one's smallest and largest over the stacks (``..._low``,
    ``..._high``, both given even when they are equal)."""

    stacks: str
    symmetry: str
    symmetry_low: str
    symmetry_high: str
    directionality: str
    directionality_low: str
    directionality_high: str


def role_groups(summary: pd.DataFrame) -> list[RoleGroupFacts]:
    """The facts of :func:`attnstruct.analyses.paper_comparison.group_medians`, one per group with stacks (encoder,
    decoder, then vision encoder: :data:`attnstruct.analyses.paper_comparison.GROUPS`)."""
    facts = []
    groups = paper_comparison.group_medians(summary, groups=paper_comparison.GROUPS)
    for stack, g in groups.set_index("stack").iterrows():
        if g["n"]:
            facts.append(
                RoleGroupFacts(
                    stacks=prose.count(int(g["n"]), f"{stack} stack"),
                    symmetry=prose.signed(g["symmetry_median"]),
                    symmetry_low=prose.signed(g["symmetry_min"]),
                    symmetry_high=prose.signed(g["symmetry_max"]),
                    directionality=prose.signed(g["directionality_median"]),
                    directionality_low=prose.signed(g["directionality_min"]),
                    directionality_high=prose.signed(g["directionality_max"]),
                )
            )
    return facts


@dataclass(frozen=True)
class PairOrderFacts:
    """The share of (encoder, decoder) stack pairs in which the encoder is ``more_symmetric`` and in which it is
    ``less_column_dominant`` (higher directionality); ``has_pairs`` false without a stack of each role."""

    has_pairs: bool
    more_symmetric: str
    less_column_dominant: str


def pair_order(summary: pd.DataFrame) -> PairOrderFacts:
    """The facts of :func:`attnstruct.analyses.paper_comparison.ordering_probability` of both scores."""
    p_sym, p_dir = (paper_comparison.ordering_probability(summary, s) for s in paper_comparison.SCORES)
    return PairOrderFacts(
        has_pairs=p_sym == p_sym, more_symmetric=prose.percent(p_sym), less_column_dominant=prose.percent(p_dir)
    )


@dataclass(frozen=True)
class PaperGapFacts:
    """The ``stacks`` (counted) also reported by the authors ``with`` or ``without a known caveat`` (``caveat``: the
    words), and the median absolute difference of ours from theirs in ``symmetry`` and ``directionality`` (three
    decimals)."""

    caveat: str
    stacks: str
    symmetry: str
    directionality: str


def paper_gaps(table: pd.DataFrame) -> list[PaperGapFacts]:
    """The facts of :func:`attnstruct.analyses.paper_comparison.agreement`'s ``table``: the stacks without a known
    caveat, then those with one, each group only when it has stacks; empty when no model is in the authors' list."""
    facts = []
    clean = table["caveats"] == ""
    for caveat, part in (("without a known caveat", table[clean]), ("with a caveat", table[~clean])):
        if len(part):
            facts.append(
                PaperGapFacts(
                    caveat=caveat,
                    stacks=prose.count(len(part), "stack"),
                    symmetry=prose.number(part["diff_symmetry"].abs().median(), 3),
                    directionality=prose.number(part["diff_directionality"].abs().median(), 3),
                )
            )
    return facts


@dataclass(frozen=True)
class StackTestFacts:
    """The test over stacks: whether it ran (``tested``: a stack of each role) and its ``test`` line
    (:func:`attnstruct.report.prose.effect_line`); what the stacks can reach at all is
    :func:`attnstruct.analyses.paper_comparison.stack_reach`."""

    tested: bool
    test: str


def stack_test(summary: pd.DataFrame, effect: stats.Effect | None) -> StackTestFacts:
    """The facts of the stacks' test, ``effect`` (decided under :data:`PLAN`; None: the stacks of ``summary``
    untested, or :func:`attnstruct.analyses.paper_comparison.role_effect` of them when it can run)."""
    effect = paper_comparison.role_effect(summary, "symmetry") if effect is None else effect
    return StackTestFacts(tested=effect is not None, test="" if effect is None else prose.effect_line(effect))


# The point-by-point comparison with the authors' values.


def caveat_group(caveats: str) -> str:
    """The colour group of an authors' entry in the comparison figure: ``no known caveat``, the caveat itself for
    the two extraction problems that shift many entries (grouped-query pairing, fused QKV), ``other caveat``."""
    if not caveats:
        return "no known caveat"
    return caveats if caveats in ("gqa_head_pairing_suspect", "fused_qkv_branch_suspect") else "other caveat"


def with_caveat_groups(table: pd.DataFrame) -> pd.DataFrame:
    """:func:`attnstruct.analyses.paper_comparison.agreement`'s ``table`` with a ``caveat_group`` column
    (:func:`caveat_group`)."""
    return table.assign(caveat_group=[caveat_group(c) for c in table["caveats"]])


@dataclass(frozen=True)
class AgreementFacts:
    """The ``stacks`` (counted) also scored by the paper, and the median absolute difference of ours from theirs in
    ``symmetry`` and ``directionality`` (two decimals, as the figure's title states them)."""

    stacks: str
    symmetry: str
    directionality: str


def agreement_gaps(table: pd.DataFrame) -> AgreementFacts:
    """The facts of :func:`attnstruct.analyses.paper_comparison.agreement`'s ``table``, every row."""
    return AgreementFacts(
        stacks=prose.count(len(table), "stack"),
        symmetry=prose.number(table["diff_symmetry"].abs().median()),
        directionality=prose.number(table["diff_directionality"].abs().median()),
    )


def results_dataset(ds: xr.Dataset, *, parameters: Mapping, failures: int, effects=()) -> xr.Dataset:
    """Notebook 08's dataset: the sweep's scores ``ds`` with provenance attrs (``parameters``, the scored matrix as
    the sweep recorded it, the number of models that failed, under ``non_commercial`` the models of the zoo's
    non-commercial set it holds, comma-separated, ``""`` for none, and under ``verdicts`` the table of ``effects``,
    JSON, ``"{}"`` for none)."""
    out = ds.copy()
    out.attrs = results.provenance_attrs(
        parameters=dict(parameters),
        scored_matrix=ds.attrs["scored_matrix"],
        failures=failures,
        non_commercial=",".join(str(m) for m in ds.model.values if pretrained_scores.is_non_commercial(str(m))),
        verdicts=stats.verdict_table(effects).to_json(orient="index") if len(effects) else "{}",
    )
    return out
