"""The backend dispatcher: the one place that decides which backend of an API runs."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, ParamSpec, Protocol, TypeVar, cast

from flashinfer.dispatch.autocast import FP32, LOWER_PRECISION, AutocastRule
from flashinfer.dispatch.capability import (
    device_capability as device_capability,  # the tuner's keys
)
from flashinfer.dispatch.capability import find_compute_capability
from flashinfer.dispatch.declarations import Backend, ImplementationTable
from flashinfer.dispatch.errors import BackendSupportedError, UnsupportedInputsError
from flashinfer.dispatch.explain import BackendVerdict, Explanation, PathExplanation, explain_paths
from flashinfer.dispatch.markers import supported_compute_capability
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
    """What :func:`backend_requirement` returns, as a type checker sees it.

    Called with the API's own parameters, it returns what the API returns: a checker
    reports a wrong argument or a wrong use of the result.  ``skip_check`` is part of
    those parameters only where the API declares it (``*, skip_check: bool = False``);
    the dispatcher takes it either way.  The attributes are the dispatcher's (see
    :class:`BackendRequirementOp`).  At run time the object is a plain function.
    """

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
    """Decorate an API with its backends' support checkers.

    ``backend_checks`` is the API's backend table, in one of two forms:

    - a list of :class:`Backend` declarations, each pairing a backend's name, its support
      checker and its implementation (and, for an experimental backend, when ``"auto"``
      should prefer it).  The body reaches the chosen backend's implementation as
      ``api.implementations[backend]``; adding a backend is one declaration and one line
      in this list.
    - upstream's mapping of a backend name to its checker; the body keeps its own
      implementations (``api.implementations`` is empty).

    A checker receives the API's arguments (or a subset) and returns ``True`` when the
    backend supports them, ``False`` when not (or raises ``ValueError`` saying why not);
    numpy bools count as bools, and any other result (``None`` from falling through, the
    string ``"False"``) is a ``TypeError`` naming the checker.  ``common_check`` validates
    the inputs for every backend, by the same rule.  ``heuristic_func(candidates, *args,
    **kwargs)`` returns the viable candidates of ``backend="auto"`` ordered best first, as
    a list or tuple of names (anything else is a ``TypeError`` naming the heuristic); it
    may drop candidates, never add a backend its checks or the gate left out (a name that
    is no backend, such as a runner of the body's own, is kept, as upstream keeps it), and
    a name it repeats counts once.  Declared
    preferences (``Backend.prefer``) of experimental backends are applied after it, by the
    dispatcher, while the gate lets them be candidates (``op.dispatcher.prefer_first``): a
    preferring backend goes first.

    The decorated API (a :class:`BackendOp`, typed with the API's own parameters and
    return type) gains ``suitable_auto_backends`` (candidates of this thread's last
    ``"auto"`` call; inside the body, its own call's, whatever nested calls of the op ran
    before), ``dropped_experimental_backends``, ``experimental_backends`` and
    ``stable_backends`` (the table split by the checkers' marks: derive a test's list of
    backends from these, never write the names out), ``backends`` and ``implementations``
    (the declarations and their ``run``, by name), upstream's query methods, and a
    keyword-only ``skip_check=False``.  An API may declare
    ``*, skip_check: bool = False`` itself so that type checkers see it; the dispatcher
    takes it and never passes it on.  ``skip_check=True``: a named backend runs with no
    check at all; ``"auto"`` still chooses (common check, capability, support checkers,
    the experimental gate, the heuristic, as on a checked call, and as upstream), and calls
    the API body with ``suitable_auto_backends`` set (never a router, see
    :meth:`BackendRequirementOp.route_auto`).

    What the checks decide for an ``"auto"`` call's signature is cached
    (``api.verdict_cache``): a repeated signature costs a lookup, not the checks again (a
    named backend runs its two checks on every call).  Checks must therefore decide
    from the signature alone: tensor metadata (shape, strides, dtype, device), the other
    arguments' values, the capability, and the environment variables they declare with
    :func:`reads_environment`.  A check that reads tensor values or other state is marked
    :func:`reads_tensor_data` and runs on every call.  Failures are never cached.

    Compilers see the API as a torch operator, ``torch.ops.flashinfer.<name>`` (see
    ``docs/compile.rst``): its schema is read from the API's annotations (tensors,
    ``float``, ``int``, ``bool``, ``str``, ``torch.dtype``, optionals of those; ``out=``
    becomes an ``.out`` overload); ``torch.compile`` inlines a call of it in place of the
    dispatcher, and a call on fake or meta tensors, or while exporting, goes to it.  Its
    real implementation is this dispatcher, so every choice is still made at run time.
    Three keyword arguments describe it:

    - ``overlap``: the API's :class:`~flashinfer.aliasing.OverlapRule`; its written
      arguments are declared mutated (an ``out=`` one gets the ``.out`` overload).
    - ``fake``: ``fake(**arguments)`` (the API's parameters but ``backend``) returns the
      result's metadata as tensors (e.g. ``torch.empty(...)`` of the result's shape and
      dtype, on the inputs' device); the common check and a named backend's checker run
      first.  Without it the result is derived by running the API's body with its first
      torch-family backend (``@backend_family(TORCH)``) on the fake tensors; with neither,
      the operator has no fake implementation and a compiled call graph-breaks (runs
      eagerly, correct, not in the graph).  The result is contiguous whichever backend ran.
    - ``backward``: ``backward(grad, arguments) -> {name: gradient}`` registers the
      operator's gradient (``arguments``: the call's arguments by name).  Without it, a
      compiled call given a tensor that requires grad is refused with an error naming the
      fix, never silently detached.
    - ``jvp``: ``jvp(arguments, tangents) -> tangent`` registers the operator's
      forward-mode derivative (``tangents``: each tensor argument's tangent by name, None
      for one without), for ``torch.autograd.forward_ad`` and ``torch.func.jvp`` over the
      operator.  Without it, such a call is refused with an error naming forward-mode AD,
      never given a zero or a dropped tangent.
    - ``autocast``: an :class:`AutocastRule`, the policy per device type under
      ``torch.autocast`` of the API's torch counterpart (``torch.mm``:
      ``AutocastRule(cpu=LOWER_PRECISION, cuda=LOWER_PRECISION)``; ``torch.rms_norm``:
      ``AutocastRule(cuda=FP32)``).  The inputs are cast so, eagerly, compiled and through
      the operator; an ``out=`` call is never cast (see ``docs/compile.rst``).  Without it,
      nothing is cast.

    ``op.torch_op`` is the operator (``None`` when the signature has no schema, with the
    reason in ``op.torch_op_reason``: such an API graph-breaks when compiled).

    Raises (at decoration, that is at the API module's import):
        ValueError: a backend named ``"auto"`` or with a name that is not an ASCII
            identifier (or starts with an underscore); two declarations of one name (a
            duplicate key of a dict literal never reaches the decorator: ruff's F601
            reports it); a backend whose checker or implementation is experimental code
            (defined under, or importing from, ``flashinfer.experimental``) with a checker
            not marked :func:`experimental_backend`; a stable backend declaring ``prefer``.
        TypeError: a table that is neither form, or mixes them; a checker whose
            parameters the API does not have; an API without a ``backend`` parameter.

    Raises (on a call; the same through the generated function and ``call_reference``):
        TypeError: ``backend`` is not a str (the message names the valid backends), or
            the arguments do not bind to the API's parameters; a check returned something
            other than a bool, or the heuristic something other than a list or tuple of
            names (the message names it and what it returned).
        BackendSupportedError: an unknown backend; a capability the named backend (or an
            API without backends) does not declare; ``"auto"`` with no suitable candidate
            (each candidate and why, the gate named only when experimental backends were
            all that fitted), including a common check that returns False.
        UnsupportedInputsError: a named backend's support check (or the common check)
            refused the inputs: both a ``ValueError`` (upstream's contract) and a
            :class:`BackendSupportedError`, naming the API, the backend and the reason.
        ValueError: whatever the common check raises (the API's input validation), as it
            is; and upstream's usage errors: a call of an API with neither backends nor a
            common check, ``is_backend_supported`` on an API without backends.
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
