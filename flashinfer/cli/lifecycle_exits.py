"""The plans of ``flashinfer lifecycle``'s exits (graduate, rename, remove): what each
writes, moves and deletes in a checkout, the records it adds to the declared history, and the
steps it leaves to the author; :mod:`flashinfer.cli.lifecycle` prints and applies them.
Loaded when the command runs (it reads source through LibCST).
"""

from __future__ import annotations

import ast
import json
import keyword
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flashinfer.api_modules import OPS
from flashinfer.cli.common import UsageError
from flashinfer.cli.lifecycle_edits import (
    add_changelog_entry,
    add_history_record,
    drop_decorator,
    drop_elements,
    drop_import_name,
    drop_imports,
    drop_keyword,
    move_package,
    record_source,
    rename_backend_arguments,
    rename_declaration,
    rename_in_function,
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

__all__ = ["EXPERIMENTAL", "FEATURES", "HISTORY_FILE", "Plan", "api_name_problem", "plan_for"]

EXPERIMENTAL = "flashinfer/experimental"
FEATURES = "flashinfer/features"
HISTORY_FILE = "flashinfer/gating/history.py"


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
    verify: str = ""  # Python run in the checkout after writing: it must import and pass


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
        text = _read(root, path, plan)
        if path.endswith(".py"):
            text = move_package(text, old_mod, new_mod, old_dir, new_dir)
        plan.changes[path] = None
        plan.changes[new_dir + path[len(old_dir) :]] = text
        plan.moved.append((path, new_dir + path[len(old_dir) :]))
    for path in _python_files(root):
        if path.startswith(old_dir + "/"):
            continue
        text = _read(root, path, plan)
        if old_mod in text:
            moved = move_package(text, old_mod, new_mod, old_dir, new_dir)
            if moved != text:
                plan.changes[path] = moved.replace(
                    "The only module-level import from flashinfer.experimental",
                    "The graduated feature's module-level import",
                )


def _history_and_changelog(root: Path, plan: Plan, entry: str) -> None:
    for record in (plan.record, *plan.extra_records):
        plan.changes[HISTORY_FILE] = add_history_record(_read(root, HISTORY_FILE, plan), record)
    plan.changes["CHANGELOG.md"] = add_changelog_entry(_read(root, "CHANGELOG.md", plan), entry)


def _record_removal(root: Path, plan: Plan, tested: str, entry: str, step: str) -> None:
    """What every removal does last: its test file goes, the history and CHANGELOG say
    so, and the author is left ``step`` and closing the tracking issue."""
    test = f"tests/experimental/test_{tested}.py"
    if (root / test).exists():
        plan.changes[test] = None
    _history_and_changelog(root, plan, entry)
    plan.left_to_author += [step, "close the tracking issue with the reason"]


def _issue(marked: Any) -> str:
    """The tracking issue a graduation's CHANGELOG entry names, from the marker's metadata."""
    info = getattr(marked, "experimental_info", None) or getattr(marked, "info", None)
    issue = getattr(info, "tracking_issue", None)
    if not issue:
        return "no tracking issue recorded"
    return f"issue {issue}" if str(issue).isdigit() else str(issue)


# -- the exits ------------------------------------------------------------------------------------


def _graduate_backend(root: Path, op: Any, backend: str, version: str) -> Plan:
    feature, module = _experimental_backend(op, backend)
    record = Graduated(op.api_key, version, backend=backend)
    plan = Plan(f"graduate backend {backend!r} of {op.api_name} (feature {feature})", record)
    support = module.replace(".", "/") + ".py"
    checker = op.backend_checks[backend]
    text = _read(root, support, plan)
    text = drop_decorator(text, checker.__name__, "experimental_backend")
    before = text
    text = drop_keyword(text, "Backend", backend, "prefer", check=checker.__name__)
    dropped_prefer = text != before
    text = drop_import_name(text, "flashinfer.backend_dispatch", "experimental_backend")
    plan.changes[support] = text
    plan.verify = _backend_check(op, backend, "in op.stable_backends")
    _move_feature(root, feature, plan)
    _history_and_changelog(
        root,
        plan,
        f"Graduated ({_issue(checker)}): backend `{backend}` of `{op.api_name}` is stable since "
        f'{version}. `backend="{backend}"` works as before without an `ExperimentalWarning`; '
        '`"auto"` and the autotuner consider it with the gate off; tuning files that '
        "recorded it as experimental are used as they are.",
    )
    plan.left_to_author += [
        f"rank {backend!r} in {op.api_name}'s heuristic ("
        + (
            "its prefer= was dropped: a stable backend may not declare one; "
            if dropped_prefer
            else ""
        )
        + "until then the heuristic ranks it last)",
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
        f"Graduated ({_issue(feature)}): `{name}` is a stable API since {version}; calling it "
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
    tree = ast.parse(_read(root, feature.module.replace(".", "/") + ".py", plan))
    for node in ast.walk(tree):
        names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
        names += [a.name for a in node.names] if isinstance(node, ast.Import) else []
        for name in names:
            parts = name.split(".")
            if parts[:2] == ["flashinfer", "experimental"] and len(parts) > 2:
                return parts[2]
    return None


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
        # The table's entry (`SPLITK,`), then the imports (the lines kept are the result's).
        edited, kept = drop_imports(drop_elements(text, names), old_mod)
        if edited != text:
            plan.changes[path] = edited
        plan.left_to_author += [
            f"{path}:{line}: an import of {old_mod} inside a function or class is left in "
            "place; remove the code that uses it"
            for line in kept
        ]
    plan.verify = _backend_check(op, backend, "not in op.backend_checks")
    _record_removal(
        root,
        plan,
        feature,
        f"Removed: experimental backend `{backend}` of `{op.api_name}` (in {version}). "
        f'`backend="{backend}"` raises `BackendSupportedError` saying to use '
        f'`backend="{instead}"`; tuning entries naming it are skipped.',
        f"remove mentions of {backend!r} from {op.api_name}'s docstring and the docs",
    )
    return plan


def _backend_check(op: Any, backend: str, condition: str) -> str:
    """The check run after writing: ``backend`` (of ``op``) meets ``condition``."""
    return (
        "from flashinfer.dispatch.backend_names import flashinfer_apis\n"
        f"op = flashinfer_apis()[{op.api_name!r}].dispatcher\n"
        f"assert {backend!r} {condition}, "
        f"({op.api_name + ': backend ' + repr(backend) + ' not ' + condition!r}, "
        "list(op.backend_checks))\n"
    )


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
    plan.changes["flashinfer/__init__.py"] = drop_import_name(init, feature.module, name)
    _record_removal(
        root,
        plan,
        name,
        f"Removed: experimental API `{name}` (in {version}). `flashinfer.{name}` raises "
        f"`AttributeError` saying to use `{instead}`.",
        f"remove {name}'s other tests and its mentions in the docs",
    )
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
    try:  # the op's own declaration: the one whose check= is the op's checker
        plan.changes[path] = rename_declaration(text, "Backend", old, new, checker.__name__)
    except LookupError as exc:
        raise UsageError(
            f"{path}: {exc}; rename it by hand and add the record "
            f"{record_source(record).strip()} to {HISTORY_FILE}"
        ) from None
    # A rename keeps every choice: the heuristic ranks by name, and the package's own calls
    # that name the backend would otherwise warn users about code they never wrote.
    heuristic = op.heuristic_func
    if heuristic is not None:
        where = heuristic.__module__.replace(".", "/") + ".py"
        text = _read(root, where, plan)
        ranked = rename_in_function(text, heuristic.__name__, old, new)
        if ranked != text:
            plan.changes[where] = ranked
    for caller in _python_files(root):
        text = _read(root, caller, plan)
        if f"{old}" in text and op.api_name in text:
            edited = rename_backend_arguments(text, op.api_name, old, new)
            if edited != text:
                plan.changes[caller] = edited
    plan.verify = _backend_check(op, new, "in op.backend_checks") + (
        f"assert {old!r} in op.backend_aliases, {'the alias ' + repr(old) + ' leads nowhere'!r}\n"
    )
    _history_and_changelog(
        root,
        plan,
        f"Renamed: backend `{old}` of `{op.api_name}` is `{new}` (in {version}); "
        f'`backend="{old}"` works, warning once, until {expiry_after(version)}; tuning '
        "entries under the old name are read under the new one.",
    )
    plan.left_to_author.append(
        f"update tests, docs and messages that write backend={old!r} (in prose, not code)"
    )
    return plan


def _rename_api(root: Path, feature: Any, new: str, version: str) -> Plan:
    """An experimental API's new name: its ``def`` and every use in its module, its line in
    the ops' block; the old name stays in the module as a function marked ``@deprecated``
    (type checkers flag it; a call warns once, then runs the API under its new name)."""
    module = feature.module
    name = feature.api.rpartition(".")[2]
    path = module.replace(".", "/") + ".py"
    taken = set(OPS)  # the package's names and the module's: the new name must be free
    for source in ("flashinfer/__init__.py", path):
        taken |= _top_level_names((root / source).read_text(encoding="utf-8"))
    problem = api_name_problem(new, name, taken)
    if problem is not None:
        raise UsageError(f"--to {new!r}: {problem}; nothing written")
    expires = expiry_after(version)
    record = Renamed(
        f"{module}.{new}", f"{module}.{name}", f"{module}.{new}", version, expires, backend=False
    )
    plan = Plan(f"rename API {name} ({feature.api}) to {new}", record)
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
    plan.verify = (
        f"import flashinfer, {module} as m\n"
        f"assert callable(m.{new}) and flashinfer.{new} is m.{new}\n"
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


def api_name_problem(new: str, old: str, taken: Iterable[str]) -> str | None:
    """Why ``new`` cannot be the new name of the API ``old`` (``None``: it can): a public,
    ASCII Python name (the torch operator is named after it, and Python folds other names
    by NFKC: ``\ufb01norm`` is ``finorm``), no keyword, not ``old`` itself, and none of the
    names ``taken`` (the package's and the API module's)."""
    if not (new.isascii() and new.isidentifier()):
        return "not a Python name in ASCII letters, digits and _ (not starting with a digit)"
    if keyword.iskeyword(new) or keyword.issoftkeyword(new):
        return "a Python keyword"
    if new.startswith("_"):
        return "a private name (it starts with _); an API's name is public"
    if new == old:
        return f"it is {old}'s own name"
    if new in set(taken):
        return f"the name {new!r} is taken (flashinfer or the API's module has it)"
    return None


def _top_level_names(source: str) -> set[str]:
    """The names a module defines, imports or lists anywhere in it (a name used by any
    scope is spared), and the strings it holds (``__all__``'s entries)."""
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
