"""The registry of every API decorated with ``backend_requirement``: the op records itself
when it is built; the inventory, the listing, ``flashinfer backends`` and ``use_backends``'
name table read it (the one way to find the ops)."""

from __future__ import annotations

from typing import Any

_registry: dict[str, Any] = {}


def register_op(api_key: str, function: Any) -> None:
    """Record ``function`` under its qualified name (a reloaded module replaces it)."""
    _registry[api_key] = function


def registered_ops() -> list[Any]:
    """Every API decorated with ``backend_requirement`` so far, sorted by qualified name."""
    return [_registry[k] for k in sorted(_registry)]
