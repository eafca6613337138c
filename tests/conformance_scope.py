"""``pytest --conformance-scope API[:BACKEND]``: the conformance and overlap cases of one API
(or one of its backends) that can run on this machine, and nothing else of those tests.

An author of a backend asks for their own cases (``--conformance-scope rmsnorm:tworow``;
``api`` is the backend of an API without backends, ``fused_add_rmsnorm:api``), and the run
leaves out, rather than skips, what cannot run here: the ``cuda`` cases without a CUDA
device and the cases the backend's own checker rejects.  So a targeted CI lane, where a
skipped test counts as not run (``scripts/ci/run_verdict.py``), is green when every case
that applies here passes, and red when none applies (a run of no test is not green).  The
option repeats; tests that are not conformance or overlap cases are kept as they are.  The
scope token ``conformance:API[:BACKEND]`` of a PR's test block and of the bot's ``run``
command becomes this option (``scripts/pr_checks/scope/targets.py``).
"""

from __future__ import annotations

import collections
import re

import pytest
import torch

from flashinfer.testing import support_reason
from flashinfer.testing.conformance import api_name_of

OPTION = "--conformance-scope"
_SCOPE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?::([A-Za-z_][A-Za-z0-9_]*))?")


def add_option(parser: pytest.Parser) -> None:
    parser.addoption(
        OPTION,
        action="append",
        default=[],
        metavar="API[:BACKEND]",
        help="run only the conformance and overlap cases of API (its BACKEND, or 'api' for "
        "an API without backends) that can run here: cuda cases without a CUDA device and "
        "cases the backend's checker rejects are left out, not skipped; repeatable",
    )


def _scopes(config: pytest.Config) -> list[tuple[str, str | None]]:
    scopes = []
    for text in config.getoption("conformance_scope"):
        match = _SCOPE.fullmatch(text)
        if match is None:
            raise pytest.UsageError(
                f"{OPTION} {text!r}: expected API or API:BACKEND (identifiers), e.g. "
                "rmsnorm:triton, or fused_add_rmsnorm:api for an API without backends"
            )
        scopes.append((match[1], match[2]))
    return scopes


def _why_left_out(
    case_item: object, device: str, scopes: list[tuple[str, str | None]]
) -> str | None:
    """Why a conformance or overlap case is outside the scopes or cannot run here."""
    api, named = api_name_of(case_item.op), case_item.backend  # type: ignore[attr-defined]
    if not any(api == a and b in (None, named or "api") for a, b in scopes):
        return "outside the scope"
    if device == "cuda" and not torch.cuda.is_available():
        return "a cuda case, and no CUDA device here"
    if named not in (None, "auto"):
        inputs = case_item.case.make_inputs(device)  # type: ignore[attr-defined]
        if support_reason(case_item.op, named, inputs) is not None:  # type: ignore[attr-defined]
            return "rejected by the backend's checker"
    return None


def select(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Leave out (deselect) the conformance and overlap cases outside the scopes, or that
    cannot run here; report how many and why."""
    scopes = _scopes(config)
    if not scopes:
        return
    kept, left_out = [], []
    why: collections.Counter[str] = collections.Counter()
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        case_item = params.get("item")
        if not hasattr(case_item, "case"):  # not a conformance or overlap case: kept
            kept.append(item)
            continue
        reason = _why_left_out(case_item, params.get("device", "cpu"), scopes)
        if reason is None:
            kept.append(item)
        else:
            left_out.append(item)
            why[reason] += 1
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = kept
    summary = ", ".join(f"{n} {reason}" for reason, n in why.most_common()) or "none"
    config.stash[_SUMMARY] = f"{OPTION} {' '.join(config.getoption('conformance_scope'))}: " + (
        f"{len(left_out)} case(s) left out ({summary})"
    )


_SUMMARY = pytest.StashKey[str]()


def summary(config: pytest.Config) -> str:
    """The line the terminal summary prints for a scoped run (empty otherwise)."""
    return config.stash.get(_SUMMARY, "")
