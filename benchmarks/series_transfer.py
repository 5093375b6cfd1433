"""Benchmark: what reading a public checkpoint series by byte ranges costs per checkpoint, against this machine's limit.

    .venv/bin/python benchmarks/series_transfer.py [--checkpoints 8 --shapes ... --workers 2 --threads 2 --json PATH]

What it measures: for each shape of a catalogued series (``attnstruct.checkpoints.series``: Pythia-160m, GPT-NeoX,
float16, fused per-head QKV with biases; Ettin-150m's ModernBERT encoder, float32, fused ``Wqkv``, no biases, and its
decoder, separate ``q_proj``/``k_proj``; MultiBERTs' BERT-base, float32, with biases), ``--checkpoints`` real
``pytorch_model.bin`` files are written as ``torch.save(model.state_dict(), "pytorch_model.bin")`` writes them: the
transformers model built from its config on the ``meta`` device, its tensors made zeros of the checkpoint's dtype
(tied ones sharing their storage), the query/key storages (a fused QKV weight whole) random from one seed per
checkpoint. Each file becomes a ``SparseFile`` (``tests/standin_files.py``) holding only the ZIP headers and
descriptors, ``data.pkl``, the central directory and the query/key storages; the zero storages are dropped after
checking they are zeros, and the ``SparseFile`` is checked to read back the whole file byte for byte. A 2-layer copy
of each shape is also materialised and read back by ``torch.load(weights_only=True)``.

A stand-in hub (``tests/standin_hub.py``, LFS files redirected to its CDN) serves one repository per shape, its
checkpoints as ``step*`` branches (Pythia) or ``step*``/``ext*``/``decay*`` tags (Ettin), or one repository per
checkpoint (MultiBERTs). With fresh caches (``HF_ENDPOINT``, ``HF_HUB_CACHE``, ``ATTNSTRUCT_CACHE`` pointed at the
hub and at empty folders), the revisions are listed (``list_revisions`` with the series' ``match``, as
``attnstruct revisions`` does; timed apart) and ``run_sweep`` scores the lines on the CPU. Reported per shape:
checkpoints per minute of the sweep; MB per checkpoint fetched (``sweep.nc``'s ``bytes_fetched`` | the hub's count,
which also has ``config.json``) against ``Shape.query_key_bytes()`` (the formula), and the overhead over it per
checkpoint; the share of the file fetched; and, from the CDN's log of Range requests, what the fetched bytes were:
query/key rows (the formula's), value rows of a fused weight or bias, other tensors, or the ZIP's index (end
records, central directory, ``data.pkl``, local headers), and how many of them were sent twice.

The limit, measured in the same run on the same machine, is I/O + compute, as in ``sweep_throughput.py``:
  * I/O: the same bytes read from the same hub (through its CDN redirect) in 64 MB single-range GETs through
    ``huggingface_hub.get_session()`` (two streams), plus writing them to disk once, as the sweep's range cache must;
  * compute: the products' floating-point operations in the sweep's precision over this machine's ``torch.matmul``
    rate at that shape (best of 10, all cores, once per width). Every catalogued shape has ``r = H d_head =
    d_model``, where ``factor_scores`` forms each layer matrix ``W_q^T W_k``: one product of ``2 r d^2`` flops per
    layer.
``ratio = sweep time / limit``: 1 means the sweep does nothing but the necessary transfers and products (it can go
below 1, since the sweep overlaps them).

Last, from the formula alone, every catalogued series (``TRAJECTORIES``, ``PAIRS``, ``CROSSES``): the checkpoints it
names (a trajectory: per seed ``max_checkpoints``, 12 as in notebook 09 | 16 as in the paper profile, or fewer where
the run names fewer; a hub listing is assumed to have that many), MB per checkpoint, GB in total, and a projected
time. The matching shape is the series' own, else the Ettin-150m shape of the checkpoint's role (other Ettin sizes,
OLMo-1B). Where the shapes are equal the projection takes the measured seconds per checkpoint; else the matching
shape's ratio times the checkpoint's limit: its formula bytes plus the matching shape's overhead at the matching
shape's I/O rate (read + disk), plus its flops at this machine's rate at its width and precision. It is a
projection from a stand-in hub on the loopback of this machine: the real hub's bandwidth and latency will differ, and
a series whose checkpoints are safetensors has another index overhead.
Other work on the machine inflates every time, so the load average is printed before and after.

Then the run a real hub's user meets (``--quota-checkpoints N``, 16 by default; ``--quota-only`` for it alone):
``N`` Pythia-160m checkpoints swept against a stand-in that answers every request and redirect hop after 100 ms,
redirects LFS files to signed CDN links, and keeps the anonymous quota (3,000 resolver and 500 API calls per 5-minute
fixed window, https://huggingface.co/docs/hub/rate-limits) scaled to 30 and 5 calls per 15-second window, with the
``RateLimit`` headers the hub sends. Reported: checkpoints per minute against the quota's own limit, the calls per
checkpoint by bucket (counted by the hub), the 429s answered, and the time ``attnstruct.checkpoints.hub_costs``
projects for those calls at that quota (:func:`measure_under_quota`).
"""

from __future__ import annotations

import argparse
import io
import json
import math
import mmap
import os
import struct
import sys
import tempfile
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from attnstruct.checkpoints import series
from attnstruct.checkpoints.revisions import list_revisions
from attnstruct.checkpoints.scoring import block_precision
from attnstruct.checkpoints.sweep import run_sweep
from attnstruct.results import load_dataset

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))
from standin_hub import SparseFile, StandinHub  # noqa: E402
from sweep_throughput import CHUNK, STREAMS, best_of, byte_ranges  # noqa: E402
from sweep_throughput import Shape as LimitShape  # noqa: E402
from sweep_throughput import compute_limit as _compute_limit  # noqa: E402

FILE = "pytorch_model.bin"
VERIFY_CHUNK = 64 << 20  # bytes compared at a time, SparseFile against the file
START = time.perf_counter()


@dataclass(frozen=True)
class Bench:
    """One shape to serve: the series whose shape it is, the transformers model and config, the dtype, which tensors
    are the query/key storages (name suffixes), their layout, and how the series names its checkpoints."""

    name: str  # a key of series.TRAJECTORIES
    model: str
    config_class: str
    config: dict
    dtype: torch.dtype
    query_key: tuple[str, ...]
    fused: str | None  # "per_head": [q_h, k_h, v_h] for each head h; "contiguous": [q | k | v]; None: separate
    refs: str  # "branch", "tag" (revisions of one repository) or "repos" (one repository per checkpoint)

    @property
    def shape(self) -> series.Shape:
        return series.TRAJECTORIES[self.name].shape


MODERNBERT = dict(vocab_size=50368, hidden_size=768, intermediate_size=1152, num_hidden_layers=22,
                  num_attention_heads=12, attention_bias=False, global_attn_every_n_layers=3)  # fmt: skip
BENCHES = {
    b.name: b
    for b in (
        Bench("pythia-160m", "GPTNeoXForCausalLM", "GPTNeoXConfig",
              dict(vocab_size=50304, hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
                   num_attention_heads=12, max_position_embeddings=2048, rotary_pct=0.25, use_parallel_residual=True,
                   attention_bias=True, tie_word_embeddings=False),
              torch.float16, ("attention.query_key_value.weight", "attention.query_key_value.bias"), "per_head",
              "branch"),
        Bench("ettin-150m-encoder", "ModernBertForMaskedLM", "ModernBertConfig", MODERNBERT, torch.float32,
              ("attn.Wqkv.weight",), "contiguous", "tag"),
        Bench("ettin-150m-decoder", "ModernBertDecoderForCausalLM", "ModernBertDecoderConfig", MODERNBERT,
              torch.float32, ("attn.q_proj.weight", "attn.k_proj.weight"), None, "tag"),
        Bench("multiberts", "BertForPreTraining", "BertConfig",
              dict(vocab_size=30522, hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
                   num_attention_heads=12, max_position_embeddings=512, type_vocab_size=2),
              torch.float32, tuple(f"attention.self.{t}.{p}" for t in ("query", "key") for p in ("weight", "bias")),
              None, "repos"),
    )
}  # fmt: skip


def log(message: str) -> None:
    print(f"[{time.perf_counter() - START:6.1f} s] {message}", file=sys.stderr, flush=True)


# -- the checkpoints ------------------------------------------------------------------------------------------------


def state_dict(bench: Bench, layers: int | None = None) -> tuple[dict, list[str], bytes]:
    """The model's ``state_dict()`` (an ``OrderedDict`` with its ``_metadata``) with zeros of the checkpoint's dtype,
    tied tensors sharing one storage; the names of its query/key tensors; its ``config.json``."""
    import transformers

    kwargs = dict(bench.config, **({"num_hidden_layers": layers} if layers else {}))
    config = getattr(transformers, bench.config_class)(**kwargs, dtype=str(bench.dtype).removeprefix("torch."))
    config.architectures = [bench.model]
    with torch.device("meta"):
        model = getattr(transformers, bench.model)(config)
    state = model.state_dict(keep_vars=True)
    zeros: dict[int, torch.Tensor] = {}
    for name, tensor in state.items():
        dtype = bench.dtype if tensor.is_floating_point() else tensor.dtype
        state[name] = zeros.setdefault(id(tensor), torch.zeros(tensor.shape, dtype=dtype))
    query_key = [name for name in state if name.endswith(bench.query_key)]
    if len(query_key) != config.num_hidden_layers * len(bench.query_key):
        raise SystemExit(f"{bench.name}: {len(query_key)} query/key tensors found by {bench.query_key}")
    return state, query_key, config.to_json_string().encode()


def fill(state: dict, query_key: list[str], seed: int) -> None:
    """Put random values (normal, 0.02) in the query/key tensors, from ``seed``."""
    gen = torch.Generator().manual_seed(seed)
    for name in query_key:
        old = state[name]
        state[name] = (torch.randn(old.shape, generator=gen) * 0.02).to(old.dtype)


def query_key_rows(bench: Bench, name: str, shape: tuple[int, ...]) -> list[tuple[int, int]]:
    """Rows ``[start, end)`` of tensor ``name`` that the formula counts (all of a separate query/key tensor)."""
    s = bench.shape
    if bench.fused == "per_head":
        return [(3 * h * s.d_head, (3 * h + 2) * s.d_head) for h in range(s.n_heads)]
    if bench.fused == "contiguous":
        return [(0, 2 * s.n_heads * s.d_head)]
    return [(0, shape[0])]


@dataclass
class Layout:
    """Where a written checkpoint's bytes lie: the segments a SparseFile keeps, and the file's bytes by category."""

    size: int
    segments: dict[int, bytes]
    categories: dict[str, list[tuple[int, int]]]  # "query/key", "value rows", "other tensors"; the rest is "index"


def _storage_keys(state: dict) -> dict[str, str]:
    """``{tensor name: storage key}`` in torch.save's numbering (first appearance in the state dict)."""
    keys: dict[int, str] = {}
    return {n: keys.setdefault(t.untyped_storage().data_ptr(), str(len(keys))) for n, t in state.items()}


def layout(bench: Bench, path: Path, state: dict, query_key: list[str]) -> Layout:
    """Read back the file torch.save wrote: check that each storage holds its tensor's bytes (zeros or the random
    query/key values), keep everything but the zero storages' data as segments, and sort its bytes by category."""
    size = path.stat().st_size
    storage_of, qk = _storage_keys(state), set(query_key)
    tensor_of = {key: name for name, key in storage_of.items()}  # one tensor per storage (tied ones are equal)
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
        view = np.frombuffer(data, dtype=np.uint8)
        members = zipfile.ZipFile(handle).infolist()
        prefix = members[0].filename.split("/", 1)[0]
        dropped, categories = [], {"query/key": [], "value rows": [], "other tensors": []}
        for m in members:
            if not m.filename.startswith(f"{prefix}/data/") or m.compress_type != zipfile.ZIP_STORED:
                continue
            name = tensor_of[m.filename.rsplit("/", 1)[1]]
            n, k = struct.unpack_from("<HH", data, m.header_offset + 26)
            begin = m.header_offset + 30 + n + k
            end = begin + m.file_size
            tensor = state[name]
            if name in qk:
                if view[begin:end].tobytes() != tensor.view(torch.uint8).numpy().tobytes():
                    raise SystemExit(f"{path}: storage of {name} does not hold its values")
                row = m.file_size // tensor.shape[0]
                at = begin
                for a, b in query_key_rows(bench, name, tuple(tensor.shape)):
                    if at < begin + a * row:
                        categories["value rows"].append((at, begin + a * row))
                    categories["query/key"].append((begin + a * row, begin + b * row))
                    at = begin + b * row
                if at < end:
                    categories["value rows"].append((at, end))
            else:
                if view[begin:end].any():
                    raise SystemExit(f"{path}: storage of {name} is not zeros")
                dropped.append((begin, end))
                categories["other tensors"].append((begin, end))
        segments, at = {}, 0
        for begin, end in sorted(dropped) + [(size, size)]:
            if at < begin:
                segments[at] = data[at:begin]
            at = end
        del view  # the map closes only without views into it
    return Layout(size, segments, {k: sorted(v) for k, v in categories.items()})


def check_sparse(sparse: SparseFile, path: Path) -> None:
    """The SparseFile reads back the whole file, byte for byte (its stored bytes and the zeros it leaves out)."""
    with open(path, "rb") as handle:
        for start in range(0, sparse.size, VERIFY_CHUNK):
            if sparse.read(start, start + VERIFY_CHUNK) != handle.read(VERIFY_CHUNK):
                raise SystemExit(f"{path}: the SparseFile differs from the file from byte {start} on")


def make_checkpoint(bench: Bench, state: dict, query_key: list[str], seed: int, scratch: Path) -> Layout:
    """One checkpoint: random query/key values from ``seed``, written by torch.save, read back and checked."""
    fill(state, query_key, seed)
    path = scratch / FILE
    torch.save(state, path)
    try:
        found = layout(bench, path, state, query_key)
        check_sparse(SparseFile(found.size, found.segments), path)
    finally:
        path.unlink()
    return found


def reduced_check(bench: Bench, scratch: Path, layers: int = 2) -> dict:
    """A ``layers``-layer copy: the SparseFile materialised equals the file and ``torch.load(weights_only=True)``
    gives back every tensor (names, shapes, dtypes, values, tied storages)."""
    state, query_key, _ = state_dict(bench, layers)
    fill(state, query_key, seed=12345)
    path = scratch / FILE
    torch.save(state, path)
    try:
        found = layout(bench, path, state, query_key)
        sparse = SparseFile(found.size, found.segments)
        blob = sparse.read()
        if blob != path.read_bytes():
            raise SystemExit(f"{bench.name}: the materialised {layers}-layer SparseFile differs from the file")
    finally:
        path.unlink()
    loaded = torch.load(io.BytesIO(blob), weights_only=True)
    if list(loaded) != list(state):
        raise SystemExit(f"{bench.name}: torch.load gives other tensor names")
    for name, tensor in state.items():
        got = loaded[name]
        if got.dtype != tensor.dtype or got.shape != tensor.shape or not torch.equal(got, tensor):
            raise SystemExit(f"{bench.name}: torch.load gives another {name}")
    tied = len({t.untyped_storage().data_ptr() for t in state.values()})
    if len({t.untyped_storage().data_ptr() for t in loaded.values()}) != tied:
        raise SystemExit(f"{bench.name}: torch.load gives other shared storages")
    stored = sum(len(v) for v in found.segments.values())
    return {"layers": layers, "file_bytes": found.size, "stored_bytes": stored, "tensors": len(state)}


def revisions(bench: Bench, n: int) -> list[str]:
    """The revision names (or, for one repository per checkpoint, the repository names) of ``n`` checkpoints."""
    if bench.refs == "repos":
        return [name.replace("google/", "bench/") for name in series.TRAJECTORIES[bench.name].runs[0][:n]]
    if bench.refs == "tag" and n >= 3:  # Ettin: pre-training, then context extension, then decay
        return [f"step{1000 * i}" for i in range(n - 2)] + ["ext1000", "decay1000"]
    return [f"step{1000 * i}" for i in range(n)]


def serve(hub: StandinHub, bench: Bench, n: int, scratch: Path, shape_index: int) -> dict:
    """Add ``n`` checkpoints of ``bench`` to ``hub``; what the sweep and the limit need about them."""
    state, query_key, config = state_dict(bench)
    repo, lines, commits, layout_of = f"bench/{bench.name}", [], {}, None
    for i, name in enumerate(revisions(bench, n)):
        found = make_checkpoint(bench, state, query_key, seed=1000 * shape_index + i, scratch=scratch)
        layout_of = layout_of or found
        files = {"config.json": config, FILE: SparseFile(found.size, found.segments)}
        if bench.refs == "repos":
            commits[hub.add_repo(name, files)] = name
            lines.append(name)
        else:
            commits[hub.add_repo(repo, files, revision=name, tag=bench.refs == "tag")] = f"{repo}@{name}"
            lines.append(f"{repo}@{name}")
            if i == n - 1:
                hub.add_repo(repo, files)  # main: the last checkpoint, as on the hub; the listing leaves it out
        log(f"{bench.name}: checkpoint {i + 1}/{n} written, read back and served ({found.size / 1e6:.1f} MB)")
    stored = sum(len(v) for v in layout_of.segments.values())
    return {"repo": repo, "lines": lines, "commits": commits, "layout": layout_of, "stored_bytes": stored}


# -- the measurements -----------------------------------------------------------------------------------------------


def _range_bytes(header: str | None, size: int) -> tuple[int, int] | None:
    if not header or not header.startswith("bytes="):
        return None
    a, _, b = header[len("bytes=") :].partition("-")
    if a == "":
        return max(0, size - int(b)), size
    return int(a), min(size, int(b) + 1) if b else size


def _union(spans: list[tuple[int, int]]) -> int:
    total, reach = 0, 0
    for a, b in sorted(spans):
        total += max(0, b - max(a, reach))
        reach = max(reach, b)
    return total


def read_breakdown(hub: StandinHub, served: dict) -> dict:
    """The CDN's Range GETs of the checkpoints' ``pytorch_model.bin``, sorted by what their bytes are, per
    checkpoint (every byte counted as often as it was sent; ``read twice``: bytes sent more than once)."""
    found = served["layout"]
    totals = dict.fromkeys([*found.categories, "index"], 0)
    spans: dict[str, list[tuple[int, int]]] = {}
    for method, path, header, _ in hub.cdn_requests:
        commit = path.split("/")[-2] if path.endswith(f"/{FILE}") else None
        if method != "GET" or commit not in served["commits"]:
            continue
        span = _range_bytes(header, found.size) or (0, found.size)
        spans.setdefault(commit, []).append(span)
        rest = span[1] - span[0]
        for category, intervals in found.categories.items():
            inside = sum(max(0, min(b, span[1]) - max(a, span[0])) for a, b in intervals)
            totals[category] += inside
            rest -= inside
        totals["index"] += rest
    n = len(served["lines"])
    twice = sum(sum(b - a for a, b in v) - _union(v) for v in spans.values())
    requests = sum(len(v) for v in spans.values())
    return {"requests_per_checkpoint": requests / n, **{k: v / n for k, v in totals.items()}, "read twice": twice / n}


def listing(bench: Bench, served: dict) -> tuple[list[str], float]:
    """The sweep's lines: the repository's revisions matching the series (timed), or the repositories."""
    if bench.refs == "repos":
        return served["lines"], 0.0
    start = time.perf_counter()
    table = list_revisions(served["repo"], match=series.TRAJECTORIES[bench.name].match)
    seconds = time.perf_counter() - start
    lines = list(table["model"])
    if lines != served["lines"]:
        raise SystemExit(f"{bench.name}: the listing gives {lines}, not {served['lines']} (in training order)")
    return lines, seconds


def sweep(lines: list[str], workers: int, out: Path) -> dict:
    start = time.perf_counter()
    result = run_sweep(lines, out, device="cpu", workers=workers)
    seconds = time.perf_counter() - start
    if result.failures or result.path is None:
        raise SystemExit(f"sweep failed: {result.failures}")
    recorded = load_dataset(result.path)["bytes_fetched"].to_series()
    return {"seconds": seconds, "retries": result.retries, "bytes_nc": {line: int(recorded[line]) for line in lines}}


def io_limit(hub: StandinHub, served: dict, fetched: dict[str, int], tmp: Path) -> tuple[float, float]:
    """Seconds to GET ``fetched[line]`` bytes of each checkpoint's file in single ranges, then to write them."""
    from huggingface_hub import get_session

    session, read_s, write_s, before = get_session(), 0.0, 0.0, hub.bytes_served
    tmp.mkdir(parents=True, exist_ok=True)
    size = served["layout"].size

    def get(job: tuple[str, str, int, int]) -> bytes:
        line, file, start, end = job
        repo, _, revision = line.partition("@")
        url = f"{hub.url}/{repo}/resolve/{revision or 'main'}/{file}"
        response = session.get(url, headers={"Range": f"bytes={start}-{end - 1}"}, timeout=120)
        response.raise_for_status()
        return response.content

    for i, line in enumerate(fetched):
        start = time.perf_counter()
        with ThreadPoolExecutor(STREAMS) as pool:
            jobs = [(line, *job) for job in byte_ranges({FILE: size}, fetched[line])]
            bodies = list(pool.map(get, jobs))
        written = time.perf_counter()
        for j, body in enumerate(bodies):
            (tmp / f"{i}-{j}.bin").write_bytes(body)
        read_s, write_s = read_s + written - start, write_s + time.perf_counter() - written
    if hub.bytes_served - before != sum(fetched.values()):
        raise SystemExit(f"I/O limit: read {hub.bytes_served - before} bytes, not {sum(fetched.values())}")
    return read_s, write_s


_COMPUTE: dict[series.Shape, tuple[float, dict]] = {}
_RATES: dict[tuple[int, int, str], float] = {}
REPEATS = 10  # the product's best time of this many: the rate least disturbed by other work on the machine


def compute_limit(s: series.Shape) -> tuple[float, dict]:
    """Seconds of one checkpoint's products at this machine's rate, all cores, measured once per width.

    With ``r = H d_head >= d_model`` (every catalogued shape) ``factor_scores`` forms the layer matrix ``A^T B``, one
    product of ``2 r d^2`` flops per layer, timed at that shape and dtype (best of ``REPEATS``); below, the Gram
    path, as ``sweep_throughput.compute_limit`` counts and times it."""
    if s in _COMPUTE:
        return _COMPUTE[s]
    r, d = s.n_heads * s.d_head, s.d_model
    if r < d:
        shape = LimitShape("", "", "", s.n_layers, d, s.n_heads, s.n_heads, s.d_head, 0, 0, False, s.bias, 1)
        _COMPUTE[s] = _compute_limit(shape, 1)
        return _COMPUTE[s]
    precision = block_precision(d, "auto")
    if (r, d, precision) not in _RATES:
        dtype, threads = getattr(torch, precision), torch.get_num_threads()
        a, b = torch.randn(r, d, dtype=dtype), torch.randn(r, d, dtype=dtype)
        torch.set_num_threads(os.cpu_count() or 1)
        try:
            a.mT @ b  # warm-up
            _RATES[r, d, precision] = 2 * r * d * d / best_of(lambda: a.mT @ b, REPEATS)[0]
        finally:
            torch.set_num_threads(threads)
    rate, flops = _RATES[r, d, precision], s.n_layers * 2 * r * d * d
    _COMPUTE[s] = flops / rate, {"flops_per_model": flops, "gemm_flops_s": {"matrix": rate}}
    return _COMPUTE[s]


def measure(bench: Bench, n: int, workers: int, tmp: Path, scratch: Path, shape_index: int) -> dict:
    with StandinHub() as hub:
        hub.redirect_large()
        log(f"{bench.name}: writing {n} checkpoints")
        served = serve(hub, bench, n, scratch, shape_index)
        os.environ.update(HF_ENDPOINT=hub.url, HF_HUB_CACHE=str(tmp / "hf-cache"), ATTNSTRUCT_CACHE=str(tmp / "cache"))
        lines, list_s = listing(bench, served)
        log(f"{bench.name}: sweep of {n} checkpoints, {workers} workers, {torch.get_num_threads()} torch threads")
        row = sweep(lines, workers, tmp / "out")
        hub_bytes = sum(hub.bytes_served_for(r) for r in {line.partition("@")[0] for line in lines})
        breakdown = read_breakdown(hub, served)
        log(f"{bench.name}: I/O limit, {sum(row['bytes_nc'].values()) / 1e6:.0f} MB in {CHUNK >> 20} MB GETs")
        read_s, write_s = io_limit(hub, served, row["bytes_nc"], tmp / "io")
    log(f"{bench.name}: GEMM rate ({block_precision(bench.shape.d_model, 'auto')})")
    per_checkpoint, flops = compute_limit(bench.shape)
    compute_s = n * per_checkpoint
    limit = read_s + write_s + compute_s
    nc = sum(row["bytes_nc"].values())
    return {"shape": bench.name, "checkpoints": n, "lines": lines, "listing_s": list_s, **row,
            "bytes_hub": hub_bytes, "file_bytes": served["layout"].size, "stored_bytes": served["stored_bytes"],
            "formula_bytes": bench.shape.query_key_bytes(), "overhead_bytes": nc / n - bench.shape.query_key_bytes(),
            "overhead_range": [min(row["bytes_nc"].values()) - bench.shape.query_key_bytes(),
                               max(row["bytes_nc"].values()) - bench.shape.query_key_bytes()],
            "read_breakdown": breakdown, "io_read_s": read_s, "io_write_s": write_s, "compute_s": compute_s, **flops,
            "limit_s": limit, "ratio": row["seconds"] / limit}  # fmt: skip


# -- under the hub's latency and quota --------------------------------------------------------------------------------

QUOTA_WINDOW_S = 15.0  # the anonymous quota's 5-minute window, scaled down 20 times
QUOTA_SCALE = 100  # its 3,000 resolver and 500 API calls per window, divided by this: 30 and 5
LATENCY_S = 0.1  # per request and per redirect hop, on the hub and on its CDN


def measure_under_quota(bench: Bench, n: int, workers: int, tmp: Path, scratch: Path, shape_index: int) -> dict:
    """The sweep of ``n`` checkpoints of ``bench`` against a stand-in hub that behaves as the real one does under
    load: every request and redirect hop answered after :data:`LATENCY_S`, LFS files redirected to signed CDN links,
    and the anonymous quota (3,000 resolver and 500 API calls per 5-minute fixed window) scaled to windows of
    :data:`QUOTA_WINDOW_S` with :data:`QUOTA_SCALE` times fewer calls, ``t`` truncated as the hub's ``RateLimit``
    header sends it. Reported: checkpoints per minute against the quota's own limit, ``60 / w * min(q_r / r, q_a /
    a)`` for the resolver and API calls ``r`` and ``a`` one checkpoint took (counted by the hub), and the time
    :class:`attnstruct.checkpoints.hub_costs.Cost` projects for these calls at this quota."""
    from attnstruct.checkpoints import hub_costs

    quota = hub_costs.Quota(
        "anonymous, scaled",
        resolvers=hub_costs.QUOTAS["anonymous"].resolvers // QUOTA_SCALE,
        api=hub_costs.QUOTAS["anonymous"].api // QUOTA_SCALE,
        window_s=QUOTA_WINDOW_S,
    )
    with StandinHub() as hub:
        hub.redirect_large()
        hub.sign_links(3600)
        log(f"{bench.name}: writing {n} checkpoints for the run under latency and quota")
        served = serve(hub, bench, n, scratch, shape_index)
        os.environ.update(HF_ENDPOINT=hub.url, HF_HUB_CACHE=str(tmp / "hf-cache"), ATTNSTRUCT_CACHE=str(tmp / "cache"))
        os.environ.pop("HF_TOKEN", None)
        lines, _ = listing(bench, served)
        hub.reset_counters()
        hub.latency(LATENCY_S)
        hub.quota("resolvers", quota.resolvers, quota.window_s)
        hub.quota("api", quota.api, quota.window_s)
        log(f"{bench.name}: sweep of {n} checkpoints under {LATENCY_S * 1e3:.0f} ms a hop, {quota.resolvers} "
            f"resolver and {quota.api} API calls per {quota.window_s:g} s")  # fmt: skip
        row = sweep(lines, workers, tmp / "out-quota")
        calls = {bucket: hub.calls(bucket) for bucket in ("resolvers", "api", "cdn")}
        refused = sum(1 for status in hub.statuses if status == 429)
    per = {bucket: count / n for bucket, count in calls.items()}
    limit = 60 / quota.window_s * min(quota.resolvers / per["resolvers"], quota.api / per["api"])
    measured = 60 * n / row["seconds"]
    cost = hub_costs.Cost(n, calls["resolvers"], calls["api"], calls["cdn"], float(sum(row["bytes_nc"].values())))
    projected = cost.seconds(quota, workers=workers, request_s=LATENCY_S, bytes_per_s=math.inf)
    return {"shape": bench.name, "checkpoints": n, "seconds": row["seconds"], "retries": row["retries"],
            "calls": calls, "calls_per_checkpoint": per, "refused_429": refused, "quota": quota.__dict__,
            "checkpoints_per_min": measured, "quota_limit_per_min": limit, "ratio_to_limit": limit / measured,
            "projected_s": projected}  # fmt: skip


def print_quota(r: dict) -> None:
    q, per = r["quota"], r["calls_per_checkpoint"]
    print(f"\nunder {LATENCY_S * 1e3:.0f} ms a hop and the anonymous quota scaled to {q['resolvers']} resolver and "
          f"{q['api']} API calls per {q['window_s']:g} s window (signed CDN links; t truncated):")  # fmt: skip
    print(f"  {r['shape']}: {r['checkpoints']} checkpoints in {r['seconds']:.1f} s, {r['checkpoints_per_min']:.1f} "
          f"checkpoints/min; the quota's own limit {r['quota_limit_per_min']:.1f}/min (limit / measured "
          f"{r['ratio_to_limit']:.2f}); per checkpoint {per['resolvers']:.2f} resolver, {per['api']:.2f} API, "
          f"{per['cdn']:.1f} CDN calls; {r['refused_429']} answers 429; hub_costs projects "
          f"{r['projected_s']:.1f} s; {r['retries']}")  # fmt: skip


# -- the series, from the formula ------------------------------------------------------------------------------------


def catalogue(keep: int) -> list[dict]:
    """Every catalogued series: its checkpoints as ``(role, Shape, name or None)``, ``keep`` per trajectory run."""
    rows = []
    for name, t in series.TRAJECTORIES.items():
        counts = [min(len(run), keep) if t.match is None else keep for run in t.runs]
        rows.append({"series": name, "kind": "trajectory", "checkpoints": [(t.role, t.shape, None)] * sum(counts)})
    for name, pairs in series.PAIRS.items():
        found = [(role, series.ETTIN_SHAPES[size], model) for size, *models in pairs
                 for role, model in zip(("encoder", "decoder"), models)]  # fmt: skip
        rows.append({"series": name, "kind": "pair", "checkpoints": found})
    for name, crosses in series.CROSSES.items():
        other = {"encoder": "decoder", "decoder": "encoder"}
        found = [(r, series.ETTIN_SHAPES[size], m) for size, role, before, after in crosses
                 for r, m in ((other[role], before), (role, after))]  # fmt: skip
        rows.append({"series": name, "kind": "cross", "checkpoints": found})
    return rows


def match(series_name: str, role: str, measured: dict[str, dict]) -> str:
    """The measured shape a checkpoint's time is projected from: its own series, else the Ettin-150m shape of its
    role (Ettin sizes, OLMo), else the measured shape of the same role, else any."""
    for name in (series_name, f"ettin-150m-{role}"):
        if name in measured:
            return name
    same_role = [n for n in measured if series.TRAJECTORIES[n].role == role]
    return (same_role or list(measured))[0]


def projected_seconds(s: series.Shape, row: dict) -> float:
    """Seconds to read and score one checkpoint of shape ``s``, projected from the measured ``row`` (docstring)."""
    if s == series.TRAJECTORIES[row["shape"]].shape:
        return row["seconds"] / row["checkpoints"]
    io_rate = sum(row["bytes_nc"].values()) / (row["io_read_s"] + row["io_write_s"])
    return row["ratio"] * ((s.query_key_bytes() + row["overhead_bytes"]) / io_rate + compute_limit(s)[0])


def projection(measured: dict[str, dict]) -> list[dict]:
    rows = []
    for keep in (12, 16):
        for entry in catalogue(keep):
            checkpoints = entry["checkpoints"]
            matched = [match(entry["series"], role, measured) for role, _, _ in checkpoints]
            mb = [s.query_key_bytes() / 1e6 for _, s, _ in checkpoints]
            seconds = [projected_seconds(s, measured[m]) for (_, s, _), m in zip(checkpoints, matched)]
            rows.append({"max_checkpoints": keep, "series": entry["series"], "kind": entry["kind"],
                         "checkpoints": len(checkpoints), "matched": sorted(set(matched)),
                         "mb_min": min(mb), "mb_max": max(mb), "gb": sum(mb) / 1e3, "seconds": sum(seconds),
                         "named": {n: [m, t] for (_, _, n), m, t in zip(checkpoints, mb, seconds) if n}})  # fmt: skip
    return rows


# -- the report ------------------------------------------------------------------------------------------------------


def duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


def print_tables(rows: list[dict], projected: list[dict], checks: dict, setup: dict) -> None:
    print(f"\nseries transfer: {setup['workers']} workers, torch threads {setup['threads']}, {os.cpu_count()} cores; "
          f"load average {setup['load_before']:.2f} before, {setup['load_after']:.2f} after; stand-in hub on "
          "127.0.0.1 (CDN redirect), pytorch_model.bin")  # fmt: skip
    head = (f"{'shape':<19} {'ckpts':>5} {'list s':>6} {'sweep s':>7} {'ckpt/min':>8} {'MB/ckpt nc|hub':>15} "
            f"{'formula MB':>10} {'over formula KB':>15} {'of file':>7} {'I/O s read|+disk':>16} {'compute s':>9} "
            f"{'limit s':>7} {'ratio':>5}")  # fmt: skip
    print(head + "\n" + "-" * len(head))
    for r in rows:
        n, nc = r["checkpoints"], sum(r["bytes_nc"].values())
        mb = f"{nc / n / 1e6:.2f}|{r['bytes_hub'] / n / 1e6:.2f}"
        io = f"{r['io_read_s']:.1f}|{r['io_read_s'] + r['io_write_s']:.1f}"
        low, high = (v / 1e3 for v in r["overhead_range"])
        over = f"{low:.1f}" if low == high else f"{low:.1f}-{high:.1f}"
        print(f"{r['shape']:<19} {n:>5} {r['listing_s']:>6.2f} {r['seconds']:>7.1f} {60 * n / r['seconds']:>8.2f} "
              f"{mb:>15} {r['formula_bytes'] / 1e6:>10.2f} {over:>15} "
              f"{nc / n / r['file_bytes']:>7.2%} {io:>16} {r['compute_s']:>9.1f} {r['limit_s']:>7.1f} "
              f"{r['ratio']:>5.2f}")  # fmt: skip
    print("\nwhat the CDN sent per checkpoint (from its Range log), and the files:")
    for r in rows:
        b, rates = r["read_breakdown"], "|".join(f"{v / 1e9:.1f}" for v in r["gemm_flops_s"].values())
        print(f"  {r['shape']}: {b['requests_per_checkpoint']:.0f} range GETs; query/key {b['query/key'] / 1e6:.3f} MB "
              f"(formula {r['formula_bytes'] / 1e6:.3f}), value rows {b['value rows'] / 1e3:.1f} KB, other tensors "
              f"{b['other tensors'] / 1e3:.1f} KB, ZIP index {b['index'] / 1e3:.1f} KB ({b['read twice'] / 1e3:.1f} KB "
              f"of all sent twice); file "
              f"{r['file_bytes'] / 1e6:.1f} MB, {r['stored_bytes'] / 1e6:.1f} MB stored; "
              f"{r['flops_per_model'] / 1e9:.1f} GFLOP/ckpt at {rates} GFLOP/s; {r['retries']}")  # fmt: skip
    checked = ", ".join(f"{k} ({v['tensors']} tensors, {v['file_bytes'] / 1e6:.1f} MB)" for k, v in checks.items())
    print(f"  checked: every SparseFile reads back its whole file; 2-layer copies torch.load(weights_only=True): "
          f"{checked}")  # fmt: skip
    print("\ncatalogued series, from the formula; time projected from the stand-in on loopback on this machine "
          "(the real hub's bandwidth will differ):")  # fmt: skip
    head = (f"{'series':<36} {'kind':<10} {'ckpts 12|16':>11} {'MB/ckpt':>13} {'GB 12|16':>13} "
            f"{'projected 12|16':>17}  from")  # fmt: skip
    print(head + "\n" + "-" * len(head))
    by_keep = {keep: [p for p in projected if p["max_checkpoints"] == keep] for keep in (12, 16)}
    for a, b in zip(by_keep[12], by_keep[16]):
        same = a["checkpoints"] == b["checkpoints"]
        count = f"{a['checkpoints']}" if same else f"{a['checkpoints']}|{b['checkpoints']}"
        mb = f"{a['mb_min']:.1f}" if a["mb_min"] == a["mb_max"] else f"{a['mb_min']:.1f}-{a['mb_max']:.1f}"
        gb = f"{a['gb']:.2f}" if same else f"{a['gb']:.2f}|{b['gb']:.2f}"
        time_ = duration(a["seconds"]) if same else f"{duration(a['seconds'])}|{duration(b['seconds'])}"
        print(f"{a['series']:<36} {a['kind']:<10} {count:>11} {mb:>13} {gb:>13} {time_:>17}  "
              f"{', '.join(a['matched'])}")  # fmt: skip
    for keep in (12, 16):
        rows_k = by_keep[keep]
        named = [(n, v) for p in rows_k for n, v in p["named"].items()]
        seen, repeated = set(), []  # a pair's members are the crosses' "before" checkpoints: read once
        for n, v in named:
            if n in seen:
                repeated.append(v)
            seen.add(n)
        total = sum(p["checkpoints"] for p in rows_k)
        gb = sum(p["gb"] for p in rows_k) - sum(m for m, _ in repeated) / 1e3
        seconds = sum(p["seconds"] for p in rows_k) - sum(t for _, t in repeated)
        print(f"all series at {keep} per run: {total} entries, {total - len(repeated)} checkpoints to read "
              f"({len(repeated)} named twice), {gb:.2f} GB, projected {duration(seconds)}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoints", type=int, default=8, help="checkpoints per shape (default 8)")
    parser.add_argument("--shapes", nargs="+", choices=list(BENCHES), default=list(BENCHES), help="shapes to serve")
    parser.add_argument("--workers", type=int, default=2, help="run_sweep workers (default 2)")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="torch threads (default: cores)")
    parser.add_argument("--scratch", type=Path, help="where each file is written before it is read back "
                        "(default /dev/shm when there, else the temporary folder)")  # fmt: skip
    parser.add_argument("--json", type=Path, help="write the numbers here")
    parser.add_argument("--quota-checkpoints", type=int, default=16, help="Pythia checkpoints swept under the hub's "
                        "latency and scaled quota (default 16; 0 skips that run)")  # fmt: skip
    parser.add_argument("--quota-only", action="store_true", help="only the run under latency and quota")
    args = parser.parse_args()
    os.environ["NO_PROXY"] = os.environ["no_proxy"] = "127.0.0.1"
    os.environ.pop("HF_HUB_OFFLINE", None)
    setup = {"workers": args.workers, "threads": args.threads, "checkpoints": args.checkpoints,
             "load_before": os.getloadavg()[0], "date": time.strftime("%Y-%m-%d")}  # fmt: skip
    torch.set_num_threads(args.threads)
    shm = Path("/dev/shm")
    rows, checks = [], {}
    with tempfile.TemporaryDirectory(prefix="attnstruct-series-bench-") as tmp:
        scratch_root = args.scratch or (shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(tmp))
        with tempfile.TemporaryDirectory(prefix="attnstruct-series-files-", dir=scratch_root) as scratch:
            for i, name in enumerate([] if args.quota_only else args.shapes):
                log(f"{name}: 2-layer copy, torch.load(weights_only=True)")
                checks[name] = reduced_check(BENCHES[name], Path(scratch))
                rows.append(measure(BENCHES[name], args.checkpoints, args.workers, Path(tmp) / name, Path(scratch), i))
            quota = None
            if args.quota_checkpoints:
                bench, where = BENCHES["pythia-160m"], Path(tmp) / "pythia-160m-quota"
                quota = measure_under_quota(bench, args.quota_checkpoints, args.workers, where, Path(scratch), 9)
    if args.quota_only:
        print_quota(quota)
        if args.json:
            args.json.write_text(json.dumps({"setup": setup, "quota": quota}, indent=2, default=str))
        return
    measured = {r["shape"]: r for r in rows}
    log("projection: GEMM rates at the catalogued widths")
    projected = projection(measured)
    setup.update(load_after=os.getloadavg()[0])
    print_tables(rows, projected, checks, setup)
    if quota:
        print_quota(quota)
    if args.json:
        rates = {f"r {r}, d {d}, {p}": v for (r, d, p), v in _RATES.items()}
        out = {"setup": setup, "shapes": rows, "reduced_checks": checks, "series": projected, "gemm_flops_s": rates,
               "quota": quota}  # fmt: skip
        args.json.write_text(json.dumps(out, indent=2, default=str))
        print(f"numbers written to {args.json}")


if __name__ == "__main__":
    main()
