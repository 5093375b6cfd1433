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
* ``failures.csv``: the parts' failures one after the other, less those of models that another part scored;
* ``duplicates``: the models of all parts that hold byte-identical weights, one line per group, as a sweep reports
  them (:func:`attnstruct.checkpoints.sweep_checks.byte_identical`).

A part is not trusted: a file in it that is not what a sweep writes (not netCDF, not one model's dataset, a
recorded model other than its ``model`` coordinate, ``parameters`` that are not a JSON object of the settings'
types, a ``listing`` that is not a list of names, a ``failures.csv`` that is not the table) and a symbolic link that
leads out of the part are refused in one line naming the file; nothing is written then. ``OUT`` is written under
its lock (:func:`attnstruct.results.output_lock`), as a sweep writes its folder.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
import xarray as xr

from ..results import check_self_contained, load_dataset, output_lock, provenance_attrs, remove_leftovers, save_dataset
from ..untrusted import UnsafeName, inside, one_line
from .revisions import model_position, training_order
from .sweep import HEAD_MATRIX, SweepError, SweepResult, write_failures
from .sweep_checks import byte_identical, digests_of
from .tables import LAYER_MATRIX, combine

SETTINGS = ("per_head", "num_std", "precision", "layout")


def _not_a_sweeps(path: Path, why: str) -> SweepError:
    return SweepError(f"--combine: {path} is not a file of attnstruct sweep ({why})")


def _inside(folder: Path, name: str) -> Path:
    """``folder/name``, refused when a symbolic link leads it out of ``folder`` (a part is not trusted)."""
    try:
        return inside(folder, name)
    except UnsafeName as err:
        raise SweepError(f"--combine: {err}") from None


def _open(path: Path, *, load: bool) -> xr.Dataset:
    """The dataset at ``path`` (all of it with ``load``, else its attrs and coordinates), refused in one line when it
    is not netCDF or would bring in another file's bytes (:func:`attnstruct.results.check_self_contained`). netCDF
    holds no code: reading it runs none, and no attr names a path that is opened."""
    try:
        if load:
            return load_dataset(path)
        check_self_contained(path)
        with xr.open_dataset(path, engine="h5netcdf") as ds:
            return ds
    except (OSError, ValueError, TypeError, KeyError) as err:
        raise _not_a_sweeps(path, one_line(err)) from None


def _parameters(path: Path, ds: xr.Dataset) -> dict:
    try:
        parameters = json.loads(ds.attrs.get("parameters", "{}"))
    except (TypeError, ValueError):
        parameters = None
    if not isinstance(parameters, dict):
        raise _not_a_sweeps(path, "its parameters attr is not a JSON object")
    return parameters


def _names(path: Path, parameters: dict, key: str) -> list[str]:
    names = parameters.get(key) or []
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        raise _not_a_sweeps(path, f"its {key} is not a list of model names")
    return names


def _listing(part: Path) -> list[str]:
    """The list the part was a shard of (or the part's own list); empty when it wrote no ``sweep.nc``."""
    path = _inside(part, "sweep.nc")
    if not path.is_file():
        return []
    parameters = _parameters(path, _open(path, load=False))
    return _names(path, parameters, "listing") or _names(path, parameters, "models")


def _scores(ds: xr.Dataset) -> xr.Dataset:
    """The scores alone: what two runs of one model must agree on (not the bytes fetched, not the time)."""
    return ds.reset_coords(drop=True)


def _check_parts(parts: Sequence, out: Path) -> list[Path]:
    if not parts:
        raise SweepError("--combine needs at least one sweep output folder")
    folders = [Path(p) for p in parts]
    for folder in folders:
        if not _inside(folder, "models").is_dir():
            raise SweepError(f"--combine {folder}: no models/ folder there (not the output of attnstruct sweep)")
        if folder.resolve() == out.resolve():
            raise SweepError(f"--out {out} is one of the parts; combine into a folder of its own")
    if out.exists() and not out.is_dir():
        raise SweepError(f"--out {out} exists and is not a folder")
    return folders


def _model_dataset(path: Path) -> tuple[str, dict, xr.Dataset]:
    """``(model, settings, dataset)`` of one model's file, refused unless it is one model's dataset whose recorded
    model is its ``model`` coordinate and whose settings have their types."""
    ds = _open(path, load=True)
    recorded = _parameters(path, ds)
    if ds.sizes.get("model") != 1 or "model" not in ds.coords:
        raise _not_a_sweeps(path, "not one model's dataset")
    model = str(ds["model"].values[0])
    if recorded.get("model") != model:
        shown = repr(recorded.get("model"))[:80]
        raise _not_a_sweeps(path, f"it records the model {shown} for scores of {model[:80]!r}")
    settings = {k: recorded.get(k) for k in SETTINGS}
    num_std = settings["num_std"]
    if not (
        isinstance(settings["per_head"], bool)
        and isinstance(num_std, (int, float))
        and not isinstance(num_std, bool)
        and math.isfinite(num_std)
        and isinstance(settings["precision"], str)
        and isinstance(settings["layout"], str)
    ):
        raise _not_a_sweeps(path, f"its settings {repr(settings)[:200]} are not those of a sweep")
    return model, settings, ds


def _read_models(folders: list[Path]) -> tuple[dict[str, xr.Dataset], dict]:
    """Each model's dataset by model line, and the settings they share; refuses mixed settings and disagreements."""
    datasets: dict[str, xr.Dataset] = {}
    where: dict[str, Path] = {}
    first: tuple[Path, dict] | None = None
    for folder in folders:
        models = _inside(folder, "models")
        for path in sorted(models.glob("*.nc")):
            model, settings, ds = _model_dataset(_inside(models, path.name))
            if first is None:
                first = (path, settings)
            elif settings != first[1]:
                differ = ", ".join(f"{k} {first[1][k]!r} vs {v!r}" for k, v in settings.items() if v != first[1][k])
                raise SweepError(f"{path} and {first[0]} were scored with other settings ({differ}): rescore one")
            if model in datasets:
                if not _scores(ds).equals(_scores(datasets[model])):
                    raise SweepError(f"{model} was scored twice with different results: {where[model]} and {path}")
                continue
            datasets[model], where[model] = ds, path
    return datasets, (first[1] if first else {})


def _failures(folders: list[Path], scored: set[str]) -> list[dict]:
    rows = []
    for folder in folders:
        path = _inside(folder, "failures.csv")
        if path.is_file() and path.stat().st_size:
            try:
                table = pd.read_csv(path, dtype=str, keep_default_na=False)
            except (OSError, ValueError, pd.errors.ParserError) as err:
                raise _not_a_sweeps(path, one_line(err)) from None
            if not {"model", "kind", "reason"} <= set(table.columns):
                raise _not_a_sweeps(path, f"its columns are {list(table.columns)}, not model, kind, reason")
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
    with output_lock(out, "sweep --combine"):
        remove_leftovers(out)
        _write(result, out, order, datasets, settings, folders)
    return result


def _write(result: SweepResult, out: Path, order: list[str], datasets: dict, settings: dict, folders: list) -> None:
    write_failures(out / "failures.csv", result.failures)
    if order:
        per_head = bool(settings.get("per_head"))
        result.duplicates = byte_identical(order, digests_of([datasets[m] for m in order]))
        attrs = provenance_attrs(
            parameters={
                "models": order,
                "parts": [str(f) for f in folders],
                **{k: settings[k] for k in ("per_head", "num_std", "precision")},
            },
            scored_matrix=LAYER_MATRIX + ("; " + HEAD_MATRIX if per_head else ""),
            num_std=settings["num_std"],
            duplicates=json.dumps(result.duplicates),
        )
        result.path = save_dataset(combine([datasets[m] for m in order], **attrs), out / "sweep.nc")
