"""``explain`` reasons on metadata (issue 21, item 11).

``flashinfer explain`` describes its inputs as fake tensors, so a problem of any size
allocates nothing; a shape no tensor can have is a usage error (exit 2, one line), never a
crash.  ``op.explain`` on metadata-only inputs (fake or ``meta`` tensors) decides with the
checks that read metadata, and says "not decided" for a backend whose checks read data.
"""

from __future__ import annotations

import json
import math
import os
import resource
import subprocess
import sys

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

from flashinfer.backend_dispatch import backend_requirement, reads_tensor_data
from flashinfer.cli import main

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LARGEST = 2**63 - 1  # the most elements, and bytes, a tensor can have
FLOAT32 = 4

# --------------------------------------------------------------------------------------
# The command: any shape string gives a table or one line of usage error
# --------------------------------------------------------------------------------------

# The tensors of each op's problem (the spec the command's error follows).
TENSORS = {
    "mm": lambda d: [(d[0], d[2]), (d[2], d[1]), (d[0], d[1])],
    "rmsnorm": lambda d: [d, (d[-1],), d],
}
NDIMS = {"mm": (3,), "rmsnorm": (1, 2, 3, 4)}

small = st.integers(1, 4096).map(str)
big = st.integers(10**5, 10**25).map(str)  # large, past int64, past any tensor
bad = st.sampled_from(["0", "-1", "-99999999999999999999", "", "a", "1.5", "0x10", "1e3", " "])
dims_text = st.lists(st.one_of(small, small, big, bad), min_size=1, max_size=5)
shapes_text = st.lists(dims_text.map("x".join), min_size=1, max_size=3).map(",".join)


def _expected_ok(op: str, text: str) -> bool:
    """Whether every shape of ``text`` is well formed and its tensors can exist."""
    for item in text.split(","):
        parts = item.split("x")
        if not all(p.isdigit() and p.isascii() and int(p) > 0 for p in parts):
            return False
        dims = tuple(int(p) for p in parts)
        if len(dims) not in NDIMS[op]:
            return False
        if any(math.prod(t) * FLOAT32 > LARGEST for t in TENSORS[op](dims)):
            return False
    return True


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(op=st.sampled_from(sorted(TENSORS)), text=shapes_text)
def test_any_shape_string_explains_or_is_one_usage_line(op, text, capsys):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    code = main(["explain", op, f"--shapes={text}"])
    out, err = capsys.readouterr()
    assert code in (0, 2), err
    assert code == (0 if _expected_ok(op, text) else 2), (text, err)
    if code == 2:
        assert err.startswith("flashinfer explain: error: --shapes") and err.count("\n") == 1
        assert out == ""
    else:
        assert err == "" and out.count(f"flashinfer.{op}(") == len(text.split(","))
    # Shapes up to 10**25: a real allocation would show here (ru_maxrss is in KiB).
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown < 256 * 1024, f"{text}: peak memory grew by {grown} KiB"


@pytest.mark.parametrize(
    ("shape", "says"),
    [
        ("99999999999999999999x1x1", "dimension 99999999999999999999 is larger than any tensor"),
        ("9223372036854775807x1x1", "a would be 9223372036854775807x1"),
        ("4294967296x4294967296x1", "the result would be 4294967296x4294967296"),
    ],
)
def test_a_shape_no_tensor_can_have_is_a_usage_error(shape, says, capsys):
    assert main(["explain", "mm", "--shapes", shape]) == 2
    err = capsys.readouterr().err
    assert err.startswith("flashinfer explain: error: --shapes") and says in err
    assert err.count("\n") == 1


def test_the_command_builds_fake_inputs():
    from flashinfer.cli.explain import example_call_inputs
    from flashinfer.testing import example_inputs_for

    args, kwargs = example_call_inputs(
        example_inputs_for("mm"), (100000, 100000, 100000), torch.float32, "cpu"
    )
    tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
    assert len(tensors) == 2
    for t in tensors:
        assert isinstance(t, FakeTensor) and t.device.type == "cpu"
        assert tuple(t.shape) == (100000, 100000)


# One fresh interpreter explains a tiny shape, then the big one: ru_maxrss is the peak so far,
# so what the big one adds to it is what explaining it allocated (imports are paid by then).
_PEAKS = """
import contextlib, io, json, resource
from flashinfer.cli import main

def explained(shape):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["explain", "mm", "--shapes", shape])
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"code": code, "peak": peak, "out": out.getvalue()}

print(json.dumps([explained("2x2x2"), explained("100000x100000x100000")]))
"""


def test_a_big_valid_shape_explains_without_allocating_it():
    """100000x100000x100000 in float32 is 40 GB per input: the peak stays that of a tiny
    shape, within the noise of imports."""
    proc = subprocess.run(
        [sys.executable, "-c", _PEAKS], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    tiny, big = json.loads(proc.stdout.strip().splitlines()[-1])
    assert tiny["code"] == big["code"] == 0, proc.stderr
    assert "flashinfer.mm(a=float32[2, 2] on cpu" in tiny["out"]
    assert "flashinfer.mm(a=float32[100000, 100000] on cpu" in big["out"]
    assert "choice: 'torch'" in big["out"]
    assert big["peak"] - tiny["peak"] < 128 * 1024, (tiny["peak"], big["peak"])


# --------------------------------------------------------------------------------------
# op.explain on metadata-only inputs: checks that read data are not decided
# --------------------------------------------------------------------------------------


def _data_op():
    def by_shape(x, backend="auto"):
        if x.shape[0] > 4:
            raise ValueError("at most 4 rows")
        return True

    def by_values(x, backend="auto"):  # reads values, not marked: fails on fake tensors
        if not bool((x >= 0).all()):
            raise ValueError("negative entries")
        return True

    @reads_tensor_data
    def by_pointer(x, backend="auto"):  # marked: reads the data pointer
        if x.data_ptr() % 16:
            raise ValueError("misaligned")
        return True

    def api(x, backend="auto"):
        raise AssertionError("never run")

    api.__qualname__ = "data_reading_api"
    table = {"pointer": by_pointer, "values": by_values, "shape": by_shape}
    return backend_requirement(table)(api)


def _metadata_copies(x: torch.Tensor) -> dict[str, torch.Tensor]:
    with FakeTensorMode():
        fake = torch.empty(x.shape, dtype=x.dtype)
    return {"fake": fake, "meta": torch.empty(x.shape, dtype=x.dtype, device="meta")}


@pytest.mark.parametrize("rows", [1, 4, 5, 9])
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_data_reading_checks_are_not_decided_on_metadata(rows, sign):
    op = _data_op()
    real = torch.full((rows, 3), sign)
    on_data = op.explain(real)
    assert all(v.decided for v in on_data.verdicts)
    for kind, x in _metadata_copies(real).items():
        e = op.explain(x)
        for name in ("pointer", "values"):
            v = e.verdict(name)
            assert (v.decided, v.can_run, v.candidate) == (False, False, False)
            assert v.stage == "undecided"
            assert v.why_not.startswith("not decided on metadata-only inputs"), kind
        # What reads metadata only decides as on real tensors (on meta tensors too).
        assert e.verdict("shape").can_run == on_data.verdict("shape").can_run, kind
        assert e.verdict("shape").decided
        assert any("metadata only" in n and "'pointer', 'values'" in n for n in e.notes)
        assert "unknown" in str(e)
        assert e.chosen == ("shape" if rows <= 4 else None)


def test_a_common_check_that_reads_data_is_not_decided():
    def common(x, backend="auto"):
        return bool(x.isfinite().all())

    def api(x, backend="auto"):
        raise AssertionError("never run")

    api.__qualname__ = "common_reads_data"
    op = backend_requirement({"a": lambda x, backend="auto": True}, common_check=common)(api)
    assert op.explain(torch.ones(2)).chosen == "a"
    for x in _metadata_copies(torch.ones(2)).values():
        e = op.explain(x)
        assert e.chosen is None and e.error.startswith("not decided on metadata-only inputs")
        assert e.verdict("a").stage == "common check"
