"""``FLASHINFER_BACKENDS``: the process-wide restriction, read once, strictly.

Each case runs in a fresh interpreter (the variable is read once per process, at the first
automatic selection, ``use_backends`` block or ``explain``).  A good value restricts as a
``use_backends`` block would, and a block overrides it for the APIs it names; a value that
does not parse, or names an unknown API or backend, warns once (naming the variable and the
bad part, pointing at the user's line) and is ignored as a whole.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

_PROBE = r"""
import json, warnings
warnings.simplefilter("always")
import torch, flashinfer
a, b = torch.randn(4, 8), torch.randn(8, 4)
x, w = torch.randn(2, 8), torch.randn(8)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    flashinfer.mm(a, b)  # line 9: the first automatic selection reads the variable
    mm = list(flashinfer.mm.suitable_auto_backends)
    flashinfer.rmsnorm(x, w)
    rms = list(flashinfer.rmsnorm.suitable_auto_backends)
    flashinfer.mm(a, b)
with flashinfer.use_backends(mm=["torch"]):
    flashinfer.mm(a, b)
    block_mm = list(flashinfer.mm.suitable_auto_backends)
    flashinfer.rmsnorm(x, w)
    block_rms = list(flashinfer.rmsnorm.suitable_auto_backends)
print(json.dumps({
    "mm": mm, "rmsnorm": rms, "block_mm": block_mm, "block_rmsnorm": block_rms,
    "source": flashinfer.rmsnorm.explain(x, w).source,
    "warnings": [
        [w.category.__name__, str(w.message), w.filename, w.lineno] for w in caught
    ],
}))
"""


_VALUES = (
    None,
    " ",
    "mm=triton,torch; rmsnorm = triton",
    "mm=trtion,torch",
    "mm=torch;nope=torch",
    "mm=torch;",
    "mm:torch",
    "mm=torch,,triton",
    "mm=torch;mm=triton",
)


def _start(value: str | None) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "FLASHINFER_BACKENDS"}
    env["TRITON_INTERPRET"] = "1"  # so that Triton backends can run on this CPU
    if value is not None:
        env["FLASHINFER_BACKENDS"] = value
    return subprocess.Popen(
        [sys.executable, "-c", _PROBE],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.fixture(scope="module")
def runs() -> dict[str | None, dict]:
    """What the probe saw with each value, the interpreters run side by side."""
    started = {value: _start(value) for value in _VALUES}
    found = {}
    for value, proc in started.items():
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
        found[value] = json.loads(out.strip().splitlines()[-1])
    return found


UNRESTRICTED = {"mm": ["torch", "triton"], "rmsnorm": ["torch", "triton"]}


def test_unset_and_empty_restrict_nothing(runs):
    for value in (None, " "):
        out = runs[value]
        assert {k: out[k] for k in UNRESTRICTED} == UNRESTRICTED, value
        assert out["warnings"] == [] and out["source"] == "heuristic"


def test_a_good_value_restricts_and_a_block_overrides_it_for_the_apis_it_names(runs):
    out = runs["mm=triton,torch; rmsnorm = triton"]
    assert out["warnings"] == []
    assert out["mm"] == ["triton", "torch"] and out["rmsnorm"] == ["triton"]
    assert out["block_mm"] == ["torch"]  # the block names mm
    assert out["block_rmsnorm"] == ["triton"]  # ... and leaves rmsnorm to the variable
    assert out["source"] == "restricted"


@pytest.mark.parametrize(
    ("value", "bad_part"),
    [
        ("mm=trtion,torch", "mm has no backend 'trtion'; its backends: 'torch', 'triton'"),
        ("mm=torch;nope=torch", "unknown API 'nope'; APIs with backends: 'mm', 'rmsnorm'"),
        ("mm=torch;", "the part '' is not API=BACKEND[,BACKEND...]"),
        ("mm:torch", "the part 'mm:torch' is not API=BACKEND[,BACKEND...]"),
        ("mm=torch,,triton", "the part 'mm=torch,,triton' is not API=BACKEND"),
        ("mm=torch;mm=triton", "mm is named twice"),
    ],
)
def test_a_bad_value_warns_once_and_is_ignored_as_a_whole(runs, value, bad_part):
    """Even the good parts of a partly bad value are ignored: the process runs either the
    configuration written or none, never a part of it nobody wrote."""
    out = runs[value]
    assert {k: out[k] for k in UNRESTRICTED} == UNRESTRICTED
    assert out["block_mm"] == ["torch"] and out["block_rmsnorm"] == ["torch", "triton"]
    [(category, message, filename, lineno)] = out["warnings"]  # once, for every call
    assert category == "RuntimeWarning"
    assert message.startswith(f"FLASHINFER_BACKENDS={value!r} is not a recognised value")
    assert bad_part in message
    assert "the whole value is ignored" in message
    assert "e.g. 'mm=triton,torch;rmsnorm=torch'" in message
    assert (filename, lineno) == ("<string>", 9)  # the user's line, not flashinfer's
