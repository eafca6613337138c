"""rmsnorm's torch backend: torch's fused ``rms_norm`` where it applies, with the numerics of
the fp32 composition it replaced, and a weight of another dtype than the input (issue 31)."""

from __future__ import annotations

import pytest
import torch

import flashinfer

DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def _composed(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """The backend's formula before torch's op was used: fp32 throughout, one rounding."""
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(4, 256), (3, 5000), (2, 3, 100), (7,)])
def test_the_fused_op_gives_the_compositions_bits(dtype, shape):
    g = torch.Generator().manual_seed(sum(shape))
    x = torch.randn(shape, generator=g).to(dtype)
    w = (1 + 0.1 * torch.randn(shape[-1], generator=g)).to(dtype)
    for eps in (1e-6, 0.5):
        got = flashinfer.rmsnorm(x, w, eps, backend="torch")
        assert got.dtype == dtype
        assert torch.equal(got, _composed(x, w, eps))


def test_the_backend_calls_torchs_op_when_the_dtypes_agree(monkeypatch):
    calls: list[torch.dtype] = []
    fused = torch.nn.functional.rms_norm

    def spy(x, shape, w, eps):
        calls.append(x.dtype)
        return fused(x, shape, w, eps)

    monkeypatch.setattr(flashinfer.norm, "_torch_rms_norm", spy)
    x = torch.randn(4, 64)
    flashinfer.rmsnorm(x, torch.ones(64), backend="torch")
    assert calls == [torch.float32]
    flashinfer.rmsnorm(x.bfloat16(), torch.ones(64), backend="torch")  # mixed: composed
    assert calls == [torch.float32]
    assert torch.equal(
        flashinfer.rmsnorm(x.bfloat16(), torch.ones(64), backend="torch"),
        _composed(x.bfloat16(), torch.ones(64), 1e-6),
    )


@pytest.mark.parametrize("backend", ["torch", "triton"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_float32_weight_with_16_bit_activations_is_accepted(backend, dtype):
    """As a mixed-precision model holds it: the result is in the input's dtype (torch's
    rule for rms_norm), computed as torch computes it."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(6, 96, generator=g).to(dtype)
    w = 1 + 0.1 * torch.randn(96, generator=g)
    got = flashinfer.rmsnorm(x, w, backend=backend)
    assert got.dtype == dtype
    expected = torch.nn.functional.rms_norm(x.float(), (96,), w, 1e-6).to(dtype)
    torch.testing.assert_close(got, expected, rtol=0, atol=0 if backend == "torch" else 1e-2)


def test_a_weight_of_an_unsupported_dtype_is_refused_saying_which():
    with pytest.raises(ValueError, match="weight dtype float64 is not supported"):
        flashinfer.rmsnorm(torch.randn(2, 8), torch.ones(8, dtype=torch.float64))
