"""Every private torch and Dynamo name flashinfer uses, each with why no public API does it.

The rest of the package names nothing private of torch (``tests/test_torch_boundary.py``
scans the source), so a torch release that moves one breaks this module alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.autograd.forward_ad as _forward_ad
from torch._subclasses.fake_tensor import (  # fake tensors have no public module
    FakeTensor,
    FakeTensorMode,
    UnsupportedOperatorException,
    unset_fake_temporarily,
)
from torch._subclasses.functional_tensor import FunctionalTensor

__all__ = [
    "FakeTensor",
    "FakeTensorMode",
    "FunctionalTensor",
    "SingleLevelFunction",
    "apply_at_this_level",
    "UnsupportedOperatorException",
    "below_autograd",
    "block_boundary",
    "check",
    "constant_for_dynamo",
    "cuda_driver_version",
    "disable_dynamo",
    "dispatch_mode_active",
    "forward_ad_open",
    "functorch_transforms_active",
    "functorch_unwrapped",
    "inline_for_dynamo",
    "is_any_autocast_enabled",
    "is_functorch_wrapped",
    "is_jit_tracing",
    "operator_defined",
    "run_outside_dynamo",
    "tracing_context",
    "unset_fake_temporarily",
]

# ---- tensors and dispatch ----------------------------------------------------------------

check: Callable[..., None] = torch._check
"""A condition on a symbolic size, recorded (documented under this underscored name only)."""

below_autograd: Callable[[], Any] = torch._C._AutoDispatchBelowAutograd
"""Skip the ``Autograd`` kernel below a hand-registered one (no public guard does)."""

is_any_autocast_enabled: Callable[[], bool] = torch._C._is_any_autocast_enabled
"""Autocast on for any device type (the public query asks one type per call)."""

is_jit_tracing: Callable[[], bool] = torch._C._is_tracing
"""``torch.jit.is_tracing`` without its Python frame (asked on every eager call)."""

is_functorch_wrapped: Callable[[torch.Tensor], bool] = (
    torch._C._functorch.is_functorch_wrapped_tensor
)
"""Whether a tensor is a ``torch.func`` wrapper (no public test)."""

functorch_unwrapped: Callable[[torch.Tensor], torch.Tensor] = torch._C._functorch.get_unwrapped
"""One ``torch.func`` wrapper removed (the overlap check reads real storages)."""


SingleLevelFunction: type = torch.autograd.function._SingleLevelFunction
"""A Function recording on the current functorch level only, as aten's autograd kernels do:
a ``torch.autograd.Function`` applied below functorch fails on 2.14
(``custom_function_call``), ``register_autograd`` under ``torch.func`` on every version."""


def apply_at_this_level(function: type) -> Callable[..., Any]:
    """``function.apply`` with functorch's guard against single-level Functions lifted (no
    public setter), so that ``grad``/``jvp`` see its backward and jvp."""
    apply = function.apply  # type: ignore[attr-defined]
    allowed = torch._C._functorch.get_single_level_autograd_function_allowed
    allow = torch._C._functorch.set_single_level_autograd_function_allowed

    def apply_here(*args: Any) -> Any:
        previous = allowed()
        allow(True)
        try:
            return apply(*args)
        finally:
            allow(previous)

    apply_here.function = function  # type: ignore[attr-defined]
    return apply_here


def functorch_transforms_active() -> bool:
    """Whether a ``torch.func`` transform is active (no public query)."""
    return bool(torch._C._are_functorch_transforms_active())


def forward_ad_open() -> bool:
    """Whether a forward-AD level is open (``_current_level``; no public query)."""
    return _forward_ad._current_level >= 0


def dispatch_mode_active() -> bool:
    """Whether a torch dispatch mode is active (``make_fx``; the query is private only)."""
    return bool(torch._C._len_torch_dispatch_stack() > 0)


def operator_defined(qualname: str) -> bool:
    """Whether ``ns::name`` is registered (``torch.ops`` caches packets of torn-down ones)."""
    return bool(torch._C._jit_get_schemas_for_operator(qualname))


def tracing_context() -> Any:
    """Dynamo's ``TracingContext`` of the trace under way, or None (no public handle)."""
    from torch._guards import TracingContext

    return TracingContext.try_get()


def cuda_driver_version() -> int:
    """The CUDA driver's version (``flashinfer env``; no public API reports it)."""
    return int(torch._C._cuda_getDriverVersion())  # type: ignore[attr-defined]


# ---- Dynamo's marks, set without importing Dynamo (``import torch._dynamo``: ~1.3 s) ------


def inline_for_dynamo(function: Any, stand_in: Callable[..., Any]) -> None:
    """Dynamo traces ``stand_in`` where compiled code calls ``function`` (what
    ``substitute_in_graph`` does, without importing Dynamo)."""
    function._torchdynamo_inline = stand_in


def disable_dynamo(function: Any, message: str) -> None:
    """``torch.compiler.disable``'s mark set in place (that returns a wrapper and imports
    Dynamo): a graph break naming ``message`` under ``fullgraph``."""
    function._torchdynamo_disable = True
    function._torchdynamo_disable_msg = message


def constant_for_dynamo(function: Any) -> Any:
    """``torch.compiler.assume_constant_result``'s mark, set without importing Dynamo."""
    function._dynamo_marked_constant = True
    return function


def run_outside_dynamo(code: Any) -> None:
    """``torch.compiler.disable`` for a code object (generated code has no function to
    wrap), through the frame hook's table; without it the frames are traced (slower)."""
    hook: Any = getattr(getattr(torch._C, "_dynamo", None), "eval_frame", None)
    strategy = getattr(hook, "_FrameExecStrategy", None)
    action = getattr(hook, "_FrameAction", None)
    if strategy is None or action is None or not hasattr(hook, "set_code_exec_strategy"):
        return
    hook.set_code_exec_strategy(code, strategy(action.SKIP, action.SKIP))


def block_boundary(block: type, how: str) -> None:
    """Make ``block``'s construction, ``__enter__`` and ``__exit__`` a graph break naming
    it (``how``, e.g. ``"autotune(...)"``)."""
    message = (
        f"flashinfer.{how} cannot be entered inside a compiled function: it sets "
        "context-local state that a compiled graph cannot hold. Enter it around the compiled "
        f"call (with flashinfer.{how}: compiled(x)), or compile without fullgraph=True, "
        "which runs the function eagerly from the block on"
    )
    for name in ("__init__", "__enter__", "__exit__"):
        method = getattr(block, name)
        disable_dynamo(method, message)
        run_outside_dynamo(method.__code__)
