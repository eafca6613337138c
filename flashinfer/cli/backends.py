"""``flashinfer backends``: an environment report for a bug report (docs/report_schema.rst):
a header, one row per API and backend (whether it runs here, asked of the probe a call uses;
unknown for a checker with no family), then the details.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import textwrap
from typing import Any, TextIO

from flashinfer import settings
from flashinfer.cli.common import ISSUE_TRACKER, format_table, gate_line, gate_state
from flashinfer.cli.environment_report import (
    cuda_info,
    detail_lines,
    environment_settings,
    install_info,
    installed_version,
    public_name,
    settings_summary,
    system_info,
    torch_build,
)
from flashinfer.cli.report_schema import SCHEMA_VERSION
from flashinfer.dispatch.families import family_of

WIDTH = 100  # no line of the table is longer
_REASON_MIN = 24  # narrowest the reason column gets before reasons move to the notes

# What a row says of a backend whose checker declares no family: whether it runs is unknown.
_UNDECLARED_REASON = "its checker declares no backend family"
_UNDECLARED_ADVICE = (
    "declare one on the support checker with @backend_family(TORCH) or "
    "@backend_family(TRITON) from flashinfer.dispatch.families"
)


def backend_runnable(
    op: Any, backend: str, cc: int | None
) -> tuple[bool | None, str | None, str | None]:
    """Whether ``backend`` of ``op`` can run here (``None``: unknown), the reason and advice."""
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


def backends_report() -> dict[str, Any]:
    """The facts ``flashinfer backends`` prints (``--json`` prints exactly this)."""
    import torch

    from flashinfer._version import __version__
    from flashinfer.api_modules import load_api_modules
    from flashinfer.gating.history import graduated_in
    from flashinfer.gating.op_registry import registered_ops
    from flashinfer.gating.records import api_inventory
    from flashinfer.kernels.availability import triton_imported_interpreted

    missing = load_api_modules()
    devices: list[dict[str, Any]] = []
    for index in range(torch.cuda.device_count() if torch.cuda.is_available() else 0):
        major, minor = torch.cuda.get_device_capability(index)
        name = torch.cuda.get_device_name(index)
        devices.append({"index": index, "name": name, "compute_capability": major * 10 + minor})
    cc = devices[0]["compute_capability"] if devices else None
    ops = {op.api_key: op for op in registered_ops()}
    apis = {record.name: record.experimental for record in api_inventory()}
    entries = []
    for key in {**apis, **{k: False for k in ops if k not in apis}}:
        op: Any = ops.get(key)
        backends = []
        for b in op.backend_checks if op is not None else ():
            runnable, reason, advice = backend_runnable(op, b, cc)
            entry = dict(name=b, experimental=b in op.experimental_backends, runnable=runnable)
            backends.append(
                {**entry, "reason": reason, "advice": advice, "graduated_in": graduated_in(key, b)}
            )
        entries.append(
            {
                "api": public_name(key),
                "qualified_name": key,
                "experimental": apis.get(key, False),
                "backends": backends,
            }
        )
    entries.sort(key=lambda e: e["api"])
    versions = {
        "flashinfer": __version__,
        "python": f"{platform.python_version()} ({platform.python_implementation()}, "
        f"{sys.platform})",
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "torch_hip": getattr(torch.version, "hip", None),
        "triton": installed_version("triton"),
        "numpy": installed_version("numpy"),
    }
    # What a reader wants first (`--json | head`): the APIs, then versions and the rest.
    return {
        "schema_version": SCHEMA_VERSION,
        "apis": entries,
        "versions": versions,
        "cuda": cuda_info(),
        "devices": devices,
        "compute_capability": cc,
        "triton_interpret": settings.raw("TRITON_INTERPRET"),
        "triton_interpret_at_import": triton_imported_interpreted(),
        "gate": gate_state(),
        "environment": environment_settings(),
        "system": system_info(),
        "install": install_info(),
        "autotuner_file": None,
        "missing_modules": missing,
    }


def _header_lines(report: dict[str, Any]) -> list[str]:
    v, devices, gate = report["versions"], report["devices"], report["gate"]
    where = "cpu only (no CUDA device)"
    if devices:
        first = devices[0]
        where = f"cuda:0 {first['name']} (compute capability {first['compute_capability']})"
        where += f" and {len(devices) - 1} more" if len(devices) > 1 else ""
    gate_first = gate_line(gate).partition("\n")[0]  # the meaning is below
    lines = [
        f"flashinfer {v['flashinfer']}, torch {v['torch']} ({torch_build(v)}), "
        f"triton {v['triton'] or 'not installed'}; {where}",
        f"{gate_first} (unrecognised value)" if gate["note"] else gate_first,
    ]
    summary = settings_summary(report)
    return lines if summary is None else [*lines, summary]


def api_rows(report: dict[str, Any]) -> tuple[list[tuple[str, ...]], list[str]]:
    """Table rows and the advice notes they point to (each once)."""
    notes: list[str] = []
    rows: list[tuple[str, ...]] = [("API", "BACKEND", "KIND", "RUNS HERE")]
    for api in report["apis"]:
        if not api["backends"] and api["experimental"]:
            rows.append((api["api"], "-", "experimental API", "yes (calling it opts in)"))
        elif not api["backends"]:
            rows.append((api["api"], "-", "stable API", "yes"))
        for b in api["backends"]:
            verdict = "yes"
            if not b["runnable"]:
                verdict = f"{'unknown' if b['runnable'] is None else 'no'}: {b['reason']}"
                if b["advice"]:
                    if b["advice"] not in notes:
                        notes.append(b["advice"])
                    verdict += f" [{notes.index(b['advice']) + 1}]"
            kind = "experimental" if b["experimental"] else "stable"
            if b.get("graduated_in") is not None:  # a report from an older flashinfer lacks it
                kind += f" (since {b['graduated_in']})"
            rows.append((api["api"], b["name"], kind, verdict))
    return rows, notes


def fit_rows(rows: list[tuple[str, ...]], notes: list[str]) -> list[tuple[str, ...]]:
    """Rows within :data:`WIDTH`: a verdict too long for its column moves to the notes."""
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


def _wrapped(line: str) -> str:
    indent = " " * (len(line) - len(line.lstrip()) + 4)
    return textwrap.fill(
        line, WIDTH, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False
    )


def cmd_backends(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    report = backends_report()
    if args.json:
        print(json.dumps(report, indent=2), file=out)
        return 0
    rows, notes = api_rows(report)
    table = format_table(fit_rows(rows, notes))
    print("\n".join(map(_wrapped, _header_lines(report))) + f"\n\n{table}", file=out)
    if notes:
        print(file=out)
        for i, text in enumerate(notes, 1):
            print(textwrap.fill(f"[{i}] {text}", WIDTH, subsequent_indent="    "), file=out)
    print(file=out)
    for line in detail_lines(report):
        print(_wrapped(line), file=out)
    print(
        "\nreport a bug here, with this whole output pasted (the template asks for it):", file=out
    )
    print(f"  {ISSUE_TRACKER}", file=out)
    for module in report["missing_modules"]:
        print(f"note: API module {module} is missing from this build; not listed", file=err)
    return 0
