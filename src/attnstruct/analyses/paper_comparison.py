"""Our scores of many models beside the values the paper's authors reported (notebooks 03, 07 and 08).

The reference table (``attnstruct/reference/paper_reported_pretrained.csv``, package data) gives, per model
and role, the authors' median and quartiles over layers of both scores, and a ``caveats`` column that flags
entries their extraction likely got wrong. :func:`reported_vision` groups the vision rows by how those
models were trained (notebook 07). :func:`agreement` pairs each of our (model, stack) summaries with
the authors' row for the same model and role; :func:`largest_disagreements` ranks the pairs and attaches the
known explanation. A row whose caveat says the authors scored decoder *cross*-attention is paired with our
``cross`` stack, so that like is compared with like. :func:`reported_group_medians` summarises the authors'
rows by role, the numbers notebook 03 quotes beside its own (:func:`group_medians`); :func:`roles_beside_paper` is
the facts record of both, which the title of the main figure of notebooks 03 and 08 states.

Whether encoder stacks are more symmetric than decoder stacks is a test, :func:`role_effect` (the one rule of
:mod:`attnstruct.stats`, with :func:`stack_reach` saying what the stacks of a run can show at all);
:func:`ordering_probability`, the share of (encoder, decoder) pairs in the paper's order, only describes them.
Every one of them reads the ``encoder`` and ``decoder`` groups of :func:`stack_groups`: a vision transformer's stack
(role ``vision encoder``) is a group of its own, never pooled with the text and audio encoders.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import stats
from ..report import prose

CAVEAT_EXPLANATIONS = {
    "gqa_head_pairing_suspect": (
        "grouped-query attention: the authors' code paired query head h with key head h mod n_kv, not "
        "h // (H / n_kv), so their layer matrix multiplies unrelated heads"
    ),
    "fused_qkv_branch_suspect": (
        "fused QKV weight: the authors' code took contiguous [q|k|v] blocks without transposing, which is not "
        "the layer matrix (W_q^T W_k in nn.Linear weights) for per-head interleaved layouts (GPT-NeoX, "
        "DeBERTa-v1) or for ModernBERT"
    ),
    "scored_random_init": "the authors scored a randomly initialised model (built from its config, no weights)",
    "looks_random_init": "the authors' value is what a randomly initialised model gives (symmetry 0.000)",
    "cross_attention_not_self": "the authors' 'decoder' value is the decoder's cross-attention, not self-attention",
    "decoder_not_causal": "the authors' 'decoder' is a bidirectional stack (object queries), not an autoregressive one",
    "vision_tower_encoder": "the authors' 'decoder' is a vision tower, a ViT encoder",
}
SCORES = ("symmetry", "directionality")


def explain(caveats: str | float | None) -> str:
    """The known explanation(s) of a reference row's caveats (``;``-separated), or ``""`` for none."""
    if not isinstance(caveats, str) or not caveats:
        return ""
    return "; ".join(CAVEAT_EXPLANATIONS.get(c, c) for c in caveats.split(";"))


def agreement(summary: pd.DataFrame, reference: pd.DataFrame) -> pd.DataFrame:
    """Ours against the authors', one row per (model, stack) that both have.

    Args:
        summary: :func:`attnstruct.analyses.pretrained_scores.stack_summary` of our scores (``model``, ``stack``,
            ``n_params``, ``{score}_median``, ``{score}_q25``, ``{score}_q75``).
        reference: the authors' table (:func:`attnstruct.reference.reference_table`).

    Returns:
        ``model, stack, domain, caveats, n_params``, then per score ``ours_{score}``, ``paper_{score}``,
        ``diff_{score}`` (ours minus theirs) and our quartiles; sorted by model and stack.
    """
    ref = reference.copy()
    cross = ref["caveats"].fillna("").str.contains("cross_attention_not_self")
    ref["stack"] = np.where(cross, "cross", ref["role"])
    ref = ref.drop_duplicates(["model", "stack"])
    columns = {f"{s}_median": f"paper_{s}" for s in SCORES}
    ref = ref.rename(columns={**columns, "family": "domain"})[
        ["model", "stack", "domain", "caveats", *columns.values()]
    ]
    ours = summary.rename(columns={f"{s}_median": f"ours_{s}" for s in SCORES})
    merged = ours.merge(ref, on=["model", "stack"], how="inner")
    for s in SCORES:
        merged[f"diff_{s}"] = merged[f"ours_{s}"] - merged[f"paper_{s}"]
    merged["caveats"] = merged["caveats"].fillna("")
    keep = ["model", "stack", "domain", "caveats", "n_params"]
    keep += [f"{p}_{s}" for s in SCORES for p in ("ours", "paper", "diff")]
    keep += [f"{s}_{q}" for s in SCORES for q in ("q25", "q75")]
    return merged[keep].sort_values(["model", "stack"]).reset_index(drop=True)


def largest_disagreements(table: pd.DataFrame, n: int = 10) -> pd.DataFrame:
    """The ``n`` rows of :func:`agreement` with the largest ``max(|diff_symmetry|, |diff_directionality|)``, with
    ``explanation`` (from the caveats; ``"none known"`` where there is none)."""
    gap = table[[f"diff_{s}" for s in SCORES]].abs().max(axis=1)
    out = table.assign(largest_gap=gap).sort_values("largest_gap", ascending=False).head(n)
    explanation = out["caveats"].map(explain).replace("", "none known")
    return out.assign(explanation=explanation).reset_index(drop=True)


VISION = "vision encoder"  # the role of a vision transformer (attnstruct.checkpoints.tables.role_of)
GROUPS = ("encoder", "decoder", VISION)  # the groups of self-attention stacks, in the order they are stated


def stack_groups(summary: pd.DataFrame) -> pd.Series:
    """The group of each stack of ``summary``: ``vision encoder`` for the stacks of a model of that ``role`` (a
    vision transformer), else its ``stack`` (``encoder``, ``decoder``, ``cross``). The paper draws its vision models
    apart from its language models, so every comparison of encoders with decoders here reads the ``encoder`` and
    ``decoder`` groups, text and audio stacks, and a vision encoder's stack is in neither."""
    if "role" not in summary.columns:
        return summary["stack"]
    return summary["stack"].where(summary["role"] != VISION, VISION)


def _of_group(summary: pd.DataFrame, group: str) -> pd.DataFrame:
    return summary[stack_groups(summary) == group]


def group_medians(summary: pd.DataFrame, groups=("encoder", "decoder")) -> pd.DataFrame:
    """Per group of stacks (:func:`stack_groups`; ``groups``: ``encoder`` and ``decoder`` unless asked for
    :data:`GROUPS`; cross-attention left out), named ``stack``: how many model stacks, and the median, minimum and
    maximum of their median scores."""
    rows = []
    for group in groups:
        part = _of_group(summary, group)
        row = {"stack": group, "n": len(part)}
        for s in SCORES:
            values = part[f"{s}_median"]
            row |= {f"{s}_median": values.median(), f"{s}_min": values.min(), f"{s}_max": values.max()}
        rows.append(row)
    return pd.DataFrame(rows)


def reported_group_medians(reference: pd.DataFrame, family: str = "language", *, clean: bool = False) -> pd.DataFrame:
    """The authors' rows of ``family`` by role (``encoder``, ``decoder``), as :func:`group_medians` gives ours:
    ``stack`` (the authors' role), ``n`` and the median, minimum and maximum of their per-model median scores.

    ``clean``: leave out the rows with a caveat. These are the authors' result files' numbers
    (:func:`attnstruct.reference.reference_table`), not measurements of this project.
    """
    rows = reference[reference["family"] == family]
    if clean:
        rows = rows[rows["caveats"].isna()]
    return group_medians(rows.assign(stack=rows["role"]))


@dataclass(frozen=True)
class RolesFacts:
    """Our encoder stacks' median symmetry (median over stacks of their medians over layers) ``compared`` with the
    decoder stacks' (``more symmetric than``, ``less symmetric than``, ``as symmetric as``): ``encoders`` against
    ``decoders`` over ``stacks``, and the authors' language models' ``paper_encoders`` against ``paper_decoders``
    (all rows); what the titles of the main figure of notebooks 03 and 08 state. Without both roles (``both_roles``
    false): the ``present`` role's stacks and their ``present_median``."""

    both_roles: bool
    compared: str
    encoders: str
    decoders: str
    stacks: str
    paper_encoders: str
    paper_decoders: str
    present: str
    present_median: str


def roles_beside_paper(summary: pd.DataFrame, reference: pd.DataFrame) -> RolesFacts:
    """The facts of our stacks' median symmetry per role beside the authors' (cross-attention left out)."""
    ours = group_medians(summary).set_index("stack")
    theirs = reported_group_medians(reference).set_index("stack")
    enc, dec = (float(ours.loc[s, "symmetry_median"]) for s in ("encoder", "decoder"))
    present = "encoder" if np.isfinite(enc) else "decoder"
    return RolesFacts(
        both_roles=bool(np.isfinite(enc) and np.isfinite(dec)),
        compared=prose.compared(enc, dec),
        encoders=prose.signed(enc),
        decoders=prose.signed(dec),
        stacks=prose.count(int(ours["n"].sum()), "stack"),
        paper_encoders=prose.signed(theirs.loc["encoder", "symmetry_median"]),
        paper_decoders=prose.signed(theirs.loc["decoder", "symmetry_median"]),
        present=prose.count(int(ours["n"].sum()), f"{present} stack"),
        present_median=prose.signed(enc if np.isfinite(enc) else dec),
    )


def ordering_probability(summary: pd.DataFrame, score: str = "symmetry") -> float:
    """Fraction of (encoder stack, decoder stack) pairs in which the encoder's median ``score`` is the larger
    (ties count half); NaN without both. A description of the stacks scored, not a test: the test of the same
    ordering is :func:`role_effect`."""
    enc, dec = (_of_group(summary, s)[f"{score}_median"].to_numpy() for s in ("encoder", "decoder"))
    if not len(enc) or not len(dec):
        return float("nan")
    diff = enc[:, None] - dec[None, :]
    return float(((diff > 0) + 0.5 * (diff == 0)).mean())


ALPHA = 0.05


def role_values(summary: pd.DataFrame, score: str = "symmetry") -> tuple[np.ndarray, np.ndarray]:
    """The median ``score`` over layers of each encoder and each decoder self-attention stack of ``summary``
    (cross-attention and vision encoders left out, :func:`stack_groups`): two arrays, one value per stack."""
    return tuple(_of_group(summary, s)[f"{score}_median"].to_numpy(float) for s in ("encoder", "decoder"))


def role_effect(summary: pd.DataFrame, score: str = "symmetry", *, alpha: float = ALPHA, seed: int = 0):
    """The paper's ordering as a test: encoder stacks minus decoder stacks, in their median ``score`` over layers
    (:func:`role_values`), by :func:`attnstruct.stats.two_sample_effect` (unit: a stack; predicted positive for both
    scores: encoders more symmetric and less column-dominant). None without a stack of each role.

    The two stacks of one encoder-decoder model are one unit of each group; the verdict is the one rule's, whose
    smallest attainable p here is :func:`smallest_two_sample_p`. Pretrained checkpoints learned their task, so no
    gating on learning applies.
    """
    encoders, decoders = role_values(summary, score)
    if not len(encoders) or not len(decoders):
        return None
    claim = f"encoder minus decoder stacks, median {score} over layers"
    return stats.two_sample_effect(encoders, decoders, claim=claim, unit="stack", alpha=alpha, seed=seed)


def stack_reach(summary: pd.DataFrame, alpha: float = ALPHA) -> stats.DesignReach:
    """What the stacks of ``summary`` can show (:func:`attnstruct.stats.design_reach` of the encoder stacks against
    the decoder stacks): the permutation test's smallest attainable p against ``alpha``, and how many stacks of each
    role it takes to go below it. ``ValueError`` without a stack of each role: there is nothing to compare."""
    n, m = (len(v) for v in role_values(summary))
    if not n or not m:
        raise ValueError(f"the stacks' reach needs an encoder and a decoder stack, got {n} and {m}")
    return stats.design_reach(
        n, control=m, balanced=True, alpha=alpha, unit="encoder stack", control_unit="decoder stack"
    )


# The authors' vision models grouped by how they were trained (the reference table's names), with the objective of
# attnstruct.tasks.vision that imitates each group: ViT and DeiT read the class from [CLS], so ``classify``.
REPORTED_GROUPS = (
    ("supervised (ViT, DeiT)", "classify", ("google/vit-", "facebook/deit-")),
    ("masked image modelling (BEiT, MAE, DiT)", "masked", ("microsoft/beit-", "facebook/vit-mae-", "microsoft/dit-")),
    ("autoregressive (iGPT)", "next-patch", ("openai/imagegpt-",)),
    ("other encoders (DINO, DINOv2, GIT, DETR)", None, ("facebook/dino", "microsoft/git-", "facebook/detr-")),
)


def reported_vision(reference: pd.DataFrame) -> pd.DataFrame:
    """The vision rows of the authors' reported table without caveats, with a ``group`` and the matching
    ``objective`` of :mod:`attnstruct.tasks.vision` (None for encoders trained otherwise). These are the paper's
    numbers."""
    vision = reference[(reference.family == "vision") & reference.caveats.isna()].copy()
    group, objective = [], []
    for model in vision.model:
        match = next((g for g in REPORTED_GROUPS if model.startswith(g[2])), ("other", None, ()))
        group.append(match[0])
        objective.append(match[1])
    vision["group"], vision["objective"] = group, objective
    return vision.reset_index(drop=True)
