"""Restrictions of automatic selection: ``use_backends`` blocks and ``FLASHINFER_BACKENDS``.

A restriction names, per API, the backends ``backend="auto"`` (the heuristic and the
autotuner alike) may consider, in priority order.  ``use_backends`` sets one for a block of
code in the current context (a :class:`~contextvars.ContextVar`: per thread and per asyncio
task), ``FLASHINFER_BACKENDS`` for the process; a block overrides the variable for the APIs
it names.

The generated fast path reads :data:`RESTRICTIONS` ``.on`` (one attribute) and asks
:func:`restriction_for` only when it is set: while the variable has not been read yet, while
it restricts something, and while any block's restriction is alive anywhere (a task started
inside a block keeps its copy after the block ends, so liveness is tracked by a weak
reference to each block's restriction, not by entering and leaving).
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Mapping, Sequence
from contextvars import ContextVar, Token
from typing import Any

from flashinfer.dispatch.backend_names import ENV_FORMAT, parse_env_value, restriction_of
from flashinfer.gating.gate import warn_unrecognised_once
from flashinfer.gating.messages import listed_in_restriction
from flashinfer.gating.warn_once import warn_backend_once

__all__ = [
    "BACKENDS_ENV",
    "RESTRICTIONS",
    "restriction_for",
    "restriction_source",
    "use_backends",
    "warn_listed_experimental",
]

BACKENDS_ENV = "FLASHINFER_BACKENDS"
USE_BACKENDS = "use_backends"


class _Switch:
    """``on``: whether any restriction may exist in the process (see the module doc)."""

    __slots__ = ("on",)

    def __init__(self) -> None:
        self.on = True  # until FLASHINFER_BACKENDS is read, at the first automatic selection


RESTRICTIONS = _Switch()


class _Scope:
    """What one context's innermost ``use_backends`` block allows: ``api_key -> backends``
    and where each came from (the block, or the variable for the APIs no block names)."""

    __slots__ = ("names", "sources", "__weakref__")

    def __init__(self, names: dict[str, tuple[str, ...]], sources: dict[str, str]) -> None:
        self.names = names
        self.sources = sources


_scope: ContextVar[_Scope | None] = ContextVar("flashinfer_use_backends", default=None)
_lock = threading.RLock()  # reentrant: a scope released by the garbage collector inside
_alive: set[weakref.ref[_Scope]] = set()  # ... a locked region releases its own entry
_env: dict[str, tuple[str, ...]] = {}
_env_read = False


def _update_switch() -> None:
    with _lock:
        RESTRICTIONS.on = not _env_read or bool(_env) or bool(_alive)


def _released(ref: weakref.ref[_Scope]) -> None:
    with _lock:
        _alive.discard(ref)
        _update_switch()


def _read_env() -> None:
    """Read and check ``FLASHINFER_BACKENDS``, once per process.  A value that does not
    parse, or names an unknown API or backend, warns once and is ignored as a whole."""
    global _env_read
    raw = os.environ.get(BACKENDS_ENV, "")
    parsed: dict[str, tuple[str, ...]] = {}
    if raw.strip():
        try:
            parsed = parse_env_value(raw, BACKENDS_ENV)
        except ValueError as exc:
            warn_unrecognised_once(
                BACKENDS_ENV,
                raw,
                f"{exc}; the whole value is ignored, so automatic selection is not restricted",
                ENV_FORMAT,
            )
    with _lock:
        if not _env_read:
            _env.update(parsed)
            _env_read = True
        _update_switch()


def restriction_for(api_key: str) -> tuple[str, ...] | None:
    """The backends automatic selection of ``api_key`` may use in this context, in priority
    order; None when it is not restricted.  What the generated path calls when
    :data:`RESTRICTIONS` is on."""
    scope = _scope.get()
    if scope is not None:
        return scope.names.get(api_key)
    if not _env_read:
        _read_env()
    return _env.get(api_key)


def restriction_source(api_key: str) -> str | None:
    """Who restricts ``api_key`` here: ``"use_backends"``, ``"FLASHINFER_BACKENDS"`` or None."""
    scope = _scope.get()
    if scope is not None:
        return scope.sources.get(api_key)
    if not _env_read:
        _read_env()
    return BACKENDS_ENV if api_key in _env else None


def _push(entries: Mapping[str, tuple[str, ...]]) -> Token[_Scope | None]:
    """Enter a block: this context's restriction becomes the enclosing one (or the
    variable's) with ``entries`` replacing the lists of the APIs they name."""
    if not _env_read:
        _read_env()
    outer = _scope.get()
    if outer is None:
        names = dict(_env)
        sources = dict.fromkeys(_env, BACKENDS_ENV)
    else:
        names, sources = dict(outer.names), dict(outer.sources)
    names.update(entries)
    sources.update(dict.fromkeys(entries, USE_BACKENDS))
    scope = _Scope(names, sources)
    with _lock:
        _alive.add(weakref.ref(scope, _released))
        RESTRICTIONS.on = True
    return _scope.set(scope)


class use_backends:  # noqa: N801 - used like a function: ``with use_backends(...):``
    """Restrict automatic selection (``backend="auto"``) to the listed backends, in the
    listed order, inside a ``with`` block.

    ``use_backends(mm=["triton", "torch"])`` names APIs by their plain names;
    ``use_backends({flashinfer.mm: ["torch"]})`` by their op objects (which also works for
    APIs outside ``flashinfer``).  A single name may be given as a ``str``.

    Inside the block, ``backend="auto"`` (the heuristic and the autotuner alike) considers
    only the listed backends that can run the call, in the listed order: the list replaces
    the heuristic's order, and ``op.suitable_auto_backends`` shows it after a call.  A
    backend named explicitly (``backend="torch"``) is not affected.  Listing an experimental
    backend opts in to it, as naming it does: it may be picked with
    ``FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS`` off, and warns once per (API, backend).
    When no listed backend can run a call, ``BackendSupportedError`` names the restriction
    and each listed backend's reason.

    Context-local (a ``ContextVar``): other threads and asyncio tasks keep their own
    restrictions; a task started inside the block keeps the block's.  Nested blocks: the
    inner one replaces the outer one's list for the APIs it names.  The previous state is
    restored on exit, also when the block raises.  The block overrides
    ``FLASHINFER_BACKENDS`` for the APIs it names.

    Raises (when built, i.e. on the ``with`` line): ``ValueError`` for an unknown API or
    backend name, an empty list or a name given twice; ``TypeError`` for something that is
    not an API or a list of names.
    """

    def __init__(
        self, ops: Mapping[Any, Sequence[str] | str] | None = None, /, **apis: Sequence[str] | str
    ) -> None:
        self.backends: dict[str, tuple[str, ...]] = restriction_of(ops, apis, USE_BACKENDS)
        self._tokens: list[Token[_Scope | None]] = []

    def __enter__(self) -> use_backends:
        self._tokens.append(_push(self.backends))
        return self

    def __exit__(self, *exc_info: object) -> None:
        _scope.reset(self._tokens.pop())

    def __repr__(self) -> str:
        listed = ", ".join(f"{k.rsplit('.', 1)[-1]}={list(v)}" for k, v in self.backends.items())
        return f"use_backends({listed})"


def warn_listed_experimental(api_key: str, candidates: Sequence[str], experimental: Any) -> None:
    """Warn once per (API, backend) for each experimental backend among a restricted call's
    candidates: listing one is naming it, so it warns as an explicit selection does (and
    shares that selection's once-flag)."""
    for backend in candidates:
        if backend in experimental:
            warn_backend_once(api_key, backend, _listed_message, api_key, backend)


def _listed_message(api_key: str, backend: str) -> str:
    """The warning's text, with who lists the backend (asked only when it warns)."""
    return listed_in_restriction(api_key, backend, restriction_source(api_key) or USE_BACKENDS)
