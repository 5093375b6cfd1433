"""Are pretrained encoders more symmetric than decoders, counted by model family: the claims 03 and 08 share.

Pretrained checkpoints come in families (sizes of one recipe, fine-tunes of one base), so a list of models is tested
with one unit per model family (:func:`effects_by_family`, :func:`attnstruct.stats.family_effect`), each claim
declared by :func:`family_claim`; the test over a run's own stacks (:func:`attnstruct.analyses.paper_comparison.
role_effect`) is the secondary claim :data:`STACKS`. Notebook 03 tests the authors' list of language models under its
plan (:data:`attnstruct.analyses.nb03_pretrained_models.PLAN`); notebook 08 asks the same of the models it swept
(:data:`SWEEP_PLAN`, :func:`sweep_effects`), each model's family from its ``model_type``.
"""

from __future__ import annotations

import pandas as pd

from .. import stats
from . import paper_comparison

STACK_CLAIM = "encoder minus decoder stacks, median symmetry over layers"  # paper_comparison.role_effect's claim
SWEEP_CLAIM = "encoder minus decoder model families, median {score} (the models swept)"


def family_claim(score: str, role: str, claim: str) -> stats.Claim:
    """The claim ``claim`` (with ``{score}`` in it) that encoder model families beat decoder ones in median
    ``score``, one unit per family, of ``role`` (``primary``, ``secondary``) in its plan."""
    return stats.Claim(
        claim.format(score=score),
        "family",
        f"each model's median {score} over layers; the median over a family's models of one role; mean of the "
        "encoder families minus mean of the decoder families",
        "two-sample permutation test over families",
        "the role labels exchangeable among families",
        role=role,
    )


STACKS = stats.Claim(
    STACK_CLAIM,
    "stack",
    "median symmetry over layers of each self-attention stack scored here; mean of the encoder stacks minus mean of "
    "the decoder stacks",
    "two-sample permutation test over stacks",
    "the role labels exchangeable among stacks",
    role="secondary",
)
SWEEP_PLAN = stats.Plan(
    "08_model_sweep",
    (
        family_claim("symmetry", "primary", SWEEP_CLAIM),
        family_claim("directionality", "secondary", SWEEP_CLAIM),
        STACKS,
    ),
)


def effects_by_family(rows: pd.DataFrame, claim: str, seed: int = 0) -> list[stats.Effect]:
    """Encoder minus decoder model families of ``rows`` (``role``, ``model_family`` and ``{score}_median`` columns)
    in median symmetry and directionality, both predicted positive (encoders more symmetric and less
    column-dominant); ``claim`` names each, with ``{score}`` in it. Not yet decided under a plan."""
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


def families_per_role(rows: pd.DataFrame) -> list[int]:
    """How many model families of ``rows`` have an encoder, and how many a decoder."""
    return [rows.loc[rows["role"] == r, "model_family"].nunique() for r in ("encoder", "decoder")]


def sweep_rows(summary: pd.DataFrame, model_types) -> pd.DataFrame:
    """The encoder and decoder self-attention stacks of ``summary``
    (:func:`attnstruct.analyses.pretrained_scores.stack_summary`), with ``role`` their stack and ``model_family`` the
    family of each model (``model_types``: model -> its ``model_type``, :func:`attnstruct.stats.model_family`)."""
    rows = summary[summary["stack"].isin(("encoder", "decoder"))]
    families = [stats.model_family(m, dict(model_types).get(m)) for m in rows["model"]]
    return rows.assign(role=rows["stack"], model_family=families)


def sweep_effects(summary: pd.DataFrame, model_types, seed: int = 0) -> list[stats.Effect]:
    """Notebook 08's verdicts under :data:`SWEEP_PLAN`: encoder minus decoder model families in median symmetry and
    directionality over the swept models (:func:`sweep_rows`), and the stacks'
    :func:`attnstruct.analyses.paper_comparison.role_effect`; none without an encoder and a decoder stack."""
    rows = sweep_rows(summary, model_types)
    if set(rows["role"]) != {"encoder", "decoder"}:
        return []
    effects = effects_by_family(rows, SWEEP_CLAIM, seed)
    return SWEEP_PLAN.decide([*effects, paper_comparison.role_effect(summary, "symmetry")])


def sweep_smallest(summary: pd.DataFrame, model_types) -> dict[str, float]:
    """The smallest p each claim of :data:`SWEEP_PLAN` can reach with the swept models' families and stacks."""
    rows = sweep_rows(summary, model_types)
    families, stacks = families_per_role(rows), [int((rows["role"] == r).sum()) for r in ("encoder", "decoder")]
    if not all(families):
        return {}
    by_family = stats.smallest_two_sample_p(*families)
    return {SWEEP_CLAIM.format(score=s): by_family for s in paper_comparison.SCORES} | {
        STACK_CLAIM: stats.smallest_two_sample_p(*stacks)
    }
