"""What flashinfer tells users about the experimental opt-in and the gate: one builder each.

Every warning and error about the opt-in (an experimental backend named, picked by
``backend="auto"`` or listed in a restriction; the gate leaving one out; only experimental
backends fitting; a restriction none of whose backends can run; an experimental API called;
an exit of experimental work: a renamed or removed backend or API) is built here, and every
path that raises it calls the builder; tests and the docs build the text they expect from
these builders too (``tests/test_messages.py`` pins what each must say).  A bad value of a
variable is told by the reader's :func:`flashinfer.settings.unrecognised_value`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from flashinfer.settings import unrecognised_value as unrecognised_value
from flashinfer.settings.environment import GATE_ACCEPTED

__all__ = [
    "ACCEPTED_GATE_VALUES",
    "ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV",
    "auto_feature_disabled",
    "auto_refused_by_common_check",
    "automatic_selection",
    "cached_experimental_skipped",
    "every_candidate_rejected",
    "experimental_api_banner",
    "experimental_api_used",
    "explicit_selection",
    "gate_differs_between_ranks",
    "gate_exclusion_reason",
    "gate_verdict",
    "listed_in_restriction",
    "only_experimental_fit",
    "moved_module_used",
    "plain_name",
    "removed_api_used",
    "removed_backend_named",
    "renamed_api_used",
    "renamed_backend_named",
    "restriction_cannot_run",
    "tuning_left_out_by_gate",
    "unrecognised_gate_value",
    "unrecognised_value",
]

ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV = "FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS"
ACCEPTED_GATE_VALUES = GATE_ACCEPTED

_GATE = ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV
_MAY_CHANGE = "Experimental backends may change or be removed without deprecation."
_NO_AUTO = "No suitable auto backends found for"


def plain_name(api: str) -> str:
    """``"flashinfer.gemm.mm"`` -> ``"mm"``: the name users call (the last part of a key)."""
    return api.rsplit(".", 1)[-1]


def _reasons(reasons: Mapping[str, str]) -> str:
    """One line per refused backend: ``  - name: why``."""
    return "\n".join(f"  - {b}: {r}" for b, r in reasons.items())


# ---- warnings: an experimental backend runs (once per API and backend) ------------------


def explicit_selection(api: str, backend: str) -> str:
    """The warning of an experimental backend named in the call (``backend="splitk"``).
    ``api`` is the API's qualified name (quoted in the call shown) or its plain name."""
    how = f"was selected for {plain_name(api)!r} explicitly ({api}(backend={backend!r}))"
    return f"Experimental backend {backend!r} {how}. {_MAY_CHANGE}"


def automatic_selection(api: str, backend: str) -> str:
    """The warning of an experimental backend picked by ``backend="auto"`` or the
    autotuner, which only the gate variable set to 1 allows."""
    how = (
        f"was picked automatically for {plain_name(api)!r} ({api}(backend='auto')) "
        f"because {_GATE}=1"
    )
    return f"Experimental backend {backend!r} {how}. {_MAY_CHANGE}"


def listed_in_restriction(api: str, backend: str, where: str) -> str:
    """The warning of an experimental backend listed in a restriction: ``where`` is
    ``"use_backends"`` or the variable (``FLASHINFER_BACKENDS``) that names it."""
    return (
        f"Experimental backend {backend!r} was opted in for {plain_name(api)!r} by naming it "
        f"in {where}: automatic selection may pick it there. {_MAY_CHANGE}"
    )


def experimental_api_used(feature: str, name: str) -> str:
    """The warning of an experimental API's first call (``name``: its qualified name)."""
    # Starts with "Experimental", like the backend warnings: a -W message filter can match both.
    label = repr(name) if feature == name else f"{name!r} (feature {feature!r})"
    return f"Experimental API {label} may change or disappear without deprecation."


def experimental_api_banner(feature: str) -> str:
    """The first paragraph of an experimental API's docstring."""
    return (
        f"**Experimental API** (feature ``{feature}``): this API is experimental; it may "
        "change or be removed without deprecation. Calling it is the opt-in; the first call "
        "warns with ExperimentalWarning."
    )


# ---- the gate's verdicts and the errors of automatic selection ---------------------------


def gate_exclusion_reason() -> str:
    """Why ``backend="auto"`` left out an experimental backend that fits (gate off)."""
    return f"experimental: excluded from automatic selection ({_GATE} is not 1)"


def gate_verdict() -> str:
    """``op.explain()``'s short verdict on an experimental backend that fits, gate off."""
    return f"experimental: {_GATE} is not 1"


def tuning_left_out_by_gate() -> str:
    """Why an ``autotune()`` block's summary says it did not time an experimental backend
    that fits (gate off)."""
    return f"experimental: {_GATE} is not 1 (set it to 1 to let the autotuner time it)"


def cached_experimental_skipped() -> str:
    """Why entries of a tuning file that name an experimental backend were not loaded
    (after their count: ``"2 name an experimental backend while ..."``)."""
    return f"name an experimental backend while {_GATE} is not 1"


def gate_differs_between_ranks(shown: str) -> str:
    """The line of ``AutotuneConsistencyError`` when ranks disagree on the gate; ``shown``
    lists each rank's value."""
    return (
        f"  {_GATE} differs between ranks ({shown}): it decides whether experimental "
        "backends are candidates, so set it to the same value on every rank"
    )


def only_experimental_fit(api: str, dropped: Sequence[str], reasons: Mapping[str, str]) -> str:
    """The error of ``backend="auto"`` when only experimental backends (``dropped``, which
    the gate left out) fit: how to opt in, then each backend's reason."""
    names = ", ".join(repr(b) for b in dropped)
    return (
        f"{_NO_AUTO} {api}: only experimental backends ({names}) support these inputs. "
        f"Pass backend={dropped[0]!r} to opt in for this call, or set {_GATE}=1 to let "
        f"automatic selection use them.\n{_reasons(reasons)}"
    )


def every_candidate_rejected(api: str, reasons: Mapping[str, str]) -> str:
    """The error of ``backend="auto"`` when no backend fits, with each one's reason."""
    return f"{_NO_AUTO} {api}; every candidate was rejected:\n{_reasons(reasons)}"


def auto_refused_by_common_check(api: str, refused: str) -> str:
    """The error of ``backend="auto"`` when the API's common check refuses the inputs."""
    return f"{_NO_AUTO} {api}: {refused}"


def restriction_cannot_run(
    api: str, listed: Iterable[str], reasons: Mapping[str, str], variable: str | None
) -> str:
    """The error of ``backend="auto"`` under a restriction none of whose backends can run
    the call.  ``variable``: the variable that restricts it, None for a ``use_backends``
    block."""
    if variable is not None:
        who = f"{variable} (which a flashinfer.use_backends block overrides)"
    else:
        who = "flashinfer.use_backends"
    return (
        f"{_NO_AUTO} {api}: {who} restricts automatic selection to {list(listed)}, and none "
        f"of them can run these inputs:\n{_reasons(reasons)}\nList another backend for "
        f"{api}, leave {api} out of the restriction, or pass backend=... explicitly."
    )


def auto_feature_disabled(feature: str) -> str:
    """The error of an API routing ``"auto"`` by hand to an experimental feature, gate off."""
    return (
        f"Automatic selection of the experimental feature {feature!r} is disabled. "
        f"Set {_GATE}=1 to allow it, or select the experimental backend explicitly by name."
    )


# ---- a variable set to a value flashinfer does not know ----------------------------------


def unrecognised_gate_value(raw: str) -> str:
    """The warning of the gate variable set to ``raw`` (not ``1``, ``0`` or empty)."""
    return unrecognised_value(_GATE, raw, "treating it as off", ACCEPTED_GATE_VALUES)


# -- the exits (flashinfer.gating.history) ------------------------------------------------------


def renamed_backend_named(api: str, old: str, new: str, version: str, expires: str) -> str:
    """The deprecation warning of a renamed backend's old name: the new name, and when the
    alias goes."""
    return (
        f"{plain_name(api)}: backend {old!r} was renamed {new!r} in flashinfer {version}; "
        f"write backend={new!r} (the old name stops working in {expires})"
    )


def renamed_api_used(old: str, new: str, version: str, expires: str) -> str:
    """The deprecation warning of a renamed (or moved) API's old name."""
    return (
        f"{old} was renamed {new} in flashinfer {version}; use {new} (the old name stops "
        f"working in {expires})"
    )


def moved_module_used(old: str, new: str, version: str, expires: str) -> str:
    """The deprecation warning of a name imported from a module whose code moved (a promoted
    API's experimental import path)."""
    return (
        f"{old} moved to {new} in flashinfer {version}; import from {new} (the old path "
        f"stops working in {expires})"
    )


def removed_backend_named(api: str, name: str, version: str, use_instead: str) -> str:
    """Why naming a removed backend fails: the version and what to use instead."""
    return (
        f"{plain_name(api)}: backend {name!r} was removed in flashinfer {version}; use "
        f"backend={use_instead!r} instead (or backend='auto')"
    )


def removed_api_used(api: str, version: str, use_instead: str) -> str:
    """Why a removed API's name fails: the version and what to use instead."""
    return f"{api} was removed in flashinfer {version}; use {use_instead} instead"
