"""One log line per automatic choice, on the ``flashinfer.dispatch`` logger at INFO.

Once per (op, backend, how it was chosen): the heuristic's pick (``auto``), a restriction's
(``restricted by ...``), the autotuner's (``tuned in this process``); the line names the
candidates and the experimental backends the gate left out.  Nothing is configured by the
library; ``FLASHINFER_DISPATCH_LOG=1`` also prints to stderr.  With logging off, or the line
already logged, a call pays an attribute test, and a level change is seen at the next call.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from autotuner_fakes import FakeRunner, clean_tuner
from autotuner_fakes import make_op as make_tunable

import flashinfer
from flashinfer.backend_dispatch import backend_requirement, experimental_backend, use_backends
from flashinfer.dispatch.choice_log import LOG_SWITCH, forget_logged_choices

REPO = Path(__file__).resolve().parents[1]
LOGGER = "flashinfer.dispatch"
X = torch.zeros(2)


@pytest.fixture(autouse=True)
def _fresh_log():
    forget_logged_choices()
    yield
    forget_logged_choices()


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER]


def make_op(name: str):
    def check(x, backend="auto"):
        return x.numel() < 3 or backend != "auto" or True

    def small_only(x, backend="auto"):
        return x.numel() < 3

    def heuristic(candidates, x, backend="auto"):
        return sorted(candidates, reverse=True)

    def api(x, backend="auto"):
        return backend

    api.__qualname__ = name
    return backend_requirement({"a": check, "b": small_only}, heuristic_func=heuristic)(api)


def test_one_line_per_op_backend_and_how(caplog):
    op = make_op("logged_once")
    key = op.api_key
    caplog.set_level(logging.INFO, logger=LOGGER)
    for _ in range(3):
        op(X)
    assert _lines(caplog) == [f"{key}: using backend 'b' (auto; candidates ['b', 'a'])"]
    op(torch.zeros(4))  # b refuses: another backend, another line
    op(X, backend="a")  # explicitly named: not logged
    with use_backends({op: ["a", "b"]}):
        op(X)
        op(X)
    assert _lines(caplog)[1:] == [
        f"{key}: using backend 'a' (auto; candidates ['a'])",
        f"{key}: using backend 'a' (restricted by use_backends; candidates ['a', 'b'])",
    ]
    op.call_reference(X)  # the reference path logs as the generated one: already logged
    op(torch.zeros(4), skip_check=True)  # "auto" with skip_check=True chooses too
    assert len(_lines(caplog)) == 3


def test_the_line_names_the_experimental_backends_left_out(caplog):
    @experimental_backend
    def fits(x, backend="auto"):
        return True

    def api(x, backend="auto"):
        return backend

    api.__qualname__ = "with_experimental"
    op = backend_requirement({"a": lambda x, backend="auto": True, "x": fits})(api)
    caplog.set_level(logging.INFO, logger=LOGGER)
    op(X)
    assert _lines(caplog) == [
        f"{op.api_key}: using backend 'a' (auto; candidates ['a']; experimental left out: ['x'])"
    ]


def test_the_line_of_the_issue_names_what_mm_left_out(caplog):
    """mm routes "auto" calls to the autotuner, which runs the first candidate untuned; its
    experimental backends are read from the op (split-K's line: tests/experimental/)."""
    caplog.set_level(logging.INFO, logger=LOGGER)
    flashinfer.mm(torch.randn(16, 2048), torch.randn(2048, 32))
    dropped = list(flashinfer.mm.dropped_experimental_backends)
    assert set(dropped) <= set(flashinfer.mm.experimental_backends)
    left_out = f"; experimental left out: {dropped}" if dropped else ""
    assert _lines(caplog) == [
        f"flashinfer.mm: using backend 'torch' (auto; candidates ['torch', 'triton']{left_out})"
    ]


def test_with_logging_off_a_call_pays_an_attribute_test_and_level_changes_are_seen(caplog):
    op = make_op("level_changes")
    logger = logging.getLogger(LOGGER)
    calls = []
    note = op.dispatcher._ns["_note"]
    op.dispatcher._ns["_note"] = lambda *a: calls.append(a) or note(*a)
    caplog.set_level(logging.INFO, logger=LOGGER)  # caplog's handler takes INFO (restored after)
    logger.setLevel(logging.WARNING)  # ... but the logger is off for it
    op(X)
    assert LOG_SWITCH.armed is False and len(calls) == 1  # asked once, then disarmed
    op(X)
    op(torch.zeros(4))
    assert len(calls) == 1 and _lines(caplog) == []
    logger.setLevel(logging.INFO)  # seen at the next call
    op(X)
    assert _lines(caplog) == [f"{op.api_key}: using backend 'b' (auto; candidates ['b', 'a'])"]
    op(X)
    assert len(calls) == 2  # logged: the backend is compared, no call
    logging.disable(logging.INFO)
    try:
        op(torch.zeros(4))
        assert LOG_SWITCH.armed is False and len(_lines(caplog)) == 1
    finally:
        logging.disable(logging.NOTSET)
    op(torch.zeros(4))
    assert len(_lines(caplog)) == 2


def test_the_library_adds_no_handler(caplog):
    caplog.set_level(logging.INFO, logger=LOGGER)
    make_op("no_handlers")(X)
    assert _lines(caplog)
    assert logging.getLogger("flashinfer").handlers == []
    assert logging.getLogger(LOGGER).handlers == []
    assert logging.getLogger(LOGGER).parent is logging.getLogger("flashinfer")


@pytest.mark.parametrize("direct", [True, False])
def test_the_autotuner_logs_what_it_runs(caplog, direct):
    """Untuned: the first candidate (``auto``); tuned: its choice (``tuned in this
    process``).  An op whose body calls the tuner is logged by the tuner only."""
    runners = {n: FakeRunner(n) for n in ("a", "b")}
    op = make_tunable(runners, direct=direct)
    x = torch.zeros(4)
    key = op.api_key
    caplog.set_level(logging.INFO, logger=LOGGER)
    with clean_tuner(warmup=0, repeat=1) as tuner:
        op(x)
        op(x)
        with flashinfer.autotune():
            op(x)
        record = tuner.last_tuning()
        tuner.set_choice(record.key, record.choice._replace(backend="b"))
        op(x)
        op(x)
        with use_backends({op: ["b", "a"]}):
            op(torch.zeros(40))  # another key: untuned, restricted
    lines = _lines(caplog)
    assert lines[0] == f"{key}: using backend 'a' (auto; candidates ['a', 'b'])"
    assert f"{key}: using backend 'b' (tuned in this process; candidates ['a', 'b'])" in lines
    assert lines[-1] == (
        f"{key}: using backend 'b' (restricted by use_backends; candidates ['b', 'a'])"
    )
    assert len(lines) == len(set(lines)) == 3 + (record.choice.backend == "a")


def _run(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_an_environment_switch_prints_the_lines_to_stderr():
    code = (
        "import torch, flashinfer\n"
        "for _ in range(2):\n"
        "    flashinfer.rmsnorm(torch.randn(2, 8), torch.randn(8))\n"
    )
    on = _run(code, FLASHINFER_DISPATCH_LOG="1")
    assert on.returncode == 0, on.stderr
    assert on.stderr.count("[flashinfer.dispatch] flashinfer.rmsnorm: using backend 'torch'") == 1
    off = _run(code, FLASHINFER_DISPATCH_LOG="0")
    assert off.returncode == 0 and "flashinfer.dispatch" not in off.stderr
    odd = _run(code, FLASHINFER_DISPATCH_LOG="yes")
    assert "FLASHINFER_DISPATCH_LOG='yes' is not a recognised value; treated as 0" in odd.stderr
