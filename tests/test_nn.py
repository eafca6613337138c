"""flashinfer.nn: drop-in modules and the reversible model swap (issue 31)."""

from __future__ import annotations

import copy
import sys

import pytest
import torch
from test_llama_compile import tiny_llama  # one tiny model for every model test
from torch import nn
from transformers.models.llama.modeling_llama import LlamaRMSNorm

import flashinfer.nn as fnn

IDS = torch.randint(0, 128, (2, 10), generator=torch.Generator().manual_seed(1))


def test_import_flashinfer_does_not_import_nn():
    import subprocess

    code = "import sys, flashinfer; print('flashinfer.nn' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("eps", [None, 1e-5])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rmsnorm_matches_torchs_module_and_its_state_dict(eps, dtype):
    ours, theirs = fnn.RMSNorm(48, eps=eps, dtype=dtype), nn.RMSNorm(48, eps=eps, dtype=dtype)
    with torch.no_grad():
        theirs.weight.copy_(1 + 0.1 * torch.randn(48))
    assert ours.load_state_dict(theirs.state_dict()) is not None
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["weight"]
    x = torch.randn(3, 5, 48).to(dtype)
    torch.testing.assert_close(ours(x), theirs(x), rtol=0, atol=0)


def test_rmsnorm_without_affine_has_an_empty_state_dict():
    ours, theirs = (
        fnn.RMSNorm(16, elementwise_affine=False),
        nn.RMSNorm(16, elementwise_affine=False),
    )
    assert dict(ours.state_dict()) == dict(theirs.state_dict()) == {}
    x = torch.randn(4, 16)
    torch.testing.assert_close(ours(x), theirs(x), rtol=0, atol=0)


def test_rmsnorm_refuses_several_normalised_dimensions_saying_what_to_use():
    with pytest.raises(ValueError, match="last dimension only.*torch.nn.RMSNorm"):
        fnn.RMSNorm((4, 8))


def test_rmsnorm_from_an_hf_norm_shares_its_weight_and_epsilon():
    hf = LlamaRMSNorm(32, eps=1e-3)
    with torch.no_grad():
        hf.weight.mul_(1.5)
    ours = fnn.RMSNorm.from_module(hf)
    assert ours.weight is hf.weight and ours.variance_epsilon == 1e-3
    x = torch.randn(6, 32)
    torch.testing.assert_close(ours(x), hf(x), rtol=1e-6, atol=1e-6)


def test_linear_matches_torchs_and_keeps_its_state_dict():
    lin = nn.Linear(24, 12)
    ours = fnn.Linear.from_module(lin)
    assert ours.state_dict().keys() == lin.state_dict().keys()
    x = torch.randn(2, 3, 24)
    torch.testing.assert_close(ours(x), lin(x), rtol=1e-5, atol=1e-5)


def test_the_model_swap_reports_keeps_the_logits_and_is_reversible():
    model = tiny_llama()
    originals = {n: m for n, m in model.named_modules()}
    keys = dict(model.state_dict())
    with torch.no_grad():
        expected = model(IDS, use_cache=False).logits
    report = fnn.apply_flashinfer(model, linear=True)
    assert report.counts == {"LlamaRMSNorm": 5, "Linear": 15}  # 2 norms a layer, the final
    assert isinstance(model.model.norm, fnn.RMSNorm)
    assert not any(isinstance(m, LlamaRMSNorm) for m in model.modules())
    state = model.state_dict()
    assert state.keys() == keys.keys()
    assert all(state[k].data_ptr() == keys[k].data_ptr() for k in keys)  # shared, not copied
    with torch.no_grad():
        torch.testing.assert_close(model(IDS, use_cache=False).logits, expected, atol=1e-4, rtol=0)
    report.revert()
    assert {n: m for n, m in model.named_modules()} == originals
    with pytest.raises(RuntimeError, match="already reverted"):
        report.revert()


def test_the_swap_as_a_with_block_reverts_on_exit_also_on_error():
    model = tiny_llama()
    norm = model.model.norm
    with pytest.raises(KeyError), fnn.apply_flashinfer(model):
        assert isinstance(model.model.norm, fnn.RMSNorm)
        raise KeyError("boom")
    assert model.model.norm is norm


def test_an_unknown_rmsnorm_class_is_left_and_reported_unless_named():
    class OffsetRMSNorm(nn.Module):  # Gemma's kind: weight + 1, not flashinfer's formula
        def __init__(self) -> None:
            super().__init__()
            self.weight, self.eps = nn.Parameter(torch.zeros(8)), 1e-6

    model = nn.Sequential(OffsetRMSNorm(), nn.RMSNorm(8))
    report = fnn.apply_flashinfer(model)
    assert list(report.swapped) == ["1"] and "not a known RMSNorm formula" in report.skipped["0"]
    report.revert()
    report = fnn.apply_flashinfer(copy.deepcopy(model), extra_rmsnorms=(OffsetRMSNorm,))
    assert sorted(report.swapped) == ["0", "1"]


def test_training_through_the_swapped_model_gives_the_same_gradients():
    model, patched = tiny_llama().train(), tiny_llama().train()
    fnn.apply_flashinfer(patched, linear=True)
    for m in (model, patched):
        m(IDS, labels=IDS, use_cache=False).loss.backward()
    for (name, p), q in zip(model.named_parameters(), patched.parameters(), strict=True):
        torch.testing.assert_close(q.grad, p.grad, atol=1e-5, rtol=1e-4, msg=name)


def test_autocast_eager_and_compiled_matches_the_unpatched_model():
    model = tiny_llama()
    patched = copy.deepcopy(model)
    fnn.apply_flashinfer(patched, linear=True)
    with torch.no_grad(), torch.autocast("cpu", torch.bfloat16):
        expected = model(IDS, use_cache=False).logits.float()
        eager = patched(IDS, use_cache=False).logits.float()
        compiled = torch.compile(patched, backend="aot_eager", fullgraph=True)
        again = compiled(IDS, use_cache=False).logits.float()
    # bf16 matmuls on both sides; HF's norm rounds x*rstd to bf16 before the weight,
    # flashinfer's once after: a few bf16 ulps apart.
    torch.testing.assert_close(eager, expected, atol=5e-2, rtol=5e-2)
    torch.testing.assert_close(again, eager, atol=1e-2, rtol=1e-2)
