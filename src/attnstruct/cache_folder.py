"""Where attnstruct keeps what it fetches and makes: the one cache folder, shared by every room that caches.

:func:`cache_dir` is the root: packaged checkpoints and corpora (``models/``, ``corpora/``,
:mod:`attnstruct.checkpoints.zoo`), hub reads (``hub/``, :mod:`attnstruct.checkpoints.hub`), prepared corpora and
tokenizers (``corpora/``, :mod:`attnstruct.tasks`) and the work folder of notebooks (``work/``,
:mod:`attnstruct.work`). Nothing here imports torch or touches the file system.
"""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "ATTNSTRUCT_CACHE"


def cache_dir(override: str | os.PathLike | None = None) -> Path:
    """The cache root: ``override``, else ``$ATTNSTRUCT_CACHE``, else ``$XDG_CACHE_HOME/attnstruct`` or
    ``~/.cache/attnstruct``."""
    if override is not None and str(override) != "":
        return Path(override).expanduser()
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "attnstruct"
