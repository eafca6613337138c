#!/usr/bin/env python3
"""Lines per part of the package (issue 44's table and budget: at most 14,000 lines, no module
over 600): ``python scripts/line_budget.py [REPO]`` prints the table the closing notes quote."""

from __future__ import annotations

import sys
from pathlib import Path

COMPILED = {
    "torch_op",
    "tracing",
    "traceable",
    "transparent",
    "autocast",
    "traced_blocks",
    "guarded_state",
    "op_schema",
    "former_ops",
    "overlap",
    "dynamo_marks",
}
LIFECYCLE = {
    "gating/history.py",
    "gating/lifecycle.py",
    "lifecycle.py",
    "dispatch/lifecycle_checks.py",
}
DISPATCH_ROOT = {"backend_dispatch.py", "backend_families.py", "aliasing.py"}
GATING_ROOT = {"api_logging.py", "api_modules.py", "__init__.py", "utils.py", "_version.py"}
OPS_ROOT = {"norm.py", "gemm.py", "fused_norm.py"}


def part(rel: str) -> str:
    """The part of the package a module (path relative to ``flashinfer/``) belongs to."""
    path = Path(rel)
    top = path.parts[0]
    if rel in LIFECYCLE or top == "features":
        return "lifecycle runtime"
    if rel == "torch_boundary.py" or (top in ("dispatch", "codegen") and path.stem in COMPILED):
        return "compile route"
    if top in ("dispatch", "codegen") or rel in DISPATCH_ROOT:
        return "dispatch (eager)"
    if top == "autotuner" or rel.startswith("cli/autotune"):
        return "autotuner (+its CLI)"
    if top == "cli" or rel == "__main__.py":
        return "cli"
    if top in ("gating", "settings") or rel in GATING_ROOT:
        return "gating + settings"
    if top == "testing":
        return "testing"
    if top in ("kernels", "experimental", "nn") or rel in OPS_ROOT:
        return "ops, kernels, nn"
    return "other: " + rel


def main(argv: list[str]) -> int:
    package = Path(argv[1] if len(argv) > 1 else ".") / "flashinfer"
    totals: dict[str, int] = {}
    sizes = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).as_posix()
        lines = len(path.read_text(encoding="utf-8").splitlines())
        totals[part(rel)] = totals.get(part(rel), 0) + lines
        sizes.append((lines, rel))
    for name, lines in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f"| {name} | {lines:,} |")
    print(f"| **total** | **{sum(totals.values()):,}** | modules: {len(sizes)}")
    print("over 600:", [(n, rel) for n, rel in sorted(sizes, reverse=True) if n > 600])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
