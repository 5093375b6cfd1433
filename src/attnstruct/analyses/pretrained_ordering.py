"""Notebooks 03 and 08: are encoders more symmetric than decoders, counted by model family, under a declared plan.

Pretrained checkpoints come in families (sizes of one recipe, fine-tunes of one base), so the authors' list of
language models is tested with one unit per model family (:func:`attnstruct.stats.family_effect`, families from the
hub id, :func:`attnstruct.stats.model_family`), the rows whose extraction the reference table flags left out
(:func:`family_rows`). This is the plan's primary claim; the same test on directionality and the test over this
run's own stacks (:func:`attnstruct.analyses.paper_comparison.role_effect`) are secondary (:data:`PLAN`). Notebook
08 asks the same of the models it swept (:data:`SWEEP_PLAN`, :func:`sweep_effects`), each model's family from its
``model_type``.
"""

from __future__ import annotations

import pandas as pd

from .. import stats
from ..report import prose
from . import paper_comparison

FAMILY_CLAIM = "encoder minus decoder model families, median {score} (the authors' {group} models)"
STACK_CLAIM = "encoder minus decoder stacks, median symmetry over layers"  # paper_comparison.role_effect's claim


SWEEP_CLAIM = "encoder minus decoder model families, median {score} (the models swept)"


def _family_claim(score: str, role: str, claim: str = FAMILY_CLAIM.format(score="{score}", group="language")):
    return stats.Claim(
        claim.format(score=score),
        "family",
        f"each model's median {score} over layers; the median over a family's models of one role; mean of the "
        "encoder families minus mean of the decoder families",
        "two-sample permutation test over families",
        "the role labels exchangeable among families",
        role=role,
    )


_STACKS = stats.Claim(
    STACK_CLAIM,
    "stack",
    "median symmetry over layers of each self-attention stack scored here; mean of the encoder stacks minus mean of "
    "the decoder stacks",
    "two-sample permutation test over stacks",
    "the role labels exchangeable among stacks",
    role="secondary",
)
PLAN = stats.Plan(
    "03_pretrained_models",
    (_family_claim("symmetry", "primary"), _family_claim("directionality", "secondary"), _STACKS),
)
SWEEP_PLAN = stats.Plan(
    "08_model_sweep",
    (
        _family_claim("symmetry", "primary", SWEEP_CLAIM),
        _family_claim("directionality", "secondary", SWEEP_CLAIM),
        _STACKS,
    ),
)


def family_rows(reference: pd.DataFrame, group: str = "language") -> pd.DataFrame:
    """The authors' rows of ``group`` (their ``family`` column: language, vision, audio) without a caveat, with each
    model's family (:func:`attnstruct.stats.model_family` of its hub id) in ``model_family``."""
    rows = reference[(reference["family"] == group) & reference["caveats"].isna()]
    return rows.assign(model_family=[stats.model_family(model) for model in rows["model"]])


def _by_family(rows: pd.DataFrame, claim: str, seed: int) -> list[stats.Effect]:
    """Encoder minus decoder model families of ``rows`` (``role``, ``model_family`` and ``{score}_median`` columns)
    in median symmetry and directionality, both predicted positive (encoders more symmetric and less
    column-dominant); ``claim`` names each, with ``{score}`` in it."""
    return [
        stats.family_effect(
            rows,
            f"{score}_median",
            treated="encoder",
            control="decoder",
            claim=claim.format(score=score),
            family="model_family",
            seed=seed,
        )
        for score in paper_comparison.SCORES
    ]


def _families_per_role(rows: pd.DataFrame) -> list[int]:
    """How many model families of ``rows`` have an encoder, and how many a decoder."""
    return [rows.loc[rows["role"] == r, "model_family"].nunique() for r in ("encoder", "decoder")]


def family_effects(reference: pd.DataFrame, group: str = "language", seed: int = 0) -> list[stats.Effect]:
    """Encoder minus decoder model families in the authors' reported median symmetry and directionality
    (:func:`family_rows`), decided under :data:`PLAN`."""
    claim = FAMILY_CLAIM.format(score="{score}", group=group)
    return PLAN.decide(_by_family(family_rows(reference, group), claim, seed))


def stack_effect(summary: pd.DataFrame, plan: stats.Plan = PLAN) -> stats.Effect | None:
    """:func:`attnstruct.analyses.paper_comparison.role_effect` of this run's stacks, decided under ``plan``; None
    without a stack of each role."""
    effect = paper_comparison.role_effect(summary, "symmetry")
    return None if effect is None else plan.decide([effect])[0]


def sweep_rows(summary: pd.DataFrame, model_types) -> pd.DataFrame:
    """The encoder and decoder self-attention stacks of ``summary`` (:func:`attnstruct.analyses.pretrained.summary`),
    with ``role`` their stack and ``model_family`` the family of each model (``model_types``: model -> its
    ``model_type``, :func:`attnstruct.stats.model_family`)."""
    rows = summary[summary["stack"].isin(("encoder", "decoder"))]
    families = [stats.model_family(m, dict(model_types).get(m)) for m in rows["model"]]
    return rows.assign(role=rows["stack"], model_family=families)


def sweep_effects(summary: pd.DataFrame, model_types, seed: int = 0) -> list[stats.Effect]:
    """Notebook 08's verdicts under :data:`SWEEP_PLAN`: encoder minus decoder model families in median symmetry and
    directionality over the swept models (:func:`sweep_rows`), and the stacks' :func:`stack_effect`; none without an
    encoder and a decoder stack."""
    rows = sweep_rows(summary, model_types)
    if set(rows["role"]) != {"encoder", "decoder"}:
        return []
    effects = _by_family(rows, SWEEP_CLAIM, seed)
    return SWEEP_PLAN.decide([*effects, paper_comparison.role_effect(summary, "symmetry")])


def sweep_smallest(summary: pd.DataFrame, model_types) -> dict[str, float]:
    """The smallest p each claim of :data:`SWEEP_PLAN` can reach with the swept models' families and stacks."""
    rows = sweep_rows(summary, model_types)
    families, stacks = _families_per_role(rows), [int((rows["role"] == r).sum()) for r in ("encoder", "decoder")]
    if not all(families):
        return {}
    by_family = stats.smallest_two_sample_p(*families)
    return {SWEEP_CLAIM.format(score=s): by_family for s in paper_comparison.SCORES} | {
        STACK_CLAIM: stats.smallest_two_sample_p(*stacks)
    }


def effects(summary: pd.DataFrame, reference: pd.DataFrame) -> list[stats.Effect]:
    """Every verdict of notebook 03: :func:`family_effects` and, when there is a stack of each role,
    :func:`stack_effect`."""
    stack = stack_effect(summary)
    return family_effects(reference) + ([] if stack is None else [stack])


def describe_families(reference: pd.DataFrame, decided: list[stats.Effect], group: str = "language") -> str:
    """The family-level test in words: how many rows and families enter, which families, how many rows with a caveat
    were left out, and each family effect's sentence (``decided``, from :func:`effects`)."""
    rows = family_rows(reference, group)
    left_out = int(((reference["family"] == group) & reference["caveats"].notna()).sum())
    names = {r: sorted(rows.loc[rows["role"] == r, "model_family"].unique()) for r in ("encoder", "decoder")}
    counts = {r: prose.count(len(names[r]), f"{r} family") for r in names}
    sentences = " ".join(f"{e.sentence()}." for e in decided if e.unit == "family")
    return (
        f"Counted by model family instead of by checkpoint (the sizes and fine-tunes of one family pooled by their "
        f"median, so that near-duplicates do not count as independent evidence), the authors' {group} rows without a "
        f"caveat ({prose.count(len(rows), 'row')}; {prose.count(left_out, 'row')} with a caveat left out) form "
        f"{counts['encoder']} ({', '.join(names['encoder'])}) and {counts['decoder']} ({', '.join(names['decoder'])}). "
        f"{sentences}"
    )


def smallest(reference: pd.DataFrame, group: str = "language") -> dict[str, float]:
    """The smallest p each family claim's permutation test can reach with the reference table's families."""
    p = stats.smallest_two_sample_p(*_families_per_role(family_rows(reference, group)))
    return {FAMILY_CLAIM.format(score=score, group=group): p for score in paper_comparison.SCORES}
