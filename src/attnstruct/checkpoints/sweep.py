"""``attnstruct sweep``: score many models, one dataset each, resumable, with the failures listed.

Layout of the output folder ``DIR``:

* ``DIR/models/<model>.nc``: one dataset per scored model, written atomically, named by :func:`file_stem`; a model
  whose file holds that model (its ``model`` coordinate and recorded parameter) scored with the same settings is not
  scored again, so an interrupted sweep resumes where it stopped (a file of another model is never taken for it);
* ``DIR/failures.csv``: ``model, kind, reason`` for each model of this run that could not be scored, ``kind``
  one of :data:`attnstruct.checkpoints.extract.blocks.FAILURE_KINDS`, read from the error (never parsed from its
  text); the sweep goes on past them, and a rerun tries them again. One kind stops the sweep at once: ``invalid
  token`` (the hub refuses the token itself, so every other model would fail alike), raised after the queued models
  are cancelled; the files written stay;
* ``DIR/sweep.nc``: every scored model of the list along ``model`` (its ``hub_retries`` attr, and
  :attr:`SweepResult.retries`, say in one line how many requests the hub client retried, and why:
  :mod:`attnstruct.hub_client.client`)
  (:func:`attnstruct.checkpoints.tables.combine`), with each model's ``revision``, ``commit``, ``step``, ``tokens``,
  ``phase`` and ``weights_sha256`` as coordinates (:func:`attnstruct.checkpoints.revisions.model_position`), so that
  a series of checkpoints is one ``.sel``/``.where`` away; its ``parameters`` attr records the models and the
  settings, its ``duplicates`` attr (JSON, and :attr:`SweepResult.duplicates`) one line per group of models that
  hold byte-identical weights (:func:`attnstruct.checkpoints.sweep_checks.byte_identical`).

``refresh=True`` (``--refresh``) asks the hub once per hub model named by a branch or tag for the commit it names
now (:func:`attnstruct.checkpoints.sweep_checks.refreshed_pins`), pins it, and scores again a model whose file was
scored at another commit (weights uploaded again into the same branch: EleutherAI/pythia#107); without it, a branch
stays at the commit of the first run and no request is made for it.

``shard="K/N"`` scores only shard ``K`` of ``N`` of the list (:func:`attnstruct.checkpoints.revisions.shard`: item
``i`` goes to shard ``i mod N + 1``); that part's ``parameters`` also record the whole list (``listing``) and the
shard, so that :func:`attnstruct.checkpoints.sweep_merge.combine_parts` can put the parts back in the list's order.

Each model is scored by the project's one scoring path (:func:`attnstruct.checkpoints.scoring.score_blocks`) and its
table turned into the one per-model dataset (:func:`attnstruct.checkpoints.tables.checkpoint_dataset`, whose role
rule and coordinates notebooks 03 and 07 share). A file written with another layout of that dataset
(:data:`attnstruct.checkpoints.tables.LAYOUT`) is scored again rather than combined with newer ones.
Models are scored in worker threads: fetching (network) and the products (torch, GIL released) overlap.

One process at a time writes ``DIR`` (:func:`attnstruct.results.output_lock`, which the kernel drops when its holder
ends, killed or not): a second sweep or combine into it is refused at once naming the holder's pid, and the holder
removes the temporary files a killed sweep left. A disk that takes no file stops the sweep with
:class:`attnstruct.results.OutputError`, one line; the models written stay.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import re
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr
from tqdm import tqdm

from .. import interrupts
from ..devices import resolve_device
from ..hub_client import client as hub_client
from ..report.progress import bar_disabled
from ..results import (
    OutputError,
    load_dataset,
    output_lock,
    provenance_attrs,
    remove_leftovers,
    save_dataset,
    write_atomically,
)
from ..scores import DEFAULT_NUM_STD
from ..untrusted import one_line
from .extract.blocks import ExtractionError
from .hub_costs import hub_models, sweep_cost
from .resolve import open_checkpoint
from .revisions import shard as shard_of
from .scoring import block_precision, score_opened
from .sweep_checks import byte_identical, digests_of, refreshed_pins
from .tables import HEAD_MATRIX as _HEAD_MATRIX
from .tables import LAYER_MATRIX, LAYOUT, checkpoint_dataset, combine

HEAD_MATRIX = f"{_HEAD_MATRIX}, in head_symmetry/head_directionality"


class SweepError(ValueError):
    """Bad input to the sweep itself (list, output folder, workers): one line, exit status 2."""


@dataclass
class SweepResult:
    scored: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failures: list[dict] = field(default_factory=list)
    path: Path | None = None
    datasets: dict = field(default_factory=dict, repr=False)  # this run's per-model datasets, by model
    retries: str = "hub: no retries"  # the hub client's retries during the sweep, in one line
    calls: str = "hub calls: 0 resolver, 0 API, 0 CDN"  # the sweep's hub requests by quota bucket, in one line
    plan: str = ""  # what the models left to score cost, said before the first is read (hub_costs.Cost.summary)
    duplicates: list[str] = field(default_factory=list)  # one line per group of byte-identical models


MAX_LIST_BYTES = 16 * 2**20  # a list of 16 MiB holds about 200,000 hub ids
MAX_WORKERS = 64
_LOOK_EVERY_S = 0.1  # how often the main thread looks for Ctrl-C while the workers score
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")  # control characters but tab and newline


def _list_text(path: Path) -> str:
    """The text of a model list: at most :data:`MAX_LIST_BYTES`, UTF-8, no control character but tab and newline."""
    try:
        size = path.stat().st_size
        if size > MAX_LIST_BYTES:
            raise SweepError(f"model list {path} is {size} bytes; a list is at most {MAX_LIST_BYTES} bytes")
        data = path.read_bytes()
    except OSError as err:
        raise SweepError(f"model list {path} cannot be read ({err.strerror or err})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise SweepError(f"model list {path} is not UTF-8 text (byte {err.start} is not)") from None
    text = text.replace("\r\n", "\n")
    if bad := _CONTROL.search(text):
        line = text.count("\n", 0, bad.start()) + 1
        raise SweepError(f"model list {path} holds a control character ({bad[0]!r}) on line {line}: not a text list")
    return text


def read_model_list(spec: str) -> list[str]:
    """Model ids or paths: ``paper`` (the authors' list, first appearance order), a ``.csv`` with a ``model``
    column, or a text file with one per line (``#`` starts a comment). A file that is not such a list (more than
    :data:`MAX_LIST_BYTES`, not UTF-8, a control character, a CSV that does not parse, no model) is refused with
    :class:`SweepError` naming it."""
    if spec == "paper":
        from ..reference import reference_table

        return list(dict.fromkeys(reference_table()["model"]))
    path = Path(spec)
    if not path.is_file():
        raise SweepError(f"model list {spec} is not a file (give a text/CSV file of model ids or paths, or 'paper')")
    text = _list_text(path)
    if path.suffix == ".csv":
        try:
            table = pd.read_csv(io.StringIO(text), dtype=str)
        except (ValueError, pd.errors.ParserError) as err:  # EmptyDataError is a ValueError
            raise SweepError(f"model list {path} is not a CSV table ({one_line(err)})") from None
        if "model" not in table.columns:
            raise SweepError(f"{path}: a CSV model list needs a 'model' column, found {list(table.columns)}")
        models = [m.strip() for m in table["model"].dropna()]
    else:
        lines = (line.split("#", 1)[0].strip() for line in text.splitlines())
        models = [line for line in lines if line]
    if not any(models):
        raise SweepError(f"model list {path} names no model")
    return list(dict.fromkeys(m for m in models if m))


def _readable(model: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "--", model).strip("-.")[:80] or "model"


def file_stem(model: str) -> str:
    """A file name for ``model`` that is safe on every file system and its own: the name made readable (80
    characters at most) and 128 bits of the full name's sha256. A file's model is also checked against its
    content before it is taken as done (:func:`_done`)."""
    return f"{_readable(model)}.{hashlib.sha256(model.encode()).hexdigest()[:32]}"


def earlier_file_stem(model: str) -> str:
    """The file name sweeps before :func:`file_stem` gave ``model`` (32 bits of sha1): a folder of theirs resumes."""
    return f"{_readable(model)}.{hashlib.sha1(model.encode()).hexdigest()[:8]}"


def score_one(
    model: str, *, per_head: bool, num_std: float, precision: str, device, settings, bar_position=None, progress=False
) -> xr.Dataset:
    """Open ``model`` (:func:`attnstruct.checkpoints.resolve.open_checkpoint`) and score every block on ``device``.

    Raises :class:`~attnstruct.checkpoints.extract.ExtractionError` (one line) when the model cannot be had or read.
    """
    with open_checkpoint(model, settings=settings) as checkpoint:
        table = score_opened(
            checkpoint,
            per_head=per_head,
            num_std=num_std,
            precision=precision,
            device=device,
            progress=progress,
            desc=model[-40:],
            position=bar_position,
        )
        attrs = provenance_attrs(
            parameters={
                "model": model,
                "per_head": per_head,
                "num_std": num_std,
                "precision": precision,
                "device": str(device),
                "layout": LAYOUT,
            },
            scored_matrix=LAYER_MATRIX + ("; " + HEAD_MATRIX if per_head else ""),
            num_std=num_std,
            precision=",".join(sorted(set(table["precision"]))),
        )
        return checkpoint_dataset(model, checkpoint, table, attrs=attrs)


def _done(path: Path, model: str, settings: dict, commit: str | None = None) -> bool:
    """Whether ``path`` holds ``model`` (its ``model`` coordinate and recorded parameter) scored with the same
    settings (and, ``commit`` given, at that commit); a file of another model, of other settings, of another commit
    or unreadable is scored again."""
    if not path.is_file():
        return False
    try:
        with xr.open_dataset(path, engine="h5netcdf") as ds:
            recorded = json.loads(ds.attrs.get("parameters", "{}"))
            names = [str(m) for m in np.atleast_1d(ds["model"].values)] if "model" in ds.variables else []
            commits = [str(c) for c in np.atleast_1d(ds["commit"].values)] if "commit" in ds.variables else []
    except (OSError, ValueError, TypeError):
        return False
    if not isinstance(recorded, dict) or names != [model] or recorded.get("model") != model:
        return False
    if commit is not None and commits != [commit]:
        return False
    return all(recorded.get(k) == v for k, v in settings.items())


def _adopt_earlier_files(folder: Path, models: Sequence[str], settings: dict) -> None:
    """Rename a model's file of the earlier naming (:func:`earlier_file_stem`) to :func:`file_stem` when it holds that
    model with these settings; one holding another model stays where it is, not taken."""
    for model in models:
        path, earlier = folder / f"{file_stem(model)}.nc", folder / f"{earlier_file_stem(model)}.nc"
        if not path.exists() and _done(earlier, model, settings):
            earlier.replace(path)


def write_failures(path: Path, failures: list[dict]) -> None:
    """``failures.csv``: ``model, kind, reason``, one row per failure, written atomically."""
    table = pd.DataFrame(failures, columns=["model", "kind", "reason"])
    write_atomically(path, lambda tmp: table.to_csv(tmp, index=False))


def _collect(futures: dict, folder: Path, out: Path, result: SweepResult, bar, total: int) -> None:
    """Save each finished model's dataset; record a failure, whatever it is, and go on. Ctrl-C under
    :func:`attnstruct.interrupts.handled` stops it between two models (:class:`~attnstruct.interrupts.Interrupted`,
    saying how many of ``total`` are scored); the main thread waits in short slices so as to see it."""
    pending, order = set(futures), {future: i for i, future in enumerate(futures)}
    progress = lambda: f"after {len(result.skipped) + len(result.scored)} of {total} models"  # noqa: E731
    while pending:
        interrupts.check(progress)
        finished, pending = wait(pending, timeout=_LOOK_EVERY_S, return_when=FIRST_COMPLETED)
        stopped = lambda f: isinstance(f.exception(), KeyboardInterrupt)  # noqa: E731  kept last: the others first
        for future in sorted(finished, key=lambda f: (stopped(f), order[f])):
            interrupts.check(progress)  # a worker stopped by Ctrl-C is no failure of its model
            _keep(future, futures[future], folder, out, result)
            bar.update(1)


def _keep(future, model: str, folder: Path, out: Path, result: SweepResult) -> None:
    """One finished model: its dataset saved, or its failure listed."""
    try:
        dataset = future.result()
        save_dataset(dataset, folder / f"{file_stem(model)}.nc")
    except OutputError:  # a disk that takes no file (full, read-only) fails every model: the sweep stops
        raise
    except ExtractionError as err:
        if err.kind == "invalid token":  # the hub refuses the token itself: every model would fail alike
            raise
        result.failures.append({"model": model, "kind": err.kind, "reason": err.detail})
        write_failures(out / "failures.csv", result.failures)
    except Exception as err:  # one model's failure, whatever it is, must not stop the sweep
        result.failures.append({"model": model, "kind": "error", "reason": one_line(err)})
        write_failures(out / "failures.csv", result.failures)
    else:
        result.scored.append(model)
        result.datasets[model] = dataset


def _check_settings(workers: int, num_std: float, out) -> None:
    if not 1 <= workers <= MAX_WORKERS:
        raise SweepError(f"--workers must be from 1 to {MAX_WORKERS}, got {workers}")
    if not (isinstance(num_std, (int, float)) and math.isfinite(num_std) and num_std >= 0):
        raise SweepError(f"--num-std must be a finite number, 0 or more, got {num_std!r}")
    if not str(out):
        raise SweepError("--out names no folder (an empty name)")


def run_sweep(
    models: Sequence[str],
    out: str | Path,
    *,
    device="auto",
    per_head: bool = False,
    workers: int = 2,
    num_std: float = DEFAULT_NUM_STD,
    precision: str = "auto",
    settings=None,
    progress: bool = False,
    shard: str | None = None,
    refresh: bool = False,
    report: Callable[[str], object] | None = None,
) -> SweepResult:
    """Score ``models`` (with ``shard``, only that shard of them) into ``out`` (module docstring; ``refresh``: re-read
    the commit of each branch or tag); returns what was scored, skipped and failed, and the byte-identical models.
    ``report`` is handed the plan (:attr:`SweepResult.plan`) before the first model is read.

    ``out`` is held for the whole sweep (:func:`attnstruct.results.output_lock`): a second sweep or combine into it
    is refused at once (:class:`~attnstruct.results.FolderInUse`, naming the holder's pid), and the temporary files
    that a killed sweep left in ``out`` and ``out/models`` are removed. A file that cannot be written (a full or
    read-only disk) stops the sweep with :class:`~attnstruct.results.OutputError`; the models written stay."""
    _check_settings(workers, num_std, out)
    listing = list(models)
    if shard is not None:
        try:
            models = shard_of(listing, shard)
        except ValueError as err:
            raise SweepError(str(err)) from None
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise SweepError(f"--out {out} exists and is not a folder")
    where = resolve_device(device)
    block_precision(1, precision)
    with output_lock(out, "sweep"):
        return _sweep_locked(
            models, listing, out, where, per_head=per_head, workers=workers, num_std=num_std, precision=precision,
            settings=settings, progress=progress, shard=shard, refresh=refresh, report=report,
        )  # fmt: skip


def _sweep_locked(
    models, listing, out: Path, where, *, per_head, workers, num_std, precision, settings, progress, shard, **more
) -> SweepResult:
    """:func:`run_sweep` once ``out`` is held."""
    folder = out / "models"
    try:
        folder.mkdir(exist_ok=True)
    except OSError as err:
        raise OutputError(folder, err.strerror or str(err), err.errno) from None
    remove_leftovers(out)
    remove_leftovers(folder)
    result = SweepResult()
    hub_client.DEFAULT_COUNTER.reset()
    hub_client.DEFAULT_CALLS.reset()
    todo = []
    settings_now = {"per_head": per_head, "num_std": num_std, "precision": precision, "layout": LAYOUT}
    _adopt_earlier_files(folder, models, settings_now)
    refresh, report = more["refresh"], more["report"]
    pins = refreshed_pins(models, settings, workers, result.failures) if refresh else {}
    unknown = {failure["model"] for failure in result.failures}
    for model in models:
        if model not in unknown:
            done = _done(folder / f"{file_stem(model)}.nc", model, settings_now, pins.get(model))
            (result.skipped if done else todo).append(model)
    result.plan = sweep_cost(todo).summary(workers=workers)
    if report is not None and hub_models(todo):
        report(result.plan)
    positions = list(range(workers, 0, -1))
    lock = threading.Lock()

    def task(model):
        with lock:
            position = positions.pop()
        try:
            return score_one(
                model,
                per_head=per_head,
                num_std=num_std,
                precision=precision,
                device=where,
                settings=settings,
                bar_position=position,
                progress=progress,
            )
        finally:
            with lock:
                positions.append(position)

    bar = tqdm(
        total=len(models),
        initial=len(result.skipped),
        desc="models",
        unit="model",
        disable=bar_disabled(progress),
        position=0,
    )
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="attnstruct-sweep") as pool:
        futures = {pool.submit(task, model): model for model in todo}
        try:
            _collect(futures, folder, out, result, bar, len(models))
        except BaseException:  # Ctrl-C: stop now, not after the queued models; finished files stay for a resume
            for future in futures:
                future.cancel()
            raise
    bar.close()
    result.retries = hub_client.DEFAULT_COUNTER.summary()
    result.calls = hub_client.DEFAULT_CALLS.summary()
    write_failures(out / "failures.csv", result.failures)
    done = []
    for model in models:  # this run's datasets are in memory; only the skipped ones are read back
        path = folder / f"{file_stem(model)}.nc"
        if model in result.datasets:
            done.append(result.datasets[model])
        elif model in result.skipped:
            done.append(load_dataset(path))
    if done:
        parameters = {"models": list(models), "per_head": per_head, "num_std": num_std, "precision": precision}
        if shard is not None:
            parameters |= {"listing": listing, "shard": shard}
        result.duplicates = byte_identical([str(ds["model"].values[0]) for ds in done], digests_of(done))
        attrs = provenance_attrs(
            parameters=parameters,
            scored_matrix=LAYER_MATRIX + ("; " + HEAD_MATRIX if per_head else ""),
            num_std=num_std,
            hub_retries=result.retries,
            hub_calls=result.calls,
            duplicates=json.dumps(result.duplicates),
        )
        result.path = save_dataset(combine(done, **attrs), out / "sweep.nc")
    return result
