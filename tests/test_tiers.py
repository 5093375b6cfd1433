"""The test suite's own machinery: its tiers are registered, and pytest-xdist keeps a group on one worker."""

import os
import re
import subprocess
import sys
import tomllib

from conftest import ROOT

TIERS = {"notebook", "browser", "install", "checkpoint", "hub", "training", "hostile", "signals", "findings"}


def test_every_tier_is_a_registered_marker_and_the_makefile_selects_by_them():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    registered = {m.split(":")[0] for m in config["markers"]}
    assert TIERS <= registered and "--strict-markers" in config["addopts"]
    makefile = (ROOT / "Makefile").read_text()
    (check,) = re.findall(r"^CHECK_TIERS := not \((.*)\)$", makefile, re.M)
    assert set(check.split(" or ")) == TIERS - {"hub", "training"}
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


GROUP_PRINTER = """
import pytest

@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    for item in items:
        marker = item.get_closest_marker("xdist_group")
        print("GROUP", item.nodeid, marker.args[0] if marker else "-")
"""


def test_the_tests_of_a_module_fixture_share_one_group(tmp_path):
    """A module whose fixture is built once (the nbgrader course, the handouts) keeps every notebook-tier test in
    its own group, whether or not it is parametrised by a notebook's name, so one worker builds that fixture once."""
    (tmp_path / "group_printer.py").write_text(GROUP_PRINTER)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "group_printer", "-p", "no:cacheprovider"]
        + ["tests/test_course.py", "tests/test_handouts.py", "-m", "notebook"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-2000:]
    groups = dict(line.split()[1:] for line in done.stdout.splitlines() if line.startswith("GROUP "))
    assert any("[05_training_dynamics]" in test for test in groups), groups  # the case that once left its group
    for module in ("test_course", "test_handouts"):
        tests = {test: group for test, group in groups.items() if test.startswith(f"tests/{module}.py::")}
        assert tests and set(tests.values()) == {module}, tests
