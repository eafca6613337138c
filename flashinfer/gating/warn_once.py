"""Once-only ExperimentalWarnings: a flag per experimental API and per (API, backend) pair,
and the one path that issues them (:func:`issue_experimental_warning`).  A use either warns
or comes after a use that did: a use arriving while the warning is issued waits for it."""

from __future__ import annotations

import threading
import types
import warnings
from collections.abc import Callable
from typing import Any, cast

from flashinfer.gating.exposed import exposed_in
from flashinfer.gating.messages import automatic_selection, explicit_selection
from flashinfer.settings import forget_unrecognised_values, read
from flashinfer.settings.stacklevel import user_stacklevel

EXPERIMENTAL_WARNINGS_ENV = "FLASHINFER_EXPERIMENTAL_WARNINGS"


# Its public home: filters and pickles name it flashinfer.api_logging.ExperimentalWarning.
@exposed_in("flashinfer.api_logging")
class ExperimentalWarning(UserWarning):
    """Emitted once when an experimental API or backend is first used; its message starts
    with "Experimental".  Filter it with ``warnings.filterwarnings("ignore",
    category=flashinfer.ExperimentalWarning)`` or, from the command line,
    ``FLASHINFER_EXPERIMENTAL_WARNINGS=error`` (``-W`` cannot name it: Python resolves the
    category before this package loads).  Escalated to an error, it refuses every use.
    """


# Guards the flag tables; held only briefly, never across a warning.
_lock = threading.Lock()
# Held across the issuing of a warning, so that a call arriving meanwhile waits for it.
# Re-entrant: a warning's display (a user's showwarning) may call experimental code again.
_issue_lock = threading.RLock()


class OnceFlag:
    """The hot path reads ``warned`` (no lock); True only once the warning was issued."""

    __slots__ = ("warned", "issuing")

    def __init__(self) -> None:
        self.warned = False
        self.issuing = False


_once_flags: list[OnceFlag] = []
_backend_flags: dict[tuple[str, str], OnceFlag] = {}
# The (API, backend) pairs that have warned: upstream's ``_WARNED_EXPERIMENTAL_BACKENDS``.
_warned_backends: set[tuple[str, str]] = set()

# The message pattern of the filter put first under FLASHINFER_EXPERIMENTAL_WARNINGS: a
# regular-expression comment (matches anything) that tells our filter apart from a user's.
LIBRARY_FILTER_MESSAGE = f"(?#put first by flashinfer for {EXPERIMENTAL_WARNINGS_ENV})"


def is_library_filter(entry: object) -> bool:
    return (
        isinstance(entry, tuple)
        and len(entry) == 5
        and entry[2] is ExperimentalWarning
        and getattr(entry[1], "pattern", None) == LIBRARY_FILTER_MESSAGE
    )


def _remove_library_filters() -> None:
    # One can stay behind when another thread's catch_warnings saved the list meanwhile.
    filters = cast("list[Any]", warnings.filters)
    ours = [entry for entry in filters if is_library_filter(entry)]
    for entry in ours:
        try:
            filters.remove(entry)
        except ValueError:  # removed meanwhile (another list, swapped in by catch_warnings)
            pass
    # What filterwarnings() does after a change (forget what was shown under the old list);
    # warnings has no public call for a removal.
    changed = getattr(warnings, "_filters_mutated", None) or getattr(
        warnings, "_filters_mutated_lock_held", None
    )
    if ours and changed is not None:
        changed()


def issue_experimental_warning(flag: OnceFlag, message: str | Callable[[], str]) -> bool:
    """Issue ``flag``'s warning unless issued (True if this call did); escalated to an error
    the flag stays unset, so the next use raises too."""
    with _issue_lock:
        if flag.warned or flag.issuing:
            return False
        flag.issuing = True
        try:
            _remove_library_filters()  # left behind by a catch_warnings race: not current
            text = message if isinstance(message, str) else message()
            action = read(EXPERIMENTAL_WARNINGS_ENV)
            if action is not None:
                warnings.filterwarnings(
                    action, message=LIBRARY_FILTER_MESSAGE, category=ExperimentalWarning
                )
            try:
                warnings.warn(text, ExperimentalWarning, stacklevel=user_stacklevel())
            finally:
                if action is not None:
                    _remove_library_filters()
            flag.warned = True
        finally:
            flag.issuing = False
    return True


def new_once_flag() -> OnceFlag:
    flag = OnceFlag()
    with _lock:
        _once_flags.append(flag)
    return flag


def backend_warning_flag(api: str, backend: str) -> OnceFlag:
    flag = _backend_flags.get((api, backend))
    if flag is None:
        with _lock:
            flag = _backend_flags.get((api, backend))
            if flag is None:
                flag = _backend_flags[(api, backend)] = OnceFlag()
                _once_flags.append(flag)
    return flag


def warn_backend_once(api: str, backend: str, message: Callable[..., str], *args: Any) -> None:
    """Warn ``message(*args)`` once per (API, backend) pair, and record the pair."""
    flag = backend_warning_flag(api, backend)
    if flag.warned:
        return
    with _issue_lock:  # the record and the flag change together
        if issue_experimental_warning(flag, lambda: message(*args)):
            _warned_backends.add((api, backend))


def warn_experimental_backend_once(api: str, backend: str, *, automatic: bool = False) -> None:
    """Warn once per process for each (API, backend) pair that an experimental backend runs.

    ``api``: the API's qualified or plain name.  ``automatic=True`` words the warning for a
    backend picked by ``backend="auto"`` or the autotuner; otherwise it says it was named.
    """
    message = automatic_selection if automatic else explicit_selection
    warn_backend_once(api, backend, message, api, backend)


def reset_experimental_warnings() -> None:
    """Forget every "already warned" record (each warning fires again once), and any filter
    installed for ``FLASHINFER_EXPERIMENTAL_WARNINGS``: for test suites."""
    forget_unrecognised_values()
    with _issue_lock:  # waits for a warning being issued: its flag is then forgotten too
        _remove_library_filters()
        with _lock:
            _warned_backends.clear()
            for flag in _once_flags:
                flag.warned = False


class WarnedRecordModule(types.ModuleType):
    """The type of ``flashinfer.api_logging``: upstream's ``_WARNED_EXPERIMENTAL_BACKENDS``
    reads the live record, and assigning a set makes exactly its pairs count as warned, down
    to the hot path's flags (PEP 562's ``__getattr__`` cannot see an assignment)."""

    @property
    def _WARNED_EXPERIMENTAL_BACKENDS(self) -> set[tuple[str, str]]:
        return _warned_backends

    @_WARNED_EXPERIMENTAL_BACKENDS.setter
    def _WARNED_EXPERIMENTAL_BACKENDS(self, record: set[tuple[str, str]]) -> None:
        global _warned_backends
        with _issue_lock:  # not in the middle of a warning being issued
            _warned_backends = record
            for flag in list(_backend_flags.values()):
                flag.warned = False
            for api, backend in record:
                backend_warning_flag(api, backend).warned = True
