"""Public checkpoint series for the claim at scale, as data, and their checkpoints as one table of entries.

Three kinds of evidence, each a list of checkpoints (hub ids ``ORG/NAME[@REVISION]`` or local folders):

* **matched pairs** (``pair``): an encoder and a decoder trained on the same data with the same recipe and shapes,
  so that only the objective and the mask differ. The Ettin suite (Weller et al. 2025) has one pair per size,
  ``jhu-clsp/ettin-encoder-{size}`` (masked LM) and ``jhu-clsp/ettin-decoder-{size}`` (causal LM); the unit is the size.
* **trajectories** (``trajectory``): checkpoints of one training run over its steps, one run per seed where seeds
  exist. Pythia and its PolyPythias seeds (``EleutherAI/pythia-160m``, ``...-seed1`` to ``...-seed9``; branches
  ``step0`` to ``step143000``, 2,097,152 tokens per step), MultiBERTs (``google/multiberts-seed_{s}-step_{N}k``,
  separate repositories, 29 per seed from ``step_0k`` to ``step_2000k``, 256 x 512 tokens per step; the final
  checkpoint is also published as ``google/multiberts-seed_{s}``, whose name holds no step, so the catalogue names
  it ``-step_2000k``, as its model card and that of ``google/multiberts-seed_2-step_2000k`` call it), Ettin's tagged
  checkpoints (``step*``, then ``ext*``, then ``decay*``), OLMo's branches (``step20000-tokens84B``: the tokens are
  in the name).
* **cross-objective continued training** (``cross``): a model trained with one objective (``before``) and the same
  model trained on with the other (``after``): Ettin's ``ettin-enc-from-dec-{size}`` (a decoder continued as an
  encoder) and ``ettin-dec-from-enc-{size}``; the unit is the size.

:func:`entries` expands the named series into the table that notebook 09 reads (:data:`ENTRY_COLUMNS`), listing a
repository's revisions through :func:`attnstruct.checkpoints.revisions.list_revisions` (hub access) and keeping at
most ``max_checkpoints`` of each run, spread evenly in ``log(1 + step)`` (:func:`thinned_step_indices`). A checkpoint
named here that does not exist on the hub fails in the sweep with the kind ``not found``, listed in its
``failures.csv``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

# One row per use of a checkpoint: a model can be in several (a final snapshot is a pair member and a "before").
ENTRY_COLUMNS = ("model", "kind", "series", "role", "unit", "seed", "stage", "step", "tokens")
KINDS = ("trajectory", "pair", "cross", "control")  # control: a local run continued with its own objective
ETTIN_SIZES = ("17m", "32m", "68m", "150m", "400m", "1b")


@dataclass(frozen=True)
class Shape:
    """What a range read of one checkpoint costs: its attention shape and how its weights are stored (from the
    model's ``config.json``), for :func:`query_key_bytes`."""

    n_layers: int
    d_model: int
    n_heads: int
    d_head: int
    bytes_per_value: int
    bias: bool
    fused_per_head: bool = False  # one QKV weight, each head's query, key and value rows together (GPT-NeoX)

    def query_key_bytes(self) -> int:
        return query_key_bytes(
            self.n_layers, self.d_model, self.n_heads, self.d_head, bytes_per_value=self.bytes_per_value, bias=self.bias
        )


ETTIN_SHAPES = {  # layers, width, heads of 64 each; float32, no attention biases
    "17m": Shape(7, 256, 4, 64, 4, False),
    "32m": Shape(10, 384, 6, 64, 4, False),
    "68m": Shape(19, 512, 8, 64, 4, False),
    "150m": Shape(22, 768, 12, 64, 4, False),
    "400m": Shape(28, 1024, 16, 64, 4, False),
    "1b": Shape(28, 1792, 28, 64, 4, False),
}


@dataclass(frozen=True)
class Trajectory:
    """One series of training checkpoints: ``runs[s]`` is seed ``s``'s repository, whose revisions matching
    ``match`` are its checkpoints; or, with ``match`` None, ``runs[s]`` lists the checkpoints themselves (one
    repository each, their steps read from the names)."""

    name: str
    role: str  # encoder or decoder: the objective's attention
    runs: tuple
    match: str | None
    tokens_per_step: float = math.nan
    about: str = ""
    shape: Shape | None = None


def _multiberts_steps() -> tuple[int, ...]:
    """MultiBERTs' 29 checkpoints (thousands of steps): every 20k to 200k, then every 100k to 2000k, the final."""
    return (*range(0, 201, 20), *range(300, 2001, 100))


TRAJECTORIES = {
    t.name: t
    for t in (
        Trajectory(
            "pythia-160m",
            "decoder",
            ("EleutherAI/pythia-160m", *(f"EleutherAI/pythia-160m-seed{s}" for s in range(1, 10))),
            r"^step\d+$",
            2_097_152.0,
            "GPT-NeoX decoders on the Pile, the original and the nine PolyPythias seeds",
            Shape(12, 768, 12, 64, 2, True, fused_per_head=True),
        ),
        Trajectory(
            "multiberts",
            "encoder",
            tuple(tuple(f"google/multiberts-seed_{s}-step_{k}k" for k in _multiberts_steps()) for s in range(5)),
            None,
            256.0 * 512.0,
            "BERT-base encoders (masked LM and next-sentence prediction), five seeds",
            Shape(12, 768, 12, 64, 4, True),
        ),
        Trajectory(
            "ettin-150m-encoder",
            "encoder",
            ("jhu-clsp/ettin-encoder-150m",),
            r"^(step|ext|decay)\d+$",
            about="ModernBERT-style encoder, pre-training, context extension and decay",
            shape=ETTIN_SHAPES["150m"],
        ),
        Trajectory(
            "ettin-150m-decoder",
            "decoder",
            ("jhu-clsp/ettin-decoder-150m",),
            r"^(step|ext|decay)\d+$",
            about="the same recipe and shapes as a causal decoder",
            shape=ETTIN_SHAPES["150m"],
        ),
        Trajectory(
            "olmo-1b",
            "decoder",
            ("allenai/OLMo-1B-hf",),
            r"^step\d+-tokens\d+B$",
            about="OLMo-1 decoder; the tokens seen are in the branch names",
            shape=Shape(16, 2048, 16, 128, 4, False),
        ),
    )
}
PAIRS = {
    "ettin": tuple((size, f"jhu-clsp/ettin-encoder-{size}", f"jhu-clsp/ettin-decoder-{size}") for size in ETTIN_SIZES)
}
CROSSES = {
    "ettin decoder continued as encoder": tuple(
        (size, "encoder", f"jhu-clsp/ettin-decoder-{size}", f"jhu-clsp/ettin-enc-from-dec-{size}")
        for size in ETTIN_SIZES
    ),
    "ettin encoder continued as decoder": tuple(
        (size, "decoder", f"jhu-clsp/ettin-encoder-{size}", f"jhu-clsp/ettin-dec-from-enc-{size}")
        for size in ETTIN_SIZES
    ),
}


def query_key_bytes(
    n_layers: int,
    d_model: int,
    n_heads: int,
    d_head: int,
    *,
    n_kv_heads: int | None = None,
    bytes_per_value: int = 4,
    bias: bool = False,
) -> int:
    """Bytes of a model's query and key weights (and biases): what a range read of one checkpoint transfers besides
    its index (a safetensors header, or a torch ZIP's directory and pickle).

    ``n_layers * (n_heads + n_kv_heads) * d_head * (d_model + bias) * bytes_per_value``, ``n_kv_heads`` defaulting
    to ``n_heads``: each layer's ``W_q`` is ``[n_heads d_head, d_model]`` and ``W_k`` ``[n_kv_heads d_head,
    d_model]``, one bias per row. A fused QKV weight read by rows costs the same (its value rows are skipped).
    """
    for name, value in (("n_layers", n_layers), ("d_model", d_model), ("n_heads", n_heads), ("d_head", d_head)):
        if int(value) != value or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    rows = int(n_heads) + int(n_kv_heads if n_kv_heads is not None else n_heads)
    return int(n_layers) * rows * int(d_head) * (int(d_model) + int(bool(bias))) * int(bytes_per_value)


def thinned_step_indices(steps: Sequence[float], keep: int, *, log: bool = True) -> list[int]:
    """Indices of ``keep`` of ``steps`` (ascending, finite; all of them when there are no more), spread evenly in
    ``log(1 + step)`` (or in ``step`` with ``log=False``), the first and the last always kept: Pythia's 154
    checkpoints are dense early (``step1, 2, 4, ... 512``) and every 1,000 steps after, and a log axis is where the
    early dynamics can be seen. Each of ``keep`` even targets takes its nearest step; where two targets take one
    (MultiBERTs: nothing between step 0 and 20k), the steps farthest from those taken are added, one by one, until
    ``keep`` are. ``ValueError`` for ``keep`` below 2 or a step that is not a number."""
    steps = np.asarray(steps, dtype=float)
    if keep < 2:
        raise ValueError(f"max_checkpoints must be at least 2, got {keep}")
    if not np.isfinite(steps).all():
        raise ValueError("every checkpoint of a series needs a step to be thinned by; one has none (NaN)")
    if len(steps) <= keep:
        return list(range(len(steps)))
    position = np.log1p(np.maximum(steps, 0.0)) if log else steps
    targets = np.linspace(position[0], position[-1], keep)
    chosen = {int(np.argmin(np.abs(position - t))) for t in targets} | {0, len(steps) - 1}
    while len(chosen) < keep:
        taken = position[sorted(chosen)]
        distance = np.abs(position[:, None] - taken[None, :]).min(axis=1)
        distance[sorted(chosen)] = -1.0
        chosen.add(int(np.argmax(distance)))
    return sorted(chosen)


def _row(model, kind, series, role, unit, seed=-1, stage="", step=math.nan, tokens=math.nan) -> dict:
    return dict(
        model=model, kind=kind, series=series, role=role, unit=unit, seed=seed, stage=stage, step=step, tokens=tokens
    )


def trajectory_entries(trajectory: Trajectory, *, max_checkpoints: int, settings=None) -> list[dict]:
    """The entries of one trajectory, each seed's checkpoints thinned to ``max_checkpoints``
    (:func:`thinned_step_indices`)."""
    from .revisions import list_revisions, model_position

    rows = []
    for seed, run in enumerate(trajectory.runs):
        if trajectory.match is None:
            lines = list(run)
            positions = [model_position(line)[1] for line in lines]
        else:
            table = list_revisions(run, match=trajectory.match, settings=settings)
            table = table[table["step"].notna()]
            lines = list(table["model"])
            positions = [model_position(line)[1] for line in lines]
        order = sorted(range(len(lines)), key=lambda i: (positions[i].phase, positions[i].step))
        lines, positions = [lines[i] for i in order], [positions[i] for i in order]
        phased = any(p.phase > 0 for p in positions)  # phases after pre-training restart their step count: by rank
        ranks = np.arange(len(lines), dtype=float)
        for i in thinned_step_indices(
            ranks if phased else [p.step for p in positions], max_checkpoints, log=not phased
        ):
            step, tokens = positions[i].step, positions[i].tokens
            if math.isnan(tokens) and not math.isnan(trajectory.tokens_per_step) and positions[i].phase == 0:
                tokens = step * trajectory.tokens_per_step
            rows.append(
                _row(lines[i], "trajectory", trajectory.name, trajectory.role, f"seed {seed}", seed, "", step, tokens)
            )
    return rows


def entries(
    trajectories: Sequence[str] = (),
    pairs: Sequence[str] = (),
    crosses: Sequence[str] = (),
    *,
    max_checkpoints: int = 16,
    settings=None,
) -> pd.DataFrame:
    """The entries (:data:`ENTRY_COLUMNS`) of the named series of :data:`TRAJECTORIES`, :data:`PAIRS` and
    :data:`CROSSES`. Unknown names raise ``ValueError`` listing the known ones; listing revisions needs the hub."""
    for names, known in ((trajectories, TRAJECTORIES), (pairs, PAIRS), (crosses, CROSSES)):
        unknown = [n for n in names if n not in known]
        if unknown:
            raise ValueError(f"unknown series {', '.join(unknown)}; known: {', '.join(known)}")
    rows = []
    for name in trajectories:
        rows += trajectory_entries(TRAJECTORIES[name], max_checkpoints=max_checkpoints, settings=settings)
    for name in pairs:
        for size, encoder, decoder in PAIRS[name]:
            rows += [_row(encoder, "pair", name, "encoder", size), _row(decoder, "pair", name, "decoder", size)]
    for name in crosses:
        for size, role, before, after in CROSSES[name]:
            rows += [
                _row(before, "cross", name, role, size, stage="before"),
                _row(after, "cross", name, role, size, stage="after"),
            ]
    return pd.DataFrame(rows, columns=list(ENTRY_COLUMNS))
