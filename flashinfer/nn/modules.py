"""Drop-in modules: :class:`RMSNorm` and :class:`Linear`, computed by flashinfer's ops."""

from __future__ import annotations

import numbers
from typing import Any

import torch
from torch import nn

from flashinfer.gemm import mm
from flashinfer.norm import rmsnorm

__all__ = ["Linear", "RMSNorm"]

_FP32_EPS = torch.finfo(torch.float32).eps


class RMSNorm(nn.Module):
    """``torch.nn.RMSNorm`` over the last dimension, computed by :func:`flashinfer.rmsnorm`.

    The same constructor (``normalized_shape``: an int or a 1-tuple; flashinfer normalises
    over the last dimension only), the same ``state_dict`` (``weight`` when
    ``elementwise_affine``, nothing otherwise) and the same ``eps`` rule: ``None`` means
    the machine epsilon of the type the norm is computed in, float32's for every input
    dtype (what torch's kernel uses: its docs say the input dtype's, but a bfloat16 input
    is normalised with float32's epsilon, and so is it here).  ``variance_epsilon`` reads and writes
    ``eps`` as HF's ``LlamaRMSNorm`` names it, so a module built from one
    (:meth:`from_module`) behaves as it did.

    The result is in the input's dtype whatever the weight's (torch's rule; HF's
    ``LlamaRMSNorm`` returns float32 for a float32 weight and a bfloat16 input).
    """

    weight: nn.Parameter | None

    def __init__(
        self,
        normalized_shape: int | tuple[int, ...] | list[int] | torch.Size,
        eps: float | None = None,
        elementwise_affine: bool = True,
        device: Any = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        if isinstance(normalized_shape, (int, numbers.Integral)):
            shape: tuple[int, ...] = (int(normalized_shape),)
        else:
            shape = tuple(int(s) for s in normalized_shape)
        if len(shape) != 1:
            raise ValueError(
                f"flashinfer.nn.RMSNorm normalises over the last dimension only: "
                f"normalized_shape must be one size, got {shape}; use torch.nn.RMSNorm for "
                "several trailing dimensions"
            )
        self.normalized_shape = shape
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = nn.Parameter(torch.ones(shape, device=device, dtype=dtype))
        else:
            self.register_parameter("weight", None)
            # rmsnorm takes a weight: a unit one, not saved (state_dict stays empty).
            self.register_buffer(
                "unit_weight", torch.ones(shape, device=device, dtype=dtype), persistent=False
            )

    @property
    def variance_epsilon(self) -> float | None:
        """HF's name for :attr:`eps`."""
        return self.eps

    @variance_epsilon.setter
    def variance_epsilon(self, value: float | None) -> None:
        self.eps = value

    @classmethod
    def from_module(cls, module: nn.Module) -> RMSNorm:
        """A flashinfer RMSNorm sharing ``module``'s weight (the same Parameter object) and
        epsilon: ``torch.nn.RMSNorm`` or an HF RMSNorm (``weight``, ``variance_epsilon``)."""
        weight = getattr(module, "weight", None)
        eps = getattr(module, "variance_epsilon", getattr(module, "eps", None))
        if weight is None:
            shape = tuple(getattr(module, "normalized_shape", ()))
            norm = cls(shape, eps=eps, elementwise_affine=False)
        else:
            norm = cls(tuple(weight.shape), eps=eps, device="meta")
            norm.weight = weight  # shared: training either trains both
        return norm

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        weight: torch.Tensor = self.weight if self.weight is not None else self.unit_weight  # type: ignore[assignment]
        eps = self.eps if self.eps is not None else _FP32_EPS
        return rmsnorm(input, weight, eps)

    def extra_repr(self) -> str:
        return (
            f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"
        )


class Linear(nn.Module):
    """``torch.nn.Linear`` computed by :func:`flashinfer.mm` on the input flattened to 2-D.

    The same ``state_dict`` (``weight`` of shape ``(out, in)``, ``bias``).  Under
    ``torch.autocast`` the input and weight are cast to the autocast dtype first, as
    ``torch.nn.Linear``'s matmul is (flashinfer's ``mm`` takes one dtype for both).
    """

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None) -> None:
        super().__init__()
        self.out_features, self.in_features = weight.shape
        self.weight = weight
        self.bias = bias

    @classmethod
    def from_module(cls, module: nn.Linear) -> Linear:
        """A flashinfer Linear sharing ``module``'s weight and bias."""
        return cls(module.weight, module.bias)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        x, w = input.reshape(-1, self.in_features), self.weight
        device = input.device.type
        if torch.is_autocast_enabled(device):
            dtype = torch.get_autocast_dtype(device)
            x, w = x.to(dtype), w.to(dtype)
        y = mm(x, w.t())
        if self.bias is not None:
            y = y + self.bias.to(y.dtype)
        return y.reshape(*input.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}"
        )
