"""Module names that comments and docstrings mention, checked against the package as it is
(tests/test_stale_names.py runs it on the package, the docs and fixtures).

Two kinds of mention are read, with string operations only (no pattern to keep linear):

- a dotted name that starts with ``flashinfer.`` (``flashinfer.gating.records``,
  ``flashinfer.lifecycle.GRADUATION_HORIZON_MONTHS``): the longest prefix that is a module
  must exist, and the next part must be a name that module defines, imports or has as a
  submodule (for a class it defines, the part after that must be in the class's body);
- a path (``gating/records.py``, ``scripts/check.sh``) whose first folder is a top-level
  entry of the repository or a folder of the package: some file of the repository must end
  with it; a bare ``name.py`` must be the name of a file of the repository;
- a private name (``_stacklevel``, one leading underscore): something of the package's code
  must be called so (a module, a definition, a variable, an attribute, or a word of the
  generated source the package writes as strings), or it is a module or name that was
  renamed away.

A placeholder in angle brackets (``flashinfer/experimental/<feature>/support.py``,
``flashinfer.codegen.generated.<name>``) stands for any name: the part before it is checked.
"""

from __future__ import annotations

import ast
import io
import tokenize
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "flashinfer"

# Punctuation around a word that is not part of the name it holds.
_AROUND = "`'\"()[]{},;:!?*~<>|"
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.")
_PATH_SUFFIXES = (".py", ".md", ".rst", ".sh", ".toml", ".yml", ".yaml", ".json", ".txt", ".cfg")


_FIX = "name what is there now"


def comments_and_docstrings(source: str) -> Iterator[tuple[int, str]]:
    """``(line, text)`` of each comment and each docstring (module, class, function) of a
    Python source; a docstring's lines are numbered from where it starts."""
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                value = body[0].value.value
                if isinstance(value, str):
                    for offset, text in enumerate(value.splitlines()):
                        yield body[0].lineno + offset, text


def _words(text: str) -> Iterator[str]:
    for word in text.split():
        if "..." in word:  # an elided name: ``..._rmsnorm_dispatcher``
            continue
        # ``name`` or :func:`~flashinfer.x.y`: the part inside the role's backticks.
        word = word.rpartition(":`")[2] if ":`" in word else word
        yield word.strip(_AROUND + ".").lstrip("~").partition("::")[0].rstrip(".")


def _before_placeholder(word: str) -> str:
    return word.partition("<")[0].rstrip("./") if "<" in word else word


def dotted_names(text: str) -> Iterator[str]:
    """Words of ``text`` like ``flashinfer.x.y`` (a call's ``()`` and a placeholder cut)."""
    for word in text.split():
        word = word.rpartition(":`")[2] if ":`" in word else word
        word = word.strip(_AROUND.replace("<", "").replace(">", "") + ".").lstrip("~")
        word = _before_placeholder(word).partition("(")[0].rstrip(".")
        if word.startswith("flashinfer.") and set(word) <= _NAME_CHARS and ".." not in word:
            yield word


def path_names(text: str, first_folders: frozenset[str]) -> Iterator[str]:
    """Words of ``text`` like ``folder/module.py`` whose first folder is one of
    ``first_folders``, and bare ``module.py`` words."""
    for word in _words(text):
        if "://" in word or "=" in word or "$" in word:
            continue
        if "/" not in word:
            if word.endswith(".py") and word[:-3].isidentifier():
                yield word
            continue
        path = _before_placeholder(word)
        whole = path == word
        if whole and not word.endswith(_PATH_SUFFIXES):
            continue
        if path.split("/", 1)[0] in first_folders and path:
            yield path if whole else path + "/"


def _identifiers(tree: ast.AST) -> set[str]:
    """Every name a module's code uses or defines, with the identifier words of its strings
    (the generated source it writes)."""
    found: set[str] = set()
    # A string that is a statement of its own is a docstring: its words are what is checked.
    prose = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)}
    for node in ast.walk(tree):
        for field in ("id", "name", "attr", "arg", "asname"):
            value = getattr(node, field, None)
            if isinstance(value, str):
                found.update(value.split("."))
        if (
            isinstance(node, ast.Constant)
            and isinstance(value := node.value, str)
            and id(node) not in prose
        ):
            word = "".join(c if c.isalnum() or c == "_" else " " for c in value)
            found.update(word.split())
    return found


def _logger_names(tree: ast.AST) -> set[str]:
    """The names given to ``logging.getLogger("...")`` in a module."""
    return {
        node.args[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and ast.unparse(node.func).endswith("getLogger")
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    }


def private_names(text: str) -> Iterator[str]:
    """Words of ``text`` like ``_name`` (one leading underscore; a call's ``()`` cut)."""
    for word in _words(text):
        word = word.partition("(")[0]
        if word.startswith("_") and not word.startswith("__") and word.isidentifier():
            yield word


class Package:
    """What exists: the package's modules, each one's top-level names, each class's body."""

    def __init__(self, package: Path = PACKAGE, repo: Path = REPO) -> None:
        self.modules: dict[str, Path] = {}
        for path in sorted(package.rglob("*.py")):
            parts = list(path.relative_to(package.parent).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            self.modules[".".join(parts)] = path
        self._names: dict[str, tuple[set[str], dict[str, set[str]]]] = {}
        self.files = sorted(
            str(p.relative_to(repo))
            for p in repo.rglob("*")
            if p.is_file() and ".git" not in p.parts and "_build" not in p.parts
        )
        self.identifiers = {m.rpartition(".")[2] for m in self.modules}
        self.loggers: set[str] = set()  # ``flashinfer.api``: a logger's name, not a module's
        for path in self.modules.values():
            tree = ast.parse(path.read_text())
            self.identifiers |= _identifiers(tree)
            self.loggers |= _logger_names(tree)
        self.folders = frozenset(
            {p.name for p in repo.iterdir() if p.name != ".git"}
            | {p.name for p in package.rglob("*") if p.is_dir() and p.name != "__pycache__"}
        )

    def _top_level(self, module: str) -> tuple[set[str], dict[str, set[str]]]:
        if module not in self._names:
            names: set[str] = set()
            classes: dict[str, set[str]] = {}
            tree = ast.parse(self.modules[module].read_text())
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef):
                    classes[node.name] = {
                        n.name if hasattr(n, "name") else ast.unparse(n).split()[0]
                        for n in node.body
                    } | {
                        ast.unparse(t)
                        for n in node.body
                        if isinstance(n, ast.Assign | ast.AnnAssign)
                        for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
                    }
            for node in tree.body:
                for sub in ast.walk(node):  # definitions under if/try (TYPE_CHECKING) too
                    if isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                        names.add(sub.name)
                    elif isinstance(sub, ast.Import | ast.ImportFrom):
                        names.update((a.asname or a.name).split(".")[0] for a in sub.names)
                    elif isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                        names.add(sub.id)
            self._names[module] = names, classes
        return self._names[module]

    def has_dotted(self, name: str) -> bool:
        if name in self.loggers:
            return True
        parts = name.split(".")
        for cut in range(len(parts), 0, -1):
            module = ".".join(parts[:cut])
            if module in self.modules:
                break
        else:
            return False
        rest = parts[cut:]
        if not rest:
            return True
        names, classes = self._top_level(module)
        if rest[0] not in names:
            return False
        if len(rest) > 1 and rest[0] in classes:
            return rest[1] in classes[rest[0]]
        return True

    def has_path(self, path: str) -> bool:
        if "/" not in path:
            return any(f.rpartition("/")[2] == path for f in self.files)
        if path.endswith("/"):
            return any(f.startswith(path) or f"/{path}" in f"/{f}" for f in self.files)
        return any(f == path or f.endswith("/" + path) for f in self.files)


def stale_mentions(file: str, lines: Iterator[tuple[int, str]], package: Package) -> list[str]:
    """``file:line: name ...`` for each name of ``lines`` that no longer exists."""
    problems = []
    for line, text in lines:
        for name in dotted_names(text):
            if not package.has_dotted(name):
                problems.append(f"{file}:{line}: {name} does not exist (renamed or moved? {_FIX})")
        for private in private_names(text):
            if private not in package.identifiers:
                problems.append(
                    f"{file}:{line}: {private} is no name of the package's code (renamed or "
                    f"moved? {_FIX})"
                )
        for path in path_names(text, package.folders):
            if not package.has_path(path):
                problems.append(f"{file}:{line}: {path} does not exist (renamed or moved? {_FIX})")
    return problems
