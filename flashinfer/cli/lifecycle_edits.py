"""The source edits ``flashinfer lifecycle`` makes in a checkout: each a function of file
texts, so a plan can be printed before anything is written.

What the codemod may edit (docs/lifecycle.rst, "What the codemod edits"): the feature's own
folder (moved or deleted), import paths of it anywhere under ``flashinfer/``, the marker and
``prefer=`` of the graduating declaration, the op's table line of a removed backend, the
declared history (``flashinfer/gating/history.py``, between its markers), ``CHANGELOG.md``'s
"Unreleased" section, and the generated docs (by running their writer).  Everything that
needs judgement (tests, prose in the docs, ranking a graduated backend in the heuristic) is
printed as a step left to the author.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable
from dataclasses import MISSING, fields

from flashinfer.gating.history import LifecycleRecord

__all__ = [
    "add_changelog_entry",
    "add_history_record",
    "drop_decorator",
    "drop_import_name",
    "drop_keyword",
    "drop_lines_naming",
    "record_source",
    "rename_first_argument",
    "rename_module_name",
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


def _function(tree: ast.Module, name: str) -> ast.FunctionDef:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    raise LookupError(f"no function {name!r}")


def _decorator_name(node: ast.expr) -> str:
    target = node.func if isinstance(node, ast.Call) else node
    return ast.unparse(target).rpartition(".")[2]


def drop_decorator(text: str, function: str, decorator: str) -> str:
    """``text`` without the ``@decorator(...)`` lines of ``function``."""
    return swap_decorator(text, function, decorator, None)


def swap_decorator(text: str, function: str, decorator: str, new: str | None) -> str:
    """``text`` with ``function``'s ``@decorator(...)`` (all its lines) replaced by the line
    ``@new`` (or dropped)."""
    node = _function(ast.parse(text), function)
    for d in node.decorator_list:
        if _decorator_name(d) == decorator:
            lines = text.splitlines(keepends=True)
            start, end = d.lineno - 1, d.end_lineno or d.lineno  # the '@' is on d.lineno
            indent = lines[start][: len(lines[start]) - len(lines[start].lstrip())]
            replacement = [] if new is None else [f"{indent}@{new}\n"]
            return "".join(lines[:start] + replacement + lines[end:])
    raise LookupError(f"{function} has no @{decorator}")


def drop_keyword(text: str, call: str, first_arg: str, keyword: str) -> str:
    """``text`` without ``keyword=...`` in the call ``call(first_arg, ...)`` (e.g. the
    ``prefer=`` of ``Backend("splitk", ...)``)."""
    tree = ast.parse(text)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and _decorator_name(node) == call
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value == first_arg
        ):
            for i, kw in enumerate(node.keywords):
                if kw.arg == keyword:
                    return _splice_out(text, node, i)
            return text
    raise LookupError(f"no {call}({first_arg!r}, ...)")


def rename_first_argument(text: str, call: str, old: str, new: str) -> str:
    """``text`` with ``call(old, ...)`` written ``call(new, ...)`` (a backend's declaration
    ``Backend("splitk", ...)``, on one line or several).  ``LookupError`` if there is none."""
    for node in ast.walk(ast.parse(text)):
        if (
            isinstance(node, ast.Call)
            and _decorator_name(node) == call
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value == old
        ):
            arg = node.args[0]
            start = _offset(text, arg.lineno, arg.col_offset)
            end = _offset(text, arg.end_lineno or arg.lineno, arg.end_col_offset or 0)
            return text[:start] + json.dumps(new) + text[end:]
    raise LookupError(f"no {call}({old!r}, ...)")


def _offset(text: str, line: int, col: int) -> int:
    lines = text.splitlines(keepends=True)
    return sum(len(x) for x in lines[: line - 1]) + len(lines[line - 1].encode()[:col].decode())


def _splice_out(text: str, call: ast.Call, index: int) -> str:
    kw = call.keywords[index]
    start = _offset(text, kw.lineno, kw.col_offset)
    end = _offset(text, kw.end_lineno or kw.lineno, kw.end_col_offset or 0)
    # Take the separating comma (and the space) before it with it.
    before = text[:start].rstrip()
    if before.endswith(","):
        start = len(before) - 1
    return text[:start] + text[end:]


def drop_import_name(text: str, module: str, name: str) -> str:
    """``text`` without ``name`` in ``from module import ...``, if nothing else uses it."""
    tree = ast.parse(text)
    if any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(tree)):
        return text  # still used
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == module:
            kept = [a for a in node.names if a.name != name]
            if len(kept) == len(node.names):
                continue
            lines = text.splitlines(keepends=True)
            start, end = node.lineno - 1, node.end_lineno or node.lineno
            new = "" if not kept else ast.unparse(ast.ImportFrom(module, kept, 0)) + "\n"
            return "".join(lines[:start]) + new + "".join(lines[end:])
    return text


def drop_lines_naming(text: str, drop: Callable[[str], bool]) -> str:
    """``text`` without the lines for which ``drop(line)`` (the line without its newline) is
    true, and without a comment line right above a dropped import.  A predicate, not a
    pattern: the names it compares come from the checkout, and a regex built from them
    could not be reviewed for linear time (tests/pr_checks/test_regex_linear_time.py)."""
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    for line in lines:
        if drop(line.rstrip("\r\n")):
            if out and out[-1].lstrip().startswith("#") and line.startswith("from "):
                out.pop()
            continue
        out.append(line)
    return "".join(out)


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
