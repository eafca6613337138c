"""A tuning file on a read-only mount: serving from it, and re-running a program whose keys
are all in it, works; only a block that tuned something new tries to write, and then says
why it could not.  The mount is real (a read-only bind mount in a user namespace of a child
process), not a monkeypatched writer."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

TESTS = os.path.dirname(os.path.abspath(__file__))

CHILD = textwrap.dedent(
    """
    import errno, json, os, sys
    sys.path.insert(0, {tests!r})
    import torch
    from autotuner_fakes import FakeRunner, make_op
    from flashinfer.autotuner import AutoTuner, autotune, make_key
    path = {path!r}
    assert not os.access(os.path.dirname(path), os.W_OK)  # really read-only
    op = make_op({{"a": FakeRunner("a", [1, 2]), "b": FakeRunner("b")}})
    assert op.api_key == {api_key!r}
    with autotune(tuning_file=path):  # tuning on, every key in the file: nothing to write
        served = op(torch.zeros(4))
    with autotune(False, tuning_file=path):  # serving: a key not in the file runs the default
        default = op(torch.zeros(64))
    try:
        with autotune(tuning_file=path):
            op(torch.zeros(128))  # a new key: the block must save, and cannot
    except OSError as exc:
        error = errno.errorcode.get(exc.errno)
    else:
        error = None
    tuned = AutoTuner.get().choice(make_key(op.api_key, (torch.zeros(128),))) is not None
    print(json.dumps([served, default, error, tuned]))
    """
)


def _read_only_mounts_available() -> bool:
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return False
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True, timeout=30)
    return probe.returncode == 0


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or not _read_only_mounts_available(),
    reason="needs Linux user namespaces (unshare -rm) to make a read-only bind mount",
)
def test_a_tuning_file_on_a_read_only_mount_serves_and_is_never_written(tmp_path):
    mount = tmp_path / "ro"
    mount.mkdir()
    path = mount / "tuned.json"
    api_key = "autotuner_fakes.fake_op_0"  # the child's first fake op
    entry = {
        "op": api_key,
        "inputs": [{"shape": [4], "dtype": "float32"}],
        "device": "cpu",
        "compute_capability": None,
        "backend": "b",
        "tactic": None,
        "median_ms": 1.0,
        "experimental": False,
    }
    path.write_text(json.dumps({"schema_version": 2, "entries": [entry]}))
    before = {p.name: p.read_bytes() for p in mount.iterdir()}
    script = CHILD.format(tests=TESTS, path=str(path), api_key=api_key)
    command = 'mount --bind -o ro "$1" "$1" && exec "$2" -c "$3"'
    proc = subprocess.run(
        ["unshare", "-rm", "sh", "-c", command, "sh", str(mount), sys.executable, script],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    served, default, error, tuned = json.loads(proc.stdout.splitlines()[-1])
    assert served == ["b", None]  # loaded from the read-only file
    assert default == ["a", None]  # untuned: the first candidate's default
    assert error == "EROFS" and tuned  # said why it could not save; the result is in memory
    assert {p.name: p.read_bytes() for p in mount.iterdir()} == before  # no .lock, no rewrite
