"""``attnstruct sweep --combine``: the output folders of a sweep's shards (or of any sweeps) merged into one.

:func:`combine_parts` reads every ``PART/models/*.nc`` and writes ``OUT/sweep.nc``
(:func:`attnstruct.checkpoints.tables.combine`) and ``OUT/failures.csv``:

* order: the models of the parts' lists (the whole list a shard recorded, ``listing``, else the part's own
  ``models``; lists of several parts one after the other, each model once), then any model no list names, by
  :func:`attnstruct.checkpoints.revisions.training_order` of its model line (step order within a phase, models
  without a step last, by name). The shards of one list so come back in that list's order;
* refused, in one line (:class:`~attnstruct.checkpoints.sweep.SweepError`): no part, a part without ``models/``,
  ``OUT`` being one of the parts, model files scored with other settings (``per_head``, ``num_std``,
  ``precision``, ``layout``) than the first, and a model scored in two files with different scores (the same scores
  twice are kept once);
* ``failures.csv``: the parts' failures one after the other, less those of models that another part scored.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
import xarray as xr

from ..results import load_dataset, provenance_attrs, save_dataset
from .revisions import model_position, training_order
from .sweep import HEAD_MATRIX, SweepError, SweepResult, write_failures
from .tables import LAYER_MATRIX, combine

SETTINGS = ("per_head", "num_std", "precision", "layout")


def _parameters(path: Path) -> dict:
    with xr.open_dataset(path, engine="h5netcdf") as ds:
        return json.loads(ds.attrs.get("parameters", "{}"))


def _listing(part: Path) -> list[str]:
    """The list the part was a shard of (or the part's own list); empty when it wrote no ``sweep.nc``."""
    path = part / "sweep.nc"
    if not path.is_file():
        return []
    parameters = _parameters(path)
    return list(parameters.get("listing") or parameters.get("models") or [])


def _scores(ds: xr.Dataset) -> xr.Dataset:
    """The scores alone: what two runs of one model must agree on (not the bytes fetched, not the time)."""
    return ds.reset_coords(drop=True)


def _check_parts(parts: Sequence, out: Path) -> list[Path]:
    if not parts:
        raise SweepError("--combine needs at least one sweep output folder")
    folders = [Path(p) for p in parts]
    for folder in folders:
        if not (folder / "models").is_dir():
            raise SweepError(f"--combine {folder}: no models/ folder there (not the output of attnstruct sweep)")
        if folder.resolve() == out.resolve():
            raise SweepError(f"--out {out} is one of the parts; combine into a folder of its own")
    if out.exists() and not out.is_dir():
        raise SweepError(f"--out {out} exists and is not a folder")
    return folders


def _read_models(folders: list[Path]) -> tuple[dict[str, xr.Dataset], dict]:
    """Each model's dataset by model line, and the settings they share; refuses mixed settings and disagreements."""
    datasets: dict[str, xr.Dataset] = {}
    where: dict[str, Path] = {}
    first: tuple[Path, dict] | None = None
    for folder in folders:
        for path in sorted((folder / "models").glob("*.nc")):
            ds = load_dataset(path)
            recorded = json.loads(ds.attrs.get("parameters", "{}"))
            settings = {k: recorded.get(k) for k in SETTINGS}
            if first is None:
                first = (path, settings)
            elif settings != first[1]:
                differ = ", ".join(f"{k} {first[1][k]!r} vs {v!r}" for k, v in settings.items() if v != first[1][k])
                raise SweepError(f"{path} and {first[0]} were scored with other settings ({differ}): rescore one")
            model = str(ds["model"].values[0])
            if model in datasets:
                if not _scores(ds).equals(_scores(datasets[model])):
                    raise SweepError(f"{model} was scored twice with different results: {where[model]} and {path}")
                continue
            datasets[model], where[model] = ds, path
    return datasets, (first[1] if first else {})


def _failures(folders: list[Path], scored: set[str]) -> list[dict]:
    rows = []
    for folder in folders:
        path = folder / "failures.csv"
        if path.is_file() and path.stat().st_size:
            table = pd.read_csv(path, dtype=str, keep_default_na=False)
            rows += [r for r in table.to_dict("records") if r.get("model") not in scored]
    return rows


def combine_parts(parts: Sequence, out: str | Path) -> SweepResult:
    """Merge the sweep output folders ``parts`` into ``out`` (module docstring). The result lists the combined
    models as ``scored``, the failures and the path of ``sweep.nc`` (None when no part holds a model)."""
    out = Path(out)
    folders = _check_parts(parts, out)
    datasets, settings = _read_models(folders)
    listed = list(dict.fromkeys(m for folder in folders for m in _listing(folder) if m in datasets))
    rest = sorted(set(datasets) - set(listed), key=lambda m: training_order(m, model_position(m)[1]))
    order = listed + rest
    result = SweepResult(scored=order, failures=_failures(folders, set(order)))
    out.mkdir(parents=True, exist_ok=True)
    write_failures(out / "failures.csv", result.failures)
    if order:
        per_head = bool(settings.get("per_head"))
        attrs = provenance_attrs(
            parameters={
                "models": order,
                "parts": [str(f) for f in folders],
                **{k: settings[k] for k in ("per_head", "num_std", "precision")},
            },
            scored_matrix=LAYER_MATRIX + ("; " + HEAD_MATRIX if per_head else ""),
            num_std=settings["num_std"],
        )
        result.path = save_dataset(combine([datasets[m] for m in order], **attrs), out / "sweep.nc")
    return result
