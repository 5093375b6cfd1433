"""Names that come from untrusted input, checked before they become paths or parts of a URL.

A hub's answer, a checkpoint folder, a run folder and an index file are not trusted (docs/security.md): a commit id,
a shard name in a ``weight_map``, a ref name or a file name read from one of them could point anywhere. Every such
name passes one of these checks before it is joined to a folder or put into a URL, and every cache path is made with
:func:`inside`, which refuses a path that would leave its folder. Each check raises :class:`UnsafeName`, a
ValueError whose message names what was refused, in one line.

An error raised while reading untrusted input is told in one line (:func:`one_line`: its type and its text, newlines
and runs of spaces collapsed), whatever the input put in its message. Files from untrusted input that are pickles are
read by :func:`load_weights_only` alone. Nothing here imports torch
at import time or touches the network.
"""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath

COMMIT = re.compile(r"[0-9a-f]{40}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def one_line(exc: BaseException) -> str:
    """``TypeName: message`` with the message's whitespace, newlines included, collapsed to single spaces."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class UnsafeName(ValueError):
    """A name from untrusted input that would leave its folder, or is not what it claims to be."""


def _shown(name: object) -> str:
    text = repr(name)
    return text if len(text) <= 120 else text[:117] + "..."


def commit_id(text: object, what: str = "the hub") -> str:
    """``text`` if it is a full commit id (40 lowercase hex digits), else :class:`UnsafeName` naming ``what`` (who
    sent it)."""
    if not isinstance(text, str) or not COMMIT.fullmatch(text):
        raise UnsafeName(f"{what} gave {_shown(text)} as a commit id, which is not 40 hexadecimal digits")
    return text


def relative_file(name: object, what: str) -> str:
    """``name`` if it is a relative POSIX path of a file inside its folder: not empty, not absolute (no leading ``/``
    or ``\\``, no drive), no ``..``, ``.`` or empty part, no backslash, no control character. ``what`` names where the
    name was read (an index file, a hub's answer)."""
    if not isinstance(name, str) or not name:
        raise UnsafeName(f"{what} names {_shown(name)} as a file, which is not a file name")
    if _CONTROL.search(name) or "\\" in name or name.startswith("/") or re.match(r"[A-Za-z]:", name):
        raise UnsafeName(f"{what} names {_shown(name)} as a file, which is not a relative file name")
    parts = PurePosixPath(name).parts
    if any(part in ("", ".", "..") for part in name.split("/")) or not parts:
        raise UnsafeName(f"{what} names {_shown(name)} as a file, which would leave its folder")
    return name


def inside(folder: str | os.PathLike, *names: str) -> Path:
    """``folder / names...``, refused (:class:`UnsafeName`) unless it resolves inside ``folder`` (symbolic links
    followed as far as they exist). Every path made from an untrusted name goes through here."""
    root = Path(folder)
    path = root.joinpath(*names)
    resolved_root = root.resolve()
    resolved = path.resolve()
    if resolved != resolved_root and resolved_root not in resolved.parents:
        raise UnsafeName(f"{_shown('/'.join(names))} would lead out of {root}")
    return path


def load_weights_only(file, **kwargs):
    """``torch.load(file, weights_only=True, **kwargs)``: PyTorch's restricted unpickler, which builds tensors and
    plain containers and refuses any other object (``pickle.UnpicklingError``), so nothing in the file runs. The
    warnings torch gives about a file's pickle (its protocol) are silenced: the caller refuses a bad file in one line
    of its own, and a warning would add lines to it."""
    import warnings

    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.load(file, weights_only=True, **kwargs)
