"""Every ``flashinfer`` sub-command whose output is closed early (``flashinfer backends --json |
head``) finishes its work and exits as a Unix tool killed by ``SIGPIPE`` does: status 141,
no traceback, no ``error: BrokenPipeError`` (issue 21, item 21).

A real pipe, its reader closed before the command writes: the first write (or the flush at
the end, for output that fits the pipe's buffer) meets a reader that is gone, whatever the
size of the output and however fast the command is.
"""

from __future__ import annotations

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


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_a_closed_pipe_ends_the_command_quietly(args, tmp_path):
    proc = _run_into_closed_pipe(args, tmp_path, unbuffered=args == ["backends"])
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


def test_a_usage_error_into_a_closed_stderr_keeps_its_status(tmp_path):
    """The error line itself meets the closed pipe (``2>&1 | head -0``): still exit 2, not a
    crash while reporting it."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "flashinfer", "explain", "mm", "--shapes", "1x2"],
            stdout=write_end,
            stderr=write_end,
            cwd=tmp_path,
            timeout=300,
            check=False,
        )
    finally:
        os.close(write_end)
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
