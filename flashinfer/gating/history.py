"""The declared exits (docs/lifecycle.rst): :data:`HISTORY`, which ``flashinfer lifecycle
... --apply`` appends to, and the lookups that read it where it acts.  Imports nothing of the
package at import.
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

# Minor releases an alias or a tombstone lives: declared in 0.2.0, it goes in 0.4.0.
ALIAS_MINOR_RELEASES = 2


def parse_version(text: str) -> tuple[int, int, int]:
    """``"1.2.3"`` as ``(1, 2, 3)``; no patch is 0, a suffix (``rc1``) is ignored."""

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
    """``0.2.1`` -> ``0.4.0``."""
    major, minor, _ = parse_version(version)
    return f"{major}.{minor + minor_releases}.0"


@dataclass(frozen=True)
class Graduated:
    """``backend`` of ``api`` (a qualified name; ``None``: the API) became stable in ``version``."""

    api: str
    version: str
    backend: str | None = None


@dataclass(frozen=True)
class Renamed:
    """``old`` is an alias of ``new`` from ``version`` until ``expires``: backend names of
    ``api``, or (``backend=False``) qualified API names, ``api`` being ``new``."""

    api: str
    old: str
    new: str
    version: str
    expires: str
    backend: bool = True


@dataclass(frozen=True)
class Removed:
    """A tombstone until ``expires``: backend ``name`` of ``api`` (``backend=False``: the API
    ``api``) was removed in ``version``; use ``use_instead``."""

    api: str
    name: str
    version: str
    use_instead: str
    expires: str
    backend: bool = True


LifecycleRecord = Graduated | Renamed | Removed

# lifecycle-history: begin
HISTORY: tuple[LifecycleRecord, ...] = ()
# lifecycle-history: end

_override: list[tuple[LifecycleRecord, ...]] = []


def history() -> tuple[LifecycleRecord, ...]:
    """:data:`HISTORY`, or the one a :func:`declared_history` block declares."""
    return _override[-1] if _override else HISTORY


@contextlib.contextmanager
def declared_history(records: Sequence[LifecycleRecord]) -> Iterator[None]:
    """Within the block, :func:`history` is ``records`` (tests)."""
    _override.append(tuple(records))
    try:
        yield
    finally:
        _override.pop()


def _records(kind: type, backend: bool) -> list[Any]:
    return [r for r in history() if isinstance(r, kind) and bool(r.backend) == backend]


def graduated_in(api: str, backend: str | None = None) -> str | None:
    """The release ``backend`` of ``api`` (or the API) graduated in, or ``None``."""
    for r in history():
        if isinstance(r, Graduated) and r.api == api and r.backend == backend:
            return r.version
    return None


def backend_aliases(api: str) -> dict[str, str]:
    """``old -> new`` for each renamed backend of ``api``, chains resolved to the last name."""
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
    """Each removed backend of ``api`` (and old names of it) -> its tombstone."""
    found = {r.name: r for r in _records(Removed, True) if r.api == api}
    for old, new in backend_aliases(api).items():
        if new in found:
            found.setdefault(old, found[new])
    return found


def tuning_name(api: str, backend: str) -> tuple[str, Removed | None]:
    """A tuning entry's ``backend`` of ``api``: its name now, and its tombstone if removed."""
    name = backend_aliases(api).get(backend, backend)
    return name, removed_backends(api).get(name)


def alias_message(record: Renamed) -> str:
    """The deprecation warning of an alias."""
    from flashinfer.gating import messages

    if record.backend:
        return messages.renamed_backend_named(
            record.api, record.old, record.new, record.version, record.expires
        )
    return messages.renamed_api_used(record.old, record.new, record.version, record.expires)


def removed_backend_message(record: Removed) -> str:
    """Why naming a removed backend fails."""
    from flashinfer.gating.messages import removed_backend_named

    return removed_backend_named(record.api, record.name, record.version, record.use_instead)


def removed_api_message(record: Removed) -> str:
    """Why a removed API's name fails."""
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
    """``target`` under a deprecated name (``typing_extensions.deprecated``), warning once."""
    from typing_extensions import deprecated

    @deprecated(message, category=None)  # the runtime warning is ours: once, at the user's line
    @functools.wraps(target)
    def alias(*args: Any, **kwargs: Any) -> Any:
        warn_alias_once(message)
        return target(*args, **kwargs)

    return alias  # type: ignore[return-value]


def call_deprecated(message: str, target: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``target(*args, **kwargs)`` after ``message``'s one warning (aliases written in source)."""
    warn_alias_once(message)
    return target(*args, **kwargs)


def moved_module_getattr(old: str, new: str, version: str, expires: str) -> Callable[[str], Any]:
    """The ``__getattr__`` of a module left at ``old`` when its code moved to ``new``."""
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
    """``module.__getattr__(name)`` for a name gone: a renamed API's alias, or the
    ``AttributeError`` of its tombstone (``flashinfer`` answers for every API), or the plain one."""
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
