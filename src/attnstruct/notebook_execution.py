"""One notebook executed by papermill so that Ctrl-C stops it cleanly: the kernel shut down, the executed notebook
written whole or not at all.

Papermill saves the notebook it is executing after every cell, so a stop part-way would leave a half-run
``.ipynb`` in the build; and nbclient, run in the main thread, replaces the SIGINT handler with its own, which
shuts the kernel down but leaves the run to fail in whatever way it then does. Here papermill writes to a
temporary file beside the target (``.NAME.XXXXXXXX.tmp.ipynb``: papermill warns of other endings) and runs in a
worker thread (where nbclient installs no handler), while the main thread waits, watching the flag of
:mod:`attnstruct.interrupts`:

- Ctrl-C (the flag set, under :func:`attnstruct.interrupts.handled`): the kernel is interrupted, so that the cell
  it runs stops, and no further cell starts; papermill shuts the kernel down as after any failed cell, the
  temporary file is removed and :class:`~attnstruct.interrupts.Interrupted` is raised.
- A second Ctrl-C, or the first one outside :func:`~attnstruct.interrupts.handled` (a plain
  :class:`KeyboardInterrupt`): the kernel is killed, the worker waited for, the temporary file removed, and the
  :class:`KeyboardInterrupt` goes on.
- A cell that raises: the executed notebook, its error included, replaces the target (kept for inspection).
- Success: ``finish(temporary)`` (a rewrite of the whole file) runs, then the file replaces the target.

The kernel process's own stderr (its log; a cell's output reaches the notebook by messages) goes to ``/dev/null``,
and papermill's log is silenced once Ctrl-C came: an interrupt that lands while the kernel starts or shuts down
makes either log an error, which would reach the command's stderr beside its one line.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from . import interrupts

POLL_S = 0.05  # how often the waiting main thread looks at the Ctrl-C flag
KILL_WAIT_S = 30  # how long a killed kernel's worker is waited for before its temporary file is removed anyway


class _StopBeforeCell(Exception):
    """Raised by the hook before a cell when Ctrl-C came: papermill then ends the run and shuts the kernel down."""


def _signal_kernels(managers: list, signum: int) -> None:
    for km in managers:
        process = getattr(getattr(km, "provisioner", None), "process", None)
        if process is not None and process.poll() is None:
            try:
                process.send_signal(signum)
            except ProcessLookupError:
                pass


def _quiet_once_interrupted(record: logging.LogRecord) -> bool:
    """A filter on papermill's logger: once Ctrl-C came, what the stopped kernel makes it log ("Kernel died before
    replying to kernel_info") is not shown; the command's one line says what happened."""
    return not interrupts.requested()


def _no_unknown_parameter_warning(record: logging.LogRecord) -> bool:
    """A filter on papermill's logger: its "Passed unknown parameter" warning names a run setting that a parameters
    cell takes by its tag without assigning it (:func:`attnstruct.notebooks.run_settings`); a name the notebook does
    not declare at all is refused before the kernel starts (:func:`attnstruct.notebooks.check_parameters`)."""
    return not record.getMessage().startswith("Passed unknown parameter")


def execute_whole(nb, executed: Path, *, kernel_name: str, finish: Callable[[Path], None], **papermill_kwargs):
    """Execute ``nb`` with papermill into ``executed`` as described in the module docstring; raise
    :class:`papermill.exceptions.PapermillExecutionError` for a cell that raised, :class:`Interrupted` for Ctrl-C."""
    import papermill as pm
    from jupyter_client.manager import AsyncKernelManager
    from papermill.exceptions import PapermillExecutionError

    fd, name = tempfile.mkstemp(prefix=f".{executed.name[:40]}.", suffix=".tmp.ipynb", dir=executed.parent)
    os.close(fd)
    tmp = Path(name)
    managers: list[AsyncKernelManager] = []

    class Recorded(AsyncKernelManager):  # nbclient makes (and owns, so shuts down) the kernel; this one is seen here
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            managers.append(self)

        async def _async_launch_kernel(self, kernel_cmd, **kw):
            # The kernel process's own stderr carries its logs, never a cell's output (that comes by messages and is
            # kept in the notebook); an interrupt during its shutdown can log a traceback there, onto the command's.
            kw["stderr"] = subprocess.DEVNULL
            await super()._async_launch_kernel(kernel_cmd, **kw)

    outcome: list[BaseException] = []

    def stop_before_cell(**_):
        if interrupts.requested():
            raise _StopBeforeCell

    def run():
        try:
            pm.execute_notebook(
                nb,
                str(tmp),
                kernel_name=kernel_name,
                kernel_manager_class=Recorded,
                on_cell_start=stop_before_cell,
                **papermill_kwargs,
            )
        except BaseException as err:  # handed to the main thread
            outcome.append(err)

    worker = threading.Thread(target=run, name=f"papermill {executed.stem}", daemon=True)
    papermill_log = logging.getLogger("papermill")
    papermill_log.addFilter(_quiet_once_interrupted)
    papermill_log.addFilter(_no_unknown_parameter_warning)
    try:
        worker.start()
        interrupted_kernel = False
        while worker.is_alive():
            worker.join(POLL_S)
            if interrupts.requested() and not interrupted_kernel:
                _signal_kernels(managers, signal.SIGINT)  # the running cell stops; the hook lets no other start
                interrupted_kernel = True
        error = outcome[0] if outcome else None
        if interrupts.requested() and error is not None:  # however the stopped kernel ended the run
            raise interrupts.Interrupted()  # (a run that ended well before the flag was seen is kept)
        if isinstance(error, PapermillExecutionError):
            os.replace(tmp, executed)
            raise error
        if error is not None:
            raise error
        finish(tmp)
        os.replace(tmp, executed)
    except BaseException:
        if worker.is_alive():  # a plain KeyboardInterrupt while the kernel runs: it is killed, its worker waited for
            _signal_kernels(managers, signal.SIGKILL)
            worker.join(KILL_WAIT_S)
        tmp.unlink(missing_ok=True)
        raise
    finally:
        papermill_log.removeFilter(_quiet_once_interrupted)
        papermill_log.removeFilter(_no_unknown_parameter_warning)
