"""The backend dispatcher's public import path: ``@backend_requirement``, the type a type
checker sees (:class:`BackendOp`) and every dispatcher name users import (the work is done in
``flashinfer.dispatch``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, ParamSpec, Protocol, TypeVar, cast

from flashinfer.dispatch.autocast import FP32, LOWER_PRECISION, AutocastRule
from flashinfer.dispatch.capability import (
    BackendSupportedError,
    UnsupportedInputsError,
    find_compute_capability,
    supported_compute_capability,
)
from flashinfer.dispatch.capability import (
    device_capability as device_capability,  # the tuner's keys
)
from flashinfer.dispatch.declarations import Backend, ImplementationTable
from flashinfer.dispatch.explain import BackendVerdict, Explanation, PathExplanation, explain_paths
from flashinfer.dispatch.op import BackendRequirementOp
from flashinfer.dispatch.overlap import OverlapRule
from flashinfer.dispatch.restrictions import use_backends
from flashinfer.dispatch.thread_state import PerThreadList
from flashinfer.dispatch.verdicts import (
    VerdictCache,
    VerdictCacheInfo,
    forget_verdicts,
    reads_environment,
    reads_tensor_data,
)
from flashinfer.gating.experimental_marker import experimental_backend
from flashinfer.gating.op_registry import registered_ops

__all__ = [
    "FP32",
    "LOWER_PRECISION",
    "AutocastRule",
    "Backend",
    "BackendOp",
    "BackendRequirementOp",
    "BackendSupportedError",
    "BackendVerdict",
    "Explanation",
    "PathExplanation",
    "PerThreadList",
    "UnsupportedInputsError",
    "VerdictCache",
    "VerdictCacheInfo",
    "backend_requirement",
    "experimental_backend",
    "explain_paths",
    "find_compute_capability",
    "forget_verdicts",
    "reads_environment",
    "reads_tensor_data",
    "registered_ops",
    "supported_compute_capability",
    "use_backends",
]

P = ParamSpec("P")
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)


# Defined here, not in flashinfer.dispatch: type checkers name a type by its defining module.
class BackendOp(Protocol[P, R_co]):
    """What :func:`backend_requirement` returns, as a type checker sees it: called with the
    API's own parameters, it returns what the API returns (at run time, a plain function)."""

    api_name: str
    api_key: str
    backend_checks: Mapping[str, Callable[..., Any]]
    common_check: Callable[..., Any] | None
    heuristic_func: Callable[..., Any] | None
    experimental_backends: frozenset[str]
    stable_backends: tuple[str, ...]
    backends: Mapping[str, Backend]
    implementations: ImplementationTable
    suitable_auto_backends: PerThreadList
    dropped_experimental_backends: PerThreadList
    verdict_cache: VerdictCache
    dispatcher: BackendRequirementOp
    __generated_source__: str

    @property
    def __wrapped__(self) -> Callable[P, R_co]: ...

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R_co: ...

    def call_reference(self, *args: P.args, **kwargs: P.kwargs) -> R_co: ...

    def has_backend(self, backend: str) -> bool: ...

    def has_backend_choices(self) -> bool: ...

    def is_backend_supported(self, backend: str, cc: int | None = None) -> bool: ...

    def is_compute_capability_supported(self, cc: int) -> bool: ...

    def is_experimental_backend(self, backend: str) -> bool: ...

    def backend_runnable_reason(self, backend: str, cc: int | None) -> str | None: ...

    def explain(self, *args: P.args, **kwargs: P.kwargs) -> Explanation: ...


def backend_requirement(
    backend_checks: Mapping[str, Callable[..., Any]] | Iterable[Backend],
    common_check: Callable[..., Any] | None = None,
    heuristic_func: Callable[..., Any] | None = None,
    *,
    overlap: OverlapRule | None = None,
    fake: Callable[..., Any] | None = None,
    backward: Callable[[Any, dict[str, Any]], dict[str, Any]] | None = None,
    jvp: Callable[[dict[str, Any], dict[str, Any]], Any] | None = None,
    autocast: AutocastRule | None = None,
) -> Callable[[Callable[P, R]], BackendOp[P, R]]:
    """Decorate an API with its backends' support checkers (see ``docs/api/dispatch.rst``).

    ``backend_checks``: a list of :class:`Backend` declarations (the body runs
    ``api.implementations[backend]``), or upstream's mapping of names to checkers.  A checker
    takes (a subset of) the API's arguments and returns ``True``/``False`` or raises
    ``ValueError`` saying why not; anything else is a ``TypeError`` naming it.
    ``common_check`` validates the inputs for every backend by the same rule.
    ``heuristic_func(candidates, *args, **kwargs)`` returns the candidates of ``"auto"``
    best first (it may drop some, never add one); experimental backends' ``Backend.prefer``
    applies after it.  The verdicts of ``"auto"`` are cached per call signature
    (``api.verdict_cache``): checks decide from the signature alone, unless marked
    :func:`reads_tensor_data`; :func:`reads_environment` declares the variables they read.

    The result (a :class:`BackendOp`) is a plain function with upstream's query methods,
    ``suitable_auto_backends``, ``dropped_experimental_backends``, ``stable_backends``,
    ``experimental_backends``, ``backends``, ``implementations``, ``explain`` and a
    keyword-only ``skip_check=False`` (a named backend runs unchecked; ``"auto"`` still
    chooses).  Compilers see it as ``torch.ops.flashinfer.<name>`` (``docs/compile.rst``):
    ``overlap`` (an :class:`~flashinfer.aliasing.OverlapRule`: the written arguments),
    ``fake`` (the result's metadata), ``backward`` (``backward(grad, arguments) ->
    {name: gradient}``), ``jvp`` (``jvp(arguments, tangents) -> tangent``) and ``autocast``
    (an :class:`AutocastRule`) describe the operator; ``op.torch_op`` is it, or None with
    the reason in ``op.torch_op_reason``.

    Raises (at decoration): ``ValueError`` for a bad or duplicate backend name, an unmarked
    backend whose checker or implementation is experimental code, a stable backend
    declaring ``prefer``; ``TypeError`` for a table of neither form, a checker with a
    parameter the API lacks, an API without a ``backend`` parameter.  On a call:
    ``TypeError`` (a non-str ``backend``, arguments that do not bind, a check's or the
    heuristic's result of the wrong type); :class:`BackendSupportedError` (an unknown
    backend, an undeclared capability, ``"auto"`` with no candidate, each backend's reason
    in the message); :class:`UnsupportedInputsError` (a named backend's checks refused the
    inputs; also a ``ValueError``); whatever ``ValueError`` the common check raises.
    """

    def decorator(func: Callable[P, R]) -> BackendOp[P, R]:
        op = BackendRequirementOp(
            func,
            backend_checks,
            common_check,
            heuristic_func,
            overlap=overlap,
            fake=fake,
            backward=backward,
            jvp=jvp,
            autocast=autocast,
        )
        return cast("BackendOp[P, R]", op.function)

    return decorator
