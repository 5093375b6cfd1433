"""Many runs side by side: a process pool, ``train_many`` for any task, and one dataset from several runs.

:func:`train_many` prepares every task in this process (data is loaded and checked once, before any worker
starts), reuses finished runs that :func:`attnstruct.training.run_folder.finished_run` accepts (with a notice printed
here, where a notebook shows it), trains the others in ``workers`` spawned processes of
``threads_per_worker`` torch threads each, and :func:`combine` stacks the runs along their run keys.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import xarray as xr

from .. import results
from . import engine, run_folder, snapshots


def set_worker_threads(threads: int) -> None:
    """Initialiser of the worker processes: ``threads`` torch threads each (no oversubscription)."""
    import torch

    torch.set_num_threads(threads)


def run_in_processes(
    function: Callable, arguments: Sequence[tuple], workers: int, threads_per_worker: int, progress: bool = True
) -> list:
    """``[function(*a) for a in arguments]`` in ``workers`` spawned processes of ``threads_per_worker`` threads.

    Results come back in the order of ``arguments`` whatever finishes first; a progress bar counts the runs.
    ``function`` must be importable (a module-level function) and its arguments picklable.
    """
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from tqdm.auto import tqdm

    from ..report.progress import bar_disabled

    if not isinstance(workers, int) or workers < 1 or not isinstance(threads_per_worker, int) or threads_per_worker < 1:
        raise ValueError("workers and threads_per_worker must be positive integers")
    if not arguments:
        return []
    context = multiprocessing.get_context("spawn")
    size = min(workers, len(arguments))
    with ProcessPoolExecutor(
        size, mp_context=context, initializer=set_worker_threads, initargs=(threads_per_worker,)
    ) as pool:
        futures = [pool.submit(function, *args) for args in arguments]
        done = []
        with tqdm(total=len(futures), desc="runs", unit="run", file=sys.stderr, disable=bar_disabled(progress)) as bar:
            for future in futures:
                done.append(future.result())
                bar.update(1)
    return done


def _train_in_worker(task, run_dir: str | None, snapshot_every: int | None = None):
    ds = engine.train(task, run_dir, snapshot_every=snapshot_every)
    return run_dir if run_dir is not None else ds


def _unique_names(configs) -> list[str]:
    names = [config.run_name() for config in configs]
    if len(set(names)) != len(names):
        keys = configs[0].RUN_KEYS
        raise ValueError(f"two runs have the same {', '.join(keys[:-1])} and {keys[-1]}")
    return names


def run_dirs(configs: Sequence, out_dir: str | os.PathLike) -> list[str]:
    """The folder of each run under ``out_dir``: ``<run_name>-<first 8 hex digits of its config digest>``."""
    names = _unique_names(configs)
    return [str(Path(out_dir) / f"{name}-{config.digest()[:8]}") for name, config in zip(names, configs)]


def train_many(
    tasks: Sequence,
    out_dir: str | os.PathLike | None = None,
    *,
    workers: int = 2,
    threads_per_worker: int = 1,
    progress: bool = True,
    snapshot_every: int | None = None,
) -> xr.Dataset:
    """Train every task (module docstring) and :func:`combine` the runs.

    With ``out_dir``, run ``r`` lives in :func:`run_dirs` (resumable, reused when finished), so runs of other
    parameters never share a folder and two notebooks that ask for the same run share it; without, the runs are
    kept in memory. ``workers=1`` trains in this process, one run after the other. ``snapshot_every``: each run
    keeps its weights every that many steps (:mod:`attnstruct.training.snapshots`); a finished run without them
    is trained again.
    """
    if not tasks:
        raise ValueError("no runs to train")
    _unique_names([task.config for task in tasks])
    for task in tasks:
        task.prepare()
    dirs = run_dirs([task.config for task in tasks], out_dir) if out_dir is not None else [None] * len(tasks)
    runs = [
        run_folder.finished_run(task.config, run_dir)
        if snapshots.has_every_snapshot(run_dir, task.config.steps, snapshot_every)
        else None
        for task, run_dir in zip(tasks, dirs)
    ]
    todo = [i for i, run in enumerate(runs) if run is None]
    if workers == 1:
        for i in todo:
            runs[i] = engine.train(tasks[i], dirs[i], progress=progress, snapshot_every=snapshot_every)
    else:
        arguments = [(tasks[i], dirs[i], snapshot_every) for i in todo]
        for i, made in zip(todo, run_in_processes(_train_in_worker, arguments, workers, threads_per_worker, progress)):
            runs[i] = results.load_dataset(Path(made) / run_folder.RUN_FILE) if isinstance(made, str) else made
    return combine(runs, type(tasks[0].config))


def _plain(value):
    return value.item() if isinstance(value, np.generic) else value


def combine(runs: Sequence[xr.Dataset], config_class) -> xr.Dataset:
    """Stack runs into one dataset with the dims ``config_class.RUN_KEYS`` (e.g. ``objective``, ``init``,
    ``seed``) before ``step``, ``layer``, ``head``, and a coordinate ``causal`` along ``objective``.

    All runs must share the step grid and the model shape. The values of each key keep the order of
    ``config_class.run_key_choices()`` (seeds ascending). The attrs keep the first run's provenance; ``runs`` (and
    ``parameters``) list every run's parameters (JSON), ``created`` is the latest run's.
    """
    if not runs:
        raise ValueError("no runs to combine")
    keys = config_class.RUN_KEYS

    def key_value(ds: xr.Dataset, key: str):
        return int(ds.attrs[key]) if key == "seed" else str(ds.attrs[key])

    keyed = [ds.expand_dims({key: [key_value(ds, key)] for key in keys}) for ds in runs]
    merged = xr.combine_by_coords([ds.drop_attrs() for ds in keyed], combine_attrs="drop")
    for key, choices in config_class.run_key_choices().items():
        if key in keys:
            merged = merged.sel({key: [value for value in choices if value in merged[key].values]})
    merged = merged.assign_coords(causal=("objective", [config_class.CAUSAL[o] for o in merged.objective.values]))
    first = {key: _plain(value) for key, value in runs[0].attrs.items()}
    for key in (*keys, "parameters", "created", "run_key"):
        first.pop(key, None)
    merged.attrs.update(first)
    merged.attrs["runs"] = json.dumps([json.loads(ds.attrs["parameters"]) for ds in runs], sort_keys=True)
    merged.attrs["parameters"] = merged.attrs["runs"]
    merged.attrs["created"] = max(ds.attrs["created"] for ds in runs)
    return merged
