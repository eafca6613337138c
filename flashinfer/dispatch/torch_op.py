"""One torch operator per API (``torch.ops.flashinfer.<name>``): what compilers, export, fake
tensors and ``torch.library.opcheck`` see instead of the generated dispatcher.

Registered with ``torch.library.Library``'s ``define``/``impl``, not ``custom_op``: the
operator is never on the eager path (an eager call runs the dispatcher directly), so the
wrapper ``custom_op`` puts around a call would only cost; and ``define`` takes the schema
read from the API's signature (:mod:`.op_schema`) as text, with its mutated arguments and
``out`` overload, which ``custom_op`` infers from annotations it does not share.

- **The real implementation** calls the API's public function, that is the dispatcher, with
  the arguments it was given: every choice (the gate, ``use_backends``,
  ``FLASHINFER_BACKENDS``, the heuristic, preferences, the autotuner, warn-once, the records,
  the choice log, the overlap checks) is made at run time, in the caller's thread and
  context, exactly as in eager.  Its result is made contiguous and never an input (an
  operator's output may not alias its inputs), so that it has the fake's layout whichever
  backend ran.
- **The fake implementation** reads metadata only: the common check and, for a named
  backend, that backend's capability and checker (a refusal is raised at trace time, as the
  eager call would raise it); the result's metadata comes from the API's ``fake=`` function,
  or is derived by running the API's body with its torch-family backend on the fake tensors
  (``torch`` ops handle them); contiguous either way.  Nothing ambient is read (no gate, no
  restriction, no tuned result), so compiling adds no guard on them.
- **Autograd**: an API that declares ``backward=`` gets it registered for its default
  overload; any other use with a tensor that requires grad (no formula, an ``out=`` or
  in-place overload) is refused at the call with an error naming the fix, never silently
  detached.

``traceable`` is a function with the API's own parameters that calls the operator; the
public function carries it as ``_torchdynamo_inline``, the attribute by which Dynamo inlines
a stand-in for a function (as it does for ``torch.jit.script``), so a compiled call sees the
operator and no line of the dispatcher, at no cost to eager calls and without importing
Dynamo.  The dispatcher also routes a call made on fake or meta tensors, or while exporting,
to it (:func:`traced_call`).
"""

from __future__ import annotations

import itertools
import re
import threading
from collections.abc import Callable, Iterable
from typing import Any

import torch

from flashinfer.dispatch.codegen import ParameterList, compile_function, module_namespace
from flashinfer.dispatch.op_schema import OpSchema, SchemaUnavailable, op_schema

__all__ = ["NAMESPACE", "TorchOp", "build_torch_op", "register_api_op", "traced_call"]

NAMESPACE = "flashinfer"
"""The namespace of every API's operator: ``torch.ops.flashinfer.rmsnorm``."""

_names_lock = threading.Lock()
_names_taken: set[str] = set()


def operator_name(api_key: str) -> str:
    """The operator's name for the API of qualified name ``api_key``: the API's own name for
    the package's APIs (``flashinfer.norm.rmsnorm`` -> ``rmsnorm``), the qualified name
    spelled as an identifier for any other (``app.ops.scale`` -> ``app_ops_scale``); a name
    given before (a module reloaded, a test's op) is numbered (``rmsnorm_2``)."""
    module, _, name = api_key.rpartition(".")
    if not (module == "flashinfer" or module.startswith("flashinfer.")) or "<" in api_key:
        name = re.sub(r"\W+", "_", api_key.replace("<locals>", "")).strip("_") or "op"
    if not name[0].isalpha():
        name = f"op_{name}"
    with _names_lock:
        candidate = name
        for n in itertools.count(2):
            if candidate not in _names_taken and not _defined(candidate):
                break
            candidate = f"{name}_{n}"
        _names_taken.add(candidate)
    return candidate


def _defined(name: str) -> bool:
    return bool(torch._C._jit_get_schemas_for_operator(f"{NAMESPACE}::{name}"))


class TorchOp:
    """The torch operator of one API, registered when built (see the module docstring).

    ``public`` is what the real implementation calls (the API as users call it);
    ``validate(values)`` runs the fake-time checks on the arguments by name;
    ``fake(values)`` returns the default overload's result on fake tensors, or is ``None``
    when the operator has no fake implementation (a compiled call then graph-breaks: it
    runs eagerly, correct but not in the graph); ``backward(grad, values)`` returns the
    gradients by argument name.
    """

    def __init__(
        self,
        api_key: str,
        public: Callable[..., Any],
        params: ParameterList,
        schema: OpSchema,
        *,
        validate: Callable[[dict[str, Any]], None],
        fake: Callable[[dict[str, Any]], Any] | None,
        backward: Callable[[Any, dict[str, Any]], dict[str, Any]] | None,
        extra_kwonly: str | None,
    ) -> None:
        self.api_key = api_key
        self.schema = schema
        self.public = public
        self.name = operator_name(api_key)
        self.qualname = f"{NAMESPACE}::{self.name}"
        self.default_name = f"{self.qualname}.default"
        self._validate = validate
        self._fake = fake
        self.fake = fake  # the fake implementation, or None (see the class docstring)
        self._backward = backward
        # Every argument of the default overload, in schema order (autograd's inputs).
        self._names = [*schema.positional, *schema.keyword]
        if extra_kwonly:
            self._names += ["backend", "skip_check"]
        self.library = torch.library.Library(NAMESPACE, "FRAGMENT")  # lives with the op
        self._register()
        packet = getattr(torch.ops, NAMESPACE)
        packet = getattr(packet, self.name)
        self.default = packet.default
        self.out = packet.out if schema.out is not None else None
        self.traceable = self._traceable(params, extra_kwonly)

    # ---- registration --------------------------------------------------------------------

    def _register(self) -> None:
        lib, schema, name = self.library, self.schema, self.name
        lib.define(f"{name}{schema.default}")
        lib.impl(name, self._real, "CompositeExplicitAutograd")
        if self._fake is not None:
            torch.library.register_fake(self.qualname, self._fake_impl, lib=lib)
        else:  # not the real implementation on meta tensors: compilers graph-break
            lib.impl(name, _no_metadata(self.default_name), "Meta")
        if self._backward is not None and schema.returns == "tensor" and not _mutates(schema):
            torch.library.register_autograd(
                self.qualname, self._grad, setup_context=self._setup, lib=lib
            )
        else:
            lib.impl(name, self._refusing_grad(f"{self.qualname}.default"), "Autograd")
        if schema.out is not None:
            lib.define(f"{name}.out{schema.out}")
            lib.impl(f"{name}.out", self._real_out, "CompositeExplicitAutograd")
            if self._fake is not None:
                torch.library.register_fake(f"{self.qualname}.out", self._fake_out, lib=lib)
            else:
                lib.impl(f"{name}.out", _no_metadata(f"{self.qualname}.out"), "Meta")
            lib.impl(f"{name}.out", self._refusing_grad(f"{self.qualname}.out"), "Autograd")

    def _values(self, args: tuple, kwargs: dict[str, Any]) -> dict[str, Any]:
        values = dict(zip(self.schema.positional, args, strict=False))
        values.update(kwargs)
        return values

    def _call_public(self, values: dict[str, Any]) -> Any:
        args = [values[n] for n in self.schema.positional if n in values]
        kwargs = {n: v for n, v in values.items() if n not in self.schema.positional}
        # Below autograd (the operator's gradient is its own, or refused): nothing inside
        # records a graph, or a backend would wrap its kernel for a gradient no one takes.
        with torch.no_grad():
            return self.public(*args, **kwargs)

    def _real(self, *args: Any, **kwargs: Any) -> Any:
        values = self._values(args, kwargs)
        result = self._call_public(values)
        inputs = [values[n] for n in self.schema.tensors if values.get(n) is not None]
        if self.schema.returns == "tensor":
            return _fresh(result, inputs)
        if self.schema.returns == "tensors":
            return tuple(_fresh(r, inputs) for r in result)
        return None

    def _real_out(self, *args: Any, **kwargs: Any) -> None:
        self._call_public(self._values(args, kwargs))

    def _fake_impl(self, *args: Any, **kwargs: Any) -> Any:
        values = self._values(args, kwargs)
        self._validate(values)
        assert self._fake is not None
        result = self._fake(values)
        if self.schema.returns == "tensor":
            return _contiguous_like(result)
        if self.schema.returns == "tensors":
            return tuple(_contiguous_like(r) for r in result)
        return None

    def _fake_out(self, *args: Any, **kwargs: Any) -> None:
        self._validate(self._values(args, kwargs))

    def _setup(self, ctx: Any, inputs: tuple, output: Any) -> None:
        values = dict(zip(self._names, inputs, strict=False))
        tensors = [n for n in self.schema.tensors if isinstance(values.get(n), torch.Tensor)]
        ctx.tensor_names = tensors
        ctx.save_for_backward(*(values[n] for n in tensors))
        ctx.other = {n: v for n, v in values.items() if n not in tensors}

    def _grad(self, ctx: Any, grad: torch.Tensor) -> tuple:
        values = dict(ctx.other)
        values.update(zip(ctx.tensor_names, ctx.saved_tensors, strict=True))
        assert self._backward is not None
        grads = self._backward(grad, values)
        return tuple(grads.get(n) if n in ctx.tensor_names else None for n in self._names)

    def _refusing_grad(self, overload: str) -> Callable[..., Any]:
        """The ``Autograd`` kernel of an overload with no gradient: refuses a tensor that
        requires grad, else runs the operator below autograd."""
        tensors = self.schema.tensors
        positional = self.schema.positional
        api = self.api_key

        def kernel(*args: Any, **kwargs: Any) -> Any:
            # Export records an inference graph; the exported program's call of the operator
            # comes back here at run time, where the refusal holds.
            if torch.is_grad_enabled() and not torch.compiler.is_exporting():
                values = dict(zip(positional, args, strict=False))
                values.update(kwargs)
                needs = [
                    n
                    for n in tensors
                    if isinstance(values.get(n), torch.Tensor) and values[n].requires_grad
                ]
                if needs:
                    raise RuntimeError(
                        f"{overload} ({api}) cannot differentiate: {', '.join(needs)} "
                        "requires grad, and this form of the op has no gradient (an out= "
                        "or in-place form, or an op that declares no backward). Call it "
                        "under torch.no_grad(), pass tensors that do not require grad, or "
                        "use the op's functional form (no out=) with backend='torch'"
                    )
            op = self.default if overload.endswith(".default") else self.out
            assert op is not None
            with torch._C._AutoDispatchBelowAutograd():
                return op(*args, **kwargs)

        return kernel

    # ---- the function compilers inline ---------------------------------------------------

    def _traceable(self, params: ParameterList, extra_kwonly: str | None) -> Callable[..., Any]:
        """The API's parameter list, calling the operator: ``out=`` given, the ``out``
        overload (the API returns ``out``); otherwise the default one."""
        ns = module_namespace(self.api_key, "traceable")
        ns["_default"], ns["_out"] = self.default, self.out
        schema = self.schema

        def call(target: str, out: bool) -> str:
            pos = ", ".join(schema.positional)
            kws = [f"{n}={n}" for n in schema.keyword]
            if out:
                kws.append(f"{schema.out_param}={schema.out_param}")
            if extra_kwonly:  # backend and skip_check
                kws += ["backend=backend", "skip_check=skip_check"]
            return f"{target}({', '.join(filter(None, [pos, *kws]))})"

        lines: list[str] = []
        if schema.out_param is not None:
            lines += [
                f"    if {schema.out_param} is not None:",
                f"        {call('_out', True)}",
                f"        return {schema.out_param}",
            ]
        if schema.returns == "none":
            lines += [f"    {call('_default', False)}", "    return None"]
        else:
            lines.append(f"    return {call('_default', False)}")
        return compile_function(
            params.def_params(ns, extra_kwonly), lines, ns, role="traceable", api=self.api_key
        )


def _no_metadata(overload: str) -> Callable[..., Any]:
    """The ``Meta`` kernel of an operator without a fake implementation: says so in the
    exception fake tensors raise for an operator they cannot run, on which Dynamo breaks the
    graph (the call then runs eagerly) rather than failing."""
    from torch._subclasses.fake_tensor import UnsupportedOperatorException

    message: Any = (  # torch gives the operator; it only ever formats it
        f"{overload} has no fake implementation: its API declares no fake= and has no "
        "torch-family backend to derive one from"
    )

    def kernel(*args: Any, **kwargs: Any) -> Any:
        raise UnsupportedOperatorException(message)

    return kernel


def _mutates(schema: OpSchema) -> bool:
    return "!)" in schema.default


def _fresh(result: Any, inputs: Iterable[torch.Tensor]) -> Any:
    """``result`` as the operator must return it: contiguous, sharing no storage with an
    input (a backend may hand back a view, or an input itself)."""
    if not isinstance(result, torch.Tensor):
        return result
    if not result.is_contiguous():
        return result.contiguous()
    storage = result.untyped_storage().data_ptr()
    if any(t.untyped_storage().data_ptr() == storage for t in inputs if t.numel()):
        return result.clone()
    return result


def _contiguous_like(result: Any) -> Any:
    if not isinstance(result, torch.Tensor):
        return result
    return torch.empty_like(result, memory_format=torch.contiguous_format)


def traced_call(*values: Any) -> bool:
    """Whether a call with these arguments is being traced rather than run: a fake, meta or
    functional tensor among them, or export (or Dynamo) in progress.  The dispatcher then
    calls the operator (see ``traceable``), whose fake implementation answers.  Only asked
    on paths that already cost more than this: a call whose argument types the dispatcher
    has not learnt, or a named backend's call on a tensor that is not a plain one."""
    for v in values:
        if isinstance(v, torch.Tensor):
            if v.is_meta:
                return True
            if type(v) is not torch.Tensor and type(v) is not torch.nn.Parameter and _is_fake(v):
                return True
    return bool(torch.compiler.is_compiling())


def _is_fake(t: torch.Tensor) -> bool:
    from torch._subclasses.fake_tensor import FakeTensor
    from torch._subclasses.functional_tensor import FunctionalTensor

    return isinstance(t, (FakeTensor, FunctionalTensor))


def register_api_op(
    public: Callable[..., Any],
    *,
    overlap: Any = None,
    validate: Callable[[dict[str, Any]], None],
    fake: Callable[[dict[str, Any]], Any] | None,
    backward: Callable[[Any, dict[str, Any]], dict[str, Any]] | None = None,
) -> TorchOp:
    """The operator of an API that is not a ``backend_requirement`` op (an experimental
    API's marked function): its schema from ``public``'s signature, ``overlap``'s written
    arguments mutated; Dynamo inlines the operator's call in its place.  ``TypeError`` when
    the signature has no schema (say why in the API, or do not register one)."""
    func = getattr(public, "__wrapped__", public)
    key = f"{func.__module__}.{func.__qualname__}"
    written = tuple(overlap.written) if overlap is not None else ()
    op, reason = build_torch_op(
        key,
        public,
        func,
        written,
        dispatcher=False,
        validate=validate,
        fake=fake,
        backward=backward,
    )
    if op is None:
        raise TypeError(reason)
    public._torchdynamo_inline = op.traceable  # type: ignore[attr-defined]
    return op


def build_torch_op(
    api_key: str,
    public: Callable[..., Any],
    func: Callable[..., Any],
    written: Iterable[str],
    *,
    dispatcher: bool,
    validate: Callable[[dict[str, Any]], None],
    fake: Callable[[dict[str, Any]], Any] | None,
    backward: Callable[[Any, dict[str, Any]], dict[str, Any]] | None,
) -> tuple[TorchOp | None, str | None]:
    """The operator of an API, or ``None`` and why there is none (its signature has no
    schema).  ``func`` is the API's own function (its annotations); ``public`` what users
    call."""
    try:
        schema = op_schema(func, frozenset(written), dispatcher=dispatcher)
    except SchemaUnavailable as exc:
        return None, f"{api_key} has no torch operator: {exc}"
    omit = ("skip_check",) if dispatcher else ()
    params = ParameterList(func, omit=omit)
    extra = "skip_check=False" if dispatcher else None
    op = TorchOp(
        api_key,
        public,
        params,
        schema,
        validate=validate,
        fake=fake,
        backward=backward,
        extra_kwonly=extra,
    )
    return op, None
