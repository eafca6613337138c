"""A tuning file's lock that can never be taken is refused at once (issue 34, item 0).

``filelock`` retries forever a lock file whose create fails with ``ENOENT`` in a directory
that exists (``/proc``: it reads that as a lock file removed meanwhile), so
``flashinfer autotune --cache /proc/x.json`` hung after tuning.  Now every route that saves
(``save_tuning_file``, its old spelling ``save_configs``, ``AutoTuner.save_tuning_file``,
``autotune(tuning_file=)``/``autotune(cache=)`` on exit, and the CLI) fails at once with one
line naming the path when the lock file cannot be created or opened, drawn over several kinds
of impossible lock; the CLI refuses it before anything is timed.  A lock that another process
*holds* is still waited for.

The hang guard (a call run in a thread, joined with a generous bound) only turns a
regression into a failure instead of a hung suite; no test measures how long anything takes.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
from autotuner_fakes import FakeRunner, clean_tuner, make_op, tune_from_cli
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from flashinfer.autotuner import (
    AutoTuner,
    autotune,
    save_configs,
    save_tuning_file,
)
from flashinfer.autotuner import disk as lock_module
from flashinfer.cli import main

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HANG_GUARD_S = 120.0  # far beyond any save: only a hang reaches it


@pytest.fixture(autouse=True)
def fresh_tuner():
    with clean_tuner(warmup=0, repeat=1) as tuner:
        yield tuner


def _finishes(call: Callable[[], Any]) -> Any:
    """``call()``'s result or exception, failing the test if it never returns."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(HANG_GUARD_S)
    if thread.is_alive():
        pytest.fail("the call waits on a lock that can never be taken")
    if "error" in box:
        raise box["error"]
    return box.get("value")


# --------------------------------------------------------------------------------------
# The kinds of lock that can never be taken
# --------------------------------------------------------------------------------------

#: errnos a create is refused with: ENOENT is /proc's (the one filelock retried forever)
CREATE_ERRNOS = [errno.ENOENT, errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC]
KINDS = [
    "proc",
    "create-refused",
    "lock-is-directory",
    "lock-is-dangling-link",
    "lock-is-link-to-file",
    "lock-name-too-long",
    "lock-cannot-be-opened",
]


@contextlib.contextmanager
def impossible(kind: str, code: int, mp: pytest.MonkeyPatch) -> Iterator[str]:
    """A tuning-file path whose lock can never be taken, of ``kind``; ``code`` is the
    errno of a refused create or open (simulated where root would bypass it)."""
    with tempfile.TemporaryDirectory() as directory:
        if kind == "proc":
            if not os.path.isdir("/proc"):
                pytest.skip("no /proc here")
            yield f"/proc/flashinfer-test-{secrets.token_hex(4)}.json"
            return
        path = os.path.join(directory, "tuned.json")
        lock = path + ".lock"
        real_open = os.open
        if kind == "create-refused":  # a read-only directory, a full disk, ... (root or not)

            def refusing(name: Any, flags: int, *args: Any, **kwargs: Any) -> int:
                full = os.path.abspath(os.fsdecode(name))
                if flags & os.O_CREAT and os.path.dirname(full) == os.path.realpath(directory):
                    raise OSError(code, os.strerror(code), name)
                return real_open(name, flags, *args, **kwargs)

            mp.setattr(os, "open", refusing)
        elif kind == "lock-is-directory":
            os.mkdir(lock)
        elif kind == "lock-is-dangling-link":
            os.symlink(os.path.join(directory, "nowhere"), lock)
        elif kind == "lock-is-link-to-file":
            open(os.path.join(directory, "other"), "w").close()
            os.symlink(os.path.join(directory, "other"), lock)
        elif kind == "lock-name-too-long":
            limit = os.pathconf(directory, "PC_NAME_MAX")
            path = os.path.join(directory, "t" * (limit - 2))  # fits; with ".lock" it does not
        elif kind == "lock-cannot-be-opened":  # another user's 0600 lock file
            open(lock, "w").close()
            os.chmod(lock, 0o600)

            def refusing_lock(name: Any, flags: int, *args: Any, **kwargs: Any) -> int:
                if os.path.abspath(os.fsdecode(name)) == os.path.realpath(lock):
                    raise OSError(code, os.strerror(code), name)
                return real_open(name, flags, *args, **kwargs)

            mp.setattr(os, "open", refusing_lock)
        yield path


def _tuned_op() -> Any:
    return make_op({"a": FakeRunner("a", [1, 2])})


def _tune(op: Any) -> None:
    with autotune():
        op(torch.zeros(4))


def _block(keyword: str) -> Callable[[Any, str], Any]:
    def run(op: Any, path: str) -> None:
        with autotune(**{keyword: path}):
            op(torch.zeros(4))

    return run


ROUTES: dict[str, Callable[[Any, str], Any]] = {
    "save_tuning_file": lambda op, path: (_tune(op), save_tuning_file(path)),
    "save_configs": lambda op, path: (_tune(op), save_configs(path)),
    "AutoTuner.save_tuning_file": lambda op, path: (
        _tune(op),
        AutoTuner.get().save_tuning_file(path),
    ),
    "autotune(tuning_file=)": _block("tuning_file"),
    "autotune(cache=)": _block("cache"),
}


def _nothing_written(path: str) -> None:
    if not path.startswith("/proc/"):
        assert not os.path.lexists(path), "the tuning file was written"


@settings(max_examples=40, deadline=None)
@given(
    kind=st.sampled_from(KINDS),
    code=st.sampled_from(CREATE_ERRNOS),
    route=st.sampled_from(sorted(ROUTES)),
)
@example(kind="proc", code=errno.ENOENT, route="save_tuning_file")  # the reported hang
@example(kind="create-refused", code=errno.ENOENT, route="autotune(cache=)")  # /proc, simulated
@example(kind="create-refused", code=errno.EROFS, route="save_configs")  # a read-only mount
def test_a_lock_that_can_never_be_taken_fails_at_once_naming_the_path(kind, code, route):
    with pytest.MonkeyPatch.context() as mp, impossible(kind, code, mp) as path:
        op = _tuned_op()
        with pytest.raises(OSError) as caught:  # what a save that cannot write raises
            _finishes(lambda: ROUTES[route](op, path))
        message = str(caught.value)
        assert "\n" not in message  # one line
        assert repr(os.path.realpath(path)) in message and "can never be taken" in message
        assert caught.value.filename == os.path.realpath(path) + ".lock"  # the lock it named
        assert caught.value.errno is not None
        if kind == "create-refused":
            assert caught.value.errno == code  # FileNotFoundError, PermissionError, ... as it is
        _nothing_written(path)


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(kind=st.sampled_from(KINDS), code=st.sampled_from(CREATE_ERRNOS))
@example(kind="create-refused", code=errno.ENOENT)
def test_the_cli_refuses_it_before_timing_anything(kind, code, capsys):
    capsys.readouterr()  # this draw's output only
    with pytest.MonkeyPatch.context() as mp, impossible(kind, code, mp) as path:
        runners = {"a": FakeRunner("a", [1, 2])}
        op = tune_from_cli(mp, runners)
        argv = ["autotune", "--op", op.api_name, "--shapes", "4", "--tuning-file", path]
        status = _finishes(lambda: main(argv))
        out, err = capsys.readouterr()
        assert status == 1, err  # found before anything is timed; exit 1, as the issue asks
        assert runners["a"].calls == [] and out == ""  # nothing timed
        lines = err.splitlines()
        assert len(lines) == 1 and path in lines[0] and ".lock" in lines[0], lines
        _nothing_written(path)


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="no /proc here")
def test_the_reported_command_exits_at_once_with_one_line():
    """The issue's command, as a user runs it (a subprocess with a timeout: a regression
    fails instead of hanging the suite)."""
    path = f"/proc/flashinfer-test-{secrets.token_hex(4)}.json"
    env = {**os.environ, "PYTHONPATH": REPO}
    command = [sys.executable, "-m", "flashinfer", "autotune", "--op", "mm", "--shapes", "4x4x4"]
    try:
        proc = subprocess.run(
            [*command, "--cache", path],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
            cwd=REPO,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("flashinfer autotune --cache /proc/... waits forever on its lock")
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and path in lines[0], proc.stderr
    assert proc.stdout == ""  # nothing was timed nor printed


# --------------------------------------------------------------------------------------
# A lock that is only held is waited for
# --------------------------------------------------------------------------------------

_HOLDER = """
import sys
from filelock import FileLock
with FileLock(sys.argv[1], mode=0o666):
    print("held", flush=True)
    sys.stdin.read()  # until the test closes our stdin
"""


def test_a_lock_held_by_another_process_is_waited_for(tmp_path, monkeypatch):
    path = tmp_path / "tuned.json"
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(path) + ".lock"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        waiting = threading.Event()
        real = lock_module.FileLock

        class Spy(real):  # type: ignore[misc, valid-type]
            def acquire(self, timeout: Any = None, *args: Any, **kwargs: Any) -> Any:
                if timeout is None:  # the blocking wait
                    waiting.set()
                return super().acquire(timeout, *args, **kwargs)

        monkeypatch.setattr(lock_module, "FileLock", Spy)
        op = _tuned_op()
        _tune(op)
        result: dict[str, Any] = {}
        saver = threading.Thread(target=lambda: result.setdefault("n", save_tuning_file(path)))
        saver.start()
        assert waiting.wait(HANG_GUARD_S), "the save did not wait for the held lock"
        assert saver.is_alive() and not path.exists()  # waiting, nothing written
    finally:
        if holder.stdin is not None:
            holder.stdin.close()
        holder.wait(timeout=60)
    saver.join(HANG_GUARD_S)
    assert not saver.is_alive() and result["n"] == 1 and path.exists()
