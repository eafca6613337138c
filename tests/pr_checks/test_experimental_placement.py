"""scripts/pr_checks/experimental_placement.py: passing and failing fake trees, backends built
from fixture files, support modules imported in fresh interpreters, and a copy of the package
with the issue's mistake (run as CI runs the script).  The real repository is
``scripts/check.sh --step checks``'s to check."""

from __future__ import annotations

import importlib.util
import shutil
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

from flashinfer import Backend, backend_requirement

from . import REPO, load_script, run_script

placement = load_script("experimental_placement", "pr_check_experimental_placement")


def _write(root: Path, rel: str, text: str = "") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


# --------------------------------------------------------------------------------------------
# The source half: fake trees

GOOD_SUPPORT = """
    from flashinfer.backend_dispatch import Backend, experimental_backend
    from flashinfer.backend_families import TRITON, backend_family


    @experimental_backend(owner="@alice", tracking_issue=1, graduate_by="2027-01-31")
    @backend_family(TRITON)
    def check(a, backend="auto"):
        return True


    @experimental_backend
    def check_bare(a, backend="auto"):
        return True


    def run(a):
        from .kernel import launch  # a feature's own code imports its kernel on first use
        return launch(a)


    FEATURE = Backend("feature", check=check, run=run)
"""

GOOD_CORE = """
    from flashinfer.api_logging import flashinfer_experimental_api
    from .experimental.feature.support import FEATURE


    @flashinfer_experimental_api(owner="@bob", tracking_issue=2, graduate_by="2027-01-31")
    def preview(x):
        from .experimental.feature import kernel  # an experimental API's entry point may
        return kernel.launch(x)


    @flashinfer_experimental_api
    class Preview:
        def run(self, x):
            from .experimental.feature.kernel import launch
            return launch(x)


    def _check_torch(a, backend="auto"):
        from .experimental.feature.support import check  # support modules are light
        return check(a)
"""


def _tree(root: Path, files: dict[str, str] | None = None) -> Path:
    _write(root, "flashinfer/__init__.py", '"""Package."""\n')
    _write(root, "flashinfer/experimental/__init__.py")
    _write(root, "flashinfer/experimental/feature/__init__.py")
    _write(root, "flashinfer/experimental/feature/support.py", GOOD_SUPPORT)
    _write(root, "flashinfer/experimental/feature/kernel.py", "import triton\n")
    _write(root, "flashinfer/norm.py", GOOD_CORE)
    for rel, text in (files or {}).items():
        _write(root, rel, text)
    return root


def test_passing_tree(tmp_path: Path) -> None:
    assert placement.check_source(_tree(tmp_path)) == []


MARKED_IN_NORM = """
    from flashinfer.backend_dispatch import experimental_backend


    @experimental_backend(owner="@alice", tracking_issue=1, graduate_by="2027-01-31")
    def _check_rowwise(input, weight, backend="auto"):
        return True
"""

UNMARKED_IN_NORM = """
    import importlib


    def _check_rowwise(input, weight, backend="auto"):
        return True


    def _rmsnorm_rowwise(input, weight):
        from .experimental.rowwise.kernel import rmsnorm_rows
        return rmsnorm_rows(input, weight)


    def _rmsnorm_rowwise_dynamic(input, weight):
        kernel = importlib.import_module("flashinfer.experimental.rowwise.kernel")
        return kernel.rmsnorm_rows(input, weight)


    class Runner:
        def __call__(self, input):
            import flashinfer.experimental.rowwise
            return input
"""


@pytest.mark.parametrize(
    ("rel", "source", "lines", "fragment"),
    [
        # the marker anywhere but a feature's support.py
        ("flashinfer/norm.py", MARKED_IN_NORM, [5],
         "@experimental_backend is applied outside a feature's support.py"),
        ("flashinfer/norm.py", "import flashinfer.backend_dispatch as bd\n"
         "def _ok(x, backend):\n    return True\nchecker = bd.experimental_backend(_ok)\n", [4],
         "live in flashinfer/experimental/<feature>/support.py"),
        ("flashinfer/norm.py", "from flashinfer import experimental_backend\n\n"
         "@experimental_backend\ndef _ok(x, backend):\n    return True\n", [3],
         "move the checker there"),
        ("flashinfer/experimental/feature/kernel.py", MARKED_IN_NORM, [5],
         "applied outside a feature's support.py"),
        ("flashinfer/experimental/support.py", MARKED_IN_NORM, [5],
         "applied outside a feature's support.py"),
        ("flashinfer/experimental/feature/sub/support.py", MARKED_IN_NORM, [5],
         "applied outside a feature's support.py"),
        # one decorator order
        ("flashinfer/experimental/feature/support.py",
         "from flashinfer.backend_families import TRITON, backend_family\n"
         "from flashinfer import experimental_backend\n\n"
         "@backend_family(TRITON)\n@experimental_backend(owner='@a')\ndef check(a, backend):\n"
         "    return True\n", [4],
         "checker check: @backend_family is above @experimental_backend; write "
         "@experimental_backend(...) first"),
        ("flashinfer/experimental/feature/support.py",
         "import flashinfer\n\n@flashinfer.supported_compute_capability([90])\n"
         "@flashinfer.experimental_backend\ndef check(a, backend):\n    return True\n", [3],
         "@supported_compute_capability is above @experimental_backend"),
        # a core function importing experimental code: the issue's unmarked rowwise backend
        ("flashinfer/norm.py", UNMARKED_IN_NORM, [10, 15, 21],
         "only an experimental API's entry point (@flashinfer_experimental_api) imports "
         "experimental code"),
    ],
)  # fmt: skip
def test_failing_trees(
    tmp_path: Path, rel: str, source: str, lines: list[int], fragment: str
) -> None:
    found = placement.check_source(_tree(tmp_path, {rel: source}))
    assert [(v.path, v.line) for v in found] == [(rel, line) for line in lines], found
    assert all(fragment in v.message for v in found), found


def test_a_core_import_names_the_function_and_the_fix(tmp_path: Path) -> None:
    found = placement.check_source(_tree(tmp_path, {"flashinfer/norm.py": UNMARKED_IN_NORM}))
    messages = [v.message for v in found]
    assert "core function flashinfer.norm._rmsnorm_rowwise imports " in messages[0]
    assert "flashinfer.experimental.rowwise.kernel.rmsnorm_rows" in messages[0]
    assert "core function flashinfer.norm._rmsnorm_rowwise_dynamic imports" in messages[1]
    assert (
        "core function flashinfer.norm.__call__ imports flashinfer.experimental.rowwise"
        in (messages[2])
    )
    assert "Backend(name, check=<checker marked @experimental_backend>" in messages[0]


def test_not_a_repository(tmp_path: Path) -> None:
    assert "not a repository root" in placement.check_source(tmp_path)[0].message


# --------------------------------------------------------------------------------------------
# The imported half: backends of ops built from fixture files in a fake tree

FEATURE_SUPPORT = """
    from flashinfer import experimental_backend


    @experimental_backend(owner="@alice", tracking_issue=1, graduate_by="2027-01-31")
    def check_feature(x, backend="auto"):
        return True


    def check_forgot_the_mark(x, backend="auto"):
        return True


    def run_feature(x):
        return x
"""

CORE = """
    from flashinfer import experimental_backend


    def check_torch(x, backend="auto"):
        return True


    def run_torch(x):
        return x


    check_marked_here = experimental_backend(lambda x, backend="auto": True)
"""


def _load(path: Path, name: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)  # as imported (inspect finds classes so)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def fixtures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, ModuleType, ModuleType]:
    """A fake tree whose modules are loaded under names outside flashinfer (so the
    dispatcher's own decoration-time check, which reads module names, does not see them:
    the placement check reads files)."""
    support = _write(tmp_path, "flashinfer/experimental/feature/support.py", FEATURE_SUPPORT)
    core = _write(tmp_path, "flashinfer/norm.py", CORE)
    tag = tmp_path.name
    return (
        tmp_path,
        _load(support, f"fi_place_support_{tag}", monkeypatch),
        _load(core, f"fi_place_core_{tag}", monkeypatch),
    )


def _op(*backends: Backend) -> object:
    def api(x, backend="auto"):
        return x

    return backend_requirement(list(backends))(api)


def test_declared_backends_in_their_places_pass(fixtures) -> None:
    root, support, core = fixtures
    op = _op(
        Backend("torch", check=core.check_torch, run=core.run_torch),
        Backend("feature", check=support.check_feature, run=support.run_feature),
    )
    assert placement.backend_violations([op], root) == []


def test_a_marked_checker_outside_a_support_module_fails(fixtures) -> None:
    """The half the dispatcher does not check.  An unmarked backend that is experimental
    code (defined under, or importing from, flashinfer/experimental/) is refused when its
    API is decorated: tests/test_backend_requirement.py and test_backend_declarations.py
    test that rule, and the last test here that the check reports the refusal."""
    root, support, core = fixtures
    op = _op(
        Backend("torch", check=core.check_torch, run=core.run_torch),
        Backend("here", check=core.check_marked_here, run=core.run_torch),
        Backend("forgot", check=support.check_forgot_the_mark, run=support.run_feature),
    )
    op.__module__, op.__qualname__ = "fi_place_op", "api"  # the name messages use
    (found,) = placement.backend_violations([op], root)
    assert found.path == "flashinfer/norm.py" and found.line > 0
    assert "the checker of fi_place_op.api's backend 'here'" in found.message
    assert "is marked @experimental_backend but defined in flashinfer/norm.py" in found.message


def test_upstreams_dict_form_is_checked_by_its_checkers(fixtures) -> None:
    root, support, core = fixtures

    def api(x, backend="auto"):
        return x

    op = backend_requirement({"torch": core.check_torch, "here": core.check_marked_here})(api)
    (found,) = placement.backend_violations([op], root)
    assert "is marked @experimental_backend but defined in flashinfer/norm.py" in found.message


def test_code_outside_the_tree_is_not_judged(fixtures, tmp_path_factory) -> None:
    root, support, core = fixtures
    op = _op(Backend("here", check=core.check_marked_here, run=core.run_torch))
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    assert placement.backend_violations([op], elsewhere) == []


# --------------------------------------------------------------------------------------------
# Support modules in fresh interpreters, and the issue's mistake on a copy of the package


def _copy_package(root: Path) -> Path:
    shutil.copytree(
        REPO / "flashinfer", root / "flashinfer", ignore=shutil.ignore_patterns("__pycache__")
    )
    return root


HEAVY_SUPPORT = """
    from . import helpers  # light itself, but it imports the kernel


    def check(x, backend="auto"):
        return True
"""


@pytest.fixture(scope="module")
def support_found(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The support-module probe over a copy of the package with two bad features added: one
    whose support module loads Triton and its kernel, one whose support cannot be imported
    (one probe for both; each support module is still imported in an interpreter of its own)."""
    root = _copy_package(tmp_path_factory.mktemp("support"))
    feature = "flashinfer/experimental/heavy"
    _write(root, f"{feature}/__init__.py")
    _write(root, f"{feature}/support.py", HEAVY_SUPPORT)
    _write(root, f"{feature}/helpers.py", "from .kernel import launch\n")
    _write(root, f"{feature}/kernel.py", "import triton\n\ndef launch():\n    pass\n")
    _write(root, "flashinfer/experimental/broken/__init__.py")
    _write(root, "flashinfer/experimental/broken/support.py", "import not_a_module_anywhere\n")
    found = placement.support_import_violations(root)
    messages = {v.path: v.message for v in found}
    assert len(messages) == len(found) == 2, found  # the shipped support modules pass
    return messages


def test_a_support_module_that_loads_triton_or_its_kernel_fails(support_found) -> None:
    message = support_found["flashinfer/experimental/heavy/support.py"]
    assert "importing flashinfer.experimental.heavy.support alone loads triton, " in message
    assert "flashinfer.experimental.heavy.helpers, flashinfer.experimental.heavy.kernel" in message


def test_a_support_module_that_cannot_be_imported_alone_fails(support_found) -> None:
    message = support_found["flashinfer/experimental/broken/support.py"]
    assert "importing flashinfer.experimental.broken.support alone fails" in message
    assert "not_a_module_anywhere" in message


ROWWISE_LINES = """

def _check_rowwise(input, weight, eps=1e-6, *, out=None, backend="auto"):
    return True


def _rmsnorm_rowwise(input, weight, eps, out):
    from .experimental.rowwise.kernel import rmsnorm_rows

    return rmsnorm_rows(input, weight, eps, out)
"""


def test_the_issues_unmarked_backend_in_norm_fails_on_a_copy(tmp_path: Path) -> None:
    """The mistake the issue found unnoticed: an unmarked checker in norm.py whose kernel
    lives under flashinfer/experimental/ (a stable backend 'auto' would use, gate off)."""
    root = _copy_package(tmp_path)
    norm = root / "flashinfer" / "norm.py"
    text = norm.read_text(encoding="utf-8")
    table_line = next(line for line in text.splitlines(keepends=True) if 'Backend("triton"' in line)
    assert table_line in text
    text = text.replace(
        table_line,
        table_line + '        Backend("rowwise", check=_check_rowwise, run=_rmsnorm_rowwise),\n',
    )
    anchor = "\n\n@flashinfer_api\n"
    assert anchor in text
    norm.write_text(text.replace(anchor, ROWWISE_LINES + anchor, 1), encoding="utf-8")
    _write(root, "flashinfer/experimental/rowwise/__init__.py")
    _write(root, "flashinfer/experimental/rowwise/kernel.py", "def rmsnorm_rows(*a):\n    pass\n")
    (root / "scripts" / "pr_checks").mkdir(parents=True)
    result = run_script("experimental_placement", "--root", str(root), cwd=root, timeout=300)
    assert result.returncode == 1, result.stdout + result.stderr
    # Named at its line by the source half ...
    assert "flashinfer/norm.py:" in result.stdout
    assert "core function flashinfer.norm._rmsnorm_rowwise imports " in result.stdout
    # ... and the dispatcher refuses the table at import, which the check reports.
    assert "cannot import flashinfer.norm: ValueError" in result.stdout
    assert "not marked @experimental_backend" in result.stdout
