"""Once-only ExperimentalWarnings: the warn-once flags and the one path that issues them.

Each experimental API and each (API, backend) pair has a flag; its first use issues an
:class:`ExperimentalWarning` through :func:`issue_experimental_warning`, which also applies
``FLASHINFER_EXPERIMENTAL_WARNINGS``.  Whatever the threads do, a use either warns or comes
after a use that did: the flag is set only once the warning was issued, and a use arriving
while it is being issued waits for it.  Public names are re-exported by
``flashinfer.api_logging``.
"""

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
    """Emitted once when an experimental API or backend is first used.

    A ``UserWarning`` subclass, so it is shown by default and can be filtered on its own::

        warnings.filterwarnings("ignore", category=flashinfer.ExperimentalWarning)

    From the command line, ``FLASHINFER_EXPERIMENTAL_WARNINGS=error`` (or ``ignore``,
    ``default``, ...) does the same; ``python -W error::flashinfer...`` cannot, because
    Python resolves a category named there before it can import this package.  Escalated to
    an error, it refuses every use, not only the first.  Its message starts with
    "Experimental".
    """


# Guards the flag tables; held only briefly, never across a warning.
_lock = threading.Lock()
# Held across the issuing of a warning, so that a call arriving meanwhile waits for it.
# Re-entrant: a warning's display (a user's showwarning) may call experimental code again.
_issue_lock = threading.RLock()


class OnceFlag:
    """A "warn once" flag: the hot path reads ``warned``, no lock and no key lookup.  It
    becomes True only after the warning was issued; ``issuing`` is True meanwhile."""

    __slots__ = ("warned", "issuing")

    def __init__(self) -> None:
        self.warned = False
        self.issuing = False


_once_flags: list[OnceFlag] = []
_backend_flags: dict[tuple[str, str], OnceFlag] = {}
# The (API, backend) pairs that have warned: upstream's ``_WARNED_EXPERIMENTAL_BACKENDS``.
_warned_backends: set[tuple[str, str]] = set()

# The filter put first while a warning is issued under FLASHINFER_EXPERIMENTAL_WARNINGS carries
# this message pattern: a regular-expression comment, which matches every message and tells
# the filter apart from any a user installs, so that only the library's own are removed.
LIBRARY_FILTER_MESSAGE = f"(?#put first by flashinfer for {EXPERIMENTAL_WARNINGS_ENV})"


def is_library_filter(entry: object) -> bool:
    """Whether ``entry`` (an item of ``warnings.filters``) is one this module installed."""
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
    """Issue the ExperimentalWarning of ``flag`` unless it has been issued (True if this
    call did), under one lock; ``flag.warned`` is set only once it was issued, so escalated
    to an error it refuses the next use too.  ``FLASHINFER_EXPERIMENTAL_WARNINGS=<action>``
    puts ``<action>`` first among the filters while it is issued."""
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
    """A fresh once-flag, forgotten by :func:`reset_experimental_warnings` like the rest."""
    flag = OnceFlag()
    with _lock:
        _once_flags.append(flag)
    return flag


def backend_warning_flag(api: str, backend: str) -> OnceFlag:
    """The shared once-flag of an (API, backend) pair; the dispatcher keeps it at hand."""
    flag = _backend_flags.get((api, backend))
    if flag is None:
        with _lock:
            flag = _backend_flags.get((api, backend))
            if flag is None:
                flag = _backend_flags[(api, backend)] = OnceFlag()
                _once_flags.append(flag)
    return flag


def warn_backend_once(api: str, backend: str, message: Callable[..., str], *args: Any) -> None:
    """Issue the ExperimentalWarning ``message(*args)`` of an (API, backend) pair, once per
    process whichever way the backend was opted in to, and record the pair."""
    flag = backend_warning_flag(api, backend)
    if flag.warned:
        return
    with _issue_lock:  # the record and the flag change together
        if issue_experimental_warning(flag, lambda: message(*args)):
            _warned_backends.add((api, backend))


def warn_experimental_backend_once(api: str, backend: str, *, automatic: bool = False) -> None:
    """Warn once per process for each (API, backend) pair that an experimental backend runs.

    ``api`` is the API's qualified name (``"flashinfer.gemm.mm"``) or its plain name; the
    message names the plain one (``'mm'``).  ``automatic=True`` words the warning for a
    backend picked by ``backend="auto"`` or the autotuner (``messages.automatic_selection``);
    otherwise it says the backend was named (``messages.explicit_selection``).
    """
    message = automatic_selection if automatic else explicit_selection
    warn_backend_once(api, backend, message, api, backend)


def reset_experimental_warnings() -> None:
    """Forget every "already warned" record, so each warning fires again once, and take
    out any filter the library installed for ``FLASHINFER_EXPERIMENTAL_WARNINGS``.  For test
    suites (ours and our users'): makes warning tests independent of order."""
    forget_unrecognised_values()
    with _issue_lock:  # waits for a warning being issued: its flag is then forgotten too
        _remove_library_filters()
        with _lock:
            _warned_backends.clear()
            for flag in _once_flags:
                flag.warned = False


class WarnedRecordModule(types.ModuleType):
    """The type of ``flashinfer.api_logging``, for upstream's ``_WARNED_EXPERIMENTAL_BACKENDS``
    (the set of (API, backend) pairs that have warned).  Reading it gives the live record;
    assigning a set (as upstream's tests do to forget warnings) makes exactly its pairs count
    as warned, down to the flags the dispatcher's hot path reads: a module ``__getattr__``
    (PEP 562) cannot see an assignment, and plain attributes would leave those flags stale."""

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
