"""The ``flashinfer`` command: every sub-command, in-process (``main([...])``) and as
``python -m flashinfer`` in a subprocess, with its exit codes (0 ok, 1 runtime, 2 usage)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from autotuner_fakes import clean_tuner
from throwaway_experimental import OWNER, shipped_experimental, throwaway

from flashinfer.autotuner import AutoTuner
from flashinfer.cli import main

GATE = "FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS"


def run_module(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if k not in (GATE, "TRITON_INTERPRET")}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "flashinfer", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=full_env,
    )


@pytest.fixture(autouse=True)
def fresh_tuner():
    with clean_tuner(warmup=0, repeat=1):
        yield


# `flashinfer backends` is tested in tests/test_cli_backends.py.


# --------------------------------------------------------------------------------------
# autotune
# --------------------------------------------------------------------------------------


def test_autotune_subprocess_writes_cache_and_prints_summary(tmp_path):
    cache = tmp_path / "tuned.json"
    proc = run_module(
        "autotune", "--op", "mm", "--shapes", "16x16x32,8x4x16", "--tuning-file", str(cache)
    )
    assert proc.returncode == 0, proc.stderr
    assert "[1/2] mm 16x16x32" in proc.stderr and "[2/2] mm 8x4x16" in proc.stderr  # progress
    assert "1/1 done" in proc.stderr
    assert "SHAPE" in proc.stdout and "16x16x32" in proc.stdout and "torch" in proc.stdout
    assert f"wrote 2 entries to {cache}" in proc.stdout
    doc = json.loads(cache.read_text())
    assert doc["schema_version"] == 2
    assert {tuple(e["inputs"][0]["shape"]) for e in doc["entries"]} == {(16, 32), (8, 16)}
    # Run again: the keys are in the file, so nothing is timed.  (A pick whose timing was
    # noisy, likely on a loaded machine, would be timed again: issue 34, item 17; this test
    # is about reuse, so the file says each was measured quietly.)
    for entry in doc["entries"]:
        entry["iqr_ms"] = 0.0
    cache.write_text(json.dumps(doc))
    again = run_module(
        "autotune", "--op", "mm", "--shapes", "16x16x32", "--tuning-file", str(cache)
    )
    assert again.returncode == 0, again.stderr
    assert "reused (key already tuned)" in again.stdout


def test_autotune_in_process_with_interpreter_times_triton(tmp_path, capsys):
    cache = tmp_path / "t.json"
    args = [
        "autotune",
        "--op",
        "flashinfer.gemm.mm",
        "--shapes",
        "16X16X32",
        "--tuning-file",
        str(cache),
    ]
    assert main([*args, "--dtype", "float16"]) == 0
    captured = capsys.readouterr()
    if not torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") == "1":
        assert "triton" in captured.err  # the interpreter makes Triton a candidate on CPU
    (entry,) = json.loads(cache.read_text())["entries"]
    assert entry["inputs"][0]["dtype"] == "float16"
    assert entry["backend"] in ("torch", "triton")


def test_autotune_force_retimes_keys_already_in_the_cache(tmp_path, capsys):
    argv = [
        "autotune",
        "--op",
        "mm",
        "--shapes",
        "8x8x8",
        "--tuning-file",
        str(tmp_path / "c.json"),
    ]
    assert main(argv) == 0
    AutoTuner.get().clear()
    assert main(argv) == 0
    assert "reused (key already tuned)" in capsys.readouterr().out
    AutoTuner.get().clear()
    assert main([*argv, "--force"]) == 0
    out = capsys.readouterr().out
    assert "tuned" in out and "reused" not in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["autotune", "--op", "nope", "--shapes", "1x2x3"],
            "unknown op 'nope'; autotunable ops: mm",
        ),
        (["autotune", "--op", "mm", "--shapes", "1x2"], "'1x2' has 2 dimensions"),
        (["autotune", "--op", "mm", "--shapes", "axbxc"], "malformed shape 'axbxc'"),
        (["autotune", "--op", "mm", "--shapes", "1x0x3"], "positive integer"),
        (["autotune", "--op", "mm", "--shapes", "1x2x3,"], "empty shape"),
        (
            ["autotune", "--op", "mm", "--shapes", "1x2x3", "--dtype", "int8"],
            "invalid choice: 'int8'",
        ),
        (["autotune", "--op", "rmsnorm", "--shapes", "4x8"], "not autotunable"),
        (["autotune", "--shapes", "1x2x3"], "no op given; name one, e.g. `flashinfer autotune mm"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
    ],
)
def test_usage_errors_exit_2(tmp_path, capsys, argv, message):
    if argv[0] == "autotune" and "--tuning-file" not in argv:
        argv = [*argv, "--tuning-file", str(tmp_path / "c.json")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "error:" in err
    assert not (tmp_path / "c.json").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_requested_without_cuda_is_a_usage_error(tmp_path, capsys):
    argv = [
        "autotune",
        "--op",
        "mm",
        "--shapes",
        "4x4x4",
        "--tuning-file",
        str(tmp_path / "c.json"),
    ]
    assert main([*argv, "--device", "cuda"]) == 2
    assert "CUDA is not available" in capsys.readouterr().err


def test_cache_in_missing_directory_is_a_usage_error(tmp_path, capsys):
    argv = [
        "autotune",
        "--op",
        "mm",
        "--shapes",
        "4x4x4",
        "--tuning-file",
        str(tmp_path / "no" / "c.json"),
    ]
    assert main(argv) == 2
    assert "does not exist" in capsys.readouterr().err


def test_runtime_failure_exits_1(tmp_path, capsys, monkeypatch):
    from flashinfer.autotuner import persist as cache_module

    def disk_full(path, text):
        raise OSError(28, "No space left on device (simulated)")

    monkeypatch.setattr(cache_module, "write_file", disk_full)
    argv = [
        "autotune",
        "--op",
        "mm",
        "--shapes",
        "4x4x4",
        "--tuning-file",
        str(tmp_path / "c.json"),
    ]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "flashinfer autotune: error: OSError: [Errno 28] No space left on device" in err
    assert "Traceback" not in err


def test_usage_errors_exit_2_in_a_subprocess():
    proc = run_module("autotune", "--op", "mm", "--shapes", "12", "--tuning-file", "x.json")
    assert proc.returncode == 2
    assert "flashinfer autotune: error: --shapes" in proc.stderr
    proc = run_module()
    assert proc.returncode == 2 and "usage: flashinfer" in proc.stderr


def test_help_and_version_exit_0(capsys):
    assert main(["--help"]) == 0
    assert "backends" in capsys.readouterr().out
    assert main(["--version"]) == 0
    assert main(["autotune", "--help"]) == 0
    assert "MxNxK" in capsys.readouterr().out


# --------------------------------------------------------------------------------------
# experimental
# --------------------------------------------------------------------------------------


def test_experimental_lists_apis_and_backends_with_lifecycle():
    proc = run_module("experimental")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert f"experimental gate: {GATE}=unset -> off" in out
    assert "OWNER" in out and "TRACKING ISSUE" in out and "GRADUATE BY" in out
    backends, apis = shipped_experimental()  # read from the ops and the inventory
    for name in backends | apis:
        assert name in out


def test_experimental_json_in_process(capsys, monkeypatch):
    made = throwaway(monkeypatch)
    assert main(["experimental", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    names = {f["name"]: f for f in doc["features"]}
    backend = names[made.backend_feature]
    assert backend["kind"] == "backend" and backend["owner"] == OWNER
    assert backend["tracking_issue"]
    assert names[made.api_feature]["kind"] == "api"
    assert doc["gate"]["on"] is False


def test_console_script_is_declared():
    with open(os.path.join(os.path.dirname(__file__), "..", "pyproject.toml")) as f:
        assert 'flashinfer = "flashinfer.cli:main"' in f.read()
