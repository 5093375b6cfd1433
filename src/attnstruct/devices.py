"""The device a computation runs on, named as a user names it: ``auto``, ``cpu`` or ``cuda`` (``cuda:1``).

Training and scoring both ask :func:`resolve_device`; a device that is not there stops a run at once, in one line
(:class:`DeviceError`). torch is imported when a name is resolved, not when this module is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .conventions import DEVICES

if TYPE_CHECKING:
    import torch


class DeviceError(ValueError):
    """A device that is unknown, or asked for and not there."""


def resolve_device(name: str | torch.device = "auto") -> torch.device:
    """``"auto"`` (CUDA when there is one, else the CPU), ``"cpu"`` or ``"cuda"`` (``"cuda:1"``) as a device.

    Raises :class:`DeviceError` for ``cuda`` on a machine without one, or an unknown name.
    """
    import torch

    if isinstance(name, torch.device):
        name = str(name)
    kind = name.split(":", 1)[0]
    if kind not in DEVICES:
        raise DeviceError(f"unknown device {name!r}; choose one of {', '.join(DEVICES)}")
    if kind == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if kind == "cuda" and not torch.cuda.is_available():
        raise DeviceError(f"device {name!r} was asked for, but torch finds no CUDA device on this machine")
    return torch.device(name)
