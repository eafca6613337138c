"""Issue 34, item 17: the autotuner says, once per ``autotune()`` block, what it timed, what
it left out and why, and what it saved; a noisy measurement is flagged, saved with its
spread, and timed again by a later block that loads it.  Fake ops (tests/autotuner_fakes.py)
go through the real dispatcher; timings are scripted where the figures matter."""

from __future__ import annotations

import inspect
import json
import logging
import math
import os
import subprocess
import sys
import warnings

import autotuner_fakes
import pytest
import torch
from autotuner_fakes import (
    FakeRunner,
    clean_tuner,
    declare_cli_inputs,
    make_op,
    script_timings,
)

import flashinfer
from flashinfer.autotuner import (
    NOISY_SPREAD,
    AutoTuner,
    AutotuneReport,
    AutotuneReportWarning,
    TuningFileWarning,
    autotune,
    load_tuning_file,
)
from flashinfer.cli import main
from flashinfer.gating.messages import tuning_left_out_by_gate


@pytest.fixture(autouse=True, params=[False, True], ids=["via-body", "direct"])
def registration(request, monkeypatch):
    monkeypatch.setattr(autotuner_fakes, "DIRECT", request.param)
    return request.param


@pytest.fixture(autouse=True)
def fast_tuner():
    with clean_tuner(warmup=0, repeat=1) as tuner:
        tuner.noisy_spread = NOISY_SPREAD  # the default: conftest turns it off elsewhere
        yield tuner


def reports(caught):
    return [w for w in caught if issubclass(w.category, AutotuneReportWarning)]


def narrow_backend(name, x):
    if name == "wide" and x.shape[0] < 64:
        raise ValueError("needs at least 64 rows")
    return True


def three_backend_op():
    """'a' (two tactics) and 'b' time; 'wide' refuses small inputs with a reason; 'exp' is
    experimental (the gate is off in tests)."""
    runners = {
        "a": FakeRunner("a", [1, 2]),
        "b": FakeRunner("b", [None]),
        "wide": FakeRunner("wide", [None]),
        "exp": FakeRunner("exp", [None]),
    }
    return make_op(runners, experimental={"exp"}, supports=narrow_backend), runners


# ---- once per block, with the right content -------------------------------------------


def test_one_summary_per_block_names_what_was_timed_left_out_and_saved(tmp_path):
    op, runners = three_backend_op()
    path = tmp_path / "tuned.json"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with autotune(tuning_file=path):
            for _ in range(3):
                op(torch.zeros(4))
            op(torch.zeros(16))  # a second key
    (warning,) = reports(caught)  # once per block, not per call nor per key
    text = str(warning.message)
    assert text.startswith("autotune() block: 2 keys timed, 0 already tuned")
    name = op.api_name
    assert f"{name}(float32[4] on cpu): timed a, b (3 (backend, tactic) pairs; 3 calls)" in text
    assert f"{name}(float32[16] on cpu): timed a, b (3 (backend, tactic) pairs; 1 call)" in text
    assert "left out wide: support check rejected the inputs: needs at least 64 rows" in text
    assert f"left out exp: {tuning_left_out_by_gate()}" in text
    assert "FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS is not 1" in text
    assert f"tuning file {str(path)!r}: did not exist yet; saved 2 entries" in text
    assert runners["wide"].calls == [] and runners["exp"].calls == []


def test_the_warning_points_at_the_users_with_line():
    op, _ = three_backend_op()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = inspect.currentframe().f_lineno + 1
        with autotune():
            op(torch.zeros(4))
    (warning,) = reports(caught)
    assert (warning.filename, warning.lineno) == (__file__, line)


def test_nested_blocks_say_it_once_for_the_outermost():
    op, _ = three_backend_op()
    outer = autotune()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with outer:
            with autotune():
                op(torch.zeros(4))
            assert reports(caught) == []  # the inner block is part of the outer's summary
            op(torch.zeros(4))
    (warning,) = reports(caught)
    assert "1 key timed" in str(warning.message) and "(3 (backend, tactic) pairs; 2 calls)" in str(
        warning.message
    )
    assert isinstance(outer.report, AutotuneReport) and str(outer.report) == str(warning.message)


def test_a_failed_pair_is_listed_with_its_reason():
    runners = {"a": FakeRunner("a", [1, 2], fail=[2])}
    op = make_op(runners)
    with pytest.warns(AutotuneReportWarning) as caught:
        with autotune():
            op(torch.zeros(4))
    text = str(reports(caught)[0].message)
    assert "(2 (backend, tactic) pairs, 1 failed; 1 call)" in text
    assert "failed a 2: RuntimeError: a tactic 2 failed" in text


QUIET = {("a", 1): (1.0, 0.01), ("a", 2): (2.0, 0.01), ("b", None): (3.0, 0.01)}


def test_a_key_already_tuned_is_counted_not_timed(tmp_path, monkeypatch):
    op, runners = three_backend_op()
    path = tmp_path / "tuned.json"
    script_timings(monkeypatch, QUIET)  # a noisy pick would be timed again (tested below)
    with pytest.warns(AutotuneReportWarning):
        with autotune(tuning_file=path):
            op(torch.zeros(4))
    AutoTuner.get().clear()
    before = path.read_bytes()
    with pytest.warns(AutotuneReportWarning) as caught:
        with autotune(tuning_file=path):
            op(torch.zeros(4))
    text = str(reports(caught)[0].message)
    assert text.startswith("autotune() block: 0 keys timed, 1 already tuned")
    assert "(float32[4] on cpu): already tuned (1 call)" in text
    assert "loaded 1 entry; nothing saved (nothing new was tuned in the block" in text
    assert path.read_bytes() == before


# ---- nothing tunable --------------------------------------------------------------------


def test_a_block_where_nothing_was_tunable_says_so_and_saves_nothing(tmp_path):
    path = tmp_path / "tuned.json"
    x, w = torch.randn(4, 8), torch.randn(8)
    with pytest.warns(AutotuneReportWarning) as caught:
        with autotune(tuning_file=path):
            flashinfer.rmsnorm(x, w)  # not autotunable
            flashinfer.mm(x, x.T, backend="torch")  # an explicit backend: never tuned
    text = str(reports(caught)[0].message)
    assert text.startswith("autotune() block: nothing was tuned: no backend='auto' call")
    assert "Autotunable ops: mm, " in text  # flashinfer's own first
    assert "nothing saved (nothing new was tuned in the block" in text
    assert not path.exists()


def test_a_block_with_no_tuning_file_says_where_results_stay():
    with pytest.warns(AutotuneReportWarning, match="no tuning_file= given: the results stay"):
        with autotune():
            pass


def test_skip_ops_is_named_when_it_left_everything_untimed():
    op, runners = three_backend_op()
    with pytest.warns(AutotuneReportWarning) as caught:
        with autotune(skip_ops=[op]):
            op(torch.zeros(4))
    text = str(reports(caught)[0].message)
    assert "nothing was timed: the only backend='auto' calls" in text
    assert f"{op.api_key}: 1 call(s) left untuned by skip_ops" in text
    assert runners["a"].calls == [None]  # the call itself ran the default, untimed


# ---- delivery: the category, the logger, exceptions, autotune(False) ------------------


def test_the_category_can_be_filtered_and_the_logger_gets_the_same_text(caplog):
    op, _ = three_backend_op()
    with caplog.at_level(logging.INFO, logger="flashinfer.autotuner"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            warnings.filterwarnings("ignore", category=AutotuneReportWarning)
            block = autotune()
            with block:
                op(torch.zeros(4))
    logged = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert logged == [str(block.report)] and "1 key timed" in logged[0]


def test_a_block_left_by_an_exception_only_logs(caplog):
    op, _ = three_backend_op()
    with caplog.at_level(logging.INFO, logger="flashinfer.autotuner"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a warning would replace the user's error
            with pytest.raises(KeyError, match="the user's error"):
                with autotune():
                    op(torch.zeros(4))
                    raise KeyError("the user's error")
    assert any("1 key timed" in r.getMessage() for r in caplog.records)


def test_a_disabled_block_only_logs(caplog):
    with caplog.at_level(logging.INFO, logger="flashinfer.autotuner"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with autotune(False):
                pass
    assert any("nothing was tuned" in r.getMessage() for r in caplog.records)


# ---- Triton without TRITON_INTERPRET: the case, in a process of its own ----------


def test_on_cpu_without_triton_interpret_the_summary_says_why_triton_was_not_timed():
    if torch.cuda.is_available():
        pytest.skip("Triton runs on the GPU here")
    code = (
        "import warnings, torch, flashinfer\n"
        "from flashinfer.autotuner import autotune, AutotuneReportWarning\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    with autotune():\n"
        "        flashinfer.mm(torch.randn(16, 32), torch.randn(32, 16))\n"
        "(w,) = [w for w in caught if w.category is AutotuneReportWarning]\n"
        "print(w.message)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    assert "timed torch (1 (backend, tactic) pair; 1 call)" in proc.stdout
    # every backend but torch is left out, named in declaration order (stable tests name no
    # experimental backend: the list is read from the op)
    left_out = ", ".join(b for b in flashinfer.mm.backends if b != "torch")
    assert f"left out {left_out}: support check rejected the inputs: on CPU, needs " in (
        proc.stdout
    )
    assert "TRITON_INTERPRET=1" in proc.stdout


# ---- noisy measurements -----------------------------------------------------------------


def test_a_noisy_pick_is_flagged_saved_with_its_spread_and_timed_again_when_loaded(
    tmp_path, monkeypatch
):
    runners = {"a": FakeRunner("a", [None]), "b": FakeRunner("b", [None])}
    op = make_op(runners)
    path = tmp_path / "tuned.json"
    script_timings(monkeypatch, {("a", None): (1.0, 0.5), ("b", None): (2.0, 0.01)})
    with pytest.warns(AutotuneReportWarning) as caught:
        with autotune(tuning_file=path):
            op(torch.zeros(4))
    text = str(reports(caught)[0].message)
    assert "1 key timed, 0 already tuned, 1 noisy" in text
    assert "noisy: median 1 ms, IQR 500 us (50% of the median, over the 10% of " in text
    (entry,) = json.loads(path.read_text())["entries"]
    assert (entry["median_ms"], entry["iqr_ms"]) == (1.0, 0.5)

    # A later block (a new process: the tuner cleared) loads it and times it again.
    AutoTuner.get().clear()
    runners["a"].calls.clear()
    script_timings(monkeypatch, {("a", None): (1.2, 0.01), ("b", None): (2.0, 0.01)})
    with pytest.warns(AutotuneReportWarning) as caught:
        with autotune(tuning_file=path):
            op(torch.zeros(4))
            op(torch.zeros(4))
    text = str(reports(caught)[0].message)
    assert "re-timed a, b (2 (backend, tactic) pairs; 2 calls)" in text
    assert "re-timed because the saved measurement was noisy (median 1 ms, IQR 500 us" in text
    # Timed once (the scripted timer calls it once), then run by each call.
    assert runners["a"].calls == [None] * 3
    (entry,) = json.loads(path.read_text())["entries"]
    assert (entry["median_ms"], entry["iqr_ms"]) == (1.2, 0.01)

    # Measured quietly now: the next block reuses it.
    AutoTuner.get().clear()
    runners["a"].calls.clear()
    with pytest.warns(AutotuneReportWarning, match="0 keys timed, 1 already tuned"):
        with autotune(tuning_file=path):
            op(torch.zeros(4))
    assert runners["a"].calls == [None]  # the call itself, untimed


@pytest.mark.parametrize("iqr", [None, "absent", 0.05])
def test_an_entry_without_a_noisy_spread_is_trusted(tmp_path, monkeypatch, iqr):
    runners = {"a": FakeRunner("a", [None])}
    op = make_op(runners)
    path = tmp_path / "tuned.json"
    script_timings(monkeypatch, {("a", None): (1.0, 0.01)})
    with pytest.warns(AutotuneReportWarning):
        with autotune(tuning_file=path):
            op(torch.zeros(4))
    doc = json.loads(path.read_text())
    if iqr == "absent":  # a file written before iqr_ms existed
        del doc["entries"][0]["iqr_ms"]
    else:
        doc["entries"][0]["iqr_ms"] = iqr
    path.write_text(json.dumps(doc))
    before = path.read_bytes()
    AutoTuner.get().clear()
    runners["a"].calls.clear()
    with pytest.warns(AutotuneReportWarning, match="0 keys timed, 1 already tuned"):
        with autotune(tuning_file=path):
            op(torch.zeros(4))
    assert runners["a"].calls == [None] and path.read_bytes() == before


def test_an_older_entry_round_trips_without_gaining_a_spread(tmp_path, monkeypatch):
    runners = {"a": FakeRunner("a", [None])}
    op = make_op(runners)
    path = tmp_path / "tuned.json"
    script_timings(monkeypatch, {("a", None): 1.0})
    with pytest.warns(AutotuneReportWarning):
        with autotune():
            op(torch.zeros(4))
            op(torch.zeros(8))
    AutoTuner.get().save_tuning_file(path)
    doc = json.loads(path.read_text())
    del doc["entries"][0]["iqr_ms"]  # as an older flashinfer wrote it
    path.write_text(json.dumps(doc))
    AutoTuner.get().clear()
    load_tuning_file(path)
    AutoTuner.get().save_tuning_file(path)
    assert json.loads(path.read_text())["entries"] == doc["entries"]


@pytest.mark.parametrize("bad", [-1.0, "0.5", True, [1]])
def test_a_malformed_spread_makes_the_entry_malformed(tmp_path, monkeypatch, bad):
    runners = {"a": FakeRunner("a", [None])}
    op = make_op(runners)
    path = tmp_path / "tuned.json"
    script_timings(monkeypatch, {("a", None): 1.0})
    with pytest.warns(AutotuneReportWarning):
        with autotune(tuning_file=path):
            op(torch.zeros(4))
    doc = json.loads(path.read_text())
    doc["entries"][0]["iqr_ms"] = bad
    path.write_text(json.dumps(doc))
    AutoTuner.get().clear()
    with pytest.warns(TuningFileWarning, match="1 are malformed .*iqr_ms"):
        assert load_tuning_file(path).loaded == 0


def test_noisy_spread_is_checked_and_inf_turns_retiming_off(tmp_path, monkeypatch):
    tuner = AutoTuner.get()
    for bad, error in [(-0.1, ValueError), (math.nan, ValueError), ("0.1", TypeError)]:
        with pytest.raises(error, match="AutoTuner.noisy_spread"):
            tuner.noisy_spread = bad
    assert tuner.noisy_spread == NOISY_SPREAD
    runners = {"a": FakeRunner("a", [None])}
    op = make_op(runners)
    path = tmp_path / "tuned.json"
    script_timings(monkeypatch, {("a", None): (1.0, 0.9)})
    with pytest.warns(AutotuneReportWarning):
        with autotune(tuning_file=path):
            op(torch.zeros(4))
    AutoTuner.get().clear()
    tuner.noisy_spread = math.inf
    runners["a"].calls.clear()
    with pytest.warns(AutotuneReportWarning, match="0 keys timed, 1 already tuned"):
        with autotune(tuning_file=path):
            op(torch.zeros(4))
    assert runners["a"].calls == [None]


# ---- the command prints it ------------------------------------------------------------


def test_the_command_prints_the_summary_and_retimes_a_noisy_entry(tmp_path, capsys, monkeypatch):
    runners = {"a": FakeRunner("a", [None]), "wide": FakeRunner("wide", [None])}
    op = make_op(runners, supports=narrow_backend)
    declare_cli_inputs(monkeypatch, op)
    cache = tmp_path / "c.json"
    argv = ["autotune", "--op", op.api_name, "--shapes", "4", "--tuning-file", str(cache)]
    script_timings(monkeypatch, {("a", None): (1.0, 0.5)})
    with warnings.catch_warnings():
        warnings.simplefilter("error", AutotuneReportWarning)  # printed, never warned
        assert main(argv) == 0
    out = capsys.readouterr().out
    assert "autotune() block: 1 key timed, 0 already tuned, 1 noisy" in out
    assert "left out wide: support check rejected the inputs: needs at least 64 rows" in out
    assert "noisy: median 1 ms, IQR 500 us" in out
    assert f"wrote 1 entries to {cache}" in out
    # Run again without --force: the noisy entry is timed again, and the file rewritten.
    AutoTuner.get().clear()
    script_timings(monkeypatch, {("a", None): (1.1, 0.01)})
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "re-timed because the saved measurement was noisy" in out
    assert out.splitlines()[1].endswith("re-timed (its saved timing was noisy)")  # the row
    assert f"wrote 1 entries to {cache}" in out
    assert json.loads(cache.read_text())["entries"][0]["iqr_ms"] == 0.01


def test_with_the_gate_on_the_experimental_backend_is_timed_not_left_out(monkeypatch):
    op, runners = three_backend_op()
    monkeypatch.setenv("FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS", "1")
    script_timings(monkeypatch, {**QUIET, ("exp", None): (5.0, 0.01)})  # slowest: not picked
    with pytest.warns(AutotuneReportWarning) as caught:
        with autotune():
            op(torch.zeros(4))
    text = str(reports(caught)[0].message)
    assert "timed a, b, exp (4 (backend, tactic) pairs; 1 call)" in text
    assert "left out exp" not in text and "left out wide: support check rejected" in text
    assert runners["exp"].calls == [None]  # the scripted timer's one call
