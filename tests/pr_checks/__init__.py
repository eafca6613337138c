"""Tests of ``scripts/pr_checks/``.

The checks are plain script files, not an installed package: :func:`load_script` imports one
as a module (for in-process tests) and :func:`run_script` runs one as a program, the way CI
does.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "scripts" / "pr_checks"


def load_script(name: str, module_name: str | None = None) -> ModuleType:
    """``scripts/pr_checks/<name>.py`` imported as ``module_name`` (default ``name``), once.

    The module is in ``sys.modules`` before it executes: dataclasses look it up while it runs,
    and ``bot_command`` imports ``experimental_test_scope`` under that plain name.
    """
    module_name = module_name or name
    if module_name not in sys.modules:
        spec = importlib.util.spec_from_file_location(module_name, SCRIPTS / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    return sys.modules[module_name]


def run_script(
    name: str,
    *args: str,
    cwd: Path | None = None,
    pythonpath: Path | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """``python scripts/pr_checks/<name>.py ARGS`` in a subprocess, output captured as text.

    ``pythonpath`` (a folder of fixture modules) goes first on ``PYTHONPATH``.
    """
    env = None
    if pythonpath is not None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(pythonpath), env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, str(SCRIPTS / f"{name}.py"), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=timeout,
    )
