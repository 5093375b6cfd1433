"""The checks a GPU machine owes the project, in one run of at most 8 minutes, written to one JSON file.

    .venv/bin/python benchmarks/gpu_check.py [OUT.json]              # on a machine with CUDA (gpu_check.sh)
    .venv/bin/python benchmarks/gpu_check.py OUT.json --cpu-smoke    # the same code path on a CPU, tiny sizes

Parts (each in its own ``try``: a part that fails records its one-line error and the others still run):

* ``device``: name, count and memory of the GPUs, torch, CUDA and driver versions;
* ``zoo_scores``: the packaged core checkpoints scored on CUDA and on the CPU, per layer and per head; the largest
  absolute difference of each score, per model and over all (the scores are computed in float64 where the width
  allows, so differences are rounding);
* ``steps``: bert-mini's and bert-base's shapes at the paper's batch (256 sequences of 512 tokens as 8
  micro-batches of 32, vocabulary 30,522, bf16 autocast), masked LM and next-token, each without and with
  ``torch.compile``: seconds per optimiser step (median of the timed steps), the warm-up (compilation) seconds,
  tokens per second, FLOPs per token and model-FLOPs utilisation (:mod:`attnstruct.training.budget`);
* ``torchrun``: ``attnstruct train`` under ``torchrun --standalone --nproc_per_node <GPUs>`` for a few steps on the
  packaged plays with NCCL: whether it finished, its wall time and the last line it printed;
* ``projections``: the hours of every run of notebooks 05 and 06 in the paper and gpu profiles, at each shape, from
  the FLOPs of each run (``benchmarks/profile_costs.py``) over the FLOP rate measured above for its shape and
  objective (the faster of with and without compilation);
* ``seconds``: the wall time of the check so far.

The file is written again after every part, so a check stopped by its time limit keeps what it measured. With
``--cpu-smoke`` nothing is compiled unless ``--smoke-compile`` is given (compiling on a CPU takes minutes).

Without ``--cpu-smoke`` a machine with no CUDA is refused in one line (exit status 2).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

PAPER_BATCH = {"batch_size": 256, "accumulate": 8, "seq_len": 512, "vocab_size": 30522}
SHAPES = {
    "bert-mini": {"d_model": 256, "n_layers": 4, "n_heads": 4},
    "bert-base": {"d_model": 768, "n_layers": 12, "n_heads": 12},
}
SMOKE_BATCH = {"batch_size": 4, "accumulate": 2, "seq_len": 32, "vocab_size": 500}
SMOKE_SHAPES = {"bert-mini": {"d_model": 32, "n_layers": 1, "n_heads": 2}}


def one_line(err: BaseException) -> str:
    return f"{type(err).__name__}: {' '.join(str(err).split())[:300]}"


def device_info(device: str) -> dict:
    info = {"torch": torch.__version__, "cuda": torch.version.cuda, "device": device}
    if device == "cuda":
        info["gpus"] = [
            {
                "name": torch.cuda.get_device_name(i),
                "memory_gib": torch.cuda.get_device_properties(i).total_memory / 2**30,
            }
            for i in range(torch.cuda.device_count())
        ]
        try:
            info["driver"] = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True, text=True
            ).stdout.strip()
        except OSError as err:
            info["driver"] = one_line(err)
    return info


def _memory_gib(index: int) -> float:
    return torch.cuda.get_device_properties(index).total_memory / 2**30


def zoo_scores(device: str, smoke: bool) -> dict:
    from attnstruct.checkpoints.scoring import score_model
    from attnstruct.checkpoints.zoo import registry

    names = [e.name for e in registry.entries("core")][: 1 if smoke else None]
    found, largest = {}, 0.0
    for name in names:
        here, cpu = (score_model(name, per_head=True, device=d) for d in (device, "cpu"))
        differences = {}
        for column in ("symmetry", "directionality", "head_symmetry", "head_directionality"):
            a = torch.tensor([float(x) for v in here[column] for x in (v if hasattr(v, "__len__") else [v])])
            b = torch.tensor([float(x) for v in cpu[column] for x in (v if hasattr(v, "__len__") else [v])])
            differences[column] = float((a - b).abs().max())
        found[name] = differences
        largest = max(largest, *differences.values())
    return {"models": found, "largest_difference": largest}


def step_times(device: str, smoke: bool, budget_seconds: float, compile_too: bool) -> dict:
    from attnstruct.tasks import step_cost, text
    from attnstruct.training import budget

    batch, shapes = (SMOKE_BATCH, SMOKE_SHAPES) if smoke else (PAPER_BATCH, SHAPES)
    found, start = {}, time.monotonic()
    for shape, widths in shapes.items():
        for objective in ("mlm", "next-token"):
            for compiled in (False, True) if compile_too else (False,):
                key = f"{shape}/{objective}/{'compiled' if compiled else 'eager'}"
                if time.monotonic() - start > budget_seconds:
                    found[key] = {"error": "skipped: the check's time for steps ran out"}
                    continue
                try:
                    config = text.TextConfig(
                        objective=objective,
                        **widths,
                        **{k: v for k, v in batch.items() if k != "vocab_size"},
                        dropout=0.1,
                        norm="post",
                        device=device,
                        amp=device == "cuda",
                        compile=compiled,
                    )
                    timing = step_cost.measure(config, device, batch["vocab_size"], 4, steps=3, warmup=2)
                    flops = step_cost.flops_per_token(config, batch["vocab_size"])
                    found[key] = {
                        "seconds_per_step": timing.seconds,
                        "warmup_seconds": timing.warmup_seconds,
                        "tokens_per_second": timing.tokens_per_second,
                        "flops_per_token": flops,
                        "mfu": budget.mfu(flops, timing.tokens_per_second, budget.peak_flops(timing.device)),
                        "device": timing.device,
                    }
                except Exception as err:  # noqa: BLE001  (a part that fails is recorded, the rest still run)
                    found[key] = {"error": one_line(err)}
                finally:
                    if device == "cuda":
                        torch.cuda.empty_cache()
    return found


def torchrun(device: str, smoke: bool) -> dict:
    processes = torch.cuda.device_count() if device == "cuda" else 1
    with tempfile.TemporaryDirectory() as tmp:
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={processes}"]
        command += ["-m", "attnstruct", "train", "--run-dir", str(Path(tmp) / "run"), "--device", device]
        command += ["--steps", "4", "--log-every", "2", "--eval-every", "2", "--checkpoint-every", "4"]
        command += ["--batch-size", str(8 * processes), "--seq-len", "32", "--d-model", "32", "--n-layers", "1"]
        start = time.monotonic()
        done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=240)
    lines = (done.stdout + done.stderr).strip().splitlines()
    return {
        "processes": processes,
        "backend": "nccl" if device == "cuda" else "gloo",
        "finished": done.returncode == 0,
        "seconds": time.monotonic() - start,
        "last_line": lines[-1] if lines else "",
    }


def projections(steps: dict, smoke: bool) -> dict:
    """Hours of every run of 05 and 06 per profile and shape, at the FLOP rate measured for its shape and objective."""
    import profile_costs

    from attnstruct.tasks import step_cost

    found = {}
    for profile in ("paper", "gpu"):
        for shape_name, shape in profile_costs.SHAPES.items():
            measured = "bert-base" if shape_name == "bert-base" else "bert-mini"
            for notebook in ("05_training_dynamics", "06_symmetric_init"):
                configs, vocab = profile_costs.runs_of(profile, notebook, shape)
                seconds = 0.0
                for config in configs:
                    objective = "next-token" if config.objective == "next-token" else "mlm"
                    rates = [
                        entry["flops_per_token"] * entry["tokens_per_second"]
                        for key, entry in steps.items()
                        if key.startswith(f"{'bert-mini' if smoke else measured}/{objective}/") and "error" not in entry
                    ]
                    if not rates:
                        raise RuntimeError(f"no step of {measured} {objective} was measured")
                    tokens = config.steps * config.batch_size * config.seq_len
                    seconds += step_cost.flops_per_token(config, vocab) * tokens / max(rates)
                found[f"{profile}/{shape_name}/{notebook[:2]}"] = {"runs": len(configs), "hours": seconds / 3600}
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", default="gpu_check.json", type=Path)
    parser.add_argument("--cpu-smoke", action="store_true", help="tiny sizes on the CPU: the code path, not numbers")
    parser.add_argument("--smoke-compile", action="store_true", help="with --cpu-smoke: also compile (minutes)")
    parser.add_argument("--steps-budget", type=float, default=300.0, help="seconds for the step timings at most")
    args = parser.parse_args(argv)
    if not args.cpu_smoke and not torch.cuda.is_available():
        print(
            "gpu_check: torch finds no CUDA device here (use --cpu-smoke to run the code path on the CPU)",
            file=sys.stderr,
        )
        return 2
    device = "cpu" if args.cpu_smoke else "cuda"
    compile_too = not args.cpu_smoke or args.smoke_compile
    start, report = time.monotonic(), {"cpu_smoke": args.cpu_smoke}
    parts = (
        ("device", lambda: device_info(device)),
        ("zoo_scores", lambda: zoo_scores(device, args.cpu_smoke)),
        ("steps", lambda: step_times(device, args.cpu_smoke, args.steps_budget, compile_too)),
        ("torchrun", lambda: torchrun(device, args.cpu_smoke)),
        ("projections", lambda: projections(report.get("steps", {}), args.cpu_smoke)),
    )
    for name, part in parts:
        try:
            report[name] = part()
        except Exception as err:  # noqa: BLE001  (a part that fails is recorded, the rest still run)
            report[name] = {"error": one_line(err)}
        report["seconds"] = time.monotonic() - start
        write(report, args.out)  # after every part: a check stopped by its time limit keeps what it measured
        print(f"gpu_check: {name} done after {report['seconds']:.0f} s", file=sys.stderr, flush=True)
    print(f"gpu_check: {args.out}")
    return 0


def write(report: dict, out: Path) -> None:
    """``report`` as JSON at ``out``, atomically."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(report, indent=1, default=str) + "\n")
    os.replace(tmp, out)


if __name__ == "__main__":
    raise SystemExit(main())
