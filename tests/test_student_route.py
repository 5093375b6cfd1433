"""The student's routes to the student notebooks with no lecturer machine: Binder and a JupyterHub pull link.

The links are parsed as a browser would send them and must name files that exist: the Binder configuration under
``binder/``, a student notebook that ``binder/postBuild`` writes, a notebook of the nbgrader release. The
post-build step itself runs in a fresh virtual environment (install tier) and must leave the course set of
packaged checkpoints fetched and the student notebooks written.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import nbformat
import pytest

from attnstruct.teaching import course_notebooks, launch

ROOT = Path(__file__).resolve().parents[1]
BINDER = ROOT / "binder"
EXERCISED = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.py"))[:1]  # 01: it has exercises


@pytest.fixture(scope="module")
def student_notebooks(tmp_path_factory):
    """The student notebooks as ``binder/postBuild`` writes them (``course_notebooks --out build/exercises``)."""
    out = tmp_path_factory.mktemp("exercises")
    return {p.stem: p for p in course_notebooks.write_student_notebooks(ROOT, out)}


def test_binder_reads_the_pinned_versions_and_post_builds_from_the_root():
    """repo2docker reads ``binder/`` alone when it exists: a Python version, the requirements (a nested file is
    read relative to the requirements file) and an executable ``postBuild`` that stops on its first error."""
    assert re.fullmatch(r"python-3\.1[1-9]\n", (BINDER / "runtime.txt").read_text())
    nested = [ln.split(None, 1)[1] for ln in (BINDER / "requirements.txt").read_text().splitlines() if ln[:3] == "-r "]
    assert nested and all((BINDER / path).resolve().is_file() for path in nested)
    post = BINDER / "postBuild"
    assert os.access(post, os.X_OK) and post.read_text().startswith("#!/bin/bash\n")
    assert "set -euo pipefail" in post.read_text()


def test_post_build_fetches_the_set_that_make_course_fetches():
    course = re.search(r"^course: MODELS := (\S+)$", (ROOT / "Makefile").read_text(), re.M).group(1)
    assert f"attnstruct fetch-models --set {course}\n" in (BINDER / "postBuild").read_text()


def test_the_binder_link_opens_a_student_notebook_that_post_build_writes(student_notebooks):
    name = EXERCISED[0]
    url = launch.binder_url("someone/attnstruct", "main", launch.student_notebook(name))
    parts = urlsplit(url)
    assert (parts.scheme, parts.netloc, parts.path) == ("https", "mybinder.org", "/v2/gh/someone/attnstruct/main")
    (urlpath,) = parse_qs(parts.query)["urlpath"]
    assert urlpath == f"lab/tree/build/exercises/{name}.ipynb"
    assert f"--out {launch.STUDENT_FOLDER}\n" in (BINDER / "postBuild").read_text()
    assert name in student_notebooks  # what postBuild writes there
    assert "jupytext" not in nbformat.read(student_notebooks[name], as_version=4).metadata  # saving pairs no .py


def test_the_pull_link_opens_a_notebook_of_the_nbgrader_release():
    name = EXERCISED[0]
    url = launch.pull_url(
        "https://hub.example.org/",
        "https://github.com/someone/course-release.git",
        "main",
        launch.released_notebook(name),
    )
    parts = urlsplit(url)
    assert (parts.netloc, parts.path) == ("hub.example.org", "/hub/user-redirect/git-pull")
    query = {k: v[0] for k, v in parse_qs(parts.query).items()}
    assert query == {
        "repo": "https://github.com/someone/course-release.git",
        "urlpath": f"lab/tree/course-release/{name}/{name}.ipynb",
        "branch": "main",
    }
    assert (ROOT / "notebooks" / f"{name}.py").is_file()  # build_course releases it as release/NAME/NAME.ipynb


@pytest.mark.parametrize(
    "call",
    [
        lambda: launch.binder_url("not a repo", "main", "x.ipynb"),
        lambda: launch.pull_url("hub.example.org", "https://github.com/a/b", "main", "x.ipynb"),
        lambda: launch.pull_url("https://hub.example.org", "git@github.com:a/b", "main", "x.ipynb"),
    ],
)
def test_a_malformed_link_argument_is_refused(call):
    with pytest.raises(ValueError, match="must be"):
        call()


@pytest.mark.install
@pytest.mark.checkpoint
def test_post_build_in_a_fresh_venv_leaves_the_course_set_fetched(tmp_path):
    """``binder/postBuild`` run as repo2docker runs it: from the root of a copy of the repository, in a fresh
    virtual environment that holds the pinned dependencies (those of this one, standing in for
    ``binder/requirements.txt``, pip and setuptools included) and not attnstruct. The packaged checkpoints come
    from the cache or the package registry, as ``make fetch`` gets them; the hub is off."""
    files = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True
    ).stdout.split()
    repo = tmp_path / "repo"
    for name in files:
        if (ROOT / name).is_file():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, repo / name)
    venv = tmp_path / "venv"
    subprocess.run([sys.base_prefix + "/bin/python3", "-m", "venv", "--without-pip", str(venv)], check=True)
    (site,) = (venv / "lib").glob("python3.*/site-packages")
    deps = [p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()]
    (site / "pinned.pth").write_text("\n".join(deps) + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env['PATH']}", HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    done = subprocess.run(["bash", "binder/postBuild"], cwd=repo, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    check = (
        "import attnstruct, sys; from attnstruct.checkpoints import zoo; print(attnstruct.__file__); "
        "sys.exit(0 if all(zoo.is_fetched(e) for e in [*zoo.entries('core'), 'shakespeare']) else 1)"
    )
    ran = subprocess.run([venv / "bin" / "python", "-c", check], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert ran.returncode == 0 and ran.stdout.startswith(str(repo / "src")), ran.stdout + ran.stderr
    written = sorted(p.stem for p in (repo / "build" / "exercises").glob("*.ipynb"))
    assert EXERCISED[0] in written
