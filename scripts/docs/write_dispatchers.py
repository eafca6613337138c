"""Write every op's generated dispatcher as a file a reader (or a static walker) can open.

    python scripts/docs/write_dispatchers.py          # (re)write docs/generated/dispatchers/
    python scripts/docs/write_dispatchers.py --check  # exit 1, naming the stale files, if
                                                      # a file differs from what it would write

An op's dispatcher is generated when its module is imported (``flashinfer.dispatch``'s code
generation), so its source exists only at run time, as ``op.__generated_source__``.  This
writes, for every op of :data:`flashinfer.api_modules.OPS` that is generated code, one file
``<op>.py``: a header saying what it is and how it was made, each backend's checker and
implementation as importable dotted names with their files, then every generated function the
op's call reaches (the dispatcher and the generated helpers it calls), each followed by the
names it uses and where each is defined.

The source is read before any call, in a fresh interpreter with no ``FLASHINFER_*`` variable
set (a dispatcher regenerates itself as it learns call patterns, so a process that has called
the op would write something else); run this script as a command, not from a test process.
``tests/test_generated_dispatchers.py`` runs ``--check``.
"""

from __future__ import annotations

import argparse
import ast
import functools
import importlib
import inspect
import os
import subprocess
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
OUT_DIR = ROOT / "docs" / "generated" / "dispatchers"
COMMAND = "python scripts/docs/write_dispatchers.py"
_FRESH = "_FLASHINFER_WRITE_DISPATCHERS_FRESH"  # set in the child that does the rendering


def _where(obj: Any) -> str:
    """`` (path/in/repo.py)`` for an object defined in this checkout, else ``""``."""
    try:
        path = inspect.getsourcefile(obj)
    except TypeError:
        return ""
    if path is None:
        return ""
    try:
        return f"  ({Path(path).resolve().relative_to(ROOT).as_posix()})"
    except ValueError:
        return ""


def _dotted(obj: Any) -> str:
    return f"{obj.__module__}.{obj.__qualname__}"


def _plain(value: Any) -> bool:
    if isinstance(value, (str, int, float, bool, type(None))):
        return True
    if isinstance(value, (tuple, frozenset)):
        return all(_plain(v) for v in value)
    return False


def _literal(value: Any) -> str:
    """A repr that is the same in every process (a set's order follows string hashing)."""
    if isinstance(value, frozenset):
        if not value:
            return "frozenset()"
        ordered = sorted(value, key=lambda v: (type(v).__name__, v))
        return "frozenset({" + ", ".join(_literal(v) for v in ordered) + "})"
    if isinstance(value, tuple):
        inner = ", ".join(_literal(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    return repr(value)


def describe(value: Any) -> str:
    """What a name of generated code stands for, with no memory address or id in it."""
    if isinstance(value, types.ModuleType):
        return f"module {value.__name__}"
    if isinstance(value, types.MethodType):
        owner = type(value.__self__).__qualname__
        return f"{_dotted(value.__func__)}, bound to a {owner}{_where(value.__func__)}"
    if isinstance(value, functools.partial):
        return f"functools.partial of {describe(value.func)}"
    if isinstance(value, (types.FunctionType, type)):
        generated = getattr(value, "__generated_source__", None)
        if generated is not None:
            return f"generated {value.__qualname__} (below)"
        return f"{_dotted(value)}{_where(value)}"
    if isinstance(value, types.BuiltinFunctionType):
        return f"builtin {value.__name__}"
    if _plain(value):
        return _literal(value)
    kind = type(value)
    return f"a {kind.__module__}.{kind.__qualname__}{_where(kind)}"


def _names_used(fn: Any) -> list[str]:
    """The names of ``fn``'s globals its source uses (defaults included), in order."""
    tree = ast.parse(fn.__generated_source__)
    nodes = sorted(
        (n for n in ast.walk(tree) if isinstance(n, ast.Name)),
        key=lambda n: (n.lineno, n.col_offset),
    )
    return list(dict.fromkeys(n.id for n in nodes if n.id in fn.__globals__))


def _generated_functions(first: Callable[..., Any]) -> list[Any]:
    """``first`` and every generated function its globals reach, breadth first."""
    found: list[Any] = [first]
    for fn in found:
        for name in _names_used(fn):
            value = fn.__globals__.get(name)
            if getattr(value, "__generated_source__", None) is not None and all(
                value is not f for f in found
            ):
                found.append(value)
    return found


def _backend_lines(op: Any) -> list[str]:
    checks = getattr(op, "backend_checks", None)
    runs = getattr(op, "implementations", None)
    if not checks:
        return []
    experimental = getattr(op, "experimental_backends", frozenset())
    lines = ["#", "# Backends (the dispatcher runs check, then run = op.implementations[backend]):"]
    for name in checks:
        kind = "experimental" if name in experimental else "stable"
        lines.append(f"#   {name} ({kind})")
        lines.append(f"#     check: {describe(checks[name])}")
        if runs is not None and name in runs:
            lines.append(f"#     run:   {describe(runs[name])}")
    return lines


def render(op_name: str) -> str | None:
    """The file for ``op_name`` (its public name in ``OPS``), or None if its API is not
    generated code.  Call it only in a process that has not called the op."""
    from flashinfer.api_modules import OPS

    module = importlib.import_module(OPS[op_name])
    op = getattr(module, op_name)
    if getattr(op, "__generated_source__", None) is None:
        return None
    functions = _generated_functions(op)
    lines = [
        f"# flashinfer.{op_name}: its generated code, as written at import time.",
        "#",
        f"# GENERATED FILE, do not edit.  Written by `{COMMAND}`",
        "# from the generated functions' __generated_source__, in a fresh interpreter before",
        "# any call (the dispatcher regenerates itself as it learns call patterns; this is its",
        "# first form).  tests/test_generated_dispatchers.py fails when this file is stale.",
        "# It is never imported: the package runs the code it generates, not this copy.",
        "#",
        f"# The API: {describe(inspect.unwrap(op))}",
        *_backend_lines(op),
    ]
    for fn in functions:
        code = fn.__code__
        lines += ["", "", f"# ---- {code.co_name} " + "-" * max(4, 93 - len(code.co_name))]
        lines.append(f"# A traceback names it {code.co_filename}")
        lines.append(f"# Its globals: module {fn.__globals__.get('__name__')}.  The names it uses:")
        for name in _names_used(fn):
            lines.append(f"#   {name} = {describe(fn.__globals__[name])}")
        lines += ["", fn.__generated_source__.rstrip("\n")]
    return "\n".join(lines) + "\n"


def _render_all() -> dict[str, str]:
    from flashinfer.api_modules import OPS

    files = {}
    for op_name in OPS:
        text = render(op_name)
        if text is not None:
            files[f"{op_name}.py"] = text
    return files


def rendered_in_fresh_interpreter() -> dict[str, str]:
    """Every op's file, rendered by a child interpreter: no call made, no variable set."""
    import json

    env = {k: v for k, v in os.environ.items() if not k.startswith("FLASHINFER_")}
    env[_FRESH] = "1"
    env.setdefault("TRITON_INTERPRET", "1")
    done = subprocess.run(
        [sys.executable, __file__],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"rendering the dispatchers failed:\n{done.stderr}")
    files: dict[str, str] = json.loads(done.stdout)
    return files


def stale(out_dir: Path, files: dict[str, str]) -> list[str]:
    """The files of ``out_dir`` that differ from ``files``, are missing, or are extra."""
    present = {p.name for p in out_dir.glob("*.py")} if out_dir.is_dir() else set()
    wrong = [n for n, text in files.items() if n not in present or _read(out_dir / n) != text]
    return sorted(wrong + [n for n in present if n not in files])


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    if os.environ.get(_FRESH) == "1":  # the child: print the files as JSON
        import json

        sys.path.insert(0, str(ROOT))
        print(json.dumps(_render_all()))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="fail if a file is stale")
    parser.add_argument("--out", type=Path, default=OUT_DIR, help="the folder to write")
    args = parser.parse_args(argv)
    files = rendered_in_fresh_interpreter()
    wrong = stale(args.out, files)
    if args.check:
        if wrong:
            print(
                f"stale generated dispatchers in {args.out}: {', '.join(wrong)}; run: {COMMAND}",
                file=sys.stderr,
            )
            return 1
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    for name in wrong:
        path = args.out / name
        if name in files:
            path.write_text(files[name], encoding="utf-8")
        else:
            path.unlink()
    print(f"{len(files)} files in {args.out}: {len(wrong)} written or removed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
