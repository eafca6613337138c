"""The source edits ``flashinfer lifecycle`` makes in a checkout: each a function of file
texts, so a plan can be printed before anything is written.  Python source is edited on its
syntax tree (LibCST keeps the rest of the file, comments and layout, as it was): an import
is matched by its dotted module, a declaration by its name and checker, never by text.

What the codemod may edit (docs/lifecycle.rst, "What the codemod edits"): the feature's own
folder (moved or deleted), import paths of it anywhere under ``flashinfer/``, the marker and
``prefer=`` of the graduating declaration, the op's table entry of a removed backend, a
renamed backend's name in its declaration, its op's heuristic and the package's calls, the
declared history (``flashinfer/gating/history.py``, between its markers), ``CHANGELOG.md``'s
"Unreleased" section, and the generated docs (by running their writer).  Everything that
needs judgement (tests, prose in the docs, ranking a graduated backend in the heuristic) is
printed as a step left to the author.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable, Sequence
from dataclasses import MISSING, fields
from typing import Any

import libcst as cst
from libcst.metadata import PositionProvider

from flashinfer.gating.history import LifecycleRecord

__all__ = [
    "add_changelog_entry",
    "add_history_record",
    "drop_decorator",
    "drop_elements",
    "drop_import_name",
    "drop_imports",
    "drop_keyword",
    "move_package",
    "record_source",
    "rename_backend_arguments",
    "rename_declaration",
    "rename_module_name",
    "rename_in_function",
    "swap_decorator",
]

HISTORY_BEGIN = "# lifecycle-history: begin\n"
HISTORY_END = "# lifecycle-history: end\n"
_LINE = 100


def _value(v: object) -> str:
    if isinstance(v, bool) or v is None:
        return repr(v)
    return json.dumps(v, ensure_ascii=False)  # double quotes, as the formatter writes them


def record_source(record: LifecycleRecord, indent: str = "    ") -> str:
    """``record`` as a line (or lines) of Python, formatted as the formatter would, ending in
    a comma and a newline."""
    parts = [
        f"{f.name}={_value(getattr(record, f.name))}"
        for f in fields(record)
        if f.default is MISSING or getattr(record, f.name) != f.default
    ]
    name = type(record).__name__
    one = f"{indent}{name}({', '.join(parts)}),\n"
    if len(one) <= _LINE:
        return one
    inner = "".join(f"{indent}    {p},\n" for p in parts)
    return f"{indent}{name}(\n{inner}{indent}),\n"


def add_history_record(text: str, record: LifecycleRecord) -> str:
    """``flashinfer/gating/history.py``'s text with ``record`` appended to ``HISTORY``."""
    start, end = text.index(HISTORY_BEGIN) + len(HISTORY_BEGIN), text.index(HISTORY_END)
    block = text[start:end]
    head = "HISTORY: tuple[LifecycleRecord, ...] = ("
    if block.strip() == head + ")":
        body = ""
    else:
        body = block[len(head) + 1 : block.rindex(")")]
    new = f"{head}\n{body}{record_source(record)})\n"
    return text[:start] + new + text[end:]


def add_changelog_entry(text: str, entry: str) -> str:
    """``CHANGELOG.md`` with ``entry`` (a bullet's text) first under "## Unreleased"."""
    marker = "## Unreleased\n"
    at = text.find(marker)
    if at < 0:  # no section yet: one goes above the first release's
        first = text.find("\n## ")
        at = len(text) if first < 0 else first + 1
        text = text[:at] + marker + "\n" + text[at:]
        at = text.find(marker)
    at += len(marker)
    if text[at : at + 1] == "\n":
        at += 1
    return text[:at] + _bullet(entry) + text[at:]


def _bullet(entry: str, width: int = 92) -> str:
    words, lines, line = entry.split(), [], "-"
    for word in words:
        if len(line) + 1 + len(word) > width:
            lines.append(line)
            line = " "
        line += " " + word
    lines.append(line)
    return "\n".join(lines) + "\n"


# -- source edits: on the syntax tree (LibCST), so what is edited is the code meant, and
# the rest of the file (formatting, comments) stays as it was ---------------------------------


def _last_name(node: cst.BaseExpression) -> str:
    """``Backend`` for ``Backend`` and ``dispatch.Backend``."""
    if isinstance(node, cst.Call):
        node = node.func
    if isinstance(node, cst.Attribute):
        return node.attr.value
    return node.value if isinstance(node, cst.Name) else ""


def _string(node: cst.BaseExpression) -> str | None:
    """The value of a plain string literal (not an f-string), else ``None``."""
    if isinstance(node, (cst.SimpleString, cst.ConcatenatedString)):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def _quoted(value: str) -> cst.SimpleString:
    return cst.SimpleString(json.dumps(value, ensure_ascii=False))


def _is_declaration(node: cst.Call, call: str, name: str, check: str | None) -> bool:
    """Whether ``node`` is ``call(name, check=<check>, ...)`` (``check`` positional or not;
    ``None``: any)."""
    if _last_name(node.func) != call or not node.args or node.args[0].keyword is not None:
        return False
    if _string(node.args[0].value) != name:
        return False
    if check is None:
        return True
    given = [a.value for a in node.args if a.keyword is not None and a.keyword.value == "check"]
    if not given and len(node.args) > 1 and node.args[1].keyword is None:
        given = [node.args[1].value]
    return any(_last_name(v) == check for v in given)


def _one_declaration(tree: cst.Module, call: str, name: str, check: str | None) -> cst.Call:
    """The one ``call(name, check=check, ...)`` in ``tree``; ``LookupError`` when there is none
    or more than one (an edit must not guess which)."""
    found: list[cst.Call] = []

    class Find(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            if _is_declaration(node, call, name, check):
                found.append(node)

    tree.visit(Find())
    checked = f", check={check}" if check else ""
    if len(found) != 1:
        how = "no" if not found else f"{len(found)} declarations"
        raise LookupError(f"{how} {call}({name!r}{checked}, ...)")
    return found[0]


def _without(args: Sequence[Any], drop: Callable[[Any], bool]) -> list[Any]:
    """``args`` (call arguments or list elements) without those ``drop`` picks; the last one
    kept takes the last one's comma, so a trailing comma stays (or stays absent)."""
    kept = [a for a in args if not drop(a)]
    if kept and len(kept) < len(args) and drop(args[-1]):
        kept[-1] = kept[-1].with_changes(comma=args[-1].comma)
    return kept


def swap_decorator(text: str, function: str, decorator: str, new: str | None) -> str:
    """``text`` with ``function``'s ``@decorator(...)`` (all its lines) replaced by ``@new``
    (or dropped)."""
    done: list[bool] = []

    class Swap(cst.CSTTransformer):
        def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> Any:
            if updated.name.value != function or done:
                return updated
            decorators = []
            for d in updated.decorators:
                if _last_name(d.decorator) == decorator and not done:
                    done.append(True)
                    if new is not None:
                        decorators.append(d.with_changes(decorator=cst.Name(new)))
                    continue
                decorators.append(d)
            return updated.with_changes(decorators=decorators)

    edited = cst.parse_module(text).visit(Swap()).code
    if not done:
        raise LookupError(f"{function} has no @{decorator}")
    return edited


def drop_decorator(text: str, function: str, decorator: str) -> str:
    """``text`` without the ``@decorator(...)`` of ``function``."""
    return swap_decorator(text, function, decorator, None)


def drop_keyword(
    text: str, call: str, first_arg: str, keyword: str, check: str | None = None
) -> str:
    """``text`` without ``keyword=...`` in the one declaration ``call(first_arg, check=check,
    ...)`` (e.g. the ``prefer=`` of ``Backend("splitk", check=check_splitk, ...)``)."""
    tree = cst.parse_module(text)
    node = _one_declaration(tree, call, first_arg, check)
    args = _without(node.args, lambda a: a.keyword is not None and a.keyword.value == keyword)
    return tree.visit(_Replace(node, node.with_changes(args=args))).code


def rename_declaration(text: str, call: str, old: str, new: str, check: str | None = None) -> str:
    """``text`` with the one declaration ``call(old, check=check, ...)`` written
    ``call(new, ...)``: the checker tells the op's declaration from any other of that name in
    the module.  ``LookupError`` if there is none, or more than one."""
    tree = cst.parse_module(text)
    node = _one_declaration(tree, call, old, check)
    first = node.args[0].with_changes(value=_quoted(new))
    return tree.visit(_Replace(node, node.with_changes(args=[first, *node.args[1:]]))).code


class _Replace(cst.CSTTransformer):
    """Replaces one node, found by identity in the tree it was read from."""

    def __init__(self, old: cst.CSTNode, new: cst.CSTNode) -> None:
        super().__init__()
        self.old, self.new = old, new

    def on_leave(self, original: Any, updated: Any) -> Any:
        return self.new if original is self.old else updated


def _dotted(node: cst.BaseExpression | None) -> str:
    if node is None:
        return ""
    if isinstance(node, cst.Attribute):
        return f"{_dotted(node.value)}.{node.attr.value}"
    return node.value if isinstance(node, cst.Name) else ""


def _dotted_node(name: str) -> cst.Attribute | cst.Name:
    head, _, last = name.rpartition(".")
    return cst.Attribute(_dotted_node(head), cst.Name(last)) if head else cst.Name(last)


def _within(module: str, package: str) -> bool:
    """Whether the dotted ``module`` is ``package`` or under it (not a sibling whose name
    merely starts with it: ``splitk_gemm_v2`` is not under ``splitk_gemm``)."""
    return module == package or module.startswith(package + ".")


def drop_import_name(text: str, module: str, name: str) -> str:
    """``text`` without ``name`` in a top-level ``from module import ...``, if nothing else
    uses it."""
    tree = cst.parse_module(text)
    uses: list[bool] = []

    class Uses(cst.CSTVisitor):
        def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
            return False

        def visit_Name(self, node: cst.Name) -> None:
            if node.value == name:
                uses.append(True)

    tree.visit(Uses())
    if uses:
        return text

    class Drop(cst.CSTTransformer):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return False

        def leave_ImportFrom(self, original: cst.ImportFrom, updated: cst.ImportFrom) -> Any:
            if _dotted(updated.module) != module or isinstance(updated.names, cst.ImportStar):
                return updated
            kept = _without(updated.names, lambda a: _dotted(a.name) == name)
            if not kept:
                return cst.RemoveFromParent()
            if len(kept) == 1 and updated.lpar is None:
                kept = [kept[0].with_changes(comma=cst.MaybeSentinel.DEFAULT)]
            return updated.with_changes(names=kept)

    return tree.visit(Drop()).code


def drop_imports(text: str, package: str) -> tuple[str, list[int]]:
    """``text`` without the statements importing ``package`` or a module under it (one line
    or parenthesised over several, at top level or in an ``if``/``try`` block), and the lines
    (in the text returned) of those left in place: imports inside a function or class body,
    whose code then names what no longer exists (a step for the author, not an edit)."""

    def imports_it(statement: cst.BaseSmallStatement) -> bool:
        if isinstance(statement, cst.ImportFrom):
            return not statement.relative and _within(_dotted(statement.module), package)
        if isinstance(statement, cst.Import):
            return any(_within(_dotted(a.name), package) for a in statement.names)
        return False

    class Drop(cst.CSTTransformer):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return False

        def visit_ClassDef(self, node: cst.ClassDef) -> bool:
            return False

        def leave_SimpleStatementLine(
            self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
        ) -> Any:
            body = [s for s in updated.body if not imports_it(s)]
            if len(body) == len(updated.body):
                return updated
            return updated.with_changes(body=body) if body else cst.RemoveFromParent()

    edited = cst.parse_module(text).visit(Drop())
    left: list[int] = []

    class Left(cst.CSTVisitor):
        METADATA_DEPENDENCIES = (PositionProvider,)

        def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
            if any(imports_it(s) for s in node.body):
                left.append(self.get_metadata(PositionProvider, node.body[0]).start.line)

    cst.MetadataWrapper(edited).visit(Left())
    return edited.code, left


def drop_elements(text: str, names: Sequence[str]) -> str:
    """``text`` without the elements of lists and tuples that are one of ``names`` (a removed
    backend's entry ``SPLITK,`` in its op's table)."""

    class Drop(cst.CSTTransformer):
        def _drop(self, updated: Any) -> Any:
            elements = _without(
                updated.elements, lambda e: isinstance(e.value, cst.Name) and e.value.value in names
            )
            return updated.with_changes(elements=elements)

        def leave_List(self, original: cst.List, updated: cst.List) -> Any:
            return self._drop(updated)

        def leave_Tuple(self, original: cst.Tuple, updated: cst.Tuple) -> Any:
            return self._drop(updated)

    return cst.parse_module(text).visit(Drop()).code


def _replace_bounded(text: str, old: str, new: str) -> str:
    """``text`` with each ``old`` that is not the start of a longer name (the character after
    it is not a letter, digit or ``_``) written ``new``."""
    out, at = [], 0
    while (found := text.find(old, at)) >= 0:
        end = found + len(old)
        following = text[end : end + 1]
        bounded = not (following.isalnum() or following == "_")
        out.append(text[at:found] + (new if bounded else old))
        at = end
    return "".join(out) + text[at:]


def move_package(text: str, old: str, new: str, old_dir: str, new_dir: str) -> str:
    """``text`` with the package ``old`` (dotted) moved to ``new``: every import of it or of a
    module under it, and its dotted name and folder (``old_dir``) where strings and comments
    name them; a sibling whose name merely starts with it (``old_v2``) is left alone."""

    def moved(name: str) -> str:
        return new + name[len(old) :] if _within(name, old) else name

    def prose(value: str) -> str:
        return _replace_bounded(_replace_bounded(value, old, new), old_dir, new_dir)

    class Move(cst.CSTTransformer):
        def leave_ImportFrom(self, original: cst.ImportFrom, updated: cst.ImportFrom) -> Any:
            name = _dotted(updated.module)
            if updated.relative or not _within(name, old):
                return updated
            return updated.with_changes(module=_dotted_node(moved(name)))

        def leave_ImportAlias(self, original: cst.ImportAlias, updated: cst.ImportAlias) -> Any:
            name = _dotted(updated.name)
            if not _within(name, old):
                return updated
            return updated.with_changes(name=_dotted_node(moved(name)))

        def leave_SimpleString(self, original: Any, updated: cst.SimpleString) -> Any:
            return updated.with_changes(value=prose(updated.value))

        def leave_FormattedStringText(self, original: Any, updated: Any) -> Any:
            return updated.with_changes(value=prose(updated.value))

        def leave_Comment(self, original: Any, updated: cst.Comment) -> Any:
            return updated.with_changes(value=prose(updated.value))

    return cst.parse_module(text).visit(Move()).code


def rename_backend_arguments(text: str, callee: str, old: str, new: str) -> str:
    """``text`` with every call of ``callee`` that names ``backend=old`` naming ``new`` (an
    internal caller of a renamed backend: otherwise it warns users about code they never
    wrote)."""

    class Rename(cst.CSTTransformer):
        def leave_Call(self, original: cst.Call, updated: cst.Call) -> Any:
            if _last_name(updated.func) != callee:
                return updated
            args = [
                a.with_changes(value=_quoted(new))
                if a.keyword is not None
                and a.keyword.value == "backend"
                and _string(a.value) == old
                else a
                for a in updated.args
            ]
            return updated.with_changes(args=args)

    return cst.parse_module(text).visit(Rename()).code


class _RenameStrings(cst.CSTTransformer):
    """Each string literal whose whole value is ``old`` written ``new``."""

    def __init__(self, old: str, new: str) -> None:
        super().__init__()
        self.old, self.new = old, new

    def leave_SimpleString(self, original: Any, updated: cst.SimpleString) -> Any:
        if updated.evaluated_value != self.old:
            return updated
        return _quoted(self.new).with_changes(lpar=updated.lpar, rpar=updated.rpar)


def rename_in_function(text: str, function: str, old: str, new: str) -> str:
    """``text`` with the string literals ``old`` written ``new`` in the top-level
    ``function`` and in the top-level assignments of the names it reads (a heuristic that
    ranks backends by name, and its table of ranks)."""
    tree = cst.parse_module(text)
    defs = [s for s in tree.body if isinstance(s, cst.FunctionDef) and s.name.value == function]
    read: set[str] = set()

    class Reads(cst.CSTVisitor):
        def visit_Name(self, node: cst.Name) -> None:
            read.add(node.value)

    for d in defs:
        d.visit(Reads())

    def assigns_read(statement: cst.CSTNode) -> bool:
        if not isinstance(statement, cst.SimpleStatementLine):
            return False
        targets = [
            t.target for s in statement.body if isinstance(s, cst.Assign) for t in s.targets
        ] + [s.target for s in statement.body if isinstance(s, cst.AnnAssign)]
        return any(isinstance(t, cst.Name) and t.value in read for t in targets)

    body = [
        s.visit(_RenameStrings(old, new)) if s in defs or assigns_read(s) else s for s in tree.body
    ]
    return tree.with_changes(body=body).code


def rename_module_name(text: str, old: str, new: str) -> str:
    """``text`` (a module) with the name ``old`` renamed ``new`` where it is code: its
    ``def``, every load or store of the name, and its entry in ``__all__`` (strings,
    comments, docstrings and import paths are left as they are)."""
    tree = ast.parse(text)
    spans: list[tuple[int, int, int, str]] = []  # (line, col, end col, replacement)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == old:
            spans.append((node.lineno, node.col_offset, node.end_col_offset or 0, new))
        elif isinstance(node, ast.FunctionDef) and node.name == old:
            source = text.splitlines()[node.lineno - 1].encode()
            col = source.index(f"def {old}".encode()) + 4
            spans.append((node.lineno, col, col + len(old.encode()), new))
        elif (
            isinstance(node, ast.Assign)
            and [ast.unparse(t) for t in node.targets] == ["__all__"]
            and isinstance(node.value, (ast.List, ast.Tuple))
        ):
            for element in node.value.elts:
                if isinstance(element, ast.Constant) and element.value == old:
                    spans.append(
                        (
                            element.lineno,
                            element.col_offset,
                            element.end_col_offset or 0,
                            f'"{new}"',
                        )
                    )
    lines = text.splitlines(keepends=True)
    for number, col, end, replacement in sorted(spans, reverse=True):
        raw = lines[number - 1].encode()
        lines[number - 1] = (raw[:col] + replacement.encode() + raw[end:]).decode()
    return "".join(lines)
