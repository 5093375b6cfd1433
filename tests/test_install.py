"""A non-editable install works: the wheel ships every module and the package data, and runs outside the repository.

The wheel is built from a snapshot of the source tree (so that the build writes nothing into the working tree),
installed without dependencies into a throwaway folder, and run with that folder first on ``PYTHONPATH`` from a
working directory outside the repository: ``attnstruct.__file__`` must resolve there, not to ``src/``.
"""

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pandas as pd
import pytest
from extract_models import build

from conftest import ROOT

pytestmark = pytest.mark.install

SNAPSHOT = ("pyproject.toml", "README.md", "LICENSE")
IGNORED = shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc")


def run(args, cwd, env, timeout=300):
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(map(str, args))} failed ({done.returncode}):\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """``(source snapshot, wheel, install folder, environment)``."""
    base = tmp_path_factory.mktemp("install")
    source = base / "source"
    source.mkdir()
    for name in SNAPSHOT:
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(ROOT / "src", source / "src", ignore=IGNORED)
    wheels = base / "wheels"
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1", "OMP_NUM_THREADS": "1"}
    env.pop("PYTHONPATH", None)
    pip = [sys.executable, "-m", "pip", "--no-cache-dir"]
    run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels), str(source)], base, env)
    (wheel,) = wheels.glob("attnstruct-*.whl")
    target = base / "site"
    run([*pip, "install", "--no-deps", "-q", "--target", str(target), str(wheel)], base, env)
    return source, wheel, target, {**env, "PYTHONPATH": str(target)}


def test_the_wheel_holds_every_module_and_the_package_data(installed):
    source, wheel, _, _ = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    modules = {p.relative_to(source / "src").as_posix() for p in (source / "src" / "attnstruct").rglob("*.py")}
    assert len(modules) > 30 and "attnstruct/checkpoints/extract/ctranslate2_format.py" in modules
    assert modules <= names, sorted(modules - names)
    for name in ("paper_reported_pretrained.csv", "paper_training_dynamics.csv", "README.md"):
        assert f"attnstruct/reference/{name}" in names
    assert any(n.startswith("attnstruct/") and n.endswith("/zoo.json") for n in names), "zoo.json is not shipped"


def test_the_installed_copy_scores_and_reads_its_reference_data(installed, tmp_path):
    _, _, target, env = installed
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    build("bert").save_pretrained(outside / "tiny-bert")
    where = run([sys.executable, "-c", "import attnstruct; print(attnstruct.__file__)"], outside, env).stdout
    assert Path(where.strip()).is_relative_to(target), where

    done = run([sys.executable, "-m", "attnstruct", "score", "tiny-bert", "--out", "scores.csv"], outside, env)
    lines = done.stdout.strip().splitlines()
    assert lines[0].split() == ["stack", "layer", "symmetry", "directionality"] and len(lines) == 3
    table = pd.read_csv(outside / "scores.csv")
    assert list(table["stack"]) == ["encoder", "encoder"] and table["symmetry"].between(-1, 1).all()

    snippet = (
        "import json, attnstruct.reference as p\n"
        "a, b = p.reference_table(), p.training_dynamics()\n"
        "print(json.dumps([str(p.REFERENCE_CSV), len(a), a['model'].nunique(), len(b), sorted(b['mode'].unique())]))\n"
    )
    path, n_rows, n_models, n_steps, modes = json.loads(run([sys.executable, "-c", snippet], outside, env).stdout)
    assert Path(path).is_relative_to(target), path
    assert n_rows > 100 and n_models > 100 and n_steps > 10 and modes == ["decoder", "encoder"]
