"""flashinfer.nn: drop-in modules and the reversible model swap (issues 31, 43)."""

from __future__ import annotations

import copy
import inspect
import itertools
import subprocess
import sys
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from test_llama_compile import tiny_llama  # one tiny model for every model test
from torch import nn
from transformers import Gemma3TextConfig, GemmaConfig, Qwen3Config
from transformers.models.gemma.modeling_gemma import GemmaForCausalLM, GemmaRMSNorm
from transformers.models.gemma2.modeling_gemma2 import Gemma2RMSNorm
from transformers.models.gemma3.modeling_gemma3 import Gemma3ForCausalLM, Gemma3RMSNorm
from transformers.models.llama.modeling_llama import LlamaRMSNorm
from transformers.models.qwen3.modeling_qwen3 import Qwen3ForCausalLM, Qwen3RMSNorm

import flashinfer.nn as fnn

IDS = torch.randint(0, 128, (2, 10), generator=torch.Generator().manual_seed(1))


def test_flashinfer_nn_is_an_attribute_loaded_on_first_access_without_triton():
    code = (
        "import sys, flashinfer; print('flashinfer.nn' in sys.modules); "
        "print(flashinfer.nn.apply_flashinfer.__module__, 'triton' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "flashinfer.nn.patching", "False"]


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


class GemmaLikeNorm(nn.Module):
    """Gemma's formula, ``(1 + weight)`` in float32, in a class flashinfer does not know."""

    def __init__(self, hidden: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.zeros(hidden)), eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)
        return (y * (1.0 + self.weight.float())).type_as(x)


def _random_weights(module: nn.Module, seed: int = 0) -> nn.Module:
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.rand(p.shape, generator=gen) - 0.5)
    return module


def test_an_unknown_rmsnorm_class_is_left_reported_and_warned_once_unless_named():
    class PlainRMSNorm(nn.Module):  # the formula flashinfer computes, in a class of its own
        def __init__(self) -> None:
            super().__init__()
            self.weight, self.eps = nn.Parameter(torch.rand(8)), 1e-6

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    model = nn.Sequential(PlainRMSNorm(), nn.RMSNorm(8), PlainRMSNorm())
    with pytest.warns(UserWarning, match="left 2 RMSNorm-like.*not a known") as caught:
        report = fnn.apply_flashinfer(model)
    assert len(caught) == 1 and caught[0].filename == __file__  # once, at the caller's line
    assert list(report.swapped) == ["1"] and sorted(report.skipped) == ["0", "2"]
    report.revert()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        report = fnn.apply_flashinfer(copy.deepcopy(model), extra_rmsnorms=(PlainRMSNorm,))
    assert sorted(report.swapped) == ["0", "1", "2"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("hidden", [1, 8, 96])
def test_a_one_plus_weight_norm_is_refused_as_a_plain_one_and_swapped_with_its_offset(
    hidden, dtype
):
    norm = _random_weights(GemmaLikeNorm(hidden)).to(dtype)
    model = nn.Sequential(norm)
    x = torch.randn(4, 3, hidden).to(dtype)
    expected = norm(x)
    with pytest.warns(UserWarning, match="another formula.*'offset': 1.0"):
        report = fnn.apply_flashinfer(model, extra_rmsnorms=(GemmaLikeNorm,))
    assert report.swapped == {} and model[0] is norm and "another formula" in report.skipped["0"]
    report = fnn.apply_flashinfer(model, extra_rmsnorms={GemmaLikeNorm: {"offset": 1.0}})
    assert isinstance(model[0], fnn.RMSNorm) and model[0].weight is norm.weight
    torch.testing.assert_close(model[0](x), expected, rtol=0, atol=0)


@pytest.mark.parametrize("cls", [GemmaRMSNorm, Gemma2RMSNorm, Gemma3RMSNorm])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_hf_gemma_norms_are_known_with_their_offset(cls, dtype):
    hf = _random_weights(cls(40, eps=1e-6)).to(dtype)
    x = torch.randn(6, 40).to(dtype)
    model = nn.Sequential(hf)
    report = fnn.apply_flashinfer(model)
    assert report.counts == {cls.__name__: 1} and model[0].offset == 1.0
    torch.testing.assert_close(model[0](x), hf(x), rtol=0, atol=0)


def _tiny(config_cls, model_cls, **extra):
    config = config_cls(
        hidden_size=64,
        num_hidden_layers=2,
        vocab_size=128,
        intermediate_size=128,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=64,
        **extra,
    )
    torch.manual_seed(0)
    return _random_weights(model_cls(config).eval())


@pytest.mark.parametrize(
    "build",
    [
        lambda: _tiny(GemmaConfig, GemmaForCausalLM),
        lambda: _tiny(Gemma3TextConfig, Gemma3ForCausalLM, sliding_window=8),
        lambda: _tiny(Qwen3Config, Qwen3ForCausalLM),
    ],
    ids=["gemma", "gemma3", "qwen3"],
)
@pytest.mark.parametrize("autocast", [False, True])
def test_gemma_and_qwen3_models_keep_their_logits_when_swapped(build, autocast):
    model = build()
    with torch.no_grad(), torch.autocast("cpu", torch.bfloat16, enabled=autocast):
        expected = model(IDS, use_cache=False).logits
        report = fnn.apply_flashinfer(model)
        got = model(IDS, use_cache=False).logits
    assert report.swapped and not report.skipped
    # Gemma's (1 + weight) and Qwen3's float32 q_norm/k_norm results under autocast: exact
    torch.testing.assert_close(got, expected, rtol=0, atol=0)


@pytest.mark.parametrize("cls", [LlamaRMSNorm, Qwen3RMSNorm])
@pytest.mark.parametrize("input_dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("weight_dtype", [torch.float32, torch.bfloat16])
def test_hf_llama_family_norms_round_as_hf_does(cls, input_dtype, weight_dtype):
    hf = _random_weights(cls(48, eps=1e-6)).to(weight_dtype)
    x = torch.randn(5, 48).to(input_dtype)
    model = nn.Sequential(hf)
    report = fnn.apply_flashinfer(model)
    assert model[0].casting_mode == "llama"
    expected, got = hf(x), model[0](x)
    assert got.dtype == expected.dtype  # float32 for a float32 weight, as HF's
    torch.testing.assert_close(got, expected, rtol=0, atol=0)
    report.revert()
    fnn.apply_flashinfer(model, casting_mode="gemma")  # torch's rule: the input's dtype
    assert model[0](x).dtype == input_dtype


def test_a_casting_mode_that_is_not_one_is_refused_before_anything_is_swapped():
    model = nn.Sequential(nn.RMSNorm(8))
    with pytest.raises(ValueError, match="casting_mode must be one of.*'llama'"):
        fnn.apply_flashinfer(model, casting_mode="qwen")
    assert type(model[0]) is nn.RMSNorm
    with pytest.raises(TypeError, match="unknown options.*offset"):
        fnn.apply_flashinfer(model, extra_rmsnorms={GemmaLikeNorm: {"ofset": 1.0}})


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
    # bf16 matmuls on both sides, and the norms round as HF's (casting_mode="llama")
    torch.testing.assert_close(eager, expected, atol=0, rtol=0)
    torch.testing.assert_close(again, eager, atol=1e-2, rtol=1e-2)


# --- issue 43: Linear a drop-in under autocast and in torch's ecosystem ----------------------


DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("autocast", [None, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_keeps_torchs_dtype_under_autocast_float64_included(dtype, autocast, bias, device):
    lin = nn.Linear(24, 12, bias=bias, dtype=dtype, device=device)
    ours = fnn.Linear.from_module(lin)
    x = torch.randn(2, 3, 24, dtype=dtype, device=device)
    with torch.autocast(device, dtype=autocast or torch.bfloat16, enabled=autocast is not None):
        expected, got = lin(x), ours(x)
    assert got.dtype == expected.dtype  # autocast leaves float64 alone (CPU and CUDA)
    tol = {torch.float64: 1e-12, torch.float32: 1e-5 if device == "cpu" else 2e-2}.get(
        expected.dtype, 2e-2
    )
    torch.testing.assert_close(got, expected, rtol=tol, atol=tol)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(1, 1), (24, 12), (7, 130)])
def test_linear_is_an_nn_linear_with_torchs_constructor(shape, bias):
    assert inspect.signature(fnn.Linear) == inspect.signature(nn.Linear)
    torch.manual_seed(0)
    ours = fnn.Linear(*shape, bias=bias, dtype=torch.bfloat16)
    torch.manual_seed(0)
    theirs = nn.Linear(*shape, bias=bias, dtype=torch.bfloat16)
    assert isinstance(ours, nn.Linear) and repr(ours).startswith("Linear(")
    for (k, a), (j, b) in zip(ours.state_dict().items(), theirs.state_dict().items(), strict=True):
        assert k == j and a.dtype == b.dtype == torch.bfloat16 and torch.equal(a, b)
    assert fnn.Linear(*shape, bias=bias, device="meta").weight.is_meta
    x = torch.randn(3, shape[0]).bfloat16()
    torch.testing.assert_close(ours(x), theirs(x), rtol=2e-2, atol=2e-2)


def test_a_patched_model_resizes_its_token_embeddings():
    model = tiny_llama()
    fnn.apply_flashinfer(model, linear=True)
    model.resize_token_embeddings(136)
    assert model(IDS, use_cache=False).logits.shape[-1] == 136


# --- issue 43: the swap's bookkeeping: atomic, every slot, state carried back ---------------


def _stack(sizes: tuple[int, ...], device: str | None = None) -> nn.Sequential:
    """Linear and norm layers of the given widths, torch's and HF's norms in turn."""
    layers: list[nn.Module] = []
    with torch.device(device or "cpu"):
        for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
            layers += [nn.Linear(a, b), nn.RMSNorm(b) if i % 2 else LlamaRMSNorm(b)]
    return nn.Sequential(*layers)


SIZES = [(8, 8), (4, 16, 8), (3, 5, 7, 2, 9)]


def _fresh_state(model: nn.Module) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(7)
    return {k: torch.randn(v.shape, generator=gen) for k, v in model.state_dict().items()}


@pytest.mark.parametrize("sizes", SIZES)
def test_revert_carries_back_parameters_loaded_with_assign(sizes):
    model = _stack(sizes)
    originals = list(model)
    report = fnn.apply_flashinfer(model, linear=True)
    state = _fresh_state(model)
    model.load_state_dict(state, assign=True)
    x = torch.randn(2, sizes[0])
    expected = model(x)
    report.revert()
    assert list(model) == originals
    for key, value in model.state_dict().items():
        assert torch.equal(value, state[key]), key
    torch.testing.assert_close(model(x), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("sizes", SIZES)
def test_revert_after_patching_on_meta_then_to_empty_and_a_load(sizes):
    model = _stack(sizes, device="meta")
    report = fnn.apply_flashinfer(model, linear=True)
    model.to_empty(device="cpu")
    state = _fresh_state(model)
    model.load_state_dict(state)
    report.revert()
    for key, value in model.state_dict().items():
        assert value.device.type == "cpu" and torch.equal(value, state[key]), key
    assert model(torch.randn(2, sizes[0])).isfinite().all()


def _failing_at(call: int, real: Any, calls: Iterator[int]) -> Any:
    def from_module(module: nn.Module, **options: Any) -> nn.Module:
        if next(calls) == call:
            raise RuntimeError("cannot build")
        return real(module, **options)

    return staticmethod(from_module)


@pytest.mark.parametrize("sizes", SIZES)
def test_an_error_while_building_the_replacements_swaps_nothing(monkeypatch, sizes):
    model = _stack(sizes)
    before = list(model)
    for call in range(len(before)):  # the first module's replacement fails, the second's...
        calls = itertools.count()
        with monkeypatch.context() as patch:
            for cls in (fnn.RMSNorm, fnn.Linear):
                patch.setattr(cls, "from_module", _failing_at(call, cls.from_module, calls))
            with pytest.raises(RuntimeError, match="cannot build"):
                fnn.apply_flashinfer(model, linear=True)
        assert list(model) == before  # every slot holds its original module


@pytest.mark.parametrize("shapes", [(8, (4, 8)), ((4, 8), 8, 16), (8, (2, 2, 8), 8)])
def test_a_norm_over_several_dimensions_is_skipped_the_others_swapped(shapes):
    model = nn.Sequential(*(nn.RMSNorm(s) for s in shapes))
    with pytest.warns(UserWarning, match="last one only") as caught:
        report = fnn.apply_flashinfer(model)
    assert len(caught) == 1
    for i, shape in enumerate(shapes):
        one_dim = isinstance(shape, int)
        assert isinstance(model[i], fnn.RMSNorm) == one_dim
        assert (str(i) in report.skipped) != one_dim


@pytest.mark.parametrize("device", [*DEVICES, "meta"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("hidden", [1, 16, 33])
def test_a_norm_without_weight_runs_on_the_inputs_device_and_dtype(device, dtype, hidden):
    theirs = nn.RMSNorm(hidden, elementwise_affine=False)
    model = nn.Sequential(theirs)
    fnn.apply_flashinfer(model)
    ours = model[0]
    assert isinstance(ours, fnn.RMSNorm) and list(ours.buffers()) == []
    x = torch.randn(3, hidden).to(dtype)
    got = ours(x.to(device))
    assert got.device.type == device and got.dtype == dtype
    if device == "cpu":
        torch.testing.assert_close(got, theirs(x), rtol=0, atol=0)


def _slots(model: nn.Module) -> list[tuple[nn.Module, str]]:
    return [(parent, name) for parent in model.modules() for name in parent._modules]


@pytest.mark.parametrize("hidden", [8, 24])
@pytest.mark.parametrize("layout", ["one list", "two parents", "nested twice"])
def test_a_module_held_in_several_slots_gets_one_replacement_in_all(layout, hidden):
    norm, lin = nn.RMSNorm(hidden), nn.Linear(hidden, hidden)
    if layout == "one list":
        model: nn.Module = nn.ModuleList([norm, lin, norm, lin])
    elif layout == "two parents":
        model = nn.Sequential(nn.Sequential(norm, lin), nn.Sequential(lin, norm))
    else:
        inner = nn.Sequential(norm, lin, norm)
        model = nn.Sequential(inner, nn.Sequential(inner), lin)
    held = {id(m): m for m in (norm, lin)}
    slots = [(p, n) for p, n in _slots(model) if id(p._modules[n]) in held]
    report = fnn.apply_flashinfer(model, linear=True)
    by_original: dict[int, set[int]] = {id(norm): set(), id(lin): set()}
    for parent, name in slots:
        now = parent._modules[name]
        assert isinstance(now, (fnn.RMSNorm, fnn.Linear))
        by_original[id(norm) if isinstance(now, fnn.RMSNorm) else id(lin)].add(id(now))
    assert all(len(ids) == 1 for ids in by_original.values())  # one replacement each
    report.revert()
    assert all(parent._modules[name] in (norm, lin) for parent, name in slots)
    assert not any(isinstance(m, (fnn.RMSNorm, fnn.Linear)) for m in model.modules())
