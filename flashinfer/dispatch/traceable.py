"""The function Dynamo inlines for an API in the public function's place
(:func:`~flashinfer.torch_boundary.inline_for_dynamo`): its own parameters, generated per op.
In order: ``torch.jit.trace`` records the operator; numbers as the eager call takes them;
the autocast cast; a traced ``use_backends`` block's restriction; a transparent call (the
body, :mod:`.tracing`); then the operator (``out``, ``no_grad`` or the default overload).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch

from flashinfer.codegen.compiler import ParameterList, compile_function, module_namespace
from flashinfer.dispatch.autocast import cast_tensors
from flashinfer.dispatch.guarded_state import GUARDED
from flashinfer.dispatch.traced_blocks import traced_restriction
from flashinfer.torch_boundary import (
    constant_for_dynamo,
    forward_ad_open,
    functorch_transforms_active,
)

__all__ = ["build_traceable", "jit_tracing"]


def _number_lines(op: Any, ns: dict[str, Any]) -> list[str]:
    """Each number argument as the eager call takes it: a bool refused (the schema would
    read ``True`` as ``1.0``), a numpy scalar passed as its Python number."""
    lines: list[str] = []
    if not op.schema.numbers:
        return lines
    api = op.api_key.rsplit(".", 1)[-1]
    ns |= {"_refuse_bool": _bool_refusal(api), "_Tensor": torch.Tensor}
    for name, kind in op.schema.numbers:
        lines += [
            f"    if isinstance({name}, bool):",
            f"        _refuse_bool({name!r}, {name})",
            f"    elif {name} is not None and not isinstance({name}, (int, float, _Tensor)):",
            f"        {name} = {kind.__name__}({name})",
        ]
    return lines


def _autocast_lines(op: Any, ns: dict[str, Any]) -> list[str]:
    """The tensors cast by the op's autocast rule (Dynamo guards the autocast state)."""
    if op.autocast is None:
        return []
    ns |= {"_cast": cast_tensors, "_acrule": op.autocast}
    names = [t for t in op.schema.tensors if t != op.schema.out_param]
    targets = ", ".join(names) + ("," if len(names) == 1 else "")
    line = f"{targets} = _cast(_acrule, {', '.join(names)})"
    out = op.schema.out_param
    if out is None:
        return [f"    {line}"]
    return [f"    if {out} is None:", f"        {line}"]


def _restriction_lines(op: Any, ns: dict[str, Any]) -> list[str]:
    """``_r``: a traced ``use_backends`` block's restriction token, or None."""
    if "backend" not in op.schema.dispatcher:
        return []
    ns["_restriction"] = traced_restriction
    return [f"    _r = _restriction({op.api_key!r}) if backend == 'auto' else None"]


def _transparent_lines(op: Any, ns: dict[str, Any]) -> list[str]:
    """A call without ``out`` asks the chooser (:mod:`.tracing`); when it names a backend,
    the API's body runs with it, for Dynamo to trace."""
    plan = op.transparent
    if plan is None:
        return []
    schema = op.schema
    ns |= {
        "_scalar": _scalar_value,
        "_facts": _tensor_facts,
        "_choose": plan.choose,
        "_flag": plan.flag,
        "_body": plan.body,
        "_grad_on": torch.is_grad_enabled,
        "_exporting": torch.compiler.is_exporting,
        "_g": GUARDED,
        "_watch": plan.watch,
    }
    # Each read of GUARDED in the traced code is a guard: a later change re-traces.
    guarded = [f"_g.environment[{name!r}]" for name in plan.environment] + ["_g.epoch"]
    names = [*schema.positional, *schema.keyword]
    tensors = [n for n in names if n in schema.tensors]
    values = [f"_tf[{tensors.index(n)}]" if n in schema.tensors else f"_scalar({n})" for n in names]
    body_args = [*schema.positional, *(f"{n}={n}" for n in schema.keyword)]
    if schema.out_param is not None:
        body_args.append(f"{schema.out_param}=None")
    body_args.append("backend=_b")
    if "skip_check" in inspect.signature(op.func).parameters:
        body_args.append("skip_check=skip_check")
    test = "not _exporting()"
    if schema.out_param is not None:
        test = f"{schema.out_param} is None and {test}"
    # The block flag is read (guarded) only for a transparent "auto" choice; a block
    # written in the compiled function (_r) replaces its question.
    return [
        f"    if {test}:",
        "        _watch()",
        f"        _tf = _facts({', '.join(tensors)})",
        f"        _b = _choose(_grad_on(), ({', '.join(guarded)},), {', '.join(values)}, "
        "backend, skip_check, _r)",
        "        if _b is not None and (",
        "            backend != 'auto' or _r is not None or not _flag.named",
        "        ):",
        f"            return _body({', '.join(body_args)})",
    ]


def build_traceable(op: Any) -> Callable[..., Any]:
    """The traceable of ``op`` (a :class:`~.torch_op.TorchOp`)."""
    ns = module_namespace(op.api_key, "traceable")
    params = ParameterList(op.func, omit=("skip_check",) if op.has_dispatcher else ())
    ns["_default"], ns["_out"] = op.default, op.out
    schema = op.schema

    def call(target: str, out: bool) -> str:
        pos = ", ".join(schema.positional)
        kws = [f"{n}={n}" for n in schema.keyword]
        if out:
            kws.append(f"{schema.out_param}={schema.out_param}")
        kws += [f"{n}={n}" for n in schema.dispatcher]  # backend (if declared), skip_check
        return f"{target}({', '.join(filter(None, [pos, *kws]))})"

    ns["_jit_tracing"] = jit_tracing
    lines: list[str] = [
        # torch.jit.trace records the operator itself (Dynamo reads this as False).
        "    if _jit_tracing():",
        *(
            [
                f"        if {schema.out_param} is not None:",
                f"            {call('_out', True)}",
                f"            return {schema.out_param}",
            ]
            if schema.out_param is not None
            else []
        ),
        f"        {'return ' if schema.returns != 'none' else ''}{call('_default', False)}",
        *(["        return None"] if schema.returns == "none" else []),
        *_number_lines(op, ns),
        *_autocast_lines(op, ns),
        *_restriction_lines(op, ns),
        *_transparent_lines(op, ns),
        *(
            ["    if _r is not None:", "        backend = _r"]
            if "backend" in schema.dispatcher
            else []
        ),
    ]
    if schema.out_param is not None:
        lines += [
            f"    if {schema.out_param} is not None:",
            f"        {call('_out', True)}",
            f"        return {schema.out_param}",
        ]
    if op.no_grad is not None:
        ns["_no_grad"], ns["_exporting"] = op.no_grad, torch.compiler.is_exporting
        ns["_grad_on"] = torch.is_grad_enabled
        # Under a torch.func transform Dynamo traces requires_grad as False (the wrapped
        # tensors' flag is not the level's): the operator's Autograd kernel decides.
        ns["_transforms"] = _transforms
        # Inside a forward-AD level (torch.autograd.forward_ad) a dual tensor's tangent
        # goes through the Autograd kernel's jvp (Dynamo guards the level it reads).
        ns["_dual"] = forward_ad_open
        own = [t for t in schema.tensors if t != schema.out_param]
        signature = inspect.signature(op.func)
        needs = " or ".join(
            f"{t}.requires_grad"
            if signature.parameters[t].default is signature.empty
            else f"({t} is not None and {t}.requires_grad)"
            for t in own
        )
        # every argument positionally: the no-grad operator's schema is flat (op_schema)
        flat = ", ".join(op.argument_names)
        lines += [
            "    if not _exporting() and not _transforms() and not _dual() and (",
            f"        not _grad_on() or not ({needs or 'False'})",
            "    ):",
            f"        {'return ' if schema.returns != 'none' else ''}_no_grad({flat})",
            *(["        return None"] if schema.returns == "none" else []),
        ]
    if schema.returns == "none":
        lines += [f"    {call('_default', False)}", "    return None"]
    else:
        lines.append(f"    return {call('_default', False)}")
    extra = "skip_check=False" if op.has_dispatcher else None
    return compile_function(
        params.def_params(ns, extra), lines, ns, role="traceable", api=op.api_key
    )


@constant_for_dynamo
def jit_tracing() -> bool:
    """Whether ``torch.jit.trace`` is recording (a constant False to Dynamo)."""
    return bool(torch.jit.is_tracing())


@constant_for_dynamo
def _transforms() -> bool:
    """Whether a ``torch.func`` transform is active, a constant to Dynamo (which guards
    functorch's stack itself); torch's function would leave a dead node in every graph."""
    return functorch_transforms_active()


def _bool_refusal(api: str) -> Callable[[str, bool], None]:
    def refuse_bool(name: str, value: bool) -> None:
        raise ValueError(
            f"{api}: {name} must be a number, got {value!r} (a bool, which the compiled "
            f"operator would read as {int(value)}); pass {float(value)!r} if that is meant"
        )

    # A constant function to Dynamo: the error is raised at the user's call, not traced.
    return constant_for_dynamo(refuse_bool)


def _scalar_value(value: Any) -> Any:
    """A number argument as the constant the choice reads: traced, a symbolic number is
    specialized (with a guard on its value)."""
    from torch.fx.experimental.symbolic_shapes import guard_scalar

    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return guard_scalar(value)
    return value


def _tensor_facts(*tensors: Any) -> tuple[Any, ...]:
    """What the choice reads of each tensor (None: not given): sizes, strides (None unless
    static), contiguity, dtype, device, ``requires_grad``.  A dynamic size is the name of
    its class (``"s0"``...), shared by every size Dynamo knows equal (no guard added)."""
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
        exact = tuple(int(s) for s in strides) if static else None
        facts.append((sizes, exact, t.is_contiguous(), t.dtype, t.device, t.requires_grad))
    return tuple(facts)
