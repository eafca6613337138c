"""API markers and the experimental gate (upstream import path: ``flashinfer.api_logging``).

Two markers live here:

* :func:`flashinfer_api` marks a stable public API and records it in the API inventory.
* :func:`flashinfer_experimental_api` (alias :func:`experimental_api`) marks an API that may
  change or disappear.  Calling it is the opt-in: it always runs, and warns once.

The gate for *automatic* selection of experimental backends is
``FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS``; it is read at call time by
:func:`experimental_auto_backends_allowed`.  Explicit opt-ins never read it.

This module is the public face: it re-exports names from the modules that do each job
(``_stacklevel``, ``_experimental_gate``, ``_experimental_warnings``, ``_api_records``,
``_stable_marker``, ``_experimental_marker``) and keeps upstream's private aliases.
``ExperimentalWarning`` names this module as its ``__module__``, which warning filters match.
"""

from __future__ import annotations

import sys
import types

from ._api_records import APIRecord, ExperimentalInfo, api_inventory
from ._api_records import inventory as _inventory  # noqa: F401  (tests register fakes here)
from ._api_records import make_experimental_info as make_experimental_info
from ._experimental_gate import (
    ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV,
    experimental_auto_backends_allowed,
    require_experimental_auto_backends,
)
from ._experimental_gate import gate_fast_read as gate_fast_read
from ._experimental_marker import experimental_api, flashinfer_experimental_api
from ._experimental_warnings import (
    EXPERIMENTAL_WARNINGS_ENV,
    ExperimentalWarning,
    adopt_backend_warning_record,
    reset_experimental_warnings,
    warn_experimental_backend_once,
    warned_backend_record,
)
from ._experimental_warnings import backend_warning_flag as backend_warning_flag
from ._stable_marker import flashinfer_api
from ._stacklevel import user_stacklevel

__all__ = [
    "ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV",
    "APIRecord",
    "EXPERIMENTAL_WARNINGS_ENV",
    "ExperimentalInfo",
    "ExperimentalWarning",
    "api_inventory",
    "experimental_api",
    "experimental_auto_backends_allowed",
    "flashinfer_api",
    "flashinfer_experimental_api",
    "require_experimental_auto_backends",
    "reset_experimental_warnings",
    "user_stacklevel",
    "warn_experimental_backend_once",
]

# Imported ``as`` themselves above (explicit re-exports, not public): gate_fast_read,
# backend_warning_flag and make_experimental_info, which the dispatcher takes from here.

# Upstream's name for the gate variable (its tests import it from here).
_EXPERIMENTAL_AUTO_ENV_VAR = ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV


class _ApiLoggingModule(types.ModuleType):
    """This module's type, for upstream's ``_WARNED_EXPERIMENTAL_BACKENDS``: the set of
    (API, backend) pairs that have warned.  Reading it gives the live record; assigning a
    set (as upstream's tests do to forget warnings) makes exactly its pairs count as warned.
    Every other attribute, and so every call path, is untouched."""

    @property
    def _WARNED_EXPERIMENTAL_BACKENDS(self) -> set[tuple[str, str]]:
        return warned_backend_record()

    @_WARNED_EXPERIMENTAL_BACKENDS.setter
    def _WARNED_EXPERIMENTAL_BACKENDS(self, record: set[tuple[str, str]]) -> None:
        adopt_backend_warning_record(record)


sys.modules[__name__].__class__ = _ApiLoggingModule

# For type checkers and readers: the name exists on this module (served by the property).
_WARNED_EXPERIMENTAL_BACKENDS: set[tuple[str, str]]
