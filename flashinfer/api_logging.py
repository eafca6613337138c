"""API markers and the experimental gate (upstream import path: ``flashinfer.api_logging``).

Two markers live here:

* :func:`flashinfer_api` marks a stable public API and records it in the API inventory.
* :func:`flashinfer_experimental_api` (alias :func:`experimental_api`) marks an API that may
  change or disappear.  Calling it is the opt-in: it always runs, and warns once.

The gate for *automatic* selection of experimental backends is
``FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS``; it is read at call time by
:func:`experimental_auto_backends_allowed`.  Explicit opt-ins never read it.

This module is the public face: it re-exports names from the modules of ``flashinfer.gating``
that do each job (``stacklevel``, ``gate``, ``warn_once``, ``records``, ``stable_marker``,
``experimental_marker``) and keeps upstream's private aliases.
``ExperimentalWarning`` names this module as its ``__module__``, which warning filters match.
"""

from __future__ import annotations

import sys

from flashinfer.gating.experimental_marker import experimental_api, flashinfer_experimental_api
from flashinfer.gating.gate import (
    ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV,
    experimental_auto_backends_allowed,
    require_experimental_auto_backends,
)
from flashinfer.gating.records import APIRecord, ExperimentalInfo, api_inventory
from flashinfer.gating.records import inventory as _inventory  # noqa: F401  (tests register fakes here)
from flashinfer.gating.records import make_experimental_info as make_experimental_info
from flashinfer.gating.stable_marker import flashinfer_api
from flashinfer.gating.warn_once import (
    EXPERIMENTAL_WARNINGS_ENV,
    ExperimentalWarning,
    WarnedRecordModule,
    reset_experimental_warnings,
    warn_experimental_backend_once,
)
from flashinfer.gating.warn_once import backend_warning_flag as backend_warning_flag
from flashinfer.settings.stacklevel import user_stacklevel

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

# Imported ``as`` themselves above (explicit re-exports, not public): backend_warning_flag
# and make_experimental_info, which code written against this path uses.

# Upstream's name for the gate variable (its tests import it from here).
_EXPERIMENTAL_AUTO_ENV_VAR = ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV


# Upstream's ``_WARNED_EXPERIMENTAL_BACKENDS`` is served by this module's type.
sys.modules[__name__].__class__ = WarnedRecordModule

# For type checkers and readers: the name exists on this module (served by the property).
_WARNED_EXPERIMENTAL_BACKENDS: set[tuple[str, str]]
