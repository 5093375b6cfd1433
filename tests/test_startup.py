"""Start-up: ``import attnstruct`` and the commands that only read (help, train --help, list, fetch-models --list)
import no torch;
the public names still load on first use, and ``attnstruct.scores`` stays the function."""

import subprocess
import sys

import pytest

from conftest import ROOT

QUIET = (
    "import sys, contextlib, io\n"
    "from attnstruct import cli\n"
    "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
    "    cli.main({argv!r})\n"
)
STARTS = {
    "import attnstruct": "import attnstruct",
    "attnstruct --help": QUIET.format(argv=["--help"]),
    "attnstruct list": QUIET.format(argv=["list"]),
    "attnstruct fetch-models --list": QUIET.format(argv=["fetch-models", "--list"]),
    "attnstruct train --help": QUIET.format(argv=["train", "--help"]),
    "attnstruct train --task vision --help": QUIET.format(argv=["train", "--task", "vision", "--help"]),
}


def loaded_after(code: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys; print(' '.join(sorted(sys.modules)))"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return set(done.stdout.split())


@pytest.mark.parametrize("start", STARTS)
def test_reading_commands_do_not_import_torch(start):
    modules = loaded_after(STARTS[start])
    assert "torch" not in modules and "transformers" not in modules


def test_help_lists_every_command(capsys):
    from attnstruct import cli

    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    for command in ("reproduce", "notebook", "list", "fetch-models", "train", "score", "sweep"):
        assert command in out


def test_the_public_names_load_on_use_and_scores_stays_the_function():
    import numpy as np

    import attnstruct as at
    import attnstruct.scores  # noqa: F401 - the submodule's import must not replace the function

    assert callable(at.scores) and at.scores(np.eye(3)).symmetry == 1.0
    assert at.symmetry_score(np.eye(3)) == 1.0
    assert set(at.__all__) <= set(dir(at))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        at.nope  # noqa: B018


@pytest.mark.parametrize("module", ["attnstruct.devices", "attnstruct.cache_folder", "attnstruct.hub_client.client"])
def test_the_shared_services_import_no_torch(module):
    modules = loaded_after(f"import {module}")
    assert module in modules and "torch" not in modules
