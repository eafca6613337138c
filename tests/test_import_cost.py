"""Importing flashinfer is cheap: no Triton, no flashinfer.experimental.

Each check runs in a fresh interpreter (``sys.executable -c``), since this process has long
since imported everything.  Kernels load on first use: accessing ``flashinfer.mm`` or
``flashinfer.rmsnorm`` imports the op's module, still without Triton.  The time itself is
measured by ``benchmarks/bench_import.py`` (figures only; timing is too noisy to assert on).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

_PROBE = """
import json, sys
{statements}
mods = sorted(sys.modules)
print(json.dumps({{
    "triton": [m for m in mods if m == "triton" or m.startswith("triton.")],
    "experimental": [
        m for m in mods
        if m == "flashinfer.experimental" or m.startswith("flashinfer.experimental.")
    ],
    "flashinfer": [m for m in mods if m == "flashinfer" or m.startswith("flashinfer.")],
}}))
"""


def _modules_after(statements: str) -> dict[str, list[str]]:
    """Run ``statements`` in a fresh interpreter; the modules it ends up with, by group."""
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE.format(statements=statements)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, f"{statements!r} failed:\n{proc.stderr}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _has(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def test_the_probe_sees_triton_when_it_is_imported():
    """Guards the tests below against passing vacuously."""
    if not _has("triton"):
        pytest.skip("triton is not installed: its absence after import proves nothing here")
    seen = _modules_after("import triton\nimport flashinfer.experimental")
    assert "triton" in seen["triton"]
    assert "flashinfer.experimental" in seen["experimental"]


@pytest.mark.parametrize(
    "statements",
    [
        "import flashinfer",
        "import torch\nimport flashinfer",
        "import flashinfer.utils",
        "import flashinfer.api_logging",
        "import flashinfer.backend_dispatch",
        # touching the cheap public surface does not load anything either
        "import flashinfer\nflashinfer.__version__\ndir(flashinfer)\nflashinfer.api_inventory()",
    ],
    ids=[
        "flashinfer",
        "torch-then-flashinfer",
        "utils",
        "api_logging",
        "backend_dispatch",
        "surface",
    ],
)
def test_import_loads_neither_triton_nor_experimental(statements):
    seen = _modules_after(statements)
    assert seen["triton"] == [], f"{statements!r} imported Triton: {seen['triton']}"
    assert seen["experimental"] == [], (
        f"{statements!r} imported flashinfer.experimental: {seen['experimental']}"
    )


@pytest.mark.parametrize("name", ["mm", "rmsnorm"])
def test_lazy_op_access_does_not_import_triton(name):
    module = {"mm": "flashinfer.gemm", "rmsnorm": "flashinfer.norm"}[name]
    if not _has("flashinfer.gemm"):
        pytest.skip(
            "flashinfer.gemm does not exist yet (another developer is writing the ops); "
            "nothing to load lazily"
        )
    if not _has(module):
        pytest.skip(f"{module} does not exist yet")
    seen = _modules_after(
        f"import flashinfer\nop = flashinfer.{name}\nassert callable(op)\n"
        f"assert {module!r} in sys.modules"
    )
    assert seen["triton"] == [], f"flashinfer.{name} imported Triton: {seen['triton']}"
    assert module in seen["flashinfer"]
