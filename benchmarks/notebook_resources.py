"""CPU time and peak memory of each notebook, as one student's kernel uses them (the JupyterHub notes of
docs/teaching.md).

    python benchmarks/notebook_resources.py --profile quick --build-dir /tmp/resources [--only 01 05] [--threads 1]

Each notebook runs in a fresh process tree (``attnstruct notebook NAME``: papermill, its kernel and any worker
processes) from an empty build folder, so every slow cell computes. The measure is that tree's resource usage as
the kernel sees it (``getrusage(RUSAGE_CHILDREN)`` of a wrapper process): user plus system CPU seconds summed over
every process, and the largest resident set of any one process, which is the kernel's or a training worker's. The
wall time is printed beside them: on a loaded machine it grows, the CPU time much less. Rows go to stdout as CSV
and, with ``--csv``, to a file.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIELDS = ("notebook", "profile", "threads", "wall_s", "cpu_s", "peak_rss_mib", "cpu_per_wall")


def measure_one(name: str, profile: str, build_dir: Path, threads: int | None) -> dict:
    """Run notebook ``name`` in a child process tree and return its row of :data:`FIELDS`."""
    env = dict(os.environ)
    if threads:
        env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    cmd = [sys.executable, "-m", "attnstruct", "notebook", name, "--profile", profile, "--build-dir", str(build_dir)]
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"{name} failed: {(done.stderr.strip().splitlines() or ['no message'])[-1]}")
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = usage.ru_utime + usage.ru_stime
    return {
        "notebook": name,
        "profile": profile,
        "threads": threads or "default",
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu, 1),
        "peak_rss_mib": round(usage.ru_maxrss / 1024, 0),  # Linux reports kibibytes
        "cpu_per_wall": round(cpu / wall, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="quick")
    parser.add_argument("--build-dir", type=Path, required=True, help="an empty folder: every slow cell computes")
    parser.add_argument("--only", nargs="*", default=None, help="notebook numbers or names (default: all)")
    parser.add_argument("--threads", type=int, default=None, help="OMP/MKL threads per process (default: unset)")
    parser.add_argument("--csv", type=Path, default=None, help="also write the rows here")
    parser.add_argument("--one", default=None, help=argparse.SUPPRESS)  # internal: measure one notebook, print JSON
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(measure_one(args.one, args.profile, args.build_dir, args.threads)))
        return 0
    sys.path.insert(0, str(ROOT / "src"))
    from attnstruct.notebooks import list_notebooks

    names = [p.stem for p in list_notebooks(ROOT)]
    if args.only:
        names = [n for n in names if n in args.only or n[:2] in args.only]
    writer = csv.DictWriter(sys.stdout, FIELDS)
    writer.writeheader()
    rows = []
    for name in names:  # one wrapper process per notebook: RUSAGE_CHILDREN then covers that notebook alone
        wrapper = [sys.executable, __file__, "--one", name, "--profile", args.profile, "--build-dir"]
        wrapper += [str(args.build_dir.resolve())] + (["--threads", str(args.threads)] if args.threads else [])
        done = subprocess.run(wrapper, capture_output=True, text=True, cwd=ROOT)
        if done.returncode:
            print(done.stderr.strip().splitlines()[-1], file=sys.stderr)
            return 1
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
        writer.writerow(rows[-1])
        sys.stdout.flush()
    if args.csv:
        with args.csv.open("w", newline="") as handle:
            out = csv.DictWriter(handle, FIELDS)
            out.writeheader()
            out.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
