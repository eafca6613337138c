"""scripts/pr_checks/containment.py: passing and failing fake trees, and the real repository."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from . import REPO, load_script, run_script

containment = load_script("containment", "pr_check_containment")


def _write(root: Path, rel: str, text: str = "") -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")


def _tree(root: Path, core: dict[str, str] | None = None) -> Path:
    """A minimal repository: package, one feature (support + kernel), a clean core module."""
    _write(root, "flashinfer/__init__.py", '"""Package."""\nfrom .api_logging import x\n')
    _write(root, "flashinfer/api_logging.py", "x = 1\n")
    _write(root, "flashinfer/experimental/__init__.py", "from ..api_logging import x\n")
    _write(root, "flashinfer/experimental/splitk/__init__.py")
    _write(root, "flashinfer/experimental/splitk/support.py", "def check(a):\n    return True\n")
    # Code inside flashinfer/experimental/ may import whatever it likes.
    _write(
        root,
        "flashinfer/experimental/splitk/kernel.py",
        "import flashinfer.experimental.splitk.support\nfrom . import support\n",
    )
    for rel, text in (core or {}).items():
        _write(root, rel, text)
    return root


GOOD_GEMM = """
    from typing import TYPE_CHECKING

    import flashinfer.experimental.splitk.support
    from flashinfer.experimental.splitk.support import check
    from flashinfer.experimental.splitk import support
    from .experimental.splitk.support import check as check2
    from .experimental.splitk import support as support2

    if TYPE_CHECKING:
        from .experimental.splitk import kernel as _kernel_type


    def run(a):
        from .experimental.splitk import kernel
        import flashinfer.experimental.splitk.kernel
        import importlib
        importlib.import_module("flashinfer.experimental.splitk.kernel")
        return kernel


    class Op:
        def method(self):
            from flashinfer.experimental import splitk
            return splitk
"""


def test_passing_fixture(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _tree(tmp_path, {"flashinfer/gemm.py": GOOD_GEMM})
    assert containment.main(["--root", str(root)]) == 0
    assert "containment: OK" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("rel", "source", "line", "fragment"),
    [
        # module-level kernel import, absolute and relative
        ("flashinfer/gemm.py", "from flashinfer.experimental.splitk import kernel\n", 1,
         "imports flashinfer.experimental.splitk.kernel at module level"),
        ("flashinfer/gemm.py", "import flashinfer.experimental.splitk.kernel\n", 1,
         "imports flashinfer.experimental.splitk.kernel at module level"),
        ("flashinfer/gemm.py", "x = 1\nfrom .experimental.splitk.kernel import run\n", 2,
         "imports flashinfer.experimental.splitk.kernel.run at module level"),
        # a feature package or the experimental package itself is not a support module
        ("flashinfer/gemm.py", "from .experimental import splitk\n", 1,
         "imports flashinfer.experimental.splitk at module level"),
        ("flashinfer/gemm.py", "from . import experimental\n", 1,
         "imports flashinfer.experimental at module level"),
        ("flashinfer/gemm.py", "from flashinfer.experimental import experimental_backend\n", 1,
         "imports flashinfer.experimental.experimental_backend at module level"),
        ("flashinfer/gemm.py", "from flashinfer.experimental.splitk.support import *\n"
         "from flashinfer.experimental.splitk import *\n", 2,
         "imports flashinfer.experimental.splitk at module level"),
        # deeper core packages, two-dot relative imports
        ("flashinfer/kernels/gemm.py", "from ..experimental.splitk.kernel import run\n", 1,
         "core module flashinfer.kernels.gemm imports flashinfer.experimental.splitk.kernel"),
        # a class body runs at import time
        ("flashinfer/gemm.py", "class Op:\n    from .experimental.splitk import kernel\n", 2,
         "at module level"),
        # dynamic import with a literal name at module level
        ("flashinfer/gemm.py", "import importlib\n"
         "k = importlib.import_module('flashinfer.experimental.splitk.kernel')\n", 2,
         "imports flashinfer.experimental.splitk.kernel at module level"),
        ("flashinfer/gemm.py", "k = __import__('flashinfer.experimental.splitk.kernel')\n", 1,
         "at module level"),
        # under `if not TYPE_CHECKING` / else branches the import does run
        ("flashinfer/gemm.py", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    pass\n"
         "else:\n    from .experimental.splitk import kernel\n", 5, "at module level"),
        # flashinfer/__init__.py: never, not even inside a function
        ("flashinfer/__init__.py", "from . import experimental\n", 1,
         "flashinfer/__init__.py imports flashinfer.experimental"),
        ("flashinfer/__init__.py", "def f():\n    import flashinfer.experimental.splitk.support\n",
         2, "flashinfer/__init__.py imports flashinfer.experimental.splitk.support"),
        ("flashinfer/__init__.py", "from .experimental.splitk.support import check\n", 1,
         "must never import flashinfer.experimental"),
    ],
)  # fmt: skip
def test_failing_fixtures(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    rel: str,
    source: str,
    line: int,
    fragment: str,
) -> None:
    root = _tree(tmp_path, {"flashinfer/gemm.py": GOOD_GEMM, rel: source})
    assert containment.main(["--root", str(root)]) == 1
    out = capsys.readouterr().out
    assert f"{rel}:{line}: " in out, out
    assert fragment in out, out


def test_a_features_other_modules_may_import_what_they_like(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    _write(root, "flashinfer/experimental/splitk/more.py", "import triton\nfrom .kernel import *\n")
    assert containment.check_tree(root) == []


GOOD_SUPPORT = """
    \"\"\"The checker.\"\"\"
    from typing import TYPE_CHECKING

    import torch

    from flashinfer.backend_dispatch import experimental_backend
    from ...kernels import helpers
    from ..other.support import shared
    from . import support as itself

    if TYPE_CHECKING:
        import triton
        from .kernel import run as _run_type


    def run(a):
        import triton
        from .kernel import run
        from . import kernel
        return run(a)
"""


def test_a_light_support_module_passes(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"flashinfer/experimental/splitk/support.py": GOOD_SUPPORT})
    _write(root, "flashinfer/experimental/splitk/__init__.py", '"""Docstring only."""\n')
    assert containment.check_tree(root) == []


@pytest.mark.parametrize(
    ("rel", "source", "line", "fragment"),
    [
        # support.py: no Triton, no kernel, no other experimental module at module level
        ("flashinfer/experimental/splitk/support.py", "import triton\n", 1,
         "support module flashinfer.experimental.splitk.support imports Triton at module level"),
        ("flashinfer/experimental/splitk/support.py", "import triton.language as tl\n", 1,
         "imports Triton at module level"),
        ("flashinfer/experimental/splitk/support.py", "from triton import jit\n", 1,
         "imports Triton at module level"),
        ("flashinfer/experimental/splitk/support.py", "x = 1\nfrom .kernel import run\n", 2,
         "imports flashinfer.experimental.splitk.kernel.run at module level"),
        ("flashinfer/experimental/splitk/support.py", "from . import kernel\n", 1,
         "imports flashinfer.experimental.splitk.kernel at module level"),
        ("flashinfer/experimental/splitk/support.py",
         "import flashinfer.experimental.splitk.kernel\n", 1, "Import kernels and Triton inside"),
        ("flashinfer/experimental/splitk/support.py", "from ..other import kernel\n", 1,
         "imports flashinfer.experimental.other.kernel"),
        ("flashinfer/experimental/splitk/support.py",
         "import importlib\nk = importlib.import_module('triton')\n", 2, "imports Triton"),
        ("flashinfer/experimental/splitk/support.py", "class C:\n    import triton\n", 2,
         "imports Triton"),
        # a feature's __init__.py: empty or a docstring
        ("flashinfer/experimental/splitk/__init__.py", '"""Doc."""\n\nfrom .support import check\n',
         3, "a feature's __init__.py is empty or a docstring"),
        ("flashinfer/experimental/splitk/__init__.py", "X = 1\n", 1,
         "that importing flashinfer.experimental.splitk imports nothing"),
        ("flashinfer/experimental/splitk/__init__.py", '"""Doc."""\nprint("hi")\n', 2,
         "holds code"),
        # the experimental package re-exports the markers, never a feature
        ("flashinfer/experimental/__init__.py", "from .splitk import support\n", 1,
         "flashinfer.experimental imports flashinfer.experimental.splitk.support at module"),
        ("flashinfer/experimental/__init__.py", "from . import splitk\n", 1,
         "so that importing it loads no feature"),
    ],
)  # fmt: skip
def test_failing_experimental_fixtures(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    rel: str,
    source: str,
    line: int,
    fragment: str,
) -> None:
    root = _tree(tmp_path, {rel: source})
    assert containment.main(["--root", str(root)]) == 1
    out = capsys.readouterr().out
    assert f"{rel}:{line}: " in out, out
    assert fragment in out, out


def test_the_shipped_features_have_docstring_only_inits() -> None:
    inits = sorted((REPO / "flashinfer" / "experimental").glob("*/__init__.py"))
    assert inits, "no feature folders found"
    for init in inits:
        violations = containment.check_experimental_file(init, REPO / "flashinfer", REPO)
        assert violations == [], violations


def test_every_violation_is_reported(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "flashinfer/a.py": "from .experimental.splitk import kernel\n",
            "flashinfer/b.py": "from .experimental.splitk import support, kernel\n",
        },
    )
    found = [str(v) for v in containment.check_tree(root)]
    assert len(found) == 2
    assert found[0].startswith("flashinfer/a.py:1:")
    assert found[1].startswith("flashinfer/b.py:1:") and "splitk.kernel" in found[1]


def test_not_a_repository(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert containment.main(["--root", str(tmp_path)]) == 1
    assert "not a repository root" in capsys.readouterr().out


def test_real_repository_passes() -> None:
    result = run_script("containment", cwd=REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "containment: OK" in result.stdout
