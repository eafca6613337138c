"""What each backend family supports, written once as data, and the mark that declares a backend's
family."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import torch

from flashinfer.dispatch.capability import supported_compute_capability
from flashinfer.dispatch.verdicts import reads_environment
from flashinfer.kernels.availability import TRITON_INTERPRET_ENV

C = TypeVar("C", bound=Callable[..., Any])


@dataclass(frozen=True)
class BackendFamily:
    """What every backend of one family supports: its ``name``, the CUDA
    ``compute_capabilities`` its code runs on, the ``dtypes`` it computes in, whether it runs
    on ``cpu`` tensors, whether it ``needs_triton``, and whether its backends are
    ``differentiable`` without a formula of their own (the default of a ``Backend`` of the
    family that does not say)."""

    name: str
    compute_capabilities: tuple[int, ...]
    dtypes: tuple[torch.dtype, ...]
    cpu: bool
    needs_triton: bool
    differentiable: bool = False


FLOAT_DTYPES: tuple[torch.dtype, ...] = (torch.float32, torch.float16, torch.bfloat16)
"""The floating dtypes both families compute in (``TORCH.dtypes`` and ``TRITON.dtypes`` are
this tuple)."""

TORCH = BackendFamily(
    name="torch",
    compute_capabilities=(60, 61, 70, 75, 80, 86, 87, 89, 90, 100, 101, 103, 110, 120, 121),
    dtypes=FLOAT_DTYPES,
    cpu=True,
    needs_triton=False,
    differentiable=True,
)
"""torch's own operators: every CUDA capability torch ships kernels for, and CPU."""

TRITON = BackendFamily(
    name="triton",
    compute_capabilities=(75, 80, 86, 87, 89, 90, 100, 101, 103, 110, 120, 121),
    dtypes=FLOAT_DTYPES,
    cpu=True,
    needs_triton=True,
)
"""Triton kernels: Turing (75) and newer; CPU only through ``TRITON_INTERPRET=1``."""

FAMILIES: tuple[BackendFamily, ...] = (TORCH, TRITON)
"""Every backend family, the table in one place."""


def dtype_name(dtype: torch.dtype) -> str:
    """How messages and files name a dtype: ``torch.float16`` -> ``"float16"``."""
    return str(dtype).removeprefix("torch.")


def backend_family(
    family: BackendFamily, *, min_compute_capability: int | None = None
) -> Callable[[C], C]:
    """Declare the family of a backend's support checker, and so the compute capabilities the
    backend runs on (the family's, from ``min_compute_capability`` up); returns the checker.

    Raises:
        TypeError: ``family`` is not a :class:`BackendFamily`, or ``min_compute_capability``
            is not an ``int``.
        ValueError: no capability of the family is at least ``min_compute_capability``.
    """
    if not isinstance(family, BackendFamily):
        raise TypeError(
            "backend_family: family must be a BackendFamily such as TORCH or TRITON from "
            f"flashinfer.dispatch.families, got {type(family).__name__}: {family!r}"
        )
    ccs = family.compute_capabilities
    if min_compute_capability is not None:
        if isinstance(min_compute_capability, bool) or not isinstance(min_compute_capability, int):
            raise TypeError(
                "backend_family: min_compute_capability must be an integer like 80 "
                f"(major * 10 + minor), got {type(min_compute_capability).__name__}: "
                f"{min_compute_capability!r}"
            )
        ccs = tuple(cc for cc in ccs if cc >= min_compute_capability)
        if not ccs:
            raise ValueError(
                f"backend_family: no compute capability of the {family.name} family is "
                f">= {min_compute_capability} (it has {list(family.compute_capabilities)}); "
                "lower min_compute_capability"
            )
    declare_capabilities = supported_compute_capability(ccs, cpu=family.cpu)

    def mark(checker: C) -> C:
        checker = declare_capabilities(checker)
        if family.needs_triton:  # where Triton runs depends on the interpreter setting
            checker = reads_environment(TRITON_INTERPRET_ENV)(checker)
        checker.backend_family = family  # type: ignore[attr-defined]
        return checker

    return mark


def family_of(checker: Callable[..., Any]) -> BackendFamily | None:
    """The family a support checker declares with :func:`backend_family`, or ``None``."""
    family = getattr(checker, "backend_family", None)
    return family if isinstance(family, BackendFamily) else None


def differentiable_by_family(checker: Callable[..., Any]) -> bool:
    """Whether a backend that does not declare ``differentiable=`` is taken to be differentiable, by
    the family its support checker declares."""
    family = family_of(checker)
    return True if family is None else family.differentiable
