"""Tuning keys: what two calls must share to share a tuned choice.

A key is a plain tuple, cheap to build and to hash (it is computed on every ``"auto"`` call
of a tunable op, tuned or not)::

    (api_key, inputs, device_type, compute_capability)

* ``api_key``: the op's qualified name (``BackendRequirementOp.api_key``), e.g.
  ``"flashinfer.gemm.mm"``.
* ``inputs``: one item per element of the ``inputs`` tuple handed to the tuner, in order:

  - a tensor contributes ``(bucketed_shape, dtype)``.  Each dimension ``d`` is rounded
    **up to the next power of two** (``0 -> 0``, ``1 -> 1``, ``3 -> 4``, ``4096 -> 4096``,
    ``4097 -> 8192``), so shapes that differ a little share one tuned result, and the number
    of keys stays logarithmic in the sizes seen;
  - ``None`` contributes ``None`` (e.g. an absent ``out=``), and a ``torch.dtype`` itself
    (e.g. ``out_dtype=``);
  - anything else (``eps``, flags) contributes ``...``: scalars do not change which
    kernel is fastest, and leaving their values out keeps the key small and hashable.

* ``device_type``: ``"cpu"`` or ``"cuda"`` (of the first tensor; ``None`` without tensors).
  The device *index* is left out: the capability below identifies the hardware.
* ``compute_capability``: ``major * 10 + minor`` of the first CUDA tensor, ``None`` on CPU.

Runners must keep every tactic they return from ``tactics(inputs)`` valid for all inputs
of the same key (Triton kernels mask their edges, so block sizes are), because a tuned
tactic is reused across the shapes of its bucket.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from .._codegen import compile_function
from ..backend_dispatch import device_capability
from ..backend_families import dtype_name
from ..kernels import next_positive_power_of_2

__all__ = [
    "Key",
    "exact_signature",
    "pattern_reads",
    "bucket_dim",
    "bucket_shape",
    "dtype_from_name",
    "dtype_name",
    "key_from_json",
    "key_to_json",
    "make_key",
]

Key = tuple  # (api_key, inputs, device_type, compute_capability)

_Tensor = torch.Tensor
_dtype = torch.dtype

# Bucketed shape per exact shape (``torch.Size`` hashes like a tuple), filled on first
# sight: one dict lookup instead of a Python loop over the dimensions on every call.  Real
# programs see few distinct shapes; past the cap new shapes are computed, not remembered.
_SHAPE_BUCKETS: dict[tuple[int, ...], tuple[int, ...]] = {}

# Most entries any of the autotuner's memos holds: bounds memory when a program streams
# ever new shapes, far above the few a real program sees.
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


# Types that are certainly not tensors: ``isinstance(x, torch.Tensor)`` goes through
# torch's metaclass and costs ~0.5 us when the answer is no, so these are sorted out first.
_NOT_TENSOR = frozenset({type(None), bool, int, float, str, torch.dtype, torch.device})


# Tuning key per exact call signature: (api_key, then per input its shape and dtype, None,
# a dtype or ..., then the first tensor's device).  Hashing that flat tuple is cheaper than
# bucketing each shape and nesting tuples on every call; the memo is a pure function of
# shapes, dtypes and device (never of tensor values), so it can never go stale.
_KEY_MEMO: dict[tuple, Key] = {}


def _generic_signature(api_key: str, inputs: tuple) -> tuple[tuple, tuple[type, ...]]:
    """The exact signature, and the pattern of input types it was read with."""
    signature: list[Any] = [api_key]
    pattern: list[type] = []
    first = None
    for x in inputs:
        tp = type(x)
        pattern.append(tp)
        if tp is _Tensor or (tp not in _NOT_TENSOR and isinstance(x, _Tensor)):
            signature += (x.shape, x.dtype)
            if first is None:
                first = x
        elif x is None or tp is _dtype:
            signature.append(x)
        else:
            signature.append(...)
    if first is not None:
        signature.append(first.device)
    return tuple(signature), tuple(pattern)


def pattern_reads(
    pattern: tuple[type, ...], names: list[str], ns: dict[str, Any], tag: str
) -> tuple[str, list[str]]:
    """Source for reading the exact signature of inputs bound to ``names`` in generated
    code: the test that their types are exactly ``pattern``, and the expressions of the
    signature's items after ``api_key`` (see :func:`exact_signature`), unrolled.  The
    pattern's types are stored in ``ns`` as ``_<tag><n>``, and ``type`` itself as ``_type``:
    a name in ``names`` (an API parameter) may be ``type``."""
    ns["_type"] = type
    tests, parts, first = [], [], None
    for n, (name, tp) in enumerate(zip(names, pattern, strict=True)):
        ns[f"_{tag}{n}"] = tp
        tests.append(f"_type({name}) is _{tag}{n}")
        if issubclass(tp, _Tensor):
            parts += [f"{name}.shape", f"{name}.dtype"]
            first = first or name
        elif tp is type(None) or tp is _dtype:
            parts.append(name)
        else:
            parts.append("...")
    if first is not None:
        parts.append(f"{first}.device")
    return " and ".join(tests) or "True", parts


def _reader_for(api_key: str, pattern: tuple[type, ...]) -> Callable[[str, tuple], tuple | None]:
    """A function that reads the exact signature of ``api_key``'s inputs of exactly this
    type pattern, unrolled (no loop, no per-input type dispatch), or returns None for
    another pattern."""
    names = [f"i{n}" for n in range(len(pattern))]
    namespace: dict[str, Any] = {}
    test, parts = pattern_reads(pattern, names, namespace, "t")
    unpack = [f"    {', '.join(names)}, = inputs"] if names else []
    body = [
        f"    if len(inputs) == {len(pattern)}:",
        *(f"    {line}" for line in unpack),
        f"        if {test}:",
        f"            return ({', '.join(['api_key', *parts])},)",
        "    return None",
    ]
    return compile_function("api_key, inputs", body, namespace, role="key reader", api=api_key)


# Per op, the readers of the input-type patterns seen so far (usually one or two).
_READERS: dict[str, list[Callable[[str, tuple], tuple | None]]] = {}
_MAX_READERS = 8


def exact_signature(api_key: str, inputs: tuple) -> tuple:
    """A flat tuple of what the key depends on, unbucketed: cheap to build and to hash.

    ``api_key``, then per input its shape and dtype (tensors), itself (``None`` or a
    dtype) or ``...`` (any other value), then the first tensor's device.  Tensor attribute
    reads are most of the cost of a tuned call, so each is read once, by a reader
    generated for the call's pattern of input types (a loop with per-input type tests cost
    about twice as much here).
    """
    readers = _READERS.get(api_key)
    if readers is not None:
        for read in readers:
            signature = read(api_key, inputs)
            if signature is not None:
                return signature
    signature, pattern = _generic_signature(api_key, inputs)
    readers = _READERS.setdefault(api_key, [])
    if len(readers) < _MAX_READERS:
        readers.append(_reader_for(api_key, pattern))
    return signature


def make_key(api_key: str, inputs: tuple) -> Key:
    """The tuning key of one call (see the module docstring).

    Memoised from :func:`exact_signature`, a pure function of shapes, dtypes and device
    (never of tensor values), so a memo entry can never go stale.
    """
    exact = exact_signature(api_key, inputs)
    key = _KEY_MEMO.get(exact)
    if key is None:
        key = _key_from_signature(exact)
        if len(_KEY_MEMO) < MEMO_CAP:
            _KEY_MEMO[exact] = key
    return key


def _key_from_signature(signature: tuple) -> Key:
    """The tuning key of an exact signature (see :func:`exact_signature`), which holds all
    it needs: a ``torch.Size`` starts a tensor's (shape, dtype) pair, since no other input
    contributes one, and a trailing ``torch.device`` is the first tensor's.  Deriving the
    key from the signature, rather than reading the inputs again, keeps one classification
    of inputs for both."""
    api_key, items = signature[0], signature[1:]
    device = None
    if items and type(items[-1]) is torch.device:
        items, device = items[:-1], items[-1]
    parts: list[Any] = []
    i = 0
    while i < len(items):
        item = items[i]
        if type(item) is torch.Size:
            parts.append((bucket_shape(item), items[i + 1]))
            i += 2
        else:
            parts.append(item)
            i += 1
    if device is None:
        return (api_key, tuple(parts), None, None)
    if device.type == "cuda":
        return (api_key, tuple(parts), "cuda", device_capability(device.index))
    return (api_key, tuple(parts), device.type, None)


# --------------------------------------------------------------------------------------
# JSON form of a key (the persisted cache)
# --------------------------------------------------------------------------------------


def dtype_from_name(name: str) -> torch.dtype:
    """``"float16"`` -> ``torch.float16``; ``ValueError`` for anything else."""
    # vars(), not getattr(): a name from a file must never reach torch's lazy
    # module __getattr__, which imports submodules (side effects, slow, may raise).
    value = vars(torch).get(name) if isinstance(name, str) else None
    if not isinstance(value, torch.dtype):
        raise ValueError(f"unknown dtype {name!r}")
    return value


def key_to_json(key: Key) -> dict[str, Any]:
    """A human-readable JSON object for ``key``."""
    api_key, parts, device, cc = key
    inputs: list[Any] = []
    for p in parts:
        if p is None:
            inputs.append(None)
        elif p is ...:
            inputs.append("scalar")
        elif isinstance(p, torch.dtype):
            inputs.append({"dtype": dtype_name(p)})
        else:
            shape, dtype = p
            inputs.append({"shape": list(shape), "dtype": dtype_name(dtype)})
    return {"op": api_key, "inputs": inputs, "device": device, "compute_capability": cc}


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
    parts: list[Any] = []
    for item in inputs:
        if item is None:
            parts.append(None)
        elif item == "scalar":
            parts.append(...)
        elif isinstance(item, dict) and set(item) == {"dtype"}:
            parts.append(dtype_from_name(item["dtype"]))
        elif isinstance(item, dict) and set(item) == {"shape", "dtype"}:
            shape = item["shape"]
            if not isinstance(shape, list) or not all(
                isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
            ):
                raise ValueError(f"bad shape {shape!r}")
            parts.append((tuple(shape), dtype_from_name(item["dtype"])))
        else:
            raise ValueError(f"bad input description {item!r}")
    device = obj.get("device")
    if device is not None and not isinstance(device, str):
        raise ValueError(f"bad device {device!r}")
    cc = obj.get("compute_capability")
    if cc is not None and (not isinstance(cc, int) or isinstance(cc, bool)):
        raise ValueError(f"bad compute_capability {cc!r}")
    return (api_key, tuple(parts), device, cc)
