"""Which scalar inputs of an op enter its tuning key, and how they are bucketed.

**The default rule.** A ``bool``, ``int``, ``str`` or enum member is part of the key as its
value: two calls that differ in a flag are two keys, each tuned on its own (upstream
FlashInfer issue #3363: calls with different ``use_8x4_sf_layout`` shared one entry, and one
got a tactic invalid for it).  A ``float`` (``eps``, ``alpha``) is left out (``...``): its
exact value rarely changes which kernel is fastest, and keying on it would tune every value
anew.  Anything else (tuples, objects, devices) is left out too.

**Declarations.** A runner may say which inputs matter and how to bucket them, with a
``key_inputs`` attribute: a mapping from the position of an input in ``inputs`` to a bucket
function (``None``: the value itself)::

    class MyRunner:
        key_inputs = {2: None, 3: lambda alpha: round(alpha, 1)}  # flag; alpha to 0.1

When any runner of an op declares, the declarations replace the default rule for that op's
scalars: exactly the declared positions holding a ``bool``, ``int``, ``str``, ``float`` or
enum member are in the key, through their bucket function; the other scalars are left out.
The op's runners' declarations are merged (``ValueError`` at registration when two declare
one position with different functions).  Tensors, ``None`` and dtypes are always in the key
as they are.  A bucket function must be pure and return a ``bool``, ``int``, ``str``,
``float``, enum member or ``None``.  Enum members are keyed by their class's qualified name
and their name (:class:`EnumValue`), so a key read back from a tuning file never imports the
enum's module.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from flashinfer.gating.exposed import exposed_in

__all__ = [
    "Declared",
    "EnumValue",
    "declarations",
    "declare",
    "declared_of",
    "in_key",
    "key_value",
]

Bucket = Callable[[Any], Any] | None
#: position -> bucket function (None: the value itself)
Declared = dict[int, Bucket]

_DEFAULT_TYPES = (bool, int, str)
_DECLARABLE_TYPES = (bool, int, str, float)


@exposed_in("flashinfer.autotuner.keys")
class EnumValue(NamedTuple):
    """An enum member as a tuning key holds it: its class's qualified name and its name."""

    enum: str
    name: str


_DECLARED: dict[str, Declared] = {}
_LOCK = threading.Lock()


def in_key(position: int, tp: type, declared: Declared | None) -> bool:
    """Whether an input of type ``tp`` (not a tensor, ``None`` or dtype) at ``position``
    enters the key as its value (else it is left out, ``...``)."""
    if declared is None:
        return tp in _DEFAULT_TYPES or issubclass(tp, enum.Enum)
    return position in declared and (tp in _DECLARABLE_TYPES or issubclass(tp, enum.Enum))


def key_value(value: Any, bucket: Bucket) -> Any:
    """What the key holds for an input ``value`` that enters it (see :func:`in_key`)."""
    if bucket is not None:
        value = bucket(value)
    if isinstance(value, enum.Enum):
        cls = type(value)
        return EnumValue(f"{cls.__module__}.{cls.__qualname__}", value.name)
    if value is None or type(value) in _DECLARABLE_TYPES:
        return value
    raise TypeError(
        f"a key_inputs bucket function returned {value!r}; it must return a bool, int, str, "
        "float, enum member or None"
    )


def declarations(api_key: str) -> Declared | None:
    """The declared key inputs of the op ``api_key`` (None: the default rule)."""
    return _DECLARED.get(api_key)


def declared_of(api_key: str, runners: Mapping[str, Any]) -> Declared | None:
    """The merged ``key_inputs`` of ``runners`` (None when none declares); ``TypeError`` or
    ``ValueError`` naming the runner for a declaration that is not one, or two that
    disagree."""
    merged: Declared = {}
    owner: dict[int, str] = {}
    found = False
    for backend, runner in runners.items():
        declared = getattr(runner, "key_inputs", None)
        if declared is None:
            continue
        found = True
        where = f"AutoTuner.register({api_key}): runner {backend!r} key_inputs"
        if not isinstance(declared, Mapping):
            raise TypeError(f"{where} must map input positions to bucket functions or None")
        for position, bucket in declared.items():
            if type(position) is not int or position < 0:
                raise TypeError(f"{where}: {position!r} is not an input position (an int >= 0)")
            if bucket is not None and not callable(bucket):
                raise TypeError(f"{where}[{position}] must be a function or None")
            if position in merged and merged[position] is not bucket:
                raise ValueError(
                    f"{where}[{position}] differs from runner {owner[position]!r}'s: the "
                    "runners of one op share its key, so they must bucket an input alike"
                )
            merged[position], owner[position] = bucket, backend
    return merged if found else None


def declare(api_key: str, declared: Declared | None) -> None:
    """Record the key inputs of ``api_key`` (None: the default rule).  Call through
    :func:`flashinfer.autotuner.keys.declare_key_inputs`, which also forgets the keys
    read under the previous rule."""
    with _LOCK:
        if declared is None:
            _DECLARED.pop(api_key, None)
        else:
            _DECLARED[api_key] = dict(declared)
