"""Mixed precision: an op under ``torch.autocast`` follows the rule its torch counterpart does.

An API declares its counterpart's per-device policy as an :class:`AutocastRule`
(``backend_requirement(..., autocast=...)``), and every route casts the same way: the eager
dispatcher through :class:`AutocastCall`, traced code with :func:`cast_tensors` (Dynamo
guards the autocast state), the operator with an ``Autocast<Device>`` kernel.  ``out=`` and
in-place forms are never cast; eligible tensors are torch's (floating point, not float64,
on the device whose autocast is on).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

LOWER_PRECISION = "lower_precision_fp"
"""Cast floating-point inputs to the autocast dtype in force (``torch.mm``'s policy)."""

FP32 = "fp32"
"""Cast floating-point inputs to float32 (``torch.rms_norm``'s policy on CUDA)."""

_POLICIES = (LOWER_PRECISION, FP32)


@dataclass(frozen=True)
class AutocastRule:
    """An op's autocast policy per device type: :data:`LOWER_PRECISION`, :data:`FP32`, or
    None (not cast there), as its torch counterpart's."""

    cpu: str | None = None
    cuda: str | None = None

    def __post_init__(self) -> None:
        for device, policy in (("cpu", self.cpu), ("cuda", self.cuda)):
            if policy is not None and policy not in _POLICIES:
                raise ValueError(
                    f"AutocastRule: {device}={policy!r} is not a policy; use LOWER_PRECISION "
                    f"({LOWER_PRECISION!r}), FP32 ({FP32!r}) or None (not cast)"
                )

    def devices(self) -> tuple[str, ...]:
        """The device types whose autocast casts this op's inputs."""
        return tuple(d for d in ("cpu", "cuda") if getattr(self, d) is not None)


def _target(rule: AutocastRule, device_type: str) -> torch.dtype | None:
    """The dtype ``rule`` casts to on ``device_type`` now, or None (no cast)."""
    policy = getattr(rule, device_type, None) if device_type in ("cpu", "cuda") else None
    if policy is None or not torch.is_autocast_enabled(device_type):
        return None
    return torch.get_autocast_dtype(device_type) if policy == LOWER_PRECISION else torch.float32


def _cast(t: Any, device_type: str, dtype: torch.dtype) -> Any:
    if (
        isinstance(t, torch.Tensor)
        and t.is_floating_point()
        and t.dtype is not torch.float64
        and t.device.type == device_type
    ):
        return t.to(dtype)
    return t


def cast_tensors(rule: AutocastRule, *tensors: Any) -> tuple[Any, ...]:
    """``tensors`` (None allowed) as ``rule`` casts them under the autocast in force on the
    first tensor's device.  Traced by Dynamo."""
    # Not isinstance(t, torch.Tensor): traced, torch reached through two modules' globals
    # would cost every compiled call a Python guard.
    device = next((t.device for t in tensors if hasattr(t, "device")), None)
    if device is None:
        return tensors
    device_type = device.type
    dtype = _target(rule, device_type)
    if dtype is None:
        return tensors
    return tuple(_cast(t, device_type, dtype) for t in tensors)


class _Inside(threading.local):
    on = False  # this thread is inside a call that has cast its arguments already


INSIDE = _Inside()  # one for every op: an op a backend calls does not cast again


def checked_autocast_rule(api_key: str, rule: Any, schema: Any) -> AutocastRule | None:
    """``rule`` when an op with this operator ``schema`` can declare it, else an error."""
    if rule is None:
        return None
    if not isinstance(rule, AutocastRule):
        raise TypeError(
            f"{api_key}: autocast= takes an AutocastRule, e.g. "
            f"AutocastRule(cpu=LOWER_PRECISION, cuda=LOWER_PRECISION), got {rule!r}"
        )
    if schema is None or schema.mutated:
        raise ValueError(
            f"{api_key}: autocast= needs a functional torch operator schema (tensor "
            "arguments, no argument written in place): torch never casts an in-place "
            "operation's inputs"
        )
    return rule


def prologue_lines(op: Any) -> list[str]:
    """The dispatcher's first lines: a call under autocast, not inside one that cast
    already, goes to ``_acall`` (:class:`AutocastCall`)."""
    if getattr(op, "autocast", None) is None:
        return []
    names = [n for n in op._sig.names if n != "skip_check"]
    literal = "{" + ", ".join(f"{n!r}: {n}" for n in names) + "}"
    return ["    if _ac() and not _acin.on:", f"        return _acall({literal}, skip_check)"]


class AutocastCall:
    """An eager call under autocast: its arguments cast (not with ``out``), then the
    dispatcher, marked inside so that neither it nor a nested op casts again."""

    def __init__(self, op: Any) -> None:
        schema = op.torch_schema
        self.public: Callable[..., Any] = op.function
        self.rule: AutocastRule = op.autocast
        self.tensors: tuple[str, ...] = tuple(schema.tensors)
        self.out: str | None = schema.out_param
        self.inside = INSIDE

    def __call__(self, values: dict[str, Any], skip_check: Any) -> Any:
        if self.out is None or values.get(self.out) is None:
            names = [n for n in self.tensors if n != self.out]
            cast = cast_tensors(self.rule, *(values[n] for n in names))
            values.update(zip(names, cast, strict=True))
        inside = self.inside
        previous, inside.on = inside.on, True
        try:
            return self.public(**values, skip_check=skip_check)
        finally:
            inside.on = previous


def register_autocast_kernels(
    library: torch.library.Library,
    name: str,
    overload: Any,
    rule: AutocastRule,
) -> None:
    """``overload``'s ``Autocast<Device>`` kernel per device ``rule`` names: cast, then run
    the operator below autocast."""
    for device_type in rule.devices():
        if torch.amp.is_autocast_available(device_type):
            key = _AUTOCAST_KEYS[device_type]
            library.impl(name, _kernel(overload, rule, device_type), key)


_AUTOCAST_KEYS = {"cpu": "AutocastCPU", "cuda": "AutocastCUDA"}  # AutocastRule's devices


def _kernel(overload: Any, rule: AutocastRule, device_type: str) -> Any:
    def kernel(*args: Any, **kwargs: Any) -> Any:
        dtype = _target(rule, device_type)
        if dtype is not None:
            args = tuple(_cast(a, device_type, dtype) for a in args)
            kwargs = {k: _cast(v, device_type, dtype) for k, v in kwargs.items()}
        # Below its Autocast kernel; nothing under it casts again.
        with torch.autocast(device_type, enabled=False):
            return overload(*args, **kwargs)

    return kernel
