"""A call's signature: what the verdict cache keys on (see ``verdicts``), read by generated code.

Arguments are classified by their exact type (a *pattern*: one type per parameter).  A
pattern is cacheable when every type is a plain tensor type (``torch.Tensor``,
``torch.nn.Parameter``: shape, strides, dtype and device are read) or an immutable value type
(the value itself is the signature's item); any other type (a tensor subclass, whose
attributes may be computed, a list, an object) makes the call uncacheable.  The generated
dispatcher tests the call's types against each learnt pattern in turn and reads the
pattern's items unrolled, as the autotuner's router reads its keys.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any

import torch

__all__ = ["MAX_PATTERNS", "TENSOR_TYPES", "cacheable_pattern", "pattern_source"]

MAX_PATTERNS = 8
"""Most argument-type patterns one op learns; calls of any further pattern are not cached."""

TENSOR_TYPES: frozenset[type] = frozenset({torch.Tensor, torch.nn.Parameter})
"""Types whose metadata reads are torch's own (a subclass may compute them in Python)."""

_VALUE_TYPES: frozenset[type] = frozenset(
    {
        type(None),
        bool,
        int,
        float,
        complex,
        str,
        bytes,
        torch.dtype,
        torch.device,
        torch.layout,
        torch.memory_format,
    }
)


def _value_type(tp: type) -> bool:
    return tp in _VALUE_TYPES or (isinstance(tp, type) and issubclass(tp, enum.Enum))


def cacheable_pattern(values: Sequence[Any]) -> tuple[type, ...] | None:
    """The pattern of ``values`` (their exact types), or None when one is not cacheable."""
    pattern = tuple(type(v) for v in values)
    if all(tp in TENSOR_TYPES or _value_type(tp) for tp in pattern):
        return pattern
    return None


def pattern_source(
    pattern: tuple[type, ...], names: Sequence[str], ns: dict[str, Any], tag: str
) -> tuple[str, list[str]]:
    """The test that the arguments bound to ``names`` have exactly the types of
    ``pattern``, and the expressions of the signature's items, for generated code.  The
    types are stored in ``ns`` as ``_<tag><n>``; ``type`` itself as ``_type`` (a parameter
    may be named ``type``).  ``None`` contributes no item (the pattern says it is None)."""
    ns["_type"] = type
    tests: list[str] = []
    items: list[str] = []
    for n, (name, tp) in enumerate(zip(names, pattern, strict=True)):
        if tp is type(None):
            tests.append(f"{name} is None")
            continue
        ns[f"_{tag}{n}"] = tp
        tests.append(f"_type({name}) is _{tag}{n}")
        if tp in TENSOR_TYPES:
            items += [f"{name}.shape", f"{name}.stride()", f"{name}.dtype", f"{name}.device"]
        else:
            items.append(name)
    return " and ".join(tests) or "True", items
