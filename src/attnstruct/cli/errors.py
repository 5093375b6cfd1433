"""One way for every ``attnstruct`` command to refuse bad input: one line on stderr, exit status 2."""

from __future__ import annotations

import argparse
import sys

PROGRAM = "attnstruct"  # the one prefix of every command's error line: "attnstruct: error: ..."
BAD_INPUT = 2


class CommandError(Exception):
    """Bad input to a command (an argument, a file, a device): printed as one line, exit status 2."""


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors raise :class:`CommandError` instead of printing the usage and exiting; the
    subcommand parsers it makes are of the same class."""

    def error(self, message):
        raise CommandError(message)


def refuse(prog: str, err: BaseException) -> int:
    """Print ``{prog}: error: {err}`` as one line on stderr (whitespace and newlines collapsed); return 2."""
    print(f"{prog}: error: {' '.join(str(err).split())}", file=sys.stderr)
    return BAD_INPUT
