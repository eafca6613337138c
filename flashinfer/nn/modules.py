"""Drop-in modules: :class:`RMSNorm` and :class:`Linear`, computed by flashinfer's ops."""

from __future__ import annotations

import numbers
from typing import Any

import torch
from torch import nn

from flashinfer.gemm import mm
from flashinfer.norm import rmsnorm

__all__ = ["CASTING_MODES", "Linear", "RMSNorm"]

_FP32_EPS = torch.finfo(torch.float32).eps


CASTING_MODES = ("gemma", "llama")
"""How :class:`RMSNorm` rounds, as Liger Kernel's ``casting_mode`` names them: ``"gemma"``
computes ``x * rstd * (offset + weight)`` in float32 and rounds once to the input's dtype
(``torch.nn.RMSNorm``'s rule, HF Gemma's); ``"llama"`` rounds ``x * rstd`` to the input's
dtype, then multiplies by the weight in the promoted dtype (HF ``LlamaRMSNorm``'s rule, also
Qwen2/3's, Mistral's, Phi-3's: a float32 weight gives a float32 result)."""


class RMSNorm(nn.Module):
    """``torch.nn.RMSNorm`` over the last dimension, computed by :func:`flashinfer.rmsnorm`.

    The same constructor (``normalized_shape``: an int or a 1-tuple, the last dimension),
    ``state_dict`` and ``eps`` rule (``None``: float32's machine epsilon for every input
    dtype, as torch's kernel does).  ``variance_epsilon`` is HF's name for ``eps``.

    ``offset``: the scale is ``offset + weight``, computed in float32 (Gemma's ``1 + weight``
    is ``offset=1.0``, as ``LigerRMSNorm(offset=...)``); a new weight starts at
    ``1 - offset``, a unit scale.  ``casting_mode``: one of :data:`CASTING_MODES`; the
    default ``"gemma"`` gives the result in the input's dtype whatever the weight's
    (torch's rule), ``"llama"`` rounds as HF's ``LlamaRMSNorm`` does.  Without a weight the
    norm runs with a unit one made on the input's device, in its dtype.
    """

    weight: nn.Parameter | None

    def __init__(
        self,
        normalized_shape: int | tuple[int, ...] | list[int] | torch.Size,
        eps: float | None = None,
        elementwise_affine: bool = True,
        device: Any = None,
        dtype: torch.dtype | None = None,
        *,
        offset: float = 0.0,
        casting_mode: str = "gemma",
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
        if casting_mode not in CASTING_MODES:
            raise ValueError(
                f"flashinfer.nn.RMSNorm: casting_mode must be one of {CASTING_MODES}, got "
                f"{casting_mode!r}"
            )
        self.normalized_shape = shape
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        self.offset = float(offset)
        self.casting_mode = casting_mode
        if elementwise_affine:
            init = torch.full(shape, 1.0 - self.offset, device=device, dtype=dtype)
            self.weight = nn.Parameter(init)
        else:
            self.register_parameter("weight", None)

    @property
    def variance_epsilon(self) -> float | None:
        """HF's name for :attr:`eps`."""
        return self.eps

    @variance_epsilon.setter
    def variance_epsilon(self, value: float | None) -> None:
        self.eps = value

    @classmethod
    def from_module(cls, module: nn.Module, **options: Any) -> RMSNorm:
        """A flashinfer RMSNorm sharing ``module``'s weight (the same Parameter object) and
        epsilon: ``torch.nn.RMSNorm`` or an HF RMSNorm (``weight``, ``variance_epsilon`` or
        ``eps``).  ``options``: ``offset`` and ``casting_mode``, the module's formula."""
        weight = getattr(module, "weight", None)
        eps = getattr(module, "variance_epsilon", getattr(module, "eps", None))
        if weight is None:
            shape = tuple(getattr(module, "normalized_shape", ()))
            norm = cls(shape, eps=eps, elementwise_affine=False, **options)
        else:
            norm = cls(tuple(weight.shape), eps=eps, device="meta", **options)
            norm.weight = weight  # shared: training either trains both
        return norm

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        eps = self.eps if self.eps is not None else _FP32_EPS
        scale: torch.Tensor | None = self.weight
        if scale is not None and self.offset:
            scale = scale.float() + self.offset  # Gemma's (1 + weight.float())
        if scale is not None and self.casting_mode == "gemma":
            return rmsnorm(input, scale, eps)
        normed = rmsnorm(input, input.new_ones(input.shape[-1]), eps)
        if scale is None:
            return normed
        # HF Llama's weight * x.to(input_dtype): rounded to the input's dtype also where CUDA
        # autocast made rmsnorm's result float32
        return scale * normed.to(input.dtype)

    def extra_repr(self) -> str:
        text = (
            f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"
        )
        if self.offset:
            text += f", offset={self.offset}"
        if self.casting_mode != "gemma":
            text += f", casting_mode={self.casting_mode!r}"
        return text


class Linear(nn.Linear):
    """``torch.nn.Linear`` computed by :func:`flashinfer.mm` on the input flattened to 2-D.

    An ``nn.Linear`` with its constructor ``(in_features, out_features, bias=True,
    device=None, dtype=None)``, its parameters and ``state_dict``.  Under ``torch.autocast``
    the input and weight are cast as ``torch.nn.Linear``'s are (``mm`` follows
    ``torch.mm``'s rule: float64 is left alone).  A float64 input, which ``mm`` does not
    compute, runs ``torch.nn.Linear``'s own forward.
    """

    @classmethod
    def from_module(cls, module: nn.Linear) -> Linear:
        """A flashinfer Linear sharing ``module``'s weight and bias (the same Parameters)."""
        new = cls(
            module.in_features,
            module.out_features,
            bias=module.bias is not None,
            device="meta",
            dtype=module.weight.dtype,
        )
        new.weight, new.bias = module.weight, module.bias
        return new

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        if input.dtype is torch.float64:
            return super().forward(input)
        y = mm(input.reshape(-1, self.in_features), self.weight.t())
        if self.bias is not None:
            y = y + self.bias.to(y.dtype)
        return y.reshape(*input.shape[:-1], self.out_features)
