"""``flashinfer autotune``'s progress written to a file or a pipe (issue 23, "Smaller things"):
plain lines, no ``\\r``, no line written twice; and tactics that share a prefix are told
apart, there and on a terminal.

The file and the pipe are real: the command's stderr is a file in ``tmp_path``, or the write
end of an ``os.pipe()`` read by a thread, and one run is a real ``flashinfer autotune``
process whose stderr is a pipe (the real ``mm`` op, whose Triton tactics share long
prefixes).
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from autotuner_fakes import FakeRunner, clean_tuner, tune_from_cli

from flashinfer.cli import main
from flashinfer.cli.autotune_report import PROGRESS_WIDTH, TuningProgress, short_label

REPO = Path(__file__).resolve().parents[1]

#: Tactics that share a long prefix and differ only at the end of their JSON.
TACTICS = [
    {"BLOCK_K": 64, "BLOCK_M": 64, "BLOCK_N": 64, "num_stages": 3, "num_warps": w}
    for w in (2, 4, 8)
]


@pytest.fixture(autouse=True)
def tuner(monkeypatch):
    monkeypatch.delenv("FLASHINFER_AUTOTUNER_LOG", raising=False)  # its lines share stderr
    with clean_tuner(warmup=0, repeat=1) as tuner:
        yield tuner


def fake_target(monkeypatch):
    return tune_from_cli(monkeypatch, {"a": FakeRunner("a", TACTICS), "b": FakeRunner("b")})


def run_with_stderr(monkeypatch, op, stream, tmp_path) -> int:
    monkeypatch.setattr(sys, "stderr", stream)
    argv = [
        "autotune",
        "--op",
        op.api_name,
        "--shapes",
        "4,8",
        "--tuning-file",
        str(tmp_path / "c"),
    ]
    return main(argv)


def check_plain(text: str, pairs: int, shapes: int) -> list[str]:
    """No carriage return, no line twice, one line per pair and one per shape done, every
    line within the width; the pairs' labels are all different within a shape."""
    assert "\r" not in text
    lines = text.splitlines()
    assert len(lines) == len(set(lines)), lines
    assert len(lines) == shapes * (pairs + 1), lines
    assert all(len(line) <= PROGRESS_WIDTH for line in lines)
    for shape in range(1, shapes + 1):
        mine = [line for line in lines if line.startswith(f"[{shape}/{shapes}] ")]
        labels = [re.sub(r"^.* \d+/\d+ ", "", line) for line in mine[:-1]]
        assert len(set(labels)) == pairs, labels
        assert mine[-1].endswith(f"{pairs}/{pairs} done")
    return lines


def test_progress_to_a_file_is_plain_lines(monkeypatch, tmp_path):
    op = fake_target(monkeypatch)
    path = tmp_path / "progress.log"
    with open(path, "w", encoding="utf-8") as stream:
        assert run_with_stderr(monkeypatch, op, stream, tmp_path) == 0
    lines = check_plain(path.read_text(encoding="utf-8"), pairs=4, shapes=2)
    assert any(line.endswith("a BK=64,BM=64,BN=64,ns=3,nw=8") for line in lines)


def test_progress_to_a_pipe_is_plain_lines(monkeypatch, tmp_path):
    op = fake_target(monkeypatch)
    read_fd, write_fd = os.pipe()
    received: list[bytes] = []

    def drain():
        with os.fdopen(read_fd, "rb") as reader:
            received.append(reader.read())

    thread = threading.Thread(target=drain)
    thread.start()
    try:
        with os.fdopen(write_fd, "w", encoding="utf-8") as stream:
            assert not stream.isatty()
            assert run_with_stderr(monkeypatch, op, stream, tmp_path) == 0
    finally:
        thread.join(30)
    check_plain(received[0].decode(), pairs=4, shapes=2)


def test_a_real_run_writing_to_a_pipe_tells_the_tactics_apart(tmp_path):
    """The command in its own process, the real mm op: its Triton tactics share a long
    JSON prefix, and each progress line still names a different one."""
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    env.pop("FLASHINFER_AUTOTUNER_LOG", None)
    proc = subprocess.run(
        [sys.executable, "-m", "flashinfer", "autotune", "--op", "mm", "--shapes", "16x64x64"]
        + ["--tuning-file", str(tmp_path / "tuned.json")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    progress = [line for line in proc.stderr.splitlines() if line.startswith("[1/1] ")]
    pairs = int(re.search(r" \d+/(\d+) ", progress[0]).group(1))
    check_plain("\n".join(progress) + "\n", pairs=pairs, shapes=1)
    assert pairs > 2 and sum(" triton " in line for line in progress) == pairs - 1


# ---- the labels --------------------------------------------------------------------------


def test_a_tactic_is_written_short_with_keys_by_their_initials():
    assert short_label('triton {"BLOCK_K": 64, "num_warps": 8}') == "triton BK=64,nw=8"
    assert short_label("torch null") == "torch null"
    assert short_label("a [1, 2]") == "a [1,2]"
    assert short_label("a not json") == "a not json"
    # two keys with the same initials keep their whole names
    assert short_label('a {"num_stages": 2, "num_splits": 4, "x": 1}') == (
        "a num_stages=2,num_splits=4,x=1"
    )


def _shown(text: str) -> list[str]:
    """What a terminal shows: the last redraw of each line."""
    return [line.split("\r")[-1] for line in text.split("\n") if line.strip()]


def test_on_a_terminal_tactics_sharing_a_prefix_are_told_apart():
    """Long tactics that differ only at their end: each redraw still names its own."""
    stream = io.StringIO()
    stream.isatty = lambda: True  # type: ignore[method-assign]
    progress = TuningProgress(stream, 1)
    progress.start_shape(0, "mm 123456789x123456789x123456789")
    long = [{f"parameter_{i}_of_the_kernel": 1 for i in range(9)} | {"last": n} for n in (1, 2)]
    seen = []
    for done, tactic in enumerate(long):
        label = "triton " + json.dumps(tactic, sort_keys=True)
        progress(done, 3, label)
        seen.append(stream.getvalue().split("\r")[-1])
    assert seen[0] != seen[1]
    assert all(len(line) <= PROGRESS_WIDTH for line in seen)
    assert "\r" in stream.getvalue()  # redrawn in place on a terminal
