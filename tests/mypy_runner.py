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
    return run_mypy_on({"user": source}, folder, cache, search_path)["user"]


def run_mypy_on(
    sources: dict[str, str], folder: Path, cache: Path, search_path: Path = REPO
) -> dict[str, list[str]]:
    """:func:`run_mypy` on several scripts at once (``{module name: source}``), in one mypy
    run (each run reads the package's and torch's types again): each one's lines."""
    for name, source in sources.items():
        (folder / f"{name}.py").write_text(textwrap.dedent(source).lstrip())
    (folder / "mypy.ini").write_text("[mypy]\n")  # no configuration but --strict
    env = {k: v for k, v in os.environ.items() if k not in ("MYPYPATH", "PYTHONPATH")}
    env["PYTHONPATH"] = str(search_path)
    command = [sys.executable, "-m", "mypy", "--strict", "--config-file", "mypy.ini"]
    command += ["--cache-dir", str(cache), "--no-error-summary", "--hide-error-context"]
    proc = subprocess.run(
        [*command, *(f"{name}.py" for name in sources)],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode in (0, 1), f"mypy crashed:\n{proc.stdout}\n{proc.stderr}"
    lines = proc.stdout.splitlines()
    return {name: [line for line in lines if line.startswith(f"{name}.py:")] for name in sources}
