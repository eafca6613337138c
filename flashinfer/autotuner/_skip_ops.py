"""``autotune(skip_ops=[...])``: naming the ops a block leaves untuned.

An op is named by its ``api_key`` (``"flashinfer.gemm.mm"``) or its ``api_name``
(``"mm"``); inside the block its ``backend="auto"`` calls run the first candidate with its
default tactic, untimed, and record nothing (so the block saves nothing for them).  Useful
for an op whose tuning is slow (kernels that compile per tactic) or not wanted yet.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["resolve_skip_ops"]


def resolve_skip_ops(
    names: Iterable[str], registered: Callable[[], Mapping[str, tuple[Any, Any]]]
) -> frozenset[str]:
    """The api_keys of the ops ``names`` names among ``registered()`` (``api_key -> (op,
    runners)``, read once every op module is imported); ``ValueError`` naming the valid
    names for a name that matches no op, ``TypeError`` for a string or a non-string name."""
    if isinstance(names, (str, bytes)):
        raise TypeError(
            f"skip_ops must be a list of op names, not the string {names!r}: "
            f"write skip_ops=[{names!r}]"
        )
    names = list(names)
    if not names:
        return frozenset()
    from flashinfer.api_modules import load_api_modules

    load_api_modules()  # an op is registered when its module is imported
    by_name: dict[str, set[str]] = {}
    for api_key, (op, _) in registered().items():
        by_name.setdefault(api_key, set()).add(api_key)
        by_name.setdefault(getattr(op, "api_name", api_key), set()).add(api_key)
    keys: set[str] = set()
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"skip_ops holds {name!r}; name each op by a string, e.g. 'mm'")
        found = by_name.get(name)
        if found is None:
            valid = ", ".join(sorted(by_name)) or "none"
            raise ValueError(
                f"skip_ops: no autotunable op is named {name!r}; name an op by its API name "
                f"or its qualified name: {valid}"
            )
        keys |= found
    return frozenset(keys)
