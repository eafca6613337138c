"""The kernel author's path, walked by a script (issue 15's "done when").

In a copy of the repository, a kernel author adds the experimental backend ``rowwise`` (one
Triton program per row) to the stable ``flashinfer.rmsnorm``, and a torch backend ``chunked``
to ``flashinfer.mm``, the way the docs say: a feature folder whose ``support.py`` declares
the backend (checker, implementation, preference), one line in the API's table and its
import, and the author's own tests.  Then, in subprocesses on that copy:

* the stable lane's modules (``test_norm.py``, ``test_gemm.py``, ``test_conformance.py``),
  unchanged, pass with the new backends in the tables (stable tests are not sensitive to an
  extra experimental backend);
* the experimental lane is green for them: the author's tests, and the conformance harness,
  which covers the new backends with no new code;
* the repository checks (containment, placement, lifecycle, public names) and ruff pass.

The copy is made once for the module; each lane is one test (both read one pytest run).
"""

from __future__ import annotations

import datetime
import difflib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from repo_copy import as_main, copy_repository

import flashinfer

# Slow (a copy, lanes and checks in subprocesses): started first on xdist workers.
pytestmark = [pytest.mark.experimental, pytest.mark.slow]

ROOT = Path(flashinfer.__file__).resolve().parents[1]
STABLE_TESTS = ("tests/test_norm.py", "tests/test_gemm.py", "tests/test_conformance.py")
AUTHOR_LANE = (
    "tests/experimental/test_rowwise_norm.py",
    "tests/experimental/test_conformance_experimental.py",
)
GRADUATE_BY = (datetime.date.today() + datetime.timedelta(days=90)).isoformat()
TRITON_LINE = (
    '        Backend("triton", check=_check_triton, run=_rmsnorm_triton, differentiable=True),'
)

ROWWISE_SUPPORT = f'''"""Experimental row-wise RMS norm, a backend of flashinfer.rmsnorm: its
declaration.  Light: the checker, the preference and a run function that imports the kernel
on first use.
"""

from __future__ import annotations

import torch

from flashinfer.backend_dispatch import Backend, experimental_backend, find_compute_capability
from flashinfer.backend_families import TRITON, backend_family
from flashinfer.kernels import bf16_reason, offsets_reason, rows_view, triton_device_reason

MAX_HIDDEN = 8192
"""One program holds a whole row: the longest row it takes."""


@experimental_backend(owner="@kernel-author", tracking_issue=4242, graduate_by="{GRADUATE_BY}")
@backend_family(TRITON)
def check_rowwise(
    input: torch.Tensor,
    weight: torch.Tensor,
    eps: float = 1e-6,
    *,
    out: torch.Tensor | None = None,
    backend: str = "auto",
) -> bool:
    """Rows of unit stride, up to MAX_HIDDEN elements, where Triton runs."""
    reason = triton_device_reason(input) or bf16_reason(input.dtype, find_compute_capability(input))
    if reason is not None:
        raise ValueError(reason)
    if input.shape[-1] > MAX_HIDDEN:
        raise ValueError(
            f"one program holds one row of at most {{MAX_HIDDEN}} elements, got "
            f"{{input.shape[-1]}}; use backend='triton'"
        )
    if rows_view(input) is None:
        raise ValueError("input is not a stack of rows of unit stride; pass input.contiguous()")
    reason = offsets_reason(input=input, out=out)
    if reason is not None:
        raise ValueError(reason)
    return True


def prefer_rowwise(input: torch.Tensor) -> bool:
    """Short rows: one program per row, no loop."""
    return input.shape[-1] <= 1024


def run_rowwise(input, weight, eps, out):
    from .kernel import rmsnorm_rowwise  # first use imports Triton

    return rmsnorm_rowwise(input, weight, eps, out)


ROWWISE = Backend("rowwise", check=check_rowwise, run=run_rowwise, prefer=prefer_rowwise)
'''

ROWWISE_KERNEL = '''"""The row-wise RMS norm kernel: one Triton program normalises one row."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from flashinfer.kernels import interpreter_enabled, rows_view


@triton.jit
def _rowwise(x_ptr, w_ptr, y_ptr, stride_x, stride_y, n, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / n + eps)
    tl.store(y_ptr + row * stride_y + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def rmsnorm_rowwise(input, weight, eps, out):
    """The result (out when given) of rmsnorm on validated arguments."""
    fresh = out is None or rows_view(out) is None
    result = torch.empty_like(input, memory_format=torch.contiguous_format) if fresh else out
    rows_in, rows_out = rows_view(input), rows_view(result)
    stored = rows_out
    if result.dtype == torch.bfloat16 and interpreter_enabled():
        stored = torch.empty(rows_out.shape, dtype=torch.float32)  # the interpreter truncates
    if rows_in.shape[0]:
        block = triton.next_power_of_2(rows_in.shape[1])
        _rowwise[(rows_in.shape[0],)](
            rows_in, weight.contiguous(), stored, rows_in.stride(0), stored.stride(0),
            rows_in.shape[1], float(eps), BLOCK=block,
        )
    if stored is not rows_out:
        rows_out.copy_(stored)
    if out is not None and result is not out:
        return out.copy_(result)
    return result
'''

CHUNKED_SUPPORT = f'''"""Experimental chunked-K GEMM in torch, a backend of flashinfer.mm: its
declaration."""

from __future__ import annotations

import torch

from flashinfer.backend_dispatch import Backend, experimental_backend
from flashinfer.backend_families import TORCH, backend_family

CHUNK = 256


@experimental_backend(owner="@kernel-author", tracking_issue=4243, graduate_by="{GRADUATE_BY}")
@backend_family(TORCH)
def check_chunked(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Every input the shared validation accepts."""
    return True


class ChunkedRunner:
    """K in chunks of CHUNK, summed in fp32; nothing to tune."""

    def tactic_space(self):
        return [None]

    def tactics(self, inputs):
        return [None]

    def __call__(self, inputs, tactic=None):
        a, b, out, out_dtype = inputs
        acc = torch.zeros(a.shape[0], b.shape[1], dtype=torch.float64)
        for k in range(0, a.shape[1], CHUNK):
            acc += a[:, k : k + CHUNK].double() @ b[k : k + CHUNK].double()
        result = acc.to(out_dtype or a.dtype)
        return result if out is None else out.copy_(result)


CHUNKED = Backend("chunked", check=check_chunked, run=ChunkedRunner())
'''

AUTHOR_TESTS = '''"""The row-wise backend of rmsnorm (flashinfer/experimental/rowwise_norm)."""

import re
import warnings

import pytest
import torch

from flashinfer import ExperimentalWarning, rmsnorm
from flashinfer.experimental.rowwise_norm.support import ROWWISE, check_rowwise
from flashinfer.gating.messages import automatic_selection, explicit_selection

pytestmark = pytest.mark.experimental
GATE = "FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS"


def _x(*shape, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(0)).to(dtype)


def test_declared_in_rmsnorms_table():
    assert rmsnorm.backends["rowwise"] is ROWWISE and "rowwise" in rmsnorm.experimental_backends


def test_checker_accepts_rows_and_rejects_the_rest():
    assert check_rowwise(_x(4, 64), torch.ones(64))
    with pytest.raises(ValueError, match="contiguous"):
        check_rowwise(_x(64, 4).t(), torch.ones(64))
    with pytest.raises(ValueError, match="at most 8192"):
        check_rowwise(_x(1, 8193), torch.ones(8193))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_agrees_with_the_stable_reference(dtype):
    x, w = _x(5, 96, dtype=dtype), _x(96, dtype=dtype) + 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalWarning)
        y = rmsnorm(x, w, backend="rowwise")
    torch.testing.assert_close(y, rmsnorm(x, w, backend="torch"), rtol=2e-2, atol=2e-2)


def test_explicit_selection_warns_once():
    x, w = _x(2, 32), torch.ones(32)
    explicit = re.escape(explicit_selection(rmsnorm.api_key, "rowwise"))
    with pytest.warns(ExperimentalWarning, match=explicit):
        rmsnorm(x, w, backend="rowwise")
    with warnings.catch_warnings():
        warnings.simplefilter("error", ExperimentalWarning)
        rmsnorm(x, w, backend="rowwise")


def test_auto_drops_it_with_the_gate_off():
    rmsnorm(_x(2, 32), torch.ones(32))
    assert "rowwise" not in rmsnorm.suitable_auto_backends
    assert "rowwise" in rmsnorm.dropped_experimental_backends


def test_auto_picks_it_with_the_gate_on_when_its_preference_says_so(monkeypatch):
    monkeypatch.setenv(GATE, "1")
    picked = re.escape(automatic_selection(rmsnorm.api_key, "rowwise"))
    with pytest.warns(ExperimentalWarning, match=picked):
        rmsnorm(_x(2, 32), torch.ones(32))  # hidden <= 1024: preferred
    assert rmsnorm.suitable_auto_backends[0] == "rowwise"
    rmsnorm(_x(2, 2048), torch.ones(2048))  # longer rows: the heuristic's order
    assert rmsnorm.suitable_auto_backends[0] == "torch"
    assert "rowwise" in rmsnorm.suitable_auto_backends
'''


def _add_lines(path: Path, after: dict[str, str]) -> None:
    """Insert each value as a new line right after the line that is its key."""
    lines = path.read_text().splitlines(keepends=True)
    for anchor, new in after.items():
        at = [i for i, line in enumerate(lines) if line.rstrip("\n") == anchor]
        assert len(at) == 1, f"{path.name}: the line {anchor!r} is not there once"
        lines.insert(at[0] + 1, new + "\n")
    path.write_text("".join(lines))


def _added_lines(before: str, after: str) -> list[str]:
    diff = difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
    changed = [d for d in diff if d[:1] in "+-" and d[:3] not in ("+++", "---")]
    assert all(d.startswith("+") for d in changed), changed  # nothing removed or edited
    return [d[1:].strip() for d in changed]


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the repository with the two backends added, as the docs say to."""
    root = copy_repository(tmp_path_factory.mktemp("walk"))
    experimental = root / "flashinfer" / "experimental"
    # 1. The feature folders: an empty package, the declaration, the kernel.
    _write(experimental / "rowwise_norm" / "__init__.py", '"""Row-wise RMS norm."""\n')
    _write(experimental / "rowwise_norm" / "support.py", ROWWISE_SUPPORT)
    _write(experimental / "rowwise_norm" / "kernel.py", ROWWISE_KERNEL)
    _write(experimental / "chunked_gemm" / "__init__.py", '"""Chunked-K GEMM."""\n')
    _write(experimental / "chunked_gemm" / "support.py", CHUNKED_SUPPORT)
    # 2. One line in each API's table, and its import.
    norm, gemm = root / "flashinfer" / "norm.py", root / "flashinfer" / "gemm.py"
    _add_lines(
        norm,
        {
            "from flashinfer.backend_families import FLOAT_DTYPES, TORCH, TRITON, backend_family, "
            "dtype_name": "from flashinfer.experimental.rowwise_norm.support import ROWWISE",
            TRITON_LINE: "        ROWWISE,",
        },
    )
    _add_lines(
        gemm,
        {
            "# The only module-level import from flashinfer.experimental: its light "
            "declarations.": "from flashinfer.experimental.chunked_gemm.support import CHUNKED",
            "        SPLITK,": "        CHUNKED,",
        },
    )
    # 3. The author's tests.
    _write(root / "tests" / "experimental" / "test_rowwise_norm.py", AUTHOR_TESTS)
    return root


def _run(repo: Path, *argv: str, env: dict[str, str] | None = None) -> str:
    """Run ``python argv`` in the copy, importing the copy's flashinfer; its output, or
    AssertionError with it."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("FLASHINFER_")}
    environ.update(PYTHONPATH=str(repo), **(env or {}))  # TRITON_INTERPRET as conftest set it
    proc = subprocess.run(
        [sys.executable, *argv], cwd=repo, env=environ, capture_output=True, text=True
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{' '.join(argv)} failed:\n{output[-6000:]}"
    return output


def test_adding_a_backend_is_its_feature_folder_and_one_table_line(repo):
    for api, feature, name in (
        ("norm.py", "rowwise_norm", "ROWWISE"),
        ("gemm.py", "chunked_gemm", "CHUNKED"),
    ):
        before = (ROOT / "flashinfer" / api).read_text()
        added = _added_lines(before, (repo / "flashinfer" / api).read_text())
        assert sorted(added) == [
            f"{name},",
            f"from flashinfer.experimental.{feature}.support import {name}",
        ]
    _run(repo, "-m", "ruff", "check", "--config", "pyproject.toml", "flashinfer")
    # The ops' tables list them: asserted in the interpreter of the repository checks below.


@pytest.fixture(scope="module")
def lanes(repo: Path) -> list[str]:
    """One pytest run in the copy (one interpreter and start-up, not one a lane): the stable
    lane's modules, and the experimental lane's for the new backends (the author's tests, the
    harness's cases that name them).  Its lines, a line a test (``-rA``)."""
    output = _run(
        repo,
        "-m",
        "pytest",
        *STABLE_TESTS,
        *AUTHOR_LANE,
        "-k",
        "not test_conformance_experimental or rowwise or chunked",
        "-q",
        "-p",
        "no:cacheprovider",
        "-rA",
    )
    return output.splitlines()


def test_the_stable_lane_passes_unchanged_over_the_new_backends(repo, lanes):
    for name in STABLE_TESTS:  # the copy's stable tests are the repository's, byte for byte
        assert (repo / name).read_bytes() == (ROOT / name).read_bytes()
        assert any(line.startswith(f"PASSED {name}::") for line in lanes), name
    assert not [line for line in lanes if line.startswith(("FAILED", "ERROR"))]


def test_the_experimental_lane_is_green_for_the_new_backends(lanes):
    # The author's 8 tests, and the harness ran both ops' 8 declared cases on the new
    # backends (rowwise skips the transposed one, with its checker's reason).
    passed = [line for line in lanes if line.startswith(("PASSED tests/experimental/",))]
    assert len(passed) >= 8 + 7 + 8, "\n".join(lanes[-60:])
    assert all(line.split("::")[0][7:] in AUTHOR_LANE for line in passed)
    assert not [line for line in lanes if line.startswith(("FAILED", "ERROR"))]
    skipped = "rowwise: support check rejected the inputs: input is not a stack of rows"
    assert any(skipped in line for line in lanes if line.startswith("SKIPPED"))


def test_the_repository_checks_pass_on_the_new_features(repo):
    scripts = ("containment", "experimental_placement", "experimental_lifecycle")
    checks = [f"scripts/pr_checks/{script}.py" for script in scripts]
    checks += ["scripts/pr_checks/experimental_public_names.py", "-m flashinfer.experimental"]
    # The ops list the new backends (the table line took), then the checks: one interpreter,
    # each would be seconds apiece.
    listed = "import flashinfer as f\n"
    listed += "assert 'rowwise' in f.rmsnorm.experimental_backends, f.rmsnorm.backends\n"
    listed += "assert {'chunked', 'splitk'} <= f.mm.experimental_backends, f.mm.backends\n"
    output = _run(repo, "-c", listed + as_main(*checks))
    listing = output.rpartition("experimental_public_names")[2]
    assert "flashinfer.norm.rmsnorm[backend=rowwise]" in listing
    assert "flashinfer.gemm.mm[backend=chunked]" in listing


@pytest.mark.parametrize(
    "mistake, edit, message",
    [
        (
            "a stable backend's name",
            ('Backend("rowwise",', 'Backend("triton",'),
            "has two backends named 'triton': one checked by flashinfer.norm._check_triton, "
            "one by flashinfer.experimental.rowwise_norm.support.check_rowwise",
        ),
        ("the reserved name", ('Backend("rowwise",', 'Backend("auto",'), "'auto' is reserved"),
        (
            "an unmarked checker",
            ("@experimental_backend(", "# @experimental_backend("),
            "is defined in module 'flashinfer.experimental.rowwise_norm.support' under "
            "flashinfer.experimental, but the backend's checker is not marked",
        ),
    ],
    ids=lambda v: v if isinstance(v, str) and " " in v else "",
)
def test_each_mistake_stops_the_import_with_what_to_do(repo, mistake, edit, message):
    support = repo / "flashinfer" / "experimental" / "rowwise_norm" / "support.py"
    good = support.read_text()
    old, new = edit
    assert good.count(old) == 1
    support.write_text(good.replace(old, new))
    try:
        environ = {k: v for k, v in os.environ.items() if not k.startswith("FLASHINFER_")}
        proc = subprocess.run(
            [sys.executable, "-c", "import flashinfer.norm"],
            cwd=repo,
            env=dict(environ, PYTHONPATH=str(repo)),
            capture_output=True,
            text=True,
        )
    finally:
        support.write_text(good)
    assert proc.returncode != 0, f"{mistake}: the import succeeded"
    assert message in proc.stderr.replace("\n", " "), proc.stderr[-3000:]
