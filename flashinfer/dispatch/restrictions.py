"""Restrictions of automatic selection: ``use_backends`` blocks and ``FLASHINFER_BACKENDS``."""

from __future__ import annotations

import re
import sys
import threading
import weakref
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from types import FrameType
from typing import Any, Protocol, TypeVar

import torch

from flashinfer import settings
from flashinfer.dispatch.backend_names import (
    OP_KEY_PREFIX,
    parse_env_value,
    restriction_of,
)
from flashinfer.dispatch.capability import BackendSupportedError
from flashinfer.dispatch.traced_blocks import enter_traced, leave_traced, token_backends
from flashinfer.gating.messages import listed_in_restriction
from flashinfer.gating.warn_once import warn_backend_once
from flashinfer.torch_boundary import constant_for_dynamo, run_outside_dynamo

BACKENDS_ENV = "FLASHINFER_BACKENDS"
USE_BACKENDS = "use_backends"

#: How much of a bad ``FLASHINFER_BACKENDS`` value (and of the part named bad) a warning
#: echoes: the value is the user's own, so a long one is cut rather than printed whole.
ECHO_LIMIT = 200


class _Switch:
    """``on``: whether any restriction may exist in the process (blocks open, or the variable
    restricting)."""

    __slots__ = ("on",)

    def __init__(self) -> None:
        self.on = True  # until FLASHINFER_BACKENDS is read, at the first automatic selection


RESTRICTIONS = _Switch()


class BlockFlag:
    """``named``: whether a ``use_backends`` block has named one API in this process (never cleared
    but by :func:`reset_block_flags`)."""

    def __init__(self) -> None:
        self.named = False


_flags_lock = threading.Lock()
_flags: dict[str, BlockFlag] = {}


def block_flag(api_key: str) -> BlockFlag:
    """The flag of ``api_key`` (one object per API for the life of the process)."""
    with _flags_lock:
        flag = _flags.get(api_key)
        if flag is None:
            flag = _flags[api_key] = BlockFlag()
        return flag


def _mark_named(names: set[str]) -> None:
    """Set the flag of every API in ``names`` (never clears one)."""
    with _flags_lock:
        for key in names:
            flag = _flags.get(key)
            if flag is None:
                flag = _flags[key] = BlockFlag()
            if not flag.named:
                flag.named = True


def reset_block_flags() -> None:
    """Clear the flag of every API that no open ``use_backends`` block names.

    After it, compiled ``"auto"`` calls of those APIs may be transparent again (each frame
    that read the flag recompiles once).  Call it when no other thread opens blocks: a
    block opened while compiled code runs sets its flags again, which is always correct
    (the call is opaque and the dispatcher decides in the caller's context)."""
    with _lock:
        names = _names_in_open_blocks()
        with _flags_lock:
            for key, flag in _flags.items():
                if flag.named and key not in names:
                    flag.named = False


# Which entry of a block object an exit ends, for the blocks that may be entered several
# times at once (``use_backends`` here, the autotuner's ``autotune()``).
class HasFrame(Protocol):
    """An entry: the frame that entered it while it is open."""

    frame: FrameType | None


E = TypeVar("E", bound=HasFrame)


def entry_to_leave(here: Sequence[E], anywhere: Sequence[E], frame: Any) -> tuple[E, bool] | None:
    """The entry an exit from ``frame`` ends, and whether it is one of this context's."""
    for entry in reversed(here):
        if entry.frame is frame:
            return entry, True
    elsewhere = next((e for e in reversed(anywhere) if e.frame is frame), None)
    if here and elsewhere is None:
        return here[-1], True
    if anywhere:
        return elsewhere or anywhere[-1], False
    return None


class _Entry:
    """One entry into a ``use_backends`` block."""

    __slots__ = ("block", "names", "frame", "closed")

    def __init__(
        self, block: use_backends, names: dict[str, tuple[str, ...]], frame: FrameType | None
    ) -> None:
        self.block = block
        self.names = names
        self.frame = frame
        self.closed = False


class _Scope:
    """What one context's open blocks allow."""

    __slots__ = ("entries", "names", "sources", "parent", "__weakref__")

    def __init__(
        self,
        entries: tuple[_Entry, ...],
        names: dict[str, tuple[str, ...]],
        sources: dict[str, str],
        parent: _Scope | None,
    ) -> None:
        self.entries = entries
        self.names = names
        self.sources = sources
        self.parent = parent


_scope: ContextVar[_Scope | None] = ContextVar("flashinfer_use_backends", default=None)
# Reentrant: a scope released by the garbage collector inside a locked region releases its
# own entry.  Scopes are built and refreshed under it, so a block closed from elsewhere is
# never missed by a scope being built at the same time.
_lock = threading.RLock()
_alive: set[weakref.ref[_Scope]] = set()
_env: dict[str, tuple[str, ...]] = {}
_env_read = False


def _update_switch() -> None:
    with _lock:
        RESTRICTIONS.on = not _env_read or bool(_env) or bool(_alive)
        _update_block_flags()


def _update_block_flags() -> None:
    """Set the :class:`BlockFlag` of each API an open block names, in any context."""
    _mark_named(_names_in_open_blocks())


def _names_in_open_blocks() -> set[str]:
    """The APIs the blocks open now name, in any context; under ``_lock``."""
    names: set[str] = set()
    for ref in _alive:
        scope = ref()
        if scope is not None:
            for entry in scope.entries:
                if not entry.closed and entry.block.marks_flags:
                    names.update(entry.names)
    return names


def _released(ref: weakref.ref[_Scope]) -> None:
    with _lock:
        _alive.discard(ref)
        _update_switch()


def _cut(text: str, limit: int = ECHO_LIMIT) -> str:
    """``text``, or, when longer than ``limit``, its start and end around a note of how much was
    left out (the end of a message says what was wrong)."""
    text = re.sub(r"\S{81,}", lambda m: f"{m[0][:60]}...({len(m[0])} characters){m[0][-2:]}", text)
    if len(text) <= limit:
        return text
    head, tail = limit * 3 // 4, limit // 4
    return f"{text[:head]} ...[{len(text) - head - tail} characters cut]... {text[-tail:]}"


def _parse_env(text: str) -> dict[str, tuple[str, ...]]:
    """``FLASHINFER_BACKENDS``'s grammar, for the settings reader (blank: no restriction)."""
    if not text.strip():
        return {}
    try:
        return parse_env_value(text, BACKENDS_ENV)
    except ValueError as exc:
        raise ValueError(_cut(str(exc), 2 * ECHO_LIMIT)) from None


def _read_env() -> None:
    """Read and check ``FLASHINFER_BACKENDS``, once per process."""
    global _env_read
    parsed = settings.read(BACKENDS_ENV, parse=_parse_env)
    with _lock:
        if not _env_read:
            _env.update(parsed)
            _env_read = True
        _update_switch()


def restriction_for(api_key: str) -> tuple[str, ...] | None:
    """The backends "auto" may use for ``api_key`` in this context, in priority order."""
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


def _merged(
    entries: tuple[_Entry, ...], over: _Scope | None = None
) -> tuple[dict[str, tuple[str, ...]], dict[str, str]]:
    """``entries``' restriction over ``over``'s (or over the variable's)."""
    if over is None:
        names, sources = dict(_env), dict.fromkeys(_env, BACKENDS_ENV)
    else:
        names, sources = dict(over.names), dict(over.sources)
    for entry in entries:
        names.update(entry.names)
        sources.update(dict.fromkeys(entry.names, USE_BACKENDS))
    return names, sources


def _register(scope: _Scope) -> _Scope:
    """Track ``scope`` while it lives (the switch stays on); under ``_lock``."""
    _alive.add(weakref.ref(scope, _released))
    RESTRICTIONS.on = True
    _update_block_flags()
    return scope


def _without(scope: _Scope, index: int) -> _Scope | None:
    """The scope of ``scope``'s open entries but the one at ``index``; under ``_lock``."""
    rest = tuple(e for i, e in enumerate(scope.entries) if i != index and not e.closed)
    if not rest:
        return None
    parent = scope.parent
    if parent is not None and parent.entries == rest:
        return parent  # the usual case: the newest entry left first
    return _register(_Scope(rest, *_merged(rest), parent=None))


def _close_everywhere(entry: _Entry) -> None:
    """End ``entry`` in every context that holds it (its block was left from elsewhere)."""
    entry.closed = True
    for ref in list(_alive):
        scope = ref()
        if scope is not None and any(e is entry for e in scope.entries):
            rest = tuple(e for e in scope.entries if not e.closed)
            names, sources = _merged(rest)
            scope.entries, scope.names, scope.sources = rest, names, sources
            if not rest:  # restricts only as the variable does, for good: not a block's
                _alive.discard(ref)
    _update_switch()


def checked_restriction(
    ops: Mapping[Any, Sequence[str] | str] | None, apis: Mapping[str, Sequence[str] | str]
) -> dict[str, tuple[str, ...]]:
    """What a ``use_backends(ops, **apis)`` call restricts, ``api_key -> backends``."""
    _check_kinds(ops, apis)
    return restriction_of(ops, apis, USE_BACKENDS)


# Dynamo calls it as a constant while tracing a block written in a compiled function: the
# arguments are the block's own, and an error is raised at the with line as eagerly.
constant_for_dynamo(checked_restriction)


def _check_kinds(ops: object, apis: Mapping[str, object]) -> None:
    """``TypeError`` unless ``ops`` is a mapping (or None) and every API's backends are an
    ordered list or tuple of names, or one name as a ``str``."""
    if ops is not None and not isinstance(ops, Mapping):
        raise TypeError(
            f"{USE_BACKENDS}: the positional argument must be a mapping {{op: [backend, ...]}}, "
            f"got {type(ops).__name__} {_cut(repr(ops), 80)}; name flashinfer's APIs by "
            "keyword, e.g. use_backends(mm=['triton', 'torch']), and any op by its object, "
            "e.g. use_backends({op: ['torch']})"
        )
    for key, backends in [*(ops or {}).items(), *apis.items()]:
        if isinstance(backends, (str, list, tuple)):
            continue
        op = getattr(key, "dispatcher", key)
        api = key if isinstance(key, str) else getattr(op, "api_name", None) or repr(key)
        why = ""
        if isinstance(backends, (set, frozenset)):
            why = ": a set has no order, and the order is the priority"
        elif isinstance(backends, (bytes, bytearray)):
            why = ": backend names are str"
        example = f"{api}=['triton', 'torch']" if isinstance(key, str) else "{op: ['torch']}"
        raise TypeError(
            f"{USE_BACKENDS}: the backends of {api} must be a list or tuple of backend names "
            f"in priority order (or one name as a str), got {type(backends).__name__} "
            f"{_cut(repr(backends), 80)}{why}; e.g. {USE_BACKENDS}({example})"
        )


class use_backends:  # noqa: N801 - used like a function: ``with use_backends(...):``
    """Restrict automatic selection (``backend="auto"``) to the listed backends, in the
    listed order, inside a ``with`` block (see ``docs/backend_control.rst``).

    ``use_backends(mm=["triton", "torch"])`` names APIs by their plain names;
    ``use_backends({flashinfer.mm: ["torch"]})`` by their op objects (any API).  Each API's
    backends are a list or tuple of names in priority order, or one name as a ``str``.
    Inside the block ``"auto"`` (the heuristic and the autotuner alike) considers only the
    listed backends that can run the call, in that order; a named backend is not affected.
    Listing an experimental backend opts in to it, as naming it does.  When no listed
    backend can run a call, ``BackendSupportedError`` names each one's reason.

    Context-local (a ``ContextVar``: threads and asyncio tasks keep their own); nested
    blocks replace the outer list for the APIs they name; a block overrides
    ``FLASHINFER_BACKENDS`` for the APIs it names.  One block object may be entered again,
    nested or from several threads, and blocks may be left in any order.  Obeyed inside
    ``torch.compile``'d functions too.

    Raises (on the ``with`` line): ``ValueError`` for an unknown API or backend, an empty
    list or a name given twice; ``TypeError`` for something that is not an API, a
    positional argument that is not a mapping, or backends that are not an ordered list of
    names.  ``RuntimeError`` on leaving a block more times than it was entered.
    """

    #: Whether an open entry of this block sets its APIs' :class:`BlockFlag` (the blocks a
    #: compiled call's operator enters for itself do not: no traced code runs inside them).
    marks_flags = True

    def __init__(
        self, ops: Mapping[Any, Sequence[str] | str] | None = None, /, **apis: Sequence[str] | str
    ) -> None:
        if ops is not None and torch.compiler.is_compiling() and isinstance(ops, Mapping):
            # Traced: an op object is the stand-in Dynamo inlines for it, which carries the
            # op's api_key; a string is what the constant function below can be handed.
            ops = {
                k if isinstance(k, str) else f"{OP_KEY_PREFIX}{getattr(k, 'api_key', k)}": v
                for k, v in ops.items()
            }
        self.backends: dict[str, tuple[str, ...]] = checked_restriction(ops, apis)
        self._open: list[_Entry] = []  # this block's entries not left yet, in any context

    def __enter__(self) -> use_backends:
        if torch.compiler.is_compiling():  # traced code: see traced_blocks
            enter_traced(self.backends)
            return self
        if not _env_read:
            _read_env()
        entry = _Entry(self, self.backends, sys._getframe(1))
        outer = _scope.get()
        with _lock:
            entries = (entry,) if outer is None else (*outer.entries, entry)
            scope = _register(_Scope(entries, *_merged((entry,), outer), parent=outer))
            self._open.append(entry)
            _scope.set(scope)
        return self

    def __exit__(self, *exc_info: object) -> None:
        if torch.compiler.is_compiling():
            leave_traced()
            return
        frame = sys._getframe(1)
        scope = _scope.get()
        with _lock:
            entries = () if scope is None else scope.entries
            here = [e for e in entries if e.block is self]
            found = entry_to_leave(here, self._open, frame)
            if found is None:
                raise RuntimeError(
                    f"{self!r} was left more times than it was entered; leave a block "
                    "once per entry (a with statement does)"
                )
            entry, is_here = found
            self._forget(entry)
            if is_here and scope is not None:
                _scope.set(_without(scope, next(i for i, e in enumerate(entries) if e is entry)))
            else:  # not open here: a generator suspended inside the block, closed elsewhere
                _close_everywhere(entry)

    def _forget(self, entry: _Entry) -> None:
        """``entry`` is left: no longer this block's open entry; under ``_lock``."""
        entry.frame = None
        if any(e is entry for e in self._open):
            self._open.remove(entry)

    def __repr__(self) -> str:
        listed = ", ".join(f"{k.rsplit('.', 1)[-1]}={list(v)}" for k, v in self.backends.items())
        return f"use_backends({listed})"


# A block's methods are traced only inlined into a compiled function's frame.  A frame that
# starts at one of them (compiled code that fell back to eager, say after a graph break
# inside the block, calls them from Python) runs as Python: Dynamo would otherwise compile
# __enter__ alone, its traced branch a graph with nothing in it, and the block would not be
# entered at all.
for _method in (use_backends.__init__, use_backends.__enter__, use_backends.__exit__):
    run_outside_dynamo(_method.__code__)

_blocks_for: dict[tuple[str, tuple[str, ...]], use_backends] = {}


def block_for(api_key: str, backends: tuple[str, ...]) -> use_backends:
    """A block restricting ``api_key`` to ``backends``, as a compiled call's operator enters it
    around its dispatcher call (it sets no :class:`BlockFlag`)."""
    block = _blocks_for.get((api_key, backends))
    if block is None:
        block = use_backends.__new__(use_backends)
        block.backends, block._open, block.marks_flags = {api_key: backends}, [], False
        block = _blocks_for.setdefault((api_key, backends), block)
    return block


def token_block(op: Any, token: str) -> use_backends:
    """The block ``backend="auto|a,b"`` stands for."""
    listed = token_backends(token) or ()
    names = tuple(op.backend_aliases.get(n, n) for n in listed)
    if not all(n in op.backend_checks for n in names) or len(set(names)) != len(names):
        raise BackendSupportedError(
            f"{op.api_name}: backend={token!r} is malformed: after 'auto|' give a "
            "comma-separated list of its backends, each once "
            f"({', '.join(map(repr, op.backend_checks))})"
        )
    return block_for(op.api_key, names)


def call_in_token_block(op: Any, token: str, bound: Mapping[str, Any]) -> Any:
    """An eager call naming ``backend="auto|a,b"``."""
    with token_block(op, token):
        return op.function(**{**bound, "backend": "auto"})


def warn_listed_experimental(api_key: str, candidates: Sequence[str], experimental: Any) -> None:
    """Warn once per (API, backend) for each experimental backend among a restricted call's
    candidates."""
    for backend in candidates:
        if backend in experimental:
            warn_backend_once(api_key, backend, _listed_message, api_key, backend)


def _listed_message(api_key: str, backend: str) -> str:
    """The warning's text, with who lists the backend (asked only when it warns)."""
    return listed_in_restriction(api_key, backend, restriction_source(api_key) or USE_BACKENDS)
