"""Sink diagnostics of the packaged checkpoints (a stand-in: no model is read here)."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

COLUMNS = (
    "model", "role", "layers", "heads", "sink_positions", "sink_mass", "uniform", "heads_above_0_3", "overlap_first",
    "overlap_first_expected", "overlap_first_p", "overlap_massive", "overlap_massive_expected", "ablation_change",
    "ablation_null_mean", "ablation_percentile", "layers_halved", "directionality", "directionality_without_first",
    "sink_directionality_correlation", "qk_norm", "query_bias", "key_bias", "key_bias_term", "seconds",
)  # fmt: skip


def diagnose_packaged(
    names: Sequence[str],
    *,
    cache_dir=None,
    n_sequences: int = 4,
    seq_len: int = 64,
    k: int = 10,
    ablation_draws: int = 20,
    seed: int = 0,
) -> tuple[pd.DataFrame, list[tuple[str, str]]]:
    """One row per model read (:data:`COLUMNS`) and ``(name, reason)`` for each model not read: here none is read."""
    return pd.DataFrame(columns=list(COLUMNS)), [(name, "not available") for name in names]


def held_out_passage() -> str:
    """A passage of English text no packaged model was trained on."""
    return "The quick brown fox jumps over the lazy dog."
