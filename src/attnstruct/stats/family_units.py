"""The pretrained population analysed by family: one value per family, so that fine-tunes and sizes of one model do
not count as independent evidence.

Pretrained checkpoints come in families (sizes of one recipe, fine-tunes of one base, stereo and mono variants): a
comparison that counts every checkpoint as a unit counts near-duplicates many times. Here the unit is the family:

* :func:`model_family`: the family of a checkpoint, from its ``model_type`` when known, else from its hub id;
* :func:`family_values`: one value per (family, role), the median over the family's checkpoints of that role;
* :func:`family_effect`: the verdict on "the treated role scores higher than the control role", a two-sample
  permutation test over families (:func:`attnstruct.stats.verdicts.two_sample_effect`, unit ``"family"``).
"""

from __future__ import annotations

import re

import pandas as pd

from .verdicts import Effect, two_sample_effect

_SEPARATORS = re.compile(r"[-_\s]+")
VENDOR_WORDS = frozenset({"meta", "openai", "google", "microsoft", "facebook", "hf"})  # a name's prefix, not a family


def model_family(model_id: str, model_type: str | None = None) -> str:
    """The family of a checkpoint: its ``model_type`` (lower case, ``-`` and ``_`` dropped) when given, else the
    first word of its hub name (after the last ``/``, lower case, split at ``-``, ``_`` or spaces) that is not a
    vendor's prefix (:data:`VENDOR_WORDS`: ``Meta-Llama-3-8B`` is a ``llama``, ``openai-gpt`` a ``gpt``).

    ``model_family("facebook/musicgen-stereo-small")`` is ``"musicgen"``; ``model_family("openai/whisper-tiny")`` is
    ``"whisper"``; ``model_family("cross-encoder/ms-marco-MiniLM-L-6-v2", "bert")`` is ``"bert"``.
    """
    if model_type is not None and str(model_type).strip() and str(model_type).lower() != "nan":
        return _SEPARATORS.sub("", str(model_type).strip().lower())
    name = str(model_id).strip().rstrip("/").rsplit("/", 1)[-1].lower()
    words = [word for word in _SEPARATORS.split(name) if word]
    first = next((word for word in words if word not in VENDOR_WORDS), words[0] if words else "")
    if not first:
        raise ValueError(f"cannot tell the family of model {model_id!r}")
    return first


def family_values(frame: pd.DataFrame, value: str, *, family: str = "family", role: str = "role") -> pd.DataFrame:
    """One row per (``family``, ``role``) of ``frame``: the median of column ``value`` over its rows (``value``), and
    how many rows it summarises (``n_models``). Rows with a missing ``value`` are left out."""
    missing = [c for c in (value, family, role) if c not in frame.columns]
    if missing:
        raise KeyError(f"frame has no column {missing}; it has {list(frame.columns)}")
    rows = frame.dropna(subset=[value])
    grouped = rows.groupby([family, role], sort=True)[value]
    return pd.DataFrame({"value": grouped.median(), "n_models": grouped.size()}).reset_index()


def family_effect(
    frame: pd.DataFrame,
    value: str,
    *,
    treated: str,
    control: str,
    claim: str,
    predicted_sign: int = +1,
    family: str = "family",
    role: str = "role",
    alpha: float = 0.05,
    seed: int = 0,
) -> Effect:
    """The effect of role ``treated`` against role ``control`` on ``value``, one unit per family
    (:func:`family_values`): :func:`~attnstruct.stats.verdicts.two_sample_effect` of the treated families' medians
    against the control families'. A family with checkpoints of both roles (an encoder-decoder) gives one unit to
    each group."""
    table = family_values(frame, value, family=family, role=role)
    groups = {name: table.loc[table[role] == name, "value"].to_numpy() for name in (treated, control)}
    empty = [name for name, values in groups.items() if len(values) == 0]
    if empty:
        raise ValueError(f"no family of role {empty} has a value of {value!r}")
    return two_sample_effect(
        groups[treated],
        groups[control],
        claim=claim,
        unit="family",
        predicted_sign=predicted_sign,
        alpha=alpha,
        seed=seed,
    )
