"""The op author's path, walked by a script (issue 22's "done when").

In a copy of the repository, a maintainer adds a third stable op, ``silu_and_mul`` (torch and
Triton backends), the way ``CLAUDE.md`` says: its module ``flashinfer/activation.py`` (the API,
its checks, heuristic, overlap rule and declared cases, and a Triton kernel compiled on first
use), one line in ``OPS`` (``flashinfer/api_modules.py``), its ``TYPE_CHECKING`` import in
``flashinfer/__init__.py`` and its entry under ``docs/api/``.  Then, in subprocesses on that
copy: the conformance and overlap harnesses cover both backends with no new test code, the
layout and import-graph rules hold, ``flashinfer backends`` lists the op, the API inventory
check passes and the op runs; the files touched outside ``tests/`` are exactly those four
(``-s`` prints them for the note); and leaving out the ``OPS`` line is caught, naming that file.

Last, the wording walk: rewording the automatic-selection warning is an edit of one source
file, ``flashinfer/gating/messages.py``, and the tests that check that warning still pass.

The copy (tests/repo_copy.py) is made once for the module and committed to a git repository
of its own, so that ``git status`` in it says what each change touched.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from repo_copy import copy_repository

# Tens of seconds: started first on xdist workers (tests/conftest.py).
pytestmark = pytest.mark.slow

OP_MODULE = "flashinfer/activation.py"
KERNEL_MODULE = "flashinfer/kernels/activation_triton.py"
TOUCHED_OUTSIDE_TESTS = [
    "flashinfer/__init__.py",
    "flashinfer/activation.py",
    "flashinfer/kernels/activation_triton.py",
]
"""What adding the op touches outside tests/ (issue 30's done-when): its module, its kernel and
one line, its import in the ops' block of ``flashinfer/__init__.py``, from which the one list
of ops (``OPS``), the static tools' names and the API reference all come."""

OPS_ANCHOR = "    from flashinfer.norm import rmsnorm as rmsnorm"
OPS_LINE = "    from flashinfer.activation import silu_and_mul as silu_and_mul"
"""The op's one line, in the ops' block (``import ... as ...`` lines stay sorted: it follows
the block's last line)."""
ADDED = {"flashinfer/__init__.py": [OPS_LINE]}

MESSAGES = "flashinfer/gating/messages.py"
WORDING_BUILDER = "automatic_selection"
WORDING_TEST_FILES = (
    "tests/test_dispatch_fast_path.py",
    "tests/test_backend_requirement.py",
    "tests/test_autotuner.py",
    "tests/test_upstream_parity.py",
    "tests/experimental/test_autotuner_experimental.py",
)
"""Test files that check the automatic-selection warning, named by issue 22; the walk adds
every other test file that names the warning's builder or its old phrase."""
WORDING_MARKERS = (WORDING_BUILDER, "picked automatically")
WALKS = ("tests/test_op_author_walk.py", "tests/experimental/test_kernel_author_walk.py")
"""Not run by the wording walk: walks quote the phrase in sources they write, and copy the
repository themselves."""

REWORDED = '''def automatic_selection(api: str, backend: str) -> str:
    """The warning of an experimental backend picked by ``backend="auto"`` or the
    autotuner, which only the gate variable set to 1 allows."""
    return (
        f"Experimental backend {backend!r} now runs {plain_name(api)!r}: automatic selection "
        f"({api}(backend='auto')) chose it, as {ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV}=1 "
        "allows. Experimental backends may change or be removed without deprecation."
    )
'''
"""The same facts (backend, op, the call, the gate, the caveat) in another sentence."""
REWORDED_EXAMPLE = (
    "Experimental backend 'risky' now runs 'mm': automatic selection "
    "(flashinfer.gemm.mm(backend='auto')) chose it, as "
    "FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS=1 allows. Experimental backends may change or "
    "be removed without deprecation."
)

ACTIVATION = r'''"""SiLU and multiply, the gate of SwiGLU MLPs: :func:`silu_and_mul`, a stable
API with ``"torch"`` and ``"triton"`` backends.

Laid out as :mod:`flashinfer.norm` is: the public API, the shared validation
(``common_check``), one support checker and one implementation per backend, declared together
in the API's table, the heuristic that orders ``backend="auto"`` candidates, the overlap rule
and the op's declared test cases.  Its Triton kernel lives in
``flashinfer/kernels/activation_triton.py``, imported on first use, so importing this module
does not import Triton.

A backend runs as ``run(x, out)`` (the arguments validated, ``out`` ``None`` or a checked
output) and returns the result (``out`` when given); the body calls
``silu_and_mul.implementations[backend]``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import torch

from flashinfer.aliasing import OverlapRule
from flashinfer.api_logging import flashinfer_api
from flashinfer.backend_dispatch import Backend, backend_requirement, find_compute_capability
from flashinfer.backend_families import FLOAT_DTYPES, TORCH, TRITON, backend_family, dtype_name
from flashinfer.kernels import (
    bf16_reason,
    interpreter_enabled,
    next_positive_power_of_2,
    offsets_reason,
    triton_device_reason,
)

__all__ = ["silu_and_mul"]

OVERLAP = OverlapRule("silu_and_mul", ("out",), ("x",))
"""What :func:`silu_and_mul` writes and reads: ``out`` may overlap neither ``x`` nor itself
(there is no in-place form: the result is half as wide as ``x``).  Declared with
``backend_requirement(..., overlap=OVERLAP)``: the dispatcher checks it on every path."""

MAX_BLOCK = 1024
"""Columns of the result one Triton program computes."""


def _common_check(
    x: torch.Tensor, *, out: torch.Tensor | None = None, backend: str = "auto"
) -> bool:
    """Reject malformed calls with a ``ValueError`` that says what is wrong and what to do."""
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"silu_and_mul: x must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() < 1 or x.shape[-1] % 2:
        raise ValueError(
            "silu_and_mul: the last dimension of x must be even (the gate half, then the up "
            f"half); got shape {tuple(x.shape)}"
        )
    if x.dtype not in FLOAT_DTYPES:
        raise ValueError(
            f"silu_and_mul: x dtype {dtype_name(x.dtype)} is not supported; use float32, "
            "float16 or bfloat16"
        )
    if out is not None:
        shape = (*x.shape[:-1], x.shape[-1] // 2)
        if not isinstance(out, torch.Tensor):
            raise ValueError(
                f"silu_and_mul: out must be a torch.Tensor or None, got {type(out).__name__}"
            )
        if tuple(out.shape) != shape or out.dtype != x.dtype or out.device != x.device:
            raise ValueError(
                f"silu_and_mul: out must have shape {shape} (x's, last dimension halved), "
                f"dtype {dtype_name(x.dtype)} and device {x.device}; got shape "
                f"{tuple(out.shape)}, dtype {dtype_name(out.dtype)} on {out.device}"
            )
    return True


# --------------------------------------------------------------------------------------
# Backend "torch": the reference, anywhere torch runs
# --------------------------------------------------------------------------------------


@backend_family(TORCH)
def _check_torch(x: torch.Tensor) -> bool:
    """The reference accepts every input the shared validation accepts."""
    return True


def _silu_and_mul_torch(x: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
    d = x.shape[-1] // 2
    y = torch.nn.functional.silu(x[..., :d].float()) * x[..., d:].float()
    return y.to(x.dtype) if out is None else out.copy_(y)


# --------------------------------------------------------------------------------------
# Backend "triton": CUDA, or CPU through the Triton interpreter
# --------------------------------------------------------------------------------------


@backend_family(TRITON)
def _check_triton(
    x: torch.Tensor, *, out: torch.Tensor | None = None, backend: str = "auto"
) -> bool:
    """Triton's real limits: device, bf16 capability, 32-bit offsets."""
    reason = triton_device_reason(x) or bf16_reason(x.dtype, find_compute_capability(x))
    reason = reason or offsets_reason(x=x, out=out)
    if reason is not None:
        raise ValueError(reason)
    return True


def _silu_and_mul_triton(x: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
    from flashinfer.kernels.activation_triton import silu_and_mul_rows  # imports Triton

    rows = x.reshape(-1, x.shape[-1]).contiguous()  # a copy only when x is not row-major
    d = rows.shape[1] // 2
    # The interpreter's fp32 -> bf16 store truncates: store fp32 and let torch round.
    stored = torch.float32 if x.dtype == torch.bfloat16 and interpreter_enabled() else x.dtype
    result = torch.empty(rows.shape[0], d, dtype=stored, device=x.device)
    if result.numel():
        block = min(next_positive_power_of_2(d), MAX_BLOCK)
        silu_and_mul_rows[(rows.shape[0], -(-d // block))](rows, result, d, BLOCK=block)
    y = result.view(*x.shape[:-1], d)
    return y.to(x.dtype) if out is None else out.copy_(y)


# --------------------------------------------------------------------------------------
# Heuristic and the API
# --------------------------------------------------------------------------------------


def _heuristic(
    suitable: list[str], x: torch.Tensor, *, out: torch.Tensor | None = None, backend: str = "auto"
) -> list[str]:
    """Fastest first: on CUDA the fused Triton kernel (one read, one write); on CPU Triton
    only runs through its interpreter, far slower than torch."""
    order = ("triton", "torch") if x.is_cuda else ("torch", "triton")
    rank = {b: i for i, b in enumerate(order)}
    return sorted(suitable, key=lambda b: rank.get(b, len(order)))


@flashinfer_api
@backend_requirement(
    [
        Backend("torch", check=_check_torch, run=_silu_and_mul_torch),
        Backend("triton", check=_check_triton, run=_silu_and_mul_triton),
    ],
    common_check=_common_check,
    heuristic_func=_heuristic,
    overlap=OVERLAP,
)
def silu_and_mul(
    x: torch.Tensor,
    *,
    out: torch.Tensor | None = None,
    backend: str = "auto",
    skip_check: bool = False,
) -> torch.Tensor:
    r"""SiLU of the first half of the last dimension times the second half.

    .. math:: y = \mathrm{silu}(x_{[..., :d]}) \cdot x_{[..., d:]}, \quad
        \mathrm{silu}(a) = \frac{a}{1 + e^{-a}}

    computed in fp32 and stored in the input's dtype.

    Args:
        x: tensor ``(..., 2 * d)``; float32, float16 or bfloat16.
        out: optional output ``(..., d)`` of the input's dtype and device; it must not
            overlap ``x`` or itself.
        backend: ``"auto"`` (default: the fastest suitable backend for the inputs),
            ``"torch"`` (reference; CPU and CUDA) or ``"triton"`` (CUDA; CPU tensors only
            under ``TRITON_INTERPRET=1``).
        skip_check: ``True`` skips validating the inputs (see
            :func:`flashinfer.backend_requirement`).

    Returns:
        The ``(..., d)`` result (``out`` when given).

    Raises:
        ValueError: malformed inputs (an odd last dimension, dtype, ``out``), or a named
            backend cannot run them; ``out`` overlapping ``x`` or itself, also with
            ``skip_check=True``.
        BackendSupportedError: unknown backend, or none can run the inputs with
            ``backend="auto"``.
    """
    if backend == "auto":
        backend = silu_and_mul.suitable_auto_backends[0]
    return silu_and_mul.implementations[backend](x, out)


# --------------------------------------------------------------------------------------
# Declared test cases (run against every backend by tests/test_conformance.py)
# --------------------------------------------------------------------------------------


def _reference(x: torch.Tensor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    d = x.shape[-1] // 2
    y = torch.nn.functional.silu(x[..., :d].double()) * x[..., d:].double()
    return y.to(x.dtype)


def _case_inputs(
    shape: tuple[int, ...], dtype: torch.dtype, *, with_out: bool = False
) -> Callable[[torch.Generator], dict[str, Any]]:
    def make(gen: torch.Generator) -> dict[str, Any]:
        x = (2 * torch.randn(shape, generator=gen)).to(dtype)
        inputs: dict[str, Any] = {"x": x}
        if with_out:
            out_shape = (*shape[:-1], shape[-1] // 2)
            inputs["out"] = torch.full(out_shape, float("nan"), dtype=dtype)
        return inputs

    return make


def declare_test_cases() -> None:
    """The op's cases and CLI inputs (declared when the test kit loads)."""
    from flashinfer.testing import Case, ExampleInputs, allclose, declare_cases

    specs: list[tuple[str, tuple[int, ...], torch.dtype, dict[str, Any]]] = [
        ("f32_4x64", (4, 64), torch.float32, {}),
        ("f16_2x3x96", (2, 3, 96), torch.float16, {}),
        ("f32_3x2050_two_blocks", (3, 2050), torch.float32, {}),
        ("f16_5x32_out", (5, 32), torch.float16, {"with_out": True}),
        ("f32_1x64_one_row", (1, 64), torch.float32, {}),
        ("f16_1x96_one_row", (1, 96), torch.float16, {}),
    ]
    declare_cases(
        silu_and_mul,
        [
            Case(name, _case_inputs(shape, dtype, **kw), _reference, allclose(), seed=i)
            for i, (name, shape, dtype, kw) in enumerate(specs)
        ],
        examples=ExampleInputs(
            shape_help="TOKENSx2D (or any AxBx...x2D)",
            ndims=(1, 2, 3),
            make=lambda d, dtype, device: {"x": torch.randn(*d, dtype=dtype, device=device)},
            example="4x64",
            tensors=lambda d: {"x": d, "the result": (*d[:-1], d[-1] // 2)},
        ),
    )


if "flashinfer.testing" in sys.modules:  # else the test kit declares them when it loads
    declare_test_cases()
'''
"""The op's module, as its author writes it (``flashinfer/norm.py``'s layout)."""

KERNEL = '''"""SiLU-and-mul's Triton kernel: one program computes ``BLOCK`` columns of a row."""

import triton
import triton.language as tl


@triton.jit
def silu_and_mul_rows(x_ptr, y_ptr, d, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < d
    gate = tl.load(x_ptr + row * 2 * d + cols, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(x_ptr + row * 2 * d + d + cols, mask=mask, other=0.0).to(tl.float32)
    y = gate / (1.0 + tl.exp(-gate)) * up
    tl.store(y_ptr + row * d + cols, y.to(y_ptr.dtype.element_ty), mask=mask)
'''
"""Its kernel, as ``flashinfer/kernels/`` holds the others."""


# ---- the copy ------------------------------------------------------------------------------


def _git(repo: Path, *argv: str) -> str:
    config = {
        "user.name": "op-author-walk",
        "user.email": "walk@example.invalid",
        "commit.gpgsign": "false",
        "core.hooksPath": os.devnull,
    }
    options = [arg for key, value in config.items() for arg in ("-c", f"{key}={value}")]
    proc = subprocess.run(
        ["git", *options, *argv], cwd=repo, capture_output=True, text=True, check=True
    )
    return proc.stdout


def _touched(repo: Path) -> set[str]:
    """Paths that differ from the copy as committed (modified, added or new)."""
    status = _git(repo, "status", "--porcelain", "--untracked-files=all")
    return {line[3:] for line in status.splitlines() if line.strip()}


def _add_after(path: Path, anchor: str, new: str) -> None:
    """Insert ``new`` (one or more lines) right after the line that is ``anchor``."""
    lines = path.read_text().splitlines(keepends=True)
    at = [i for i, line in enumerate(lines) if line.rstrip("\n") == anchor]
    assert len(at) == 1, f"{path.name}: the line {anchor!r} is not there once"
    lines.insert(at[0] + 1, new + "\n")
    path.write_text("".join(lines))


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the repository, committed as copied, then with the op added as the docs say."""
    root = copy_repository(tmp_path_factory.mktemp("op_walk"))
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "the repository as copied")
    # The op's module, its kernel, and its one line in the ops' block.
    (root / OP_MODULE).write_text(ACTIVATION)
    (root / KERNEL_MODULE).write_text(KERNEL)
    _add_after(root / "flashinfer" / "__init__.py", OPS_ANCHOR, OPS_LINE)
    return root


def _run(repo: Path, *argv: str, ok: bool = True) -> str:
    """Run ``python argv`` in the copy, importing the copy's flashinfer; its output.  A
    return code other than ``ok`` expects is an AssertionError showing the output."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("FLASHINFER_")}
    environ["PYTHONPATH"] = str(repo)  # TRITON_INTERPRET as conftest set it
    proc = subprocess.run(
        [sys.executable, *argv], cwd=repo, env=environ, capture_output=True, text=True
    )
    output = proc.stdout + proc.stderr
    if ok:
        assert proc.returncode == 0, f"{' '.join(argv)} failed:\n{output[-6000:]}"
    else:
        assert proc.returncode != 0, f"{' '.join(argv)} passed:\n{output[-3000:]}"
    return output


def _pytest(repo: Path, *argv: str, ok: bool = True) -> str:
    return _run(repo, "-m", "pytest", *argv, "-p", "no:cacheprovider", ok=ok)


def _added_lines(repo: Path, path: str) -> list[str]:
    """The non-blank lines ``git diff`` shows added to ``path``; none may be removed."""
    diff = _git(repo, "diff", "--unified=0", "--", path).splitlines()
    changed = [d for d in diff if d[:1] in "+-" and d[:3] not in ("+++", "---")]
    assert all(d.startswith("+") for d in changed), changed
    return [d[1:] for d in changed if d[1:]]


# ---- adding the op -------------------------------------------------------------------------


def test_adding_the_op_is_its_module_its_kernel_and_one_line(repo):
    touched = _touched(repo)
    outside = sorted(p for p in touched if not p.startswith("tests/"))
    inside = sorted(touched - set(outside))
    print(f"\nadding silu_and_mul touched {len(outside)} files outside tests/: {outside}")
    print(f"and {len(inside)} under tests/: {inside}")
    assert outside == TOUCHED_OUTSIDE_TESTS
    assert not inside  # no test had to change
    for path, lines in ADDED.items():  # (diff may place an added blank line either side)
        assert _added_lines(repo, path) == [line for line in lines if line], path
    # The package's rules for a module: lint and format, a docstring, a typed public API.
    _run(repo, "-m", "ruff", "check", "--no-cache", OP_MODULE, KERNEL_MODULE)
    _run(repo, "-m", "ruff", "format", "--no-cache", "--check", OP_MODULE, KERNEL_MODULE)
    tree = ast.parse((repo / OP_MODULE).read_text())
    assert ast.get_docstring(tree)
    (api,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "silu_and_mul"]
    args = api.args.args + api.args.kwonlyargs
    assert [a.arg for a in args] == ["x", "out", "backend", "skip_check"]
    assert all(a.annotation is not None for a in args) and api.returns is not None


def _outcomes(output: str, test: str) -> dict[str, set[str]]:
    """``{backend: outcomes}`` of the op's items of ``test`` in ``pytest -v`` output."""
    found: dict[str, set[str]] = {}
    pattern = rf"::{test}\[silu_and_mul-(\w+)-\S*\] (PASSED|SKIPPED|FAILED|ERROR)"
    for backend, outcome in re.findall(pattern, output):
        found.setdefault(backend, set()).add(outcome)
    return found


HARNESSES = ("tests/test_conformance.py", "tests/test_overlap_conformance.py")
RULES = ("tests/test_layout.py", "tests/test_import_graph.py")


@pytest.fixture(scope="module")
def harnesses_and_rules(repo: Path) -> str:
    """One ``pytest -v`` of the copy (one interpreter, not two): the conformance and overlap
    harnesses' items of the op, and every test of the layout and import-graph rules."""
    keep = " or ".join(["silu_and_mul", *(Path(rule).name for rule in RULES)])
    return _pytest(repo, *HARNESSES, *RULES, "-k", keep, "-v")


def test_conformance_and_overlap_cover_both_backends(harnesses_and_rules):
    output = harnesses_and_rules
    for test in ("test_conformance", "test_overlap"):
        outcomes = _outcomes(output, test)
        for backend in ("torch", "triton"):  # collected, and its cases ran and passed
            assert "PASSED" in outcomes.get(backend, set()), (test, backend, outcomes)
        assert not {"FAILED", "ERROR"} & set().union(*outcomes.values()), output[-3000:]
    assert "PASSED" in _outcomes(output, "test_overlap").get("auto", set())


def test_the_layout_and_import_graph_rules_hold(harnesses_and_rules):
    for rule in RULES:  # (and the run as a whole passed: _pytest checks its status)
        ran = [line for line in harnesses_and_rules.splitlines() if line.startswith(f"{rule}::")]
        assert any(" PASSED" in line for line in ran), (rule, harnesses_and_rules[-3000:])
        assert not [line for line in ran if " FAILED" in line or " ERROR" in line], ran


USER_PROGRAM = r"""
import contextlib, io, json, runpy, sys
import torch, flashinfer

# The op runs, first: nothing has imported Triton yet.
device = "cuda" if torch.cuda.is_available() else "cpu"
x = torch.randn(3, 2, 40, device=device)
want = torch.nn.functional.silu(x[..., :20]) * x[..., 20:]
y = flashinfer.silu_and_mul(x)
ran = [f"triton after an auto call on {device} {'triton' in sys.modules}"]
for backend in ("torch", "triton"):
    y = flashinfer.silu_and_mul(x, backend=backend)
    torch.testing.assert_close(y, want)
    ran.append(f"{backend} {tuple(y.shape)} ok")


def command(main, *argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = main(list(argv))
    return {"code": code, "output": out.getvalue()}


from flashinfer.cli import main

sys.path.insert(0, "docs/_ext")
import flashinfer_reference

inventory = runpy.run_path("scripts/pr_checks/api_inventory.py")["main"]
print(json.dumps({
    "ran": ran,
    "backends": command(main, "backends", "--json"),
    "inventory": command(inventory),
    "reference": list(flashinfer_reference.operators_rst()),
    "explain": command(main, "explain", "silu_and_mul", "--shapes", "4x64", "--json"),
    "explain_bad": command(main, "explain", "silu_and_mul", "--shapes", "4x6x7x8"),
}))
"""
"""What a user and a maintainer do with the new op, in one interpreter (each step's own
interpreter cost seconds): call it, ``flashinfer backends --json``, the API inventory check,
the API reference's list, ``flashinfer explain``."""


@pytest.fixture(scope="module")
def used(repo: Path) -> dict:
    return json.loads(_run(repo, "-c", USER_PROGRAM).splitlines()[-1])


def test_the_op_is_listed_documented_and_runs(used):
    assert used["backends"]["code"] == 0, used["backends"]
    report = json.loads(used["backends"]["output"])
    (row,) = [a for a in report["apis"] if a["api"] == "flashinfer.silu_and_mul"]
    assert [b["name"] for b in row["backends"]] == ["torch", "triton"], row
    assert row["experimental"] is False
    assert used["inventory"]["code"] == 0 and "api_inventory: OK" in used["inventory"]["output"]
    # The stable API reference lists it, rendered from the one list (docs/api/operators.rst).
    listed = "\n".join(used["reference"])
    assert ".. autofunction:: flashinfer.silu_and_mul" in listed, listed
    output = "\n".join(used["ran"])
    assert "torch (3, 2, 20) ok" in output and "triton (3, 2, 20) ok" in output, output
    if "on cpu" in output:  # the heuristic picks torch on CPU: Triton is not even imported
        assert "on cpu False" in output, output


def test_the_command_explains_the_op_from_its_own_declaration(used):
    """``flashinfer explain`` builds the op's inputs from what its module declares
    (``declare_cases(..., examples=...)``): no edit of ``flashinfer/cli/``."""
    assert used["explain"]["code"] == 0, used["explain"]
    [found] = json.loads(used["explain"]["output"])
    assert found["api"] == "flashinfer.silu_and_mul" and found["chosen"] == "torch", found
    bad = used["explain_bad"]
    assert bad["code"] != 0 and "silu_and_mul takes TOKENSx2D" in bad["output"], bad


def test_leaving_out_the_ops_line_is_caught(repo):
    api_modules = repo / "flashinfer" / "__init__.py"
    good = api_modules.read_text()
    assert good.count(OPS_LINE + "\n") == 1
    api_modules.write_text(good.replace(OPS_LINE + "\n", ""))
    try:
        output = _pytest(repo, "tests/test_layout.py", "-q", ok=False)
    finally:
        api_modules.write_text(good)
    problem = "flashinfer.activation defines a public API but is not in the one list of ops"
    assert problem in output, output[-3000:]


# ---- a new field of experimental metadata (edits the shared copy, and puts it back) -------

RECORDS = "flashinfer/gating/records.py"
FIELD_ANCHOR = "    problems: tuple[str, ...] = ()"
FIELD_LINE = "    design_doc: str | None = None"
FIELD_PROGRAM = """
import warnings, flashinfer
from flashinfer.gating.lifecycle import ExperimentalFeature
warnings.simplefilter("ignore")

@flashinfer.flashinfer_experimental_api(
    owner="@alice", tracking_issue=12, graduate_by="2027-05-31", design_doc="docs/d.md"
)
def scale(x):
    return x

print(scale.experimental_info.design_doc)
entry = ExperimentalFeature("scale", "m.scale", "m", "m.scale", None, scale.experimental_info)
print([entry.as_dict()["design_doc"]])  # the listing's row (flashinfer.experimental --json)
try:
    flashinfer.experimental_backend(design_dok="x")
except TypeError as exc:
    print("refused:", exc)
"""


def test_a_new_metadata_field_is_one_source_file(repo):
    """Issue 30: adding a field (``design_doc``) to experimental metadata is one declaration on
    the type (``ExperimentalInfo``), at most 2 source files; both markers take it, the record
    keeps it, the listing shows it, a misspelling is refused naming it, and the lifecycle
    tests and check still pass."""
    records = repo / RECORDS
    good = records.read_text()
    before = _touched(repo)
    _add_after(records, FIELD_ANCHOR, FIELD_LINE)
    try:
        touched = _touched(repo) - before
        assert touched == {RECORDS} and len(touched) <= 2, touched
        output = _run(repo, "-c", FIELD_PROGRAM)
        assert output.splitlines()[:2] == ["docs/d.md", "['docs/d.md']"], output
        assert "refused:" in output and "design_doc" in output, output
        # (tests/test_experimental_metadata_type.py pins today's fields: not run here.)
        result = _pytest(repo, "tests/test_lifecycle_metadata.py", "-q")
        assert " passed" in result and " failed" not in result
        _run(repo, "scripts/pr_checks/experimental_lifecycle.py")
    finally:
        records.write_text(good)
    assert _touched(repo) == before


# ---- the wording walk (last: it edits the shared copy, and puts it back) -------------------


def _names_the_warning(source: str) -> bool:
    return any(marker in source for marker in WORDING_MARKERS)


def _tests_naming_the_warning(repo: Path, path: str) -> list[str]:
    """Node ids of the tests in ``path`` whose source names the warning; the whole file when
    none does (a listed file that checks it otherwise)."""
    source = (repo / path).read_text()
    ids = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef):
            scope = [(f"{path}::{node.name}::", n) for n in node.body]
        else:
            scope = [(f"{path}::", node)]
        for prefix, fn in scope:
            if isinstance(fn, ast.FunctionDef) and fn.name.startswith("test"):
                if _names_the_warning(ast.get_source_segment(source, fn) or ""):
                    ids.append(prefix + fn.name)
    return ids or [path]


def _test_files_naming_the_warning(repo: Path) -> list[str]:
    found = {
        path.relative_to(repo).as_posix()
        for path in (repo / "tests").rglob("test_*.py")
        if _names_the_warning(path.read_text())
    }
    return sorted((found | set(WORDING_TEST_FILES)) - set(WALKS))


def test_rewording_the_automatic_selection_warning_is_one_source_file(repo):
    messages = repo / MESSAGES
    assert messages.is_file(), f"{MESSAGES} does not exist: the messages have no one home"
    good = messages.read_text()
    (builder,) = [
        n
        for n in ast.parse(good).body
        if isinstance(n, ast.FunctionDef) and n.name == WORDING_BUILDER
    ]
    assert builder.end_lineno is not None
    lines = good.splitlines(keepends=True)
    before = _touched(repo)
    reworded = lines[: builder.lineno - 1] + [REWORDED] + lines[builder.end_lineno :]
    messages.write_text("".join(reworded))
    try:
        assert _touched(repo) - before == {MESSAGES}  # exactly one source file changed
        files = _test_files_naming_the_warning(repo)
        print(f"\nrewording {WORDING_BUILDER} changed {MESSAGES} only; the tests of {files}")
        quoting = sorted(
            p.relative_to(repo).as_posix()
            for p in (repo / "docs").rglob("*.rst")
            if "was picked automatically for" in p.read_text()
        )
        # The docs render the warning from its builder (docs/_ext/flashinfer_messages.py).
        assert quoting == [], f"pages that still show the old sentence: {quoting}"
        shown = _run(
            repo,
            "-c",
            "import warnings, flashinfer\n"
            "with warnings.catch_warnings(record=True) as caught:\n"
            "    warnings.simplefilter('always')\n"
            "    flashinfer.warn_experimental_backend_once('flashinfer.gemm.mm', 'risky', "
            "automatic=True)\n"
            "print(caught[0].message)\n",
        )
        assert shown.strip() == REWORDED_EXAMPLE, shown
        ids = [i for path in files for i in _tests_naming_the_warning(repo, path)]
        # ...and the tests that hold every copy of a message in the docs to its builder.
        ids += ["tests/test_doc_messages.py", "tests/test_policy_docs.py"]
        output = _pytest(repo, *ids, "-q")
        assert " passed" in output and " failed" not in output
    finally:
        messages.write_text(good)
    assert _touched(repo) == before
