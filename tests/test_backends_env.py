"""``FLASHINFER_BACKENDS``: the process-wide restriction, read once, strictly.

The variable is read once per process, at the first automatic selection, ``use_backends``
block or ``explain``: each case runs in a fresh interpreter's state (one interpreter, its
reading and what hangs on it forgotten between cases).  A good value restricts as a
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
    block_rmsnorm = list(flashinfer.rmsnorm.suitable_auto_backends)
found = {
    "mm": mm, "rmsnorm": rms, "block_mm": block_mm, "block_rmsnorm": block_rmsnorm,
    "source": flashinfer.rmsnorm.explain(x, w).source,
    "warnings": [
        [w.category.__name__, str(w.message), w.filename, w.lineno] for w in caught
    ],
}
"""

# One interpreter runs the probe once per value (a fresh interpreter each costs seconds of
# CPU): between values it forgets what a process start has not read yet, the variable's
# reading and the verdicts cached under it.  The probe runs as a user's script (`<string>`),
# so the warning's line is still the user's.
_DRIVER = r"""
import json, os, sys
import flashinfer
from flashinfer.dispatch import restrictions
from flashinfer.kernels import reset_probe
from flashinfer.settings import forget_unrecognised_values

results = []
for value in json.loads(sys.argv[1]):
    os.environ.pop("FLASHINFER_BACKENDS", None)
    if value is not None:
        os.environ["FLASHINFER_BACKENDS"] = value
    restrictions._env_read = False
    restrictions._env.clear()
    restrictions._update_switch()  # restrictions may exist again until the variable is read
    forget_unrecognised_values()
    reset_probe()
    scope = {}
    exec(compile(PROBE, "<string>", "exec"), scope)
    results.append(scope["found"])
print(json.dumps(results))
""".replace("PROBE", repr(_PROBE))


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


@pytest.fixture(scope="module")
def runs() -> dict[str | None, dict]:
    """What the probe saw with each value."""
    env = {k: v for k, v in os.environ.items() if k != "FLASHINFER_BACKENDS"}
    env["TRITON_INTERPRET"] = "1"  # so that Triton backends can run on this CPU
    proc = subprocess.run(
        [sys.executable, "-c", _DRIVER, json.dumps(_VALUES)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    return dict(zip(_VALUES, json.loads(proc.stdout.strip().splitlines()[-1]), strict=True))


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
