"""``flashinfer lifecycle``'s plans and usage errors (issue 43), on copies of the package's
source in a temporary folder (no subprocess but the one check after ``--apply``): what each
exit would write, for every name it may be given.  The walks that apply an exit to a whole
copy and run programs against it are ``test_lifecycle_codemod.py``."""

from __future__ import annotations

import argparse
import ast
import keyword
import re
import shutil
import sys
import unicodedata
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import flashinfer
from flashinfer.cli import main
from flashinfer.cli.common import UsageError
from flashinfer.cli.lifecycle import Plan, minor_release, plan_for
from flashinfer.dispatch.backend_names import flashinfer_apis

pytestmark = pytest.mark.experimental

ROOT = Path(flashinfer.__file__).resolve().parents[1]
SUPPORT = "flashinfer/experimental/splitk_gemm/support.py"


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package's source and CHANGELOG.md: enough for a plan (and the check after it)."""
    root = tmp_path_factory.mktemp("checkout")
    shutil.copytree(
        ROOT / "flashinfer", root / "flashinfer", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy2(ROOT / "CHANGELOG.md", root / "CHANGELOG.md")
    return root


@pytest.fixture
def checkout(source: Path, tmp_path: Path) -> Path:
    """A copy of :func:`source` a test may edit."""
    return Path(shutil.copytree(source, tmp_path / "checkout"))


def _files(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


def _plan(root: Path, action: str, target: str, new: str | None = None) -> Plan:
    args = argparse.Namespace(new_name=new, instead=None)
    return plan_for(root, action, target, "0.2.0", args)


def _text(root: Path, plan: Plan, path: str) -> str:
    text = plan.changes.get(path, (root / path).read_text(encoding="utf-8"))
    assert text is not None
    return text


# -- item 8: an API's new name -------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "rmsnorm",
        "mm",
        "class",
        "match",
        "fused_add_rmsnorm",
        "normé",
        "\ufb01norm",
        "_norm",
        "2x",
        "a b",
    ],
)
def test_a_bad_api_name_is_a_usage_error_and_nothing_is_written(name, checkout, capsys):
    before = _files(checkout)
    argv = ["lifecycle", "rename", "fused_add_rmsnorm", "--to", name, "--apply"]
    assert main([*argv, "--root", str(checkout)]) == 2
    err = capsys.readouterr().err
    assert f"--to {name!r}" in err and "nothing written" in err
    assert _files(checkout) == before


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.one_of(st.text(max_size=12), st.from_regex(r"\A[a-z_][a-z0-9_]{0,10}\Z")))
def test_an_api_name_is_taken_only_when_every_later_step_can_use_it(name, source):
    """Accepted: an ASCII identifier Python keeps as written (NFKC), no keyword, public, and
    free in the package and in the API's module; the plan then defines it."""
    from flashinfer import fused_norm

    try:
        plan = _plan(source, "rename", "fused_add_rmsnorm", name)
    except UsageError:
        return
    assert name.isascii() and name.isidentifier() and unicodedata.normalize("NFKC", name) == name
    assert not keyword.iskeyword(name) and not keyword.issoftkeyword(name)
    assert not name.startswith("_") and name != "fused_add_rmsnorm"
    assert name not in dir(flashinfer) and not hasattr(fused_norm, name)
    tree = ast.parse(_text(source, plan, "flashinfer/fused_norm.py"))
    assert name in {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}


# -- item 13: the release an exit ships in ---------------------------------------------------


@given(version=st.one_of(st.text(max_size=8), st.from_regex(r"\A[0-9]{1,2}(\.[0-9]{1,2}){0,3}\Z")))
def test_only_a_minor_release_is_a_version(version):
    if re.fullmatch(r"[0-9]+\.[0-9]+(\.0+)?", version):
        major, minor = version.split(".")[:2]
        assert minor_release(version) == f"{int(major)}.{int(minor)}.0"
    else:
        with pytest.raises(UsageError, match="--version"):
            minor_release(version)


@pytest.mark.parametrize("version", ["banana", "0.1.1", "1", "0.2.0rc1"])
def test_a_bad_version_is_a_usage_error_and_nothing_is_written(version, checkout, capsys):
    before = _files(checkout)
    argv = ["lifecycle", "graduate", "mm:splitk", "--apply", "--version", version]
    assert main([*argv, "--root", str(checkout)]) == 2
    assert f"{version!r}" in capsys.readouterr().err
    assert _files(checkout) == before


# -- item 5: a rename keeps every choice ------------------------------------------------------


def _pairs() -> list[tuple[str, str]]:
    return [
        (name, b) for name, api in flashinfer_apis().items() for b in api.dispatcher.backend_checks
    ]


@pytest.mark.parametrize(("op", "backend"), _pairs())
def test_a_backend_rename_renames_it_in_the_heuristic_and_in_the_packages_calls(
    op, backend, source
):
    """The heuristic (and the ranks it reads) names only the new name, and no call of the op
    in the package still passes ``backend=<old>`` (it would warn users about code they never
    wrote)."""
    new = f"{backend}_renamed"
    plan = _plan(source, "rename", f"{op}:{backend}", new)
    dispatcher = flashinfer_apis()[op].dispatcher
    heuristic = dispatcher.heuristic_func
    if heuristic is not None:
        path = heuristic.__module__.replace(".", "/") + ".py"
        after = _constants(ast.parse(_text(source, plan, path)), heuristic.__name__)
        before = _constants(
            ast.parse((source / path).read_text(encoding="utf-8")), heuristic.__name__
        )
        assert backend not in after and (new in after) == (backend in before)
    for path in sorted(
        p.relative_to(source).as_posix() for p in (source / "flashinfer").rglob("*.py")
    ):
        for call in ast.walk(ast.parse(_text(source, plan, path))):
            if isinstance(call, ast.Call) and ast.unparse(call.func).rpartition(".")[2] == op:
                named = [k.value for k in call.keywords if k.arg == "backend"]
                assert not any(isinstance(v, ast.Constant) and v.value == backend for v in named), (
                    path
                )


def _constants(tree: ast.Module, function: str) -> set[object]:
    """The constants the top-level ``function`` and the top-level names it reads hold."""
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function)
    read = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    nodes = [node] + [
        n
        for n in tree.body
        if isinstance(n, ast.Assign) and any(getattr(t, "id", None) in read for t in n.targets)
    ]
    return {c.value for n in nodes for c in ast.walk(n) if isinstance(c, ast.Constant)}


# -- item 6: the declaration edited is the op's ------------------------------------------------


def test_a_rename_edits_the_ops_declaration_not_an_earlier_one_of_the_same_name(checkout):
    support = checkout / SUPPORT
    text = support.read_text(encoding="utf-8")
    decoy = '\n\nDECOY = Backend("splitk", check=lambda a, b: True, run=None)\n'
    at = text.index("\nclass ")
    support.write_text(text[:at] + decoy + text[at:], encoding="utf-8")
    plan = _plan(checkout, "rename", "mm:splitk", "split_k")
    calls = [
        n
        for n in ast.walk(ast.parse(_text(checkout, plan, SUPPORT)))
        if isinstance(n, ast.Call) and ast.unparse(n.func) == "Backend"
    ]
    assert [(c.args[0].value, ast.unparse(c.keywords[0].value)) for c in calls] == [
        ("splitk", "lambda a, b: True"),
        ("split_k", "check_splitk"),
    ]


def test_an_edit_whose_check_fails_is_undone_and_not_reported_applied(
    checkout, capsys, monkeypatch
):
    """After writing, the checkout is imported and checked in a fresh interpreter; a failure
    puts every file back (edited, created, deleted) and exits 1."""
    from flashinfer.cli import lifecycle

    real = lifecycle.plan_for

    def broken(*args, **kwargs):
        plan = real(*args, **kwargs)
        plan.changes["flashinfer/gemm.py"] = "raise SystemExit('the edit broke the import')\n"
        plan.changes["flashinfer/new_module.py"] = "x = 1\n"
        return plan

    monkeypatch.setattr(lifecycle, "plan_for", broken)
    before = _files(checkout)
    argv = ["lifecycle", "rename", "mm:splitk", "--to", "split_k", "--apply", "--version", "0.2"]
    assert main([*argv, "--root", str(checkout)]) == 1
    out, err = capsys.readouterr()
    assert "applied." not in out.splitlines() and "not applied" in err
    assert "the edit broke the import" in err
    assert _files(checkout) == before


# -- items 9 and 10: imports by dotted module, in every layout ---------------------------------


def test_graduating_leaves_a_sibling_feature_whose_name_starts_with_it(checkout):
    sibling = checkout / "flashinfer/experimental/splitk_gemm_v2"
    sibling.mkdir()
    (sibling / "__init__.py").write_text('"""A sibling."""\n\nX = 1\n', encoding="utf-8")
    gemm = checkout / "flashinfer/gemm.py"
    gemm.write_text(
        gemm.read_text(encoding="utf-8")
        + "\nfrom flashinfer.experimental.splitk_gemm_v2 import X  # noqa\n",
        encoding="utf-8",
    )
    plan = _plan(checkout, "graduate", "mm:splitk")
    assert not any("splitk_gemm_v2" in path for path in plan.changes)
    text = _text(checkout, plan, "flashinfer/gemm.py")
    modules = {n.module for n in ast.walk(ast.parse(text)) if isinstance(n, ast.ImportFrom)}
    assert "flashinfer.experimental.splitk_gemm_v2" in modules
    assert "flashinfer.features.splitk_gemm.support" in modules
    assert "flashinfer.experimental.splitk_gemm.support" not in modules


def test_removal_handles_a_parenthesised_import_and_lists_one_inside_a_function(checkout):
    gemm = checkout / "flashinfer/gemm.py"
    text = gemm.read_text(encoding="utf-8")
    one = "from flashinfer.experimental.splitk_gemm.support import SplitKRunner as SplitKRunner\n"
    assert one in text
    module = "flashinfer.experimental.splitk_gemm"
    text = text.replace(
        one, f"from {module}.support import (\n    SplitKRunner as SplitKRunner,\n)\n"
    )
    inner = f"    from {module}.kernel import splitk_matmul"
    text += f"\n\ndef _late():\n{inner}\n\n    return splitk_matmul\n"
    gemm.write_text(text, encoding="utf-8")
    plan = _plan(checkout, "remove", "mm:splitk")
    edited = _text(checkout, plan, "flashinfer/gemm.py")
    tree = ast.parse(edited)  # no IndentationError
    top = [n.module for n in tree.body if isinstance(n, ast.ImportFrom)]
    assert not any(m and m.startswith("flashinfer.experimental.splitk_gemm") for m in top)
    line = edited.splitlines().index(inner) + 1
    assert any(step.startswith(f"flashinfer/gemm.py:{line}: ") for step in plan.left_to_author)


def _features() -> list[tuple[str, object]]:
    from flashinfer.gating.lifecycle import experimental_features

    found = []
    for f in experimental_features():
        target = f.api.rpartition(".")[2] + (f":{f.backend}" if f.kind == "backend" else "")
        found.append((target, f.info))
    return found


@pytest.mark.parametrize(("target", "info"), _features(), ids=lambda v: str(v)[:40])
def test_a_graduation_entry_names_the_features_tracking_issue(target: str, info: object) -> None:
    plan = plan_for(ROOT, "graduate", target, "0.2.0")
    changelog = plan.changes["CHANGELOG.md"]
    assert changelog is not None
    entry = next(line for line in changelog.splitlines() if line.startswith("- Graduated ("))
    issue = str(info.tracking_issue)  # type: ignore[attr-defined]
    assert entry.startswith(
        f"- Graduated (issue {issue})" if issue.isdigit() else f"- Graduated ({issue})"
    )
    if ":" in target:  # the prefer= note only where the declaration had one
        op_name, _, backend = target.partition(":")
        checker = getattr(flashinfer, op_name).backend_checks[backend]
        had = "prefer=" in Path(sys.modules[checker.__module__].__file__ or "").read_text()
        note = next(step for step in plan.left_to_author if step.startswith("rank "))
        assert ("prefer= was dropped" in note) is had, note
