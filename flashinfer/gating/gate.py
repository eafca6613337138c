"""The gate: whether ``backend="auto"`` may pick experimental backends.

Reads ``FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS`` at every call (cheaply: see
:func:`environment_reader`), and warns once per distinct unrecognised value of one of
flashinfer's environment variables (:func:`warn_unrecognised_once`).  Public names are
re-exported by ``flashinfer.api_logging``; the variable's name and the words of what the
gate says are ``messages``' (shown here under the names the package has always used).
"""

from __future__ import annotations

import functools
import os
import threading
import warnings
from collections.abc import Callable
from typing import Any

from flashinfer.gating.messages import (
    ACCEPTED_GATE_VALUES,
    ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV,
    auto_feature_disabled,
    unrecognised_gate_value,
    unrecognised_value,
)
from flashinfer.gating.stacklevel import user_stacklevel
from flashinfer.settings.strict import refuse_if_strict, strict_settings

__all__ = [
    "ACCEPTED_GATE_VALUES",
    "GATE_OFF_VALUES",
    "ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV",
    "experimental_auto_backends_allowed",
    "forget_unrecognised_values",
    "environment_reader",
    "gate_fast_read",
    "require_experimental_auto_backends",
    "warn_unrecognised_once",
]

GATE_OFF_VALUES = ("", "0")
"""Values (besides unset) that turn the gate off without a warning; only ``"1"`` turns it on."""

# os.environ.get re-encodes the key on every call, which costs many times the dict lookup it
# ends in (benchmarks/bench_costs.py prints both); on POSIX the underlying bytes dict is kept
# in sync by os.environ itself, so reading it directly is exact and cheap.
_ENV_KEY_BYTES = os.fsencode(ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV)
_environ_object = os.environ
_environ_bytes: dict[bytes, bytes] | None = (
    getattr(os.environ, "_data", None) if os.name == "posix" else None
)
_warned_env_values: set[tuple[str, str]] = set()  # (variable, value) pairs warned about
_lock = threading.Lock()


def gate_fast_read() -> tuple[Any, Any, dict[bytes, bytes], bytes] | None:
    """``(os module, os.environ, its bytes dict, key)`` for code that reads the gate
    variable inline (POSIX only; None elsewhere).  Kept for its import path
    (``flashinfer.api_logging``); the generated code uses :func:`environment_reader`.
    The reader must check that ``os.environ`` is still that object (replaced, e.g. by a
    mock, it reads through :func:`experimental_auto_backends_allowed`), and leave any value
    but ``b"1"``, ``b"0"`` or empty to that function, which warns."""
    if _environ_bytes is None:
        return None
    return os, _environ_object, _environ_bytes, _ENV_KEY_BYTES


def environment_reader(name: str) -> tuple[Callable[[], Any], tuple[Any, Any] | None]:
    """A reader of the raw value of variable ``name`` for generated code, and ``(os module,
    os.environ)`` when the reader holds ``os.environ``'s data directly (POSIX: a C-level
    lookup in its bytes dict, no Python frame), in which case the caller must check that
    ``os.environ`` is still that object; elsewhere a reader through ``os.environ.get``."""
    if _environ_bytes is not None:
        return functools.partial(_environ_bytes.get, os.fsencode(name)), (os, _environ_object)

    def read() -> str | None:
        return os.environ.get(name)

    return read, None


def _gate_raw_value() -> str | None:
    if _environ_bytes is not None and os.environ is _environ_object:
        raw = _environ_bytes.get(_ENV_KEY_BYTES)
        return None if raw is None else os.fsdecode(raw)
    return os.environ.get(ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV)


def experimental_auto_backends_allowed() -> bool:
    """Whether automatic selection may pick experimental backends.

    ``True`` only when ``FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS`` is exactly ``"1"``.
    Unset, empty or ``"0"`` is off.  Any other value is off and warns once per distinct
    value.  Read at every call, so changing the variable at run time takes effect.
    """
    raw = _gate_raw_value()
    if raw == "1":
        return True
    if raw is None or raw in GATE_OFF_VALUES:
        return False
    refuse_if_strict(ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV, raw, ACCEPTED_GATE_VALUES)
    _warn_unrecognised_once(ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV, raw, unrecognised_gate_value, raw)
    return False


def warn_unrecognised_once(
    variable: str, raw: str, effect: str, accepted: str, why: str = ""
) -> None:
    """One RuntimeWarning per (variable, value): the value, what is done instead, the fix.
    Under ``FLASHINFER_STRICT_SETTINGS=1`` raises ``SettingsError`` instead (at every use:
    nothing is remembered), ``why`` saying what is wrong with the value when it is not
    plain."""
    refuse_if_strict(variable, raw, accepted, why)
    _warn_unrecognised_once(variable, raw, unrecognised_value, variable, raw, effect, accepted)


def _warn_unrecognised_once(
    variable: str, raw: str, message: Callable[..., str], *args: str
) -> None:
    """Warn ``message(*args)`` unless ``(variable, raw)`` has warned already."""
    if (variable, raw) in _warned_env_values:
        return
    with _lock:
        first = (variable, raw) not in _warned_env_values
        _warned_env_values.add((variable, raw))
    if first:
        warnings.warn(message(*args), RuntimeWarning, stacklevel=user_stacklevel())


def forget_unrecognised_values() -> None:
    """Let each unrecognised value warn again (part of ``reset_experimental_warnings``)."""
    with _lock:
        _warned_env_values.clear()


def require_experimental_auto_backends(feature: str) -> None:
    """Raise ``RuntimeError`` unless the gate allows automatic experimental selection.

    For APIs that route ``backend="auto"`` by hand rather than through
    ``backend_requirement``.
    """
    if not experimental_auto_backends_allowed():
        raise RuntimeError(auto_feature_disabled(feature))


# A bad gate value warns when flashinfer is imported (one read, no cost per call), not only
# on the first call whose selection it changes; a value set later warns at that call.  Under
# strict settings the import does not raise: the first call that reads the gate does, so that
# `flashinfer backends` can still report the bad value.
try:
    _strict_at_import = strict_settings()
except ValueError:  # FLASHINFER_STRICT_SETTINGS itself is malformed: that raises on first use
    _strict_at_import = True
if not _strict_at_import:
    experimental_auto_backends_allowed()
