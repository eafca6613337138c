"""API markers and the experimental gate (upstream's import path): :func:`flashinfer_api`,
:func:`flashinfer_experimental_api` (alias :func:`experimental_api`), the gate
(``FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS``, read by
:func:`experimental_auto_backends_allowed`) and upstream's private aliases; re-exports of
``flashinfer.gating``.  ``ExperimentalWarning``'s ``__module__`` names this module."""

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

# Upstream's name for the gate variable (its tests import it from here).
_EXPERIMENTAL_AUTO_ENV_VAR = ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV


# Upstream's ``_WARNED_EXPERIMENTAL_BACKENDS`` is served by this module's type.
sys.modules[__name__].__class__ = WarnedRecordModule

# For type checkers and readers: the name exists on this module (served by the property).
_WARNED_EXPERIMENTAL_BACKENDS: set[tuple[str, str]]
