"""Tests of ``scripts/pr_checks/``.

The checks are plain script files, not an installed package: :func:`load_script` imports one
as a module (for in-process tests), :func:`run_script` runs one as a program, the way CI
does, and :func:`run_mains` runs a script's ``main`` over many argument lists, each in a
process of its own forked from one interpreter (one ``import torch`` for all of them).
"""

from __future__ import annotations

import importlib.util
import json
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


# Run by run_mains: import the script, flashinfer (lazy: its package only) and torch (the
# cost of a start) once, then fork a child per argument list, its stdout and stderr in
# files; a child starts from the state a new interpreter has once torch is imported, no API
# module loaded, so no run sees another's modules.
_DRIVER = """
import importlib.util, json, os, sys, tempfile
import flashinfer, torch
path, cases = sys.argv[1], json.loads(sys.argv[2])
spec = importlib.util.spec_from_file_location("pr_check_under_test", path)
script = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = script
spec.loader.exec_module(script)
import gc; gc.freeze()  # children leave the shared heap unwritten by the collector
results = {}
for case, argv in cases.items():
    out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    sys.stdout.flush(); sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.dup2(out.fileno(), 1); os.dup2(err.fileno(), 2)
        try:
            code = script.main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:
            import traceback; traceback.print_exc(); code = 99
        sys.stdout.flush(); sys.stderr.flush()
        os._exit(code or 0)
    status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    texts = []
    for f in (out, err):
        f.seek(0); texts.append(f.read().decode()); f.close()
    results[case] = [status, *texts]
print(json.dumps(results))
"""


def run_mains(
    name: str, cases: dict[str, list[str]], pythonpath: Path | None = None, timeout: float = 300
) -> dict[str, subprocess.CompletedProcess[str]]:
    """``scripts/pr_checks/<name>.py``'s ``main(argv)`` for each ``case: argv``, each in a
    process of its own (forked from one interpreter that imported flashinfer, torch and the script),
    as ``run_script`` would return it (exit status, stdout, stderr)."""
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(pythonpath), env.get("PYTHONPATH", "")])
    ran = subprocess.run(
        [sys.executable, "-c", _DRIVER, str(SCRIPTS / f"{name}.py"), json.dumps(cases)],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    results = json.loads(ran.stdout.strip().splitlines()[-1])
    return {
        case: subprocess.CompletedProcess(cases[case], code, out, err)
        for case, (code, out, err) in results.items()
    }
