"""The lifecycle check's rules about exits: where the declared history
(:mod:`flashinfer.gating.history`) and the ops' declarations disagree, each problem naming
what finishes the exit.  Ops are duck-typed, so tests can check a synthetic state.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from flashinfer._version import __version__
from flashinfer.dispatch.plan import experimental_code
from flashinfer.gating.history import (
    THREE_EXITS,
    Graduated,
    LifecycleRecord,
    Removed,
    Renamed,
    history,
    parse_version,
)

__all__ = ["exit_problems"]


def exit_problems(
    ops: Iterable[Any],
    experimental_apis: Iterable[str] = (),
    records: Sequence[LifecycleRecord] | None = None,
    version: str = __version__,
) -> list[str]:
    """What is wrong with the exits taken (empty: all good): a graduated backend or API still
    marked, an expired alias or tombstone, an alias leading nowhere, a stable backend's code
    under ``flashinfer/experimental/``.  ``records`` defaults to ``history()``."""
    records = history() if records is None else records
    ops = list(ops)
    by_key = {op.api_key: op for op in ops}
    experimental_apis = set(experimental_apis)
    problems: list[str] = []
    for r in records:
        if isinstance(r, Graduated):
            problems += _still_marked(r, by_key, experimental_apis)
        elif isinstance(r, (Renamed, Removed)):
            problems += _expired(r, version)
        if isinstance(r, Renamed) and r.backend:
            problems += _dangling_alias(r, by_key, records)
    for op in ops:
        problems += _stable_under_experimental(op)
    return problems


def _still_marked(r: Graduated, ops: dict[str, Any], experimental_apis: set[str]) -> list[str]:
    op = ops.get(r.api)
    if r.backend is None and r.api in experimental_apis:
        what = f"API {r.api}"
        marked = "is still marked @flashinfer_experimental_api; drop the marker"
        command = r.api.rpartition(".")[2]
    elif r.backend is not None and op is not None and r.backend in op.experimental_backends:
        what = f"backend {r.backend!r} of {r.api}"
        marked = "its checker is still marked @experimental_backend; make its declaration stable"
        command = f"{op.api_name}:{r.backend}"
    else:
        return []
    return [
        f"{what} graduated in {r.version} (flashinfer/gating/history.py) but {marked} "
        f"(flashinfer lifecycle graduate {command} --apply does it), or, if it did not "
        f"graduate, delete the record and take another exit: {THREE_EXITS}"
    ]


def _dangling_alias(
    r: Renamed, ops: dict[str, Any], records: Sequence[LifecycleRecord]
) -> list[str]:
    """The op has the alias's new name (or a chain's last), not the old; or it was removed."""
    op = ops.get(r.api)
    if op is None:
        return []
    renames = {
        x.old: x.new for x in records if isinstance(x, Renamed) and x.backend and x.api == r.api
    }
    removed = {x.name for x in records if isinstance(x, Removed) and x.backend and x.api == r.api}
    final, seen = r.new, {r.old}
    while final not in op.backend_checks and final in renames and final not in seen:
        seen.add(final)
        final = renames[final]
    if final in removed:
        return []
    if final not in op.backend_checks:
        return [
            f"the alias {r.old!r} of {r.api} names backend {r.new!r}, which it does not have "
            f"(its backends: {', '.join(op.backend_checks)}); rename the declaration "
            "(flashinfer lifecycle rename does it) or fix the record in "
            "flashinfer/gating/history.py"
        ]
    if r.old in op.backend_checks:
        return [
            f"{r.api} still declares backend {r.old!r}, which flashinfer/gating/history.py "
            f"says was renamed {r.new!r}: the declaration wins and the alias never runs; "
            "delete one of them"
        ]
    return []


def _expired(r: Renamed | Removed, version: str) -> list[str]:
    if parse_version(version) < parse_version(r.expires):
        return []
    if isinstance(r, Renamed):
        what = f"the alias {r.old!r} of {r.new!r}" + (f" ({r.api})" if r.backend else "")
        undo = "the alias (and any alias module left at the old path)"
    else:
        kind = f"backend {r.name!r} of {r.api}" if r.backend else f"API {r.api}"
        what = f"the tombstone of {kind}"
        undo = "the tombstone"
    return [
        f"{what} expired in {r.expires} (flashinfer is {version}); delete its record from "
        f"flashinfer/gating/history.py: {undo} goes with it (decided in {r.version}, "
        "docs/lifecycle.rst: aliases and tombstones last two minor releases)"
    ]


def _stable_under_experimental(op: Any) -> list[str]:
    problems = []
    declared = getattr(op, "backends", {}) or {}
    for backend, checker in op.backend_checks.items():
        if backend in op.experimental_backends:
            continue
        parts = [("checker", checker)]
        if backend in declared:
            parts.append(("implementation", declared[backend].run))
        for role, fn in parts:
            found = experimental_code(fn)
            if found is not None:
                problems.append(
                    f"stable backend {backend!r} of {op.api_key}: its {role} {found}; a "
                    "stable backend's code lives in core (flashinfer lifecycle graduate "
                    f"{op.api_name}:{backend} --apply moves it), or mark it experimental "
                    f"again and take an exit: {THREE_EXITS}"
                )
    return problems
