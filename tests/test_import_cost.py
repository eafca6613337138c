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


# --------------------------------------------------------------------------------------
# Touching an op imports the op, its dispatcher and what runs it (issue 44 item 3)
# --------------------------------------------------------------------------------------

FORBIDDEN = (
    "flashinfer.testing",  # cases, conformance, overlap attacks, CLI inputs: asked for only
    "flashinfer.cli",
    "flashinfer.gating.history",
    "flashinfer.gating.lifecycle",
    "flashinfer.autotuner.tuning_file",  # read when a tuning file is loaded or saved
    "flashinfer.autotuner.persist",  # (its JSON)
    "flashinfer.autotuner.disk",  # (its path checks, lock and write)
    "flashinfer.autotuner.block",  # the autotune() block: loaded when a block is entered
)
"""Modules (and their submodules) that neither touching an op nor its first call imports."""

KNOWN_CHAINS = {
    "flashinfer.gating.history": "TorchOp._register_former_names (dispatch/torch_op.py) reads "
    "flashinfer.gating.history when each op's operator is built, at decoration",
}
"""Forbidden imports still made by the machinery being rewritten (issue 44): the chain that
makes each.  ``test_touching_an_op_no_longer_imports_via_the_machinery`` fails (XPASS) once
a chain is cut: then delete its entry here."""

MACHINERY = (
    "flashinfer.dispatch",
    "flashinfer.codegen",
    "flashinfer.gating",
    "flashinfer.settings",
    "flashinfer.autotuner",
    "flashinfer.torch_boundary",
)
"""Packages whose modules are being rewritten (issue 44): checked against FORBIDDEN only."""

_BASE = [
    "flashinfer",
    "flashinfer._version",
    "flashinfer.aliasing",
    "flashinfer.api_logging",
    "flashinfer.api_modules",
    "flashinfer.backend_dispatch",
    "flashinfer.backend_families",
    "flashinfer.kernels",
    "flashinfer.kernels.availability",
]
PINNED = {
    ("rmsnorm", "touch"): [*_BASE, "flashinfer.kernels.autograd", "flashinfer.norm"],
    ("rmsnorm", "call"): [*_BASE, "flashinfer.kernels.autograd", "flashinfer.norm"],
    ("mm", "touch"): [
        *_BASE,
        "flashinfer.gemm",
        "flashinfer.kernels.autograd",
        "flashinfer.kernels.tiled_mm",
    ],
    ("mm", "call"): [
        *_BASE,
        "flashinfer.gemm",
        "flashinfer.kernels.autograd",
        "flashinfer.kernels.tiled_mm",
    ],
    ("fused_add_rmsnorm", "touch"): [
        *_BASE,
        "flashinfer.fused_norm",
    ],
    ("fused_add_rmsnorm", "call"): [
        *_BASE,
        "flashinfer.fused_norm",
        "flashinfer.kernels.autograd",
        "flashinfer.norm",
    ],
}
"""What touching each op (``flashinfer.<op>``), and then its first eager call on CPU, imports
of the package outside MACHINERY and the experimental package (whose features the
experimental lane covers): pinned, so that a new import shows up as a diff here."""

_CALLS = {
    "rmsnorm": "op(torch.randn(4, 8), torch.randn(8))",
    "mm": "op(torch.randn(4, 8), torch.randn(8, 4))",
    "fused_add_rmsnorm": "op(torch.randn(4, 8), torch.randn(4, 8), torch.randn(8))",
}


_TOUCH_THEN_CALL = """
import json, os, sys, warnings
os.environ["TRITON_INTERPRET"] = "1"  # as under the tests: a CPU call may run a Triton kernel
warnings.simplefilter("ignore")
import torch
import flashinfer
def listed():
    return sorted(m for m in sys.modules if m == "flashinfer" or m.startswith("flashinfer."))
op = flashinfer.{op}
touched = listed()
{call}
print(json.dumps({{"touch": touched, "call": listed()}}))
"""


def _flashinfer_modules(op: str) -> dict[str, list[str]]:
    """The package's modules after touching ``op``, then after its first call, in a fresh
    interpreter (printed, for the diff when a pinned list changes)."""
    proc = subprocess.run(
        [sys.executable, "-c", _TOUCH_THEN_CALL.format(op=op, call=_CALLS[op])],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, f"flashinfer.{op} failed:\n{proc.stderr}"
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    for step, modules in seen.items():
        print(f"flashinfer.{op} ({step}): {len(modules)} modules:", *modules, sep="\n  ")
    return seen


def _under(module: str, prefixes: tuple[str, ...] | list[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


@pytest.fixture(scope="module")
def imported() -> dict[tuple[str, str], list[str]]:
    seen = {op: _flashinfer_modules(op) for op in _CALLS}
    return {(op, step): seen[op][step] for op, step in PINNED}


@pytest.mark.parametrize("key", list(PINNED), ids=lambda k: "-".join(k))
def test_touching_an_op_imports_no_test_or_cli_code(imported, key):
    """Cases, conformance, example inputs, the CLI and the lifecycle history load only when
    asked for (an op declares its cases in ``declare_test_cases()``, which the test kit
    calls when it loads)."""
    unexpected = [
        m for m in imported[key] if _under(m, FORBIDDEN) and not _under(m, list(KNOWN_CHAINS))
    ]
    assert unexpected == [], f"{key}: imported {unexpected}"


@pytest.mark.parametrize("key", list(PINNED), ids=lambda k: "-".join(k))
def test_touching_an_op_imports_the_pinned_modules(imported, key):
    outside = [m for m in imported[key] if not _under(m, [*MACHINERY, "flashinfer.experimental"])]
    assert outside == sorted(PINNED[key])


@pytest.mark.xfail(strict=True, reason="; ".join(KNOWN_CHAINS.values()))
def test_touching_an_op_no_longer_imports_via_the_machinery(imported):
    made = sorted({m for ms in imported.values() for m in ms if _under(m, list(KNOWN_CHAINS))})
    assert made == []


def test_the_test_kit_declares_the_cases_of_ops_imported_before_it():
    """The other half of the light import: ``flashinfer.testing`` still sees every op's cases
    and CLI inputs, whichever of the kit and the op is imported first."""
    seen = _modules_after(
        "import flashinfer\nflashinfer.rmsnorm\nimport flashinfer.testing as t\n"
        "assert len(t.cases_for(flashinfer.rmsnorm)) > 1, 'rmsnorm: no cases'\n"
        "assert 'mm' not in t.EXAMPLE_INPUTS\nflashinfer.mm\n"
        "assert t.cases_for(flashinfer.mm) and 'mm' in t.EXAMPLE_INPUTS\n"
        "assert t.example_inputs_for('fused_add_rmsnorm') is not None"
    )
    assert "flashinfer.testing" in seen["flashinfer"]
