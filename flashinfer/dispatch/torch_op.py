"""One torch operator per API (``torch.ops.flashinfer.<name>``): what compilers, export, fake
tensors and ``torch.library.opcheck`` see instead of the dispatcher (``docs/compile.rst``).

Registered with ``torch.library.Library`` (``define``/``impl`` take the schema read from the
signature as text; ``custom_op``'s wrapper would only cost, as the operator is never on the
eager path).  Its real implementation is the API's public function (every choice made at run
time, as in eager); its fake one metadata only; ``backward=``/``jvp=`` go through a
single-level autograd Function.  :mod:`.traceable` is what Dynamo inlines for the public
function; the dispatcher hands calls on fake or meta tensors to it (:func:`traced_call`).
"""

from __future__ import annotations

import inspect
import itertools
import threading
from collections.abc import Callable, Iterable
from typing import Any, cast

import torch

from flashinfer.codegen.compiler import compile_function, module_namespace
from flashinfer.dispatch.autocast import AutocastRule, register_autocast_kernels
from flashinfer.dispatch.op_schema import OpSchema, SchemaUnavailable, op_schema
from flashinfer.dispatch.restrictions import token_block
from flashinfer.dispatch.traceable import build_traceable
from flashinfer.dispatch.traced_blocks import RESTRICTED_PREFIX
from flashinfer.torch_boundary import (
    FakeTensor,
    FunctionalTensor,
    SingleLevelFunction,
    apply_at_this_level,
    below_autograd,
    forward_ad_open,
    inline_for_dynamo,
    operator_defined,
    run_outside_dynamo,
)

NAMESPACE = "flashinfer"
NO_GRAD_SUFFIX = "no_grad"
"""``torch.ops.flashinfer.rmsnorm_no_grad``: what a compiled call runs when nothing requires
grad: the flat schema (``OpSchema.flat``), the real kernel, no ``Autograd`` kernel."""

_names_lock = threading.Lock()
_names_taken: set[str] = set()


def operator_name(api_key: str) -> str:
    """The operator's name: ``rmsnorm`` for ``flashinfer.norm.rmsnorm``, ``app_ops_scale``
    for ``app.ops.scale``; a name taken before (a module reloaded) is numbered."""
    name = spelled_operator_name(api_key)
    with _names_lock:
        candidate = name
        for n in itertools.count(2):
            companion = f"{candidate}_{NO_GRAD_SUFFIX}"  # its no-grad operator's name
            if not ({candidate, companion} & _names_taken or _defined(candidate)) and not _defined(
                companion
            ):
                break
            candidate = f"{name}_{n}"
        _names_taken.update({candidate, f"{candidate}_{NO_GRAD_SUFFIX}"})
    return candidate


def spelled_operator_name(api_key: str) -> str:
    """:func:`operator_name` before numbering."""
    module, _, name = api_key.rpartition(".")
    if not (module == "flashinfer" or module.startswith("flashinfer.")) or "<" in api_key:
        spelled = "".join(
            c if c.isascii() and (c.isalnum() or c == "_") else " "
            for c in api_key.replace("<locals>", "")
        )
        name = "_".join(spelled.split()) or "op"
    if not name[0].isalpha():
        name = f"op_{name}"
    return name


def _defined(name: str) -> bool:
    return operator_defined(f"{NAMESPACE}::{name}")


class TorchOp:
    """The torch operator of one API, registered when built.  ``public``: what the real
    kernel calls; ``validate(values)``/``fake(values)``: the fake-time checks and result by
    argument name (``fake`` None: a compiled call graph-breaks and runs eagerly);
    ``backward(grad, values)``: the gradients by argument name."""

    def __init__(
        self,
        api_key: str,
        public: Callable[..., Any],
        func: Callable[..., Any],
        schema: OpSchema,
        *,
        dispatcher: bool,
        validate: Callable[[dict[str, Any]], None],
        fake: Callable[[dict[str, Any]], Any] | None,
        backward: Callable[[Any, dict[str, Any]], dict[str, Any]] | None,
        jvp: Callable[[dict[str, Any], dict[str, Any]], Any] | None = None,
        transparent: Any = None,
        autocast: AutocastRule | None = None,
    ) -> None:
        self.api_key = api_key
        self.autocast = autocast
        self.transparent = transparent  # a dispatcher op's tracing.TransparentPlan, or None
        self.schema = schema
        self.public = public
        self.name = operator_name(api_key)
        self.qualname = f"{NAMESPACE}::{self.name}"
        self.default_name = f"{self.qualname}.default"
        self._validate = validate
        self.func = func
        self.has_dispatcher = dispatcher
        self.fake = fake
        self._backward = backward
        self._jvp = jvp
        # The default overload's arguments in schema order (backend, skip_check last).
        self.argument_names = [*schema.positional, *schema.keyword, *schema.dispatcher]
        self.library = torch.library.Library(NAMESPACE, "FRAGMENT")  # lives with the op
        self._register()
        self._kernel_ns["_default"], self._kernel_ns["_out"] = self.default, self.out
        self.traceable = build_traceable(self)
        # A use_backends block keyed by the op object reads it through Dynamo's stand-in.
        self.traceable.api_key = api_key  # type: ignore[attr-defined]
        self.former_names = self._register_former_names()

    def _register_former_names(self) -> list[str]:
        """The operator under each former name of a renamed API (its ``Renamed`` record),
        for programs exported before the rename: an alias that warns once, then calls it."""
        from flashinfer.gating.history import Renamed, alias_message, history, warn_alias_once

        names = []
        for record in history():
            if not isinstance(record, Renamed) or record.backend or record.new != self.api_key:
                continue
            name = spelled_operator_name(record.old)
            if _defined(name):  # a name another operator holds is left to it
                continue

            def former(*args: Any, _message: str = alias_message(record), **kwargs: Any) -> Any:
                warn_alias_once(_message)
                return self.default(*args, **kwargs)

            self.library.define(f"{name}{self.schema.default}")
            self.library.impl(name, former, "CompositeImplicitAutograd")
            names.append(name)
        return names

    def _register(self) -> None:
        lib, schema, name = self.library, self.schema, self.name
        kernels = self._kernels()
        lib.define(f"{name}{schema.default}")
        lib.impl(name, kernels["real"], "CompositeExplicitAutograd")
        lib.impl(name, kernels["autograd"], "Autograd")
        packet = getattr(torch.ops, NAMESPACE)
        self.default, self.no_grad, self.out = getattr(packet, name).default, None, None
        functional = [(name, self.default)]  # autocast casts these (out= is never cast)
        if self.fake is not None:
            torch.library.register_fake(self.qualname, self._fake_impl, lib=lib)
            # What a traced call uses when nothing requires grad: no Python Autograd
            # kernel.  A separate operator: two overloads with one argument list confuse
            # torch's schema registry when the library is torn down.
            no_grad = f"{name}_{NO_GRAD_SUFFIX}"
            lib.define(f"{no_grad}{schema.flat}")
            lib.impl(no_grad, kernels["real_flat"], "CompositeExplicitAutograd")
            torch.library.register_fake(f"{NAMESPACE}::{no_grad}", self._fake_flat, lib=lib)
            self.no_grad = getattr(packet, no_grad).default
            functional.append((no_grad, self.no_grad))
        else:  # not the real implementation on meta tensors: compilers graph-break
            lib.impl(name, _no_metadata(self.default_name), "Meta")
        if self.autocast is not None:
            for n, overload in functional:
                register_autocast_kernels(lib, n, overload, self.autocast)
        if schema.out is not None:
            lib.define(f"{name}.out{schema.out}")
            lib.impl(f"{name}.out", kernels["real_out"], "CompositeExplicitAutograd")
            lib.impl(f"{name}.out", kernels["autograd_out"], "Autograd")
            if self.fake is not None:
                torch.library.register_fake(f"{self.qualname}.out", self._fake_out, lib=lib)
            else:
                lib.impl(f"{name}.out", _no_metadata(f"{self.qualname}.out"), "Meta")
            self.out = getattr(packet, name).out

    def _kernels(self) -> dict[str, Callable[..., Any]]:
        """The real and ``Autograd`` kernels of each overload, generated with the op's own
        parameters (a compiled program calls them on every call).  The real kernel calls
        the public function with grad mode off and returns a contiguous result that is no
        input; the ``Autograd`` kernel runs the op's Function, refuses, or goes below."""
        schema, public = self.schema, cast(Any, self.public)
        ns = module_namespace(self.api_key, "torch operator")
        ns |= {
            "_public": self.public,
            "_grad_on": torch.is_grad_enabled,
            "_set_grad": torch.set_grad_enabled,
            "_exporting": torch.compiler.is_exporting,
            "_Below": below_autograd,
            "_type": type,
            "_Tensor": torch.Tensor,
            "_fresh": _fresh,
            "_refuse": self._refusal,
            "_refuse_forward": self._forward_refusal,
            "_dual": forward_ad_open,
            "_unpack": torch.autograd.forward_ad.unpack_dual,
            "_RESTRICTED": RESTRICTED_PREFIX,
            "_block": lambda token: token_block(public.dispatcher, token),
        }
        signature = inspect.signature(self.func)
        for n, p in signature.parameters.items():
            if p.default is not p.empty:
                ns[f"_d_{n}"] = p.default
        extra = list(schema.dispatcher)
        out = schema.out_param

        def params(with_out: bool) -> str:
            pieces = [self._declared(n, signature) for n in schema.positional]
            kw = [self._declared(n, signature) for n in schema.keyword]
            if with_out:
                kw.append(str(out))
            # backend as the API declares it (its default, or none), then skip_check
            kw += [self._declared(n, signature) for n in extra if n != "skip_check"]
            kw += ["skip_check=False"] if extra else []
            return ", ".join(pieces + (["*", *kw] if kw else []))

        def call(target: str, with_out: bool) -> str:
            kws = [f"{n}={n}" for n in [*schema.keyword, *([out] if with_out else []), *extra]]
            return f"{target}({', '.join([*schema.positional, *kws])})"

        tensors = list(schema.tensors)
        own = [t for t in tensors if t != out]
        needs = " or ".join(
            f"{t}.requires_grad"
            if t in schema.positional and signature.parameters[t].default is signature.empty
            else f"({t} is not None and {t}.requires_grad)"
            for t in own
        )

        def restricted(with_out: bool) -> list[str]:
            """A call traced inside a ``use_backends`` block runs in the same restriction."""
            if "backend" not in extra:
                return []
            again = call("_again_out" if with_out else "_again", with_out)
            again = again.replace("backend=backend", "backend='auto'")
            return [
                "    if backend.startswith(_RESTRICTED):",
                "        _blk = _block(backend)",
                "        _blk.__enter__()",
                "        try:",
                f"            return {again}",
                "        finally:",
                "            _blk.__exit__(None, None, None)",
            ]

        def real(with_out: bool) -> list[str]:
            run = call("_public", with_out)
            lines = [
                *restricted(with_out),
                "    if _grad_on():",
                "        _set_grad(False)",
                "        try:",
                f"            _r = {run}",
                "        finally:",
                "            _set_grad(True)",
                "    else:",
                f"        _r = {run}",
            ]
            if with_out or schema.returns == "none":
                return [*lines, "    return None"]
            inputs = f"({', '.join(own)}{',' if len(own) == 1 else ''})"
            if schema.returns == "tensors":
                return [*lines, f"    return tuple(_fresh(_x, {inputs}) for _x in _r)"]
            plain = " and ".join(
                ["_type(_r) is _Tensor", "_r._base is None", "_r.is_contiguous()"]
                + [f"_r is not {t}" for t in own]
            )
            return [
                *lines,
                f"    if {plain}:",
                "        return _r",
                f"    return _fresh(_r, {inputs})",
            ]

        tangents = " or ".join(
            f"_unpack({t}).tangent is not None"
            if t in schema.positional and signature.parameters[t].default is signature.empty
            else f"({t} is not None and _unpack({t}).tangent is not None)"
            for t in own
        )

        def autograd(with_out: bool) -> list[str]:
            overload = "out" if with_out else "default"
            names = f"({', '.join(repr(t) for t in own)},)"
            values = f"({', '.join(own)},)"
            functional = not with_out and not schema.mutated
            grads = self._backward is not None and functional
            # Forward AD first: a tangent is never dropped (the Function's jvp gives it)
            lines = [
                f"    if _dual() and ({tangents or 'False'}):",
            ]
            if self._jvp is not None and functional:
                ns.setdefault("_Fn", apply_at_this_level(self._function()))
                lines.append(f"        return _Fn({', '.join(self.argument_names)})")
            else:
                lines.append(f"        _refuse_forward({overload!r}, {names}, {values})")
            lines.append(f"    if _grad_on() and ({needs or 'False'}) and not _exporting():")
            if grads:
                ns.setdefault("_Fn", apply_at_this_level(self._function()))
                lines.append(f"        return _Fn({', '.join(self.argument_names)})")
            else:
                lines.append(f"        _refuse({overload!r}, {names}, {values})")
            target = "_out" if with_out else "_default"
            return [*lines, "    with _Below():", f"        return {call(target, with_out)}"]

        built = {
            "real": compile_function(
                params(False), real(False), ns, role="real kernel", api=self.api_key
            ),
            "autograd": compile_function(
                params(False), autograd(False), ns, role="autograd kernel", api=self.api_key
            ),
        }
        if self.fake is not None:  # the no-grad operator's (see _register)
            built["real_flat"] = compile_function(
                ", ".join(self.argument_names),
                real(False),
                ns,
                role="real flat kernel",
                api=self.api_key,
            )
        if out is not None:
            built["real_out"] = compile_function(
                params(True), real(True), ns, role="real out kernel", api=self.api_key
            )
            built["autograd_out"] = compile_function(
                params(True), autograd(True), ns, role="autograd out kernel", api=self.api_key
            )
        ns["_again"], ns["_again_out"] = built["real"], built.get("real_out")
        self._kernel_ns = ns  # the overloads are set once registered (see __init__)
        if self.fake is None:  # a compiled call breaks the graph and runs these eagerly
            for kernel in built.values():
                run_outside_dynamo(kernel.__code__)
        return built

    def _declared(self, name: str, signature: inspect.Signature) -> str:
        p = signature.parameters[name]
        return name if p.default is p.empty else f"{name}=_d_{name}"

    def _refusal(self, overload: str, names: tuple, values: tuple) -> None:
        needs = [n for n, v in zip(names, values, strict=True) if getattr(v, "requires_grad", 0)]
        raise RuntimeError(
            f"{self.qualname}.{overload} ({self.api_key}) cannot differentiate: "
            f"{', '.join(needs)} requires grad, and this form of the op has no gradient (an "
            "out= or in-place form, or an op that declares no backward). Call it under "
            "torch.no_grad(), pass tensors that do not require grad, or call the op's "
            "functional form (no out=)"
        )

    def _forward_refusal(self, overload: str, names: tuple, values: tuple) -> None:
        dual = [
            n
            for n, v in zip(names, values, strict=True)
            if isinstance(v, torch.Tensor)
            and torch.autograd.forward_ad.unpack_dual(v).tangent is not None
        ]
        raise RuntimeError(
            f"{self.qualname}.{overload} ({self.api_key}) has no forward-mode derivative: "
            f"{', '.join(dual)} carries a forward-AD tangent (torch.autograd.forward_ad or "
            "torch.func.jvp), and this form of the op declares no jvp (an out= or in-place "
            "form, or an op without jvp=), so the tangent would be lost. Call the op's "
            "functional form (no out=), or use reverse mode (torch.func.vjp, jacrev)"
        )

    def _function(self) -> type:
        """The op's single-level autograd Function: the operator, ``backward=``, ``jvp=``."""
        names, tensors, op = self.argument_names, set(self.schema.tensors), self
        positional = self.schema.positional

        class Function(SingleLevelFunction):
            @staticmethod
            def forward(*args: Any) -> Any:
                values = dict(zip(names, args, strict=True))
                kwargs = {n: v for n, v in values.items() if n not in positional}
                with below_autograd():  # the operator, as computed
                    return op.default(*(values[n] for n in positional), **kwargs)

            @staticmethod
            def setup_context(ctx: Any, inputs: tuple, output: Any) -> None:
                # Separate from forward, so that torch.func transforms can use the Function.
                values = dict(zip(names, inputs, strict=True))
                saved = [n for n in names if n in tensors and isinstance(values[n], torch.Tensor)]
                ctx.tensor_names = saved
                ctx.save_for_backward(*(values[n] for n in saved))
                ctx.save_for_forward(*(values[n] for n in saved))
                ctx.other = {n: v for n, v in values.items() if n not in saved}

            @staticmethod
            def backward(ctx: Any, grad: torch.Tensor) -> tuple:
                values = dict(ctx.other)
                values.update(zip(ctx.tensor_names, ctx.saved_tensors, strict=True))
                if op._backward is None:
                    raise RuntimeError(
                        f"{op.qualname} ({op.api_key}) declares no backward: reverse-mode "
                        "AD through it is not available; use forward mode (torch.func.jvp, "
                        "jacfwd)"
                    )
                grads = op._backward(grad, values)
                return tuple(grads.get(n) if n in ctx.tensor_names else None for n in names)

            @staticmethod
            def jvp(ctx: Any, *tangents: Any) -> Any:
                values = dict(ctx.other)
                values.update(zip(ctx.tensor_names, ctx.saved_tensors, strict=True))
                given = dict(zip(names, tangents, strict=True))
                if op._jvp is None:
                    raise RuntimeError(
                        f"{op.qualname} ({op.api_key}) declares no jvp: forward-mode AD "
                        "through it is not available; use reverse mode (torch.func.vjp, "
                        "jacrev)"
                    )
                return op._jvp(values, {n: given[n] for n in ctx.tensor_names})

        Function.__name__ = Function.__qualname__ = f"{self.name}_function"
        return Function

    def _values(self, args: tuple, kwargs: dict[str, Any]) -> dict[str, Any]:
        values = dict(zip(self.schema.positional, args, strict=False))
        values.update(kwargs)
        return values

    def _fake_impl(self, *args: Any, **kwargs: Any) -> Any:
        values = self._values(args, kwargs)
        self._validate(values)
        assert self.fake is not None
        result = self.fake(values)
        if self.schema.returns == "tensor":
            return _contiguous_like(result)
        if self.schema.returns == "tensors":
            return tuple(_contiguous_like(r) for r in result)
        return None

    def _fake_flat(self, *args: Any) -> Any:
        return self._fake_impl(**dict(zip(self.argument_names, args, strict=True)))

    def _fake_out(self, *args: Any, **kwargs: Any) -> None:
        self._validate(self._values(args, kwargs))


def _no_metadata(overload: str) -> Callable[..., Any]:
    """The ``Meta`` kernel of an operator without a fake: ``NotImplementedError``, on which
    Dynamo breaks the graph (the call runs eagerly) rather than failing."""
    message = (
        f"{overload} has no fake implementation: its API declares no fake= and has no "
        "torch-family backend to derive one from"
    )

    def kernel(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(message)

    return kernel


def _fresh(result: Any, inputs: Iterable[torch.Tensor]) -> Any:
    """``result`` contiguous and sharing no storage with an input."""
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
    """Whether a call with these arguments is traced rather than run (a fake, meta or
    functional tensor, Dynamo or export, ``torch.jit.trace``): the dispatcher then calls
    the operator.  Asked only on paths that already cost more than this."""
    for v in values:
        if isinstance(v, torch.Tensor):
            if v.is_meta:
                return True
            if type(v) not in (torch.Tensor, torch.nn.Parameter) and isinstance(v, _FAKE):
                return True
    return bool(torch.compiler.is_compiling() or torch.jit.is_tracing())


_FAKE = (FakeTensor, FunctionalTensor)


def register_api_op(
    public: Callable[..., Any],
    *,
    overlap: Any = None,
    validate: Callable[[dict[str, Any]], None],
    fake: Callable[[dict[str, Any]], Any] | None,
    backward: Callable[[Any, dict[str, Any]], dict[str, Any]] | None = None,
) -> TorchOp:
    """The operator of an API that is no ``backend_requirement`` op, which Dynamo inlines in
    its place; ``TypeError`` when its signature has no schema."""
    func = getattr(public, "__wrapped__", public)
    key = f"{func.__module__}.{func.__qualname__}"
    schema, reason = schema_of(key, func, overlap, dispatcher=False)
    if schema is None:
        raise TypeError(reason)
    op = TorchOp(
        key, public, func, schema, dispatcher=False, validate=validate, fake=fake, backward=backward
    )
    inline_for_dynamo(public, op.traceable)
    return op


def schema_of(
    api_key: str, func: Callable[..., Any], overlap: Any, *, dispatcher: bool
) -> tuple[OpSchema | None, str | None]:
    """The schema of ``func``'s operator (``overlap``'s written arguments mutated), or None
    and why not, as a sentence."""
    written = frozenset(overlap.written) if overlap is not None else frozenset()
    try:
        return op_schema(func, written, dispatcher=dispatcher), None
    except SchemaUnavailable as exc:
        return None, f"{api_key} has no torch operator: {exc}"
