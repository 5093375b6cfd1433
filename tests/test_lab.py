"""``make lab`` leaves the sources alone: a notebook opened, run and saved in the lab holds the committed bytes.

The lab's server (:func:`attnstruct.teaching.lab.lab_command`) serves files through jupytext's contents manager
(the ``jupyterlab_jupytext`` server extension derives it from the server's default, ``AsyncLargeFileManager``),
which reads ``jupytext.toml`` at the root. The test builds that contents manager with the options the lab's
command line gives it, opens each ``notebooks/NN_*.py``, does to it what the lab's front end does when it starts
the ``python3`` kernel and runs every cell (``metadata.kernelspec`` from the kernel's ``kernel.json``,
``metadata.language_info`` from the kernel, outputs, execution counts, timing metadata), saves it, and reads the
bytes on disk.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path

import nbformat
import pytest
from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager
from jupytext.async_contentsmanager import build_async_jupytext_contents_manager_class
from traitlets.config import Config

from attnstruct import notebooks
from attnstruct.teaching import lab

from conftest import ROOT

SOURCES = notebooks.list_notebooks(ROOT)


def _lab_contents_manager(root: Path):
    """jupytext's contents manager as the lab's server builds it, configured by the lab's ``--Class.trait=value``."""
    argv, env = lab.lab_command(root, open_browser=False, environ={})
    options = dict(arg[2:].split("=", 1) for arg in argv if arg.startswith("--") and "=" in arg)
    config = Config()
    for key, value in options.items():
        section, trait = key.split(".", 1)
        if section.endswith("ContentsManager"):
            config[section][trait] = value
    manager_class = build_async_jupytext_contents_manager_class(AsyncLargeFileManager)
    manager = manager_class(root_dir=options["ServerApp.root_dir"], config=config)
    settings = Path(env["JUPYTER_PATH"].split(os.pathsep)[0])
    kernel = json.loads((settings / "kernels" / notebooks.KERNEL_NAME / "kernel.json").read_text())
    return manager, kernel


def _run_in_the_lab(nb, kernel: dict) -> None:
    """What JupyterLab writes into a notebook model when its kernel starts and every cell runs."""
    nb.metadata["kernelspec"] = {
        "display_name": kernel["display_name"],
        "language": kernel["language"],
        "name": notebooks.KERNEL_NAME,
    }
    nb.metadata["language_info"] = {"name": "python", "version": "3.11.0", "mimetype": "text/x-python"}
    for count, cell in enumerate((c for c in nb.cells if c.cell_type == "code"), 1):
        cell.execution_count = count
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="ran\n")]
        cell.metadata["execution"] = {"iopub.status.busy": "2025-01-01T00:00:00.000Z"}
        cell.metadata["scrolled"] = True


def _open_run_save(manager, kernel: dict, path: str) -> None:
    """Open ``path`` as a notebook, run it as the lab would (:func:`_run_in_the_lab`) and save it."""

    async def open_run_save() -> None:
        model = await manager.get(path, content=True, type="notebook")
        _run_in_the_lab(model["content"], kernel)
        await manager.save({"type": "notebook", "format": "json", "content": model["content"]}, path)

    asyncio.run(open_run_save())


@pytest.fixture
def lab_root(tmp_path):
    """A copy of the committed sources the lab serves: ``notebooks/*.py``, ``params/``, ``jupytext.toml``."""
    root = tmp_path / "repo"
    (root / "notebooks").mkdir(parents=True)
    for source in SOURCES:
        shutil.copy(source, root / "notebooks" / source.name)
    shutil.copytree(ROOT / "params", root / "params")
    shutil.copy(ROOT / "jupytext.toml", root / "jupytext.toml")
    return root


def test_opening_running_and_saving_every_notebook_in_the_lab_changes_no_source(lab_root):
    manager, kernel = _lab_contents_manager(lab_root)

    for source in SOURCES:
        _open_run_save(manager, kernel, f"notebooks/{source.name}")
        saved = (lab_root / "notebooks" / source.name).read_bytes()
        assert saved == source.read_bytes(), f"the lab rewrote {source.name}"
    written = sorted(p.relative_to(lab_root).as_posix() for p in (lab_root / "notebooks").rglob("*"))
    assert written == sorted(f"notebooks/{s.name}" for s in SOURCES)


def test_the_lab_pairs_each_notebook_with_an_ipynb_under_build_which_git_ignores(lab_root):
    manager, kernel = _lab_contents_manager(lab_root)

    source = SOURCES[0]
    _open_run_save(manager, kernel, f"notebooks/{source.name}")
    paired = lab_root / lab.LAB_OUTPUTS / f"{source.stem}.ipynb"
    outputs = [c.outputs for c in nbformat.read(paired, as_version=4).cells if c.cell_type == "code"]
    assert outputs and all(o and o[0]["text"] == "ran\n" for o in outputs)  # reopened, the lab shows the outputs
    assert "build/" in (ROOT / ".gitignore").read_text().splitlines()
