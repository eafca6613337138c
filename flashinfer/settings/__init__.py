"""The one reader of the package's environment variables (:func:`read`), applying each row
of :data:`ENVIRONMENT` (``docs/configuration.rst``): its parse rule, and for a refused value
one ``RuntimeWarning`` per distinct value, or :class:`SettingsError` under
``FLASHINFER_STRICT_SETTINGS=1``.  Cheap enough for a hot path (the gate)."""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from flashinfer.settings.environment import ENVIRONMENT as ENVIRONMENT
from flashinfer.settings.environment import STRICT_ACCEPTED as STRICT_ACCEPTED
from flashinfer.settings.environment import EnvironmentVariable as EnvironmentVariable
from flashinfer.settings.environment import environment_variable as environment_variable
from flashinfer.settings.stacklevel import user_stacklevel

STRICT_SETTINGS_ENV = "FLASHINFER_STRICT_SETTINGS"
_ROWS = {row.name: row for row in ENVIRONMENT}
_ECHO_LIMIT = 200  # how much of a bad value a message quotes

# os.environ.get re-encodes the key each call (many times the dict lookup); on POSIX the
# bytes dict under os.environ is kept in sync by it, so reading it is exact and cheap.  A
# replaced os.environ (a mock) is read through its own get().
_environ = os.environ
_data: dict[bytes, bytes] | None = getattr(_environ, "_data", None) if os.name == "posix" else None
_KEYS = {name: os.fsencode(name) for name in _ROWS}
# name -> {raw value (bytes from _data, str otherwise, None: unset) -> its reading}
_MEMO: dict[str, dict[Any, Any]] = {name: {None: row.unset} for name, row in _ROWS.items()}
_warned: set[tuple[str, str]] = set()  # (variable, value) pairs warned about
_lock = threading.Lock()
_reporting = threading.local()  # inside reporting_only(): never raise


class SettingsError(ValueError):
    """A flashinfer environment variable holds a value it does not accept, under
    ``FLASHINFER_STRICT_SETTINGS=1`` (``variable``, ``value`` and ``accepted`` say which)."""

    def __init__(self, variable: str, value: str, accepted: str, why: str = "") -> None:
        self.variable, self.value, self.accepted = variable, value, accepted
        detail = f" ({why})" if why else ""
        super().__init__(
            f"{variable}={value!r} is not a recognised value{detail}. Accepted values: "
            f"{accepted}. {STRICT_SETTINGS_ENV}=1 makes this an error: set {variable} to "
            f"an accepted value or unset it (or unset {STRICT_SETTINGS_ENV} to warn and "
            "carry on instead)"
        )


def unrecognised_value(variable: str, raw: str, effect: str, accepted: str) -> str:
    """The warning of ``variable=raw``: what is done instead and the accepted values."""
    return f"{variable}={raw!r} is not a recognised value; {effect}. Accepted values: {accepted}."


def raw(name: str) -> str | None:
    """The text of variable ``name`` or None (a report; variables a checker declares)."""
    return os.environ.get(name)


def variables_set(prefixes: tuple[str, ...] = ("FLASHINFER_", "TRITON_")) -> list[str]:
    """The sorted names of the set variables that start with ``prefixes``."""
    return sorted(name for name in os.environ if name.startswith(prefixes))


def read(
    name: str,
    parse: Callable[[str], Any] | None = None,
    report: Callable[[str], object] | None = None,
) -> Any:
    """Variable ``name`` as its row reads it: ``unset`` when unset, else ``parse(raw)`` (the
    row's rule unless given).  A refused value counts as ``fallback`` after :func:`refuse`."""
    memo = _MEMO.get(name)
    if memo is None:
        return _row(name)  # raises KeyError naming the listed variables
    key: Any
    if _data is not None and os.environ is _environ:
        key = _data.get(_KEYS[name])
    else:
        key = os.environ.get(name)
    if parse is None:
        try:
            return memo[key]
        except KeyError:
            pass
    row = _ROWS[name]
    text = key if key is None or isinstance(key, str) else os.fsdecode(key)
    if text is None:
        return row.unset
    try:
        value = (parse or row.parse)(text)
    except ValueError as exc:
        refuse(name, text, str(exc), report)
        return row.fallback
    if parse is None and len(memo) < 16:  # a variable holds few distinct values
        memo[key] = value
    return value


def reader(name: str) -> Callable[[], Any]:
    """:func:`read` of ``name`` for a hot path (the gate): the same answer, in one call."""
    memo, key, environ = _MEMO[_row(name).name], _KEYS[name], _environ
    if _data is None:
        return functools.partial(read, name)
    get, _os = _data.get, os

    def read_setting() -> Any:
        if _os.environ is environ:
            try:
                return memo[get(key)]
            except KeyError:
                pass
        return read(name)

    return read_setting


def refuse(
    name: str, text: str, why: str = "", report: Callable[[str], object] | None = None
) -> None:
    """A refused value: :class:`SettingsError` under strict settings (each time), else warn
    once per distinct value (or ``report(message)`` each time)."""
    row = _row(name)
    shown, length = text, ""
    if len(text) > _ECHO_LIMIT:
        shown = text[:_ECHO_LIMIT] + "..."
        length = f"the value is {len(text)} characters long, shown up to its first {_ECHO_LIMIT}; "
    if name == STRICT_SETTINGS_ENV:
        raise SettingsError(name, shown, row.accepted, why)
    if strict_settings():
        raise SettingsError(name, shown, row.accepted, why)
    effect = f"{length}{why}; {row.effect}" if why else f"{length}{row.effect}"
    message = unrecognised_value(name, shown, effect, row.accepted)
    if report is not None:
        report(message)
    else:
        warn_once(name, shown, message)


def warn_once(variable: str, value: str, message: str) -> None:
    """One ``RuntimeWarning`` at the user's line per (variable, value)."""
    with _lock:
        first = (variable, value) not in _warned
        _warned.add((variable, value))
    if first:
        warnings.warn(message, RuntimeWarning, stacklevel=user_stacklevel())


def forget_unrecognised_values() -> None:
    """Let each refused value warn again (part of ``reset_experimental_warnings``)."""
    with _lock:
        _warned.clear()


def strict_settings() -> bool:
    """``FLASHINFER_STRICT_SETTINGS=1`` outside :func:`reporting_only`; a malformed value of
    it raises :class:`SettingsError` (whoever set it asked for strictness)."""
    if getattr(_reporting, "depth", 0):
        return False
    return bool(read(STRICT_SETTINGS_ENV))


@contextlib.contextmanager
def reporting_only() -> Iterator[None]:
    """Strict settings do not raise in this thread's block (``flashinfer backends``)."""
    depth = getattr(_reporting, "depth", 0)
    _reporting.depth = depth + 1
    try:
        yield
    finally:
        _reporting.depth = depth


def environment_reader(name: str) -> tuple[Callable[[], Any], tuple[Any, Any] | None]:
    """A raw reader of ``name`` for generated code, and ``(os, os.environ)`` when it reads
    the bytes dict directly (the caller checks ``os.environ`` is still that object)."""
    if _data is not None:
        return functools.partial(_data.get, os.fsencode(name)), (os, _environ)
    return functools.partial(os.environ.get, name), None


def _row(name: str) -> EnvironmentVariable:
    row = _ROWS.get(name)
    if row is None:
        return environment_variable(name)  # raises KeyError naming the listed variables
    return row
