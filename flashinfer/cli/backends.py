"""``flashinfer backends``: an environment report to paste into a bug report.

Versions (flashinfer, Python, torch and its CUDA/HIP build, triton, numpy), each device with
its compute capability, ``TRITON_INTERPRET`` (and, in a process that imported Triton before
the variable changed, that Triton runs in the other mode: every Triton backend then cannot
run here, and the line says to restart), the experimental gate with its raw value, and
every API by the name users call, one row per backend: whether it can run here and, if not,
a short reason.  The advice that goes with a reason is printed once, below the table.  Whether
a backend needs Triton is what its checker declares (its family, read with
:func:`flashinfer.dispatch.families.family_of`; a backend that declares none is reported as
unknown, not guessed); whether a Triton backend can run comes from the same probe its support
checker uses on a call (:mod:`flashinfer.kernels.availability`), so the report and the call
agree.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import sys
import textwrap
from typing import Any, TextIO

from flashinfer.cli.common import _gate_line, _gate_state, _table
from flashinfer.dispatch.families import family_of

WIDTH = 100  # no line of the table is longer
_REASON_MIN = 24  # narrowest the reason column gets before reasons move to the notes


def _version(distribution: str) -> str | None:
    """Installed version of ``distribution`` from its metadata (nothing is imported)."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def _versions() -> dict[str, str | None]:
    import torch

    from flashinfer._version import __version__

    return {
        "flashinfer": __version__,
        "python": f"{platform.python_version()} ({platform.python_implementation()}, "
        f"{sys.platform})",
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "torch_hip": getattr(torch.version, "hip", None),
        "triton": _version("triton"),
        "numpy": _version("numpy"),
    }


def _devices() -> list[dict[str, Any]]:
    """Every CUDA device with its name and compute capability (``major * 10 + minor``)."""
    import torch

    if not torch.cuda.is_available():
        return []
    devices = []
    for index in range(torch.cuda.device_count()):
        major, minor = torch.cuda.get_device_capability(index)
        devices.append(
            {
                "index": index,
                "name": torch.cuda.get_device_name(index),
                "compute_capability": major * 10 + minor,
            }
        )
    return devices


# What a row says of a backend whose checker declares no family: whether it needs Triton is
# unknown, so whether it runs here is too (the report does not guess from the checker's code).
_UNDECLARED_REASON = "its checker declares no backend family"
_UNDECLARED_ADVICE = (
    "declare one on the support checker with @backend_family(TORCH) or "
    "@backend_family(TRITON) from flashinfer.dispatch.families"
)


def _runnable(op: Any, backend: str, cc: int | None) -> tuple[bool | None, str | None, str | None]:
    """Whether ``backend`` of ``op`` can run here (``None``: unknown, its family is not
    declared), with the short reason and the advice when it cannot (or is unknown)."""
    reason = op.backend_runnable_reason(backend, cc)
    if reason is not None:
        short, _, advice = reason.partition("; ")
        return False, short, advice or None
    family = family_of(op.backend_checks[backend])
    if family is None:
        return None, _UNDECLARED_REASON, _UNDECLARED_ADVICE
    if family.needs_triton:
        from flashinfer.kernels.availability import triton_unavailable

        problem = triton_unavailable("cpu" if cc is None else "cuda")
        if problem is not None:
            return False, problem.reason, problem.fix
    return True, None, None


def _public_name(api_key: str) -> str:
    """The name users call: an API of :data:`~flashinfer.api_modules.API_MODULES` is exported
    as ``flashinfer.<name>`` (``flashinfer.gemm.mm`` -> ``flashinfer.mm``), the rule
    ``use_backends``' names follow; any other keeps its qualified name."""
    from flashinfer.api_modules import API_MODULES

    module, _, name = api_key.rpartition(".")
    return f"flashinfer.{name}" if module in API_MODULES else api_key


def backends_report() -> dict[str, Any]:
    """The facts ``flashinfer backends`` prints (``--json`` prints exactly this)."""
    from flashinfer.api_modules import load_api_modules
    from flashinfer.dispatch.op import registered_ops
    from flashinfer.gating.records import api_inventory
    from flashinfer.kernels.availability import triton_imported_interpreted

    missing = load_api_modules()
    devices = _devices()
    cc = devices[0]["compute_capability"] if devices else None
    ops = {op.api_key: op for op in registered_ops()}
    apis: dict[str, dict[str, Any]] = {}
    for record in api_inventory():
        apis[record.name] = {"experimental": record.experimental}
    for key in ops:
        apis.setdefault(key, {"experimental": False})
    entries = []
    for key in apis:
        op = ops.get(key)
        backends = []
        for b in () if op is None else op.backend_checks:
            assert op is not None
            runnable, reason, advice = _runnable(op, b, cc)
            backends.append(
                {
                    "name": b,
                    "experimental": b in op.experimental_backends,
                    "runnable": runnable,
                    "reason": reason,
                    "advice": advice,
                }
            )
        entries.append(
            {
                "api": _public_name(key),
                "qualified_name": key,
                "experimental": apis[key]["experimental"],
                "backends": backends,
            }
        )
    entries.sort(key=lambda e: e["api"])
    return {
        "versions": _versions(),
        "devices": devices,
        "compute_capability": cc,
        "triton_interpret": os.environ.get("TRITON_INTERPRET"),
        "triton_interpret_at_import": triton_imported_interpreted(),
        "gate": _gate_state(),
        "apis": entries,
        "missing_modules": missing,
    }


def _interpret_mismatch() -> Any:
    from flashinfer.kernels.availability import interpret_mismatch

    return interpret_mismatch()


def _environment_lines(report: dict[str, Any]) -> list[str]:
    from flashinfer.kernels.availability import triton_true

    v = report["versions"]
    build = (
        f"CUDA {v['torch_cuda']}"
        if v["torch_cuda"]
        else f"HIP {v['torch_hip']}"
        if v["torch_hip"]
        else "CPU-only build"
    )
    lines = [
        f"flashinfer        {v['flashinfer']}",
        f"python            {v['python']}",
        f"torch             {v['torch']} ({build})",
        f"triton            {v['triton'] or 'not installed'}",
        f"numpy             {v['numpy'] or 'not installed'}",
    ]
    if report["devices"]:
        for d in report["devices"]:
            cc = d["compute_capability"]
            lines.append(f"device cuda:{d['index']}     {d['name']} (compute capability {cc})")
    else:
        lines.append("devices           cpu only (no CUDA device)")
    interpret = report["triton_interpret"]
    meaning = (
        "Triton kernels run on CPU tensors through the interpreter"
        if triton_true(interpret)
        else "Triton kernels need CUDA tensors"
    )
    shown = "unset" if interpret is None else repr(interpret)
    lines.append(f"TRITON_INTERPRET  {shown} ({meaning})")
    mismatch = _interpret_mismatch()
    if mismatch is not None:  # changed after `import triton`: Triton runs in the other mode
        lines.append(f"  but {mismatch.reason.removeprefix('cannot run here: ')}: {mismatch.fix}")
    lines.append(_gate_line(report["gate"]))
    return lines


def _api_rows(report: dict[str, Any]) -> tuple[list[tuple[str, ...]], list[str]]:
    """Table rows and the advice notes they point to (each note printed once)."""
    notes: list[str] = []

    def note(text: str) -> str:
        if text not in notes:
            notes.append(text)
        return f"[{notes.index(text) + 1}]"

    rows: list[tuple[str, ...]] = [("API", "BACKEND", "KIND", "RUNS HERE")]
    for api in report["apis"]:
        if not api["backends"]:
            if api["experimental"]:
                rows.append((api["api"], "-", "experimental API", "yes (calling it opts in)"))
            else:
                rows.append((api["api"], "-", "stable API", "yes"))
            continue
        for b in api["backends"]:
            verdict = "yes"
            if not b["runnable"]:
                verdict = f"{'unknown' if b['runnable'] is None else 'no'}: {b['reason']}"
                if b["advice"]:
                    verdict += f" {note(b['advice'])}"
            kind = "experimental" if b["experimental"] else "stable"
            rows.append((api["api"], b["name"], kind, verdict))
    return rows, notes


def _fit(rows: list[tuple[str, ...]], notes: list[str]) -> list[tuple[str, ...]]:
    """Keep every line within :data:`WIDTH`: a verdict too long for its column moves to the
    notes (its cell says where)."""
    fixed = sum(max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1))
    room = max(_REASON_MIN, WIDTH - fixed - 2 * (len(rows[0]) - 1))
    fitted = [rows[0]]
    for row in rows[1:]:
        verdict = row[-1]
        if len(verdict) > room:
            word, colon, rest = verdict.partition(": ")
            labelled = bool(colon) and word in ("no", "unknown")
            notes.append(rest if labelled else verdict)
            verdict = f"{word}: see [{len(notes)}]" if labelled else f"see [{len(notes)}]"
        fitted.append((*row[:-1], verdict))
    return fitted


def _cmd_backends(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    report = backends_report()
    if args.json:
        print(json.dumps(report, indent=2), file=out)
        return 0
    for line in _environment_lines(report):
        print(line, file=out)
    print(file=out)
    rows, notes = _api_rows(report)
    print(_table(_fit(rows, notes)), file=out)
    if notes:
        print(file=out)
        for i, text in enumerate(notes, 1):
            print(textwrap.fill(f"[{i}] {text}", WIDTH, subsequent_indent="    "), file=out)
    for module in report["missing_modules"]:
        print(f"note: API module {module} is missing from this build; not listed", file=err)
    return 0
