"""The verdict cache keys on the mode Triton runs in, not only on ``TRITON_INTERPRET``'s raw
value (issue 34, item 21).

Triton reads the variable once, when it is imported.  A verdict cached under
``TRITON_INTERPRET=1`` before the import (Triton would interpret: the Triton backend may run on
CPU) used to survive this sequence: the variable unset, Triton imported (compiled mode), the
variable set again.  The raw value is the same, so the cached verdict was served, the Triton
backend was offered on CPU tensors, and tuning timed it and failed with Triton's
``InterpreterError``.  Each run is a fresh process: the sequence needs Triton not imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = textwrap.dedent(
    """
    import json, os, sys
    import torch
    import flashinfer
    from flashinfer.autotuner import AutoTuner, autotune
    from flashinfer.kernels.availability import triton_unavailable

    spelling = sys.argv[1]
    assert os.environ.get("TRITON_INTERPRET") == spelling
    a, b = torch.randn(16, 32), torch.randn(32, 16)
    for _ in range(3):  # learn the pattern, then cache the verdict
        flashinfer.mm(a, b)
    before = "triton" in sys.modules
    del os.environ["TRITON_INTERPRET"]
    import triton  # compiled mode, for good

    os.environ["TRITON_INTERPRET"] = spelling  # the same raw value again
    with autotune():
        flashinfer.mm(a, b)
    stats = AutoTuner.get().stats()["flashinfer.gemm.mm"]
    print(json.dumps({
        "triton_imported_before": before,
        "probe": str(triton_unavailable("cpu")),
        "failed": stats.tactics_failed,
        "last_failure": stats.last_failure,
    }))
    """
)


@pytest.mark.parametrize("spelling", ["1", "yes"])
def test_a_verdict_cached_before_triton_was_imported_is_not_served_after(spelling):
    env = {**os.environ, "PYTHONPATH": REPO, "TRITON_INTERPRET": spelling}
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, spelling],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.splitlines()[-1])
    assert seen["triton_imported_before"] is False  # the verdict was cached before the import
    assert "set after triton was imported" in seen["probe"]  # Triton cannot run here now
    assert seen["failed"] == 0, seen["last_failure"]  # so it was not offered, nor timed
