"""One log line per automatic choice: which backend ``backend="auto"`` used, and how."""

from __future__ import annotations

import logging
import sys
import threading
import weakref
from collections.abc import Sequence
from typing import Any, Protocol

from flashinfer import settings
from flashinfer.dispatch.restrictions import restriction_source


# What the dispatcher may ask the autotuner, without importing it.
class TunerView(Protocol):
    """The questions the dispatcher asks the process's tuner."""

    def registered(self, api_key: str) -> bool:
        """Whether the op is registered with the tuner (its ``"auto"`` calls are tuned)."""
        ...

    def tuning_now(self) -> bool:
        """Whether this thread is inside an ``autotune()`` block that times new keys."""
        ...

    def tuned_choice(self, api_key: str, inputs: tuple) -> tuple[str, Any, str] | None:
        """``(backend, tactic, where it comes from)`` of the tuned result, or None."""
        ...


_view: TunerView | None = None


def install_tuner_view(view: TunerView | None) -> None:
    """Called by :mod:`flashinfer.autotuner` on import (None removes it, for tests)."""
    global _view
    _view = view


def tuner_view() -> TunerView | None:
    """The installed view, or None when the program never imported the autotuner."""
    return _view


DISPATCH_LOG_ENV = "FLASHINFER_DISPATCH_LOG"
LOGGER = logging.getLogger("flashinfer.dispatch")


class _Switch:
    __slots__ = ("armed", "generation")

    def __init__(self) -> None:
        self.armed = True  # not known yet: the first choice asks the logger
        self.generation = 0  # level changes seen


LOG_SWITCH = _Switch()


class _LevelWatch(dict):  # type: ignore[type-arg]
    """The logger's cache of ``isEnabledFor`` answers, which logging clears (under its
    lock) whenever a level changes: clearing it arms :data:`LOG_SWITCH`."""

    def clear(self) -> None:
        super().clear()
        LOG_SWITCH.generation += 1
        LOG_SWITCH.armed = True


def _watch_levels() -> bool:
    cache = getattr(LOGGER, "_cache", None)
    if type(cache) is not dict:  # not CPython's logging: never disarm (always ask)
        return False
    LOGGER._cache = _LevelWatch(cache)  # type: ignore[attr-defined]
    return True


_watching = _watch_levels()


def read_switch() -> bool:
    """``FLASHINFER_DISPATCH_LOG`` as this module reads it once, at import."""
    return bool(settings.read(DISPATCH_LOG_ENV))


_to_stderr = read_switch()


_SLOTS = ("auto", "restricted", "tuned", "tuner_auto", "tuner_restricted")


class OpLog:
    """One op's log state."""

    __slots__ = ("api_key", "name", *_SLOTS, "__weakref__")

    def __init__(self, api_key: str, module: str, api_name: str) -> None:
        self.api_key = api_key
        inside = module == "flashinfer" or module.startswith("flashinfer.")
        self.name = f"flashinfer.{api_name}" if inside else api_key
        self.auto: str | None = None
        self.restricted: str | None = None
        self.tuned: str | None = None
        self.tuner_auto: str | None = None
        self.tuner_restricted: str | None = None
        _op_logs.add(self)


_lock = threading.Lock()
_logged: set[tuple[str, str, str]] = set()
_op_logs: weakref.WeakSet[OpLog] = weakref.WeakSet()


def _enabled() -> bool:
    """Whether a line would be shown."""
    if _to_stderr:
        return True
    generation = LOG_SWITCH.generation
    if LOGGER.isEnabledFor(logging.INFO):
        return True
    if _watching:
        LOG_SWITCH.armed = False
        if LOG_SWITCH.generation != generation:
            LOG_SWITCH.armed = True
    return False


def note_choice(
    log: OpLog,
    slot: str,
    backend: str,
    how: str,
    candidates: Sequence[str],
    dropped: Sequence[str] = (),
    detail: str | None = None,
) -> None:
    """Log that ``backend`` was chosen ``how`` (``"auto"``, ``"restricted"`` or ``"tuned"``), once
    per (op, backend, how)."""
    if not _enabled():
        return
    key = (log.api_key, backend, how)
    with _lock:
        first = key not in _logged
        _logged.add(key)
    setattr(log, slot, backend)
    if not first:
        return
    line = f"{log.name}: using backend {backend!r} ({detail or how}; candidates {list(candidates)}"
    if dropped:
        line += f"; experimental left out: {list(dropped)}"
    line += ")"
    LOGGER.info(line)
    if _to_stderr:
        print(f"[flashinfer.dispatch] {line}", file=sys.stderr, flush=True)


def _tuner_decides(api_key: str) -> bool:
    """Whether the autotuner runs this op's ``"auto"`` calls from its body (registered without
    ``direct=True``)."""
    view = tuner_view()
    return view is not None and view.registered(api_key)


def note_auto(log: OpLog, candidates: Sequence[str], dropped: Sequence[str]) -> None:
    """The dispatcher's line for an unrestricted ``"auto"`` call that runs the API body."""
    if _tuner_decides(log.api_key):
        log.auto = candidates[0]  # the tuner's line says what runs
        return
    note_choice(log, "auto", candidates[0], "auto", candidates, dropped)


def note_restricted(log: OpLog, candidates: Sequence[str]) -> None:
    """The dispatcher's line for a restricted ``"auto"`` call that runs the API body."""
    if _tuner_decides(log.api_key):
        log.restricted = candidates[0]
        return
    source = restriction_source(log.api_key) or "use_backends"
    note_choice(
        log, "restricted", candidates[0], "restricted", candidates, (), f"restricted by {source}"
    )


def note_tuner_choice(
    log: OpLog,
    backend: str,
    candidates: Sequence[str],
    dropped: Sequence[str],
    restricted: bool,
    tuned: str | None,
) -> None:
    """The line of a backend the autotuner runs for an ``"auto"`` call."""
    if tuned is not None:
        where = restriction_source(log.api_key) if restricted else None
        detail = f"{tuned}; restricted by {where}" if where else tuned
        note_choice(log, "tuned", backend, "tuned", candidates, dropped, detail)
    elif restricted:
        source = restriction_source(log.api_key) or "use_backends"
        detail = f"restricted by {source}"
        note_choice(log, "tuner_restricted", backend, "restricted", candidates, (), detail)
    else:
        note_choice(log, "tuner_auto", backend, "auto", candidates, dropped)


def forget_logged_choices() -> None:
    """Let every choice be logged again (for tests)."""
    with _lock:
        _logged.clear()
    for log in list(_op_logs):
        for slot in _SLOTS:
            setattr(log, slot, None)
    LOG_SWITCH.armed = True
