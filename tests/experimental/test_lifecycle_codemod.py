"""``flashinfer lifecycle`` on throwaway copies of the repository (issue 32's "done when").

Each exit runs in its own copy: a user's program written against the experimental code
(``lifecycle_programs/``) runs before, the command applies the exit, and the same program,
unchanged, runs after, in subprocesses importing the copy's ``flashinfer``:

* ``graduate mm:splitk``: warning-free after, the same results, and the tuning file saved
  before (its entry recorded as experimental) is loaded and used, not tuned again;
* ``graduate fused_add_rmsnorm``: warning-free after, the same results; the experimental
  import path is a deprecated alias (``__deprecated__``, one ``DeprecationWarning``);
* ``rename mm:splitk --to split_k``: the same results; the old name warns once naming the new one;
  the tuning file's entry under the old name is read as the new one (and the same for
  renaming the API ``fused_add_rmsnorm``);
* ``remove mm:splitk``: the program fails with ``BackendSupportedError`` naming the version
  and what to use instead; the tuning file's entry is skipped with one line.

An exit on a copy nothing has changed yet runs in the test's process with ``--root`` (the same
command; the package imported here is the copy's, file for file); one that follows another
edit, and the worked example's, run in the copy.  What several checks read runs in one
interpreter.  Slow (a copy, several interpreters, the docs writer): marked ``slow``.  They
exercise the experimental code they take out of the experimental state, so they live in this
lane.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from repo_copy import as_main, copy_repository

import flashinfer

pytestmark = [pytest.mark.experimental, pytest.mark.slow]

ROOT = Path(flashinfer.__file__).resolve().parents[1]
PROGRAMS = "tests/experimental/lifecycle_programs"
VERSION = flashinfer.__version__


def _run(repo: Path, *argv: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("FLASHINFER_")}
    environ["PYTHONPATH"] = str(repo)
    proc = subprocess.run(
        [sys.executable, *argv], cwd=repo, env=environ, capture_output=True, text=True
    )
    if ok:
        assert proc.returncode == 0, (
            f"{' '.join(argv)} failed:\n{(proc.stdout + proc.stderr)[-6000:]}"
        )
    return proc


def _program(repo: Path, name: str, *args: str) -> dict:
    out = _run(repo, f"{PROGRAMS}/{name}", *args).stdout
    return json.loads(out.strip().splitlines()[-1])


def _checks(repo: Path, *scripts: str, code: str = "") -> subprocess.CompletedProcess[str]:
    """``code``, then each script (``"path args"``) as ``__main__``, all in one interpreter of
    the copy; fails with the first script that exits non-zero."""
    return _run(repo, "-c", f"{code}\n{as_main(*scripts)}")


def _apply(repo: Path, *argv: str) -> None:
    """``flashinfer lifecycle ARGV --apply`` on a copy nothing has changed yet, run here (an
    interpreter less, seconds of CPU): the package this process imported is then the copy's,
    file for file.  A command that follows another edit of the copy runs in it (``_run``), as
    the worked example's do (the ``graduated`` fixture)."""
    from flashinfer.cli import main

    with contextlib.redirect_stdout(io.StringIO()) as out:
        status = main(["lifecycle", *argv, "--apply", "--root", str(repo)])
    assert status == 0, out.getvalue()[-6000:]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return copy_repository(tmp_path / "repo")


@pytest.fixture(scope="module")
def first_runs(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The user's programs run once in an unchanged copy: their outputs, and the tuning file
    the split-K program saved.  Every copy starts the same, so the tests that compare a run
    after an exit with the run before share these (each gets its own tuning file)."""
    tmp = tmp_path_factory.mktemp("first")
    repo = copy_repository(tmp / "repo")
    tuned = tmp / "tuned.json"
    splitk = _program(repo, "splitk_program.py", str(tuned))
    return {"splitk": splitk, "tuned": tuned.read_text(), "norm": _program(repo, "norm_program.py")}


def _tuned(first_runs: dict, tmp_path: Path) -> str:
    """A fresh copy of the tuning file the first split-K run saved: its path."""
    tuned = tmp_path / "tuned.json"
    tuned.write_text(first_runs["tuned"])
    return str(tuned)


@pytest.fixture(scope="module")
def graduated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy with ``graduate mm:splitk --apply`` applied, shared by the tests that only read
    it (the program run after, the checks, the stable suite of mm)."""
    repo = copy_repository(tmp_path_factory.mktemp("graduated") / "repo")
    _run(repo, "-m", "flashinfer", "lifecycle", "graduate", "mm:splitk", "--apply")
    return repo


def test_without_apply_the_plan_is_printed_and_nothing_is_written(repo):
    before = {p: p.read_bytes() for p in repo.rglob("*.py")}
    out = _run(repo, "-m", "flashinfer", "lifecycle", "graduate", "mm:splitk").stdout
    assert "move    flashinfer/experimental/splitk_gemm/kernel.py -> " in out
    assert 'Graduated(api="flashinfer.gemm.mm", version=' in out
    assert "nothing written" in out
    assert {p: p.read_bytes() for p in repo.rglob("*.py")} == before


def test_graduating_splitk_keeps_the_program_working_warning_free_with_its_tuning(
    graduated, first_runs, tmp_path
):
    repo, first = graduated, first_runs["splitk"]
    tuned = _tuned(first_runs, tmp_path)
    assert any(w.startswith("ExperimentalWarning") for w in first["warnings"])
    assert first["choices"] == ["splitk"] and first["loaded"] is None  # tuned, saved
    saved = json.loads(Path(tuned).read_text())
    assert [e["experimental"] for e in saved["entries"]] == [True]

    # (graduated: ``flashinfer lifecycle graduate mm:splitk --apply`` ran in the copy)

    assert not (repo / "flashinfer/experimental/splitk_gemm").exists()
    assert (repo / "flashinfer/features/splitk_gemm/support.py").is_file()
    after = _program(repo, "splitk_program.py", tuned)
    assert after["warnings"] == []
    assert (after["named"], after["tuned"]) == (first["named"], first["tuned"])
    assert after["loaded"] == 1 and after["skipped"] == {} and after["choices"] == ["splitk"]
    assert json.loads(Path(tuned).read_text()) == saved  # reused, not tuned again
    # "auto" considers it with the gate off; explain and the listing say stable, since when;
    # what stays under flashinfer/experimental/ is still refused unmarked at import; the
    # lifecycle check passes and the generated docs are current (one interpreter for all).
    checked = _checks(
        repo,
        "scripts/pr_checks/experimental_lifecycle.py",
        "scripts/docs/write_dispatchers.py --check",
        code="import torch, flashinfer; a = torch.randn(16, 1024); b = torch.randn(1024, 32)\n"
        "assert 'splitk' in flashinfer.mm.stable_backends\n"
        "e = flashinfer.mm.explain(a, b); v = e.verdict('splitk')\n"
        f"assert v.graduated_in == {VERSION!r} and v.candidate, e\n"
        f"assert 'stable (since {VERSION})' in str(e)\n"
        "import contextlib, io, json\nfrom flashinfer.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as listing:\n"
        "    assert main(['backends']) == 0\n"
        "print('LISTING', json.dumps(listing.getvalue()))\n"
        "from flashinfer.backend_dispatch import backend_requirement\n"
        "def ok(x, backend): return True\n"
        "ok.__module__ = 'flashinfer.experimental.fused_add_rmsnorm.support'\n"
        "try:\n"
        "    backend_requirement({'x': ok})(lambda x, backend='auto': x)\n"
        "except Exception as e:\n"
        "    print('REFUSED', json.dumps(str(e)))\n",
    )
    lines = checked.stdout.splitlines()
    listing = json.loads(next(line for line in lines if line.startswith("LISTING "))[8:])
    assert any(
        "splitk" in line and f"stable (since {VERSION})" in line for line in listing.splitlines()
    )
    refused = json.loads(next(line for line in lines if line.startswith("REFUSED "))[8:])
    assert "not marked @experimental_backend" in refused
    assert (
        f"backend `splitk` of `mm` is stable since {VERSION}" in (repo / "CHANGELOG.md").read_text()
    )


def test_promoting_fused_add_rmsnorm_keeps_the_program_working_warning_free(repo, first_runs):
    first = first_runs["norm"]
    assert [w.split(":")[0] for w in first["warnings"]] == ["ExperimentalWarning"]

    _apply(repo, "graduate", "fused_add_rmsnorm")

    after = _program(repo, "norm_program.py")
    assert after["warnings"] == []
    assert (after["input"], after["residual"]) == (first["input"], first["residual"])
    # The experimental import path: a deprecated alias, flagged and warning once; the checks
    # pass (one interpreter).
    alias = _checks(
        repo,
        "scripts/pr_checks/experimental_lifecycle.py",
        "scripts/pr_checks/containment.py",
        "scripts/pr_checks/experimental_public_names.py",
        code="import warnings, torch\n"
        "from flashinfer.fused_norm import OVERLAP\n"
        "from flashinfer.experimental.fused_add_rmsnorm import implementation\n"
        "f = implementation.fused_add_rmsnorm\n"
        "assert 'flashinfer.features.fused_add_rmsnorm.implementation' in f.__deprecated__\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    for _ in range(2):\n"
        "        f(torch.randn(2, 8), torch.randn(2, 8), torch.ones(8), 1e-6, overlap=OVERLAP)\n"
        "assert [w.category for w in caught] == [DeprecationWarning], caught\n",
    )
    assert alias.returncode == 0
    # Type checkers flag the old path: the alias is marked @deprecated in source (PEP 702).
    # Without site-packages mypy reads the copy and its own typeshed (typing_extensions'
    # deprecated included), not torch's types: a second instead of fifteen.
    user = repo / "user_program.py"
    user.write_text(
        "from flashinfer.experimental.fused_add_rmsnorm.implementation import fused_add_rmsnorm\n"
        "fused_add_rmsnorm(1, 2, 3, 4)\n"
    )
    checked = _run(
        repo,
        "-m",
        "mypy",
        "--enable-error-code",
        "deprecated",
        "--follow-imports=silent",
        "--no-incremental",
        "--no-site-packages",
        str(user),
        ok=False,
    )
    assert "fused_add_rmsnorm is deprecated" in checked.stdout, checked.stdout


def test_renaming_splitk_keeps_the_old_name_and_its_tuning(repo, first_runs, tmp_path):
    tuned, first = _tuned(first_runs, tmp_path), first_runs["splitk"]

    _apply(repo, "rename", "mm:splitk", "--to", "split_k")

    after = _program(repo, "splitk_program.py", tuned)
    assert (after["named"], after["tuned"]) == (first["named"], first["tuned"])
    deprecations = [w for w in after["warnings"] if w.startswith("DeprecationWarning")]
    assert len(deprecations) == 1 and "'split_k'" in deprecations[0]
    assert after["loaded"] == 1 and after["choices"] == ["split_k"]
    _run(repo, "scripts/pr_checks/experimental_lifecycle.py")  # the alias leads somewhere


def test_removing_splitk_leaves_a_tombstone_and_skips_its_tuning(repo, first_runs, tmp_path):
    tuned = _tuned(first_runs, tmp_path)

    _apply(repo, "remove", "mm:splitk")

    assert not (repo / "flashinfer/experimental/splitk_gemm").exists()
    failed = _run(repo, f"{PROGRAMS}/splitk_program.py", tuned, ok=False)
    assert failed.returncode == 1
    assert (
        f"backend 'splitk' was removed in flashinfer {VERSION}; use backend='torch'"
        in failed.stderr
    )
    skipped = _checks(
        repo,
        "scripts/pr_checks/experimental_lifecycle.py",
        code="import warnings; warnings.simplefilter('always')\n"
        f"from flashinfer.autotuner import load_tuning_file; print(load_tuning_file({tuned!r}))",
    )
    assert "1 name a removed backend ('splitk' of mm in" in skipped.stderr


def test_removing_fused_add_rmsnorm_leaves_a_tombstone(repo):
    _apply(repo, "remove", "fused_add_rmsnorm", "--instead", "flashinfer.rmsnorm")
    assert not (repo / "flashinfer/experimental/fused_add_rmsnorm").exists()
    failed = _run(repo, f"{PROGRAMS}/norm_program.py", ok=False)
    message = (
        f"flashinfer.fused_norm.fused_add_rmsnorm was removed in flashinfer {VERSION}; use "
        "flashinfer.rmsnorm instead"
    )
    assert f"AttributeError: {message}" in failed.stderr
    module = _checks(
        repo,
        "scripts/pr_checks/experimental_lifecycle.py",
        code="import flashinfer.fused_norm as m\ntry:\n    m.fused_add_rmsnorm\n"
        "except AttributeError as e:\n    print(e)\n",
    )
    assert message in module.stdout


def _worked_example() -> list[list[str]]:
    """The commands of docs/lifecycle.rst's worked example, in order (``$ flashinfer ...``)."""
    text = (ROOT / "docs" / "lifecycle.rst").read_text()
    example = text.split("Worked example\n", 1)[1]
    return [
        line.strip()[2:].split()
        for line in example.splitlines()
        if line.strip().startswith("$ flashinfer lifecycle")
    ]


def test_the_docs_worked_example_is_what_these_tests_run():
    assert _worked_example() == [
        ["flashinfer", "lifecycle", "graduate", "mm:splitk"],
        ["flashinfer", "lifecycle", "graduate", "mm:splitk", "--apply"],
        ["flashinfer", "lifecycle", "remove", "mm:splitk", "--apply"],
    ]


EXPORT = (
    "import sys, torch, flashinfer, flashinfer.fused_norm\n"
    "class Program(torch.nn.Module):\n"
    "    def forward(self, x, r, w):\n"
    "        x, r = x.clone(), r.clone()\n"
    "        flashinfer.fused_norm.TORCH_OP.default(x, r, w, 1e-6)\n"
    "        return x, r\n"
    "g = torch.Generator().manual_seed(0)\n"
    "args = (torch.randn(4, 8, generator=g), torch.randn(4, 8, generator=g), torch.ones(8))\n"
    "if sys.argv[1] == 'save':\n"
    "    torch.export.save(torch.export.export(Program(), args), sys.argv[2])\n"
    "x, r = torch.export.load(sys.argv[2]).module()(*args)\n"
    "print(x.sum().item(), r.sum().item())\n"
)
"""A program exported with the operator of ``fused_add_rmsnorm`` (``save``: then loaded and
run, as ``load`` does), loaded and run (``load``, after the module of the API is imported:
that registers its operators)."""


def test_renaming_fused_add_rmsnorm_keeps_the_old_name_as_a_deprecated_alias(
    repo, first_runs, tmp_path
):
    first = first_runs["norm"]
    exported = str(tmp_path / "program.pt2")
    ran = _run(repo, "-c", EXPORT, "save", exported).stdout

    _apply(repo, "rename", "fused_add_rmsnorm", "--to", "add_rmsnorm")

    after = _program(repo, "norm_program.py")
    assert (after["input"], after["residual"]) == (first["input"], first["residual"])
    kinds = sorted(w.split(":")[0] for w in after["warnings"])
    assert kinds == ["DeprecationWarning", "ExperimentalWarning"]  # still experimental
    (deprecation,) = [w for w in after["warnings"] if w.startswith("Deprecation")]
    assert "renamed flashinfer.fused_norm.add_rmsnorm" in deprecation
    source = (repo / "flashinfer/fused_norm.py").read_text()
    assert "@deprecated(" in source and "def fused_add_rmsnorm(" in source
    # Item 12: the program exported before the rename loads (its operator's old name is an
    # alias of the new one) and gives the same result; the old name is flagged deprecated
    # (one interpreter).
    marked = "from flashinfer.fused_norm import fused_add_rmsnorm as f\n"
    marked += "assert 'add_rmsnorm' in f.__deprecated__\n"
    assert _run(repo, "-c", EXPORT + marked, "load", exported).stdout == ran


# -- issue 43: the walks after an exit --------------------------------------------------------


def test_after_graduating_splitk_the_mm_tests_pass(graduated):
    """Item 14: the stable suite of the op holds with the graduated backend among its stable
    ones (a stable test compares only the backends whose checks accept its inputs)."""
    assert "splitk" in (graduated / "flashinfer/features/splitk_gemm/support.py").read_text()
    _run(graduated, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_gemm.py")


def test_renaming_a_stable_backend_keeps_autos_choice_and_the_packages_own_calls_quiet(repo):
    """Item 5: after ``rmsnorm:torch -> reference``, "auto" on CPU still picks it first (the
    heuristic ranks the new name), fused_add_rmsnorm (which names it) warns no
    DeprecationWarning, and the old name still runs it, warning once."""
    probe = (
        "import json, warnings, torch, flashinfer\n"
        "x, w = torch.randn(4, 8), torch.ones(8)\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    flashinfer.rmsnorm(x, w)\n"
        "    first = flashinfer.rmsnorm.suitable_auto_backends[0]\n"
        "    flashinfer.fused_add_rmsnorm(x.clone(), x.clone(), w)\n"
        "    inner = [str(c.message) for c in caught if c.category is DeprecationWarning]\n"
        f"    old = flashinfer.rmsnorm(x, w, backend={'torch'!r})\n"
        "late = [str(c.message) for c in caught if c.category is DeprecationWarning]\n"
        "print(json.dumps({'first': first, 'inner': inner, 'deprecations': late,\n"
        "    'same': bool(torch.equal(old, flashinfer.rmsnorm(x, w)))}))\n"
    )
    before = json.loads(_run(repo, "-c", probe).stdout)
    assert before["first"] == "torch" and before["inner"] == []

    _apply(repo, "rename", "rmsnorm:torch", "--to", "reference")

    out = _checks(repo, "scripts/pr_checks/experimental_lifecycle.py", code=probe).stdout
    after = json.loads(next(line for line in out.splitlines() if line.startswith("{")))
    assert after["first"] == "reference" and after["inner"] == [] and after["same"]
    assert len(after["deprecations"]) == 1 and "'reference'" in after["deprecations"][0]


def test_renaming_past_a_second_declaration_then_removing_leaves_the_tombstone(repo, tmp_path):
    """Items 6 and 11: an earlier ``Backend("splitk", ...)`` in the module is not the one
    renamed; after the rename and then the removal, the first name gets the tombstone."""
    support = repo / "flashinfer/experimental/splitk_gemm/support.py"
    text = support.read_text()
    at = text.index("\nclass ")
    decoy = '\n\nDECOY = Backend("splitk", check=lambda a, b: True, run=print)  # not mm\'s\n'
    support.write_text(text[:at] + decoy + text[at:])

    _run(repo, "-m", "flashinfer", "lifecycle", "rename", "mm:splitk", "--to", "split_k", "--apply")
    assert 'DECOY = Backend("splitk"' in support.read_text()

    # Run in the copy, the removal finds split_k in mm's table or fails ("has no backend").
    _run(repo, "-m", "flashinfer", "lifecycle", "remove", "mm:split_k", "--apply")
    failed = _run(repo, f"{PROGRAMS}/splitk_program.py", str(tmp_path / "t.json"), ok=False)
    assert f"backend 'split_k' was removed in flashinfer {VERSION}" in failed.stderr
    _run(repo, "scripts/pr_checks/experimental_lifecycle.py")
