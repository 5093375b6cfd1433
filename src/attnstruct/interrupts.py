"""Ctrl-C (SIGINT) acted on at a safe point, never swallowed.

Python raises :class:`KeyboardInterrupt` wherever the main thread happens to be when the signal comes: in the
middle of a file write, or inside a weakref callback or a ``__del__``, where the interpreter prints it and throws
it away (a thread pool's callbacks are such places, so a sweep would run on). Under :func:`handled` the signal only
sets a flag; the long loops (the sweep's models and blocks, the training steps, a corpus's units) ask
:func:`check` between two safe points and raise :class:`Interrupted` there, saying how far they came. A second
Ctrl-C, for a loop that does not come to its next safe point soon enough, raises :class:`KeyboardInterrupt` at once
(the flag stays set, so it is not lost where it is swallowed). The command line (:mod:`attnstruct.cli.dispatch`)
turns either into one line on stderr and exit status 130.

Outside :func:`handled` (a library call, a notebook) nothing changes: the flag is never set and :func:`check` costs
one look at it.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable

EXIT_STATUS = 130  # 128 + SIGINT, as a shell reports a command that Ctrl-C stopped

_requested = threading.Event()


class Interrupted(KeyboardInterrupt):
    """Ctrl-C acted on at a safe point; ``progress`` says how far the work came (``after 27 of 120 models``) and
    ``resume`` how to go on (``run the same command to resume``)."""

    def __init__(self, progress: str = "", resume: str = "run the same command to resume"):
        super().__init__(progress)
        self.progress, self.resume = progress, resume

    def line(self) -> str:
        """``interrupted after 27 of 120 models; run the same command to resume``."""
        return "; ".join(part for part in (f"interrupted {self.progress}".strip(), self.resume) if part)


def requested() -> bool:
    """Whether Ctrl-C came since :func:`handled` was entered."""
    return _requested.is_set()


def request() -> None:
    """Act as if Ctrl-C had come (what the handler does on the first one)."""
    _requested.set()


def check(progress: str | Callable[[], str] = "", resume: str = "run the same command to resume") -> None:
    """Raise :class:`Interrupted` (``progress``, or what it returns when it is a function) if Ctrl-C came."""
    if _requested.is_set():
        raise Interrupted(progress() if callable(progress) else progress, resume)


def _on_sigint(signum, frame) -> None:
    if _requested.is_set():
        raise KeyboardInterrupt
    _requested.set()


@contextlib.contextmanager
def handled():
    """Inside, Ctrl-C sets the flag that :func:`check` reads (the module docstring); the previous handler is put
    back after. In a thread other than the main one, where no handler can be installed, nothing changes."""
    _requested.clear()
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, _on_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        _requested.clear()
