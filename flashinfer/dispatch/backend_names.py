"""Names of APIs and backends as users write them: checked and turned into restrictions."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any

from flashinfer.api_modules import API_MODULES, load_api_modules
from flashinfer.gating.op_registry import registered_ops
from flashinfer.settings.environment import BACKENDS_ACCEPTED

Restriction = dict[str, tuple[str, ...]]
"""``api_key -> backends``, in the order automatic selection tries them."""

ENV_FORMAT = BACKENDS_ACCEPTED  # the settings table's words, written once

_apis: dict[str, Any] | None = None
_apis_lock = threading.Lock()


def flashinfer_apis() -> dict[str, Any]:
    """``flashinfer``'s public APIs that have backends, by plain name (``"mm"``)."""
    global _apis
    if _apis is not None:
        return _apis
    load_api_modules()
    found = {
        fn.dispatcher.api_name: fn
        for fn in registered_ops()
        if fn.__module__ in API_MODULES and fn.dispatcher.backend_checks
    }
    with _apis_lock:
        if _apis is None:
            _apis = dict(sorted(found.items()))
    return _apis


def _valid_api_names() -> str:
    return ", ".join(repr(n) for n in flashinfer_apis()) or "none"


OP_KEY_PREFIX = "op:"
"""How traced code names an op object it holds (``"op:" + api_key``): Dynamo cannot hand a
function to a constant function, but it can hand a string (see ``use_backends``)."""


def op_of(key: Any, where: str) -> Any:
    """The dispatcher (``BackendRequirementOp``) that ``key`` names."""
    if isinstance(key, str) and key.startswith(OP_KEY_PREFIX):
        api_key = key[len(OP_KEY_PREFIX) :]
        api = next((f for f in registered_ops() if f.dispatcher.api_key == api_key), None)
        if api is None:
            raise ValueError(f"{where}: no op {api_key!r} is registered")
        key = api
    if isinstance(key, str):
        api = flashinfer_apis().get(key)
        if api is None:
            raise ValueError(
                f"{where}: unknown API {key!r}; APIs with backends: {_valid_api_names()} "
                "(an API outside flashinfer is named by its op object: "
                "use_backends({op: [...]}))"
            )
        return api.dispatcher
    op = getattr(key, "dispatcher", None)
    if op is None and hasattr(key, "route_auto") and hasattr(key, "backend_checks"):
        op = key  # the dispatcher object itself
    if op is None:
        raise TypeError(
            f"{where}: {key!r} is not an API decorated with backend_requirement; name one "
            f"by its plain name ({_valid_api_names()}) or pass the decorated function"
        )
    if not op.backend_checks:
        raise ValueError(f"{where}: {op.api_key} has no backend choices to restrict")
    return op


def _backend_list(op: Any, backends: Any, where: str) -> tuple[str, ...]:
    """``backends`` checked against ``op``'s table."""
    names = [backends] if isinstance(backends, str) else backends
    if not isinstance(names, Iterable) or isinstance(names, Mapping):
        raise TypeError(
            f"{where}: the backends of {op.api_name} must be a list of backend names, got "
            f"{type(backends).__name__} {backends!r}"
        )
    names = list(names)
    valid = ", ".join(repr(b) for b in op.backend_checks)
    if not names:
        raise ValueError(
            f"{where}: an empty list of backends for {op.api_name} would let no backend run; "
            f"list at least one of {valid}, or leave {op.api_name} out"
        )
    for i, name in enumerate(names):
        if not isinstance(name, str):
            raise TypeError(
                f"{where}: backend names of {op.api_name} must be str, got "
                f"{type(name).__name__} {name!r}; its backends: {valid}"
            )
        if name not in op.backend_checks:  # renamed: the new name, after one warning
            names[i] = name = op.resolve_alias(name)
        tomb = op.backend_tombstones.get(name) if name not in op.backend_checks else None
        if tomb is not None:
            from flashinfer.gating.history import removed_backend_message

            raise ValueError(f"{where}: {removed_backend_message(tomb)}; its backends: {valid}")
        if name not in op.backend_checks:
            raise ValueError(
                f"{where}: {op.api_name} has no backend {name!r}; its backends: {valid}"
            )
        if names.count(name) > 1:
            raise ValueError(f"{where}: backend {name!r} is listed twice for {op.api_name}")
    return tuple(names)


def _add_entry(found: Restriction, key: Any, backends: Any, where: str) -> None:
    """One API's entry (``key`` as :func:`op_of` takes it), checked, added to ``found``."""
    op = op_of(key, where)
    if op.api_key in found:
        raise ValueError(f"{where}: {op.api_name} is named twice")
    found[op.api_key] = _backend_list(op, backends, where)


def restriction_of(
    by_op: Mapping[Any, Any] | None, by_name: Mapping[str, Any], where: str
) -> Restriction:
    """``{api_key: backends}`` that ``use_backends(ops, **apis)`` restricts, checked."""
    found: Restriction = {}
    for key, backends in [*(by_op or {}).items(), *by_name.items()]:
        _add_entry(found, key, backends, where)
    return found


def parse_env_value(raw: str, variable: str) -> Restriction:
    """``FLASHINFER_BACKENDS``'s value as ``{api_key: backends}``, checked."""
    found: Restriction = {}
    for part in raw.split(";"):
        api_name, sep, listed = part.partition("=")
        api_name = api_name.strip()
        names = [b.strip() for b in listed.split(",")]
        if not sep or not api_name or not all(names):
            raise ValueError(f"the part {part!r} is not API=BACKEND[,BACKEND...]")
        try:
            _add_entry(found, api_name, names, variable)
        except TypeError as exc:  # not reachable for str names; kept as a ValueError
            raise ValueError(str(exc)) from None
    return found
