"""Once-only ExperimentalWarnings: the warn-once flags and the one path that issues them.

Each experimental API and each (API, backend) pair has a :class:`OnceFlag`; its first use
issues an :class:`ExperimentalWarning` through :func:`issue_experimental_warning`, which
also applies ``FLASHINFER_EXPERIMENTAL_WARNINGS``.  Whatever the threads do, a use either
warns or comes after a use that did: the flag is set only once the warning was issued, and
a use arriving while it is being issued waits for it.  Public names are re-exported by
``flashinfer.api_logging``.
"""

from __future__ import annotations

import os
import threading
import types
import warnings
from collections.abc import Callable
from typing import Any, Literal, cast, get_args

from flashinfer.gating.exposed import exposed_in
from flashinfer.gating.gate import forget_unrecognised_values, warn_unrecognised_once
from flashinfer.gating.messages import automatic_selection, explicit_selection
from flashinfer.gating.stacklevel import user_stacklevel

__all__ = [
    "EXPERIMENTAL_WARNINGS_ENV",
    "ExperimentalWarning",
    "LIBRARY_FILTER_MESSAGE",
    "OnceFlag",
    "WarnedRecordModule",
    "adopt_backend_warning_record",
    "backend_warning_flag",
    "is_library_filter",
    "issue_experimental_warning",
    "new_once_flag",
    "remove_library_filters",
    "reset_experimental_warnings",
    "warn_backend_once",
    "warn_experimental_backend_once",
    "warned_backend_record",
]

EXPERIMENTAL_WARNINGS_ENV = "FLASHINFER_EXPERIMENTAL_WARNINGS"
# Python's warning-filter actions, by their full names: no prefixes, no case folding.
_Action = Literal["default", "error", "ignore", "always", "module", "once"]
WARNING_ACTIONS: tuple[_Action, ...] = get_args(_Action)


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


# Guards the flag tables.  Held only briefly, never across a warning.
_lock = threading.Lock()
# Held across the issuing of a warning, so that a call arriving meanwhile waits for it to be
# issued (or raised) instead of passing silently.  Re-entrant: a warning's display (a user's
# showwarning, a logging handler) may call experimental code again on the same thread.
_issue_lock = threading.RLock()


class OnceFlag:
    """A "warn once" flag: the hot path reads one attribute, no lock and no key lookup.

    ``warned`` becomes True only after the warning has been issued: whoever reads True
    comes after a call that warned.  Whoever reads False calls :func:`issue_experimental_warning`
    (or :func:`warn_backend_once`), which decides under a lock.
    """

    __slots__ = ("warned", "issuing")

    def __init__(self) -> None:
        self.warned = False
        # True while the thread holding _issue_lock issues this flag's warning.
        self.issuing = False


_once_flags: list[OnceFlag] = []
_backend_flags: dict[tuple[str, str], OnceFlag] = {}
# The (API, backend) pairs that have warned: upstream's ``_WARNED_EXPERIMENTAL_BACKENDS``,
# which flashinfer.api_logging shows under that name.  Upstream's tests forget the warnings
# by assigning a fresh set there; here the once-flags decide, and an assigned set becomes
# this record, its pairs counting as warned (adopt_backend_warning_record).
_warned_backends: set[tuple[str, str]] = set()


def experimental_warnings_action() -> _Action | None:
    """The filter action ``FLASHINFER_EXPERIMENTAL_WARNINGS`` asks for; None when unset.

    Read each time an ExperimentalWarning is issued.  An unknown value warns once (a
    RuntimeWarning naming the variable and the accepted values) and is ignored.
    """
    raw = os.environ.get(EXPERIMENTAL_WARNINGS_ENV)
    if not raw:
        return None
    for action in WARNING_ACTIONS:
        if raw == action:
            return action
    accepted = ", ".join(repr(a) for a in WARNING_ACTIONS) + ", or empty/unset"
    warn_unrecognised_once(EXPERIMENTAL_WARNINGS_ENV, raw, "ignoring it", accepted)
    return None


# The filter this module puts first while it issues a warning under
# FLASHINFER_EXPERIMENTAL_WARNINGS carries this message pattern: a regular-expression comment,
# which matches every message and tells the filter apart from any a user installs (even one
# of the same action and category), so that only the library's own are ever removed.
LIBRARY_FILTER_MESSAGE = f"(?#put first by flashinfer for {EXPERIMENTAL_WARNINGS_ENV})"


def is_library_filter(entry: object) -> bool:
    """Whether ``entry`` (an item of ``warnings.filters``) is one this module installed."""
    return (
        isinstance(entry, tuple)
        and len(entry) == 5
        and entry[2] is ExperimentalWarning
        and getattr(entry[1], "pattern", None) == LIBRARY_FILTER_MESSAGE
    )


def _filters_changed() -> None:
    # What filterwarnings() does after a change: warnings then forgets which warnings it
    # has already shown under the old list.  It has no public call for a removal.
    changed = getattr(warnings, "_filters_mutated", None) or getattr(
        warnings, "_filters_mutated_lock_held", None
    )
    if changed is not None:
        changed()


def remove_library_filters() -> None:
    """Take out of ``warnings.filters`` every filter this module installed, and only those.

    One is normally gone when its warning has been issued; one can stay behind when another
    thread's ``catch_warnings`` block saved the list while it was in place.
    """
    filters = cast("list[Any]", warnings.filters)  # a list (typeshed says Sequence)
    ours = [entry for entry in filters if is_library_filter(entry)]
    for entry in ours:
        try:
            filters.remove(entry)  # equality: no user's filter equals ours
        except ValueError:  # removed meanwhile (another list, swapped in by catch_warnings)
            pass
    if ours:
        _filters_changed()


def issue_experimental_warning(flag: OnceFlag, message: str | Callable[[], str]) -> bool:
    """Issue the ExperimentalWarning of ``flag`` unless it has been issued; True if this
    call issued it.  ``message`` is the text, or a function building it (called only when
    the warning is issued).

    Whatever the threads do, a call either issues the warning or comes after one that did:
    the check and the warning happen under one lock, held across the warning, and
    ``flag.warned`` is set only once the warning was issued.  When a filter turns it into an
    error, the flag stays unset: the next use is refused as well, instead of running
    silently.  A re-entrant use of the same flag on the thread issuing it (from a warning
    display hook) does not warn again.

    ``FLASHINFER_EXPERIMENTAL_WARNINGS=<action>``, read now, puts ``<action>`` first among
    the warning filters for ExperimentalWarning while this warning is issued, and takes it
    out afterwards, so it decides over any other filter and follows the variable's current
    value; unset, the program's own filters decide.
    """
    with _issue_lock:
        if flag.warned or flag.issuing:
            return False
        flag.issuing = True
        try:
            remove_library_filters()  # left behind by a catch_warnings race: not current
            text = message if isinstance(message, str) else message()
            action = experimental_warnings_action()
            if action is not None:
                warnings.filterwarnings(
                    action, message=LIBRARY_FILTER_MESSAGE, category=ExperimentalWarning
                )
            try:
                warnings.warn(text, ExperimentalWarning, stacklevel=user_stacklevel())
            finally:
                if action is not None:
                    remove_library_filters()
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
    """Issue the ExperimentalWarning of an (API, backend) pair, once per process whichever
    way the backend was opted in to, and record the pair (upstream's record).  The text is
    ``message(*args)``, built only when the warning is issued.  Concurrent first uses wait
    for the one issuing it (:func:`issue_experimental_warning`)."""
    flag = backend_warning_flag(api, backend)
    if flag.warned:
        return
    with _issue_lock:  # the record and the flag change together
        if issue_experimental_warning(flag, lambda: message(*args)):
            _warned_backends.add((api, backend))


def warn_experimental_backend_once(api: str, backend: str, *, automatic: bool = False) -> None:
    """Warn once per process for each (API, backend) pair that an experimental backend runs.

    ``api`` is the API's qualified name (``"flashinfer.gemm.mm"``) or its plain name; the
    message names the plain one (``'mm'``).
    ``automatic=True`` words the warning for a backend picked by ``backend="auto"`` or the
    autotuner (``messages.automatic_selection``); otherwise it says the backend was selected
    explicitly by name (``messages.explicit_selection``).
    """
    message = automatic_selection if automatic else explicit_selection
    warn_backend_once(api, backend, message, api, backend)


def reset_experimental_warnings() -> None:
    """Forget every "already warned" record, so each warning fires again once, and take
    out any warning filter the library itself installed for ``FLASHINFER_EXPERIMENTAL_WARNINGS``
    (never one of the program's own).

    For test suites (ours and our users'): makes warning tests independent of order.
    """
    forget_unrecognised_values()
    with _issue_lock:  # waits for a warning being issued: its flag is then forgotten too
        remove_library_filters()
        with _lock:
            _warned_backends.clear()
            for flag in _once_flags:
                flag.warned = False


def warned_backend_record() -> set[tuple[str, str]]:
    """The set of (API, backend) pairs that have warned (upstream's record)."""
    return _warned_backends


def adopt_backend_warning_record(record: set[tuple[str, str]]) -> None:
    """Make ``record`` the set of warned pairs: exactly its pairs count as warned."""
    global _warned_backends
    with _issue_lock:  # not in the middle of a warning being issued
        _warned_backends = record
        for flag in list(_backend_flags.values()):
            flag.warned = False
        for api, backend in record:
            backend_warning_flag(api, backend).warned = True


class WarnedRecordModule(types.ModuleType):
    """The type of ``flashinfer.api_logging``, for upstream's
    ``_WARNED_EXPERIMENTAL_BACKENDS``: the set of (API, backend) pairs that have warned.
    Reading it gives the live record; assigning a set (as upstream's tests do to forget
    warnings) makes exactly its pairs count as warned.
    Every other attribute, and so every call path, is untouched."""

    @property
    def _WARNED_EXPERIMENTAL_BACKENDS(self) -> set[tuple[str, str]]:
        return warned_backend_record()

    @_WARNED_EXPERIMENTAL_BACKENDS.setter
    def _WARNED_EXPERIMENTAL_BACKENDS(self, record: set[tuple[str, str]]) -> None:
        adopt_backend_warning_record(record)
