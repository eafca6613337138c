"""Once-only ExperimentalWarnings: the warn-once flags and the one path that issues them.

Each experimental API and each (API, backend) pair has a :class:`OnceFlag`; the first use
claims it and issues an :class:`ExperimentalWarning` through
:func:`issue_experimental_warning`, which also applies ``FLASHINFER_EXPERIMENTAL_WARNINGS``.
Public names are re-exported by ``flashinfer.api_logging``.
"""

from __future__ import annotations

import os
import threading
import types
import warnings
from collections.abc import Callable
from typing import Any, Literal, get_args

from flashinfer.gating.exposed import exposed_in
from flashinfer.gating.gate import forget_unrecognised_values, warn_unrecognised_once
from flashinfer.gating.messages import automatic_selection, explicit_selection
from flashinfer.gating.stacklevel import user_stacklevel

__all__ = [
    "EXPERIMENTAL_WARNINGS_ENV",
    "ExperimentalWarning",
    "OnceFlag",
    "WarnedRecordModule",
    "adopt_backend_warning_record",
    "backend_warning_flag",
    "issue_experimental_warning",
    "new_once_flag",
    "reset_experimental_warnings",
    "warn_backend_once",
    "warn_experimental_backend_once",
    "warned_backend_record",
]

EXPERIMENTAL_WARNINGS_ENV = "FLASHINFER_EXPERIMENTAL_WARNINGS"
# Python's warning-filter actions, by their full names: no prefixes, no case folding.
_Action = Literal["default", "error", "ignore", "always", "module", "once"]
_WARNING_ACTIONS: tuple[_Action, ...] = get_args(_Action)


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


_lock = threading.Lock()


class OnceFlag:
    """A "warn once" flag: the hot path reads one attribute, no lock and no key lookup."""

    __slots__ = ("warned",)

    def __init__(self) -> None:
        self.warned = False

    def claim(self) -> bool:
        """True for exactly one caller, even when many threads race here."""
        with _lock:
            if self.warned:
                return False
            self.warned = True
            return True


_once_flags: list[OnceFlag] = []
_backend_flags: dict[tuple[str, str], OnceFlag] = {}
# The (API, backend) pairs that have warned: upstream's ``_WARNED_EXPERIMENTAL_BACKENDS``,
# which flashinfer.api_logging shows under that name.  Upstream's tests forget the warnings
# by assigning a fresh set there; here the once-flags decide, and an assigned set becomes
# this record, its pairs counting as warned (adopt_backend_warning_record).
_warned_backends: set[tuple[str, str]] = set()


def _experimental_warnings_action() -> _Action | None:
    """The filter action ``FLASHINFER_EXPERIMENTAL_WARNINGS`` asks for; None when unset.

    Read each time an ExperimentalWarning is issued.  An unknown value warns once (a
    RuntimeWarning naming the variable and the accepted values) and is ignored.
    """
    raw = os.environ.get(EXPERIMENTAL_WARNINGS_ENV)
    if not raw:
        return None
    for action in _WARNING_ACTIONS:
        if raw == action:
            return action
    accepted = ", ".join(repr(a) for a in _WARNING_ACTIONS) + ", or empty/unset"
    warn_unrecognised_once(EXPERIMENTAL_WARNINGS_ENV, raw, "ignoring it", accepted)
    return None


def issue_experimental_warning(flag: OnceFlag, message: str) -> None:
    """Issue the ExperimentalWarning of a once-flag that the caller has just claimed.

    ``FLASHINFER_EXPERIMENTAL_WARNINGS=<action>`` puts ``<action>`` first among the warning
    filters for ExperimentalWarning, again at every warning (a ``catch_warnings`` block that
    has ended takes it away), so it decides over any other filter.  When a filter turns the
    warning into an error, the flag is released: the next use is refused as well, instead of
    running silently.
    """
    try:
        action = _experimental_warnings_action()
        if action is not None:
            with _lock:  # warnings' own filter list is not guarded on Python < 3.13
                warnings.filterwarnings(action, category=ExperimentalWarning)
        warnings.warn(message, ExperimentalWarning, stacklevel=user_stacklevel())
    except BaseException:
        flag.warned = False
        raise


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
    ``message(*args)``, built only when the warning is issued."""
    flag = backend_warning_flag(api, backend)
    if flag.warned or not flag.claim():
        return
    issue_experimental_warning(flag, message(*args))
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
    """Forget every "already warned" record, so each warning fires again once.

    For test suites (ours and our users'): makes warning tests independent of order.
    """
    forget_unrecognised_values()
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
