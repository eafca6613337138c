"""``--shapes`` is read alike by ``flashinfer autotune`` and ``flashinfer explain``: positive
decimal integers joined by ``x``, for a problem whose tensors can exist; anything else is a
usage error (exit 2, one line on stderr) found before any work.  And ``explain --tuning-file``
refuses a path that cannot be a tuning file as ``autotune --tuning-file`` does."""

from __future__ import annotations

import contextlib
import io
import os
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flashinfer.cli import UsageError, main
from flashinfer.cli.autotune import parse_shapes
from flashinfer.testing import example_inputs_for

MM = example_inputs_for("mm")


def run(argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(argv)
    return code, err.getvalue()


BAD = [
    "99999999999999999999x1x1",  # no tensor has such a dimension
    "4294967296x4294967296x1",  # the result would have more than 2**63 bytes
    "+3x4x5",
    "1_000x4x4",
    "4 x 4 x 4",
    "0x4x4",
    "-1x4x4",
    "4x4",
    "axbxc",
    "",
]


@pytest.mark.parametrize("command", ["autotune", "explain"])
@pytest.mark.parametrize("shape", BAD)
def test_a_shape_that_cannot_be_is_one_usage_line_in_both_commands(command, shape, tmp_path):
    argv = (
        ["autotune", "--op", "mm", "--tuning-file", str(tmp_path / "t.json")]
        if command == "autotune"
        else ["explain", "mm"]
    )
    code, err = run([*argv, "--shapes", shape])
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.startswith("flashinfer")]
    assert len(lines) == 1 and "error:" in lines[0] and "--shapes" in lines[0], err
    assert not (tmp_path / "t.json").exists()  # nothing was tuned, nothing was written


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet="0123456789+-_ xX.é٣", max_size=4), min_size=1, max_size=4))
def test_a_shape_is_accepted_exactly_when_its_dimensions_are_decimal_digits(parts):
    item = "x".join(parts)
    target = MM
    expected = (
        len(parts) in target.ndims
        and all(re.fullmatch(r"[0-9]+", p) for p in parts)
        and all(int(p) > 0 for p in parts)
        and "," not in item
    )
    try:
        parsed = parse_shapes(item, target)
    except UsageError:
        assert not expected, item
    else:
        assert expected, item
        assert parsed == [tuple(int(p) for p in parts)]


@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_explain_refuses_a_cache_path_as_autotune_does(kind, tmp_path):
    path = tmp_path / "cache"
    if kind == "directory":
        path.mkdir()
    else:
        os.mkfifo(path)
    explain_code, explain_err = run(
        ["explain", "mm", "--shapes", "8x8x8", "--tuning-file", str(path)]
    )
    tune_code, tune_err = run(
        ["autotune", "--op", "mm", "--shapes", "8x8x8", "--tuning-file", str(path)]
    )
    assert explain_code == tune_code == 2
    said = explain_err.strip().splitlines()[-1].split("error: ", 1)[1]
    assert said == tune_err.strip().splitlines()[-1].split("error: ", 1)[1]
