#!/usr/bin/env python3
"""Lifecycle check: every experimental API and backend names its owner, its tracking issue
and a graduation date within the policy's horizon.

Lists what ``python -m flashinfer.experimental`` lists (:mod:`flashinfer.lifecycle`, after
``flashinfer.load_all_apis()``) and fails for each feature (``lifecycle_problems``):

* whose ``owner=`` is missing or is not a person's ``@handle`` (a team such as
  ``@org/team`` or ``@flashinfer-gemm`` is not an owner);
* whose ``tracking_issue=`` is missing or is neither a positive issue number nor a URL;
* whose ``graduate_by="YYYY-MM-DD"`` is missing or malformed, before today (graduate it,
  remove it, or move the date in a reviewed change), or further ahead than
  ``flashinfer.lifecycle.GRADUATION_HORIZON_MONTHS`` months.

It also checks the exits taken (``flashinfer.dispatch.lifecycle_checks.exit_problems``,
against the declared history ``flashinfer/gating/history.py``): a graduated backend or API
still marked experimental, an alias or tombstone past its expiry (``--version`` fixes the
package's version, for tests), a stable backend whose code lives under
``flashinfer/experimental/``.  Each failure names the three exits: graduate, extend (a new
date with the reason in the tracking issue), remove.

Malformed metadata never stops a module from importing (the marker records it and warns
once); this check is where it fails.

Usage: ``python scripts/pr_checks/experimental_lifecycle.py [--today YYYY-MM-DD]
[--version X.Y.Z] [--module MOD ...]``.  ``--today`` fixes the date (for tests); ``--module``
(for tests) imports those modules instead of the package's API modules and checks only what
they define.
Exit 0 clean, 1 with one line per problem.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from collections.abc import Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def _date(text: str) -> dt.date:
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected YYYY-MM-DD, got {text!r}") from None


def _in_scope(name: str, modules: Sequence[str]) -> bool:
    return any(name == m or name.startswith(m + ".") for m in modules)


def _exit_problems(modules: Sequence[str] | None, version: str | None) -> list[str]:
    """The exit rules over the loaded ops (those of ``modules`` only, when given)."""
    from flashinfer._version import __version__
    from flashinfer.dispatch.lifecycle_checks import exit_problems
    from flashinfer.gating.op_registry import registered_ops
    from flashinfer.gating.records import api_inventory

    ops = [op for op in registered_ops() if not modules or _in_scope(op.api_key, modules)]
    apis = [r.name for r in api_inventory(experimental=True)]
    return exit_problems(ops, apis, version=version or __version__)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--today", type=_date, help="the date to check against (YYYY-MM-DD)")
    parser.add_argument("--version", help="the package version to check expiries against")
    parser.add_argument(
        "--module", action="append", help="check these modules instead (repeatable; for tests)"
    )
    args = parser.parse_args(argv)

    from flashinfer.lifecycle import (
        experimental_features,
        format_listing,
        lifecycle_problems,
        load_api_modules,
    )

    missing = load_api_modules(args.module)
    if args.module and missing:
        print(f"experimental_lifecycle: cannot import {', '.join(missing)}")
        return 1
    for module in missing:
        print(
            f"note: API module {module} does not exist; nothing of it is checked", file=sys.stderr
        )
    features = experimental_features(load=False)
    if args.module:
        features = [f for f in features if _in_scope(f.api, args.module)]
    print(format_listing(features))
    problems = lifecycle_problems(features, args.today)
    problems += _exit_problems(args.module, args.version)
    for problem in problems:
        print(problem)
    if problems:
        print(f"experimental_lifecycle: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print(f"experimental_lifecycle: OK ({len(features)} experimental API(s)/backend(s))")
    return 0


if __name__ == "__main__":
    if str(REPO_ROOT) not in sys.path:  # run from a checkout without an install
        sys.path.insert(0, str(REPO_ROOT))
    sys.exit(main())
