"""The ``attnstruct`` command: one module per command, a dispatcher, and one way to fail with one line.

* :mod:`.dispatch`: the top-level parser, which lists every command, and the exit statuses;
* :mod:`.fetch`: ``attnstruct fetch-models``; :mod:`.train`: ``attnstruct train`` (also under ``torchrun``).
"""

from .dispatch import main

__all__ = ["main"]
