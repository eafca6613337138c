"""Every ``flashinfer`` sub-command whose output is closed early (``flashinfer backends --json |
head``) finishes its work and exits as a Unix tool killed by ``SIGPIPE`` does: status 141,
no traceback, no ``error: BrokenPipeError`` (issue 21, item 21).

A real pipe, its reader closed before the command writes: the first write (or the flush at
the end, for output that fits the pipe's buffer) meets a reader that is gone, whatever the
size of the output and however fast the command is.  The sub-commands that import torch run
in children forked from one interpreter that imported it (each then runs ``-m flashinfer``
as runpy runs ``-m`` and exits as that interpreter would, flushing at the end); one of them,
and every help text, runs as a program of its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from flashinfer.cli import EXIT_CLOSED_PIPE

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# Some Python builds' argparse swallows a failed write of --help (3.11.7 from source), others
# let the BrokenPipeError through (Debian's 3.11): the command runs under either.
_RAISING_ARGPARSE = (
    "import argparse, sys\n"
    "def _print_message(self, message, file=None):\n"
    "    if message:\n"
    "        (file or sys.stderr).write(message)\n"
    "argparse.ArgumentParser._print_message = _print_message\n"
    "from flashinfer.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def _run_into_closed_pipe(
    args: list[str], tmp_path, unbuffered: bool = False, raising_argparse: bool = False
) -> subprocess.CompletedProcess[str]:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader left before the command wrote a byte
    hidden = ("FLASHINFER_CLI_TRACEBACK", "PYTHONUNBUFFERED")
    env = {k: v for k, v in os.environ.items() if k not in hidden}
    if unbuffered:  # each write meets the closed pipe at once, not at the final flush
        env["PYTHONUNBUFFERED"] = "1"
    try:
        return subprocess.run(
            [
                sys.executable,
                *(["-c", _RAISING_ARGPARSE] if raising_argparse else ["-m", "flashinfer"]),
                *args,
            ],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
            env=env,
            timeout=300,
            check=False,
        )
    finally:
        os.close(write_end)


# Every sub-command that writes to stdout, text and JSON (autotune's progress goes to
# stderr, which stays open: its table, printed after the save, meets the closed pipe).
COMMANDS = [
    ["backends"],
    ["backends", "--json"],
    ["experimental"],
    ["experimental", "--json"],
    ["explain", "mm", "--shapes", "4x4x4"],
    ["explain", "rmsnorm", "--shapes", "4x8", "--json"],
    ["autotune", "--op", "mm", "--shapes", "4x4x4", "--tuning-file", "tuned.json"],
]


# Run by the ``forked`` fixture: for each (args, folder, stderr too), a child forked from an
# interpreter that imported torch and the API modules (the pipe is what is tested here), its
# stdout (and stderr, or a file) on a pipe whose reader is gone, that runs ``python -m
# flashinfer ARGS`` in the folder and ends as that would: the SystemExit leaves the child's
# interpreter, which flushes its streams at exit.
_FORKED = """
import json, os, runpy, sys, tempfile
import torch, torch._dynamo  # what explain and autotune load, imported once
import flashinfer
flashinfer.load_all_apis()
import gc; gc.freeze()  # children leave the shared heap unwritten by the collector
results = []
for args, folder, both in json.loads(sys.argv[1]):
    read_end, write_end = os.pipe()
    os.close(read_end)
    err = tempfile.TemporaryFile()
    sys.stdout.flush(); sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.dup2(write_end, 1); os.dup2(write_end if both else err.fileno(), 2)
        os.chdir(folder)
        sys.argv = ["flashinfer", *args]
        try:
            runpy.run_module("flashinfer", run_name="__main__", alter_sys=True)
        finally:  # the interpreter's exit collects everything, as a fresh one's does
            gc.unfreeze()
        raise SystemExit(0)
    os.close(write_end)
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    err.seek(0); results.append([code, err.read().decode()]); err.close()
print(json.dumps(results))
"""

USAGE_ERROR = ["explain", "mm", "--shapes", "1x2"]


@pytest.fixture(scope="module")
def forked(tmp_path_factory) -> dict[str, tuple[subprocess.CompletedProcess[str], object]]:
    """``" ".join(args)``: (the run of every command but the first, and the usage error with
    stderr on the closed pipe too; its folder)."""
    todo = [(args, tmp_path_factory.mktemp("pipe")) for args in [*COMMANDS[1:], USAGE_ERROR]]
    hidden = ("FLASHINFER_CLI_TRACEBACK", "PYTHONUNBUFFERED")
    env = {k: v for k, v in os.environ.items() if k not in hidden}
    cases = [[args, str(folder), args == USAGE_ERROR] for args, folder in todo]
    ran = subprocess.run(
        [sys.executable, "-c", _FORKED, json.dumps(cases)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    results = json.loads(ran.stdout.strip().splitlines()[-1])
    return {
        " ".join(args): (subprocess.CompletedProcess(args, code, None, err), folder)
        for (args, folder), (code, err) in zip(todo, results, strict=True)
    }


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_a_closed_pipe_ends_the_command_quietly(args, tmp_path, forked):
    if args == COMMANDS[0]:  # as a program, each write meeting the closed pipe at once
        proc = _run_into_closed_pipe(args, tmp_path, unbuffered=True)
    else:
        proc, tmp_path = forked[" ".join(args)]
    assert proc.returncode == EXIT_CLOSED_PIPE == 141, proc.stderr
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr
    assert "error" not in proc.stderr and "Exception ignored" not in proc.stderr, proc.stderr
    if args[0] != "autotune":  # nothing else writes to stderr
        assert proc.stderr == ""
    if args[0] == "autotune":  # the results were saved before the table met the pipe
        assert (tmp_path / "tuned.json").is_file()


@pytest.mark.parametrize("raising_argparse", [False, True], ids=["argparse-swallows", "raises"])
@pytest.mark.parametrize("unbuffered", [False, True], ids=["buffered", "unbuffered"])
@pytest.mark.parametrize("args", [["--help"], ["--version"], ["explain", "--help"]], ids=" ".join)
def test_help_into_a_closed_pipe_is_quiet(args, unbuffered, raising_argparse, tmp_path):
    """Help and version texts that meet a closed pipe end like any output: status 141,
    nothing on stderr, whether the write failed at once (argparse swallows that failure) or
    at the final flush."""
    proc = _run_into_closed_pipe(args, tmp_path, unbuffered, raising_argparse)
    assert (proc.returncode, proc.stderr) == (EXIT_CLOSED_PIPE, "")


def test_a_usage_error_into_a_closed_stderr_keeps_its_status(forked):
    """The error line itself meets the closed pipe (``2>&1 | head -0``): still exit 2, not a
    crash while reporting it."""
    proc, _ = forked[" ".join(USAGE_ERROR)]
    assert proc.returncode == 2


def test_a_broken_pipe_that_is_not_the_output_is_a_runtime_failure(monkeypatch, capsys):
    """A ``BrokenPipeError`` of some other pipe (a worker, a socket) is not a reader leaving:
    it is reported as any runtime failure is (one line, status 1)."""
    from flashinfer.cli import backends, main

    def broken(*args, **kwargs):
        raise BrokenPipeError(32, "Broken pipe (a worker's)")

    monkeypatch.setattr(backends, "backends_report", broken)
    assert main(["backends"]) == 1
    err = capsys.readouterr().err
    assert err.strip() == (
        "flashinfer backends: error: BrokenPipeError: [Errno 32] Broken pipe (a worker's)"
    )
