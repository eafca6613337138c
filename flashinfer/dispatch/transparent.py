"""Transparent compiled calls: when a traced call would run torch code, the graph holds that code.

A traced call is normally the API's opaque operator (:mod:`.torch_op`), which chooses at run
time.  When the choice is certain, on every call the graph accepts, to be a stable
torch-family backend, Dynamo is handed the API's body with that backend instead, and inductor
fuses its torch operations with their neighbours.  The conditions and what stays decided at
run time are in ``docs/compile.rst`` ("Transparent and opaque calls").

The decision is made while tracing by a function Dynamo calls as a constant, from arguments
it guards: the tensors' metadata, grad mode, the API's block flag, ``backend``, the scalars
and :mod:`.guarded_state`.  It is made on fake stand-ins whose dynamic sizes are unbacked
symbols (a check that branches on one cannot decide: the call stays opaque), by the eager
selection (:func:`~flashinfer.dispatch.explain.explain_call`).  A transparent call writes no
per-thread record and no choice log.
"""

from __future__ import annotations

import contextvars
import sys
import types
from collections.abc import Callable, Mapping
from typing import Any

import torch

from flashinfer.dispatch.families import TORCH, family_of
from flashinfer.dispatch.guarded_state import expect_environment, watch_environment
from flashinfer.dispatch.restrictions import block_flag
from flashinfer.dispatch.traced_blocks import token_backends
from flashinfer.dispatch.verdicts import reads_tensor_data_marked
from flashinfer.gating.messages import ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV
from flashinfer.torch_boundary import (
    FakeTensorMode,
    check,
    constant_for_dynamo,
    unset_fake_temporarily,
)

__all__ = ["TransparentPlan", "scalar_value", "tensor_facts", "transparent_plan"]


def scalar_value(value: Any) -> Any:
    """A number argument as the constant the choice reads.  Traced by Dynamo: a symbolic
    number (a float or int Dynamo did not specialize) is specialized, with a guard on its
    value; anything else is passed as it is.  Eagerly, the value itself."""
    from torch.fx.experimental.symbolic_shapes import guard_scalar

    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return guard_scalar(value)
    return value


def tensor_facts(*tensors: Any) -> tuple[Any, ...]:
    """What the choice reads of the tensor arguments, as constants, one entry per tensor
    (None for one not given): sizes, strides (None unless all static), whether it is
    contiguous, dtype, device, ``requires_grad``.  Traced by Dynamo: a static size is its
    int; a dynamic one is the name of its class, ``"s0"``, ``"s1"``..., shared by every
    size Dynamo knows equal (its duck sizing: an input's hidden size and its weight's),
    asked with ``statically_known_true``, which adds no guard."""
    from torch.fx.experimental.symbolic_shapes import has_static_value, statically_known_true

    classes: list[Any] = []

    def dim(s: Any) -> Any:
        if has_static_value(s):  # (Dynamo says type(s) is int of a symbol too)
            return int(s)
        for i, known in enumerate(classes):
            if statically_known_true(known == s):
                return f"s{i}"
        classes.append(s)
        return f"s{len(classes) - 1}"

    facts: list[Any] = []
    for t in tensors:
        if t is None:
            facts.append(None)
            continue
        sizes = tuple(dim(s) for s in t.shape)
        strides = tuple(t.stride())
        static = all(has_static_value(s) for s in strides)
        facts.append(
            (
                sizes,
                tuple(int(s) for s in strides) if static else None,
                t.is_contiguous(),
                t.dtype,
                t.device,
                t.requires_grad,
            )
        )
    return tuple(facts)


def _stand_ins(facts: dict[str, Any], shape_env: Any) -> dict[str, Any] | None:
    """Fake tensors with the traced tensors' metadata (in the caller's fake mode), or None
    when a non-contiguous tensor's strides are dynamic.  A dynamic size is an unbacked
    symbol of ``shape_env``, one per class, known only to be at least 2 (Dynamo specializes
    0 and 1): a check that branches on it cannot decide, so the choice is left to run
    time, and a choice that is decided holds for every size the graph accepts."""
    symbols: dict[str, Any] = {}

    def dim(d: Any) -> Any:
        if not isinstance(d, str):
            return d
        if d not in symbols:
            symbols[d] = shape_env.create_unbacked_symint()
            check(symbols[d] >= 2)
        return symbols[d]

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
    """What a dispatcher op's traced code needs to be transparent: the backends that can be,
    the chooser Dynamo calls as a constant function, and the API's block flag."""

    def __init__(
        self, op: Any, backends: tuple[str, ...], checks: Callable[[Any, dict[str, Any]], None]
    ) -> None:
        self.op = op
        self.checks = checks  # the operator's trace-time checks (tracing.metadata_checks)
        self.backends = frozenset(backends)
        self.flag = block_flag(op.api_key)
        self.choose = self._chooser()
        self.body = traceable_body(op)
        # What a choice reads besides the call (guarded by the traced code: guarded_state).
        gate = (ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV,) if op.experimental_backends else ()
        self.environment = tuple(dict.fromkeys((*gate, *op.environment)))
        expect_environment(self.environment)
        common = reads_tensor_data_marked(op.common_check)
        self.auto_reads_data = op.reads_data
        self.named_reads_data = frozenset(
            name
            for name, check in op.backend_checks.items()
            if common or reads_tensor_data_marked(check)
        )

        environment = self.environment

        def watch() -> None:
            """Called by the traced code while tracing (a constant function to Dynamo):
            the first compiled choice starts keeping the variables it reads in GUARDED."""
            watch_environment(environment)

        self.watch = constant_for_dynamo(watch)

    def _chooser(self) -> Callable[..., str | None]:
        plan = self
        schema = self.op.torch_schema
        tensors = set(schema.tensors)
        names = [*schema.positional, *schema.keyword]

        def choose(grad_on: bool, guarded: tuple[Any, ...], *values: Any) -> str | None:
            """The transparent backend a traced call with these (constant) arguments would
            run when no ``use_backends`` block entered outside the traced code names the API
            (the traced code tests that itself), or None: the call stays opaque and decides
            at run time.  The last value is the restriction of a block written in the
            traced code (:mod:`.traced_blocks`), or None.  ``guarded``: the values of
            :mod:`.guarded_state` the choice reads, passed only so that Dynamo guards
            them."""
            keys = [*names, "backend", "skip_check", "restricted"]
            args = dict(zip(keys, values, strict=True))
            return plan.decide(args, tensors, grad_on)

        # Dynamo calls it while tracing and uses its result as a constant: sound here
        # because every argument is guarded (see the module docstring).
        return constant_for_dynamo(choose)

    def decide(self, args: Mapping[str, Any], tensors: set[str], grad_on: bool) -> str | None:
        from torch.fx.experimental.symbolic_shapes import ShapeEnv

        from flashinfer.dispatch.choice_log import tuner_view
        from flashinfer.dispatch.explain import (
            DECLARATION_ORDER,
            HEURISTIC,
            RESTRICTED,
            explain_call,
        )

        args = dict(args)
        op, backend = self.op, args["backend"]
        listed = token_backends(args.pop("restricted") or "")
        if backend == "auto":
            view = tuner_view()
            if view is not None and view.registered(op.api_key):
                return None
            # The gate is guarded (guarded_state), so it may decide here; a block listing
            # an experimental backend warns when it is picked: a run time's call.
            if listed is not None and any(b in op.experimental_backends for b in listed):
                return None
            if self.auto_reads_data:  # no guard can see data: decided per call
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
                    self.checks(op, values)  # raises what the eager call would raise
                    return str(backend)
                values.pop("skip_check")
                # As if no use_backends block were open (a fresh context: the traced code
                # takes this choice only while none naming the API is open anywhere), so
                # that a graph traced inside a block keeps the guard on the block flag.
                explained = contextvars.Context().run(
                    explain_call, op, (), values, restricted=listed
                )
                if (
                    explained.chosen in self.backends
                    and explained.source in (HEURISTIC, DECLARATION_ORDER, RESTRICTED)
                    and self._certain(explained, values, listed)
                ):
                    return str(explained.chosen)
        except Exception:  # refused, or undecidable on metadata: the operator decides
            return None
        return None  # tuned, or not certain on metadata: the operator decides

    def _certain(self, explained: Any, values: dict[str, Any], listed: Any) -> bool:
        """Whether ``explained.chosen`` comes first whatever metadata left undecided: the
        order of the candidates and every backend whose check could not decide (gated as
        the call is) is decided, and puts it first."""
        from flashinfer.dispatch.selection import order_candidates

        op = self.op
        undecided = {v.backend for v in explained.verdicts if not v.decided}
        if not explained.gate_on and listed is None:
            undecided -= set(op.experimental_backends)
        maybe = set(explained.candidates) | undecided
        if listed is not None:
            return [b for b in listed if b in maybe][:1] == [explained.chosen]
        bound = dict(op._sig.bind(**{**values, "backend": "auto"}).arguments)
        ordered, _, certain = order_candidates(
            op, bound, [b for b in op.backend_checks if b in maybe], no_data=True
        )
        return certain and ordered[:1] == [explained.chosen]


def traceable_body(op: Any) -> Callable[..., Any]:
    """The API's body as Dynamo can trace it: the same code, whose global name of the API
    reads a plain record of the public function's attributes (``implementations``, ...).
    Through the public function itself Dynamo would read the stand-in it inlines for it
    (``inline_for_dynamo``), which has none of them.  The module's other globals are
    those of the moment the API's operator was built (the API's own name, as a global or
    a closure's cell, is the only one replaced)."""
    func = op.__wrapped__
    public = op.function
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


def transparent_plan(
    op: Any, checks: Callable[[Any, dict[str, Any]], None]
) -> TransparentPlan | None:
    """The plan of a ``backend_requirement`` op whose traced calls can be transparent, or
    None: no stable torch-family backend, no operator schema, or an API that writes an
    argument in place."""
    schema = op.torch_schema
    if schema is None or schema.mutated:
        return None
    func = op.__wrapped__
    module = sys.modules.get(getattr(func, "__module__", None) or "")
    if getattr(module, "__dict__", None) is not func.__globals__:
        # Dynamo guards a traced function's globals through its module (sys.modules): an
        # API defined where no module holds its globals (a doctest, exec'd code) stays opaque.
        return None
    backends = tuple(
        name
        for name, checker in op.backend_checks.items()
        if family_of(checker) is TORCH and name not in op.experimental_backends
    )
    return TransparentPlan(op, backends, checks) if backends else None
