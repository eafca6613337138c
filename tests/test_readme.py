"""README.md's two commands match .ci/run.  Its quick look runs mm's experimental split-K
backend, so the test that runs it is in the experimental lane
(tests/experimental/test_readme_quick_look.py)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_readme_gives_exactly_two_commands_and_ci_runs_the_test_one():
    commands = re.findall(r"```bash\n(.*?)\n```", README, flags=re.S)
    assert len(commands) == 2
    main_job, test_suite = commands
    assert main_job.endswith("flashinfer backends")
    assert test_suite.endswith("bash scripts/test.sh")
    # .ci/run runs the command as a line of its own, after activating a virtual environment
    # it creates from nothing.
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert test_suite in lines
    venv = next(i for i, line in enumerate(lines) if "python3 -m venv" in line)
    activate = next(i for i, line in enumerate(lines) if line.startswith("source "))
    assert venv < activate < lines.index(test_suite)


def test_gitignore_covers_what_the_quick_look_leaves_behind(tmp_path):
    # git check-ignore answers with the real .gitignore rules (no pattern re-implemented here).
    for name in ("tuned.json", "tuned.json.lock", "mm.tuned.json", "mm.tuned.json.lock"):
        out = subprocess.run(
            ["git", "check-ignore", "-q", "--no-index", name], cwd=ROOT, capture_output=True
        )
        assert out.returncode == 0, f"{name} is not ignored by .gitignore"
