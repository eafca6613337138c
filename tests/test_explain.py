"""``op.explain(...)`` and ``flashinfer explain``: what an ``"auto"`` call would do, and why.

Explain must say what the call really does (the candidates it records, the backend that
runs: checked against real calls of every operator's declared cases and of random ops),
give each backend's verdict with the stage that decided it, name where the choice comes
from (heuristic, restriction, tuned in this process, loaded from a file), and never run the
API body.
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
from autotuner_fakes import FakeRunner, clean_tuner, ops_with_backends
from autotuner_fakes import make_op as make_tunable
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_dispatch_fast_path import PLAIN, backend_tables, fake_cuda, gate, make_op

import flashinfer
from flashinfer import testing
from flashinfer.autotuner import load_tuning_file, save_tuning_file
from flashinfer.backend_dispatch import (
    BackendSupportedError,
    Explanation,
    backend_requirement,
    experimental_backend,
    supported_compute_capability,
    use_backends,
)

REPO = Path(__file__).resolve().parents[1]
GATE = "FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS"


def _operator_cases() -> list[tuple[object, testing.Case]]:
    return [
        (op, case)
        for op in testing.declared_ops()
        if hasattr(op, "explain")
        for case in testing.cases_for(op)
    ]


@pytest.mark.parametrize(
    ("op", "case"), _operator_cases(), ids=lambda v: getattr(v, "name", getattr(v, "api_name", ""))
)
def test_explain_says_what_every_operator_does(op, case, caplog):
    """Every operator with backends, every declared case: the explained candidates are those
    the call records, and the explained choice is the backend the call logs as run."""
    inputs = case.make_inputs()
    explanation = op.explain(**inputs)
    assert isinstance(explanation, Explanation)
    assert [v.backend for v in explanation.verdicts] == list(op.backend_checks)
    flashinfer.reset_experimental_warnings()
    from flashinfer.dispatch.choice_log import forget_logged_choices

    forget_logged_choices()
    with caplog.at_level(logging.INFO, logger="flashinfer.dispatch"):
        op(**inputs)
    assert list(op.suitable_auto_backends) == list(explanation.candidates)
    assert explanation.chosen == explanation.candidates[0]
    [record] = [r for r in caplog.records if r.name == "flashinfer.dispatch"]
    assert f"using backend {explanation.chosen!r}" in record.getMessage()
    assert str(explanation).startswith(f"flashinfer.{op.api_name}(")


def _raising_body_op():
    def check(x, backend="auto"):
        return True

    def api(x, backend="auto"):
        raise AssertionError("explain ran the API body")

    api.__qualname__ = "explained_never_run"
    return backend_requirement({"a": check, "b": check})(api)


def test_explain_never_runs_the_body():
    op = _raising_body_op()
    explanation = op.explain(torch.zeros(2))
    assert explanation.candidates == ("a", "b") and explanation.chosen == "a"
    assert explanation.source == "declaration order"
    with pytest.raises(AssertionError, match="explain ran the API body"):
        op(torch.zeros(2))  # the body really raises


def test_explain_binds_arguments_as_a_call_does():
    op = _raising_body_op()
    with pytest.raises(TypeError):
        op.explain()
    named = op.explain(torch.zeros(2), backend="b", skip_check=True)
    assert named.chosen == "a"  # explained as backend="auto"
    assert "backend='b' was given; explained as backend='auto'" in named.notes


def _staged_op():
    """Backends whose verdicts are decided at each stage."""

    @supported_compute_capability([90], cpu=False)
    def gpu_only(x, backend="auto"):
        return True

    @supported_compute_capability([80, 90], cpu=True)
    def refuses(x, backend="auto"):
        raise ValueError("too small for this backend")

    @supported_compute_capability([80, 90], cpu=True)
    def fine(x, backend="auto"):
        return True

    @experimental_backend(owner="@tests", tracking_issue=14)
    @supported_compute_capability([80, 90], cpu=True)
    def exp(x, backend="auto"):
        return True

    def heuristic(candidates, x, backend="auto"):
        return [c for c in candidates if c != "dropped"][::-1]

    def api(x, backend="auto"):
        raise AssertionError("never run")

    api.__qualname__ = "staged_api"
    table = {"gpu": gpu_only, "refuses": refuses, "fine": fine, "dropped": fine, "exp": exp}
    table["last"] = fine
    return backend_requirement(table, heuristic_func=heuristic)(api)


def test_each_verdict_names_the_stage_that_decided_it(monkeypatch):
    monkeypatch.delenv(GATE, raising=False)
    op = _staged_op()
    e = op.explain(torch.zeros(2))
    stages = {v.backend: (v.can_run, v.stage, v.rank) for v in e.verdicts}
    assert stages == {
        "gpu": (False, "capability", None),
        "refuses": (False, "checker", None),
        "fine": (True, None, 1),
        "dropped": (True, "heuristic", None),
        "exp": (True, "gate", None),
        "last": (True, None, 0),
    }
    assert "needs CUDA tensors" in e.verdict("gpu").reason
    assert e.verdict("refuses").reason.endswith("too small for this backend")
    assert GATE in e.verdict("exp").reason
    assert re.search(r"exp +experimental +yes +left out \(gate\) +experimental: FLASH", str(e))
    assert e.candidates == ("last", "fine") and e.chosen == "last" and e.source == "heuristic"
    assert not e.gate_on
    monkeypatch.setenv(GATE, "1")
    assert op.explain(torch.zeros(2)).candidates == ("last", "exp", "fine")
    with use_backends({op: ["exp", "dropped", "refuses"]}):
        r = op.explain(torch.zeros(2))
    assert r.candidates == ("exp", "dropped") and r.source == "restricted"
    assert r.restriction == "use_backends"
    assert r.verdict("fine").stage == "restriction"
    assert r.verdict("refuses").stage == "checker"  # listed, but cannot run
    text = str(r)
    assert "left out (restriction)  not listed by use_backends" in text
    assert "choice: 'exp' (restricted by use_backends)" in text
    with pytest.raises(KeyError):
        r.verdict("nope")


def test_a_call_that_would_fail_is_explained_not_raised():
    op = _staged_op()
    with use_backends({op: ["gpu", "refuses"]}):
        e = op.explain(torch.zeros(2))
        with pytest.raises(BackendSupportedError):
            op(torch.zeros(2))
    assert e.chosen is None and e.candidates == ()
    assert e.error and "choice: none; the call raises" in str(e)

    def common(x, backend="auto"):
        raise ValueError("x must be 1-D")

    def api(x, backend="auto"):
        raise AssertionError("never run")

    api.__qualname__ = "common_refuses"
    rejecting = backend_requirement({"a": lambda x: True}, common_check=common)(api)
    e = rejecting.explain(torch.zeros(2))
    assert e.error == "its common check rejected the inputs: x must be 1-D"
    assert e.verdict("a").stage == "common check"


def test_an_api_without_backends_has_nothing_to_choose():
    def common(x):
        return x.dim() == 1

    def api(x):
        raise AssertionError("never run")

    api.__qualname__ = "no_backends"
    op = backend_requirement({}, common_check=common)(api)
    e = op.explain(torch.zeros(2))
    assert (e.verdicts, e.candidates, e.chosen, e.error) == ((), (), None, None)
    assert "the API has no backends to choose from: its body runs" in e.notes
    assert "choice: none to make" in str(e)
    refused = op.explain(torch.zeros(2, 2))
    assert refused.error == "its common check returned False for these inputs"


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_explain_agrees_with_the_call_on_random_ops(data: st.DataObject) -> None:
    """Random tables (checker styles, capabilities, experimental marks), heuristics, gate
    values, capabilities and restrictions: explain's candidates and choice are what the call
    records and runs, and it explains a failure exactly when the call fails."""
    backends = data.draw(backend_tables("plain"), label="backends")
    heuristic = data.draw(
        st.sampled_from(["none", "identity", "reverse", "drop_first", "empty", "add_unknown"])
    )
    op, _ = make_op(
        PLAIN, backends, data.draw(st.sampled_from([None, "ok", "false"])), "same", heuristic
    )
    names = [b[0] for b in backends]
    restricted = data.draw(st.booleans())
    listed = data.draw(st.permutations(names))[: data.draw(st.integers(1, len(names)))]
    x = torch.zeros(data.draw(st.sampled_from([2, 4])))
    cc = data.draw(st.sampled_from([None, 80, 90]))
    if cc is not None:
        x.fake_cc = cc  # type: ignore[attr-defined]
    with gate(data.draw(st.sampled_from([None, "1"]))), fake_cuda(), warnings.catch_warnings():
        warnings.simplefilter("ignore", flashinfer.ExperimentalWarning)
        block = use_backends({op: listed}) if restricted else None
        if block is not None:
            block.__enter__()
        try:
            explanation = op.explain(x, torch.ones(2))
            try:
                ran = op(x, torch.ones(2))
            except (BackendSupportedError, ValueError):
                ran = None
        finally:
            if block is not None:
                block.__exit__(None, None, None)
    if ran is None:
        assert explanation.chosen is None and explanation.error
    else:
        assert explanation.candidates == tuple(ran[1]) and explanation.chosen == ran[1][0]


def test_the_autotuners_choice_and_where_it_comes_from(tmp_path):
    """A routed op: untuned, the heuristic's first; tuned here; loaded from a file.  An op
    whose body calls the tuner says it cannot show the tuned choice."""
    runners = {n: FakeRunner(n, space=(None, 1)) for n in ("a", "b")}
    op = make_tunable(runners, direct=True)
    x = torch.zeros(4)
    with clean_tuner(warmup=0, repeat=1) as tuner:
        assert op.explain(x).source == "declaration order"
        with flashinfer.autotune():
            assert any("inside autotune()" in n for n in op.explain(x).notes)
            op(x)
        record = tuner.last_tuning()
        tuner.set_choice(record.key, record.choice._replace(backend="b", tactic=1))
        tuned = op.explain(x)
        assert (tuned.chosen, tuned.tactic, tuned.source) == ("b", 1, "tuned in this process")
        assert "choice: 'b' (tuned in this process, tactic 1)" in str(tuned)
        with use_backends({op: ["a"]}):
            restricted = op.explain(x)
        assert restricted.chosen == "a" and any("not a candidate" in n for n in restricted.notes)
        path = tmp_path / "tuned.json"
        save_tuning_file(path)
        tuner.clear()
        load_tuning_file(path)
        assert op.explain(x).source == "loaded from a file"
    body_form = make_tunable({"a": FakeRunner("a")}, direct=False)
    assert any("register the op with direct=True" in n for n in body_form.explain(x).notes)


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "TRITON_INTERPRET": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "flashinfer", "explain", *args],
        cwd=REPO,
        env=full,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_cli_prints_a_table_per_shape_and_json(capsys):
    # The tables in process (this process's environment is the one a subprocess would get);
    # the JSON in a fresh one, which reads FLASHINFER_BACKENDS as a user's does.
    from flashinfer.cli import main

    assert main(["explain", "mm", "--shapes", "16x2048x32,4x32x1024", "--dtype", "bfloat16"]) == 0
    tables = capsys.readouterr().out.strip().split("\n\n")
    assert len(tables) == 2
    assert tables[0].startswith("flashinfer.mm(a=bfloat16[16, 32] on cpu, b=bfloat16[32, 2048]")
    assert "choice: 'torch' (heuristic)" in tables[0]
    # mm's experimental backends, read from the op (split-K's own row: tests/experimental/).
    for name in flashinfer.mm.experimental_backends:
        row = re.search(rf"^ *{name} +experimental +(yes|no) +(.*)$", tables[1], flags=re.M)
        assert row is not None, tables[1]
        if row[1] == "yes":  # it could run: only the gate leaves it out
            assert row[2].startswith("left out (gate)"), row[0]
    proc = _cli(
        "rmsnorm", "--shapes", "8x64", "--json", env={"FLASHINFER_BACKENDS": "rmsnorm=triton"}
    )
    assert proc.returncode == 0, proc.stderr
    [doc] = json.loads(proc.stdout)
    assert doc["chosen"] == "triton" and doc["source"] == "restricted"
    assert doc["restriction"] == "FLASHINFER_BACKENDS"


def test_cli_shows_a_result_loaded_with_cache(tmp_path, capsys):
    """``--tuning-file`` loads a tuning file first: the choice's source says so.  In process, so
    that the file can be written by this test's tuner."""
    from flashinfer.autotuner import AutoTuner, Choice
    from flashinfer.autotuner.keys import make_key
    from flashinfer.cli import main

    a, b = torch.randn(16, 32), torch.randn(32, 2048)  # the command's inputs for 16x2048x32
    path = tmp_path / "tuned.json"
    with clean_tuner(warmup=0, repeat=1) as tuner:
        key = make_key(flashinfer.mm.api_key, (a, b, None, None))
        tuner.set_choice(key, Choice("torch", None, 1e-3))
        save_tuning_file(path)
        tuner.clear()
        assert main(["explain", "mm", "--shapes", "16x2048x32", "--json"]) == 0
        [untuned] = json.loads(capsys.readouterr().out)
        assert (
            main(["explain", "mm", "--shapes", "16x2048x32", "--tuning-file", str(path), "--json"])
            == 0
        )
        [loaded] = json.loads(capsys.readouterr().out)
        assert AutoTuner.get().choice(key) is not None
    assert untuned["source"] == "heuristic"
    assert (loaded["chosen"], loaded["source"]) == ("torch", "loaded from a file")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("nope", "--shapes", "1x2x3"),
            f"unknown op 'nope'; ops with backends: {ops_with_backends()}",
        ),
        (("mm", "--shapes", "1x2"), "has 2 dimensions"),
        (("mm", "--shapes", "1x2x3", "--dtype", "int8"), "invalid choice: 'int8'"),
    ],
)
def test_cli_usage_errors(args, message, capsys):
    """In process (the exit status reaches the shell as in the test above)."""
    from flashinfer.cli import main

    code = main(["explain", *args])
    err = capsys.readouterr().err
    assert code == 2 and message in err, err
