"""The declared lifecycle history: what left the experimental state, and how.

Experimental work ends in one of three exits (``docs/lifecycle.rst``): it graduates, it is
renamed (on its way to graduating, or as a stable name changes), or it is removed.  Each exit
is one record in :data:`HISTORY`, which ``flashinfer lifecycle graduate|remove --apply``
appends to and the lifecycle check (``scripts/pr_checks/experimental_lifecycle.py``) reads:

* :class:`Graduated`: a backend (``backend=`` set) or an API became stable in ``version``.
  ``op.explain()`` and ``flashinfer backends`` show the version; a tuning entry saved while it
  was experimental is used as it stands (the loader reads the live declaration), and the next
  save records it stable.
* :class:`Renamed`: ``old`` is an alias of ``new`` from ``version`` until ``expires``: a call
  naming it runs ``new`` and warns once (``DeprecationWarning`` at the caller's line, naming
  the new name); a tuning entry under ``old`` is read as ``new``.
* :class:`Removed`: a tombstone.  Naming the backend raises ``BackendSupportedError``, and the
  API's name an ``AttributeError``, each naming ``version`` and what to use instead; a tuning
  entry naming it is skipped with one line.

Aliases and tombstones are not forever: ``expires`` is the release that deletes them, and the
lifecycle check fails once the package's version reaches it (the record and its alias go
together).  Versions are ``MAJOR.MINOR.PATCH``; the default lifetime is
:data:`ALIAS_MINOR_RELEASES` minor releases (:func:`expiry_after`).

The records are read where they act (the dispatcher when an op is built, the tuning-file
loader, ``flashinfer.__getattr__`` and the listings), each time through the lookups below, so
a test may declare a synthetic history with :func:`declared_history`.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from typing_extensions import deprecated

from flashinfer.gating.messages import (
    moved_module_used,
    removed_api_used,
    removed_backend_named,
    renamed_api_used,
    renamed_backend_named,
)
from flashinfer.settings.stacklevel import user_stacklevel

__all__ = [
    "ALIAS_MINOR_RELEASES",
    "HISTORY",
    "THREE_EXITS",
    "Graduated",
    "LifecycleRecord",
    "Removed",
    "Renamed",
    "alias_message",
    "backend_aliases",
    "call_deprecated",
    "declared_history",
    "deprecated_alias",
    "expiry_after",
    "graduated_in",
    "graduation_of",
    "history",
    "parse_version",
    "missing_attribute",
    "moved_module_getattr",
    "removed_api",
    "removed_api_message",
    "removed_backend",
    "removed_backends",
    "resolve",
    "removed_backend_message",
    "renamed_api",
    "renamed_backend",
    "reset_alias_warnings",
    "tuning_name",
    "warn_alias_once",
]

THREE_EXITS = (
    "graduate it (flashinfer lifecycle graduate OP:BACKEND|API --apply), extend it (move "
    "graduate_by later, with the reason in the tracking issue, in a reviewed change), or "
    "remove it (flashinfer lifecycle remove OP:BACKEND|API --apply)"
)
"""The three exits of experimental work, as the lifecycle check names them (docs/lifecycle.rst)."""

ALIAS_MINOR_RELEASES = 2
"""How many minor releases an alias or a tombstone lives: declared in ``0.2.0``, it goes in
``0.4.0`` (:func:`expiry_after`).  Two releases give a user who upgrades one release at a
time one release that warns before the name stops working."""


def parse_version(text: str) -> tuple[int, int, int]:
    """``"1.2.3"`` as ``(1, 2, 3)`` (a missing part is 0; a suffix such as ``.dev1`` or
    ``rc1`` is ignored: a pre-release counts as its release).  ``ValueError`` otherwise."""
    parts = text.strip().split(".")
    numbers: list[int] = []
    for part in parts[:3]:
        digits = ""
        for c in part:
            if not c.isdigit():
                break
            digits += c
        if not digits:
            raise ValueError(f"{text!r} is not a version written MAJOR.MINOR[.PATCH]")
        numbers.append(int(digits))
        if len(digits) < len(part):
            break
    if len(numbers) < 2:
        raise ValueError(f"{text!r} is not a version written MAJOR.MINOR[.PATCH]")
    while len(numbers) < 3:
        numbers.append(0)
    return numbers[0], numbers[1], numbers[2]


def expiry_after(version: str, minor_releases: int = ALIAS_MINOR_RELEASES) -> str:
    """The release ``minor_releases`` minor releases after ``version`` (``0.2.1`` -> ``0.4.0``)."""
    major, minor, _ = parse_version(version)
    return f"{major}.{minor + minor_releases}.0"


@dataclass(frozen=True)
class Graduated:
    """``backend`` of ``api`` (or, with ``backend=None``, the API ``api`` itself) became stable
    in ``version``.  ``api`` is the API's qualified name (``"flashinfer.gemm.mm"``)."""

    api: str
    version: str
    backend: str | None = None


@dataclass(frozen=True)
class Renamed:
    """``old`` is an alias of ``new`` from ``version`` until ``expires`` (the release that
    deletes it).  For a backend, ``api`` is its API's qualified name and ``old`` / ``new``
    backend names; for an API (``backend=False``), ``old`` and ``new`` are qualified names
    (``"flashinfer.norm.rmsnorm"``) and ``api`` is ``new``."""

    api: str
    old: str
    new: str
    version: str
    expires: str
    backend: bool = True


@dataclass(frozen=True)
class Removed:
    """A tombstone: ``name`` (a backend of ``api``, or with ``backend=False`` the API whose
    qualified name is ``api``) was removed in ``version``; ``use_instead`` says what to use
    (a backend name, or a qualified API name).  It stays until ``expires``."""

    api: str
    name: str
    version: str
    use_instead: str
    expires: str
    backend: bool = True


LifecycleRecord = Graduated | Renamed | Removed

# -- the declared history (``flashinfer lifecycle ... --apply`` edits between the markers) ------
# lifecycle-history: begin
HISTORY: tuple[LifecycleRecord, ...] = ()
# lifecycle-history: end

_override: list[tuple[LifecycleRecord, ...]] = []


def history() -> tuple[LifecycleRecord, ...]:
    """The records in force: :data:`HISTORY`, or a synthetic one (:func:`declared_history`)."""
    return _override[-1] if _override else HISTORY


@contextlib.contextmanager
def declared_history(records: Sequence[LifecycleRecord]) -> Iterator[None]:
    """Within the block, :func:`history` is ``records`` (for tests: ops built inside read it)."""
    _override.append(tuple(records))
    try:
        yield
    finally:
        _override.pop()


def graduation_of(api: str, backend: str | None = None) -> Graduated | None:
    """The record of ``backend`` of ``api`` (or of the API) graduating, if any."""
    for r in history():
        if isinstance(r, Graduated) and r.api == api and r.backend == backend:
            return r
    return None


def graduated_in(api: str, backend: str | None = None) -> str | None:
    """The release ``backend`` of ``api`` (or the API) graduated in, or ``None``."""
    record = graduation_of(api, backend)
    return None if record is None else record.version


def backend_aliases(api: str) -> dict[str, str]:
    """``old -> new`` for each renamed backend of ``api`` (an alias of an alias resolves to
    the last name)."""
    found = {
        r.old: r.new for r in history() if isinstance(r, Renamed) and r.backend and r.api == api
    }
    for old in found:
        seen = {old}
        while found[old] in found and found[old] not in seen:
            seen.add(found[old])
            found[old] = found[found[old]]
    return found


def renamed_backend(api: str, old: str) -> Renamed | None:
    """The record that made backend ``old`` of ``api`` an alias, if any."""
    for r in history():
        if isinstance(r, Renamed) and r.backend and r.api == api and r.old == old:
            return r
    return None


def renamed_api(old: str) -> Renamed | None:
    """The record of the API once called ``old`` (a qualified name), if it was renamed."""
    for r in history():
        if isinstance(r, Renamed) and not r.backend and r.old == old:
            return r
    return None


def removed_backend(api: str, name: str) -> Removed | None:
    """The tombstone of backend ``name`` of ``api``, if it was removed (under that name, or
    under the name it was renamed to)."""
    return removed_backends(api).get(name)


def removed_backends(api: str) -> dict[str, Removed]:
    """Each removed backend of ``api``, by name, with its tombstone; an old name of a backend
    renamed and then removed has the tombstone too (it must not get the generic error)."""
    found = {r.name: r for r in history() if isinstance(r, Removed) and r.backend and r.api == api}
    for old, new in backend_aliases(api).items():
        if new in found:
            found.setdefault(old, found[new])
    return found


def removed_api(qualified: str) -> Removed | None:
    """The tombstone of the API ``qualified`` (``"flashinfer.fused_norm.fused_add_rmsnorm"``)."""
    for r in history():
        if isinstance(r, Removed) and not r.backend and r.api == qualified:
            return r
    return None


def tuning_name(api: str, backend: str) -> tuple[str, Removed | None]:
    """What a persisted tuning entry's ``backend`` of ``api`` is called now, and its
    tombstone if it was removed (a renamed backend's entry is read under the new name)."""
    name = backend_aliases(api).get(backend, backend)
    return name, removed_backend(api, name)


def alias_message(record: Renamed) -> str:
    """The deprecation warning of an alias: the old name, the new name, and when it goes."""
    if record.backend:
        return renamed_backend_named(
            record.api, record.old, record.new, record.version, record.expires
        )
    return renamed_api_used(record.old, record.new, record.version, record.expires)


def removed_backend_message(record: Removed) -> str:
    """Why naming a removed backend fails: the version and what to use instead."""
    return removed_backend_named(record.api, record.name, record.version, record.use_instead)


def removed_api_message(record: Removed) -> str:
    """Why a removed API's name fails: the version and what to use instead."""
    return removed_api_used(record.api, record.version, record.use_instead)


def _plain(qualified: str) -> str:
    return qualified.rpartition(".")[2]


_warned: set[str] = set()
_warned_lock = threading.Lock()


def warn_alias_once(message: str) -> None:
    """One ``DeprecationWarning`` per process for ``message`` (an alias's), at the user's line."""
    with _warned_lock:
        if message in _warned:
            return
        _warned.add(message)
    warnings.warn(message, DeprecationWarning, stacklevel=user_stacklevel())


def reset_alias_warnings() -> None:
    """Let every alias warn again (tests)."""
    with _warned_lock:
        _warned.clear()


F = TypeVar("F", bound=Callable[..., Any])


def deprecated_alias(target: F, message: str) -> F:
    """``target`` under a deprecated name: marked ``typing_extensions.deprecated`` (its
    ``__deprecated__`` is ``message``; written as a decorator in source, as the codemod
    writes it, type checkers flag each use), and a call warns once at the caller's line,
    then calls ``target``.  The stable ``target`` runs, so an experimental API's
    ``ExperimentalWarning`` does not."""

    @deprecated(message, category=None)  # the runtime warning is ours: once, at the user's line
    @functools.wraps(target)
    def alias(*args: Any, **kwargs: Any) -> Any:
        warn_alias_once(message)
        return target(*args, **kwargs)

    return alias  # type: ignore[return-value]


def resolve(qualified: str) -> Any:
    """The object a qualified name (``"flashinfer.norm.rmsnorm"``) names, its module imported."""
    module, _, name = qualified.rpartition(".")
    return getattr(importlib.import_module(module), name)


def call_deprecated(message: str, target: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``target(*args, **kwargs)`` after ``message``'s one warning: the body of a deprecated
    alias written in source (an alias module ``flashinfer lifecycle`` leaves)."""
    warn_alias_once(message)
    return target(*args, **kwargs)


def moved_module_getattr(old: str, new: str, version: str, expires: str) -> Callable[[str], Any]:
    """The ``__getattr__`` of a module left at ``old`` when its code moved to ``new`` (a
    promoted API's experimental import path): each name is ``new``'s, a function as a
    deprecated alias (:func:`deprecated_alias`), anything else after the same one warning."""
    message = moved_module_used(old, new, version, expires)

    def __getattr__(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        value = getattr(importlib.import_module(new), name)
        if callable(value) and not isinstance(value, type):
            return deprecated_alias(value, message)
        warn_alias_once(message)
        return value

    return __getattr__


def missing_attribute(module: str, name: str) -> Any:
    """What ``module.__getattr__(name)`` answers for a name the module no longer defines: a
    renamed API's deprecated alias (the new name, imported), or an ``AttributeError``
    naming the tombstone's version and replacement, or the plain one.  A module that lost
    an API to a rename or a removal defines ``__getattr__`` as this, bound to its name."""
    qualified = f"{module}.{name}"
    tomb = removed_api(qualified) or _removed_by_plain_name(module, name)
    if tomb is not None:
        raise AttributeError(removed_api_message(tomb), name=name)
    renamed = renamed_api(qualified) or _renamed_by_plain_name(module, name)
    if renamed is not None:
        return deprecated_alias(resolve(renamed.new), alias_message(renamed))
    raise AttributeError(f"module {module!r} has no attribute {name!r}", name=name)


def _removed_by_plain_name(module: str, name: str) -> Removed | None:
    """For the package root: ``flashinfer.<name>`` spelled an API defined elsewhere."""
    if module != "flashinfer":
        return None
    for r in history():
        if isinstance(r, Removed) and not r.backend and _plain(r.api) == name:
            return r
    return None


def _renamed_by_plain_name(module: str, name: str) -> Renamed | None:
    if module != "flashinfer":
        return None
    for r in history():
        if isinstance(r, Renamed) and not r.backend and _plain(r.old) == name:
            return r
    return None
