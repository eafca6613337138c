"""Every warning and error text about the experimental opt-in and the gate: one builder
each, called by the path that raises it, by the tests and by the docs (``{{messages.x()}}``).
Every public function here is a builder (``docs/_ext/flashinfer_messages.py``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from flashinfer.settings import unrecognised_value as unrecognised_value
from flashinfer.settings.environment import GATE_ACCEPTED

ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV = "FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS"
ACCEPTED_GATE_VALUES = GATE_ACCEPTED

_GATE = ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV
_MAY_CHANGE = "Experimental backends may change or be removed without deprecation."
_NO_AUTO = "No suitable auto backends found for"


def plain_name(api: str) -> str:
    """``"flashinfer.gemm.mm"`` -> ``"mm"``."""
    return api.rsplit(".", 1)[-1]


def _reasons(reasons: Mapping[str, str]) -> str:
    return "\n".join(f"  - {b}: {r}" for b, r in reasons.items())


# ---- warnings: an experimental backend runs (once per API and backend) ------------------


def explicit_selection(api: str, backend: str) -> str:
    """An experimental backend named in the call (``backend="splitk"``)."""
    how = f"was selected for {plain_name(api)!r} explicitly ({api}(backend={backend!r}))"
    return f"Experimental backend {backend!r} {how}. {_MAY_CHANGE}"


def automatic_selection(api: str, backend: str) -> str:
    """An experimental backend picked by ``backend="auto"`` or the autotuner (gate on)."""
    how = (
        f"was picked automatically for {plain_name(api)!r} ({api}(backend='auto')) "
        f"because {_GATE}=1"
    )
    return f"Experimental backend {backend!r} {how}. {_MAY_CHANGE}"


def listed_in_restriction(api: str, backend: str, where: str) -> str:
    """An experimental backend listed in ``where`` (``use_backends`` or the variable)."""
    return (
        f"Experimental backend {backend!r} was opted in for {plain_name(api)!r} by naming it "
        f"in {where}: automatic selection may pick it there. {_MAY_CHANGE}"
    )


def experimental_api_used(feature: str, name: str) -> str:
    """An experimental API's first call; starts with "Experimental" like the others."""
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
    """Why ``autotune()`` did not time an experimental backend that fits (gate off)."""
    return f"experimental: {_GATE} is not 1 (set it to 1 to let the autotuner time it)"


def cached_experimental_skipped() -> str:
    """Why tuning-file entries naming an experimental backend were not loaded (after a count)."""
    return f"name an experimental backend while {_GATE} is not 1"


def gate_differs_between_ranks(shown: str) -> str:
    """``AutotuneConsistencyError``'s line when ranks disagree on the gate."""
    return (
        f"  {_GATE} differs between ranks ({shown}): it decides whether experimental "
        "backends are candidates, so set it to the same value on every rank"
    )


def only_experimental_fit(api: str, dropped: Sequence[str], reasons: Mapping[str, str]) -> str:
    """``backend="auto"`` when only experimental backends (``dropped`` by the gate) fit."""
    names = ", ".join(repr(b) for b in dropped)
    return (
        f"{_NO_AUTO} {api}: only experimental backends ({names}) support these inputs. "
        f"Pass backend={dropped[0]!r} to opt in for this call, or set {_GATE}=1 to let "
        f"automatic selection use them.\n{_reasons(reasons)}"
    )


def every_candidate_rejected(api: str, reasons: Mapping[str, str]) -> str:
    """``backend="auto"`` when no backend fits."""
    return f"{_NO_AUTO} {api}; every candidate was rejected:\n{_reasons(reasons)}"


def auto_refused_by_common_check(api: str, refused: str) -> str:
    """``backend="auto"`` when the API's common check refuses the inputs."""
    return f"{_NO_AUTO} {api}: {refused}"


def restriction_cannot_run(
    api: str, listed: Iterable[str], reasons: Mapping[str, str], variable: str | None
) -> str:
    """``backend="auto"`` under a restriction (``variable``, or None: ``use_backends``)
    none of whose backends can run the call."""
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
    """An API routing ``"auto"`` by hand to an experimental feature, gate off."""
    return (
        f"Automatic selection of the experimental feature {feature!r} is disabled. "
        f"Set {_GATE}=1 to allow it, or select the experimental backend explicitly by name."
    )


# ---- a variable set to a value flashinfer does not know ----------------------------------


def unrecognised_gate_value(raw: str) -> str:
    """The gate variable set to ``raw`` (not ``1``, ``0`` or empty)."""
    return unrecognised_value(_GATE, raw, "treating it as off", ACCEPTED_GATE_VALUES)


# -- the exits (flashinfer.gating.history) ------------------------------------------------------


def renamed_backend_named(api: str, old: str, new: str, version: str, expires: str) -> str:
    """A renamed backend's old name."""
    return (
        f"{plain_name(api)}: backend {old!r} was renamed {new!r} in flashinfer {version}; "
        f"write backend={new!r} (the old name stops working in {expires})"
    )


def renamed_api_used(old: str, new: str, version: str, expires: str) -> str:
    """A renamed (or moved) API's old name."""
    return (
        f"{old} was renamed {new} in flashinfer {version}; use {new} (the old name stops "
        f"working in {expires})"
    )


def moved_module_used(old: str, new: str, version: str, expires: str) -> str:
    """A name imported from a module whose code moved (a promoted API's old path)."""
    return (
        f"{old} moved to {new} in flashinfer {version}; import from {new} (the old path "
        f"stops working in {expires})"
    )


def removed_backend_named(api: str, name: str, version: str, use_instead: str) -> str:
    """Naming a removed backend."""
    return (
        f"{plain_name(api)}: backend {name!r} was removed in flashinfer {version}; use "
        f"backend={use_instead!r} instead (or backend='auto')"
    )


def removed_api_used(api: str, version: str, use_instead: str) -> str:
    """A removed API's name."""
    return f"{api} was removed in flashinfer {version}; use {use_instead} instead"
