"""The reference CSVs, read as package data: numbers reported by the paper's authors, never our measurements.

The files of this folder (listed and described in its ``README.md``) ship inside the package, so a wheel or
any other non-editable install finds them as an editable one does. :func:`reference_path` locates one by name;
:func:`reference_table` reads the authors' per-model scores (notebooks 03, 07 and 08, and the sweep's ``paper``
list), :func:`training_dynamics` their runs from scratch (notebook 05) and :func:`symmetric_init` their speed-ups
of the symmetric initialisation (notebook 06).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pandas as pd

PRETRAINED = "paper_reported_pretrained.csv"
TRAINING_DYNAMICS = "paper_training_dynamics.csv"
SYMMETRIC_INIT = "paper_symmetric_init.csv"


def reference_names() -> list[str]:
    """Names of the reference CSVs shipped with the package, sorted."""
    return sorted(p.name for p in resources.files(__name__).iterdir() if p.name.endswith(".csv"))


def reference_path(name: str) -> Path:
    """The file ``name`` (e.g. ``paper_reported_pretrained.csv``) of the package's reference data.

    The package is installed as files (editable, wheel, conda), so the resource is a real path that pandas and
    ``open`` read. Raises ``FileNotFoundError`` naming the files there when ``name`` is not one of them.
    """
    path = resources.files(__name__) / name
    if not path.is_file():
        raise FileNotFoundError(f"no reference file {name!r} in attnstruct/reference; have {reference_names()}")
    return Path(str(path))


REFERENCE_CSV = reference_path(PRETRAINED)


def reference_table(path: str | Path | None = None) -> pd.DataFrame:
    """The authors' reported per-model scores (:data:`REFERENCE_CSV`, ``paper_reported_pretrained.csv``, package
    data; its README gives the columns), or the CSV at ``path``; numbers reported by the paper, not ours."""
    return pd.read_csv(path or REFERENCE_CSV)


# The authors' training runs: 32 sequences, 8 accumulation steps, 512 tokens each per optimiser step (their batch).
AUTHORS_TOKENS_PER_STEP = 32 * 8 * 512


def training_dynamics() -> pd.DataFrame:
    """The authors' medians over layers during training from scratch (``n_layers``, ``mode``, ``dataset``, ``step``,
    ``symmetry``, ``directionality``), recomputed from their result files; not ours."""
    return pd.read_csv(reference_path(TRAINING_DYNAMICS), comment="#")


def symmetric_init() -> pd.DataFrame:
    """The paper's speed-ups of the symmetric initialisation (``n_layers``, ``mode``, ``dataset``, the final losses,
    ``first_step_below``, ``speedup``; NaN where the symmetric run never reached the baseline's final loss),
    recomputed from the authors' result files; not measured here."""
    return pd.read_csv(reference_path(SYMMETRIC_INIT), comment="#")
