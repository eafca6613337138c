"""README.md's quick look runs as written.  It opens the gate and names mm's experimental
split-K backend, so it belongs to the experimental lane: removing or graduating split-K
changes this test and README together, never the stable lane."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.experimental

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def test_quick_look_block_runs(tmp_path):
    blocks = re.findall(r"```python\n(.*?)```", README, flags=re.S)
    assert len(blocks) == 1
    # As a user runs it: no flashinfer variable, and TRITON_INTERPRET only as the block sets it.
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("FLASHINFER_") and k != "TRITON_INTERPRET"
    }
    out = subprocess.run(
        [sys.executable, "-c", blocks[0]], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['splitk']"
    assert "ExperimentalWarning" in out.stderr and "'splitk'" in out.stderr
    assert (tmp_path / "tuned.json").is_file()
