"""The gate: whether ``backend="auto"`` may pick experimental backends
(``FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS``, read at every call)."""

from __future__ import annotations

from flashinfer.gating.messages import ACCEPTED_GATE_VALUES as ACCEPTED_GATE_VALUES
from flashinfer.gating.messages import (
    ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV as ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV,
)
from flashinfer.gating.messages import auto_feature_disabled
from flashinfer.settings import environment_reader as environment_reader
from flashinfer.settings import forget_unrecognised_values as forget_unrecognised_values
from flashinfer.settings import reader, strict_settings

GATE_OFF_VALUES = ("", "0")  # off without a warning; only "1" is on

_read_gate = reader(ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV)


def experimental_auto_backends_allowed() -> bool:
    """Whether automatic selection may pick experimental backends.

    ``True`` only when ``FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS`` is exactly ``"1"``.
    Unset, empty or ``"0"`` is off.  Any other value is off and warns once per distinct
    value.  Read at every call, so changing the variable at run time takes effect.
    """
    return _read_gate()  # type: ignore[no-any-return]


def require_experimental_auto_backends(feature: str) -> None:
    """Raise ``RuntimeError`` unless the gate allows automatic experimental selection (for
    APIs that route ``backend="auto"`` by hand rather than through ``backend_requirement``)."""
    if not experimental_auto_backends_allowed():
        raise RuntimeError(auto_feature_disabled(feature))


# A bad gate value warns at `import flashinfer`.  Under strict settings the import does not
# raise (the first call reading the gate does): `flashinfer backends` can report the value.
try:
    _strict_at_import = strict_settings()
except ValueError:  # FLASHINFER_STRICT_SETTINGS itself is malformed: that raises on first use
    _strict_at_import = True
if not _strict_at_import:
    experimental_auto_backends_allowed()
