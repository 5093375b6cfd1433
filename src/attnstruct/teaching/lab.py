"""JupyterLab on this repository: ``python -m attnstruct.teaching.lab [--port N] [--no-browser] [--ip IP] [--token T]``.

``make lab`` runs it. The server is this interpreter's JupyterLab (``sys.executable -m jupyterlab``), rooted at
the repository, with the file browser opened on ``notebooks/``. Two things come from the repository's
``jupyter/`` folder, so that they hold whatever the user's own Jupyter configuration says:

* ``jupyter/lab/settings/overrides.json``, the lab's application settings directory
  (``--LabApp.app_settings_dir``): Python files open with the "Jupytext Notebook" viewer (the percent ``.py``
  sources open as notebooks; *Open With > Editor* still shows the text) and the news feed and update check,
  which would reach the internet, are off. These are defaults: what the user changes in the Settings Editor
  is saved in their own ``~/.jupyter/lab/user-settings`` and wins, and nothing is written into the repository.
* ``jupyter/kernels/python3/kernel.json``, first on ``JUPYTER_PATH``: the ``python3`` kernel that the
  notebooks ask for. Its command is ``python``, which jupyter_client replaces with the server's own
  interpreter, so the kernel runs in this environment (``import attnstruct`` works) whatever other
  ``python3`` kernels the machine has. Its display name is the one the notebooks' headers hold.

The lab leaves the repository as it found it: ``jupytext.toml`` pairs each ``notebooks/NN_topic.py`` with
``build/lab/NN_topic.ipynb`` (the outputs, in a folder git ignores), and the sources' headers are what jupytext
writes on saving (the jupytext version filtered out, the kernelspec of the kernel above), so the autosave of an
opened, run notebook rewrites each source with the bytes it had.

:func:`lab_command` returns the command line and environment without starting anything (the tests read it);
:func:`main` runs them. Without ``--token`` Jupyter draws a random token and prints it in the URL.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from ..notebooks import PipelineError, find_root
from ..work import WORK_ENV

SETTINGS_FOLDER = "jupyter"  # in the repository: lab/settings/overrides.json and kernels/python3/kernel.json
START_FOLDER = "notebooks"  # where the file browser opens, relative to the root
LAB_OUTPUTS = "build/lab"  # jupytext.toml pairs notebooks/NN_x.py with build/lab/NN_x.ipynb (outputs kept there)
WORK_FOLDER = "build/quick"  # the notebooks' work folder unless ATTNSTRUCT_WORK is set: make reproduce's
JUPYTEXT_VIEWER = "Jupytext Notebook"  # the document widget factory of jupytext's JupyterLab extension
_PACKAGE_REPOSITORY = Path(__file__).resolve().parents[3]  # the checkout, for an editable install


def repository_root(start: str | os.PathLike | None = None) -> Path:
    """The project root at or above ``start`` (default: cwd), else the checkout this package was installed from."""
    try:
        return find_root(start)
    except PipelineError:
        if (_PACKAGE_REPOSITORY / START_FOLDER).is_dir():
            return _PACKAGE_REPOSITORY
        raise


def settings_folder(root: str | os.PathLike | None = None) -> Path:
    """The ``jupyter/`` folder of settings: ``root``'s if it has one, else the one of this package's checkout."""
    for base in (Path(root) if root else None, _PACKAGE_REPOSITORY):
        if base is not None and (base / SETTINGS_FOLDER / "lab" / "settings").is_dir():
            return (base / SETTINGS_FOLDER).resolve()
    raise FileNotFoundError(f"no {SETTINGS_FOLDER}/lab/settings folder in {root} or {_PACKAGE_REPOSITORY}")


def lab_command(
    root: str | os.PathLike | None = None,
    *,
    port: int | None = None,
    ip: str = "127.0.0.1",
    token: str | None = None,
    open_browser: bool = True,
    settings: str | os.PathLike | None = None,
    extra_args: tuple[str, ...] | list[str] = (),
    environ: dict[str, str] | None = None,
) -> tuple[list[str], dict[str, str]]:
    """The ``argv`` and environment that start JupyterLab on ``root`` (default: :func:`repository_root`).

    ``port`` None lets Jupyter pick (8888, or the next free one); a given port is used or the start fails.
    ``token`` None lets Jupyter draw a random one and print it in the URL; ``""`` turns authentication off.
    ``settings`` is the ``jupyter/`` folder (default: :func:`settings_folder`). ``extra_args`` go to Jupyter
    as they are (``--ServerApp.x=y``). ``environ`` is the environment to start from (default: ``os.environ``);
    unless it sets ``ATTNSTRUCT_WORK``, the notebooks' work folder (:mod:`attnstruct.work`) is ``root/build/quick``,
    where ``make reproduce`` wrote: the stored runs and datasets are found there and nothing is trained again.
    """
    root = Path(root).resolve() if root else repository_root()
    if not (root / START_FOLDER).is_dir():
        raise FileNotFoundError(f"{root} has no {START_FOLDER}/ folder")
    settings = Path(settings).resolve() if settings else settings_folder(root)
    argv = [
        sys.executable,
        "-m",
        "jupyterlab",
        f"--ServerApp.root_dir={root}",
        f"--ServerApp.ip={ip}",
        f"--ContentsManager.preferred_dir={START_FOLDER}",
        f"--LabApp.app_settings_dir={settings / 'lab' / 'settings'}",
        f"--ServerApp.open_browser={open_browser}",
    ]
    if port is not None:
        argv += [f"--ServerApp.port={int(port)}", "--ServerApp.port_retries=0"]
    if token is not None:
        argv.append(f"--IdentityProvider.token={token}")
    if getattr(os, "geteuid", lambda: 1)() == 0:
        argv.append("--ServerApp.allow_root=True")  # containers and CI run as root; Jupyter refuses it otherwise
    argv += list(extra_args)

    env = dict(os.environ if environ is None else environ)
    env.setdefault(WORK_ENV, str(root / WORK_FOLDER))  # the notebooks write where make reproduce did
    env["JUPYTER_PATH"] = os.pathsep.join(p for p in (str(settings), env.get("JUPYTER_PATH", "")) if p)
    env.pop("MPLBACKEND", None)  # the kernel then draws figures inline (a test run sets agg)
    return argv, env


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m attnstruct.teaching.lab",
        description="JupyterLab on this repository: the notebooks' .py sources open as notebooks (jupytext), "
        "with this environment's Python as the python3 kernel. Other --Option=value arguments go to Jupyter.",
    )
    parser.add_argument("--port", type=int, default=None, help="port (default: 8888 or the next free one)")
    parser.add_argument("--ip", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    parser.add_argument("--token", default=None, help="server token (default: a random one, printed in the URL)")
    parser.add_argument("--no-browser", action="store_true", help="do not open a web browser")
    parser.add_argument("--root", default=None, help="repository root (default: found from the current folder)")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse the options and run JupyterLab until it stops; return its exit status."""
    args, extra = _parser().parse_known_args(argv)
    command, env = lab_command(
        args.root, port=args.port, ip=args.ip, token=args.token, open_browser=not args.no_browser, extra_args=extra
    )
    settings = env["JUPYTER_PATH"].split(os.pathsep)[0]
    root = command[3].split("=", 1)[1]  # --ServerApp.root_dir=...
    print(f"attnstruct lab: JupyterLab on {root}, settings and python3 kernel from {settings}", file=sys.stderr)
    sys.stderr.flush()
    if os.name == "posix":
        os.execve(command[0], command, env)  # Jupyter then owns the terminal (Ctrl-C asks to shut down)
    try:
        return subprocess.call(command, env=env)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
