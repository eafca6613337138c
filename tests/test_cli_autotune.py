"""``flashinfer autotune`` tells the truth: failed (backend, tactic) pairs are counted and
listed, a shape with nothing timed exits 1, Ctrl-C keeps what was tuned and exits 130, a bad
``--tuning-file`` is a usage error before any timing, a run that only reuses keys writes nothing,
``--help`` lists the tunable ops with an example, and progress lines fit in 80 columns.

Most tests drive a fake op (tests/autotuner_fakes.py) through the real command, by giving it
a target (how the command builds its inputs); the issue's case, every Triton tactic of
``flashinfer.mm`` failing, uses the real op.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest
import torch
from autotuner_fakes import FakeRunner, clean_tuner, declare_cli_inputs, make_op, zeros_of
from hypothesis import given, settings
from hypothesis import strategies as st

import flashinfer
from flashinfer.autotuner import AutoTuner
from flashinfer.cli import autotune as cli_autotune
from flashinfer.cli import main
from flashinfer.cli.autotune import PROGRESS_WIDTH
from flashinfer.cli.autotune_report import TuningProgress

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(autouse=True)
def fresh_tuner():
    with clean_tuner(warmup=0, repeat=1) as tuner:
        yield tuner


def fake_target(monkeypatch, runners, make=zeros_of, ndims=(1,)):
    """Register a fake op and let the command tune it: ``--op <its name> --shapes N,...``."""
    op = make_op(runners)
    declare_cli_inputs(monkeypatch, op, make, ndims, "4,8")
    return op


def tune(op, shapes, cache, *extra):
    return main(
        ["autotune", "--op", op.api_name, "--shapes", shapes, "--tuning-file", str(cache), *extra]
    )


def entries(cache):
    return sorted(e["inputs"][0]["shape"][0] for e in json.loads(cache.read_text())["entries"])


class ShapeFailRunner(FakeRunner):
    """Fails every tactic (and the default) for inputs of ``bad_size`` rows."""

    def __init__(self, name, space, bad_size):
        super().__init__(name, space)
        self.bad_size = bad_size

    def __call__(self, inputs, tactic=None):
        if inputs[0].shape[0] == self.bad_size:
            raise RuntimeError(f"{self.name}: no kernel for {self.bad_size} rows\nmore detail")
        return super().__call__(inputs, tactic)


# --------------------------------------------------------------------------------------
# Failures are counted and listed
# --------------------------------------------------------------------------------------


def test_failed_pairs_are_counted_and_each_listed_with_a_one_line_reason(
    tmp_path, capsys, monkeypatch
):
    runners = {"a": FakeRunner("a", [1, 2, 3], fail=[1, 3]), "b": FakeRunner("b", [None])}
    op = fake_target(monkeypatch, runners)
    assert tune(op, "4", tmp_path / "c.json") == 0
    out = capsys.readouterr().out
    header, row = out.splitlines()[:2]
    assert header.split() == ["SHAPE", "BACKEND", "TACTIC", "MEDIAN+-IQR", "MS", "FAILED", "SOURCE"]
    assert row.split()[4] == "2/4"
    assert "2 of 4 (backend, tactic) pairs failed:" in out
    assert "  4 a 1: RuntimeError: a tactic 1 failed" in out.splitlines()
    assert "  4 a 3: RuntimeError: a tactic 3 failed" in out.splitlines()
    assert "wrote 1 entries" in out


def test_no_failure_no_failure_list(tmp_path, capsys, monkeypatch):
    op = fake_target(monkeypatch, {"a": FakeRunner("a", [1, 2])})
    assert tune(op, "4", tmp_path / "c.json") == 0
    out = capsys.readouterr().out
    assert "failed:" not in out and out.splitlines()[1].split()[4] == "0/2"


def test_a_shape_with_nothing_timed_exits_1_and_the_others_are_saved(tmp_path, capsys, monkeypatch):
    runners = {"a": ShapeFailRunner("a", [1, 2], bad_size=8)}
    op = fake_target(monkeypatch, runners)
    cache = tmp_path / "c.json"
    assert tune(op, "4,8,16", cache) == 1
    captured = capsys.readouterr()
    assert "2 of 6 (backend, tactic) pairs failed:" in captured.out
    lines = captured.out.splitlines()
    assert "  8 a 1: RuntimeError: a: no kernel for 8 rows" in lines  # one line per reason
    assert "  8 (the call itself): RuntimeError: a: no kernel for 8 rows" in lines
    assert next(line for line in lines if line.startswith("8 ")).split()[1:] == [
        "-",
        "-",
        "-",
        "2/2",
        "nothing",
        "could",
        "be",
        "timed",
    ]
    assert (
        "flashinfer autotune: error: nothing could be timed for 1 of 3 shapes (8)" in captured.err
    )
    assert entries(cache) == [4, 16]


def test_issue_case_every_triton_tactic_of_mm_failing_is_reported(tmp_path, capsys, monkeypatch):
    from flashinfer.gemm import MM_RUNNERS

    real = MM_RUNNERS["triton"]

    class NoNumpy:
        def tactic_space(self):
            return real.tactic_space()

        def tactics(self, inputs):
            return real.tactics(inputs)

        def __call__(self, inputs, tactic=None):
            raise ModuleNotFoundError("No module named 'numpy'")

    flashinfer.mm(torch.randn(16, 32), torch.randn(32, 16))
    if "triton" not in list(flashinfer.mm.suitable_auto_backends):
        pytest.skip("triton is not a backend='auto' candidate for mm here")
    monkeypatch.setitem(MM_RUNNERS, "triton", NoNumpy())
    cache = tmp_path / "c.json"
    assert (
        main(["autotune", "--op", "mm", "--shapes", "16x16x32", "--tuning-file", str(cache)]) == 0
    )
    out = capsys.readouterr().out
    failures = [line for line in out.splitlines() if "ModuleNotFoundError" in line]
    assert failures
    row = out.splitlines()[1].split()
    assert row[1] == "torch" and row[4] == f"{len(failures)}/{len(failures) + 1}"
    assert f"{len(failures)} of {len(failures) + 1} (backend, tactic) pairs failed:" in out
    assert all(
        line.startswith("  16x16x32 triton {")
        and line.endswith(": ModuleNotFoundError: No module named 'numpy'")
        for line in failures
    )


# --------------------------------------------------------------------------------------
# Ctrl-C keeps what was tuned
# --------------------------------------------------------------------------------------


def test_ctrl_c_saves_the_shapes_tuned_so_far_says_so_and_exits_130(tmp_path, capsys, monkeypatch):
    def make(dims, dtype, device):
        if dims == (16,):
            raise KeyboardInterrupt
        return {"x": torch.zeros(*dims)}

    op = fake_target(monkeypatch, {"a": FakeRunner("a", [1, 2])}, make=make)
    cache = tmp_path / "c.json"
    assert tune(op, "4,8,16,32", cache) == 130
    captured = capsys.readouterr()
    assert (
        "flashinfer autotune: interrupted after 2 of 4 shapes; saved the 2 shape(s) tuned so "
        f"far (2 entries) to {cache}" in captured.err
    )
    assert entries(cache) == [4, 8]
    assert "tuned" in captured.out  # the table of what was done


def test_ctrl_c_mid_tuning_of_the_first_shape_writes_nothing(tmp_path, capsys, monkeypatch):
    class Interrupted(FakeRunner):
        def __call__(self, inputs, tactic=None):
            if tactic == 2:
                raise KeyboardInterrupt
            return super().__call__(inputs, tactic)

    op = fake_target(monkeypatch, {"a": Interrupted("a", [1, 2])})
    assert tune(op, "4,8", tmp_path / "c.json") == 130
    err = capsys.readouterr().err
    assert "interrupted after 0 of 2 shapes; nothing new was tuned" in err
    assert list(tmp_path.iterdir()) == []
    assert AutoTuner.get().choices() == {}  # the half-timed key was not recorded


def test_real_sigint_in_a_subprocess_saves_and_exits_130(tmp_path):
    """The signal itself, not a raised exception: SIGINT arrives while a tactic runs."""
    cache = tmp_path / "c.json"
    script = textwrap.dedent(
        f"""
        import os, signal, sys
        # Python's own handler, whatever this process inherited: a runner started in the
        # background by a shell without job control passes SIGINT on as ignored.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        sys.path.insert(0, {os.path.join(REPO, "tests")!r})
        import torch
        from autotuner_fakes import FakeRunner, make_op
        from flashinfer.cli import main
        from flashinfer.testing import EXAMPLE_INPUTS, ExampleInputs

        class Sigint(FakeRunner):
            def __call__(self, inputs, tactic=None):
                if inputs[0].shape[0] == 16:
                    os.kill(os.getpid(), signal.SIGINT)
                return super().__call__(inputs, tactic)

        op = make_op({{"a": Sigint("a", [1, 2])}})
        make = lambda dims, dtype, device: {{"x": torch.zeros(*dims)}}
        EXAMPLE_INPUTS[op.api_name] = ExampleInputs("N", (1,), make, "4", op_name=op.api_name)
        sys.exit(main(["autotune", "--op", op.api_name, "--shapes", "4,8,16",
                       "--tuning-file", {str(cache)!r}]))
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 130, proc.stderr
    assert "interrupted after 2 of 3 shapes; saved the 2 shape(s)" in proc.stderr
    assert entries(cache) == [4, 8]


# --------------------------------------------------------------------------------------
# --tuning-file: usage errors before anything is timed; a run that only reads writes nothing
# --------------------------------------------------------------------------------------


def _other_schema(tmp_path):
    path = tmp_path / "v2.json"
    path.write_text('{"schema_version": 3, "entries": [{"from": "a newer flashinfer"}]}')
    return str(path)


@pytest.mark.parametrize(
    "make_path, message",
    [
        (lambda d: "", "--tuning-file: the path is empty"),
        (lambda d: str(d), "names a directory"),
        (lambda d: str(d / "sub") + "/", "names a directory"),
        (lambda d: "a\0b.json", "NUL character"),
        (lambda d: str(d / "missing" / "c.json"), "does not exist"),
        (_other_schema, "of schema version 3, which this flashinfer (schema 2) can neither"),
    ],
    ids=["empty", "directory", "trailing-slash", "nul", "missing-dir", "other-schema"],
)
def test_bad_cache_path_is_a_usage_error_before_anything_is_timed(
    tmp_path, capsys, monkeypatch, make_path, message
):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    runners = {"a": FakeRunner("a", [1, 2])}
    op = fake_target(monkeypatch, runners)
    path = make_path(tmp_path)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert tune(op, "4", path) == 2
    err = capsys.readouterr().err
    assert message in err and err.startswith("flashinfer autotune: error: --tuning-file")
    assert runners["a"].calls == [] and AutoTuner.get().choices() == {}  # nothing timed
    assert list(work.iterdir()) == []  # no '.lock' in the working directory
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


@pytest.mark.parametrize("same_path", [False, True], ids=["two-paths", "one-path"])
@pytest.mark.parametrize(
    "spellings",
    [
        ("--cache", "--tuning-file"),
        ("--tuning-file", "--cache"),
        ("--cache", "--tuning-file", "--cache"),
    ],
    ids=["cache-first", "tuning-file-first", "three"],
)
@pytest.mark.parametrize("command", ["autotune", "explain"])
def test_both_spellings_of_the_tuning_file_are_a_usage_error(
    tmp_path, capsys, monkeypatch, command, spellings, same_path
):
    """Issue 43 item 7: ``--cache A --tuning-file B`` wrote B only, silently, where
    ``autotune(cache=, tuning_file=)`` raises: both spellings together, in any order and
    whatever paths, are a usage error before anything is timed, read or written (both
    commands that take the file)."""
    runners = {"a": FakeRunner("a", [1, 2])}
    op = fake_target(monkeypatch, runners)
    argv = [command, "--op", op.api_name, "--shapes", "4"]
    for i, spelling in enumerate(spellings):
        argv += [spelling, str(tmp_path / ("c.json" if same_path else f"c{i}.json"))]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "both given" in err and "pass --tuning-file only" in err, err
    assert runners["a"].calls == [] and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("spelling", ["--cache", "--tuning-file"])
def test_either_spelling_alone_writes_its_file(tmp_path, monkeypatch, spelling):
    op = fake_target(monkeypatch, {"a": FakeRunner("a", [1, 2])})
    path = tmp_path / "c.json"
    assert main(["autotune", "--op", op.api_name, "--shapes", "4,8", spelling, str(path)]) == 0
    assert entries(path) == [4, 8]


def test_unwritable_cache_directory_is_a_usage_error(tmp_path, capsys, monkeypatch):
    op = fake_target(monkeypatch, {"a": FakeRunner("a")})
    monkeypatch.setattr(cli_autotune.os, "access", lambda path, mode: False)
    assert tune(op, "4", tmp_path / "c.json") == 2
    assert "is not writable" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_a_run_that_only_reuses_keys_leaves_the_file_untouched(tmp_path, capsys, monkeypatch):
    op = fake_target(monkeypatch, {"a": FakeRunner("a", [1, 2])})
    cache = tmp_path / "c.json"
    assert tune(op, "4,8", cache) == 0
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in tmp_path.iterdir()}
    capsys.readouterr()
    AutoTuner.get().clear()
    assert tune(op, "8,4", cache) == 0
    out = capsys.readouterr().out
    assert out.count("reused (key already tuned)") == 2
    assert f"nothing new was tuned: {cache} left unchanged" in out
    assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in tmp_path.iterdir()} == before


def test_corrupt_cache_is_reported_as_warnings_and_replaced(tmp_path, capsys, monkeypatch):
    op = fake_target(monkeypatch, {"a": FakeRunner("a")})
    cache = tmp_path / "c.json"
    cache.write_text("[" * 5000)
    assert tune(op, "4", cache) == 0
    err = capsys.readouterr().err
    assert "flashinfer autotune: warning: Could not read the tuning file" in err
    assert "nested deeper than 64 levels" in err and "was replaced" in err
    assert entries(cache) == [4]


# --------------------------------------------------------------------------------------
# --help, the log variable, progress
# --------------------------------------------------------------------------------------


def test_help_lists_tunable_ops_exit_codes_environment_and_an_example_that_runs(
    tmp_path, capsys, monkeypatch
):
    op = fake_target(monkeypatch, {"a": FakeRunner("a")})
    assert main(["autotune", "--help"]) == 0
    text = capsys.readouterr().out
    ops = text.split("tunable ops:\n")[1].split("\n\n")[0].splitlines()
    names = [line.split()[0] for line in ops]
    assert "mm" in names and op.api_name in names  # computed from what is registered
    assert "FLASHINFER_AUTOTUNER_LOG=1" in text and "TRITON_INTERPRET=1" in text
    assert "130" in text and "Ctrl-C" in text
    # The op named either way (tests/test_cli_op_spelling.py): the same command twice.
    example, spelled = re.findall(r"^  flashinfer autotune (.*)$", text, flags=re.MULTILINE)
    argv = example.split()
    assert argv[0] == "mm" and argv[-2] == "--tuning-file"
    assert spelled.split() == ["--op", *argv]
    argv[-1] = str(tmp_path / argv[-1])
    assert main(["autotune", *argv]) == 0  # the example runs as printed (on CPU by default)
    assert "wrote 2 entries" in capsys.readouterr().out


def test_autotuner_log_variable_is_in_help_and_docs_and_does_what_they_say(
    tmp_path, capsys, monkeypatch
):
    with open(os.path.join(REPO, "docs", "api", "autotuner.rst")) as f:
        assert "FLASHINFER_AUTOTUNER_LOG" in f.read()
    op = fake_target(monkeypatch, {"a": FakeRunner("a", [1, 2], fail=[2])})
    monkeypatch.setenv("FLASHINFER_AUTOTUNER_LOG", "1")
    assert tune(op, "4", tmp_path / "c.json") == 0
    err = capsys.readouterr().err
    assert "[flashinfer.autotuner]   a 2: failed (RuntimeError: a tactic 2 failed)" in err
    assert "[flashinfer.autotuner] picked a 1" in err


def _lines(text):
    return [line for chunk in text.split("\n") for line in chunk.split("\r")]


@settings(max_examples=200, deadline=None)
@given(
    label=st.text(max_size=200),
    shape=st.text(max_size=120),
    index=st.integers(0, 10**6),
    total_shapes=st.integers(1, 10**6),
    total=st.integers(0, 10**9),
    data=st.data(),
    tty=st.booleans(),
)
def test_progress_lines_fit_in_80_columns(label, shape, index, total_shapes, total, data, tty):
    done = data.draw(st.integers(0, total))
    stream = io.StringIO()
    stream.isatty = lambda: tty  # type: ignore[method-assign]
    progress = TuningProgress(stream, total_shapes)
    progress.start_shape(index, shape)
    progress(done, total, label)
    progress(total, total, "done")
    for line in _lines(stream.getvalue()):
        assert len(line) <= PROGRESS_WIDTH < 80


def test_progress_of_a_real_run_fits_in_80_columns(tmp_path, capsys, monkeypatch):
    long_tactic = {"BLOCK_" + "M" * 60: 64, "num_warps": 4}
    op = fake_target(monkeypatch, {"a": FakeRunner("a", [long_tactic, None])})
    assert tune(op, "123456789,4", tmp_path / "c.json") == 0
    err = capsys.readouterr().err
    lines = _lines(err)
    assert any("[1/2] " in line for line in lines) and any("2/2 done" in line for line in lines)
    assert all(len(line) <= PROGRESS_WIDTH for line in lines)
