"""A dispatcher op's traced route: its torch operator's checks and fake result, the generated
lines that hand a traced call to the operator, and transparent calls.

The trace-time checks (:func:`metadata_checks`) are what the eager call checks that metadata
decides, raising the same errors.  The fake result is the ``fake=`` function, else the body
run with the torch-family backend on fake tensors, else the dispatcher itself.

A traced call is transparent (the graph holds the API's body with a torch-family backend,
``docs/compile.rst``, "Transparent and opaque calls") when :func:`select` decides that backend
while tracing, on fake stand-ins whose dynamic sizes are unbacked symbols (a check that
branches on one cannot decide: the call stays opaque).  Dynamo calls the chooser as a
constant, from arguments it guards: the tensors' metadata, grad mode, the API's block flag,
``backend``, the scalars and :mod:`.guarded_state`.
"""

from __future__ import annotations

import contextvars
import sys
import types
from collections.abc import Callable
from typing import Any

import torch

from flashinfer.codegen.compiler import render_call
from flashinfer.dispatch.capability import find_compute_capability
from flashinfer.dispatch.families import TORCH, family_of
from flashinfer.dispatch.guarded_state import expect_environment, watch_environment
from flashinfer.dispatch.restrictions import block_flag
from flashinfer.dispatch.selection import common_refusal, metadata_only, order_candidates, select
from flashinfer.dispatch.torch_op import TorchOp
from flashinfer.dispatch.traced_blocks import token_backends
from flashinfer.dispatch.verdicts import reads_tensor_data_marked
from flashinfer.gating.gate import experimental_auto_backends_allowed
from flashinfer.gating.messages import ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV
from flashinfer.torch_boundary import (
    FakeTensorMode,
    UnsupportedOperatorException,
    check,
    constant_for_dynamo,
    disable_dynamo,
    inline_for_dynamo,
    run_outside_dynamo,
    unset_fake_temporarily,
)

__all__ = ["attach_torch_op", "metadata_checks", "route_lines"]


def attach_torch_op(
    op: Any,
    fake: Callable[..., Any] | None,
    backward: Callable[[Any, dict[str, Any]], dict[str, Any]] | None,
    jvp: Callable[[dict[str, Any], dict[str, Any]], Any] | None = None,
) -> None:
    """Build ``op.torch_op`` from ``op.torch_schema`` and hand it to the generated code
    (``_traceable``) and to Dynamo; an op without a schema is called eagerly by Dynamo."""
    if op.torch_schema is None:
        op._ns["_traced"] = _never
        disable_dynamo(op.function, op.torch_op_reason)  # a graph break, then eager
        _eager_only(op.function)
        return
    torch_op = TorchOp(
        op.api_key,
        op.function,
        op.__wrapped__,
        op.torch_schema,
        dispatcher=True,
        validate=lambda values: metadata_checks(op, values),
        fake=_fake_for(op, fake),
        backward=backward,
        jvp=jvp,
        transparent=_transparent_plan(op),
        autocast=getattr(op, "autocast", None),
    )
    op.torch_op = torch_op
    op._ns["_traceable"] = torch_op.traceable
    if torch_op.fake is None:  # meta and fake calls run the dispatcher, as they always did
        op._ns["_traced"] = _never
    inline_for_dynamo(op.function, torch_op.traceable)
    # A frame Dynamo starts at the public function itself (after a graph break) runs
    # eagerly: tracing the dispatcher, backend and Triton's interpreter buys nothing.
    _eager_only(op.function)


def _eager_only(function: Any) -> None:
    """Dynamo traces no frame of ``function`` (kept when ``emitter`` regenerates its code)."""
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
    # A meta tensor asks for the result's shape under any backend: a named backend's
    # (device-bound) checks are left out for it.
    meta = any(getattr(t, "is_meta", False) for t in tensors)
    named = backend != "auto" and op.backend_checks and not meta
    if named:  # its capability first, as eager
        op._check_capability(cc, backend)
    if op.common_check is not None:
        op._run_common_check(cc, bound, backend)
    # Fake tensors alias as the real ones will: out=a is refused however the graph is
    # compiled (aot_eager's functionalization would hand the kernel a copy).
    op.check_overlap(bound)
    if named:
        op._check_explicit(cc, bound, backend)


def _fake_for(op: Any, fake: Callable[..., Any] | None) -> Callable[[dict[str, Any]], Any]:
    if fake is not None:

        def declared(values: dict[str, Any]) -> Any:
            bound = _bound(op, values)
            bound.pop("backend", None)
            return fake(**bound)

        return declared
    reference = next((n for n, c in op.backend_checks.items() if family_of(c) is TORCH), None)
    if reference is not None:

        def derived(values: dict[str, Any]) -> Any:
            return op.__wrapped__(**{**_bound(op, values), "backend": reference})

        return derived

    # No fake= and no torch-family backend (upstream's declarations): the dispatcher runs
    # on the fake tensors; a body that launches a kernel cannot, and the error says so.
    def dispatched(values: dict[str, Any]) -> Any:
        try:
            return op.call_reference(**_bound(op, values))
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


def route_lines(op: Any, where: str) -> list[str]:
    """Generated lines that hand a traced call to the operator (``torch.jit.trace`` records
    it as one node).  ``where``: ``"named"`` or ``"unchecked"`` (a named backend: a type and
    a meta test on the first tensor first, so a plain eager call pays only those),
    ``"auto"`` (only while ``torch.jit.trace`` records) or ``"uncached"`` (the slow path)."""
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


# ---- transparent calls -------------------------------------------------------------------


def _stand_ins(facts: dict[str, Any], shape_env: Any) -> dict[str, Any] | None:
    """Fake tensors with the traced tensors' metadata, or None (a non-contiguous tensor with
    dynamic strides).  A dynamic size is an unbacked symbol known only to be at least 2
    (Dynamo specializes 0 and 1), so a decided choice holds for every size accepted."""
    symbols: dict[str, Any] = {}

    def dim(d: Any) -> Any:
        if isinstance(d, str) and d not in symbols:
            symbols[d] = shape_env.create_unbacked_symint()
            check(symbols[d] >= 2)
        return symbols[d] if isinstance(d, str) else d

    made: dict[str, Any] = {}
    for name, fact in facts.items():
        if fact is None:
            made[name] = None
            continue
        sizes, strides, contiguous, dtype, device, requires_grad = fact
        shape = [dim(d) for d in sizes]
        if contiguous:
            t = torch.empty(shape, dtype=dtype, device=device)
        elif strides is not None:
            t = torch.empty_strided(shape, strides, dtype=dtype, device=device)
        else:
            return None
        made[name] = t.requires_grad_(True) if requires_grad else t
    return made


class TransparentPlan:
    """What a dispatcher op's traced code needs to be transparent: the torch-family
    ``backends``, the chooser Dynamo calls as a constant, the API's block flag, its body."""

    def __init__(self, op: Any, backends: tuple[str, ...]) -> None:
        self.op = op
        self.backends = frozenset(backends)
        self.flag = block_flag(op.api_key)
        self.body = _traceable_body(op)
        # What a choice reads besides the call (guarded by the traced code: guarded_state).
        gate = (ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV,) if op.experimental_backends else ()
        self.environment = tuple(dict.fromkeys((*gate, *op.environment)))
        expect_environment(self.environment)
        common = reads_tensor_data_marked(op.common_check)
        self.named_reads_data = frozenset(
            name for name, c in op.backend_checks.items() if common or reads_tensor_data_marked(c)
        )
        schema = op.torch_schema
        keys = [*schema.positional, *schema.keyword, "backend", "skip_check", "restricted"]
        tensors = set(schema.tensors)

        def choose(grad_on: bool, guarded: tuple[Any, ...], *values: Any) -> str | None:
            """The transparent backend of a traced call with these (constant) arguments, or
            None (opaque).  The last value is a traced block's restriction token or None;
            ``guarded`` (guarded_state's values) is passed only for Dynamo to guard."""
            return self.decide(dict(zip(keys, values, strict=True)), tensors, grad_on)

        environment = self.environment

        def watch() -> None:
            """The first compiled choice starts keeping the variables it reads in GUARDED."""
            watch_environment(environment)

        # Sound as constants: every argument is guarded by the traced code.
        self.choose = constant_for_dynamo(choose)
        self.watch = constant_for_dynamo(watch)

    def decide(self, args: dict[str, Any], tensors: set[str], grad_on: bool) -> str | None:
        from torch.fx.experimental.symbolic_shapes import ShapeEnv

        from flashinfer.dispatch.choice_log import tuner_view

        op, backend = self.op, args["backend"]
        listed = token_backends(args.pop("restricted") or "")
        if backend == "auto":
            view = tuner_view()
            if view is not None and view.registered(op.api_key):
                return None
            # The gate is guarded, so it may decide here; a block listing an experimental
            # backend warns when it is picked: a run time's call.
            if listed is not None and any(b in op.experimental_backends for b in listed):
                return None
            if op.reads_data:  # no guard can see data: decided per call
                return None
        elif backend not in self.backends or backend in self.named_reads_data:
            return None
        try:
            shape_env = ShapeEnv()
            with (
                unset_fake_temporarily(),
                FakeTensorMode(shape_env=shape_env),
                torch.set_grad_enabled(grad_on),
            ):
                made = _stand_ins({n: v for n, v in args.items() if n in tensors}, shape_env)
                if made is None:
                    return None
                values = {**args, **made}
                if backend != "auto":
                    metadata_checks(op, values)  # raises what the eager call would raise
                    return str(backend)
                return self._auto(values, listed)
        except Exception:  # refused, or undecidable on metadata: the operator decides
            return None

    def _auto(self, values: dict[str, Any], listed: tuple[str, ...] | None) -> str | None:
        """The ``"auto"`` choice when it is certain whatever metadata left undecided: the
        order of the candidates and every undecided backend is decided, and puts it first."""
        op = self.op
        values.pop("skip_check")
        bound = dict(op._sig.bind(**{**values, "backend": "auto"}).arguments)
        cc, no_data = op._call_capability(bound), metadata_only(bound)
        if common_refusal(op, cc, bound, no_data=no_data) is not None:
            return None
        # Unless a block is written in the traced code, as if no use_backends block were
        # open (the traced code takes this choice only while none naming the API is open
        # anywhere): a fresh context.
        now = listed if listed is not None else contextvars.Context().run(op._restriction)
        sel = select(op, cc, bound, now, no_data=no_data, explaining=True)
        if not sel.candidates or sel.candidates[0] not in self.backends:
            return None
        chosen = sel.candidates[0]
        undecided = {b for b, r in sel.refusals.items() if r[0] == "undecided"}
        if listed is None and not experimental_auto_backends_allowed():
            undecided -= set(op.experimental_backends)
        maybe = set(sel.candidates) | undecided
        if listed is not None:
            return chosen if [b for b in listed if b in maybe][:1] == [chosen] else None
        order = [b for b in op.backend_checks if b in maybe]
        ordered, _, certain = order_candidates(op, bound, order, no_data=True)
        return chosen if certain and ordered[:1] == [chosen] else None


def _traceable_body(op: Any) -> Callable[..., Any]:
    """The API's body whose global name of the API reads a plain record of the public
    function's attributes (through the public function Dynamo would read its stand-in)."""
    func, public = op.__wrapped__, op.function
    view = types.SimpleNamespace(**{k: v for k, v in vars(public).items() if not k.startswith("_")})
    namespace = dict(func.__globals__)
    namespace[func.__name__] = view
    closure = func.__closure__
    if closure is not None:  # an API defined in a function names itself through a cell
        closure = tuple(
            types.CellType(view) if name == func.__name__ else cell
            for name, cell in zip(func.__code__.co_freevars, closure, strict=True)
        )
    body = types.FunctionType(func.__code__, namespace, func.__name__, func.__defaults__, closure)
    body.__kwdefaults__ = func.__kwdefaults__
    return body


def _transparent_plan(op: Any) -> TransparentPlan | None:
    """The plan of an op whose traced calls can be transparent, or None: no stable
    torch-family backend, no schema, an argument written in place, or globals no module
    holds (Dynamo guards a traced function's globals through ``sys.modules``)."""
    schema, func = op.torch_schema, op.__wrapped__
    if schema is None or schema.mutated:
        return None
    module = sys.modules.get(getattr(func, "__module__", None) or "")
    if getattr(module, "__dict__", None) is not func.__globals__:
        return None
    backends = tuple(
        name
        for name, c in op.backend_checks.items()
        if family_of(c) is TORCH and name not in op.experimental_backends
    )
    return TransparentPlan(op, backends) if backends else None
