"""The checks a GPU machine owes the project, in one run of at most 8 minutes, written to one JSON file.

    .venv/bin/python benchmarks/gpu_check.py [OUT.json]              # on a machine with CUDA (gpu_check.sh)
    .venv/bin/python benchmarks/gpu_check.py OUT.json --cpu-smoke    # the same code path on a CPU, tiny sizes

Parts (each in its own ``try``: a part that fails records its one-line error and the others still run):

* ``device``: name, count and memory of the GPUs, torch, CUDA and driver versions;
* ``zoo_scores``: the packaged core checkpoints scored on CUDA and on the CPU, per layer and per head; the largest
  absolute difference of each score, per model and over all (the scores are computed in float64 where the width
  allows, so differences are rounding);
* ``torchrun``: ``attnstruct train`` under ``torchrun --standalone --nproc_per_node <GPUs>`` for a few steps on the
  packaged plays with NCCL (gloo with ``--cpu-smoke``, skipped where torch has no gloo): whether it finished, its
  wall time and the last line it printed;
* ``steps``: bert-mini's and bert-base's shapes at the paper's batch (256 sequences of 512 tokens as 8
  micro-batches of 32, vocabulary 30,522, bf16 autocast), masked LM and next-token, each without and with
  ``torch.compile`` (compiled afresh for each, as a new process would): seconds per optimiser step (median of the
  timed steps), the warm-up seconds (the first two steps, where compilation happens), tokens per second, FLOPs per
  token and model-FLOPs utilisation (:mod:`attnstruct.training.budget`); a timing that would start after the
  check's time for steps is recorded as skipped;
* ``projections``: hours on one GPU, one run after another, from the FLOPs of each run over the FLOP rate measured
  above for its shape and objective (the faster of with and without compilation): ``per_run`` for one run of the
  paper's (200,000 steps of 256 x 512 tokens) per shape and objective, and for each profile (paper, gpu), shape and
  notebook (05, 06) the runs the notebook makes, read from its parameters and the profile
  (``benchmarks/profile_costs.py``), their hours in all and per run of each objective; each set on its own, so a
  notebook whose parameters cannot be read records its error beside the per-run hours;
* ``seconds``: the wall time of the check so far.

The file is written again after every part and after every step timing, so a check stopped by its time limit keeps
what it measured. The parts share one deadline (``--deadline``, 450 s: the shell script stops the check at 480 s).
With ``--cpu-smoke`` nothing is compiled unless ``--smoke-compile`` is given (compiling on a CPU takes minutes).

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
from collections.abc import Callable
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
PAPER_STEPS = 200_000
SMOKE_BATCH = {"batch_size": 4, "accumulate": 2, "seq_len": 32, "vocab_size": 500}
OBJECTIVES = ("mlm", "next-token")
SMOKE_SHAPES = {"bert-mini": {"d_model": 32, "n_layers": 1, "n_heads": 2}}


def one_line(err: BaseException) -> str:
    return f"{type(err).__name__}: {' '.join(str(err).split())[:300]}"


def device_info(device: str) -> dict:
    info = {"torch": torch.__version__, "cuda": torch.version.cuda, "device": device}
    if device == "cuda":
        info["count"] = torch.cuda.device_count()
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


def flat(column) -> torch.Tensor:
    """A column of per-layer numbers or per-head lists as one float64 vector."""
    return torch.tensor([float(x) for v in column for x in (v if hasattr(v, "__len__") else [v])], dtype=torch.float64)


def zoo_scores(device: str, smoke: bool) -> dict:
    from attnstruct.checkpoints.scoring import score_model
    from attnstruct.checkpoints.zoo import registry

    names = [e.name for e in registry.entries("core")][: 1 if smoke else None]
    found, largest = {}, 0.0
    for name in names:
        here, cpu = (score_model(name, per_head=True, device=d) for d in (device, "cpu"))
        differences = {"layers": len(here), "heads": int(here["n_heads"].sum())}
        for column in ("symmetry", "directionality", "head_symmetry", "head_directionality"):
            a, b = (flat(scores[column]) for scores in (here, cpu))
            if a.shape != b.shape:
                raise ValueError(f"{name}: {column} has {len(a)} values on {device} and {len(b)} on the CPU")
            differences[column] = float((a - b).abs().max())
            largest = max(largest, differences[column])
        found[name] = differences
    return {"models": found, "largest_difference": largest}


def step_times(device: str, smoke: bool, seconds_left: float, compile_too: bool, found: dict, save: Callable) -> dict:
    """Each shape, objective and compilation timed into ``found`` (``save()`` after each), until ``seconds_left``."""
    from attnstruct.tasks import step_cost, text_config
    from attnstruct.training import budget

    batch, shapes = (SMOKE_BATCH, SMOKE_SHAPES) if smoke else (PAPER_BATCH, SHAPES)
    deadline = time.monotonic() + seconds_left
    for shape, widths in shapes.items():
        for objective in OBJECTIVES:
            for compiled in (False, True) if compile_too else (False,):
                key = f"{shape}/{objective}/{'compiled' if compiled else 'eager'}"
                if time.monotonic() > deadline:
                    found[key] = {"error": "skipped: the check's time for steps ran out"}
                    continue
                try:
                    if compiled:
                        torch._dynamo.reset()  # compile afresh, not on top of the previous shape's graphs
                    config = text_config.TextConfig(
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
                save()
    return found


def torchrun(device: str, seconds_left: float) -> dict:
    """A few steps of ``attnstruct train`` under torchrun, one process per GPU (one on a CPU, with gloo)."""
    backend = "nccl" if device == "cuda" else "gloo"
    if not torch.distributed.is_available() or (backend == "gloo" and not torch.distributed.is_gloo_available()):
        return {"backend": backend, "error": f"skipped: this torch has no {backend} backend"}
    processes = torch.cuda.device_count() if device == "cuda" else 1
    with tempfile.TemporaryDirectory() as tmp:
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={processes}"]
        command += ["-m", "attnstruct", "train", "--run-dir", str(Path(tmp) / "run"), "--device", device]
        command += ["--steps", "4", "--log-every", "2", "--eval-every", "2", "--checkpoint-every", "4"]
        command += ["--batch-size", str(8 * processes), "--seq-len", "32", "--d-model", "32", "--n-layers", "1"]
        start = time.monotonic()
        done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=max(seconds_left, 30))
    lines = (done.stdout + done.stderr).strip().splitlines()
    return {
        "processes": processes,
        "backend": backend,
        "finished": done.returncode == 0,
        "seconds": time.monotonic() - start,
        "last_line": lines[-1] if lines else "",
    }


def flop_rate(steps: dict, shape: str, objective: str) -> float:
    """The fastest FLOP/s measured for ``shape`` and ``objective`` (with or without compilation)."""
    rates = [
        entry["flops_per_token"] * entry["tokens_per_second"]
        for key, entry in steps.items()
        if key.startswith(f"{shape}/{objective}/") and "error" not in entry
    ]
    if not rates:
        raise RuntimeError(f"no step of {shape} {objective} was measured")
    return max(rates)


def run_hours(config, vocab_size: int, rate: float) -> float:
    """Hours of one run of ``config`` at ``rate`` FLOP/s: its FLOPs per token times its tokens, over the rate."""
    from attnstruct.tasks import step_cost

    tokens = config.steps * config.batch_size * config.seq_len
    return step_cost.flops_per_token(config, vocab_size) * tokens / rate / 3600


def projections(steps: dict, smoke: bool) -> dict:
    """Hours of one paper run per shape and objective, and of every run of 05 and 06 per profile and shape."""
    import profile_costs

    from attnstruct.tasks import text_config

    measured_as = {"bert-mini": "bert-mini", "profile": "bert-mini", "bert-base": "bert-base"}
    if smoke:  # only the tiny bert-mini was timed: its rate stands in for every shape
        measured_as = dict.fromkeys(measured_as, "bert-mini")
    batch = {k: v for k, v in PAPER_BATCH.items() if k != "vocab_size"}
    found = {"per_run": {}}
    for shape, widths in SHAPES.items():
        for objective in OBJECTIVES:
            key = f"{shape}/{objective}"
            try:
                config = text_config.TextConfig(objective=objective, **widths, **batch, steps=PAPER_STEPS)
                rate = flop_rate(steps, measured_as[shape], objective)
                found["per_run"][key] = {"hours": run_hours(config, PAPER_BATCH["vocab_size"], rate)}
            except Exception as err:  # noqa: BLE001
                found["per_run"][key] = {"error": one_line(err)}
    for profile in ("paper", "gpu"):
        for shape_name, shape in profile_costs.SHAPES.items():
            for notebook in ("05_training_dynamics", "06_symmetric_init"):
                key = f"{profile}/{shape_name}/{notebook[:2]}"
                try:
                    configs, vocab = profile_costs.runs_of(profile, notebook, shape)
                    hours = {}
                    for config in configs:
                        objective = "next-token" if config.objective == "next-token" else "mlm"
                        rate = flop_rate(steps, measured_as[shape_name], objective)
                        hours.setdefault(config.objective, []).append(run_hours(config, vocab, rate))
                    found[key] = {
                        "runs": len(configs),
                        "steps_per_run": max(c.steps for c in configs),
                        "hours": sum(map(sum, hours.values())),
                        "hours_per_run": {objective: max(each) for objective, each in hours.items()},
                    }
                except Exception as err:  # noqa: BLE001
                    found[key] = {"error": one_line(err)}
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", default="gpu_check.json", type=Path)
    parser.add_argument("--cpu-smoke", action="store_true", help="tiny sizes on the CPU: the code path, not numbers")
    parser.add_argument("--smoke-compile", action="store_true", help="with --cpu-smoke: also compile (minutes)")
    parser.add_argument("--deadline", type=float, default=450.0, help="seconds for the whole check")
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

    def seconds_left(reserve: float = 0.0) -> float:
        return args.deadline - (time.monotonic() - start) - reserve

    def save() -> None:
        report["seconds"] = time.monotonic() - start
        write(report, args.out)

    parts = (
        ("device", lambda: device_info(device)),
        ("zoo_scores", lambda: zoo_scores(device, args.cpu_smoke)),
        ("torchrun", lambda: torchrun(device, min(240.0, seconds_left(reserve=120)))),
        (
            "steps",
            lambda: step_times(
                device,
                args.cpu_smoke,
                min(args.steps_budget, seconds_left(reserve=20)),
                compile_too,
                report.setdefault("steps", {}),
                save,
            ),
        ),
        ("projections", lambda: projections(report.get("steps", {}), args.cpu_smoke)),
    )
    for name, part in parts:
        try:
            report[name] = part()
        except Exception as err:  # noqa: BLE001  (a part that fails is recorded, the rest still run)
            report[name] = {"error": one_line(err)}
        save()  # after every part: a check stopped by its time limit keeps what it measured
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
