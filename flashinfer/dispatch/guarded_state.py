"""State a compiled choice reads that Dynamo cannot see, held where its guards can.

A transparent compiled call (:mod:`.transparent`) makes its choice while tracing.  Dynamo
guards what the traced code reads of Python objects, but not ``os.environ`` (its reads
are baked in) nor state inside flashinfer's own caches.  So the traced code reads them
here, and each read becomes a guard (one C++ dict-item or attribute check, no Python):

- ``GUARDED.environment[name]``: the raw value of each variable a choice reads (the
  experimental gate, every variable a check declares with ``reads_environment``), kept
  equal to ``os.environ`` by an audit hook on ``os.putenv``/``os.unsetenv``, which every
  write through ``os.environ`` (``monkeypatch.setenv``, ``mock.patch.dict``) raises;
- ``GUARDED.epoch``: advanced by ``forget_verdicts()``, for state no signature holds.

A change fails the guard, so the next compiled call traces again and decides as an eager
call would.  The hook is installed on the first watched variable, i.e. when a compiled
call first makes a choice that reads one; it cannot be removed (Python's audit hooks
never are) and costs one dict lookup per audited event.  A write that bypasses
``os.environ`` (C code's ``setenv``) is not seen, by eager calls either.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterable
from typing import Any

__all__ = ["GUARDED", "GuardedState", "advance_epoch", "watch_environment"]


class GuardedState:
    """The values compiled choices are guarded on (see the module doc)."""

    def __init__(self) -> None:
        self.environment: dict[str, str | None] = {}
        self.epoch = 0


GUARDED = GuardedState()
_lock = threading.Lock()
_hooked = False


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


def watch_environment(names: Iterable[str]) -> None:
    """Keep ``GUARDED.environment[name]`` equal to the variable's value, for each name."""
    global _hooked
    with _lock:
        for name in names:
            if name not in GUARDED.environment:
                GUARDED.environment[name] = os.environ.get(name)
        if not _hooked:
            sys.addaudithook(_audit)
            _hooked = True


def advance_epoch() -> None:
    """Fail every compiled choice's epoch guard (``forget_verdicts``)."""
    GUARDED.epoch += 1
