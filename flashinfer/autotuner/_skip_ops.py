"""``autotune(skip_ops=[...])``: naming the ops a block leaves untuned.

An op is named by the op itself (the public function, e.g. ``flashinfer.mm``), its
``api_name`` (``"mm"``) or its ``api_key`` (``"flashinfer.gemm.mm"``); inside the block its
``backend="auto"`` calls run the first candidate with its default tactic, untimed, and
record nothing (so the block saves nothing for them).  Useful for an op whose tuning is
slow (kernels that compile per tactic) or not wanted yet.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["resolve_skip_ops"]

_HOW = (
    "name each op by the op itself (e.g. flashinfer.mm), its API name (e.g. 'mm') or its "
    "qualified name (e.g. 'flashinfer.gemm.mm')"
)


def _shown(item: Any) -> str:
    text = repr(item)
    return text if len(text) <= 80 else text[:77] + "..."


def resolve_skip_ops(
    names: Iterable[Any] | None, registered: Callable[[], Mapping[str, tuple[Any, Any]]]
) -> frozenset[str]:
    """The api_keys of the ops ``names`` names among ``registered()`` (``api_key -> (op,
    runners)``, read once every op module is imported).  Each item is an op (anything with
    a string ``api_key``, e.g. ``flashinfer.mm``) or a string (its API or qualified name);
    ``None`` names none.  ``ValueError`` naming the valid names for an op or name that is no
    autotunable op; ``TypeError`` naming the item for anything else, and for a single
    string or op given instead of a list."""
    if names is None:
        return frozenset()
    if isinstance(names, (str, bytes)):
        raise TypeError(
            f"skip_ops must be a list of ops, not the string {_shown(names)}: write "
            f"skip_ops=[{_shown(names)}]"
        )
    single = _api_key_of(names)
    if single is not None:
        name = getattr(names, "api_name", single)
        raise TypeError(
            f"skip_ops must be a list of ops, not the op {name} itself: write skip_ops=[{name}]"
        )
    try:
        items = list(names)
    except TypeError:
        raise TypeError(
            f"skip_ops must be a list of ops, got {type(names).__name__} {_shown(names)}; {_HOW}"
        ) from None
    if not items:
        return frozenset()
    for position, item in enumerate(items):  # every item's kind, before any import
        if not isinstance(item, str) and _api_key_of(item) is None:
            raise TypeError(
                f"skip_ops[{position}] is {type(item).__name__} {_shown(item)}, not an op; {_HOW}"
            )
    from flashinfer.api_modules import load_api_modules

    load_api_modules()  # an op is registered when its module is imported
    by_name: dict[str, set[str]] = {}
    for api_key, (op, _) in registered().items():
        by_name.setdefault(api_key, set()).add(api_key)
        by_name.setdefault(getattr(op, "api_name", api_key), set()).add(api_key)
    keys: set[str] = set()
    for item in items:
        name = item if isinstance(item, str) else _api_key_of(item)
        assert name is not None  # checked above
        found = by_name.get(name)
        if found is None:
            valid = ", ".join(sorted(by_name)) or "none"
            what = (
                f"no autotunable op is named {name!r}"
                if isinstance(item, str)
                else f"the op {name} is not autotunable"
            )
            raise ValueError(
                f"skip_ops: {what}; name an op by the op itself, its API name or its "
                f"qualified name: {valid}"
            )
        keys |= found
    return frozenset(keys)


def _api_key_of(item: Any) -> str | None:
    """An op's ``api_key`` (what ``backend_requirement`` gives the public function), or None
    for anything that is not an op."""
    try:
        api_key = getattr(item, "api_key", None)
    except Exception:  # an object whose attribute access itself fails is not an op
        return None
    return api_key if isinstance(api_key, str) else None
