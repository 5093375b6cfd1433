"""Benchmark: the model sweep's throughput on synthetic hub checkpoints, against this machine's physical limit.

    .venv/bin/python benchmarks/sweep_throughput.py [--small 4 --large 2 --workers 2 --threads 2 --json PATH]

What it measures: a stand-in Hugging Face hub (``tests/standin_hub.py``) on 127.0.0.1 serves ``--small`` copies of a
Qwen2.5-0.5B-shaped checkpoint (one ``model.safetensors``) and ``--large`` copies of a Llama-3-8B-shaped one
(grouped-query, 4 shards and an index), each with its real tensor list, header and file size; only the query/key
weights and biases are stored (random bf16, one seed per copy), the rest reads as zeros and is never asked for.
For each shape, ``run_sweep`` scores its copies on the CPU with fresh caches (overall = the two sweeps together).
Reported: models per minute, MB per model (``sweep.nc``'s ``bytes_fetched`` | the hub's count, which also has
``config.json`` and the index), and the fraction of the checkpoint fetched.

The limit, measured in the same run on the same machine, is I/O + compute:
  * I/O: reading the same bytes from the same hub in 64 MB single-range GETs through ``huggingface_hub.get_session()``
    (two streams), plus writing them to disk once, as the sweep's range cache must (shown: read | read + write);
  * compute: the floating-point operations of the products (per layer, ``r = n_kv * d_head`` after the group sums:
    three Grams and two quadratic forms of ``2 r^2 d`` each, plus the group sum) in the precision the sweep uses
    (``block_precision``), over this machine's ``torch.matmul`` rate at those shapes and dtype (best of 3, all cores).
``ratio = sweep time / limit``: 1 means the sweep does nothing but the necessary transfers and products (it can go
below 1, since the sweep overlaps them); the project's goal is at most 1.5 on the CPU.

Last, one grouped-query layer of each of two shapes (7B: 32 query heads on 8 key heads; 70B: 64 on 8) is scored by
``score_block`` (group sums), by forming ``d x d``, by ``d x d`` from the group sums and (7B only) by the Gram path on
the expanded keys: the scores must agree to 1e-5, and the goal is ``score_block`` >= 5x faster than forming ``d x d``.
The flop ratio of the two is ``g^2 / 5`` for ``g`` query heads per key head (3.2 at g = 4, 12.8 at g = 8), which caps
the speed-up. Other work on the machine inflates every time, so the load average is printed before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import namedtuple
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from attnstruct.checkpoints.extract import AttentionBlock
from attnstruct.checkpoints.extract.blocks import expand_kv_heads
from attnstruct.checkpoints.hub import HubSettings
from attnstruct.checkpoints.scoring import block_precision, layer_factors, score_block
from attnstruct.checkpoints.sweep import run_sweep
from attnstruct.results import load_dataset
from attnstruct.scores import factor_scores

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from standin_hub import StandinHub, sparse_safetensors  # noqa: E402

GOAL_RATIO, GOAL_SPEEDUP, AGREE = 1.5, 5.0, 1e-5
CHUNK, STREAMS = 64 << 20, 2  # the I/O limit's GETs: bytes each, in parallel (2 beat 1 and 4 here)
STORED = ("q_proj.weight", "k_proj.weight", "q_proj.bias", "k_proj.bias")
START = time.perf_counter()

Shape = namedtuple("Shape", "name arch model_type layers d heads kv d_head ffn vocab tied bias shards")
SMALL = Shape("qwen0.5b", "Qwen2ForCausalLM", "qwen2", 24, 896, 14, 2, 64, 4864, 151936, True, True, 1)
LARGE = Shape("llama7b", "LlamaForCausalLM", "llama", 32, 4096, 32, 8, 128, 14336, 128256, False, False, 4)
HUGE_LAYER = Shape("llama70b", "LlamaForCausalLM", "llama", 80, 8192, 64, 8, 128, 28672, 128256, False, False, 1)


def log(message: str) -> None:
    print(f"[{time.perf_counter() - START:6.1f} s] {message}", file=sys.stderr, flush=True)


def best_of(fn, repeats: int = 3):
    best, out = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def config(s: Shape) -> dict:
    keys = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads")
    sizes = dict(zip(keys, (s.d, s.ffn, s.layers, s.heads, s.kv)), head_dim=s.d_head, vocab_size=s.vocab)
    return {"architectures": [s.arch], "model_type": s.model_type, **sizes, "tie_word_embeddings": s.tied,
            "hidden_act": "silu", "rms_norm_eps": 1e-6, "torch_dtype": "bfloat16"}  # fmt: skip


def shard_tensors(s: Shape) -> list[dict[str, list[int]]]:
    """The transformers tensor names and shapes, split into ``s.shards`` files by contiguous layers."""
    shards: list[dict[str, list[int]]] = [{} for _ in range(s.shards)]
    shards[0]["model.embed_tokens.weight"] = [s.vocab, s.d]
    shards[-1]["model.norm.weight"] = [s.d]
    if not s.tied:
        shards[-1]["lm_head.weight"] = [s.vocab, s.d]
    q, kv = s.heads * s.d_head, s.kv * s.d_head
    for i in range(s.layers):
        t, p = shards[i * s.shards // s.layers], f"model.layers.{i}."
        for name, rows in (("q", q), ("k", kv), ("v", kv)):
            t[f"{p}self_attn.{name}_proj.weight"] = [rows, s.d]
            if s.bias:
                t[f"{p}self_attn.{name}_proj.bias"] = [rows]
        t[f"{p}self_attn.o_proj.weight"] = [s.d, q]
        t.update({f"{p}mlp.gate_proj.weight": [s.ffn, s.d], f"{p}mlp.up_proj.weight": [s.ffn, s.d]})
        t[f"{p}mlp.down_proj.weight"] = [s.d, s.ffn]
        t.update({f"{p}input_layernorm.weight": [s.d], f"{p}post_attention_layernorm.weight": [s.d]})
    return shards


def random_bf16(shape, gen: torch.Generator) -> torch.Tensor:
    return (torch.randn(shape, generator=gen) * 0.02).to(torch.bfloat16)


def build_repo(s: Shape, seed: int) -> dict:
    """``{file: content}`` of one synthetic repository: config, shard(s) and, when sharded, the index."""
    gen = torch.Generator().manual_seed(seed)
    files, weight_map, total = {"config.json": json.dumps(config(s), indent=2).encode()}, {}, 0
    for i, tensors in enumerate(shard_tensors(s)):
        name = "model.safetensors" if s.shards == 1 else f"model-{i + 1:05d}-of-{s.shards:05d}.safetensors"
        raw = {
            n: random_bf16(v, gen).view(torch.int16).numpy().tobytes() for n, v in tensors.items() if n.endswith(STORED)
        }
        files[name] = sparse_safetensors({n: ("BF16", shape) for n, shape in tensors.items()}, raw)
        weight_map.update(dict.fromkeys(tensors, name))
        total += sum(2 * torch.Size(shape).numel() for shape in tensors.values())
    if s.shards > 1:
        index = {"metadata": {"total_size": total}, "weight_map": weight_map}
        files["model.safetensors.index.json"] = json.dumps(index, indent=2).encode()
    return files


def serve(hub: StandinHub, s: Shape, copies: int) -> dict[str, dict[str, int]]:
    """Add ``copies`` repositories ``bench/<shape>-i`` (seeds differ); ``{repo: {shard: size}}``."""
    repos = {}
    for i in range(copies):
        files = build_repo(s, seed=1000 * (s is LARGE) + i)
        hub.add_repo(f"bench/{s.name}-{i}", files)
        repos[f"bench/{s.name}-{i}"] = {f: len(c) for f, c in files.items() if f.endswith(".safetensors")}
    return repos


def sweep(hub: StandinHub, repos: dict, workers: int, tmp: Path) -> dict:
    """One ``run_sweep`` over ``repos`` with fresh caches: wall time and bytes per model (sweep.nc and hub)."""
    settings = HubSettings(hub.url, None, tmp / "hub-cache", tmp / "range-cache", offline=False)
    start = time.perf_counter()
    result = run_sweep(list(repos), tmp / "out", device="cpu", workers=workers, settings=settings)
    seconds = time.perf_counter() - start
    if result.failures or result.path is None:
        raise SystemExit(f"sweep failed: {result.failures}")
    recorded = load_dataset(result.path)["bytes_fetched"].to_series()
    return {"seconds": seconds, "bytes_nc": {repo: int(recorded[repo]) for repo in repos},
            "bytes_hub": {repo: hub.bytes_served_for(repo) for repo in repos}}  # fmt: skip


def byte_ranges(shards: dict[str, int], total: int):
    """``(file, start, end)``: ``total`` bytes from the start of each shard in turn, ``CHUNK`` at a time."""
    for file, size in shards.items():
        n = min(size, total)
        yield from ((file, start, min(start + CHUNK, n)) for start in range(0, n, CHUNK))
        total -= n


def io_limit(hub: StandinHub, repos: dict, fetched: dict, tmp: Path) -> tuple[float, float]:
    """Seconds to GET ``fetched[repo]`` bytes of each repository in single ranges, then to write them to disk."""
    from huggingface_hub import get_session

    session, read_s, write_s, served = get_session(), 0.0, 0.0, hub.bytes_served
    tmp.mkdir(parents=True, exist_ok=True)

    def get(job: tuple[str, str, int, int]) -> bytes:
        repo, file, start, end = job
        url, byte_range = f"{hub.url}/{repo}/resolve/main/{file}", f"bytes={start}-{end - 1}"
        response = session.get(url, headers={"Range": byte_range}, timeout=120)
        response.raise_for_status()
        return response.content

    for i, (repo, shards) in enumerate(repos.items()):
        start = time.perf_counter()
        with ThreadPoolExecutor(STREAMS) as pool:
            bodies = list(pool.map(get, [(repo, *job) for job in byte_ranges(shards, fetched[repo])]))
        written = time.perf_counter()
        for j, body in enumerate(bodies):
            (tmp / f"{i}-{j}.bin").write_bytes(body)
        read_s, write_s = read_s + written - start, write_s + time.perf_counter() - written
    if hub.bytes_served - served != sum(fetched.values()):
        raise SystemExit(f"I/O limit: read {hub.bytes_served - served} bytes, not {sum(fetched.values())}")
    return read_s, write_s


def layer_flops(s: Shape) -> dict[str, int]:
    """Floating-point operations of one layer's scores (``factor_scores``' Gram path after the group sums)."""
    r = s.kv * s.d_head
    return {"gram": 3 * 2 * r * r * s.d, "quad": 2 * (2 * r * r * s.d + 2 * r * s.d),
            "sum": (s.heads - s.kv) * s.d_head * s.d}  # fmt: skip


def compute_limit(s: Shape, models: int) -> tuple[float, dict]:
    """Seconds the products of ``models`` models take at this machine's GEMM rate (all cores) in the sweep's dtype."""
    r, dtype, threads = s.kv * s.d_head, getattr(torch, block_precision(s.d, "auto")), torch.get_num_threads()
    a, g = torch.randn(r, s.d, dtype=dtype), torch.randn(r, r, dtype=dtype)
    torch.set_num_threads(os.cpu_count() or 1)
    try:
        a @ a.mT  # warm-up
        products = {"gram": lambda: a @ a.mT, "quad": lambda: g @ a}
        rates = {name: 2 * r * r * s.d / best_of(product)[0] for name, product in products.items()}
    finally:
        torch.set_num_threads(threads)
    flops = layer_flops(s)
    per_layer = flops["gram"] / rates["gram"] + (flops["quad"] + flops["sum"]) / rates["quad"]
    return models * s.layers * per_layer, {"flops_per_model": s.layers * sum(flops.values()), "gemm_flops_s": rates}


def gqa_layer(s: Shape = LARGE) -> dict:
    """One grouped-query layer scored each way: times (best of 3), speed-up over ``d x d``, largest difference."""
    gen = torch.Generator().manual_seed(0)
    w_q, keys = random_bf16((s.heads, s.d_head, s.d), gen).float(), random_bf16((s.kv, s.d_head, s.d), gen).float()
    block = AttentionBlock("decoder", 0, w_q, expand_kv_heads(keys, s.heads), causal=True, n_kv_heads=s.kv)
    precision = block_precision(s.d, "auto")
    on_expanded = {"method": "factors", "sum_heads": True, "precision": precision}
    ways = {
        "score_block (group sums)": lambda: score_block(block),
        "formed d x d matrix": lambda: factor_scores(w_q, block.w_k, **{**on_expanded, "method": "matrix"}),
        "d x d from group sums": lambda: factor_scores(
            *layer_factors(block, getattr(torch, precision)), method="matrix", precision=precision
        ),
    }
    if s.d <= 4096:  # informational, and minutes at 70B width
        ways["Gram path, expanded keys"] = lambda: factor_scores(w_q, block.w_k, **on_expanded)
    times, scores = {}, {}
    for name, fn in ways.items():
        log(f"GQA layer: {name}")
        times[name], scores[name] = best_of(fn)
    ref = scores["score_block (group sums)"]
    diff = max(abs(float(a) - float(b)) for other in scores.values() for a, b in zip(other, ref))
    speedup = times["formed d x d matrix"] / times["score_block (group sums)"]
    shape = {"heads": s.heads, "kv": s.kv, "d": s.d}
    return {"shape": shape, "precision": precision, "seconds": times, "max_score_difference": diff, "speedup": speedup}


def measure_shape(hub: StandinHub, s: Shape, copies: int, workers: int, tmp: Path) -> dict:
    log(f"{s.name}: building {copies} repositories")
    repos = serve(hub, s, copies)
    log(f"{s.name}: sweep of {copies} models, {workers} workers, {torch.get_num_threads()} torch threads")
    row = sweep(hub, repos, workers, tmp / "sweep")
    log(
        f"{s.name}: I/O limit, {sum(row['bytes_nc'].values()) / 1e6:.0f} MB in {CHUNK >> 20} MB GETs, {STREAMS} streams"
    )
    read_s, write_s = io_limit(hub, repos, row["bytes_nc"], tmp / "io")
    log(f"{s.name}: GEMM rate ({block_precision(s.d, 'auto')})")
    compute_s, flops = compute_limit(s, copies)
    limit = read_s + write_s + compute_s
    return {"shape": s.name, "models": copies, **row, "checkpoint_bytes": sum(next(iter(repos.values())).values()),
            "io_read_s": read_s, "io_write_s": write_s, "compute_s": compute_s, **flops, "limit_s": limit,
            "ratio": row["seconds"] / limit}  # fmt: skip


def overall(rows: list[dict]) -> dict:
    keys = ("models", "seconds", "io_read_s", "io_write_s", "compute_s", "limit_s")
    total = {k: sum(r[k] for r in rows) for k in keys}
    merged = {k: {m: v for r in rows for m, v in r[k].items()} for k in ("bytes_nc", "bytes_hub")}
    size = sum(r["checkpoint_bytes"] * r["models"] for r in rows) / max(total["models"], 1)
    return {"shape": "overall", **total, **merged, "checkpoint_bytes": size,
            "ratio": total["seconds"] / total["limit_s"]}  # fmt: skip


def print_table(rows: list[dict], gqa: dict, setup: dict) -> None:
    print(f"\nsweep throughput: {setup['workers']} workers, torch threads {setup['threads']}, {os.cpu_count()} cores; "
          f"load average {setup['load_before']:.2f} before, {setup['load_after']:.2f} after")  # fmt: skip
    head = f"{'shape':<9} {'models':>6} {'sweep s':>8} {'models/min':>10} {'MB/model nc|hub':>16} {'fetched':>8} "
    head += f"{'I/O s read|+disk':>16} {'compute s':>9} {'limit s':>8} {'ratio':>6}"
    print(head + "\n" + "-" * len(head))
    for r in rows:
        n, nc, hub = r["models"], sum(r["bytes_nc"].values()), sum(r["bytes_hub"].values())
        mb = f"{nc / n / 1e6:.1f}|{hub / n / 1e6:.1f}"
        io = f"{r['io_read_s']:.1f}|{r['io_read_s'] + r['io_write_s']:.1f}"
        print(f"{r['shape']:<9} {n:>6} {r['seconds']:>8.1f} {60 * n / r['seconds']:>10.1f} {mb:>16} "
              f"{nc / n / r['checkpoint_bytes']:>8.2%} {io:>16} {r['compute_s']:>9.1f} {r['limit_s']:>8.1f} "
              f"{r['ratio']:>6.2f}")  # fmt: skip
    verdicts = (f"{r['shape']} {'met' if r['ratio'] <= GOAL_RATIO else 'NOT met'} ({r['ratio']:.2f})" for r in rows)
    print(f"goal ratio <= {GOAL_RATIO} on CPU: {', '.join(verdicts)}")
    for r in rows[:-1]:
        rates = ", ".join(f"{k} {v / 1e9:.0f}" for k, v in r["gemm_flops_s"].items())
        print(f"  {r['shape']}: {r['flops_per_model'] / 1e9:.1f} GFLOP/model, GEMM GFLOP/s {rates}; "
              f"checkpoint {r['checkpoint_bytes'] / 1e9:.2f} GB")  # fmt: skip
    for layer in gqa:
        shape = layer["shape"]
        print(f"\nGQA layer ({shape['heads']} heads, {shape['kv']} KV heads, d_model {shape['d']}, "
              f"{layer['precision']}; best of 3):")  # fmt: skip
        for name, seconds in layer["seconds"].items():
            print(f"  {name:<26} {seconds:7.3f} s")
        met, agree = layer["speedup"] >= GOAL_SPEEDUP, layer["max_score_difference"] <= AGREE
        print(f"  score_block over forming d x d: {layer['speedup']:.1f}x (goal >= {GOAL_SPEEDUP:.0f}x: "
              f"{'met' if met else 'NOT met'}; flop ceiling g^2/5 = {(shape['heads'] / shape['kv']) ** 2 / 5:.1f}x); "
              f"largest score difference {layer['max_score_difference']:.1e} ({'within' if agree else 'ABOVE'} "
              f"{AGREE:.0e})")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=4, help="0.5B-shaped models (default 4)")
    parser.add_argument("--large", type=int, default=2, help="7B-shaped models (default 2)")
    parser.add_argument("--workers", type=int, default=2, help="run_sweep workers (default 2)")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="torch threads (default: cores)")
    parser.add_argument("--json", type=Path, help="write the numbers here")
    args = parser.parse_args()
    setup = {"workers": args.workers, "threads": args.threads, "load_before": os.getloadavg()[0]}
    torch.set_num_threads(args.threads)
    rows = []
    with StandinHub() as hub, tempfile.TemporaryDirectory(prefix="attnstruct-sweep-bench-") as tmp:
        for s, copies in ((SMALL, args.small), (LARGE, args.large)):
            if copies:
                rows.append(measure_shape(hub, s, copies, args.workers, Path(tmp) / s.name))
    rows.append(overall(rows))
    gqa = [gqa_layer(LARGE), gqa_layer(HUGE_LAYER)]
    setup.update(load_after=os.getloadavg()[0], shapes=[SMALL._asdict(), LARGE._asdict()])
    print_table(rows, gqa, setup)
    if args.json:
        args.json.write_text(json.dumps({"setup": setup, "shapes": rows, "gqa_layer": gqa}, indent=2))
        print(f"numbers written to {args.json}")


if __name__ == "__main__":
    main()
