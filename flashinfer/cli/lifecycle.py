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
import difflib
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from flashinfer.cli.common import UsageError

if TYPE_CHECKING:
    from flashinfer.cli.lifecycle_exits import Plan, plan_for

__all__ = ["Plan", "add_lifecycle_parser", "cmd_lifecycle", "minor_release", "plan_for"]

WRITE_DOCS = ["scripts/docs/write_dispatchers.py"]


def __getattr__(name: str) -> Any:
    """``Plan`` and ``plan_for``, from the module that builds plans (loaded when asked: it
    imports LibCST, which building the command's parser does not need)."""
    if name in ("Plan", "plan_for"):
        from flashinfer.cli import lifecycle_exits

        return getattr(lifecycle_exits, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
    from flashinfer.cli.lifecycle_exits import HISTORY_FILE, plan_for

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
    originals = _apply(root, plan)
    problem = _verify(root, plan)
    if problem is not None:  # a wrong edit is undone, never reported as applied
        _restore(root, originals)
        print(f"\nnot applied: {problem}\nthe checkout is as it was.", file=err)
        return 1
    _regenerate(root, plan, err)
    print("\napplied.", file=out)
    return 0


def minor_release(version: str, given: bool = True) -> str:
    """``version`` as the minor release ``X.Y.0`` an exit ships in (docs/lifecycle.rst:
    exits happen in minor releases); ``UsageError`` for anything else (``banana``, or a patch
    release such as ``0.1.1``)."""
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


# -- printing and applying -------------------------------------------------------------------------


def _print_plan(root: Path, plan: Plan, out: TextIO) -> None:
    from flashinfer.cli.lifecycle_edits import record_source
    from flashinfer.cli.lifecycle_exits import HISTORY_FILE

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


def _apply(root: Path, plan: Plan) -> dict[str, bytes | None]:
    """Write the plan; returns what each path held before (``None``: absent)."""
    originals = {p: (root / p).read_bytes() if (root / p).is_file() else None for p in plan.changes}
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
    return originals


def _restore(root: Path, originals: dict[str, bytes | None]) -> None:
    for path, data in originals.items():
        target = root / path
        if data is None:
            target.unlink(missing_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)


def _verify(root: Path, plan: Plan) -> str | None:
    """Whether the written checkout imports and shows the change (``plan.verify``), run in
    a fresh interpreter; ``None`` when it does, else what went wrong."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLASHINFER_")}
    env["PYTHONPATH"] = str(root)
    script = "import warnings\nwarnings.simplefilter('ignore')\nimport flashinfer\n" + plan.verify
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=root, env=env, capture_output=True, text=True
    )
    if done.returncode == 0:
        return None
    return f"the edited checkout fails its check:\n{done.stderr.strip()[-3000:]}"


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
