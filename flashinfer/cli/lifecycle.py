"""``flashinfer lifecycle graduate|rename|remove`` (docs/lifecycle.rst): print the
:class:`Plan`; ``--apply`` writes it, checks the checkout in a fresh interpreter (undoing
every file if that fails), regenerates ``docs/generated/`` and formats what it wrote.
"""

from __future__ import annotations

import argparse
import difflib
import keyword
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from flashinfer.api_modules import OPS
from flashinfer.cli import lifecycle_edits as edits
from flashinfer.cli.common import UsageError
from flashinfer.gating.history import (
    Graduated,
    LifecycleRecord,
    Removed,
    Renamed,
    alias_message,
    expiry_after,
)

__all__ = ["Plan", "api_name_problem", "cmd_lifecycle", "minor_release", "plan_for"]

EXPERIMENTAL = "flashinfer/experimental"
FEATURES = "flashinfer/features"
HISTORY_FILE = "flashinfer/gating/history.py"
WRITE_DOCS = ["scripts/docs/write_dispatchers.py"]


@dataclass
class Plan:
    """One exit: file texts by path (``None``: deleted), the records, the steps left to the
    author; ``verify`` must pass in the edited checkout."""

    root: Path
    title: str
    record: LifecycleRecord
    changes: dict[str, str | None] = field(default_factory=dict)
    moved: list[tuple[str, str]] = field(default_factory=list)
    extra_records: list[LifecycleRecord] = field(default_factory=list)
    left_to_author: list[str] = field(default_factory=list)
    verify: str = ""
    changelog: str = ""  # the CHANGELOG entry

    def read(self, path: str) -> str:
        text = self.changes[path] if path in self.changes else (self.root / path).read_text("utf-8")
        assert text is not None
        return text


def cmd_lifecycle(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from flashinfer._version import __version__

    root = Path(args.root) if args.root else Path(__file__).resolve().parents[2]
    if not (root / HISTORY_FILE).is_file() or not (root / "CHANGELOG.md").is_file():
        raise UsageError(f"{root} is not a flashinfer checkout (no {HISTORY_FILE} or CHANGELOG.md)")
    if args.action == "rename" and not args.new_name:
        raise UsageError("rename needs the new name: --to NEW")
    version = minor_release(args.version or __version__, given=args.version is not None)
    plan = plan_for(root, args.action, args.target, version, args)
    _print_plan(root, plan, out)
    if not args.apply:
        print("\n(nothing written: add --apply to make this change)", file=out)
        return 0
    originals = {p: (root / p).read_bytes() if (root / p).is_file() else None for p in plan.changes}
    _write(root, {p: None if t is None else t.encode() for p, t in plan.changes.items()})
    # A wrong edit is undone, never reported as applied.
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLASHINFER_")}
    script = "import warnings\nwarnings.simplefilter('ignore')\nimport flashinfer\n" + plan.verify
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=root,
        env={**env, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        _write(root, originals)
        problem = f"the edited checkout fails its check:\n{done.stderr.strip()[-3000:]}"
        print(f"\nnot applied: {problem}\nthe checkout is as it was.", file=err)
        return 1
    written = [
        str(root / p) for p, t in plan.changes.items() if t is not None and p.endswith(".py")
    ]
    ruff = shutil.which("ruff")
    if ruff is not None and written:  # imports sorted, then formatted, as the checks want
        subprocess.run([ruff, "check", "-q", "--fix", "--select", "I", *written], cwd=root)
        subprocess.run([ruff, "format", "-q", *written], cwd=root)
    env = dict(os.environ, PYTHONPATH=str(root))
    done = subprocess.run(
        [sys.executable, *WRITE_DOCS], cwd=root, env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        print(f"note: {' '.join(WRITE_DOCS)} failed:\n{done.stdout}{done.stderr}", file=err)
    print("\napplied.", file=out)
    return 0


def minor_release(version: str, given: bool = True) -> str:
    """``version`` as the minor release ``X.Y.0`` an exit ships in."""
    where = "--version" if given else f"the checkout's version {version!r}; pass --version"
    parts = version.split(".")
    if not (2 <= len(parts) <= 3 and all(p.isascii() and p.isdigit() for p in parts)):
        raise UsageError(f"{where}: {version!r} is not a release written X.Y or X.Y.0")
    if len(parts) == 3 and int(parts[2]) != 0:
        raise UsageError(
            f"{where}: {version!r} is a patch release; graduating, renaming or removing "
            f"ships in a minor release: {parts[0]}.{int(parts[1]) + 1}.0 (docs/lifecycle.rst)"
        )
    return f"{int(parts[0])}.{int(parts[1])}.0"


def _print_plan(root: Path, plan: Plan, out: TextIO) -> None:
    print(f"flashinfer lifecycle: {plan.title}", file=out)
    print(f"\nrecords added to {HISTORY_FILE}:", file=out)
    for record in (plan.record, *plan.extra_records):
        print(edits.record_source(record).rstrip(), file=out)
    moved = dict(plan.moved)
    print("\nfiles:", file=out)
    for old, new in plan.moved:
        print(f"  move    {old} -> {new}", file=out)
    for path, text in sorted(plan.changes.items()):
        if path in moved.values() or (text is None and path in moved):
            continue
        if text is None:
            print(f"  delete  {path}", file=out)
        elif path in moved:
            print(f"  alias   {path} (a deprecated alias of the moved module)", file=out)
        else:
            before = (root / path).read_text(encoding="utf-8") if (root / path).exists() else ""
            if before != text:
                diff = difflib.unified_diff(before.splitlines(), text.splitlines(), "", "", n=0)
                changed = sum(1 for d in diff if d[:1] in "+-" and d[:3] not in ("+++", "---"))
                print(f"  {'edit   ' if before else 'create '} {path} ({changed} lines)", file=out)
    print(f"  run     {' '.join(WRITE_DOCS)} (docs/generated/)", file=out)
    if plan.left_to_author:
        print("\nleft to the author (needs judgement):", file=out)
        for step in plan.left_to_author:
            print(f"  - {step}", file=out)


def _write(root: Path, files: dict[str, bytes | None]) -> None:
    for path, data in files.items():
        if data is None:
            (root / path).unlink(missing_ok=True)
        else:
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_bytes(data)
    for path, data in files.items():  # an emptied folder goes (its caches with it)
        folder = (root / path).parent
        if data is None and folder.exists() and not _files(root, str(folder.relative_to(root))):
            shutil.rmtree(folder)


def plan_for(root: Path, action: str, target: str, version: str, args: Any = None) -> Plan:
    op_name, colon, backend = target.partition(":")
    instead = getattr(args, "instead", None)
    if colon:
        op = _op(op_name)
        if action == "graduate":
            plan = _graduate_backend(root, op, backend, version)
        elif action == "remove":
            plan = _remove_backend(root, op, backend, version, instead or op.stable_backends[0])
        else:
            plan = _rename_backend(root, op, backend, args.new_name, version)
    else:
        api = _experimental_api(target)
        if action == "graduate":
            plan = _graduate_api(root, api, version)
        elif action == "remove":
            if not instead:
                raise UsageError("removing an API needs --instead (what callers should use)")
            plan = _remove_api(root, api, version, instead)
        else:
            plan = _rename_api(root, api, args.new_name, version)
    for record in (plan.record, *plan.extra_records):
        plan.changes[HISTORY_FILE] = edits.add_history_record(plan.read(HISTORY_FILE), record)
    plan.changes["CHANGELOG.md"] = edits.add_changelog_entry(
        plan.read("CHANGELOG.md"), plan.changelog
    )
    return plan


def _op(name: str) -> Any:
    from flashinfer.dispatch.backend_names import flashinfer_apis

    api = flashinfer_apis().get(name)
    if api is None:
        raise UsageError(f"unknown op {name!r}; ops with backends: {', '.join(flashinfer_apis())}")
    return api.dispatcher


def _experimental_api(name: str) -> Any:
    from flashinfer.gating.lifecycle import experimental_features

    apis = {f.api.rpartition(".")[2]: f for f in experimental_features() if f.kind == "api"}
    if name not in apis:
        raise UsageError(
            f"{name!r} is not an experimental API; experimental APIs: {', '.join(apis) or 'none'}"
            " (a backend is named OP:BACKEND)"
        )
    return apis[name]


def _experimental_backend(op: Any, backend: str) -> tuple[str, str]:
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


def _path(module: str) -> str:
    return module.replace(".", "/") + ".py"


def _files(root: Path, folder: str, pattern: str = "*") -> list[str]:
    return sorted(
        p.relative_to(root).as_posix()
        for p in (root / folder).rglob(pattern)
        if p.is_file() and "__pycache__" not in p.parts
    )


def _move_feature(feature: str, plan: Plan) -> None:
    old_mod, new_mod = f"flashinfer.experimental.{feature}", f"flashinfer.features.{feature}"
    old_dir, new_dir = f"{EXPERIMENTAL}/{feature}", f"{FEATURES}/{feature}"
    if not (plan.root / FEATURES / "__init__.py").exists():  # the first feature to graduate
        plan.changes[f"{FEATURES}/__init__.py"] = (
            '"""Graduated features\' code, stable now, laid out as it was under '
            'flashinfer/experimental/\n(docs/lifecycle.rst).\n"""\n'
        )
    for path in _files(plan.root, old_dir):
        text = plan.read(path)
        if path.endswith(".py"):
            text = edits.move_package(text, old_mod, new_mod, old_dir, new_dir)
        plan.changes[path] = None
        plan.changes[new_dir + path[len(old_dir) :]] = text
        plan.moved.append((path, new_dir + path[len(old_dir) :]))
    for path in _files(plan.root, "flashinfer", "*.py"):
        if path.startswith(old_dir + "/") or old_mod not in (text := plan.read(path)):
            continue
        moved = edits.move_package(text, old_mod, new_mod, old_dir, new_dir)
        if moved != text:
            plan.changes[path] = moved.replace(
                "The only module-level import from flashinfer.experimental",
                "The graduated feature's module-level import",
            )


def _record_removal(plan: Plan, tested: str, step: str) -> None:
    test = f"tests/experimental/test_{tested}.py"
    if (plan.root / test).exists():
        plan.changes[test] = None
    plan.left_to_author += [step, "close the tracking issue with the reason"]


def _issue(marked: Any) -> str:
    info = getattr(marked, "experimental_info", None) or getattr(marked, "info", None)
    issue = getattr(info, "tracking_issue", None)
    if not issue:
        return "no tracking issue recorded"
    return f"issue {issue}" if str(issue).isdigit() else str(issue)


def _backend_check(op: Any, backend: str, condition: str) -> str:
    return (
        "from flashinfer.dispatch.backend_names import flashinfer_apis\n"
        f"op = flashinfer_apis()[{op.api_name!r}].dispatcher\n"
        f"assert {backend!r} {condition}, "
        f"({op.api_name + ': backend ' + repr(backend) + ' not ' + condition!r}, "
        "list(op.backend_checks))\n"
    )


def _graduate_backend(root: Path, op: Any, backend: str, version: str) -> Plan:
    feature, module = _experimental_backend(op, backend)
    record = Graduated(op.api_key, version, backend=backend)
    plan = Plan(root, f"graduate backend {backend!r} of {op.api_name} (feature {feature})", record)
    checker = op.backend_checks[backend]
    text = edits.drop_decorator(plan.read(_path(module)), checker.__name__, "experimental_backend")
    before = text
    text = edits.drop_keyword(text, "Backend", backend, "prefer", check=checker.__name__)
    prefer = (
        "its prefer= was dropped: a stable backend may not declare one; " if text != before else ""
    )
    text = edits.drop_import_name(text, "flashinfer.backend_dispatch", "experimental_backend")
    plan.changes[_path(module)] = text
    plan.verify = _backend_check(op, backend, "in op.stable_backends")
    _move_feature(feature, plan)
    plan.changelog = (
        f"Graduated ({_issue(checker)}): backend `{backend}` of `{op.api_name}` is stable since "
        f'{version}. `backend="{backend}"` works as before without an `ExperimentalWarning`; '
        '`"auto"` and the autotuner consider it with the gate off; tuning files that '
        "recorded it as experimental are used as they are."
    )
    plan.left_to_author += [
        f"rank {backend!r} in {op.api_name}'s heuristic ({prefer}until then the heuristic "
        "ranks it last)",
        f"move its tests from tests/experimental/ into the stable suite (tests of the gate and "
        f"the warning for {backend!r} no longer hold)",
        f"update prose that calls it experimental ({op.api_name}'s docstring, docs/*.rst)",
    ]
    return plan


def _graduate_api(root: Path, feature: Any, version: str) -> Plan:
    from flashinfer.gating.records import feature_of_module

    name = feature.api.rpartition(".")[2]
    plan = Plan(root, f"promote API {name} ({feature.api})", Graduated(feature.api, version))
    path = _path(feature.module)
    text = edits.swap_decorator(
        plan.read(path), name, "flashinfer_experimental_api", "flashinfer_api"
    )
    plan.changes[path] = text.replace(
        "from flashinfer.api_logging import flashinfer_experimental_api",
        "from flashinfer.api_logging import flashinfer_api",
    )
    folder = edits.imported_feature(plan.read(_path(feature.module)))
    expires = expiry_after(version)
    if folder is not None and feature_of_module(f"flashinfer.experimental.{folder}"):
        old_paths = [p for p in _files(root, f"{EXPERIMENTAL}/{folder}") if p.endswith(".py")]
        _move_feature(folder, plan)
        for old in old_paths:  # the experimental import paths: deprecated aliases
            old_mod = old.removesuffix(".py").replace("/", ".")
            new_mod = old_mod.replace("flashinfer.experimental.", "flashinfer.features.", 1)
            if old.endswith("/__init__.py"):  # a feature's __init__ stays a docstring
                plan.changes[old] = (
                    f'"""Deprecated: {name} graduated in {version}; its code is in\n'
                    f":mod:`{new_mod.removesuffix('.__init__')}`.  The modules here are aliases "
                    f'until {expires}.\n"""\n'
                )
                continue
            moved = plan.changes[_path(new_mod)]
            assert moved is not None
            plan.changes[old] = edits.alias_module(old_mod, new_mod, name, version, expires, moved)
        package = f"flashinfer.experimental.{folder}"
        new_package = package.replace("experimental", "features", 1)
        plan.extra_records.append(
            Renamed(new_package, package, new_package, version, expires, backend=False)
        )
    plan.changelog = (
        f"Graduated ({_issue(feature)}): `{name}` is a stable API since {version}; calling it "
        "no longer warns. Its implementation moved from `flashinfer.experimental` to "
        f"`flashinfer.features`; the old import paths are deprecated aliases until {expires}."
    )
    plan.left_to_author += [
        f"add {name} to the stable API reference (docs/api/) and remove it from "
        "docs/experimental.rst",
        f"move its tests from tests/experimental/ into the stable suite (tests of the "
        f"ExperimentalWarning of {name} no longer hold)",
    ]
    return plan


def _remove_backend(root: Path, op: Any, backend: str, version: str, instead: str) -> Plan:
    feature, module = _experimental_backend(op, backend)
    if instead not in op.backend_checks or instead == backend:
        raise UsageError(
            f"--instead must be another backend of {op.api_name}: {list(op.backend_checks)}"
        )
    record = Removed(op.api_key, backend, version, instead, expiry_after(version))
    plan = Plan(root, f"remove backend {backend!r} of {op.api_name} (feature {feature})", record)
    old_mod = f"flashinfer.experimental.{feature}"
    names = edits.declared_backends(plan.read(_path(module)))
    for path in _files(root, f"{EXPERIMENTAL}/{feature}"):
        plan.changes[path] = None
    for path in _files(root, "flashinfer", "*.py"):
        if path.startswith(f"{EXPERIMENTAL}/{feature}/"):
            continue
        text = plan.read(path)
        if old_mod not in text:
            continue
        # The table's entry (`SPLITK,`), then the imports (the lines kept are the result's).
        edited, kept = edits.drop_imports(edits.drop_elements(text, names), old_mod)
        if edited != text:
            plan.changes[path] = edited
        plan.left_to_author += [
            f"{path}:{line}: an import of {old_mod} inside a function or class is left in "
            "place; remove the code that uses it"
            for line in kept
        ]
    plan.verify = _backend_check(op, backend, "not in op.backend_checks")
    plan.changelog = (
        f"Removed: experimental backend `{backend}` of `{op.api_name}` (in {version}). "
        f'`backend="{backend}"` raises `BackendSupportedError` saying to use '
        f'`backend="{instead}"`; tuning entries naming it are skipped.'
    )
    _record_removal(
        plan, feature, f"remove mentions of {backend!r} from {op.api_name}'s docstring and the docs"
    )
    return plan


def _remove_api(root: Path, feature: Any, version: str, instead: str) -> Plan:
    name = feature.api.rpartition(".")[2]
    record = Removed(feature.api, name, version, instead, expiry_after(version), backend=False)
    plan = Plan(root, f"remove API {name} ({feature.api})", record)
    folder = edits.imported_feature(plan.read(_path(feature.module)))
    if folder is not None:
        for path in _files(root, f"{EXPERIMENTAL}/{folder}"):
            plan.changes[path] = None
    # The module keeps a tombstone in place of the API: its __getattr__ says what to use.
    plan.changes[_path(feature.module)] = edits.tombstone_module(
        name, version, instead, expiry_after(version)
    )
    init = plan.read("flashinfer/__init__.py")
    plan.changes["flashinfer/__init__.py"] = edits.drop_import_name(init, feature.module, name)
    plan.changelog = (
        f"Removed: experimental API `{name}` (in {version}). `flashinfer.{name}` raises "
        f"`AttributeError` saying to use `{instead}`."
    )
    _record_removal(plan, name, f"remove {name}'s other tests and its mentions in the docs")
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
    plan = Plan(root, f"rename backend {old!r} of {op.api_name} to {new!r}", record)
    checker = op.backend_checks[old]
    path = _path(checker.__module__)
    try:  # the op's own declaration: the one whose check= is the op's checker
        plan.changes[path] = edits.rename_declaration(
            plan.read(path), "Backend", old, new, checker.__name__
        )
    except LookupError as exc:
        raise UsageError(
            f"{path}: {exc}; rename it by hand and add the record "
            f"{edits.record_source(record).strip()} to {HISTORY_FILE}"
        ) from None
    # A rename keeps every choice: the heuristic ranks by name, and the package's own calls
    # that name the backend would otherwise warn users about code they never wrote.
    if op.heuristic_func is not None:
        where = _path(op.heuristic_func.__module__)
        text = plan.read(where)
        ranked = edits.rename_in_function(text, op.heuristic_func.__name__, old, new)
        if ranked != text:
            plan.changes[where] = ranked
    for caller in _files(root, "flashinfer", "*.py"):
        text = plan.read(caller)
        if old in text and op.api_name in text:
            edited = edits.rename_backend_arguments(text, op.api_name, old, new)
            if edited != text:
                plan.changes[caller] = edited
    plan.verify = _backend_check(op, new, "in op.backend_checks") + (
        f"assert {old!r} in op.backend_aliases, {'the alias ' + repr(old) + ' leads nowhere'!r}\n"
    )
    plan.changelog = (
        f"Renamed: backend `{old}` of `{op.api_name}` is `{new}` (in {version}); "
        f'`backend="{old}"` works, warning once, until {expiry_after(version)}; tuning '
        "entries under the old name are read under the new one."
    )
    plan.left_to_author.append(
        f"update tests, docs and messages that write backend={old!r} (in prose, not code)"
    )
    return plan


def _rename_api(root: Path, feature: Any, new: str, version: str) -> Plan:
    module, name = feature.module, feature.api.rpartition(".")[2]
    path = _path(module)
    taken = set(OPS)  # the package's names and the module's: the new name must be free
    for source in ("flashinfer/__init__.py", path):
        taken |= edits.top_level_names((root / source).read_text(encoding="utf-8"))
    problem = api_name_problem(new, name, taken)
    if problem is not None:
        raise UsageError(f"--to {new!r}: {problem}; nothing written")
    expires = expiry_after(version)
    record = Renamed(
        f"{module}.{new}", f"{module}.{name}", f"{module}.{new}", version, expires, backend=False
    )
    plan = Plan(root, f"rename API {name} ({feature.api}) to {new}", record)
    text = edits.rename_module_name(plan.read(path), name, new)
    future = "from __future__ import annotations\n"
    for line in ("from typing_extensions import deprecated", "from typing import Any"):
        if line not in text:
            text = text.replace(future, f"{future}\n{line}\n", 1)
    if "from flashinfer.lifecycle import call_deprecated" not in text:
        text = text.replace(
            "\n__all__", "\nfrom flashinfer.lifecycle import call_deprecated\n\n__all__", 1
        )
    doc = f"Deprecated alias of :func:`{new}` (renamed in {version}, until {expires})."
    plan.changes[path] = text + edits.deprecated_function(name, new, alias_message(record), doc)
    init = plan.read("flashinfer/__init__.py")
    plan.changes["flashinfer/__init__.py"] = init.replace(
        f"    from {module} import {name} as {name}\n", f"    from {module} import {new} as {new}\n"
    )
    plan.verify = (
        f"import flashinfer, {module} as m\n"
        f"assert callable(m.{new}) and flashinfer.{new} is m.{new}\n"
    )
    if (root / f"docs/generated/dispatchers/{name}.py").exists():
        plan.changes[f"docs/generated/dispatchers/{name}.py"] = None
    plan.changelog = (
        f"Renamed: experimental API `{name}` is `{new}` (in {version}); `flashinfer.{name}` "
        f"works as a deprecated alias, warning once, until {expires}."
    )
    plan.left_to_author.append(f"update tests and docs that call {name}")
    return plan


def api_name_problem(new: str, old: str, taken: Iterable[str]) -> str | None:
    """Why ``new`` cannot be the API ``old``'s new name, or ``None``; ASCII only (Python folds
    other names by NFKC, and the torch operator is named after it)."""
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
