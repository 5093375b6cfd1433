"""What reading checkpoints from the hub costs, said before a sweep or a series starts: requests by the hub's quota
buckets, bytes, and the time at a quota.

The Hugging Face Hub meters requests in fixed 5-minute windows, per bucket (https://huggingface.co/docs/hub/rate-limits):
every URL with a ``/resolve/`` segment is a **resolver** call, the ``/api/`` endpoints are **API** calls, and a
request to the CDN that a resolver call redirects to is in neither. :data:`QUOTAS` holds the documented limits per
window. Without a token the limits are per IP address: the jobs of an array behind one address share one quota.

What attnstruct's hub client makes for one checkpoint read by byte ranges (:func:`checkpoint_cost`), on a first run:

* **API**: 1, the model info (commit, files, sizes, digests), plus 1 per repository whose revisions are listed;
* **resolvers**: 1 per file fetched from the repository: ``config.json``, the shard index when there is one, and
  each weight file, resolved once; its later ranges go to the signed CDN link the first one was redirected to
  (:mod:`attnstruct.hub_client.links`);
* **CDN**: the range reads: the index of each weight file (2 reads), then about one per layer, the reads of a
  layer merged by the cost model of :data:`attnstruct.checkpoints.remote_tensors.MERGE_GAP`;
* **bytes**: the query and key weights (:meth:`attnstruct.checkpoints.series.Shape.query_key_bytes`), 1.5 times
  that for a fused per-head QKV weight, whose value rows lie between the query and key rows read.

The time (:meth:`Cost.seconds`) follows the rule the client's pacer keeps
(:mod:`attnstruct.hub_client.quota`): a window's quota is used, then the requests of that bucket wait for the
next window. So ``n`` calls of a bucket of quota ``q`` take at least ``(ceil(n / q) - 1)`` whole windows; the time
is the larger of that and the transfers themselves (every request a round trip of :data:`REQUEST_SECONDS`, shared
by ``workers``, and the bytes at :data:`LINK_BYTES_PER_SECOND`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .remote_tensors import LINK_BYTES_PER_SECOND, REQUEST_SECONDS

WINDOW_S = 300.0  # "All quotas are calculated over 5-minute fixed windows"


@dataclass(frozen=True)
class Quota:
    """A plan's requests per window, by bucket."""

    name: str
    resolvers: int
    api: int
    window_s: float = WINDOW_S


QUOTAS = {  # https://huggingface.co/docs/hub/rate-limits, the limits per 5-minute window
    "anonymous": Quota("anonymous (per IP address)", resolvers=3000, api=500),
    "free": Quota("a free account", resolvers=5000, api=1000),
    "pro": Quota("a PRO account", resolvers=12000, api=2500),
}


@dataclass(frozen=True)
class Cost:
    """The requests and bytes of reading some checkpoints (module docstring); ``bytes`` is NaN where a checkpoint's
    shape is not known before it is read."""

    checkpoints: int = 0
    resolver_calls: int = 0
    api_calls: int = 0
    cdn_calls: int = 0
    bytes: float = 0.0

    def __add__(self, other: Cost) -> Cost:
        return Cost(
            self.checkpoints + other.checkpoints,
            self.resolver_calls + other.resolver_calls,
            self.api_calls + other.api_calls,
            self.cdn_calls + other.cdn_calls,
            self.bytes + other.bytes,
        )

    def windows(self, quota: Quota) -> int:
        """Windows of ``quota`` the calls span: ``max(ceil(resolvers / q_r), ceil(api / q_a))``, at least 1."""
        return max(1, math.ceil(self.resolver_calls / quota.resolvers), math.ceil(self.api_calls / quota.api))

    def seconds(
        self,
        quota: Quota,
        *,
        workers: int = 2,
        request_s: float = REQUEST_SECONDS,
        bytes_per_s: float = LINK_BYTES_PER_SECOND,
    ) -> float:
        """Seconds at ``quota``: the larger of the whole windows waited, ``(windows - 1) * w``, and the transfers,
        ``requests * request_s / workers + bytes / bytes_per_s`` (the bytes counted as 0 when unknown)."""
        requests = self.resolver_calls + self.api_calls + self.cdn_calls
        data = 0.0 if math.isnan(self.bytes) else self.bytes
        transfer = requests * request_s / max(1, workers) + data / bytes_per_s
        return max((self.windows(quota) - 1) * quota.window_s, transfer)

    def summary(self, *, workers: int = 2, quotas: tuple[str, ...] = ("anonymous", "free")) -> str:
        """One line: ``plan: 160 checkpoints, 320 resolver, 170 API and 2,240 CDN calls, 6.82 GB; at the anonymous
        quota (3,000 resolver, 500 API calls per 5 min) about 9.5 min, with a free account (...) about 9.5 min (at
        100 Mbit/s and 0.1 s a request, 2 at once)``."""
        size = "bytes unknown until read" if math.isnan(self.bytes) else f"{self.bytes / 1e9:.2f} GB"
        times = []
        for key in quotas:
            quota = QUOTAS[key]
            limits = f"{quota.resolvers:,} resolver, {quota.api:,} API calls per {quota.window_s / 60:g} min"
            at = "at the anonymous quota" if key == "anonymous" else f"with {quota.name}"
            times.append(f"{at} ({limits}) about {duration(self.seconds(quota, workers=workers))}")
        link = f"{LINK_BYTES_PER_SECOND * 8 / 1e6:g} Mbit/s and {REQUEST_SECONDS:g} s a request, {workers} at once"
        return (
            f"plan: {self.checkpoints:,} checkpoint{'s' if self.checkpoints != 1 else ''}, "
            f"{self.resolver_calls:,} resolver, {self.api_calls:,} API and {self.cdn_calls:,} CDN calls, {size}; "
            + ", ".join(times)
            + f" (at {link})"
        )


def duration(seconds: float) -> str:
    """``42 s``, ``9.5 min``, ``2.3 h``."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def checkpoint_cost(
    *,
    n_layers: int | None = None,
    query_key_bytes: float | None = None,
    weight_files: int = 1,
    sharded: bool = False,
    fused_per_head: bool = False,
) -> Cost:
    """The requests and bytes of one checkpoint read by byte ranges on a first run (module docstring). Without
    ``n_layers`` the CDN calls are counted as the weight files' indexes alone; without ``query_key_bytes`` the bytes
    are NaN."""
    cdn = 2 * weight_files + (n_layers or 0)
    data = math.nan if query_key_bytes is None else query_key_bytes * (1.5 if fused_per_head else 1.0)
    return Cost(
        checkpoints=1,
        resolver_calls=1 + int(sharded) + weight_files,
        api_calls=1,
        cdn_calls=cdn,
        bytes=data,
    )


def listing_cost(repositories: int) -> Cost:
    """The API calls of listing the revisions of ``repositories`` repositories (one each)."""
    return Cost(api_calls=repositories)


def hub_models(models) -> list[str]:
    """The models of a list that are hub ids (``ORG/NAME[@REV]``, not an existing path): those that cost requests."""
    from pathlib import Path

    from .hub import looks_like_hub_id

    return [m for m in models if looks_like_hub_id(str(m)) and not Path(str(m)).exists()]


def sweep_cost(models) -> Cost:
    """The cost of reading ``models`` (a sweep's list, those already scored left out by the caller): every hub id a
    checkpoint of one weight file whose shape is not known yet."""
    cost = Cost()
    for _ in hub_models(models):
        cost = cost + checkpoint_cost()
    return cost


def series_cost(entries) -> Cost:
    """The cost of reading the checkpoints of series entries (:func:`attnstruct.checkpoints.series.entries`: each
    model once), with each series' shape (a trajectory's ``shape``; Ettin's pairs and crosses by their size), and the
    listing of each trajectory repository whose revisions are read."""
    from . import series

    cost = Cost()
    shapes = {}
    for row in entries.drop_duplicates("model").itertuples():
        trajectory = series.TRAJECTORIES.get(row.series) if row.kind == "trajectory" else None
        shapes[row.model] = trajectory.shape if trajectory else series.ETTIN_SHAPES.get(str(row.unit))
    for model in hub_models(shapes):
        shape = shapes[model]
        cost = cost + checkpoint_cost(
            n_layers=shape.n_layers if shape else None,
            query_key_bytes=shape.query_key_bytes() if shape else None,
            fused_per_head=bool(shape and shape.fused_per_head),
        )
    listed = {
        str(row.model).split("@")[0]
        for row in entries.itertuples()
        if row.kind == "trajectory"
        and (trajectory := series.TRAJECTORIES.get(row.series)) is not None
        and trajectory.match is not None
    }
    return cost + listing_cost(len(listed))
