"""Each thread's record of its last ``backend="auto"`` call, per op."""

from __future__ import annotations

import functools
import operator
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import overload


class _Record:
    """One thread's record for one op."""

    __slots__ = ("suitable", "dropped", "open")

    def __init__(self) -> None:
        self.suitable: list[str] = []
        self.dropped: tuple[str, ...] = ()
        self.open: list[str] | None = None


class CallState(threading.local):
    # Each thread gets its own _Record on first use.  The hot path reads the thread-local
    # once and writes the record's slots: storing into a thread-local costs more than
    # reading it and storing into a slot (benchmarks/bench_costs.py prints both).
    def __init__(self) -> None:
        self.r = _Record()

    def clear_dropped(self) -> None:
        r = self.r
        if r.dropped:
            r.dropped = ()


class LiveFlags:
    """Set once any thread has recorded dropped backends for an op."""

    __slots__ = ("dropped",)

    def __init__(self) -> None:
        self.dropped = False


class PerThreadList(Sequence[str]):
    """A read-only view of one field of the calling thread's record for an op.

    ``op.suitable_auto_backends`` and ``op.dropped_experimental_backends`` are these: the
    API is a plain function (the fastest thing to call), so its per-thread values are
    reached through an attribute that looks them up on every read.
    """

    __slots__ = ("current",)

    current: Callable[[], Sequence[str]]
    """This thread's current value itself (no copy): for hot paths such as the autotuner."""

    def __init__(self, state: CallState, field: str) -> None:
        # A C-level callable: reading the current value costs no Python frame.
        self.current = functools.partial(operator.attrgetter(f"r.{field}"), state)

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...

    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        return self.current()[index]

    def __len__(self) -> int:
        return len(self.current())

    def __iter__(self) -> Iterator[str]:
        return iter(self.current())

    def __contains__(self, value: object) -> bool:  # Sequence's default iterates in Python
        return value in self.current()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str):
            return list(self.current()) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(list(self.current()))
