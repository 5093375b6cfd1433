"""The test suite's own machinery: its tiers are registered, and pytest-xdist keeps a group on one worker."""

import re
import subprocess
import sys
import tomllib

from conftest import ROOT

TIERS = {"notebook", "browser", "install", "checkpoint", "hub", "training", "findings"}


def test_every_tier_is_a_registered_marker_and_the_makefile_selects_by_them():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    registered = {m.split(":")[0] for m in config["markers"]}
    assert TIERS <= registered and "--strict-markers" in config["addopts"]
    makefile = (ROOT / "Makefile").read_text()
    (check,) = re.findall(r"^CHECK_TIERS := not \((.*)\)$", makefile, re.M)
    assert set(check.split(" or ")) == {"notebook", "browser", "install", "checkpoint", "findings"}
    assert '-m "not findings"' in makefile and "-m findings" in makefile


def test_xdist_sends_a_group_to_one_worker(tmp_path):
    """``make test`` relies on ``--dist loadgroup``: the tests of one notebook share its one execution."""
    (tmp_path / "test_groups.py").write_text(
        "import pytest\n\n"
        + "".join(f'@pytest.mark.xdist_group("g")\ndef test_grouped_{i}():\n    pass\n\n' for i in range(4))
        + "".join(f"def test_free_{i}():\n    pass\n\n" for i in range(4))
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v", "-p", "no:cacheprovider"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-2000:]
    passed = re.findall(r"\[(gw\d)\].*PASSED test_groups\.py::(test_grouped_\d)@g", done.stdout)
    workers = {test: worker for worker, test in passed}
    assert len(workers) == 4, done.stdout[-2000:]
    assert len(set(workers.values())) == 1, workers
