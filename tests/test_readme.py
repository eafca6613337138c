"""README.md's quick look runs as written, and its two commands match .ci/run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_quick_look_block_runs(tmp_path):
    blocks = re.findall(r"```python\n(.*?)```", README, flags=re.S)
    assert len(blocks) == 1
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLASHINFER_")}
    out = subprocess.run(
        [sys.executable, "-c", blocks[0]], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['splitk']"
    assert "ExperimentalWarning" in out.stderr and "'splitk'" in out.stderr
    assert (tmp_path / "tuned.json").is_file()


def test_readme_gives_exactly_two_commands_and_ci_runs_the_test_one():
    commands = re.findall(r"```bash\n(.*?)\n```", README, flags=re.S)
    assert len(commands) == 2
    main_job, test_suite = commands
    assert main_job.endswith("flashinfer backends")
    assert test_suite in (ROOT / ".ci" / "run").read_text()
