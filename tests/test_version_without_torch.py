"""``flashinfer --version`` and ``--help`` answer without importing torch (issue 23: it took
6-7 s), and ``import flashinfer`` loads the facades' names lazily.

Each check runs in a fresh interpreter and asserts on ``sys.modules`` (never on time;
``time flashinfer --version`` gives the figure).  The console script is run too, with
``PYTHONPROFILEIMPORTTIME`` listing every module it imports.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import flashinfer
from flashinfer._version import __version__

REPO = Path(__file__).resolve().parents[1]

_PROBE = """
import io, json, sys
from flashinfer.cli import main
out = io.StringIO()
sys.stdout = out
code = main({argv!r})
sys.stdout = sys.__stdout__
print(json.dumps({{"code": code, "out": out.getvalue(), "torch": "torch" in sys.modules,
                  "loaded": sorted(m for m in sys.modules if m.startswith("flashinfer"))}}))
"""


def _probe(argv: list[str]) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE.format(argv=argv)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_version_does_not_import_torch():
    seen = _probe(["--version"])
    assert seen["code"] == 0 and seen["out"].strip() == f"flashinfer {__version__}"
    assert not seen["torch"], "flashinfer --version imported torch"
    assert "flashinfer.cli.backends" not in seen["loaded"]


def test_help_does_not_import_torch_and_lists_every_command():
    seen = _probe(["--help"])
    assert seen["code"] == 0
    for command in ("backends", "autotune", "experimental", "explain"):
        assert command in seen["out"]
    assert not seen["torch"], "flashinfer --help imported torch"


def test_the_probe_sees_torch_when_a_command_imports_it():
    """Guards the tests above against passing vacuously: a command that needs torch has it."""
    seen = _probe(["experimental", "--json"])
    assert seen["code"] == 0 and seen["torch"]


def test_the_console_script_does_not_import_torch():
    script = Path(sys.executable).with_name("flashinfer")
    if not script.exists():
        pytest.skip("the console script is not installed next to this interpreter")
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}
    proc = subprocess.run(
        [str(script), "--version"], capture_output=True, text=True, timeout=300, env=env
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"flashinfer {__version__}"
    imported = {
        line.rpartition("|")[2].strip()
        for line in proc.stderr.splitlines()
        if line.startswith("import time:")
    }
    assert "flashinfer.cli" in imported, "the import-time listing is not working"
    assert "torch" not in imported


def test_import_flashinfer_does_not_import_torch():
    code = (
        "import sys, flashinfer\n"
        "flashinfer.__version__, dir(flashinfer), flashinfer.API_MODULES\n"
        "assert 'torch' not in sys.modules, 'import flashinfer imported torch'\n"
        "assert not any(m.startswith('flashinfer.experimental') for m in sys.modules)\n"
        "backend = flashinfer.Backend\n"
        "assert 'torch' in sys.modules\n"
        "from flashinfer.backend_dispatch import Backend\n"
        "assert backend is Backend\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr


def test_every_public_name_is_still_there():
    """The facades' names moved behind the lazy hook: each is listed, found and the facade's."""
    import flashinfer.api_logging as api_logging
    import flashinfer.backend_dispatch as backend_dispatch

    names = set(flashinfer.__all__)
    facades = {
        "flashinfer.api_logging": api_logging,
        "flashinfer.backend_dispatch": backend_dispatch,
    }
    facade_names = {n: m for n, m in flashinfer._LAZY.items() if m in facades}
    assert len(facade_names) == 16 and set(facade_names) <= names
    assert names <= set(dir(flashinfer))
    for name, module in facade_names.items():
        assert getattr(flashinfer, name) is getattr(facades[module], name), name
    # The facades themselves, which a bare `import flashinfer` used to load.
    assert flashinfer.api_logging is api_logging
    assert flashinfer.backend_dispatch is backend_dispatch
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        flashinfer.nope  # noqa: B018
