"""Benchmark: how long the reading commands take to start, against the interpreter's own start, in one run.

    .venv/bin/python benchmarks/startup.py [--repeats 7] [--python .venv/bin/python]

Each command runs ``--repeats`` times in a fresh process from the repository root; printed: the median wall time,
its ratio to ``python -c pass`` (the floor no command can go below), and whether the process imported torch.
"""

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBE = "import sys, runpy; sys.argv = {argv!r}; {run}; print('torch' in sys.modules, file=sys.stderr)"
COMMANDS = {
    "python -c pass": None,
    "import attnstruct": "import attnstruct",
    "attnstruct --help": ["attnstruct", "--help"],
    "attnstruct list": ["attnstruct", "list"],
    "attnstruct fetch-models --list": ["attnstruct", "fetch-models", "--list"],
}


def code(command) -> str:
    if command is None:
        return "pass"
    if isinstance(command, str):
        return PROBE.format(argv=["-c"], run=command)
    run = "import contextlib\nwith contextlib.suppress(SystemExit): runpy.run_module('attnstruct', run_name='__main__')"
    return PROBE.format(argv=command, run="exec(" + repr(run) + ")")


def timed(python: str, source: str, repeats: int) -> tuple[float, str]:
    times, torch = [], ""
    for _ in range(repeats):
        start = time.perf_counter()
        done = subprocess.run([python, "-c", source], cwd=ROOT, capture_output=True, text=True, check=True)
        times.append(time.perf_counter() - start)
        torch = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "-"
    return statistics.median(times), torch


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--python", default=sys.executable, help="the interpreter of the install to measure")
    args = parser.parse_args()
    floor = None
    print(f"{'command':32s} {'median':>8s} {'x floor':>8s}  torch imported")
    for name, command in COMMANDS.items():
        median, torch = timed(args.python, code(command), args.repeats)
        floor = floor or median
        print(f"{name:32s} {median:7.2f}s {median / floor:7.1f}x  {torch}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
