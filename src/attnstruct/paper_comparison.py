"""Our scores of many models beside the values the paper's authors reported (notebook 08).

The reference table (``attnstruct/reference/paper_reported_pretrained.csv``, package data) gives, per model
and role, the authors' median and quartiles over layers of both scores, and a ``caveats`` column that flags
entries their extraction likely got wrong. :func:`reported_vision` groups the vision rows by how those
models were trained (notebook 07). :func:`agreement` pairs each of our (model, stack) summaries with
the authors' row for the same model and role; :func:`largest_disagreements` ranks the pairs and attaches the
known explanation. A row whose caveat says the authors scored decoder *cross*-attention is paired with our
``cross`` stack, so that like is compared with like. :func:`reported_group_medians` summarises the authors'
rows by role, the numbers notebook 03 quotes beside its own (:func:`group_medians`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

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
        summary: :func:`attnstruct.pretrained.summary` of our scores (``model``, ``stack``, ``n_params``,
            ``{score}_median``, ``{score}_q25``, ``{score}_q75``).
        reference: the authors' table (:func:`attnstruct.pretrained.reference_table`).

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


def group_medians(summary: pd.DataFrame) -> pd.DataFrame:
    """Per stack (``encoder``, ``decoder``; cross-attention left out): how many model stacks, and the median,
    minimum and maximum of their median scores."""
    rows = []
    for stack in ("encoder", "decoder"):
        part = summary[summary["stack"] == stack]
        row = {"stack": stack, "n": len(part)}
        for s in SCORES:
            values = part[f"{s}_median"]
            row |= {f"{s}_median": values.median(), f"{s}_min": values.min(), f"{s}_max": values.max()}
        rows.append(row)
    return pd.DataFrame(rows)


def reported_group_medians(reference: pd.DataFrame, family: str = "language", *, clean: bool = False) -> pd.DataFrame:
    """The authors' rows of ``family`` by role (``encoder``, ``decoder``), as :func:`group_medians` gives ours:
    ``stack`` (the authors' role), ``n`` and the median, minimum and maximum of their per-model median scores.

    ``clean``: leave out the rows with a caveat. These are the authors' result files' numbers
    (:func:`attnstruct.pretrained.reference_table`), not measurements of this project.
    """
    rows = reference[reference["family"] == family]
    if clean:
        rows = rows[rows["caveats"].isna()]
    return group_medians(rows.assign(stack=rows["role"]))


def ordering_probability(summary: pd.DataFrame, score: str = "symmetry") -> float:
    """Fraction of (encoder stack, decoder stack) pairs in which the encoder's median ``score`` is the larger
    (ties count half); NaN without both. The paper's claim for symmetry is that this is near 1."""
    enc = summary.loc[summary["stack"] == "encoder", f"{score}_median"].to_numpy()
    dec = summary.loc[summary["stack"] == "decoder", f"{score}_median"].to_numpy()
    if not len(enc) or not len(dec):
        return float("nan")
    diff = enc[:, None] - dec[None, :]
    return float(((diff > 0) + 0.5 * (diff == 0)).mean())


def is_papers_ordering(probability: float) -> bool:
    """Whether an :func:`ordering_probability` reads as the paper's ordering: the encoder stack is the larger in
    more than half of the (encoder, decoder) pairs (False for NaN). A description of the stacks scored, not a
    test: with a few stacks no test could reach a verdict."""
    return bool(probability > 0.5)


def describe(summary: pd.DataFrame, table: pd.DataFrame) -> list[str]:
    """Sentences that state what the sweep found, computed from ``summary`` and :func:`agreement`'s ``table``."""
    groups = group_medians(summary).set_index("stack")
    lines = []
    for stack in ("encoder", "decoder"):
        g = groups.loc[stack]
        if g["n"]:
            lines.append(
                f"{int(g['n'])} {stack} stacks: median symmetry {g['symmetry_median']:+.2f} (range "
                f"{g['symmetry_min']:+.2f} to {g['symmetry_max']:+.2f}), median directionality "
                f"{g['directionality_median']:+.2f} (range {g['directionality_min']:+.2f} to "
                f"{g['directionality_max']:+.2f})."
            )
    p_sym, p_dir = ordering_probability(summary, "symmetry"), ordering_probability(summary, "directionality")
    if p_sym == p_sym:
        lines.append(
            f"An encoder stack is more symmetric than a decoder stack in {p_sym:.0%} of (encoder, decoder) pairs, "
            f"and less column-dominant (higher directionality) in {p_dir:.0%}."
        )
    if len(table):
        clean = table[table["caveats"] == ""]
        for name, part in (("without a known caveat", clean), ("with a caveat", table[table["caveats"] != ""])):
            if len(part):
                lines.append(
                    f"{len(part)} stacks also reported by the authors {name}: median |ours - theirs| "
                    f"{part['diff_symmetry'].abs().median():.3f} in symmetry, "
                    f"{part['diff_directionality'].abs().median():.3f} in directionality."
                )
    else:
        lines.append(
            "None of the scored models is in the authors' list, so there is nothing to compare point by point."
        )
    return lines


# The authors' vision models grouped by how they were trained (the reference table's names).
REPORTED_GROUPS = (
    ("supervised (ViT, DeiT)", "classify", ("google/vit-", "facebook/deit-")),
    ("masked image modelling (BEiT, MAE, DiT)", "masked", ("microsoft/beit-", "facebook/vit-mae-", "microsoft/dit-")),
    ("autoregressive (iGPT)", "next-patch", ("openai/imagegpt-",)),
    ("other encoders (DINO, DINOv2, GIT, DETR)", None, ("facebook/dino", "microsoft/git-", "facebook/detr-")),
)


def reported_vision(reference: pd.DataFrame) -> pd.DataFrame:
    """The vision rows of the authors' reported table without caveats, with a ``group`` and the matching
    ``objective`` of :mod:`attnstruct.vision` (None for encoders trained otherwise). These are the paper's numbers."""
    vision = reference[(reference.family == "vision") & reference.caveats.isna()].copy()
    group, objective = [], []
    for model in vision.model:
        match = next((g for g in REPORTED_GROUPS if model.startswith(g[2])), ("other", None, ()))
        group.append(match[0])
        objective.append(match[1])
    vision["group"], vision["objective"] = group, objective
    return vision.reset_index(drop=True)
