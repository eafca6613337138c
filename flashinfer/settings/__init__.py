"""Every setting the package reads from its environment, in one table.

``environment``: one :class:`~flashinfer.settings.environment.EnvironmentVariable` per variable
(name, values, default, when it is read, what a bad value does, the modules that read it).
``docs/configuration.rst`` is rendered from it, and a test fails when the package reads a
``FLASHINFER_*`` or ``TRITON_*`` variable that the table does not list.
``strict``: ``FLASHINFER_STRICT_SETTINGS=1`` turns a malformed value into
:class:`~flashinfer.settings.strict.SettingsError` instead of a warning.
"""

from __future__ import annotations

from flashinfer.settings.environment import ENVIRONMENT, EnvironmentVariable, environment_variable
from flashinfer.settings.strict import STRICT_SETTINGS_ENV, SettingsError, strict_settings

__all__ = [
    "ENVIRONMENT",
    "STRICT_SETTINGS_ENV",
    "EnvironmentVariable",
    "SettingsError",
    "environment_variable",
    "strict_settings",
]
