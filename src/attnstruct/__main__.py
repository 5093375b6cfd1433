"""`python -m attnstruct`: the command line of :mod:`attnstruct.cli.dispatch`."""

import sys

from .cli import main

sys.exit(main())
