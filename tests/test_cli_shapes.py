"""``--shapes`` is read alike by ``flashinfer autotune`` and ``flashinfer explain``: positive
decimal integers joined by ``x`` (or ``X``), for a problem whose tensors can exist; anything
else is a usage error (exit 2, one line on stderr) found before any work.  And
``explain --tuning-file`` refuses a path that cannot be a tuning file as ``autotune
--tuning-file`` does."""

from __future__ import annotations

import contextlib
import io
import os

import pytest
from hypothesis import example, given, settings
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


ASCII_DIGITS = "0123456789"


def accepted(text: str, ndims: tuple[int, ...]) -> list[tuple[int, ...]] | None:
    """The stated rule, written as a character scan (not the parser's code): comma-separated
    shapes; around each, whitespace is ignored; inside, runs of ASCII digits separated by one
    ``x`` or ``X`` each, as many runs as the op takes, every one above zero.  The shapes read,
    or ``None`` where the text breaks the rule."""
    shapes = []
    for item in text.split(","):
        item = item.strip()  # str.strip() removes exactly the str.isspace() characters
        dims: list[int] = []
        run = ""
        for ch in item + "x":  # a final separator closes the last run
            if ch in ASCII_DIGITS:
                run += ch
            elif ch in "xX" and run:
                dims.append(int(run))
                run = ""
            else:
                return None
        if len(dims) not in ndims or any(d == 0 for d in dims):
            return None
        shapes.append(tuple(dims))
    return shapes


# Whole texts from tokens, separators included: lookalikes of "x" and of digits (fullwidth
# ｘ/Ｘ, Arabic-Indic ١, fullwidth ３), the spellings int() would take (+, -, _) and whitespace.
TOKENS = [
    "0",
    "1",
    "7",
    "12",
    "x",
    "X",
    "ｘ",
    "Ｘ",
    "١",
    "３",
    "+",
    "-",
    "_",
    " ",
    "\t",
    ".",
    "é",
    ",",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(TOKENS), max_size=14).map("".join))
@example("1x1X1")  # drawn in the stable lane: the parser took it, the old oracle did not
@example("1X1X1")
@example(" 1x1x1")  # whitespace around a shape is ignored
@example("1x1x1\t")
@example("1x1x1, 2X3x4")
@example("1 x1x1")
@example("١x1x1")
@example("３x1x1")
@example("1ｘ1ｘ1")
@example("+1x1x1")
@example("1_0x1x1")
@example("0x1x1")
@example("01x1x1")
@example("1xx1x1")
@example("x1x1x1")
@example("1x1x1x")
@example("1x1x1,")
def test_a_shape_is_accepted_exactly_when_its_dimensions_are_decimal_digits(text):
    expected = accepted(text, MM.ndims)
    try:
        parsed = parse_shapes(text, MM)
    except UsageError:
        assert expected is None, text
    else:
        assert parsed == expected, text


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
