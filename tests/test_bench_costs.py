"""Figures live in benchmark output, not in the package's comments.

``benchmarks/bench_costs.py`` times the pairs of ways whose cost a comment in the package
explains; these tests run it (tiny counts: they check what it prints, never a time), check
that every file whose comment points to it has its section, and that no comment or docstring
in ``flashinfer/`` states a time (a number with a unit of time goes stale there).
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tokenize
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "flashinfer"
BENCH = "benchmarks/bench_costs.py"
TIME_UNITS = {"us", "µs", "ns", "ms", "microsecond", "microseconds", "nanosecond", "nanoseconds"}


def _run_bench() -> str:
    proc = subprocess.run(
        [sys.executable, str(REPO / BENCH), "--number", "50", "--repeat", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _prose(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every comment and string literal of a source file."""
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline)
    return [
        (tok.start[0], tok.string)
        for tok in tokens
        if tok.type in (tokenize.COMMENT, tokenize.STRING)
    ]


def _is_number(word: str) -> bool:
    digits = word.lstrip("~").replace(".", "", 1)
    return digits.isdigit()


def _times_stated(text: str) -> list[str]:
    """Each "<number> <unit of time>" (``~2 us``, ``0.5us``) in ``text``."""
    words = [w.strip("()[],;:.`'\"") for w in text.split()]
    found = []
    for i, word in enumerate(words):
        for unit in TIME_UNITS:
            if word.endswith(unit) and _is_number(word[: -len(unit)]):
                found.append(word)
        if word in TIME_UNITS and i and _is_number(words[i - 1]):
            found.append(f"{words[i - 1]} {word}")
    return found


def test_the_time_finder_finds_times():
    assert _times_stated("costs ~0.3 us against ~0.1") == ["~0.3 us"]
    assert _times_stated("about 2us (tens of microseconds)") == ["2us"]
    assert _times_stated("(~1 us here); 300 ns") == ["~1 us", "300 ns"]
    assert _times_stated("costs more than a dict lookup; 2 usages") == []


def test_no_comment_or_docstring_in_the_package_states_a_time():
    found = [
        f"{path.relative_to(REPO)}:{line}: {stated}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for line, text in _prose(path)
        for stated in _times_stated(text)
    ]
    assert not found, f"say why in words and let {BENCH} print the figure:\n" + "\n".join(found)


def test_the_benchmark_prints_a_section_for_every_comment_that_points_to_it():
    out = _run_bench()
    pointing = sorted(
        {
            path.name
            for path in PACKAGE.rglob("*.py")
            for _, text in _prose(path)
            if "bench_costs.py" in text
        }
    )
    assert pointing, pointing  # the scan really reads the package
    headers = [line for line in out.splitlines() if line and not line.startswith((" ", "{"))]
    for name in pointing:
        assert any(name in header for header in headers), (name, headers)
    figures = json.loads(out.splitlines()[-1])["ns_per_call"]
    assert len(figures) == len(headers) - 1  # every section but the first line's header
    for section in figures.values():
        assert len(section) == 2 and all(ns > 0 for ns in section.values())
