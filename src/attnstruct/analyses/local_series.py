"""Notebook 09's offline series: notebook 05's encoder and decoder runs kept as checkpoints, and each continued with
the other objective and, as its control, with its own.

The public series of notebook 09 (Ettin's matched pairs and cross-objective runs, Pythia's and MultiBERTs' seeds)
are folders of ``config.json`` and ``pytorch_model.bin`` on the hub. Offline, the package makes a series of the same
form itself: notebook 05's runs (the same Transformer trained as a masked-LM encoder and a next-token decoder, seed
by seed, from the same weights and batches) keep their weights every ``snapshot_every`` steps
(:mod:`attnstruct.training.snapshots`), and the last snapshot of each run is trained on for ``continue_steps`` steps
with the other objective (``TextConfig.init_from``): a decoder continued as an encoder, an encoder continued as a
decoder, as Ettin's ``enc-from-dec`` and ``dec-from-enc`` models are. Each is also continued with its own
objective, with the same warm-up and steps (the ``control`` series): a restart of the learning rate alone moves the
scores too (notebook 05's early transient), so the objective's effect is the change under the other objective minus
the change under the same one, seed by seed. Those folders are then read by the checkpoint readers, byte range by byte
range, as any public checkpoint is.

Every run is trained once and reused (:func:`attnstruct.tasks.text.train_many`'s run folders): after notebook 05 has
run with the same parameters, only the continued runs are new.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from pathlib import Path

import pandas as pd
import xarray as xr

from .. import notebooks, results
from ..checkpoints.series import ENTRY_COLUMNS
from ..tasks import text, text_config
from ..training import processes, snapshots
from . import text_runs

NOTEBOOK_05 = "05_training_dynamics"
ENCODER, DECODER = "mlm", "next-token"
ROLE = {ENCODER: "encoder", DECODER: "decoder"}
OTHER = {ENCODER: DECODER, DECODER: ENCODER}
PAIRS = "local pairs"  # notebook 05's final encoder and decoder of each seed: its primary claim's own values


@dataclasses.dataclass
class LocalSeries:
    """The local series: its ``entries`` (one per use of a checkpoint), notebook 05's ``runs``, the ``continued``
    runs (with the other objective) and the ``controls`` (continued with their own objective): combined datasets of
    runs (:func:`attnstruct.training.processes.combine`), whose losses say whether they learned."""

    entries: pd.DataFrame
    runs: xr.Dataset
    continued: xr.Dataset
    controls: xr.Dataset

    def learned(self, unigram_entropy: float) -> dict[str, bool]:
        """``{series: did every run behind it learn}`` (:mod:`attnstruct.analyses.text_runs`): a trajectory on its
        objective's runs, the pairs on both objectives', a continued series on its continued runs."""
        by_objective = text_runs.learned_by(text_runs.loss_targets(self.runs, unigram_entropy), "objective")
        continued = text_runs.learned_by(text_runs.loss_targets(self.continued, unigram_entropy), "objective")
        controls = text_runs.learned_by(text_runs.loss_targets(self.controls, unigram_entropy), "objective")
        learned = {f"local {ROLE[o]}": by_objective[o] for o in (ENCODER, DECODER)}
        learned[PAIRS] = all(by_objective.values())
        for objective in (ENCODER, DECODER):
            learned[continued_series(OTHER[objective], objective)] = continued[objective]
            learned[continued_series(objective, objective)] = controls[objective]
        return learned


def continued_series(start: str, objective: str) -> str:
    """The name of the series of notebook 05's ``start`` runs (an objective) continued with ``objective``:
    ``local decoder continued as encoder``; with ``start == objective``, a control (``local encoder continued as
    encoder``)."""
    return f"local {ROLE[start]} continued as {ROLE[objective]}"


def control_of(series: str) -> str | None:
    """The control of continued series ``series`` (the same start continued with its own objective), or None for a
    series that is not one of the local series' continued ones."""
    for start in (ENCODER, DECODER):
        if series == continued_series(start, OTHER[start]):
            return continued_series(start, start)
    return None


def notebook_05_parameters(results_dir: str | os.PathLike, root: str | os.PathLike | None = None) -> dict:
    """The parameters notebook 05 ran with, read from its dataset in ``results_dir``; without one, the defaults of
    its parameters cell (its quick profile). Output folders are left out."""
    path = Path(results_dir) / f"{NOTEBOOK_05}.nc"
    if path.is_file():
        return json.loads(results.load_dataset(path).attrs["parameters"])
    source = notebooks.resolve_notebook(notebooks.project_root(root), NOTEBOOK_05)
    declared = notebooks.declared_parameters(notebooks.read_notebook(source))
    return {k: v for k, v in declared.items() if k not in notebooks.PATH_PARAMETERS}


def notebook_05_tokens(parameters: Mapping, cache=None):
    """The tokens notebook 05's runs of ``parameters`` trained on (:func:`attnstruct.tasks.text.corpus_data`)."""
    return text.corpus_data(
        text_config.TextConfig.from_params(parameters, objective=ENCODER, seed=0, init="bert"), cache
    )


def run_configs(parameters: Mapping) -> list[text_config.TextConfig]:
    """Notebook 05's encoder and decoder run of every seed (``parameters``: its parameters)."""
    return [
        text_config.TextConfig.from_params(parameters, objective=objective, seed=seed, init="bert")
        for objective in (ENCODER, DECODER)
        for seed in parameters["seeds"]
    ]


def continued_config(
    config: text_config.TextConfig,
    start: Path,
    steps: int,
    *,
    warmup: int,
    log_every: int,
    same_objective: bool = False,
) -> text_config.TextConfig:
    """``config``'s run continued from the snapshot folder ``start`` with the other objective (its own with
    ``same_objective``: the control) for ``steps`` steps (its learning rate warmed up again over ``warmup`` steps and
    decayed as before); evaluated and recorded every ``log_every`` steps."""
    return dataclasses.replace(
        config,
        objective=config.objective if same_objective else OTHER[config.objective],
        init_from=str(start),
        steps=steps,
        warmup=warmup,
        log_every=log_every,
        eval_every=log_every,
        checkpoint_every=steps,
    )


def make_series(
    parameters: Mapping,
    runs_dir: str | os.PathLike,
    *,
    continue_steps: int,
    continue_warmup: int,
    continue_every: int,
    workers: int = 2,
    threads_per_worker: int = 1,
    cache=None,
    progress: bool = True,
) -> LocalSeries:
    """Train (or reuse) notebook 05's runs with their snapshots and the continued runs; return them with the entries
    of every checkpoint (:data:`attnstruct.checkpoints.series.ENTRY_COLUMNS`):

    * ``trajectory``: every snapshot of 05's runs, series ``local encoder`` / ``local decoder``, one seed each;
    * ``pair``: the final encoder and decoder of each seed (the unit is the seed: one shape, same data);
    * ``cross``: per seed and direction, the 05 run's final snapshot (``before``) and the continued run's final one
      (``after``), series ``local decoder continued as encoder`` and ``local encoder continued as decoder``;
    * ``control``: the same with each run continued with its own objective (same warm-up and steps), series
      ``local encoder continued as encoder`` and ``local decoder continued as decoder``.

    ``parameters`` are notebook 05's (:func:`notebook_05_parameters`), which must set ``snapshot_every``.
    """
    every = int(parameters.get("snapshot_every") or 0)
    if every < 1:
        raise ValueError("notebook 05's parameters keep no snapshots (snapshot_every); the local series needs them")
    configs = run_configs(parameters)
    runs_dir = Path(runs_dir)
    common = dict(workers=workers, threads_per_worker=threads_per_worker, cache=cache, progress=progress)
    runs = text.train_many(configs, runs_dir, snapshot_every=every, **common)
    finals = {
        (c.objective, c.seed): snapshots.folder(d, c.steps)
        for c, d in zip(configs, processes.run_dirs(configs, runs_dir))
    }
    continued, controls = (
        [  # the start named relative to runs_dir, so the runs do not depend on where that folder is
            continued_config(
                c,
                finals[(c.objective, c.seed)].relative_to(runs_dir),
                continue_steps,
                warmup=continue_warmup,
                log_every=continue_every,
                same_objective=same,
            )
            for c in configs
        ]
        for same in (False, True)
    )
    continued_runs = text.train_many(continued, runs_dir, snapshot_every=continue_steps, **common)
    control_runs = text.train_many(controls, runs_dir, snapshot_every=continue_steps, **common)
    rows = []
    for config, folder in zip(configs, processes.run_dirs(configs, runs_dir)):
        role, tokens = ROLE[config.objective], config.batch_size * config.seq_len
        for step, path in snapshots.complete_snapshots(folder).items():
            rows.append(_entry(path, "trajectory", f"local {role}", role, config.seed, step, step * tokens))
        rows.append(_entry(finals[(config.objective, config.seed)], "pair", PAIRS, role, config.seed))
    for kind, started, start_of in (("cross", continued, OTHER), ("control", controls, {o: o for o in OTHER})):
        for config, folder in zip(started, processes.run_dirs(started, runs_dir)):
            role = ROLE[config.objective]
            series = continued_series(start_of[config.objective], config.objective)
            rows.append(_entry(runs_dir / config.init_from, kind, series, role, config.seed, stage="before"))
            after = snapshots.folder(folder, config.steps)
            rows.append(_entry(after, kind, series, role, config.seed, stage="after"))
    return LocalSeries(pd.DataFrame(rows, columns=list(ENTRY_COLUMNS)), runs, continued_runs, control_runs)


def _entry(path: Path, kind: str, series: str, role: str, seed: int, step=float("nan"), tokens=float("nan"), stage=""):
    return {
        "model": str(path),
        "kind": kind,
        "series": series,
        "role": role,
        "unit": f"seed {seed}",
        "seed": int(seed),
        "stage": stage,
        "step": float(step),
        "tokens": float(tokens),
    }


def weight_file_bytes(entries: pd.DataFrame) -> dict[str, int]:
    """``{model: bytes of its pytorch_model.bin}`` of the local checkpoints of ``entries``."""
    return {
        model: (Path(model) / snapshots.WEIGHTS).stat().st_size
        for model in dict.fromkeys(entries["model"])
        if (Path(model) / snapshots.WEIGHTS).is_file()
    }


def plan_entries() -> pd.DataFrame:
    """One entry per series of the local series (its kind, name, role and unit kind): all that
    :func:`attnstruct.analyses.nb09_dynamics_at_scale.declared_plan` reads to declare the claims."""
    rows = [_entry(Path(""), "trajectory", f"local {ROLE[o]}", ROLE[o], 0) for o in (ENCODER, DECODER)]
    rows += [_entry(Path(""), "pair", PAIRS, ROLE[o], 0) for o in (ENCODER, DECODER)]
    for objective in (DECODER, ENCODER):
        series = continued_series(OTHER[objective], objective)
        rows.append(_entry(Path(""), "cross", series, ROLE[objective], 0, stage="before"))
    for objective in (ENCODER, DECODER):
        series = continued_series(objective, objective)
        rows.append(_entry(Path(""), "control", series, ROLE[objective], 0, stage="before"))
    return pd.DataFrame(rows, columns=list(ENTRY_COLUMNS))
