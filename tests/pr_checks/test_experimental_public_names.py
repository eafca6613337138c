"""scripts/pr_checks/experimental_public_names.py: failing and passing fake trees, and the
real repository."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from . import REPO, load_script, run_script

check = load_script("experimental_public_names", "pr_check_experimental_public_names")

FEATURE = "flashinfer/experimental/feat/__init__.py"


def _write(root: Path, rel: str, text: str = "") -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")


def _tree(root: Path, files: dict[str, str] | None = None) -> Path:
    """A package with stable modules of every kind and one experimental feature."""
    _write(
        root,
        "flashinfer/__init__.py",
        """
        __version__ = "0"
        _LAZY: dict[str, str] = {"rmsnorm": "flashinfer.norm", "mm": "flashinfer.gemm"}
        __all__ = ["api_inventory", *_LAZY]
        """,
    )
    _write(
        root,
        "flashinfer/norm.py",
        """
        __all__ = ["rmsnorm"]
        SUPPORTED = (1, 2)
        def _rmsnorm_torch(x): return x
        def rmsnorm(x): return x
        """,
    )
    _write(root, "flashinfer/fused.py", '__all__: list[str] = ["a"]\n__all__ += ["b"]\n')
    _write(root, "flashinfer/kernels/__init__.py", "def helper(): ...\ndef _private(): ...\n")
    _write(root, "flashinfer/kernels/mm.py", "def dot(): ...\n")
    _write(root, "flashinfer/kernels/_impl.py", "def dot(): ...\n")
    _write(root, "flashinfer/_dispatch/__init__.py")
    _write(root, "flashinfer/_dispatch/op.py", "class Op: ...\n")
    _write(root, "flashinfer/odd.py", "__all__ = [name for name in ('a', 'b')]\n")
    _write(root, "flashinfer/experimental/__init__.py", "from ..norm import rmsnorm\n")
    _write(root, "flashinfer/experimental/feat/support.py", "def _check(): ...\n")
    _write(root, FEATURE)
    for rel, text in (files or {}).items():
        _write(root, rel, text)
    return root


CLEAN = """
    import importlib
    from typing import TYPE_CHECKING

    import torch

    import flashinfer
    import flashinfer.norm as norm_module
    from flashinfer import mm, rmsnorm
    from flashinfer.kernels import helper, mm as mm_kernels
    from flashinfer.norm import *
    from flashinfer.fused import a, b
    from flashinfer.experimental.feat.support import _check
    from ... import norm, kernels
    from ...kernels.mm import dot
    from .support import _check as check2

    if TYPE_CHECKING:
        from flashinfer.norm import rmsnorm as rmsnorm_type


    def run(x):
        from ...norm import rmsnorm
        importlib.import_module("flashinfer.kernels.mm")
        torch._C, x._private, mm_kernels.dot  # not stable modules' names
        return (
            norm.rmsnorm(x), norm_module.rmsnorm(x), flashinfer.norm.rmsnorm(x),
            flashinfer.__version__, kernels.mm.dot, flashinfer.rmsnorm(x),
        )
"""


def test_clean_tree_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _tree(tmp_path, {FEATURE: CLEAN})
    assert check.main(["--root", str(root)]) == 0
    assert "experimental_public_names: OK" in capsys.readouterr().out


# (source of the feature module, line, fragments of the message)
PRIVATE_NAME = "uses the private name _rmsnorm_torch of flashinfer.norm"
ADVICE = "give the stable module a public name for what you need"


@pytest.mark.parametrize(
    ("source", "line", "fragments"),
    [
        # a private name: relative and absolute, in a function, under TYPE_CHECKING
        ("x = 1\nfrom ...norm import _rmsnorm_torch\n", 2, [PRIVATE_NAME, ADVICE]),
        ("from flashinfer.norm import _rmsnorm_torch as r\n", 1, [PRIVATE_NAME]),
        ("def f():\n    from flashinfer.norm import _rmsnorm_torch\n", 2, [PRIVATE_NAME]),
        ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
         "    from ...norm import _rmsnorm_torch\n", 3, [PRIVATE_NAME]),
        ("from flashinfer.kernels import _private\n", 1,
         ["uses the private name _private of flashinfer.kernels"]),
        # a name the module does not export
        ("from ...norm import SUPPORTED\n", 1,
         ["uses SUPPORTED of flashinfer.norm, which is not in flashinfer.norm.__all__ "
          "['rmsnorm']", ADVICE]),
        ("from flashinfer import load_all_apis\n", 1,
         ["uses load_all_apis of flashinfer, which is not in flashinfer.__all__"]),
        ("from flashinfer.fused import c\n", 1, ["not in flashinfer.fused.__all__ ['a', 'b']"]),
        # a private module component: absolute, relative, as a name, dynamic
        ("from flashinfer._dispatch.op import Op\n", 1,
         ["imports the private module flashinfer._dispatch (in flashinfer._dispatch.op)"]),
        ("from ..._dispatch import op\n", 1, ["imports the private module flashinfer._dispatch"]),
        ("import flashinfer._dispatch.op\n", 1, ["private module flashinfer._dispatch"]),
        ("from ... import _dispatch\n", 1, ["private module flashinfer._dispatch"]),
        ("from ...kernels import _impl\n", 1, ["private module flashinfer.kernels._impl"]),
        ("import importlib\nimportlib.import_module('flashinfer._dispatch.op')\n", 2,
         ["private module flashinfer._dispatch"]),
        # a module of the machinery, named without an underscore: reached through its facade
        ("from flashinfer.dispatch.overlap import OverlapRule\n", 1,
         ["imports flashinfer.dispatch.overlap, the package's machinery; import from "
          "flashinfer.backend_dispatch"]),
        ("from ...gating import gate\n", 1, ["imports flashinfer.gating, the package's"]),
        ("import flashinfer.gating.gate\n", 1, ["imports flashinfer.gating.gate, the package's"]),
        # attributes read through an imported stable module
        ("from ... import norm\n\ndef f(x):\n    return norm._rmsnorm_torch(x)\n", 4,
         [PRIVATE_NAME]),
        ("import flashinfer.norm as n\nn.SUPPORTED\n", 2, ["not in flashinfer.norm.__all__"]),
        ("import flashinfer\nflashinfer.norm._rmsnorm_torch\n", 2, [PRIVATE_NAME]),
        ("import flashinfer.kernels\nflashinfer.kernels._impl.dot\n", 2,
         ["private module flashinfer.kernels._impl"]),
        # a module that does not exist, an __all__ that cannot be read
        ("from flashinfer.gone import thing\n", 1,
         ["imports flashinfer.gone, which is not a module of the package"]),
        ("from ...odd import a\n", 1,
         ["whose __all__ cannot be read statically; write flashinfer.odd.__all__ as a literal"]),
    ],
)  # fmt: skip
def test_each_kind_of_violation_fails_with_its_message(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    source: str,
    line: int,
    fragments: list[str],
) -> None:
    root = _tree(tmp_path, {FEATURE: source})
    assert check.main(["--root", str(root)]) == 1
    captured = capsys.readouterr()
    assert f"{FEATURE}:{line}: " in captured.out, captured.out
    for fragment in fragments:
        assert fragment in captured.out, captured.out
    assert "experimental_public_names: 1 violation(s)" in captured.err


def test_every_violation_is_reported_in_file_and_line_order(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            FEATURE: "from ...norm import SUPPORTED, _rmsnorm_torch\n",
            "flashinfer/experimental/feat/kernel.py": "from ..._dispatch import op\n",
        },
    )
    found = [str(v) for v in check.check_tree(root)]
    assert len(found) == 3, found
    assert found[0].startswith(f"{FEATURE}:1:") and "SUPPORTED" in found[0]
    assert found[1].startswith(f"{FEATURE}:1:") and "_rmsnorm_torch" in found[1]
    assert found[2].startswith("flashinfer/experimental/feat/kernel.py:1:")


def test_stable_modules_are_not_scanned(tmp_path: Path) -> None:
    """Only experimental code is held to the rule; core may use its own privates."""
    root = _tree(tmp_path, {"flashinfer/gemm.py": "from ._dispatch.op import Op\n"})
    assert check.check_tree(root) == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("__all__ = ['a', 'b']", ["a", "b"]),
        ("__all__ = ('a',)\n__all__ += ['b']", ["a", "b"]),
        ("__all__: list[str] = ['a']", ["a"]),
        ("_T = {'x': 1}\n__all__ = ['a', *_T]", ["a", "x"]),
        ("x = 1", None),
    ],
)
def test_read_all(source: str, expected: list[str] | None) -> None:
    assert check.read_all(ast.parse(source)) == expected


def test_not_a_repository(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert check.main(["--root", str(tmp_path)]) == 1
    assert "not a repository root" in capsys.readouterr().out


def test_real_repository_passes() -> None:
    result = run_script("experimental_public_names", cwd=REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "experimental_public_names: OK" in result.stdout
