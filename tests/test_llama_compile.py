"""A real model through the ops, eager and compiled (issue 19's "a real model").

A tiny Llama from ``transformers``, randomly initialised (``LlamaConfig``: hidden 64, two
layers, vocabulary 128, four heads, two key/value heads; nothing is downloaded), in eval
mode.  A copy of it routes every RMSNorm through ``flashinfer.rmsnorm`` and the attention's
q, k and v projections through ``flashinfer.mm``; its logits, eager and under
``torch.compile(fullgraph=True, backend="inductor")``, must agree with the unpatched
model's within 1e-4 in float32, in one graph that holds the flashinfer operators or,
where the call is transparent, their torch code (``torch._dynamo.explain``: zero breaks).
The tests fail if the swap did nothing (the
operators are counted in the traced graph), if an op breaks the graph, or if the compiled
result drifts.

Inference runs under ``torch.no_grad()`` as serving stacks run it.  A forward with grad
enabled is a separate test: the model's parameters require grad, so every op call goes
through the operator's autograd kernel, which needs the ops' backward formulas.  The forward
is called with ``use_cache=False``: the logits are all the test needs, and no cache object
has to be traced.  Triton kernels (if ``"auto"`` picks one) run interpreted on CPU
(tests/conftest.py).
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn
from transformers import LlamaConfig, LlamaForCausalLM
from transformers.models.llama.modeling_llama import LlamaRMSNorm

import flashinfer

TOLERANCE = 1e-4
PROJECTIONS = ("q_proj", "k_proj", "v_proj")
LAYERS = 2


class FlashinferRMSNorm(nn.Module):
    """A ``LlamaRMSNorm`` (its weight and epsilon, shared) computed by ``flashinfer.rmsnorm``."""

    def __init__(self, norm: LlamaRMSNorm) -> None:
        super().__init__()
        self.weight = norm.weight
        self.variance_epsilon = norm.variance_epsilon

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return flashinfer.rmsnorm(hidden_states, self.weight, self.variance_epsilon)


class FlashinferLinear(nn.Module):
    """An ``nn.Linear`` (its weight and bias, shared) computed by ``flashinfer.mm`` on the
    input flattened to two dimensions."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight, self.bias = linear.weight, linear.bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = flashinfer.mm(x.reshape(-1, self.in_features), self.weight.t())
        if self.bias is not None:
            y = y + self.bias
        return y.reshape(*x.shape[:-1], self.out_features)


def tiny_llama() -> LlamaForCausalLM:
    config = LlamaConfig(
        hidden_size=64,
        num_hidden_layers=LAYERS,
        vocab_size=128,
        intermediate_size=128,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    torch.manual_seed(0)
    return LlamaForCausalLM(config).eval()


def routed_through_flashinfer(model: LlamaForCausalLM) -> LlamaForCausalLM:
    """A copy of ``model`` whose RMSNorms and q/k/v projections call flashinfer."""
    patched = copy.deepcopy(model)
    for module in list(patched.modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, LlamaRMSNorm):
                setattr(module, name, FlashinferRMSNorm(child))
            elif name in PROJECTIONS and isinstance(child, nn.Linear):
                setattr(module, name, FlashinferLinear(child))
    return patched


@pytest.fixture(scope="module")
def models() -> tuple[LlamaForCausalLM, LlamaForCausalLM, torch.Tensor]:
    model = tiny_llama()
    ids = torch.randint(
        0, model.config.vocab_size, (2, 10), generator=torch.Generator().manual_seed(1)
    )
    return model, routed_through_flashinfer(model), ids


def logits(model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    return model(ids, use_cache=False).logits


def operator_calls(graphs: list[torch.fx.GraphModule]) -> dict[str, int]:
    """How many times each ``torch.ops.flashinfer`` operator is called in the traced graphs."""
    found: dict[str, int] = {}
    for graph in graphs:
        for node in graph.graph.nodes:
            name = str(node.target)
            if node.op == "call_function" and name.startswith("flashinfer."):
                found[name] = found.get(name, 0) + 1
    return found


def test_the_patched_model_routes_every_norm_and_projection_through_flashinfer(models):
    _, patched, _ = models
    norms = [m for m in patched.modules() if isinstance(m, FlashinferRMSNorm)]
    linears = [m for m in patched.modules() if isinstance(m, FlashinferLinear)]
    assert len(norms) == 2 * LAYERS + 1  # two per layer and the final one
    assert len(linears) == len(PROJECTIONS) * LAYERS
    assert not any(isinstance(m, LlamaRMSNorm) for m in patched.modules())


def test_eager_logits_match_the_unpatched_model(models):
    model, patched, ids = models
    with torch.no_grad():
        expected, got = logits(model, ids), logits(patched, ids)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, expected, atol=TOLERANCE, rtol=0)


def test_the_forward_is_one_graph_holding_the_flashinfer_operators(models):
    _, patched, ids = models
    torch._dynamo.reset()
    with torch.no_grad():
        explained = torch._dynamo.explain(patched)(ids, use_cache=False)
    assert explained.graph_break_count == 0, explained.break_reasons
    assert explained.graph_count == 1
    # rmsnorm's "auto" chooses its torch backend on CPU: transparent, its math is in the
    # graph; mm's "auto" is tuned, so it stays the operator (docs/compile.rst).
    calls = {"flashinfer.mm_no_grad.default": len(PROJECTIONS) * LAYERS}  # nothing needs grad
    assert operator_calls(explained.graphs) == calls
    norms = [
        n
        for g in explained.graphs
        for n in g.graph.nodes
        if n.target in (torch.nn.functional.rms_norm, torch.rms_norm)
    ]
    assert len(norms) == 2 * LAYERS + 1
    torch._dynamo.reset()
    with torch.no_grad(), flashinfer.use_backends(rmsnorm=["torch"]):  # decided per call
        explained = torch._dynamo.explain(patched)(ids, use_cache=False)
    assert explained.graph_break_count == 0, explained.break_reasons
    assert operator_calls(explained.graphs) == {
        "flashinfer.rmsnorm_no_grad.default": 2 * LAYERS + 1,
        "flashinfer.mm_no_grad.default": len(PROJECTIONS) * LAYERS,
    }


@pytest.mark.slow  # inductor compiles the model: about a minute on a shared CPU
def test_inductor_fullgraph_logits_match_the_unpatched_model(models):
    model, patched, ids = models
    torch._dynamo.reset()
    compiled = torch.compile(patched, fullgraph=True, backend="inductor")
    with torch.no_grad():
        expected = logits(model, ids)
        first, again = logits(compiled, ids), logits(compiled, ids)
    torch.testing.assert_close(first, expected, atol=TOLERANCE, rtol=0)
    torch.testing.assert_close(again, expected, atol=TOLERANCE, rtol=0)


def _declares_backward(api: object) -> bool:
    """Whether ``api``'s torch operator has a backward formula registered."""
    torch_op = api.dispatcher.torch_op  # type: ignore[attr-defined]
    assert torch_op is not None, api
    return torch_op._backward is not None


def test_a_compiled_forward_with_grad_is_differentiated_or_refused_never_detached(models):
    """Grad enabled, the parameters requiring grad: the compiled model's gradients match the
    unpatched model's where both ops declare a backward formula; otherwise the call is
    refused, naming the fix, as issue 19 item 4 requires (never a detached result)."""
    model, patched, ids = models
    torch._dynamo.reset()
    compiled = torch.compile(patched, fullgraph=True, backend="aot_eager")
    if not (_declares_backward(flashinfer.rmsnorm) and _declares_backward(flashinfer.mm)):
        with pytest.raises(RuntimeError, match=r"cannot differentiate(.|\n)*torch\.no_grad\(\)"):
            logits(compiled, ids)
        return
    expected = logits(model, ids)
    got = logits(compiled, ids)
    torch.testing.assert_close(got, expected, atol=TOLERANCE, rtol=0)
    weights = {n: p for n, p in model.named_parameters()}
    own = {n: p for n, p in patched.named_parameters()}
    grads = torch.autograd.grad(expected.square().sum(), list(weights.values()))
    got_grads = torch.autograd.grad(got.square().sum(), [own[n] for n in weights])
    for name, want, have in zip(weights, grads, got_grads, strict=True):
        torch.testing.assert_close(have, want, atol=TOLERANCE, rtol=1e-4, msg=name)
