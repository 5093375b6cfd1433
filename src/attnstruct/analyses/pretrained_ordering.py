"""Are pretrained encoders more symmetric than decoders, counted by model family: the claims 03 and 08 share.

Pretrained checkpoints come in families (sizes of one recipe, fine-tunes of one base), so a list of models is tested
with one unit per model family (:func:`effects_by_family`, :func:`attnstruct.stats.family_effect`), each claim
declared by :func:`family_claim`; the test over a run's own stacks (:func:`attnstruct.analyses.paper_comparison.
role_effect`) is the secondary claim :data:`STACKS`. Notebook 03 tests the authors' list of language models under its
plan (:data:`attnstruct.analyses.nb03_pretrained_models.PLAN`); notebook 08 asks the same of the models it swept
(:data:`attnstruct.analyses.nb08_model_sweep.PLAN`), each model's family from its ``model_type``.
"""

from __future__ import annotations

import pandas as pd

from .. import stats
from . import paper_comparison

STACK_CLAIM = "encoder minus decoder stacks, median symmetry over layers"  # paper_comparison.role_effect's claim


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
