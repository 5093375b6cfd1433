"""Benchmark: ``attnstruct score`` against the naive method, and a 7B-shaped checkpoint end to end.

    .venv/bin/python benchmarks/score_checkpoint.py [--workdir DIR] [--skip-7b] [--keep]

1. Writes a random LLaMA-shaped checkpoint (bfloat16 safetensors) and scores it, each time in a fresh
   process: with ``attnstruct score`` (reads only the query/key tensors, one layer at a time) and naively
   (``AutoModel.from_pretrained``, with transformers 5's default ``dtype="auto"`` and with float32, the
   default of transformers 4 and of the authors' code; then ``W_q^T W_k`` formed per layer and scored).
   Prints wall time, peak RSS, their ratios, and the largest difference between the methods' scores.
   Default shape: d_model 2048, 24 layers, 16 heads, FFN 5504, vocab 32000 (1.3B parameters, 2.6 GB), the
   proportions of a LLaMA-style 1B model.
2. Writes a checkpoint shaped like LLaMA-2-7B's attention (32 layers, d_model 4096, 32 heads; only the
   query and key tensors, bfloat16, one shard per layer) and times ``attnstruct score`` on it.

Peak RSS is the child process's ``ru_maxrss`` from ``os.wait4``. A forked child inherits its parent's
resident size in that figure, so this script keeps its own process small: it imports neither torch nor
transformers, and writes the checkpoints in child processes too. Everything runs on the CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

NAIVE = r"""
import sys, json, torch
from transformers import AutoModel
import attnstruct as at
dtype = {"auto": "auto", "float32": torch.float32}[sys.argv[2]]
model = AutoModel.from_pretrained(sys.argv[1], dtype=dtype)
rows = []
for i, layer in enumerate(model.layers):
    m = layer.self_attn.q_proj.weight.float().T @ layer.self_attn.k_proj.weight.float()
    s = at.scores(m)
    rows.append([float(s.symmetry), float(s.directionality)])
print(json.dumps(rows))
"""


def run_measured(argv: list[str]) -> tuple[float, float, str]:
    """Like :func:`run`, but reaps the child with ``os.wait4`` to read its own peak RSS."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - start
    if proc.returncode:
        raise RuntimeError(f"{' '.join(argv[:4])} exited with {proc.returncode}")
    return wall, usage.ru_maxrss / 1024, out


def write_llama(folder: Path, d_model: int, layers: int, heads: int, vocab: int, ffn: int) -> None:
    import torch
    from transformers import LlamaConfig, LlamaModel

    config = LlamaConfig(
        hidden_size=d_model,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        intermediate_size=ffn,
        vocab_size=vocab,
    )
    torch.manual_seed(0)
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)  # initialise in bfloat16: half the memory of a float32 model
    try:
        model = LlamaModel(config)
    finally:
        torch.set_default_dtype(default)
    model.save_pretrained(folder)


def write_attention_only(folder: Path, d_model: int, layers: int, heads: int) -> int:
    """Query/key tensors only, one bfloat16 shard per layer, with an index and a LLaMA config; returns bytes."""
    import torch
    from safetensors.torch import save_file
    from transformers import LlamaConfig

    folder.mkdir(parents=True, exist_ok=True)
    LlamaConfig(
        hidden_size=d_model,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        intermediate_size=4 * d_model,
        vocab_size=32000,
    ).save_pretrained(folder)
    gen = torch.Generator().manual_seed(0)
    weight_map, size = {}, 0
    for i in range(layers):
        shard = f"model-{i + 1:05d}-of-{layers:05d}.safetensors"
        tensors = {
            f"model.layers.{i}.self_attn.{name}.weight": (
                torch.randn(d_model, d_model, generator=gen) * d_model**-0.5
            ).to(torch.bfloat16)
            for name in ("q_proj", "k_proj")
        }
        save_file(tensors, folder / shard)
        weight_map.update(dict.fromkeys(tensors, shard))
        size += (folder / shard).stat().st_size
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", help="where to write the checkpoints (default: a temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep the checkpoints")
    parser.add_argument("--skip-7b", action="store_true", help="only the comparison with the naive method")
    parser.add_argument("--d-model", type=int, default=2048)
    parser.add_argument("--layers", type=int, default=24)
    parser.add_argument("--write", choices=("local", "7b"), help=argparse.SUPPRESS)  # child process: write only
    parser.add_argument("--to", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.write == "local":
        write_llama(Path(args.to), args.d_model, args.layers, heads=16, vocab=32000, ffn=int(2.6875 * args.d_model))
        return
    if args.write == "7b":
        write_attention_only(Path(args.to), d_model=4096, layers=32, heads=32)
        return
    work = Path(args.workdir or tempfile.mkdtemp(prefix="attnstruct-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    score = [sys.executable, "-m", "attnstruct", "score"]
    try:
        local = work / f"llama-d{args.d_model}-l{args.layers}"
        if not (local / "config.json").is_file():
            subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--write",
                    "local",
                    "--to",
                    str(local),
                    "--d-model",
                    str(args.d_model),
                    "--layers",
                    str(args.layers),
                ],
                check=True,
                capture_output=True,
            )
        size = sum(p.stat().st_size for p in local.glob("*.safetensors")) / 1e6
        t_ours, rss_ours, out = run_measured([*score, str(local)])
        ours = [[float(v) for v in line.split()[2:4]] for line in out.strip().splitlines()[1:]]
        print(f"checkpoint: LLaMA-shaped, d_model {args.d_model}, {args.layers} layers, {size:.0f} MB of bfloat16")
        print(f"  attnstruct score          : {t_ours:6.1f} s, peak RSS {rss_ours:7.0f} MB")
        for dtype, label in (("auto", "naive, dtype auto (v5)"), ("float32", "naive, float32 (v4)")):
            t_naive, rss_naive, naive_out = run_measured([sys.executable, "-c", NAIVE, str(local), dtype])
            naive = json.loads(naive_out)
            diff = max(abs(a - b) for row_a, row_b in zip(ours, naive, strict=True) for a, b in zip(row_a, row_b))
            print(
                f"  {label:<26}: {t_naive:6.1f} s, peak RSS {rss_naive:7.0f} MB; ratio to ours "
                f"{t_naive / t_ours:4.1f}x time, {rss_naive / rss_ours:4.1f}x memory; score difference {diff:.0e}"
            )
        if not args.skip_7b:
            big = work / "llama7b-attention"
            if not (big / "model.safetensors.index.json").is_file():
                subprocess.run([sys.executable, __file__, "--write", "7b", "--to", str(big)], check=True)
            size = sum(p.stat().st_size for p in big.glob("*.safetensors")) / 1e9
            t_big, rss_big, out = run_measured([*score, str(big)])
            rows = len(out.strip().splitlines()) - 1
            print(f"7B-shaped attention ({rows} layers, d_model 4096, 32 heads, {size:.1f} GB bfloat16):")
            print(f"  attnstruct score : {t_big:6.1f} s, peak RSS {rss_big:7.0f} MB (precision auto: float32)")
    finally:
        if not args.keep and not args.workdir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
