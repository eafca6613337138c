"""The source ``flashinfer lifecycle`` writes (docs/lifecycle.rst): functions of file texts,
so a plan prints before anything is written; Python is edited with LibCST (layout kept).
"""

from __future__ import annotations

import ast
import json
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import MISSING, fields
from typing import Any

import libcst as cst
import libcst.matchers as m
from libcst.helpers import get_full_name_for_node
from libcst.metadata import PositionProvider

from flashinfer.gating.history import LifecycleRecord
from flashinfer.gating.messages import moved_module_used

HISTORY_BEGIN = "# lifecycle-history: begin\n"
HISTORY_END = "# lifecycle-history: end\n"


def record_source(record: LifecycleRecord, indent: str = "    ") -> str:
    """``record`` as Python, as ruff formats it, ending in a comma and a newline."""
    parts = []
    for f in fields(record):
        v = getattr(record, f.name)
        text = json.dumps(v, ensure_ascii=False) if isinstance(v, str) else repr(v)
        if f.default is MISSING or v != f.default:  # strings in double quotes, as ruff writes
            parts.append(f"{f.name}={text}")
    one = f"{indent}{type(record).__name__}({', '.join(parts)}),\n"
    if len(one) <= 100:
        return one
    inner = "".join(f"{indent}    {p},\n" for p in parts)
    return f"{indent}{type(record).__name__}(\n{inner}{indent}),\n"


def add_history_record(text: str, record: LifecycleRecord) -> str:
    """history.py's ``text`` with ``record`` appended to ``HISTORY``."""
    start, end = text.index(HISTORY_BEGIN) + len(HISTORY_BEGIN), text.index(HISTORY_END)
    head, block = "HISTORY: tuple[LifecycleRecord, ...] = (", text[start:end]
    body = "" if block.strip() == head + ")" else block[len(head) + 1 : block.rindex(")")]
    return f"{text[:start]}{head}\n{body}{record_source(record)})\n{text[end:]}"


def add_changelog_entry(text: str, entry: str) -> str:
    """``CHANGELOG.md`` with ``entry`` first under "## Unreleased" (made if missing)."""
    marker = "## Unreleased\n"
    if marker not in text:
        first = text.find("\n## ")
        at = len(text) if first < 0 else first + 1
        text = text[:at] + marker + "\n" + text[at:]
    at = text.find(marker) + len(marker)
    at += text[at : at + 1] == "\n"
    wrap = textwrap.TextWrapper(
        92, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False
    )
    return text[:at] + "\n".join(wrap.wrap(f"- {entry}")) + "\n" + text[at:]


def _edit(text: str, **handlers: Callable[..., Any]) -> str:
    """``text`` through a LibCST transformer of ``handlers`` (``visit_X``, ``leave_X``)."""
    return cst.parse_module(text).visit(_transformer(**handlers)).code


def _transformer(**handlers: Callable[..., Any]) -> cst.CSTTransformer:
    methods = {name: (lambda g: lambda _, *nodes: g(*nodes))(f) for name, f in handlers.items()}
    return type("Edit", (cst.CSTTransformer,), methods)()


def _skip(node: Any) -> bool:  # a visit_* handler that does not enter the node
    return False


def _dotted(node: cst.CSTNode | None) -> str:
    """``a.b.c`` for that name or attribute, else ``""``."""
    return (get_full_name_for_node(node) or "") if node is not None else ""


def _last_name(node: cst.BaseExpression) -> str:
    return _dotted(node).rpartition(".")[2]


def _string(node: cst.BaseExpression) -> str | None:
    """The value of a plain string literal, else ``None``."""
    if isinstance(node, (cst.SimpleString, cst.ConcatenatedString)):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def _quoted(value: str) -> cst.SimpleString:
    return cst.SimpleString(json.dumps(value, ensure_ascii=False))


def _within(module: str, package: str) -> bool:
    """``splitk_gemm.kernel`` is within ``splitk_gemm``; ``splitk_gemm_v2`` is not."""
    return module == package or module.startswith(package + ".")


def _without(args: Sequence[Any], drop: Callable[[Any], bool]) -> list[Any]:
    """``args`` without those ``drop`` picks, a trailing comma kept as it was."""
    kept = [a for a in args if not drop(a)]
    if kept and len(kept) < len(args) and drop(args[-1]):
        kept[-1] = kept[-1].with_changes(comma=args[-1].comma)
    return kept


def _declaration(text: str, call: str, name: str, check: str | None, change: Any) -> str:
    """``text`` with the one ``call(name, check=<check>, ...)`` (``None``: any) replaced by
    ``change(node)``; ``LookupError`` for none or several (an edit must not guess)."""

    def declares(node: cst.Call) -> bool:
        if _last_name(node.func) != call or not node.args or node.args[0].keyword is not None:
            return False
        if _string(node.args[0].value) != name:
            return False
        given = [a.value for a in node.args if a.keyword and a.keyword.value == "check"]
        if not given and len(node.args) > 1 and node.args[1].keyword is None:
            given = [node.args[1].value]
        return check is None or any(_last_name(v) == check for v in given)

    tree = cst.parse_module(text)
    found = [
        node for node in m.findall(tree, m.Call()) if declares(cst.ensure_type(node, cst.Call))
    ]
    if len(found) != 1:
        how = "no" if not found else f"{len(found)} declarations"
        raise LookupError(f"{how} {call}({name!r}{f', check={check}' if check else ''}, ...)")
    return tree.visit(_transformer(leave_Call=lambda o, u: change(u) if o is found[0] else u)).code


def swap_decorator(text: str, function: str, decorator: str, new: str | None) -> str:
    """``text`` with ``function``'s ``@decorator(...)`` replaced by ``@new`` (or dropped)."""
    done: list[bool] = []

    def swap(original: cst.FunctionDef, updated: cst.FunctionDef) -> Any:
        if updated.name.value != function or done:
            return updated
        decorators = []
        for d in updated.decorators:
            if _last_name(d.decorator) != decorator or done:
                decorators.append(d)
                continue
            done.append(True)
            if new is not None:
                decorators.append(d.with_changes(decorator=cst.Name(new)))
        return updated.with_changes(decorators=decorators)

    edited = _edit(text, leave_FunctionDef=swap)
    if not done:
        raise LookupError(f"{function} has no @{decorator}")
    return edited


def drop_decorator(text: str, function: str, decorator: str) -> str:
    return swap_decorator(text, function, decorator, None)


def drop_keyword(
    text: str, call: str, first_arg: str, keyword: str, check: str | None = None
) -> str:
    """``text`` without ``keyword=...`` in the one ``call(first_arg, check=check, ...)``."""

    def drop(node: cst.Call) -> cst.Call:
        return node.with_changes(
            args=_without(node.args, lambda a: a.keyword is not None and a.keyword.value == keyword)
        )

    return _declaration(text, call, first_arg, check, drop)


def rename_declaration(text: str, call: str, old: str, new: str, check: str | None = None) -> str:
    """``text`` with the one ``call(old, check=check, ...)`` written ``call(new, ...)``."""

    def rename(node: cst.Call) -> cst.Call:
        first = node.args[0].with_changes(value=_quoted(new))
        return node.with_changes(args=[first, *node.args[1:]])

    return _declaration(text, call, old, check, rename)


def drop_import_name(text: str, module: str, name: str) -> str:
    """``text`` without ``name`` in a top-level ``from module import``, if unused."""
    uses: list[bool] = []
    _edit(
        text,
        visit_ImportFrom=_skip,
        visit_Name=lambda node: uses.append(True) if node.value == name else None,
    )
    if uses:
        return text

    def drop(original: cst.ImportFrom, updated: cst.ImportFrom) -> Any:
        if _dotted(updated.module) != module or isinstance(updated.names, cst.ImportStar):
            return updated
        kept = _without(updated.names, lambda a: _dotted(a.name) == name)
        if not kept:
            return cst.RemoveFromParent()
        if len(kept) == 1 and updated.lpar is None:
            kept = [kept[0].with_changes(comma=cst.MaybeSentinel.DEFAULT)]
        return updated.with_changes(names=kept)

    return _edit(text, visit_FunctionDef=_skip, leave_ImportFrom=drop)


def drop_imports(text: str, package: str) -> tuple[str, list[int]]:
    """``text`` without the top-level imports of ``package`` (or under it), and the lines of
    those left in a function or class body (a step for the author)."""

    def imports_it(statement: cst.BaseSmallStatement) -> bool:
        if isinstance(statement, cst.ImportFrom):
            return not statement.relative and _within(_dotted(statement.module), package)
        if isinstance(statement, cst.Import):
            return any(_within(_dotted(a.name), package) for a in statement.names)
        return False

    def drop(original: Any, updated: cst.SimpleStatementLine) -> Any:
        body = [s for s in updated.body if not imports_it(s)]
        if len(body) == len(updated.body):
            return updated
        return updated.with_changes(body=body) if body else cst.RemoveFromParent()

    edited = cst.parse_module(text).visit(
        _transformer(visit_FunctionDef=_skip, visit_ClassDef=_skip, leave_SimpleStatementLine=drop)
    )
    wrapper = cst.MetadataWrapper(edited)
    positions = wrapper.resolve(PositionProvider)
    left = [
        positions[node.body[0]].start.line
        for node in positions
        if isinstance(node, cst.SimpleStatementLine) and any(imports_it(s) for s in node.body)
    ]
    return edited.code, sorted(left)


def drop_elements(text: str, names: Sequence[str]) -> str:
    """``text`` without the list and tuple elements named one of ``names`` (``SPLITK,``)."""

    def drop(original: Any, updated: Any) -> Any:
        elements = _without(
            updated.elements, lambda e: isinstance(e.value, cst.Name) and e.value.value in names
        )
        return updated.with_changes(elements=elements)

    return _edit(text, leave_List=drop, leave_Tuple=drop)


def _replace_name(text: str, a: str, b: str) -> str:
    """``text`` with each ``a`` not followed by a word character (so not ``a_v2``) made ``b``."""
    out, i = [], 0
    while (j := text.find(a, i)) >= 0:
        end = j + len(a)
        whole = end == len(text) or not (text[end].isalnum() or text[end] == "_")
        out.append(text[i:j] + (b if whole else a))
        i = end
    return "".join(out) + text[i:]


def move_package(text: str, old: str, new: str, old_dir: str, new_dir: str) -> str:
    """``text`` with package ``old`` moved to ``new``: imports, and the dotted name and folder
    in strings and comments."""

    def module(original: Any, updated: cst.ImportFrom) -> Any:
        name = _dotted(updated.module)
        if updated.relative or not _within(name, old):
            return updated
        return updated.with_changes(module=cst.parse_expression(new + name[len(old) :]))

    def alias(original: Any, updated: cst.ImportAlias) -> Any:
        name = _dotted(updated.name)
        if not _within(name, old):
            return updated
        return updated.with_changes(name=cst.parse_expression(new + name[len(old) :]))

    def prose(original: Any, updated: Any) -> Any:
        value = updated.value
        for a, b in ((old, new), (old_dir, new_dir)):
            value = _replace_name(value, a, b)
        return updated.with_changes(value=value)

    return _edit(
        text,
        leave_ImportFrom=module,
        leave_ImportAlias=alias,
        leave_SimpleString=prose,
        leave_FormattedStringText=prose,
        leave_Comment=prose,
    )


def rename_backend_arguments(text: str, callee: str, old: str, new: str) -> str:
    """``text`` with every call of ``callee`` passing ``backend=old`` passing ``new``."""

    def rename(original: Any, updated: cst.Call) -> Any:
        if _last_name(updated.func) != callee:
            return updated
        args = [
            a.with_changes(value=_quoted(new))
            if a.keyword is not None and a.keyword.value == "backend" and _string(a.value) == old
            else a
            for a in updated.args
        ]
        return updated.with_changes(args=args)

    return _edit(text, leave_Call=rename)


def rename_in_function(text: str, function: str, old: str, new: str) -> str:
    """``text`` with the strings ``old`` written ``new`` in ``function`` and the top-level
    assignments of the names it reads (a heuristic and its ranks)."""
    tree = cst.parse_module(text)
    defs = [s for s in tree.body if isinstance(s, cst.FunctionDef) and s.name.value == function]
    read = {n.value for d in defs for n in m.findall(d, m.Name()) if isinstance(n, cst.Name)}

    def assigns_read(statement: cst.CSTNode) -> bool:
        if not isinstance(statement, cst.SimpleStatementLine):
            return False
        targets = [t.target for s in statement.body if isinstance(s, cst.Assign) for t in s.targets]
        targets += [s.target for s in statement.body if isinstance(s, cst.AnnAssign)]
        return any(isinstance(t, cst.Name) and t.value in read for t in targets)

    def rename(original: Any, updated: cst.SimpleString) -> Any:
        if updated.evaluated_value != old:
            return updated
        return _quoted(new).with_changes(lpar=updated.lpar, rpar=updated.rpar)

    strings = _transformer(leave_SimpleString=rename)
    body = [s.visit(strings) if s in defs or assigns_read(s) else s for s in tree.body]
    return tree.with_changes(body=body).code


def rename_module_name(text: str, old: str, new: str) -> str:
    """``text`` with the name ``old`` renamed ``new`` in code and ``__all__`` only."""
    spans: list[tuple[int, int, int, str]] = []  # (line, col, end col, replacement): bytes
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Name) and node.id == old:
            spans.append((node.lineno, node.col_offset, node.end_col_offset or 0, new))
        elif isinstance(node, ast.FunctionDef) and node.name == old:
            col = text.splitlines()[node.lineno - 1].encode().index(f"def {old}".encode()) + 4
            spans.append((node.lineno, col, col + len(old.encode()), new))
        elif isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == ["__all__"]:
            elements = getattr(node.value, "elts", [])
            spans += [
                (e.lineno, e.col_offset, e.end_col_offset or 0, f'"{new}"')
                for e in elements
                if isinstance(e, ast.Constant) and e.value == old
            ]
    lines = text.splitlines(keepends=True)
    for number, col, end, replacement in sorted(spans, reverse=True):
        raw = lines[number - 1].encode()
        lines[number - 1] = (raw[:col] + replacement.encode() + raw[end:]).decode()
    return "".join(lines)


def imported_feature(source: str) -> str | None:
    """The folder under flashinfer/experimental/ a module imports, if any."""
    for node in ast.walk(ast.parse(source)):
        names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
        names += [a.name for a in node.names] if isinstance(node, ast.Import) else []
        for parts in (n.split(".") for n in names):
            if parts[:2] == ["flashinfer", "experimental"] and len(parts) > 2:
                return parts[2]
    return None


def declared_backends(source: str) -> list[str]:
    """The upper-case names a support module declares as ``X = Backend(...)``."""
    return [
        node.targets[0].id
        for node in ast.parse(source).body
        if isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name)
        and node.targets[0].id.isupper()
        and isinstance(node.value, ast.Call)
        and isinstance(node.value.func, ast.Name)
        and node.value.func.id == "Backend"
    ]


def top_level_names(source: str) -> set[str]:
    """The names a module defines, imports or uses, and the strings it holds."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).partition(".")[0] for a in node.names)
        elif isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names.add(node.value)
    return names


def deprecated_function(name: str, target: str, message: str, doc: str) -> str:
    """Source of ``name``, ``@deprecated``, warning once with ``message``, calling ``target``."""
    pieces = textwrap.wrap(  # short lines: implicitly joined pieces split between words
        message, 60, drop_whitespace=False, break_long_words=False, break_on_hyphens=False
    )
    quoted = "(\n        " + "\n        ".join(json.dumps(p, ensure_ascii=False) for p in pieces)
    quoted += "\n    )"
    return (
        f"\n\n@deprecated({quoted}, category=None)\n"
        f"def {name}(*args: Any, **kwargs: Any) -> Any:\n"
        f'    """{doc}"""\n'
        f"    return call_deprecated({quoted}, {target}, *args, **kwargs)\n"
    )


def alias_module(old: str, new: str, api: str, version: str, expires: str, source: str) -> str:
    """An alias module left at ``old``: ``new``'s public functions deprecated, the rest
    through ``__getattr__``."""
    message = moved_module_used(old, new, version, expires)
    tree = ast.parse(source)
    listed = [
        ast.literal_eval(n.value)
        for n in tree.body
        if isinstance(n, ast.Assign) and [ast.unparse(t) for t in n.targets] == ["__all__"]
    ]
    text = (
        f'"""Deprecated alias of\n:mod:`{new}`:\n{api} graduated in {version} and its code '
        f"moved there.  This path works, warning\nonce, until {expires} (docs/lifecycle.rst).\n"
        '"""\n\nfrom typing import Any\n\nfrom typing_extensions import deprecated\n\n'
        f"import {new} as _moved\n"
        "from flashinfer.lifecycle import call_deprecated, moved_module_getattr\n\n"
        f'__getattr__ = moved_module_getattr("{old}", "{new}", "{version}", "{expires}")\n'
    )
    for n in tree.body:
        if isinstance(n, ast.FunctionDef) and not n.name.startswith("_"):
            if not listed or n.name in listed[-1]:
                doc = f"Deprecated alias of\n    :func:`{new}.{n.name}`.\n    "
                text += deprecated_function(n.name, f"_moved.{n.name}", message, doc)
    return text


def tombstone_module(name: str, version: str, instead: str, expires: str) -> str:
    """A removed API's module: its ``__getattr__`` says what to use instead."""
    return (
        f'"""{name} was removed in {version}; use {instead} instead (docs/lifecycle.rst).\n'
        f'This module keeps the tombstone until {expires}.\n"""\n\n'
        "from flashinfer.lifecycle import missing_attribute\n\n\n"
        "def __getattr__(name: str) -> object:\n"
        "    return missing_attribute(__name__, name)\n"
    )
