"""The recording run's pytest plugin (``-p testmap_plugin``, test-only): moves coverage's
context and the data-read context to the test, fixture or test module being run, and writes
each test's duration and shared fixtures to ``$TESTMAP_DIR/tests.json``.

Cached results credit only the test that computes them: before each test the plugin empties
the dispatcher's verdict cache (``flashinfer.dispatch.verdicts.forget_verdicts``, when that
module is loaded; the cache is transparent, so no test sees a difference), so every test
runs, and is credited with, the checks its calls make.  Generated dispatchers are built
once per op: the map credits their generators to every test (``record.py``).

Contexts: ``<node id>`` (setup, call, teardown of one test), ``collect:<test file>`` (the
test file's import: case declarations, what it imports first), ``fixture:<baseid>::<name>``
(a fixture shared beyond one test: credited to every test that uses it), ``""`` (session).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import sitecustomize as site

_durations: dict[str, float] = {}
_fixtures: dict[str, list[str]] = {}
_outcomes: dict[str, str] = {}


def _switch(context: str) -> str:
    before = site.CURRENT
    site.CURRENT = context
    os.environ["TESTMAP_TEST"] = context
    if site.COV is not None:
        site.COV.switch_context(context)
    return before


RESET = "testmap:reset"


def fixture_key(fixturedef: Any) -> str:
    return f"fixture:{fixturedef.baseid}::{fixturedef.argname}"


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[None]:
    if not isinstance(collector, pytest.Module):
        return (yield)
    before = _switch(f"collect:{collector.nodeid}")
    try:
        return (yield)
    finally:
        _switch(before)


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef: Any, request: Any) -> Iterator[None]:
    if fixturedef.scope == "function":
        return (yield)
    before = _switch(fixture_key(fixturedef))
    try:
        return (yield)
    finally:
        _switch(before)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: Any) -> Iterator[None]:
    verdicts = sys.modules.get("flashinfer.dispatch.verdicts")
    forget = getattr(verdicts, "forget_verdicts", None)
    before = _switch(RESET)  # the emptying itself is nobody's: the map ignores RESET
    if forget is not None:
        forget()
    _switch(item.nodeid)
    keys = []
    info = getattr(item, "_fixtureinfo", None)
    for name in getattr(item, "fixturenames", ()):
        defs = info.name2fixturedefs.get(name) if info is not None else None
        if defs and defs[-1].scope != "function":
            keys.append(fixture_key(defs[-1]))
    _fixtures[item.nodeid] = keys
    try:
        return (yield)
    finally:
        _switch(before)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    """Add the shared fixtures the test got by name (``request.getfixturevalue``, also
    inside another fixture): its static fixture names miss them, and a module fixture's
    setup ran in the first test that asked only.  The request is gone after teardown."""
    used = getattr(getattr(item, "_request", None), "_fixture_defs", None) or {}
    keys = _fixtures.setdefault(item.nodeid, [])
    for fixturedef in used.values():
        key = fixture_key(fixturedef)
        if fixturedef.scope != "function" and key not in keys:
            keys.append(key)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _durations[report.nodeid] = _durations.get(report.nodeid, 0.0) + report.duration
    if report.when == "call" or report.outcome != "passed":
        _outcomes[report.nodeid] = report.outcome


def pytest_sessionfinish(session: pytest.Session) -> None:
    out = os.environ.get("TESTMAP_DIR")
    if not out:
        return
    tests = {
        nodeid: {
            "duration": _durations.get(nodeid, 0.0),
            "fixtures": _fixtures.get(nodeid, []),
            "outcome": _outcomes.get(nodeid, "passed"),
        }
        for nodeid in _fixtures
    }
    with open(os.path.join(out, "tests.json"), "w", encoding="utf-8") as fh:
        json.dump(tests, fh)
