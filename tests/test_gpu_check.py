"""benchmarks/gpu_check.py runs its code path on a CPU (``--cpu-smoke``) and writes every part, or its error."""

import json
import math
import os
import subprocess
import sys

import pytest

from conftest import ROOT

pytestmark = pytest.mark.training


def numbers(value) -> list[float]:
    if isinstance(value, dict):
        return [x for v in value.values() for x in numbers(v)]
    return [value] if isinstance(value, (int, float)) and not isinstance(value, bool) else []


@pytest.mark.checkpoint  # it scores a packaged checkpoint and trains on the packaged plays
def test_the_cpu_smoke_check_writes_every_part_with_its_numbers(tmp_path):
    out = tmp_path / "check.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), str(out), "--cpu-smoke"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(out.read_text())
    assert {"device", "zoo_scores", "steps", "torchrun", "projections", "seconds"} <= set(report)
    assert not any("error" in part for part in report.values() if isinstance(part, dict)), report
    assert report["zoo_scores"]["largest_difference"] == 0.0  # the CPU against itself
    for step in report["steps"].values():
        assert step["seconds_per_step"] > 0 and step["tokens_per_second"] > 0 and step["mfu"] is None
    assert report["torchrun"]["finished"] and report["torchrun"]["backend"] == "gloo"
    hours = report["projections"]
    assert set(hours["per_run"]) == {f"{s}/{o}" for s in ("bert-mini", "bert-base") for o in ("mlm", "next-token")}
    assert all(run["hours"] > 0 for run in hours["per_run"].values())
    for profile in ("paper", "gpu"):
        for shape in ("profile", "bert-base"):
            for notebook in ("05", "06"):
                runs = hours[f"{profile}/{shape}/{notebook}"]
                assert runs["runs"] >= 2 and runs["hours"] >= 0.999 * runs["runs"] * min(runs["hours_per_run"].values())
    assert hours["paper/profile/05"]["steps_per_run"] > hours["gpu/profile/05"]["steps_per_run"]
    assert hours["paper/profile/05"]["hours"] > hours["gpu/profile/05"]["hours"] > 0
    assert all(math.isfinite(x) for x in numbers(report))


def test_without_cuda_the_real_check_is_refused_in_one_line(tmp_path):
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), str(tmp_path / "check.json")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and "no CUDA" in done.stderr
    assert not (tmp_path / "check.json").exists()
