"""Strict settings: ``FLASHINFER_STRICT_SETTINGS=1`` makes a malformed flashinfer variable an
error instead of a warning.

By default a value flashinfer does not know warns once and fails open (the variable counts
as unset or off), so a deployment keeps running.  A test run or a CI job that would rather
stop on a typo (``FLASHINFER_BACKENDS="rmsnorm=trition"``, the gate set to ``yes``) sets this
variable: each reader then raises :class:`SettingsError` at its first use of the bad value,
naming the variable, the value, what is accepted and how to fix it.

Read at every check (not cached), so a test can turn it on and off.  This module imports
nothing else of the package: every reader of a variable calls :func:`refuse_if_strict`.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator

__all__ = [
    "STRICT_ACCEPTED",
    "STRICT_SETTINGS_ENV",
    "SettingsError",
    "refuse_if_strict",
    "reporting_only",
    "strict_settings",
]

STRICT_SETTINGS_ENV = "FLASHINFER_STRICT_SETTINGS"
STRICT_ACCEPTED = "'1' (strict), '0', empty or unset (warn once and carry on)"


class SettingsError(ValueError):
    """A flashinfer environment variable holds a value it does not accept, under
    ``FLASHINFER_STRICT_SETTINGS=1``.  A ``ValueError``, so code that catches bad values
    the usual way catches it; ``variable``, ``value`` and ``accepted`` say which."""

    def __init__(self, variable: str, value: str, accepted: str, why: str = "") -> None:
        self.variable, self.value, self.accepted = variable, value, accepted
        detail = f" ({why})" if why else ""
        super().__init__(
            f"{variable}={value!r} is not a recognised value{detail}. Accepted values: "
            f"{accepted}. {STRICT_SETTINGS_ENV}=1 makes this an error: set {variable} to "
            f"an accepted value or unset it (or unset {STRICT_SETTINGS_ENV} to warn and "
            "carry on instead)"
        )


_reporting = threading.local()  # inside reporting_only(): never raise


@contextlib.contextmanager
def reporting_only() -> Iterator[None]:
    """Strict settings do not raise in this block (the thread's): what ``flashinfer
    backends`` runs in, since its report is where the bad values are shown."""
    depth = getattr(_reporting, "depth", 0)
    _reporting.depth = depth + 1
    try:
        yield
    finally:
        _reporting.depth = depth


def strict_settings() -> bool:
    """Whether malformed variables raise.  ``'1'``: yes; ``'0'``, empty or unset: no.  Any
    other value of this variable raises :class:`SettingsError` itself: whoever set it asked
    for strictness in some spelling, and guessing either way would be wrong."""
    if getattr(_reporting, "depth", 0):
        return False
    raw = os.environ.get(STRICT_SETTINGS_ENV)
    if raw == "1":
        return True
    if raw is None or raw in ("", "0"):
        return False
    raise SettingsError(STRICT_SETTINGS_ENV, raw, STRICT_ACCEPTED)


def refuse_if_strict(variable: str, value: str, accepted: str, why: str = "") -> None:
    """Raise :class:`SettingsError` for ``variable=value`` under strict settings; return (so
    the caller warns and fails open, as by default) otherwise."""
    if strict_settings():
        raise SettingsError(variable, value, accepted, why)
