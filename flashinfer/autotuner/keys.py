"""What identifies a tuned result: its tuning key (what two calls must share to share a
choice) and the fingerprint of the environment that measured it (docs/api/autotuner.rst,
"One file, many machines").

A key is a plain tuple, cheap to build and hash (every ``"auto"`` call computes one)::

    (api_key, inputs, device_type, compute_capability)

``inputs`` holds per input a tensor's ``(shape rounded up to powers of two, dtype)``,
``None``, a dtype, a scalar's (bucketed) value, or ``...`` for a value left out; the rules
and ``key_inputs``: docs/api/autotuner.rst ("What a tuning key holds").  A runner must keep
every tactic it returns valid for all inputs of one key: a tactic is reused across a bucket."""

from __future__ import annotations

import enum
import functools
import importlib.metadata
import math
import threading
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import torch

from flashinfer._version import __version__
from flashinfer.dispatch.capability import device_capability
from flashinfer.dispatch.families import dtype_name
from flashinfer.gating.exposed import exposed_in
from flashinfer.kernels import next_positive_power_of_2
from flashinfer.kernels.availability import interpreter_enabled

Key = tuple  # (api_key, inputs, device_type, compute_capability)

_Tensor = torch.Tensor
_dtype = torch.dtype

# Bucketed shape per exact shape: one dict lookup instead of a loop on every call.
_SHAPE_BUCKETS: dict[tuple[int, ...], tuple[int, ...]] = {}

# Most entries any of the autotuner's memos holds (past it: computed, not remembered).
MEMO_CAP = 1 << 14


def bucket_dim(d: int) -> int:
    """Round a dimension up to the next power of two (``0`` stays ``0``)."""
    return next_positive_power_of_2(d) if d > 0 else 0


def bucket_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    """:func:`bucket_dim` of every dimension."""
    bucket = _SHAPE_BUCKETS.get(shape)
    if bucket is None:
        bucket = tuple(bucket_dim(d) for d in shape)
        if len(_SHAPE_BUCKETS) < MEMO_CAP:
            _SHAPE_BUCKETS[tuple(shape)] = bucket
    return bucket


# Certainly not tensors: a set lookup beats isinstance through torch's metaclass.
_NOT_TENSOR = frozenset({type(None), bool, int, float, str, torch.dtype, torch.device})


# Tuning key per exact call signature (see make_key).
_KEY_MEMO: dict[tuple, Key] = {}


def exact_signature(api_key: str, inputs: tuple) -> tuple:
    """A flat tuple of what the key depends on, unbucketed (shapes, dtypes, scalar values or
    ``...``, the first tensor's device): cheap to build and to hash."""
    signature: list[Any] = [api_key]
    first = None
    declared = declarations(api_key)
    for n, x in enumerate(inputs):
        tp = type(x)
        if tp is _Tensor or (tp not in _NOT_TENSOR and isinstance(x, _Tensor)):
            signature += (x.shape, x.dtype)
            if first is None:
                first = x
        elif x is None or tp is _dtype or in_key(n, tp, declared):
            signature.append(x)
        else:
            signature.append(...)
    if first is not None:
        signature.append(first.device)
    return tuple(signature)


def make_key(api_key: str, inputs: tuple) -> Key:
    """The tuning key of one call, memoised on :func:`exact_signature` (a pure function of
    shapes, dtypes and device, never of tensor values: an entry can never go stale)."""
    exact = exact_signature(api_key, inputs)
    key = _KEY_MEMO.get(exact)
    if key is None:
        key = _key_from_signature(exact)
        if len(_KEY_MEMO) < MEMO_CAP:
            _KEY_MEMO[exact] = key
    return key


def _key_from_signature(signature: tuple) -> Key:
    """The key of an exact signature, which holds all it needs (a ``torch.Size`` starts a tensor's
    pair; a trailing ``torch.device`` is the first tensor's): one classification of inputs for
    both."""
    api_key, items = signature[0], signature[1:]
    device = None
    if items and type(items[-1]) is torch.device:
        items, device = items[:-1], items[-1]
    declared = declarations(api_key) or {}
    parts: list[Any] = []
    i = 0
    while i < len(items):
        item = items[i]
        if type(item) is torch.Size:
            parts.append((bucket_shape(item), items[i + 1]))
            i += 2
            continue
        if item is not None and item is not ... and type(item) is not _dtype:
            item = key_value(item, declared.get(len(parts)))  # a scalar: bucketed
        parts.append(item)
        i += 1
    if device is None:
        return (api_key, tuple(parts), None, None)
    if device.type == "cuda":
        return (api_key, tuple(parts), "cuda", device_capability(device.index))
    return (api_key, tuple(parts), device.type, None)


def declare_key_inputs(api_key: str, runners: Mapping[str, Any]) -> None:
    """Record the ``key_inputs`` the ``runners`` of ``api_key`` declare (none: the default rule)
    and forget the keys read under the previous rule."""
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
    with _LOCK:
        if found:
            _DECLARED[api_key] = merged
        else:
            _DECLARED.pop(api_key, None)
    for exact in [e for e in list(_KEY_MEMO) if e[0] == api_key]:
        _KEY_MEMO.pop(exact, None)


# ---- JSON form of a key (the tuning file) ----


def dtype_from_name(name: str) -> torch.dtype:
    """``"float16"`` -> ``torch.float16``; ``ValueError`` for anything else."""
    # vars(), not getattr(): a name from a file must never reach torch's lazy
    # module __getattr__, which imports submodules (side effects, slow, may raise).
    value = vars(torch).get(name) if isinstance(name, str) else None
    if not isinstance(value, torch.dtype):
        raise ValueError(f"unknown dtype {name!r}")
    return value


def _input_to_json(p: Any) -> Any:
    """One input of a key as the tuning file writes it (docs/api/autotuner.rst)."""
    if p is None:
        return None
    if p is ...:
        return "scalar"
    if isinstance(p, torch.dtype):
        return {"dtype": dtype_name(p)}
    if isinstance(p, EnumValue):
        return {"enum": p.enum, "name": p.name}
    if type(p) is float and not math.isfinite(p):
        return {"float": repr(p)}
    if type(p) in (bool, int, str, float):
        return {"value": p}
    shape, dtype = p
    return {"shape": list(shape), "dtype": dtype_name(dtype)}


def key_to_json(key: Key) -> dict[str, Any]:
    """A human-readable JSON object for ``key``."""
    api_key, parts, device, cc = key
    inputs = [_input_to_json(p) for p in parts]
    return {"op": api_key, "inputs": inputs, "device": device, "compute_capability": cc}


def _input_from_json(item: Any) -> Any:
    """Inverse of :func:`_input_to_json`; ``ValueError`` if malformed."""
    fields = set(item) if isinstance(item, dict) else set()
    if item is None:
        return None
    if item == "scalar":
        return ...
    if fields == {"dtype"}:
        return dtype_from_name(item["dtype"])
    if fields == {"value"} and type(item["value"]) in (bool, int, str, float):
        return item["value"]
    if fields == {"float"} and item["float"] in ("nan", "inf", "-inf"):
        return float(item["float"])
    if fields == {"enum", "name"} and all(isinstance(item[f], str) for f in fields):
        return EnumValue(item["enum"], item["name"])
    if fields == {"shape", "dtype"}:
        shape = item["shape"]
        if not isinstance(shape, list) or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
        ):
            raise ValueError(f"bad shape {shape!r}")
        return (tuple(shape), dtype_from_name(item["dtype"]))
    raise ValueError(f"bad input description {item!r}")


def key_from_json(obj: Any) -> Key:
    """Inverse of :func:`key_to_json`; ``ValueError`` (with the reason) if malformed."""
    if not isinstance(obj, dict):
        raise ValueError("entry is not a JSON object")
    api_key = obj.get("op")
    if not isinstance(api_key, str):
        raise ValueError("entry has no 'op' string")
    inputs = obj.get("inputs")
    if not isinstance(inputs, list):
        raise ValueError("entry has no 'inputs' list")
    parts = [_input_from_json(item) for item in inputs]
    device = obj.get("device")
    if device is not None and not isinstance(device, str):
        raise ValueError(f"bad device {device!r}")
    cc = obj.get("compute_capability")
    if cc is not None and (not isinstance(cc, int) or isinstance(cc, bool)):
        raise ValueError(f"bad compute_capability {cc!r}")
    return (api_key, tuple(parts), device, cc)


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
    """Whether a scalar of type ``tp`` at ``position`` enters the key as its value."""
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


# ---- the fingerprint: the environment a result was measured in --------------------------

Fingerprint = dict[str, Any]

FIELDS = ("flashinfer", "torch", "triton", "device", "compute_capability", "triton_interpret")
WILDCARD = "*"

# The JSON type each field holds (besides "*"); None: may also be null.
_TYPES: dict[str, tuple[type, ...]] = {
    "flashinfer": (str,),
    "torch": (str,),
    "triton": (str, type(None)),
    "device": (str, type(None)),
    "compute_capability": (int, type(None)),
    "triton_interpret": (bool,),
}

#: Distributions that install the ``triton`` module, in the order they are looked for.
_TRITON_DISTRIBUTIONS = ("triton", "pytorch-triton", "pytorch-triton-rocm", "pytorch-triton-xpu")


@functools.cache
def _triton_version() -> str | None:
    for name in _TRITON_DISTRIBUTIONS:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


@functools.cache
def _gpu_name(capability: int | None) -> str | None:
    """The name of this machine's first CUDA device of ``capability`` (None: there is none)."""
    if capability is None or not torch.cuda.is_available():
        return None
    for index in range(torch.cuda.device_count()):
        major, minor = torch.cuda.get_device_capability(index)
        if major * 10 + minor == capability:
            return torch.cuda.get_device_name(index)
    return None


def flashinfer_version() -> str:
    """``flashinfer.__version__`` (from ``_version``: the root would be an import cycle)."""
    return __version__


def process_fingerprint(key: Key) -> Fingerprint:
    """This process's fingerprint for results of ``key`` (stamped, and matched against)."""
    device_type, capability = key[2], key[3]
    device = _gpu_name(capability) if device_type == "cuda" else device_type
    return {
        "flashinfer": flashinfer_version(),
        "torch": torch.__version__,
        "triton": _triton_version(),
        "device": device,
        "compute_capability": capability,
        "triton_interpret": interpreter_enabled(),
    }


def schema1_fingerprint(header: dict[str, Any]) -> Fingerprint:
    """A schema-1 file's entries' fingerprint: its header's versions (the rest match all)."""
    recorded = {
        "flashinfer": header.get("flashinfer_version"),
        "torch": header.get("torch_version"),
    }
    return {name: value for name, value in recorded.items() if isinstance(value, str)}


def check_fingerprint(value: Any) -> Fingerprint:
    """An entry's ``fingerprint`` (absent: ``{}``); ``ValueError`` naming a bad field."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"'fingerprint' is not an object: {_shown(value)}")
    for name, types in _TYPES.items():
        field = value.get(name, WILDCARD)
        # bool is an int subclass: True is not a compute capability.
        if field != WILDCARD and (type(field) not in types):
            raise ValueError(f"fingerprint field {name!r} holds {_shown(field)}")
    return value


def differences(fingerprint: Fingerprint, here: Fingerprint) -> list[str]:
    """How ``fingerprint`` differs from ``here``: ``["torch '2.12.0' vs '2.13.0' here"]``."""
    return [
        f"{name} {_shown(fingerprint[name])} vs {_shown(here[name])} here"
        for name in FIELDS
        if fingerprint.get(name, WILDCARD) != WILDCARD and fingerprint[name] != here[name]
    ]


def specificity(fingerprint: Fingerprint) -> int:
    """How many fields ``fingerprint`` pins (neither ``"*"`` nor left out)."""
    return sum(fingerprint.get(name, WILDCARD) != WILDCARD for name in FIELDS)


def matches(value: Any, here: Fingerprint) -> bool:
    """Whether a file entry's ``fingerprint`` matches ``here`` (a malformed one: never)."""
    try:
        return not differences(check_fingerprint(value), here)
    except ValueError:
        return False


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
