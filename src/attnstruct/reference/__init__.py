"""The reference CSVs, read as package data: numbers reported by the paper's authors, never our measurements.

The files of this folder (listed and described in its ``README.md``) ship inside the package, so a wheel or
any other non-editable install finds them as an editable one does. :func:`reference_path` locates one by name;
:func:`attnstruct.pretrained.reference_table` and :func:`attnstruct.training.reference_dynamics` read them.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

PRETRAINED = "paper_reported_pretrained.csv"
TRAINING_DYNAMICS = "paper_training_dynamics.csv"


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
