"""``benchmarks/bench_compile.py`` (issue 19's compiled-call row) runs and reports every row.

Tiny counts, the ``eager`` compile backend (the script's work without inductor's minute of
compiling), in a subprocess: the tests check what the JSON line holds and that bad input is
refused, never a time.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "benchmarks" / "bench_compile.py"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCH), *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )


def test_every_row_of_every_shape_is_reported():
    proc = _run("--number=2", "--repeat=3", "--backend=eager", "--shapes", "4x32", "2x64")
    assert proc.returncode == 0, proc.stderr
    *table, last = proc.stdout.strip().splitlines()
    run = json.loads(last)
    assert run["compile_backend"] == "eager"
    assert run["flashinfer_backend"] in flashinfer_backends()
    assert (run["number"], run["repeat"]) == (2, 3)
    rows = {(r["mode"], r["impl"], r["shape"]): r for r in run["rows"]}
    expected = {
        (mode, impl, shape)
        for mode in ("compiled", "eager")
        for impl in ("flashinfer", "torch")
        for shape in ("4x32", "2x64")
    }
    assert set(rows) == expected
    for (_, _, shape), row in rows.items():
        assert row["median_us"] > 0 and row["spread_us"] >= 0
        base = rows[("compiled", "torch", shape)]["median_us"]
        assert abs(row["added_us"] - (row["median_us"] - base)) < 1e-2
    assert any(line.startswith("compiled  flashinfer  4x32") for line in table)


def flashinfer_backends() -> list[str]:
    import flashinfer

    return list(flashinfer.rmsnorm.stable_backends)


def test_a_malformed_shape_is_refused_naming_the_form():
    proc = _run("--shapes", "8by256")
    assert proc.returncode == 2
    assert "'8by256'" in proc.stderr and "ROWSxHIDDEN" in proc.stderr
    proc = _run("--number=0")
    assert proc.returncode == 2 and "at least 1" in proc.stderr
