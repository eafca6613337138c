"""Every private torch and Dynamo name flashinfer uses, each with why no public API does it.

The rest of the package imports these from here and names nothing private of torch itself
(``tests/test_torch_boundary.py`` scans the source).  A torch release that moves one of them
breaks this module alone; the tested range is ``pyproject.toml``'s torch requirement.

Names with a public spelling are not here (``is_jit_tracing`` is ``torch.jit.is_tracing``'s C
function, for the eager call's hot path): ``torch.jit.is_tracing``,
``torch.amp.is_autocast_available``, ``torch.set_grad_enabled``, ``torch.autocast``,
``torch.compiler.is_compiling`` / ``is_exporting``.
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
"""``torch._check``: a condition on a symbolic size, recorded rather than tested (documented
in torch's reference under this underscored name; there is no other)."""

below_autograd: Callable[[], Any] = torch._C._AutoDispatchBelowAutograd
"""A guard under which an operator call skips its ``Autograd`` kernel: what an operator's
own autograd kernel runs its forward under.  ``torch.library.register_autograd`` uses it
inside; no public guard exists for a hand-registered ``Autograd`` kernel."""

is_any_autocast_enabled: Callable[[], bool] = torch._C._is_any_autocast_enabled
"""Whether autocast is on for any device type: the eager dispatcher's first test, on every
call; ``torch.is_autocast_enabled(device_type)`` asks one device type per call."""

is_jit_tracing: Callable[[], bool] = torch._C._is_tracing
"""Whether ``torch.jit.trace`` is recording: the eager dispatcher asks on every call, and
the public ``torch.jit.is_tracing`` wraps this same C function in a Python frame."""

is_functorch_wrapped: Callable[[torch.Tensor], bool] = (
    torch._C._functorch.is_functorch_wrapped_tensor
)
"""Whether a tensor is a ``torch.func`` wrapper (``vmap`` batch, ``grad`` level): the
overlap check and the kernels' autograd need the tensor underneath; ``torch.func`` has no
public test."""

functorch_unwrapped: Callable[[torch.Tensor], torch.Tensor] = torch._C._functorch.get_unwrapped
"""One ``torch.func`` wrapper removed (the overlap check compares the real storages)."""


SingleLevelFunction: type = torch.autograd.function._SingleLevelFunction
"""An autograd Function that records on the current level's tensors only.  An operator's
``Autograd`` kernel runs below functorch's interpreters: a ``torch.autograd.Function``
applied there is handed back to them (torch 2.14 fails: no kernel for
``custom_function_call``), and ``torch.library.register_autograd`` fails under
``torch.func`` on every version; this base class, which functorch uses for the same job,
records as every aten op's autograd kernel does."""


def apply_at_this_level(function: type) -> Callable[..., Any]:
    """``function.apply`` (a :data:`SingleLevelFunction`) with functorch's guard against
    single-level Functions lifted for the call (``grad``, ``jacrev``, ``jvp``, ``jacfwd``
    then see its backward and jvp); the flag has no public setter."""
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
    """Whether a ``torch.func`` transform is active (no public query).  Dynamo calls it as a
    constant while tracing: it guards functorch's stack itself."""
    return bool(torch._C._are_functorch_transforms_active())


def forward_ad_open() -> bool:
    """Whether a forward-AD level is open (``forward_ad.dual_level()``, ``torch.func.jvp``):
    ``torch.autograd.forward_ad`` keeps it in ``_current_level`` and has no public query."""
    return _forward_ad._current_level >= 0


def dispatch_mode_active() -> bool:
    """Whether a torch dispatch mode is active (``make_fx`` on real tensors, a
    ``FlopCounterMode``): ``torch.utils._python_dispatch`` is private too, and this is the
    C query it wraps."""
    return bool(torch._C._len_torch_dispatch_stack() > 0)


def operator_defined(qualname: str) -> bool:
    """Whether ``namespace::name`` is a registered operator.  ``torch.ops.<ns>.<name>``
    answers too, but caches a packet that outlives a library torn down (a test's op)."""
    return bool(torch._C._jit_get_schemas_for_operator(qualname))


def tracing_context() -> Any:
    """Dynamo's ``TracingContext`` of the trace under way, or None: what identifies one
    trace (a ``use_backends`` block written in it is read per trace); no public handle."""
    from torch._guards import TracingContext

    return TracingContext.try_get()


def cuda_driver_version() -> int:
    """The CUDA driver's version (``flashinfer env``); ``torch.version.cuda`` is the
    runtime's, and no public API reports the driver's."""
    return int(torch._C._cuda_getDriverVersion())  # type: ignore[attr-defined]


# ---- Dynamo's marks, set without importing Dynamo (``import torch._dynamo``: ~1.3 s) ------


def inline_for_dynamo(function: Any, stand_in: Callable[..., Any]) -> None:
    """Dynamo traces ``stand_in`` wherever compiled code calls ``function`` (the attribute
    ``torch.jit.script`` sets too).  ``torch.compiler.substitute_in_graph`` needs Dynamo
    imported; ``tests/test_compile.py`` fails on a torch that stops honouring this."""
    function._torchdynamo_inline = stand_in


def disable_dynamo(function: Any, message: str) -> None:
    """Dynamo breaks the graph at ``function`` and calls it eagerly, naming ``message``
    under ``fullgraph``: ``torch.compiler.disable``'s mark, set in place (that function
    imports Dynamo and returns a wrapper, which would replace the public function)."""
    function._torchdynamo_disable = True
    function._torchdynamo_disable_msg = message


def constant_for_dynamo(function: Any) -> Any:
    """Dynamo calls ``function`` while tracing and uses its result as a constant:
    ``torch.compiler.assume_constant_result``'s mark, set without importing Dynamo."""
    function._dynamo_marked_constant = True
    return function


def run_outside_dynamo(code: Any) -> None:
    """Never let Dynamo trace a frame of ``code`` nor any frame it calls: what
    ``torch.compiler.disable`` does to a function, done to a code object (generated code
    has no function to wrap) through the frame hook's table; on a torch without that
    table, the frames are traced as before (slower, still correct)."""
    hook: Any = getattr(getattr(torch._C, "_dynamo", None), "eval_frame", None)
    strategy = getattr(hook, "_FrameExecStrategy", None)
    action = getattr(hook, "_FrameAction", None)
    if strategy is None or action is None or not hasattr(hook, "set_code_exec_strategy"):
        return
    hook.set_code_exec_strategy(code, strategy(action.SKIP, action.SKIP))


def block_boundary(block: type, how: str) -> None:
    """Mark ``block``'s construction, ``__enter__`` and ``__exit__`` as a graph break that
    names it (``how``: how the block is written, e.g. ``"autotune(...)"``): the block sets
    context-local state that a compiled graph cannot hold."""
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


# ---- not torch: a module's class -------------------------------------------------------------
