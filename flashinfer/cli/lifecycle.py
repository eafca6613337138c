"""``flashinfer lifecycle``: take experimental work out of the experimental state.

::

    flashinfer lifecycle graduate OP:BACKEND [--apply]      an experimental backend: stable
    flashinfer lifecycle graduate API [--apply]             an experimental API: stable
    flashinfer lifecycle rename OP:OLD|API --to NEW [--apply]   OLD stays an alias
    flashinfer lifecycle remove OP:BACKEND|API [--apply]    deleted, leaving a tombstone

Without ``--apply`` the command prints the plan: each file it would write, move or delete,
the record it would add to the declared history (``flashinfer/gating/history.py``), the
CHANGELOG entry, and the steps left to the author.  With ``--apply`` it makes those edits in
the checkout (``--root``, by default the one this ``flashinfer`` is imported from), then
regenerates ``docs/generated/`` and formats what it wrote (``ruff format``, when installed).

A graduated feature's code moves from ``flashinfer/experimental/<feature>/`` to
``flashinfer/features/<feature>/`` (the same layout, now stable code); a promoted API's old
module paths stay as deprecated aliases for two minor releases.  The decisions are in
``docs/lifecycle.rst``.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from flashinfer.cli.common import UsageError
from flashinfer.cli.lifecycle_edits import (
    add_changelog_entry,
    add_history_record,
    drop_decorator,
    drop_import_name,
    drop_keyword,
    drop_lines_naming,
    record_source,
    rename_first_argument,
    rename_module_name,
    swap_decorator,
)
from flashinfer.gating.history import (
    Graduated,
    LifecycleRecord,
    Removed,
    Renamed,
    alias_message,
    expiry_after,
)
from flashinfer.gating.messages import moved_module_used

__all__ = ["Plan", "add_lifecycle_parser", "cmd_lifecycle", "plan_for"]

EXPERIMENTAL = "flashinfer/experimental"
FEATURES = "flashinfer/features"
HISTORY_FILE = "flashinfer/gating/history.py"
WRITE_DOCS = ["scripts/docs/write_dispatchers.py"]


@dataclass
class Plan:
    """What one exit changes: file texts by path (``None``: deleted), the record, the
    changelog line, and the steps left to the author."""

    title: str
    record: LifecycleRecord
    changes: dict[str, str | None] = field(default_factory=dict)
    moved: list[tuple[str, str]] = field(default_factory=list)
    extra_records: list[LifecycleRecord] = field(default_factory=list)
    left_to_author: list[str] = field(default_factory=list)


def add_lifecycle_parser(sub: Any) -> None:
    """``flashinfer lifecycle ACTION TARGET``."""
    p = sub.add_parser(
        "lifecycle",
        help="graduate, rename or remove experimental work (prints the plan; --apply edits)",
        description="Take experimental work out of the experimental state in a checkout: "
        "`graduate` a backend (OP:BACKEND) or an API, `rename` either (--to NEW; "
        "the old name stays an alias), or `remove` either (leaving a tombstone).  Prints "
        "the planned change; --apply makes it.  See docs/lifecycle.rst.",
    )
    p.add_argument("action", choices=("graduate", "rename", "remove"), help="the exit")
    p.add_argument(
        "target", help="OP:BACKEND for a backend (mm:splitk), or an API's name (fused_add_rmsnorm)"
    )
    p.add_argument("--to", dest="new_name", metavar="NEW", help="rename: the new name")
    p.add_argument(
        "--instead",
        help="remove: what to use instead (a backend, or an API's qualified name); default "
        "for a backend: the op's first stable backend",
    )
    p.add_argument("--apply", action="store_true", help="make the change in the checkout")
    p.add_argument("--root", help="the checkout to edit (default: this flashinfer's)")
    p.add_argument("--version", help="the release it happens in (default: the checkout's)")
    p.set_defaults(func=cmd_lifecycle)


def cmd_lifecycle(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Print the plan of ``args.action`` on ``args.target``; with ``--apply``, make it."""
    from flashinfer._version import __version__

    root = Path(args.root) if args.root else Path(__file__).resolve().parents[2]
    if not (root / HISTORY_FILE).is_file() or not (root / "CHANGELOG.md").is_file():
        raise UsageError(f"{root} is not a flashinfer checkout (no {HISTORY_FILE} or CHANGELOG.md)")
    if args.action == "rename" and not args.new_name:
        raise UsageError("rename needs the new name: --to NEW")
    version = args.version or __version__
    plan = plan_for(root, args.action, args.target, version, args)
    _print_plan(root, plan, out)
    if not args.apply:
        print("\n(nothing written: add --apply to make this change)", file=out)
        return 0
    _apply(root, plan)
    _regenerate(root, plan, err)
    print("\napplied.", file=out)
    return 0


def plan_for(root: Path, action: str, target: str, version: str, args: Any = None) -> Plan:
    """The plan of ``action`` (graduate, remove, rename) on ``target`` in ``root``."""
    op_name, colon, backend = target.partition(":")
    if colon:
        op = _op(op_name)
        if action == "graduate":
            return _graduate_backend(root, op, backend, version)
        if action == "remove":
            instead = getattr(args, "instead", None) or op.stable_backends[0]
            return _remove_backend(root, op, backend, version, instead)
        return _rename_backend(root, op, backend, args.new_name, version)
    api = _experimental_api(target)
    if action == "graduate":
        return _graduate_api(root, api, version)
    if action == "remove":
        instead = getattr(args, "instead", None)
        if not instead:
            raise UsageError("removing an API needs --instead (what callers should use)")
        return _remove_api(root, api, version, instead)
    return _rename_api(root, api, args.new_name, version)


# -- finding what is named ---------------------------------------------------------------------


def _op(name: str) -> Any:
    from flashinfer.dispatch.backend_names import flashinfer_apis

    api = flashinfer_apis().get(name)
    if api is None:
        raise UsageError(f"unknown op {name!r}; ops with backends: {', '.join(flashinfer_apis())}")
    return api.dispatcher


def _experimental_api(name: str) -> Any:
    from flashinfer.gating.lifecycle import experimental_features

    apis = {f.api.rpartition(".")[2]: f for f in experimental_features() if f.kind == "api"}
    feature = apis.get(name)
    if feature is None:
        raise UsageError(
            f"{name!r} is not an experimental API; experimental APIs: {', '.join(apis) or 'none'}"
            " (a backend is named OP:BACKEND)"
        )
    return feature


def _experimental_backend(op: Any, backend: str) -> tuple[str, str]:
    """``(feature, checker's module)`` of an experimental backend of ``op``."""
    from flashinfer.gating.records import feature_of_module

    if backend not in op.backend_checks:
        raise UsageError(
            f"{op.api_name} has no backend {backend!r}; its backends: {list(op.backend_checks)}"
        )
    if backend not in op.experimental_backends:
        raise UsageError(f"backend {backend!r} of {op.api_name} is not experimental")
    module = op.backend_checks[backend].__module__
    feature = feature_of_module(module)
    if feature is None:
        raise UsageError(f"backend {backend!r} is not defined under flashinfer/experimental/")
    return feature, module


# -- reading and writing the checkout -----------------------------------------------------------


def _read(root: Path, path: str, plan: Plan) -> str:
    if path in plan.changes:
        text = plan.changes[path]
        assert text is not None
        return text
    return (root / path).read_text(encoding="utf-8")


def _python_files(root: Path) -> list[str]:
    return sorted(
        p.relative_to(root).as_posix()
        for p in (root / "flashinfer").rglob("*.py")
        if "__pycache__" not in p.parts
    )


def _feature_files(root: Path, feature: str) -> list[str]:
    folder = root / EXPERIMENTAL / feature
    return sorted(
        p.relative_to(root).as_posix()
        for p in folder.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    )


def _move_feature(root: Path, feature: str, plan: Plan) -> None:
    """The feature's folder moves to ``flashinfer/features/``; every import of it follows."""
    old_mod, new_mod = f"flashinfer.experimental.{feature}", f"flashinfer.features.{feature}"
    old_dir, new_dir = f"{EXPERIMENTAL}/{feature}", f"{FEATURES}/{feature}"
    for path in _feature_files(root, feature):
        text = _read(root, path, plan).replace(old_mod, new_mod).replace(old_dir, new_dir)
        plan.changes[path] = None
        plan.changes[new_dir + path[len(old_dir) :]] = text
        plan.moved.append((path, new_dir + path[len(old_dir) :]))
    for path in _python_files(root):
        if path.startswith(old_dir + "/"):
            continue
        text = _read(root, path, plan)
        if old_mod in text:
            plan.changes[path] = text.replace(old_mod, new_mod).replace(
                "The only module-level import from flashinfer.experimental",
                "The graduated feature's module-level import",
            )


def _history_and_changelog(root: Path, plan: Plan, entry: str) -> None:
    for record in (plan.record, *plan.extra_records):
        plan.changes[HISTORY_FILE] = add_history_record(_read(root, HISTORY_FILE, plan), record)
    plan.changes["CHANGELOG.md"] = add_changelog_entry(_read(root, "CHANGELOG.md", plan), entry)


# -- the exits ------------------------------------------------------------------------------------


def _graduate_backend(root: Path, op: Any, backend: str, version: str) -> Plan:
    feature, module = _experimental_backend(op, backend)
    record = Graduated(op.api_key, version, backend=backend)
    plan = Plan(f"graduate backend {backend!r} of {op.api_name} (feature {feature})", record)
    support = module.replace(".", "/") + ".py"
    checker = op.backend_checks[backend]
    text = _read(root, support, plan)
    text = drop_decorator(text, checker.__name__, "experimental_backend")
    text = drop_keyword(text, "Backend", backend, "prefer")
    text = drop_import_name(text, "flashinfer.backend_dispatch", "experimental_backend")
    plan.changes[support] = text
    _move_feature(root, feature, plan)
    _history_and_changelog(
        root,
        plan,
        f"Graduated (issue lifecycle): backend `{backend}` of `{op.api_name}` is stable since "
        f'{version}. `backend="{backend}"` works as before without an `ExperimentalWarning`; '
        '`"auto"` and the autotuner consider it with the gate off; tuning files that '
        "recorded it as experimental are used as they are.",
    )
    plan.left_to_author += [
        f"rank {backend!r} in {op.api_name}'s heuristic (its prefer= was dropped: a stable "
        "backend may not declare one; until then the heuristic ranks it last)",
        f"move its tests from tests/experimental/ into the stable suite (tests of the gate and "
        f"the warning for {backend!r} no longer hold)",
        f"update prose that calls it experimental ({op.api_name}'s docstring, docs/*.rst)",
    ]
    return plan


def _graduate_api(root: Path, feature: Any, version: str) -> Plan:
    from flashinfer.gating.records import feature_of_module

    name = feature.api.rpartition(".")[2]
    record = Graduated(feature.api, version)
    plan = Plan(f"promote API {name} ({feature.api})", record)
    path = feature.module.replace(".", "/") + ".py"
    text = _read(root, path, plan)
    text = swap_decorator(text, name, "flashinfer_experimental_api", "flashinfer_api")
    text = text.replace(
        "from flashinfer.api_logging import flashinfer_experimental_api",
        "from flashinfer.api_logging import flashinfer_api",
    )
    plan.changes[path] = text
    folder = _implementation_feature(root, feature, plan)
    if folder is not None and feature_of_module(f"flashinfer.experimental.{folder}"):
        old_paths = [p for p in _feature_files(root, folder) if p.endswith(".py")]
        _move_feature(root, folder, plan)
        expires = expiry_after(version)
        for old in old_paths:  # the experimental import paths: deprecated aliases
            old_mod = old[: -len(".py")].replace("/", ".")
            new_mod = old_mod.replace("flashinfer.experimental.", "flashinfer.features.", 1)
            if old.endswith("/__init__.py"):  # a feature's __init__ stays a docstring
                plan.changes[old] = (
                    f'"""Deprecated: {name} graduated in {version}; its code is in\n'
                    f":mod:`{new_mod.removesuffix('.__init__')}`.  The modules here are aliases "
                    f'until {expires}.\n"""\n'
                )
                continue
            moved = plan.changes[
                old_mod.replace(".", "/").replace("experimental", "features", 1) + ".py"
            ]
            assert moved is not None
            plan.changes[old] = _alias_module(old_mod, new_mod, name, version, expires, moved)
        package = f"flashinfer.experimental.{folder}"
        plan.extra_records.append(
            Renamed(
                package.replace("experimental", "features", 1),
                package,
                package.replace("experimental", "features", 1),
                version,
                expires,
                backend=False,
            )
        )
    _history_and_changelog(
        root,
        plan,
        f"Graduated (issue lifecycle): `{name}` is a stable API since {version}; calling it "
        "no longer warns. Its implementation moved from `flashinfer.experimental` to "
        f"`flashinfer.features`; the old import paths are deprecated aliases until "
        f"{expiry_after(version)}.",
    )
    plan.left_to_author += [
        f"add {name} to the stable API reference (docs/api/) and remove it from "
        "docs/experimental.rst",
        f"move its tests from tests/experimental/ into the stable suite (tests of the "
        f"ExperimentalWarning of {name} no longer hold)",
    ]
    return plan


def _implementation_feature(root: Path, feature: Any, plan: Plan) -> str | None:
    """The folder under flashinfer/experimental/ the API's module imports, if any."""
    text = _read(root, feature.module.replace(".", "/") + ".py", plan)
    marker = "flashinfer.experimental."
    at = text.find(marker)
    if at < 0:
        return None
    rest = text[at + len(marker) :]
    name = ""
    for c in rest:
        if not (c.isalnum() or c == "_"):
            break
        name += c
    return name or None


def _public_functions(source: str) -> list[str]:
    """The public functions a module defines at top level (its ``__all__``'s, if it has one)."""
    tree = ast.parse(source)
    listed: set[str] | None = None
    for node in tree.body:
        if isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == ["__all__"]:
            listed = set(ast.literal_eval(node.value))
    return [
        n.name
        for n in tree.body
        if isinstance(n, ast.FunctionDef)
        and not n.name.startswith("_")
        and (listed is None or n.name in listed)
    ]


def _short_literal(text: str) -> str:
    """``text`` as a parenthesised string literal of implicitly joined pieces, split between
    words, so each line stays short (a checker reads the pieces as one literal)."""
    pieces = textwrap.wrap(
        text, 60, drop_whitespace=False, break_long_words=False, break_on_hyphens=False
    )
    assert "".join(pieces) == text
    quoted = [json.dumps(p, ensure_ascii=False) for p in pieces]
    return "(\n        " + "\n        ".join(quoted) + "\n    )"


def _alias_module(old: str, new: str, api: str, version: str, expires: str, source: str) -> str:
    """An alias module left at ``old``: each public function of ``new`` (``source``) as a
    function marked ``@deprecated`` in source, so type checkers flag its uses, warning once
    when called; any other name through ``__getattr__`` (warning once too)."""
    message = _short_literal(moved_module_used(old, new, version, expires))
    lines = [
        f'"""Deprecated alias of\n:mod:`{new}`:\n{api} graduated in {version} and its code '
        f"moved there.  This path works, warning\nonce, until {expires} (docs/lifecycle.rst).\n"
        '"""',
        "",
        "from typing import Any",
        "",
        "from typing_extensions import deprecated",
        "",
        f"import {new} as _moved",
        "from flashinfer.lifecycle import call_deprecated, moved_module_getattr",
        "",
        f'__getattr__ = moved_module_getattr("{old}", "{new}", "{version}", "{expires}")',
    ]
    for function in _public_functions(source):
        lines += [
            "",
            "",
            f"@deprecated({message}, category=None)",
            f"def {function}(*args: Any, **kwargs: Any) -> Any:",
            f'    """Deprecated alias of\n    :func:`{new}.{function}`.\n    """',
            f"    return call_deprecated({message}, _moved.{function}, *args, **kwargs)",
        ]
    return "\n".join(lines) + "\n"


def _remove_backend(root: Path, op: Any, backend: str, version: str, instead: str) -> Plan:
    feature, module = _experimental_backend(op, backend)
    if instead not in op.backend_checks or instead == backend:
        raise UsageError(
            f"--instead must be another backend of {op.api_name}: {list(op.backend_checks)}"
        )
    record = Removed(op.api_key, backend, version, instead, expiry_after(version))
    plan = Plan(f"remove backend {backend!r} of {op.api_name} (feature {feature})", record)
    old_mod = f"flashinfer.experimental.{feature}"
    names = _declared_names(root, module, plan)
    for path in _feature_files(root, feature):
        plan.changes[path] = None
    for path in _python_files(root):
        if path.startswith(f"{EXPERIMENTAL}/{feature}/"):
            continue
        text = _read(root, path, plan)
        if old_mod not in text:
            continue
        text = drop_lines_naming(text, lambda line: _imports_from(line, old_mod))
        for name in names:  # the table's line (`SPLITK,`)
            text = drop_lines_naming(text, _table_line(name))
        plan.changes[path] = text
    test = f"tests/experimental/test_{feature}.py"
    if (root / test).exists():
        plan.changes[test] = None
    _history_and_changelog(
        root,
        plan,
        f"Removed: experimental backend `{backend}` of `{op.api_name}` (in {version}). "
        f'`backend="{backend}"` raises `BackendSupportedError` saying to use '
        f'`backend="{instead}"`; tuning entries naming it are skipped.',
    )
    plan.left_to_author += [
        f"remove mentions of {backend!r} from {op.api_name}'s docstring and the docs",
        "close the tracking issue with the reason",
    ]
    return plan


def _table_line(name: str) -> Callable[[str], bool]:
    """Whether a line is ``name``'s entry in a backend table (indented ``NAME,``)."""

    def is_entry(line: str) -> bool:
        return line[:1].isspace() and line.strip() == f"{name},"

    return is_entry


def _imports_from(line: str, module: str) -> bool:
    """Whether ``line`` is ``from <module> import ...`` (the module itself, not one whose
    name merely starts with it)."""
    rest = line.removeprefix(f"from {module}")
    return rest != line and (rest == "" or not (rest[0].isalnum() or rest[0] == "_"))


def _declared_names(root: Path, module: str, plan: Plan) -> list[str]:
    """The upper-case names a feature's support module declares (its ``Backend`` values)."""
    text = _read(root, module.replace(".", "/") + ".py", plan)
    return [
        node.targets[0].id
        for node in ast.parse(text).body
        if isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name)
        and node.targets[0].id.isupper()
        and isinstance(node.value, ast.Call)
        and isinstance(node.value.func, ast.Name)
        and node.value.func.id == "Backend"
    ]


def _remove_api(root: Path, feature: Any, version: str, instead: str) -> Plan:
    name = feature.api.rpartition(".")[2]
    record = Removed(feature.api, name, version, instead, expiry_after(version), backend=False)
    plan = Plan(f"remove API {name} ({feature.api})", record)
    module_path = feature.module.replace(".", "/") + ".py"
    folder = _implementation_feature(root, feature, plan)
    if folder is not None:
        for path in _feature_files(root, folder):
            plan.changes[path] = None
    # The module keeps a tombstone in place of the API: its __getattr__ says what to use.
    plan.changes[module_path] = (
        f'"""{name} was removed in {version}; use {instead} instead (docs/lifecycle.rst).\n'
        f'This module keeps the tombstone until {expiry_after(version)}.\n"""\n\n'
        "from flashinfer.lifecycle import missing_attribute\n\n\n"
        "def __getattr__(name: str) -> object:\n"
        "    return missing_attribute(__name__, name)\n"
    )
    init = _read(root, "flashinfer/__init__.py", plan)
    ops_line = f"    from {feature.module} import {name} as {name}"
    plan.changes["flashinfer/__init__.py"] = drop_lines_naming(init, ops_line.__eq__)
    test = f"tests/experimental/test_{name}.py"
    if (root / test).exists():
        plan.changes[test] = None
    _history_and_changelog(
        root,
        plan,
        f"Removed: experimental API `{name}` (in {version}). `flashinfer.{name}` raises "
        f"`AttributeError` saying to use `{instead}`.",
    )
    plan.left_to_author += [
        f"remove {name}'s other tests and its mentions in the docs",
        "close the tracking issue with the reason",
    ]
    return plan


def _rename_backend(root: Path, op: Any, old: str, new: str, version: str) -> Plan:
    from flashinfer.dispatch.declarations import backend_name_problem

    problem = backend_name_problem(new)
    if problem is not None:
        raise UsageError(problem)
    if old not in op.backend_checks:
        raise UsageError(f"{op.api_name} has no backend {old!r}")
    if new in op.backend_checks:
        raise UsageError(f"{op.api_name} already has a backend {new!r}")
    record = Renamed(op.api_key, old, new, version, expiry_after(version))
    plan = Plan(f"rename backend {old!r} of {op.api_name} to {new!r}", record)
    checker = op.backend_checks[old]
    path = checker.__module__.replace(".", "/") + ".py"
    text = _read(root, path, plan)
    try:
        plan.changes[path] = rename_first_argument(text, "Backend", old, new)
    except LookupError:
        raise UsageError(
            f"found no Backend({old!r}, ...) declaration in {path}; rename it by hand and add "
            f"the record {record_source(record).strip()} to {HISTORY_FILE}"
        ) from None
    _history_and_changelog(
        root,
        plan,
        f"Renamed: backend `{old}` of `{op.api_name}` is `{new}` (in {version}); "
        f'`backend="{old}"` works, warning once, until {expiry_after(version)}; tuning '
        "entries under the old name are read under the new one.",
    )
    plan.left_to_author.append(f"update tests and docs that write backend={old!r}")
    return plan


def _rename_api(root: Path, feature: Any, new: str, version: str) -> Plan:
    """An experimental API's new name: its ``def`` and every use in its module, its line in
    the ops' block; the old name stays in the module as a function marked ``@deprecated``
    (type checkers flag it; a call warns once, then runs the API under its new name)."""
    if not new.isidentifier():
        raise UsageError(f"{new!r} is not a Python name")
    module = feature.module
    name = feature.api.rpartition(".")[2]
    expires = expiry_after(version)
    record = Renamed(
        f"{module}.{new}", f"{module}.{name}", f"{module}.{new}", version, expires, backend=False
    )
    plan = Plan(f"rename API {name} ({feature.api}) to {new}", record)
    path = module.replace(".", "/") + ".py"
    text = rename_module_name(_read(root, path, plan), name, new)
    quoted = _short_literal(alias_message(record))
    if "from typing_extensions import deprecated" not in text:
        text = text.replace(
            "from __future__ import annotations\n",
            "from __future__ import annotations\n\nfrom typing_extensions import deprecated\n",
            1,
        )
    if "from flashinfer.lifecycle import call_deprecated" not in text:
        text = text.replace(
            "\n__all__", "\nfrom flashinfer.lifecycle import call_deprecated\n\n__all__", 1
        )
    text += (
        f"\n\n@deprecated({quoted}, category=None)\n"
        f"def {name}(*args: Any, **kwargs: Any) -> Any:\n"
        f'    """Deprecated alias of :func:`{new}` (renamed in {version}, until {expires})."""\n'
        f"    return call_deprecated({quoted}, {new}, *args, **kwargs)\n"
    )
    if "from typing import Any" not in text:
        text = text.replace(
            "from __future__ import annotations\n",
            "from __future__ import annotations\n\nfrom typing import Any\n",
            1,
        )
    plan.changes[path] = text
    init = _read(root, "flashinfer/__init__.py", plan)
    plan.changes["flashinfer/__init__.py"] = init.replace(
        f"    from {module} import {name} as {name}\n", f"    from {module} import {new} as {new}\n"
    )
    old_doc = f"docs/generated/dispatchers/{name}.py"
    if (root / old_doc).exists():
        plan.changes[old_doc] = None
    _history_and_changelog(
        root,
        plan,
        f"Renamed: experimental API `{name}` is `{new}` (in {version}); `flashinfer.{name}` "
        f"works as a deprecated alias, warning once, until {expires}.",
    )
    plan.left_to_author.append(f"update tests and docs that call {name}")
    return plan


# -- printing and applying -------------------------------------------------------------------------


def _print_plan(root: Path, plan: Plan, out: TextIO) -> None:
    print(f"flashinfer lifecycle: {plan.title}", file=out)
    print(f"\nrecords added to {HISTORY_FILE}:", file=out)
    for record in (plan.record, *plan.extra_records):
        print(record_source(record).rstrip(), file=out)
    moved = dict(plan.moved)
    targets = set(moved.values())
    print("\nfiles:", file=out)
    for old, new in plan.moved:
        print(f"  move    {old} -> {new}", file=out)
    for path, text in sorted(plan.changes.items()):
        if path in targets:
            continue
        if text is None:
            if path not in moved:
                print(f"  delete  {path}", file=out)
            continue
        if path in moved:
            print(f"  alias   {path} (a deprecated alias of the moved module)", file=out)
            continue
        before = (root / path).read_text(encoding="utf-8") if (root / path).exists() else ""
        if before == text:
            continue
        diff = difflib.unified_diff(before.splitlines(), text.splitlines(), lineterm="", n=0)
        changed = sum(1 for d in diff if d[:1] in "+-" and d[:3] not in ("+++", "---"))
        print(f"  {'edit   ' if before else 'create '} {path} ({changed} lines)", file=out)
    print(f"  run     {' '.join(WRITE_DOCS)} (docs/generated/)", file=out)
    if plan.left_to_author:
        print("\nleft to the author (needs judgement):", file=out)
        for step in plan.left_to_author:
            print(f"  - {step}", file=out)


def _apply(root: Path, plan: Plan) -> None:
    for path, text in plan.changes.items():
        target = root / path
        if text is None:
            if target.exists():
                target.unlink()
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    for path, text in plan.changes.items():  # an emptied folder goes (its caches with it)
        folder = (root / path).parent
        if text is not None or not folder.exists():
            continue
        left = [p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
        if not left:
            shutil.rmtree(folder)


def _regenerate(root: Path, plan: Plan, err: TextIO) -> None:
    written = [
        str(root / p) for p, t in plan.changes.items() if t is not None and p.endswith(".py")
    ]
    ruff = shutil.which("ruff")
    if ruff is not None and written:  # imports sorted, then formatted, as the checks want
        subprocess.run(
            [ruff, "check", "-q", "--fix", "--select", "I", *written], cwd=root, check=False
        )
        subprocess.run([ruff, "format", "-q", *written], cwd=root, check=False)
    env = dict(os.environ, PYTHONPATH=str(root))
    for script in (WRITE_DOCS,):
        done = subprocess.run(
            [sys.executable, *script], cwd=root, env=env, capture_output=True, text=True
        )
        if done.returncode != 0:
            print(f"note: {' '.join(script)} failed:\n{done.stdout}{done.stderr}", file=err)
