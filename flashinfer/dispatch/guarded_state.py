"""State a compiled choice reads that Dynamo cannot see, held where its guards can.

The traced code reads ``GUARDED.environment[name]`` (each variable a choice reads, kept equal
to ``os.environ`` by an audit hook on ``os.putenv``/``os.unsetenv``) and ``GUARDED.epoch``
(advanced by ``forget_verdicts()``), each read one guard: a change re-traces.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterable
from typing import Any

from flashinfer import settings


class GuardedState:
    """The values compiled choices are guarded on."""

    def __init__(self) -> None:
        self.environment: dict[str, str | None] = {}
        self.epoch = 0


GUARDED = GuardedState()
_lock = threading.Lock()
_hooked = False
_expected: set[str] = set()  # every variable some op's compiled choice reads


def _decode(value: Any) -> str:
    return os.fsdecode(value) if isinstance(value, bytes) else str(value)


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event == "os.putenv":
        name = _decode(args[0])
        if name in GUARDED.environment:
            GUARDED.environment[name] = _decode(args[1])
    elif event == "os.unsetenv":
        name = _decode(args[0])
        if name in GUARDED.environment:
            GUARDED.environment[name] = None


def expect_environment(names: Iterable[str]) -> None:
    """Variables an op's compiled choice will read: the first watch keeps them all (Dynamo
    snapshots ``GUARDED.environment`` at its first read in a trace)."""
    with _lock:
        _expected.update(names)


def watch_environment(names: Iterable[str]) -> None:
    """Keep ``GUARDED.environment`` equal to ``os.environ`` for ``names`` and the expected."""
    global _hooked
    with _lock:
        _expected.update(names)
        for name in _expected:
            if name not in GUARDED.environment:
                GUARDED.environment[name] = settings.raw(name)
        if not _hooked:
            sys.addaudithook(_audit)
            _hooked = True


def advance_epoch() -> None:
    """Fail every compiled choice's epoch guard (``forget_verdicts``)."""
    GUARDED.epoch += 1
