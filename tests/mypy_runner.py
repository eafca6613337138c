"""Run ``mypy --strict`` on a small user script, as a user of the installed package would
(shared by tests/test_typing.py and tests/test_experimental_api_typing.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run_mypy(folder: Path, source: str, cache: Path, search_path: Path = REPO) -> list[str]:
    """``mypy --strict`` on ``source`` as ``folder/user.py``, with the package found on
    ``search_path`` (so its ``py.typed`` is what makes it checked): the error and note lines."""
    (folder / "user.py").write_text(textwrap.dedent(source).lstrip())
    (folder / "mypy.ini").write_text("[mypy]\n")  # no configuration but --strict
    env = {k: v for k, v in os.environ.items() if k not in ("MYPYPATH", "PYTHONPATH")}
    env["PYTHONPATH"] = str(search_path)
    command = [sys.executable, "-m", "mypy", "--strict", "--config-file", "mypy.ini"]
    command += ["--cache-dir", str(cache), "--no-error-summary", "--hide-error-context"]
    proc = subprocess.run(
        [*command, "user.py"], cwd=folder, env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode in (0, 1), f"mypy crashed:\n{proc.stdout}\n{proc.stderr}"
    return [line for line in proc.stdout.splitlines() if line.startswith("user.py:")]
