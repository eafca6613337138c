"""A dispatcher op's torch operator: its trace-time checks (:func:`metadata_checks`: what the
eager call checks that metadata decides, raising the same errors; nothing ambient), its fake
result (:func:`_fake_for`: the ``fake=`` function, else the body run with the torch-family
backend on fake tensors, else the dispatcher itself), and the generated lines that hand a
traced call to the operator (:func:`route_lines`: only on paths that can meet one, so a
cached eager ``"auto"`` call pays nothing).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flashinfer.codegen.compiler import render_call
from flashinfer.dispatch.capability import find_compute_capability
from flashinfer.dispatch.families import TORCH, family_of
from flashinfer.dispatch.torch_op import TorchOp
from flashinfer.dispatch.traced_blocks import token_backends
from flashinfer.dispatch.transparent import transparent_plan
from flashinfer.torch_boundary import (
    UnsupportedOperatorException,
    disable_dynamo,
    inline_for_dynamo,
    run_outside_dynamo,
)

__all__ = ["attach_torch_op", "metadata_checks", "route_lines", "torch_family_backend"]


def attach_torch_op(
    op: Any,
    fake: Callable[..., Any] | None,
    backward: Callable[[Any, dict[str, Any]], dict[str, Any]] | None,
    jvp: Callable[[dict[str, Any], dict[str, Any]], Any] | None = None,
) -> None:
    """Build ``op``'s operator from its schema (``op.torch_schema``) and hand it to its
    generated code (``_traceable``) and to Dynamo (``inline_for_dynamo``):
    ``op.torch_op``.  An op without a schema keeps ``op.torch_op`` None and is marked so
    that Dynamo calls it eagerly."""
    schema = op.torch_schema
    if schema is None:
        op._ns["_traced"] = _never
        # A compiled call breaks the graph there and runs the dispatcher eagerly.
        disable_dynamo(op.function, op.torch_op_reason)
        _eager_only(op.function)
        return
    torch_op = TorchOp(
        op.api_key,
        op.function,
        op.__wrapped__,
        schema,
        dispatcher=True,
        validate=lambda values: metadata_checks(op, values),
        fake=_fake_for(op, fake),
        backward=backward,
        jvp=jvp,
        transparent=transparent_plan(op, metadata_checks),
        autocast=getattr(op, "autocast", None),
    )
    op.torch_op = torch_op
    op._ns["_traceable"] = torch_op.traceable
    if torch_op.fake is None:  # meta and fake calls run the dispatcher, as they always did
        op._ns["_traced"] = _never
        _eager_only(op.function)  # a compiled call breaks the graph and calls it eagerly
    inline_for_dynamo(op.function, torch_op.traceable)
    # A frame Dynamo starts at the public function itself (a call from a frame it gave up
    # on, say after a use_backends block) runs eagerly: Dynamo would trace the dispatcher,
    # the backend and Triton's interpreter frame by frame.
    _eager_only(op.function)


def _eager_only(function: Any) -> None:
    """Mark the public function of an op that compiled code calls eagerly (after a graph
    break): Dynamo traces none of its frames (see ``run_outside_dynamo``), also once its
    code is regenerated (``emitter``)."""
    function._flashinfer_eager_only = True
    run_outside_dynamo(function.__code__)


def _never(*values: Any) -> bool:
    return False


def _bound(op: Any, values: dict[str, Any]) -> dict[str, Any]:
    """The operator's arguments as the checks take them: every parameter, defaults applied."""
    values = {k: v for k, v in values.items() if k != "skip_check"}
    if token_backends(str(values.get("backend", ""))) is not None:
        values["backend"] = "auto"  # restricted by a block written in the traced code
    return dict(op._sig.bind(**values).arguments)


def metadata_checks(op: Any, values: dict[str, Any]) -> None:
    """What the dispatcher checks that metadata decides, raising as the eager call would."""
    skip = bool(values.get("skip_check", False))
    bound = _bound(op, values)
    backend = op._backend_name(bound)
    if op.backend_checks and backend != "auto" and backend not in op.backend_checks:
        op._select(None, bound)  # raises the unknown-backend error
    if skip and (backend != "auto" or not op.backend_checks):
        op.check_overlap(bound)  # skip_check skips every check but the overlap rule
        return  # ("auto" still chooses, common check included, as eager)
    tensors = [v for v in bound.values() if v is not None]
    cc = find_compute_capability(*tensors)
    # A meta tensor has no device to run on: it asks for the result's shape under any
    # backend, so a named backend's (device-bound) checks are left out for it.
    meta = any(getattr(t, "is_meta", False) for t in tensors)
    named = backend != "auto" and op.backend_checks and not meta
    if named:  # its capability first, as eager
        op._check_capability(cc, backend)
    if op.common_check is not None:
        op._run_common_check(cc, bound, backend)
    # Fake tensors alias as the real ones will: refused here, out=a is refused however
    # the graph is compiled (aot_eager's functionalization would hand the kernel a copy).
    op.check_overlap(bound)
    if named:
        op._check_explicit(cc, bound, backend)


def torch_family_backend(op: Any) -> str | None:
    """The first backend whose checker declares the torch family, or None."""
    for name, checker in op.backend_checks.items():
        if family_of(checker) is TORCH:
            return name
    return None


def _fake_for(op: Any, fake: Callable[..., Any] | None) -> Callable[[dict[str, Any]], Any] | None:
    if fake is not None:

        def declared(values: dict[str, Any]) -> Any:
            bound = _bound(op, values)
            bound.pop("backend", None)
            return fake(**bound)

        return declared
    reference = torch_family_backend(op)
    if reference is None:
        # No declared fake and no torch-family backend (upstream's declarations): the
        # dispatcher itself runs on the fake tensors, choosing as a call would and running
        # the body, whose torch code gives the metadata.  A body that launches a kernel
        # cannot run on fake tensors: the error says to declare fake=.
        def dispatched(values: dict[str, Any]) -> Any:
            bound = _bound(op, values)
            try:
                return op.call_reference(**bound)
            except Exception as exc:
                # Dynamo breaks the graph at an operator that cannot run on fake tensors
                # (and names it under fullgraph=True): the call then runs eagerly.
                why = RuntimeError(
                    f"{op.api_key}: its body cannot run on fake tensors "
                    f"({type(exc).__name__}: {exc}); declare how its result is shaped with "
                    "backend_requirement(..., fake=fn) to compile it in one graph"
                )
                why.__cause__ = exc
                raise UnsupportedOperatorException(op.torch_op.default) from why

        return dispatched

    def derived(values: dict[str, Any]) -> Any:
        bound = _bound(op, values)
        bound["backend"] = reference
        return op.__wrapped__(**bound)

    return derived


def route_lines(op: Any, where: str) -> list[str]:
    """Generated lines (at function-body indent) that hand a traced call to the operator.

    ``where``: ``"named"`` (a named backend's checked path: a type test and a meta test on
    the first tensor argument first, so that a plain eager call pays only those),
    ``"unchecked"`` (``skip_check=True`` with a named backend: the same tests: a meta
    call's shape is the operator's to give, as no backend can run on meta tensors),
    ``"auto"`` (an ``"auto"`` call: only while ``torch.jit.trace`` records, which takes a
    plain tensor's sizes as traced values) or
    ``"uncached"`` (a call the verdict cache could not key: already the slow path).
    ``torch.jit.trace`` records the operator as one node, decided when the trace runs (it
    would record the chosen backend's torch calls, or nothing of a kernel's launch)."""
    schema = op.torch_schema
    required = [t for t in schema.tensors if t in schema.required] if schema else []
    if not required:  # no tensor a call always passes: nothing cheap to test first
        return []
    tensors = required + [t for t in schema.tensors if t not in required]
    call = render_call("_traceable", op._specs["__func__"])[:-1] + ", skip_check=skip_check)"
    test = f"_traced({', '.join(tensors)})"
    first = tensors[0]
    if where in ("named", "unchecked"):
        test = f"(_type({first}) is not _Tensor or {first}.is_meta or _jit()) and {test}"
    elif where == "auto":
        test = f"_jit() and {test}"
    return [f"    if {test}:", f"        return {call}"]
