"""``flashinfer explain fused_add_rmsnorm`` (issue 34, item 18): an experimental API without
backends can be explained; what the explanation chooses is what the call runs (drawn
shapes), and ``explain --help`` lists its ``--shapes`` format."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from flashinfer.cli import main
from flashinfer.experimental.fused_add_rmsnorm.implementation import kernel_unsupported_reason


def _explain(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with redirect_stdout(out):
        code = main(["explain", "fused_add_rmsnorm", *argv])
    return code, out.getvalue()


def test_it_is_explained():
    code, text = _explain("--shapes", "4x64")
    assert code == 0, text
    assert text.startswith("flashinfer.fused_add_rmsnorm(input=float32[4, 64] on cpu, ")
    assert "no backends to choose between" in text
    assert "triton kernel" in text and "torch composition" in text
    assert "backend='torch'" not in text  # the API takes no backend=
    assert "\nchoice: '" in text


@settings(max_examples=15, deadline=None)
@given(
    dims=st.lists(st.integers(1, 9), min_size=1, max_size=3),
    dtype=st.sampled_from(["float32", "float16", "bfloat16"]),
)
def test_the_choice_is_what_the_call_runs(dims, dtype):
    shape = "x".join(map(str, dims))
    code, text = _explain("--shapes", shape, "--dtype", dtype, "--json")
    assert code == 0, text
    (doc,) = json.loads(text)
    t = getattr(torch, dtype)
    x, r, w = torch.zeros(dims, dtype=t), torch.zeros(dims, dtype=t), torch.ones(dims[-1], dtype=t)
    runs = "torch composition" if kernel_unsupported_reason(x, r, w) else "triton kernel"
    assert doc["chosen"] == runs
    assert [name for name, _ in doc["paths"]] == ["triton kernel", "torch composition"]
    assert set(doc) >= {"api", "call", "chosen", "error", "tactic", "notes"}


def test_help_lists_its_shape_format():
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["explain", "--help"]) == 0
    assert "fused_add_rmsnorm  --shapes TOKENSxHIDDEN" in out.getvalue()
