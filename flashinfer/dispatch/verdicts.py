"""The verdict cache: what a call signature's checks decided, kept and reused."""

from __future__ import annotations

import enum
import threading
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple, TypeVar

import torch

from flashinfer.dispatch.guarded_state import advance_epoch
from flashinfer.kernels.availability import on_reset

C = TypeVar("C", bound=Callable[..., Any])

VERDICT_CACHE_CAP = 4096
"""Most signatures one op's cache holds: far above the few dozen a serving loop sees."""


class VerdictCacheInfo(NamedTuple):
    """What one op's verdict cache holds (``op.verdict_cache.info()``)."""

    size: int  # signatures cached now
    cap: int  # most it holds
    stored: int  # verdicts stored since the cache was made
    evicted: int  # stored verdicts forgotten to stay under the cap
    cleared: int  # times every verdict was forgotten (forget_verdicts, clear)


class VerdictCache:
    """One op's verdicts, by call signature.  Read by generated code (``memo.get``); written
    only on a miss, under a lock."""

    __slots__ = ("memo", "cap", "stored", "evicted", "cleared", "_lock", "__weakref__")

    def __init__(self, cap: int = VERDICT_CACHE_CAP) -> None:
        self.memo: dict[tuple, Any] = {}
        self.cap = cap
        self.stored = self.evicted = self.cleared = 0
        self._lock = threading.Lock()
        _caches.add(self)

    def put(self, key: tuple, verdict: Any) -> None:
        """Keep ``verdict`` for ``key``, forgetting the oldest signatures past the cap."""
        with self._lock:
            memo = self.memo
            if key in memo:
                return
            while memo and len(memo) >= self.cap:
                del memo[next(iter(memo))]
                self.evicted += 1
            if self.cap > 0:
                memo[key] = verdict
                self.stored += 1

    def clear(self) -> None:
        """Forget every verdict (each signature is checked again on its next call)."""
        with self._lock:
            self.memo.clear()
            self.cleared += 1

    def info(self) -> VerdictCacheInfo:
        return VerdictCacheInfo(len(self.memo), self.cap, self.stored, self.evicted, self.cleared)

    def __len__(self) -> int:
        return len(self.memo)

    def __repr__(self) -> str:
        return f"<VerdictCache {len(self.memo)} of {self.cap} signatures>"


_caches: weakref.WeakSet[VerdictCache] = weakref.WeakSet()


def forget_verdicts() -> None:
    """Clear every op's verdict cache: for a change of state the signature does not hold
    (e.g. a package installed after Triton's probe said it was missing)."""
    for cache in list(_caches):
        cache.clear()
    advance_epoch()  # and every compiled choice is made again (guarded_state)


on_reset(forget_verdicts)


# ---- what a check declares it reads ---------------------------------------------------


def reads_environment(*names: str) -> Callable[[C], C]:
    """Declare the environment variables a check reads (a support checker, common check,
    heuristic or preference): their raw values become part of every cached verdict's
    signature, so changing one at run time takes effect on the next call.  Returns the
    check itself; stacks (the names add up).  ``TypeError`` for a name that is not a
    non-empty ``str``."""
    for name in names:
        if not isinstance(name, str) or not name:
            raise TypeError(
                f"reads_environment: variable names must be non-empty strings, got {name!r}"
            )

    def mark(check: C) -> C:
        before = getattr(check, "_reads_environment", ())
        check._reads_environment = tuple(dict.fromkeys((*before, *names)))  # type: ignore[attr-defined]
        return check

    return mark


def reads_tensor_data(check: C, /) -> C:
    """Mark a check (support checker, common check, heuristic or preference) that reads
    more than the call's signature: tensor values, a data pointer, global state.  Its op's
    ``"auto"`` verdicts are never cached: every call runs the checks.  Returns the check
    itself."""
    check._reads_tensor_data = True  # type: ignore[attr-defined]
    return check


def reads_tensor_data_marked(check: Any) -> bool:
    """Whether ``check`` is marked :func:`reads_tensor_data`."""
    return getattr(check, "_reads_tensor_data", False) is True


def declared_environment(checks: Iterable[Any]) -> tuple[str, ...]:
    """The environment variables ``checks`` declare they read, each once, in order."""
    names: dict[str, None] = {}
    for check in checks:
        for name in getattr(check, "_reads_environment", ()):
            names[name] = None
    return tuple(names)


# ---- the signature: what a verdict is keyed on -----------------------------------------

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
    """The test that the arguments bound to ``names`` have exactly the types of ``pattern``, and the
    expressions of the signature's items, for generated code."""
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
