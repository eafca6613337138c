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
from collections.abc import Callable, Iterable
from dataclasses import dataclass
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


def bare_string_lines(source: str) -> tuple[set[int], set[int], set[int]]:
    """``(module docstring, class docstrings, inert)``: the lines of ``source`` that hold
    only a bare string statement of the module or of a class.  The first statement of a
    body is its docstring (``__doc__``); a later one (an attribute's docstring, for Sphinx)
    is dropped by the compiler and changes nothing at run time."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set(), set(), set()
    module: set[int] = set()
    classes: set[int] = set()
    inert: set[int] = set()

    def visit(body: list[ast.stmt], docs: set[int]) -> None:
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
                    visit(node.body, classes)
        for i, lines in strings.items():
            (docs if i == 0 else inert).update(lines - shared)

    visit(tree.body, module)
    return module, classes, inert


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

_BARE_DOC = re.compile(r"(?<![\w.'\"])__doc__(?![\w'\"])")
"""A bare ``__doc__``: its own module's docstring (at a class body's top, the class's)."""

NEVER_READ_MODULE_DOCSTRINGS = {
    "flashinfer/dispatch/plan.py::DispatchPlan.__init__": (
        "copies the decorated API's __doc__, and a plan of a module is a TypeError"
    ),
    "flashinfer/gating/experimental_marker.py::_wrap_function": (
        "reads the marked callable's __doc__; marking a module is a TypeError"
    ),
    "flashinfer/gating/experimental_marker.py::_wrap_class": (
        "reads the marked class's __doc__; only classes reach it"
    ),
}
"""Docstring readers that cannot reach a module's docstring, each with why: every entry is
proven by a test (tests/ci/test_testmap_precision.py), and one that no longer names a
reader fails it.  They read a function's or a class's docstring, and run in every test
(each API's decoration), so without this list a module's docstring selected everything."""


@dataclass(frozen=True)
class DocReaders:
    """Code that reads docstrings at run time: ``anyone`` may read any module's or class's
    (``X.__doc__``, ``getdoc``, ``help``, doctest); ``own`` reads a bare ``__doc__``, its
    own file's module docstring (or, at a class body's top, that class's)."""

    anyone: frozenset[str]
    own: frozenset[str]

    def _own(self, path: str) -> set[str]:
        return {s for s in self.own if s.split("::", 1)[0] == path}

    def of_module(self, path: str) -> set[str]:
        """The scopes that can read ``path``'s module docstring."""
        return (self.anyone - NEVER_READ_MODULE_DOCSTRINGS.keys()) | self._own(path)

    def of_class(self, path: str) -> set[str]:
        """The scopes that can read the docstring of a class of ``path``."""
        return set(self.anyone) | self._own(path)


def _code_part(source: str) -> dict[int, str]:
    """Each line of ``source`` (1-based) without its comment (a ``#`` in a string stays);
    a file that does not tokenize keeps its lines whole."""
    lines = dict(enumerate(source.splitlines(), 1))
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT:
                row, col = tok.start
                lines[row] = lines.get(row, "")[:col]
    except (tokenize.TokenError, SyntaxError):
        pass
    return lines


def _hits(repo: Path, commit: str, pattern: str) -> dict[str, list[tuple[int, str]]] | None:
    """``{path: [(line, code)]}``: the lines of Python files at ``commit`` whose code
    (comments left out) matches ``pattern`` (``git grep -E`` syntax, read by :mod:`re`);
    None when git grep fails."""
    rc, out = _grep(repo, "-n", "-E", "-e", pattern, commit, "--", "*.py")
    if rc not in (0, 1):
        return None
    grepped: dict[str, set[int]] = {}
    for line in out.splitlines():
        parts = line.split(":", 3)  # commit:path:line:text
        if len(parts) == 4 and parts[2].isdigit():
            grepped.setdefault(parts[1], set()).add(int(parts[2]))
    regex = re.compile(pattern)
    hits: dict[str, list[tuple[int, str]]] = {}
    for path, numbers in grepped.items():
        code = _code_part(show(repo, commit, path) or "")
        found = [(n, code.get(n, "")) for n in sorted(numbers)]
        found = [(n, text) for n, text in found if regex.search(text)]
        if found:
            hits[path] = found
    return hits


def _scopes(repo: Path, commit: str, path: str, lines: Iterable[int]) -> set[str]:
    parsed = parse_scopes(show(repo, commit, path) or "")
    return {f"{path}::{parsed.scope_of(n)}" for n in lines}


def scopes_matching(repo: Path, commit: str, pattern: str) -> set[str] | None:
    """``path::scope`` (``path::<module>`` for import-time code) of the Python code at
    ``commit`` that matches ``pattern`` outside comments; None when git grep fails."""
    hits = _hits(repo, commit, pattern)
    if hits is None:
        return None
    scopes: set[str] = set()
    for path, found in hits.items():
        scopes |= _scopes(repo, commit, path, (n for n, _ in found))
    return scopes


def docstring_readers(repo: Path, commit: str) -> DocReaders | None:
    """The code at ``commit`` that reads docstrings (:data:`READS_DOCSTRINGS`), told
    apart by whose it can read; None when git grep fails."""
    hits = _hits(repo, commit, READS_DOCSTRINGS)
    if hits is None:
        return None
    regex = re.compile(READS_DOCSTRINGS)
    anyone: set[str] = set()
    own: set[str] = set()
    for path, found in hits.items():
        bare = [n for n, text in found if not regex.search(_BARE_DOC.sub("", text))]
        anyone |= _scopes(repo, commit, path, (n for n, _ in found if n not in bare))
        own |= _scopes(repo, commit, path, bare)
    return DocReaders(frozenset(anyone), frozenset(own - anyone))
