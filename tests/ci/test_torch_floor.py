"""The declared torch range is the tested one (issue 44): ``scripts/ci/torch_floor.sh`` runs
the stable lane on the floor ``pyproject.toml`` declares, and the docs state the same range."""

from __future__ import annotations

import re
import shutil
import subprocess

import tomllib

from . import SCRIPTS

ROOT = SCRIPTS.parents[1]


def _torch_requirement() -> str:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (torch,) = [d for d in deps if re.match(r"torch\b", d)]
    return torch


def test_the_range_has_a_floor_and_a_ceiling_that_the_docs_state():
    requirement = _torch_requirement()
    assert re.fullmatch(r"torch>=[0-9.]+,<[0-9.]+", requirement), requirement
    for doc in ("README.md", "docs/installation.rst"):
        assert requirement in (ROOT / doc).read_text(), doc


def test_the_script_reads_the_declared_floor():
    """The script's own ``sed`` line, run on the real pyproject.toml."""
    script = (SCRIPTS / "torch_floor.sh").read_text()
    (line,) = [ln for ln in script.splitlines() if ln.startswith('floor="$(sed')]
    floor = subprocess.run(
        ["bash", "-c", line + '\necho "$floor"'], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    assert floor == _torch_requirement().split(">=")[1].split(",")[0]
    assert "run_lane.sh stable" in script


def test_torch_floor_is_shellcheck_clean() -> None:
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "shellcheck comes with the test extra: pip install -e '.[test]'"
    result = subprocess.run(
        [shellcheck, str(SCRIPTS / "torch_floor.sh")], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout
