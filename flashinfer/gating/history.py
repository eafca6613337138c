"""The declared lifecycle history (docs/lifecycle.rst): :data:`HISTORY`, one record per exit
taken, :class:`Graduated`, :class:`Renamed` (an alias that warns once until ``expires``) or
:class:`Removed` (a tombstone until ``expires``), which ``flashinfer lifecycle ... --apply``
appends to.  The records are read where they act, through the lookups below (a test may
declare a synthetic history with :func:`declared_history`).  Importing this module imports
nothing of the package: a consumer may import it where a name is unknown, not at import.
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

THREE_EXITS = (
    "graduate it (flashinfer lifecycle graduate OP:BACKEND|API --apply), extend it (move "
    "graduate_by later, with the reason in the tracking issue, in a reviewed change), or "
    "remove it (flashinfer lifecycle remove OP:BACKEND|API --apply)"
)
"""The three exits of experimental work, as the lifecycle check names them (docs/lifecycle.rst)."""

ALIAS_MINOR_RELEASES = 2
"""Minor releases an alias or a tombstone lives: declared in ``0.2.0``, it goes in ``0.4.0``."""


def parse_version(text: str) -> tuple[int, int, int]:
    """``"1.2.3"`` as ``(1, 2, 3)`` (a missing patch is 0; a suffix such as ``.dev1`` or
    ``rc1`` is ignored: a pre-release counts as its release).  ``ValueError`` otherwise."""

    def digits(rest: str) -> tuple[int | None, str]:
        n = len(rest) - len(rest.lstrip("0123456789"))
        return (int(rest[:n]) if n and rest[:n].isascii() else None), rest[n:]

    major, rest = digits(text.strip())
    minor, rest = digits(rest[1:]) if rest.startswith(".") else (None, rest)
    patch = 0
    if rest.startswith("."):  # a third part must be digits, and what follows not a digit
        found, rest = digits(rest[1:])
        patch = -1 if found is None else found
    if major is None or minor is None or patch < 0:
        raise ValueError(f"{text!r} is not a version written MAJOR.MINOR[.PATCH]")
    return major, minor, patch


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
    """``old`` is an alias of ``new`` from ``version`` until ``expires``.  For a backend,
    ``api`` is its API's qualified name and ``old`` / ``new`` backend names; for an API
    (``backend=False``), ``old`` and ``new`` are qualified names and ``api`` is ``new``."""

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


def _records(kind: type, backend: bool) -> list[Any]:
    """The records of ``kind`` about backends (``backend``) or about APIs."""
    return [r for r in history() if isinstance(r, kind) and bool(r.backend) == backend]


def graduated_in(api: str, backend: str | None = None) -> str | None:
    """The release ``backend`` of ``api`` (or the API) graduated in, or ``None``."""
    for r in history():
        if isinstance(r, Graduated) and r.api == api and r.backend == backend:
            return r.version
    return None


def backend_aliases(api: str) -> dict[str, str]:
    """``old -> new`` for each renamed backend of ``api`` (an alias of an alias resolves to
    the last name)."""
    found = {r.old: r.new for r in _records(Renamed, True) if r.api == api}
    for old in found:
        seen = {old}
        while found[old] in found and found[old] not in seen:
            seen.add(found[old])
            found[old] = found[found[old]]
    return found


def renamed_backend(api: str, old: str) -> Renamed | None:
    """The record that made backend ``old`` of ``api`` an alias, if any."""
    return next((r for r in _records(Renamed, True) if r.api == api and r.old == old), None)


def renamed_api(old: str) -> Renamed | None:
    """The record of the API once called ``old`` (a qualified name), if it was renamed."""
    return next((r for r in _records(Renamed, False) if r.old == old), None)


def removed_backends(api: str) -> dict[str, Removed]:
    """Each removed backend of ``api``, by name, with its tombstone; an old name of a backend
    renamed and then removed has the tombstone too (it must not get the generic error)."""
    found = {r.name: r for r in _records(Removed, True) if r.api == api}
    for old, new in backend_aliases(api).items():
        if new in found:
            found.setdefault(old, found[new])
    return found


def tuning_name(api: str, backend: str) -> tuple[str, Removed | None]:
    """What a persisted tuning entry's ``backend`` of ``api`` is called now, and its
    tombstone if it was removed (a renamed backend's entry is read under the new name)."""
    name = backend_aliases(api).get(backend, backend)
    return name, removed_backends(api).get(name)


def alias_message(record: Renamed) -> str:
    """The deprecation warning of an alias: the old name, the new name, and when it goes."""
    from flashinfer.gating import messages

    if record.backend:
        return messages.renamed_backend_named(
            record.api, record.old, record.new, record.version, record.expires
        )
    return messages.renamed_api_used(record.old, record.new, record.version, record.expires)


def removed_backend_message(record: Removed) -> str:
    """Why naming a removed backend fails: the version and what to use instead."""
    from flashinfer.gating.messages import removed_backend_named

    return removed_backend_named(record.api, record.name, record.version, record.use_instead)


def removed_api_message(record: Removed) -> str:
    """Why a removed API's name fails: the version and what to use instead."""
    from flashinfer.gating.messages import removed_api_used

    return removed_api_used(record.api, record.version, record.use_instead)


_warned: set[str] = set()
_warned_lock = threading.Lock()


def warn_alias_once(message: str) -> None:
    """One ``DeprecationWarning`` per process for ``message`` (an alias's), at the user's line."""
    from flashinfer.settings.stacklevel import user_stacklevel

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
    ``__deprecated__`` is ``message``), warning once at the caller's line, then calling
    ``target`` (the stable one: an experimental API's ``ExperimentalWarning`` does not run)."""
    from typing_extensions import deprecated

    @deprecated(message, category=None)  # the runtime warning is ours: once, at the user's line
    @functools.wraps(target)
    def alias(*args: Any, **kwargs: Any) -> Any:
        warn_alias_once(message)
        return target(*args, **kwargs)

    return alias  # type: ignore[return-value]


def call_deprecated(message: str, target: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``target(*args, **kwargs)`` after ``message``'s one warning: the body of a deprecated
    alias written in source (an alias module ``flashinfer lifecycle`` leaves)."""
    warn_alias_once(message)
    return target(*args, **kwargs)


def moved_module_getattr(old: str, new: str, version: str, expires: str) -> Callable[[str], Any]:
    """The ``__getattr__`` of a module left at ``old`` when its code moved to ``new``: each
    name is ``new``'s, a function as a :func:`deprecated_alias`, anything else after the
    same one warning."""
    from flashinfer.gating.messages import moved_module_used

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
    renamed API's deprecated alias, or an ``AttributeError`` naming the tombstone's version
    and replacement, or the plain one.  The package root answers for APIs defined elsewhere
    (``flashinfer.<name>``)."""
    qualified = f"{module}.{name}"

    def named(r: Any, full: str) -> bool:
        return full == qualified or (module == "flashinfer" and full.rpartition(".")[2] == name)

    tomb = [r for r in _records(Removed, False) if named(r, r.api)]
    tomb.sort(key=lambda r: r.api != qualified)  # the qualified name first
    if tomb:
        raise AttributeError(removed_api_message(tomb[0]), name=name)
    renamed = [r for r in _records(Renamed, False) if named(r, r.old)]
    renamed.sort(key=lambda r: r.old != qualified)
    if renamed:
        target_module, _, target = renamed[0].new.rpartition(".")
        new = getattr(importlib.import_module(target_module), target)
        return deprecated_alias(new, alias_message(renamed[0]))
    raise AttributeError(f"module {module!r} has no attribute {name!r}", name=name)
