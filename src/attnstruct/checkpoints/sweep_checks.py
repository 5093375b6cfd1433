"""What a sweep checks of the checkpoints it is given, beyond their scores: which hold byte-identical weights, and
which branches have moved since the commit pinned at the first run.

A checkpoint series on the hub is not always what its names claim: branches into which later weights were copied
(EleutherAI/pythia#205, #206, allenai/OLMo#915) score alike because they are alike, and weights uploaded again into
a branch (EleutherAI/pythia#107) move it to another commit. :func:`byte_identical` names the first from the digests
the hub states (``weights_sha256`` of the per-model dataset, :func:`attnstruct.checkpoints.tables.model_dataset`);
:func:`refreshed_pins` finds the second, one model info request per model, for ``attnstruct sweep --refresh``.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed

import xarray as xr

from .extract.blocks import ExtractionError
from .hub import HubSettings, parse_hub_id, refresh_pin
from .resolve import names_hub_model


def byte_identical(models: Sequence[str], digests: Sequence[str]) -> list[str]:
    """One line per group of ``models`` whose weight digests (``weights_sha256``: ``""`` for unknown, never a match)
    are one: ``"A and B hold byte-identical weights (sha256 0123456789ab...)"``, in the order of the models."""
    groups: dict[str, list[str]] = {}
    for model, digest in zip(models, digests, strict=True):
        if digest:
            groups.setdefault(str(digest), []).append(str(model))
    lines = []
    for digest, group in groups.items():
        if len(group) > 1:
            names = f"{', '.join(group[:-1])} and {group[-1]}"
            lines.append(f"{names} hold byte-identical weights (sha256 {digest[:12]}...)")
    return lines


def digests_of(datasets: Sequence[xr.Dataset]) -> list[str]:
    """Each one-model dataset's ``weights_sha256`` (``""`` where a dataset has none)."""
    return [str(ds["weights_sha256"].values[0]) if "weights_sha256" in ds.coords else "" for ds in datasets]


def refreshed_pins(models: Sequence[str], settings, workers: int, failures: list[dict]) -> dict[str, str]:
    """``{model: commit}`` for each hub model of ``models`` (:func:`~attnstruct.checkpoints.resolve.names_hub_model`):
    the commit it names now, a branch's or tag's re-read from the hub and pinned
    (:func:`attnstruct.checkpoints.hub.refresh_pin`, ``workers`` at once). A model the hub cannot say is appended to
    ``failures`` (``model, kind, reason``); an invalid token raises at once, the requests not yet sent cancelled."""
    settings = settings or HubSettings.from_env()
    named = [model for model in models if names_hub_model(model)]
    pins = {}
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="attnstruct-refresh") as pool:
        futures = {pool.submit(refresh_pin, settings, *parse_hub_id(model)): model for model in named}
        try:
            for future in as_completed(futures):
                model = futures[future]
                try:
                    pins[model] = future.result()
                except ExtractionError as err:
                    if err.kind == "invalid token":
                        raise
                    failures.append({"model": model, "kind": err.kind, "reason": err.detail})
        except BaseException:
            for future in futures:
                future.cancel()
            raise
    return pins
