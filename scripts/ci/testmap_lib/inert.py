"""Changed lines of a Python file that cannot change what an existing test runs.

Two kinds, each checked so that a doubt keeps the line a change (fail open):

- **Comments and blank lines** (:func:`code_lines`): a line that holds no token but a
  comment or a line break.  Found by the tokenizer, so a ``#`` inside a string is code; the
  first two lines stay code when they are a shebang or an encoding cookie.  Docstrings are
  strings, so code: doctests and docs tests read them.  A test that reads the file's text
  as data is selected by the ``data-file`` rule either way.
- **A new private function** (:func:`new_private_defs`): a ``def`` added whole, straight
  in the module or in a class body, whose only import-time effect is to bind a name that
  nothing can look up yet.  Its body runs only when something calls it, and every caller
  is a changed line, which selects its own tests.  It must be private (``_name``, not
  ``__dunder__`` or ``_sunder_``: Python, Enum and IPython look those up by convention,
  and autodoc, the API inventory and doctests list public names), undecorated (decorators
  run at import), with constant defaults, with annotations only under ``from __future__
  import annotations`` (else they are evaluated at import), and its name must appear
  nowhere in the tree the map describes (``git grep -w``: so it overrides no method and
  rebinds no name, and no ``getattr(x, "_name")`` or attribute read was waiting for it).
  A method qualifies only in a class with no metaclass, no decorator but ``dataclass``,
  and bases that are ``object`` or such classes of the same file: a third-party base
  (``torch.nn.Module``) may look up private names of its own.  Code that lists a module's
  or class's names (``vars()``, ``dir()``, ``__dict__``, ``getmembers``, ``globals()``, a
  ``getattr`` whose name is built in the call) would see the new name: the rule selects
  the tests that ran such code (:func:`enumerating_scopes`).
"""

from __future__ import annotations

import ast
import io
import re
import subprocess
import tokenize
from collections.abc import Callable
from pathlib import Path

from testmap_lib.gitdiff import show
from testmap_lib.scopes import parse_scopes

_NOT_CODE = frozenset(
    {
        tokenize.COMMENT,
        tokenize.NL,
        tokenize.NEWLINE,
        tokenize.INDENT,
        tokenize.DEDENT,
        tokenize.ENDMARKER,
    }
)
_CODING = re.compile(r"^[ \t\f]*#.*?coding[:=]")


def code_lines(source: str) -> set[int] | None:
    """The lines of ``source`` that hold code (1-based); None when it does not tokenize,
    and then every line counts as code."""
    lines: set[int] = set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type not in _NOT_CODE:
                lines.update(range(tok.start[0], tok.end[0] + 1))
    except (tokenize.TokenError, SyntaxError):
        return None
    for n, line in enumerate(source.splitlines()[:2], 1):
        if line.startswith("#!") or _CODING.match(line):
            lines.add(n)  # read by the interpreter, not by the tokenizer
    return lines


def _private(name: str) -> bool:
    return name.startswith("_") and not name.endswith("_")


def _constant(node: ast.expr | None) -> bool:
    if node is None or isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        return isinstance(node.operand, ast.Constant)
    if isinstance(node, ast.Tuple):
        return all(_constant(e) for e in node.elts)
    return False


def _annotated(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    a = node.args
    every = [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]
    return node.returns is not None or any(x is not None and x.annotation for x in every)


def _future_annotations(tree: ast.Module) -> bool:
    return any(
        isinstance(n, ast.ImportFrom)
        and n.module == "__future__"
        and any(a.name == "annotations" for a in n.names)
        for n in tree.body
    )


def _plain_classes(tree: ast.Module) -> set[str]:
    """Top-level classes a private method can be added to: no metaclass, no decorator but
    ``dataclass``, bases ``object`` or other such classes of this file."""
    defs = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    plain: dict[str, bool] = {}

    def ok(name: str, seen: frozenset[str] = frozenset()) -> bool:
        if name in plain:
            return plain[name]
        node = defs.get(name)
        result = node is not None and name not in seen and not node.keywords
        if result and node is not None:
            for d in node.decorator_list:
                target = d.func if isinstance(d, ast.Call) else d
                if ast.unparse(target) not in ("dataclass", "dataclasses.dataclass"):
                    result = False
            for base in node.bases:
                if not isinstance(base, ast.Name):
                    result = False
                elif base.id != "object" and not ok(base.id, seen | {name}):
                    result = False
        plain[name] = result
        return result

    return {name for name in defs if ok(name)}


def bare_string_lines(source: str) -> tuple[set[int], set[int]]:
    """``(docstrings, inert)``: the lines of ``source`` that hold only a bare string
    statement of the module or of a class.  The first statement of a body is its docstring
    (``__doc__``); a later one (an attribute's docstring, for Sphinx) is dropped by the
    compiler and changes nothing at run time."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set(), set()
    docs: set[int] = set()
    inert: set[int] = set()

    def visit(body: list[ast.stmt]) -> None:
        shared: set[int] = set()  # lines another statement of the body also holds
        strings: dict[int, set[int]] = {}
        for i, node in enumerate(body):
            end = node.end_lineno or node.lineno
            if (
                isinstance(node, ast.Expr)
                and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)
            ):
                strings[i] = set(range(node.lineno, end + 1))
            else:
                shared.update({node.lineno, end})
                if isinstance(node, ast.ClassDef):
                    visit(node.body)
        for i, lines in strings.items():
            (docs if i == 0 else inert).update(lines - shared)

    visit(tree.body)
    return docs, inert


def new_private_defs(
    source: str, new_lines: set[int], named_before: Callable[[str], bool]
) -> dict[str, set[int]]:
    """The new private functions of ``source`` (the head's text) that the diff added whole:
    ``{qualified name: its lines}``.  ``named_before(name)``: whether the tree the map
    describes mentions ``name`` anywhere."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return {}
    future = _future_annotations(tree)
    plain = _plain_classes(tree)
    candidates: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            candidates.append((node.name, node))
        elif isinstance(node, ast.ClassDef) and node.name in plain:
            for member in node.body:
                if isinstance(member, ast.FunctionDef | ast.AsyncFunctionDef):
                    candidates.append((f"{node.name}.{member.name}", member))
    found: dict[str, set[int]] = {}
    for qualname, node in candidates:
        lines = set(range(node.lineno, (node.end_lineno or node.lineno) + 1))
        a = node.args
        if (
            not lines <= new_lines
            or node.decorator_list
            or not _private(node.name)
            or not all(_constant(d) for d in [*a.defaults, *a.kw_defaults])
            or (_annotated(node) and not future)
            or named_before(node.name)
        ):
            continue
        found[qualname] = lines
    return found


def _grep(repo: Path, *args: str) -> tuple[int, str]:
    proc = subprocess.run(
        ["git", "-c", "core.quotePath=false", "grep", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        encoding="utf-8",
        errors="replace",
    )
    return proc.returncode, proc.stdout


def named_in_tree(repo: Path, commit: str) -> Callable[[str], bool]:
    """Whether ``name`` appears as a word in any file of ``commit`` (a failed grep: yes)."""

    def named(name: str) -> bool:
        rc, _ = _grep(repo, "-q", "-w", "-F", "-e", name, commit)
        return rc != 1  # 1 is "not found"; 0 found; anything else fails open

    return named


LISTS_NAMES = (
    r"\bvars\(|\bdir\(|__dict__|getmembers|\bglobals\(\)|__globals__"
    r"|getattr\([^,]+,\s*(f['\"]|[^,)]*\+)"
)
"""Code that lists a module's or class's names, or builds a name to look up."""

READS_DOCSTRINGS = r"__doc__|getdoc|\bhelp\(|pydoc|doctest"
"""Code that reads docstrings at run time."""


def scopes_matching(repo: Path, commit: str, pattern: str) -> set[str] | None:
    """``path::scope`` (``path::<module>`` for import-time code) of the Python code at
    ``commit`` that matches ``pattern`` (a ``git grep -E`` pattern); None when git grep
    fails."""
    rc, out = _grep(repo, "-n", "-E", "-e", pattern, commit, "--", "*.py")
    if rc not in (0, 1):
        return None
    hits: dict[str, set[int]] = {}
    for line in out.splitlines():
        parts = line.split(":", 3)  # commit:path:line:text
        if len(parts) == 4 and parts[2].isdigit():
            hits.setdefault(parts[1], set()).add(int(parts[2]))
    scopes = set()
    for path, lines in hits.items():
        text = show(repo, commit, path)
        parsed = parse_scopes(text or "")
        scopes |= {f"{path}::{parsed.scope_of(n)}" for n in lines}
    return scopes
