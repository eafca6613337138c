"""Every private torch or Dynamo name the package uses lives in ``flashinfer/torch_boundary.py``
(issue 44): a scan of the source finds none anywhere else."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import flashinfer
from flashinfer import torch_boundary

PACKAGE = Path(flashinfer.__file__).parent
BOUNDARY = PACKAGE / "torch_boundary.py"

PRIVATE = re.compile(
    r"torch\._[A-Za-z]"  # torch._C, torch._subclasses, torch._check, torch._dynamo, ...
    r"|\b_torchdynamo_\w+"  # Dynamo's marks on a function
    r"|\b_dynamo_marked_constant\b"  # assume_constant_result's mark
    r"|\._current_level\b"  # torch.autograd.forward_ad's level
    r"|\._FunctionBase\b|\b_functorch\.|\b_AutoDispatch\w+"
)


def private_uses(text: str) -> list[str]:
    """The lines of ``text`` that name a private torch or Dynamo name."""
    return [line.strip() for line in text.splitlines() if PRIVATE.search(line)]


def test_no_module_but_the_boundary_names_a_private_torch_name():
    found = {
        str(path.relative_to(PACKAGE)): uses
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != BOUNDARY and (uses := private_uses(path.read_text()))
    }
    assert not found, (
        "private torch names outside flashinfer/torch_boundary.py (add the name there, with "
        f"why no public API does the job, and import it from there): {found}"
    )


@pytest.mark.parametrize(
    "line",
    [
        "x = torch._C._is_tracing()",
        "from torch._subclasses.fake_tensor import FakeTensor",
        "f._torchdynamo_inline = g",
        "f._dynamo_marked_constant = True",
        "if _fwad._current_level >= 0:",
    ],
)
def test_the_scan_finds_each_kind_of_private_name(line):
    assert private_uses(line) == [line]


def test_public_spellings_pass_the_scan():
    assert not private_uses("torch.jit.is_tracing() or torch.compiler.is_compiling()")
    assert not private_uses("if type(a).__class__ == b:")


def test_each_boundary_entry_says_why():
    """Every name the boundary defines carries its reason: a docstring, or a string right
    after the assignment (imported classes say it on their import line)."""
    body = ast.parse(BOUNDARY.read_text()).body
    undocumented = []
    for i, node in enumerate(body):
        if isinstance(node, ast.FunctionDef):
            documented = ast.get_docstring(node) is not None
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and not _is_all(node):
            after = body[i + 1] if i + 1 < len(body) else None
            documented = isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
        else:
            continue
        if not documented:
            undocumented.append(ast.unparse(node).splitlines()[0])
    assert not undocumented
    assert set(torch_boundary.__all__) <= set(dir(torch_boundary))


def _is_all(node: ast.stmt) -> bool:
    return isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "__all__"
