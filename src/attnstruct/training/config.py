"""What every configuration dataclass can do: be built from a notebook's parameters, checked, recorded, hashed.

A notebook's parameters cell is the quick profile; the configuration of a run takes its values from there by
name, so no list of settings is written twice::

    config = TextConfig.from_params(globals(), objective="mlm", seed=0)

:meth:`Settings.from_params` takes every field of the dataclass from the namespace (a notebook's ``globals()``
or any mapping) or from the keyword overrides, and refuses to run when a field is in neither: a notebook that
forgot a parameter fails with one line instead of silently running with a default. :meth:`Settings.from_dict`
rebuilds a configuration from its record (the ``parameters`` attr of a dataset) and refuses unknown keys.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, fields
from typing import Any, ClassVar


class Settings:
    """Mixin for frozen configuration dataclasses; ``KIND`` names them in error messages."""

    KIND: ClassVar[str] = "configuration"
    PER_RUN: ClassVar[tuple[str, ...]] = ()  # fields set run by run, not by a notebook: their default when not given

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]):
        """``cls(**values)``, refusing unknown keys with one line that names them."""
        unknown = sorted(set(values) - set(cls.field_names()))
        if unknown:
            raise ValueError(f"unknown {cls.KIND} parameters: {', '.join(unknown)}")
        return cls(**values)

    @classmethod
    def from_params(cls, namespace: Mapping[str, Any], **overrides):
        """The configuration whose fields come from ``overrides`` or else from ``namespace`` by name.

        Names in ``namespace`` that are not fields are ignored (a notebook has other parameters too); a field
        found in neither raises ValueError naming every missing one, except the fields of ``PER_RUN``, which take
        their default.
        """
        unknown = sorted(set(overrides) - set(cls.field_names()))
        if unknown:
            raise ValueError(f"unknown {cls.KIND} parameters: {', '.join(unknown)}")
        given = {**{k: v for k, v in namespace.items() if k in cls.field_names()}, **overrides}
        missing = [name for name in cls.field_names() if name not in given and name not in cls.PER_RUN]
        if missing:
            raise ValueError(f"{cls.__name__} needs the parameters {', '.join(missing)}, which are not given")
        return cls(**given)

    def digest(self) -> str:
        """sha256 (hex, 16 characters) of the configuration's JSON record: equal configurations, equal digests."""
        record = json.dumps(self.to_dict(), sort_keys=True, default=str)
        return hashlib.sha256(record.encode()).hexdigest()[:16]


def positive_integers(config, names) -> None:
    """Raise ValueError for the first of ``names`` whose value is not an integer >= 1 (booleans refused)."""
    for name in names:
        value = getattr(config, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")


INTEGER_LIMIT = 2**62  # an integer field above it would overflow torch's int64 somewhere


def at_most(config, limits: Mapping[str, int]) -> None:
    """Raise ValueError for the first integer field of ``config`` above its bound: ``limits[name]``, else
    :data:`INTEGER_LIMIT` (a value past it overflows a 64-bit integer; one past a bound of ``limits`` is beyond any
    run the field can describe)."""
    for name in config.field_names():
        value = getattr(config, name)
        limit = limits.get(name, INTEGER_LIMIT)
        if isinstance(value, int) and not isinstance(value, bool) and value > limit:
            raise ValueError(f"{name} must be at most {limit:,}, got {value:,}")


def non_negative_integer(config, name: str, *, optional: bool = False) -> None:
    """Raise ValueError unless ``name`` of ``config`` is an integer >= 0 (booleans refused), or None if ``optional``."""
    value = getattr(config, name)
    if optional and value is None:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer{' or None' if optional else ''}, got {value!r}")


def one_of(value, allowed, what: str) -> None:
    """Raise ValueError unless ``value`` is one of ``allowed``, listing them."""
    if value not in allowed:
        raise ValueError(f"unknown {what} {value!r}; choose one of {', '.join(allowed)}")
