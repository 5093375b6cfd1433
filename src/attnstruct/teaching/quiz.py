"""The handouts' quiz: fixed questions on the definitions, the invariances and the gradient, and data questions
whose answers come from the build (:class:`attnstruct.teaching.handout_contents.Build`); the student quiz prints
the prompts, the instructor's copy the answer key as well."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ..analyses import nb02_scores
from ..report.prose import count, signed
from .handout_contents import Build, _stacks, headline, short


@dataclass
class Question:
    """A quiz question: its topic, the prompt, the options of a multiple choice (none: a short answer), the answer
    key and where a data answer comes from."""

    topic: str
    prompt: str
    answer: str
    options: tuple[str, ...] = ()
    source: str = ""


def _q_invariance(build: Build) -> Question | None:
    """Which transforms of one matrix leave its directionality unchanged, read from notebook 02's dataset by
    :func:`attnstruct.analyses.nb02_scores.unchanged`."""
    ds = build.notebook_dataset("02_scores") if build.ran.get("02_scores") else None
    if ds is None or "invariant_directionality" not in ds:
        return None
    table = pd.DataFrame({s: ds[f"invariant_{s}"].to_series() for s in ("symmetry", "directionality")})
    others = [t for t in table.index if t != "M"]
    same = [t for t in others if nb02_scores.unchanged(table, "directionality", [t])]
    flipped = [t for t in others if t not in same and nb02_scores.unchanged(table, "directionality", [t], sign=-1)]
    changed = [t for t in others if t not in same and t not in flipped]
    symmetric = nb02_scores.unchanged(table, "symmetry", others)
    return Question(
        "invariances",
        "Notebook 02 scores one matrix M with a few dominant columns and five transforms of it: "
        + ", ".join(others)
        + ". Which transforms leave the directionality score unchanged, which flip "
        "its sign, and which change it otherwise?",
        f"Unchanged: {', '.join(same) or 'none'}. Sign flipped: {', '.join(flipped) or 'none'} (rows and columns "
        f"swap roles). Changed: {', '.join(changed) or 'none'} (row and column norms depend on the basis; in this "
        f"build M scores {signed(table.loc['M', 'directionality'])}"
        + "".join(f", {t} {signed(table.loc[t, 'directionality'])}" for t in changed)
        + f"). The symmetry score is {'the same for all six' if symmetric else 'not the same for all six'}.",
        source="notebook 02_scores, dataset results/02_scores.nc (invariant_directionality)",
    )


def _q_accumulated(build: Build) -> Question | None:
    ds = build.notebook_dataset("04_gradient_structure") if build.ran.get("04_gradient_structure") else None
    if ds is None:
        return None
    last = ds.isel(n_sequences=-1).sel(task="copy")
    b, c = (float(last.accumulated_symmetry.sel(objective=o)) for o in ("bidirectional", "causal"))
    return Question(
        "gradient (data)",
        f"Notebook 04 sums the update -∂L/∂W_qk at initialisation over {count(int(last.n_sequences), 'sequence')} "
        "of the copy task. What symmetry score does the summed update reach under the bidirectional objective, "
        "and under the causal one?",
        f"Bidirectional {signed(b)}, causal {signed(c)}: every pair (i, j) enters the bidirectional update in both "
        "orders, the causal one only with j ≤ i.",
        source="notebook 04_gradient_structure, dataset results/04_gradient_structure.nc (accumulated_symmetry)",
    )


def _q_stacks(build: Build) -> Question | None:
    ds = build.notebook_dataset("03_pretrained_models") if build.ran.get("03_pretrained_models") else None
    if ds is None:
        return None
    g, effect = _stacks(ds), headline(build, "03_pretrained_models")
    verdict = f" The stored test over stacks reads: {short(effect)}." if effect else ""
    return Question(
        "findings (data)",
        "Notebook 03 scores the packaged pretrained checkpoints. What median symmetry over layers do their encoder "
        "stacks and their decoder stacks reach (median over stacks), and what does the test over stacks conclude?",
        f"Encoder stacks {signed(g.loc['encoder', 'symmetry_median'])}, decoder stacks "
        f"{signed(g.loc['decoder', 'symmetry_median'])}.{verdict}",
        source="notebook 03_pretrained_models, dataset results/03_pretrained_models.nc (symmetry, verdicts)",
    )


def _q_effect(build: Build, notebook: str, prompt: str) -> Question | None:
    effect = headline(build, notebook) if build.ran.get(notebook) else None
    if effect is None:
        return None
    return Question(
        "findings (data)",
        prompt,
        f"{effect.claim}: {short(effect)} ({effect.reason}).",
        source=f"notebook {notebook}, dataset results/{notebook}.nc (verdicts)",
    )


def quiz(build: Build) -> list[Question]:
    """About eight questions: definitions, invariances, the gradient as a sum of outer products, the findings of
    this build (data questions whose notebook did not run are left out)."""
    fixed = [
        Question(
            "definitions",
            "Head h has query and key weights W_q^h, W_k^h ∈ ℝ^(d × d_h) (tokens as rows). What is the shape of "
            "W_qk^h = W_q^h (W_k^h)ᵀ?",
            "(b) d × d: it is the bilinear form a_ij = x_iᵀ W_qk^h x_j on the d-dimensional token vectors; the N × N "
            "matrix is the matrix of logits X W_qk^h Xᵀ.",
            ("d_h × d_h", "d × d", "N × N (N tokens)", "d × d_h"),
        ),
        Question(
            "definitions",
            "What symmetry score s(M) = (‖M_s‖² − ‖M_n‖²)/‖M‖² does a symmetric matrix get, a skew-symmetric one, "
            "and a large matrix of i.i.d. Gaussian entries?",
            "+1 (M_n = 0), −1 (M_s = 0), and about 0 (both parts carry half of the energy).",
        ),
        Question(
            "definitions",
            "The directionality score of W_qk is clearly negative. What does W_qk look like?",
            "(c) a few columns have outlying norms (column dominance): some keys draw attention from every query.",
            (
                "it is symmetric",
                "a few rows have outlying norms",
                "a few columns have outlying norms",
                "all its entries are positive",
            ),
        ),
        Question(
            "invariances",
            "Why does M → Q M Qᵀ (Q orthogonal) leave the symmetry score unchanged, and why is any symmetric matrix's "
            "directionality exactly 0?",
            "Both tr(M M) and ‖M‖_F² are unchanged by an orthogonal change of basis, and s(M) = tr(M M)/‖M‖_F². A "
            "symmetric matrix has the same row and column norms, so R = C and (R − C)/(R + C) = 0.",
        ),
        Question(
            "gradient",
            "The gradient is a sum of outer products, ∂L/∂W_qk = Σ_i Σ_(j ∈ D_i) β_ij x_i x_jᵀ. Which pairs (i, j) "
            "does a causal mask keep, and why does a bidirectional objective push W_qk towards symmetry?",
            "A causal mask keeps j ≤ i only. With every pair present in both orders, β_ij x_i x_jᵀ + β_ji x_j x_iᵀ "
            "is symmetric to the extent that β_ij ≈ β_ji, so the symmetric parts add up over training; under a causal "
            "mask the early positions are keys for many queries, which favours column dominance.",
        ),
    ]
    data = [
        _q_invariance(build),
        _q_accumulated(build),
        _q_stacks(build),
        _q_effect(
            build,
            "05_training_dynamics",
            "Notebook 05 trains the same Transformer as an encoder (masked LM) and as a decoder (next token). "
            "What is the encoder minus decoder final median symmetry in this build, and its verdict?",
        ),
        _q_effect(
            build,
            "06_symmetric_init",
            "Notebook 06 starts training from W_q = W_k. By how much does it change the final validation loss "
            "(baseline minus symmetric), and what is the verdict?",
        ),
    ]
    return fixed[:3] + [q for q in data[:1] if q] + fixed[3:] + [q for q in data[1:] if q]
