"""One spelling of the op for both sub-commands that take one: ``flashinfer autotune`` and
``flashinfer explain`` each accept the op as a positional argument (``autotune mm``) and as
``--op mm``; both at once only when they agree.  Neither, or two that differ, is a usage
error: exit status 2 and one line on stderr naming both spellings.  The help of each command
shows both.

``autotune`` runs a fake op (tests/autotuner_fakes.py) through the real command, so every
combination tunes in milliseconds; ``explain`` runs the real ``mm`` (it runs no kernel).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from autotuner_fakes import FakeRunner, clean_tuner, ops_with_backends, tune_from_cli

from flashinfer.cli import main


@pytest.fixture(autouse=True)
def fresh_tuner():
    with clean_tuner(warmup=0, repeat=1) as tuner:
        yield tuner


@pytest.fixture
def fake_op(monkeypatch, isolated_op_registry) -> str:
    """A fake autotunable op the command can build inputs for; returns its name."""
    return tune_from_cli(monkeypatch, {"a": FakeRunner("a", [0, 1]), "b": FakeRunner("b")}).api_name


def _spellings(op: str, where: str) -> dict[str, list[str]]:
    """Every way to name ``op`` once or twice, with the op at ``where`` (before or after the
    other arguments)."""
    forms = {
        "positional": [op],
        "option": ["--op", op],
        "option=": [f"--op={op}"],
        "positional then option": [op, "--op", op],
        "option then positional": ["--op", op, op],
    }
    return {f"{name}, {where}": form for name, form in forms.items()}


def _argv(command: str, rest: list[str], form: list[str], where: str) -> list[str]:
    return [command, *form, *rest] if where == "first" else [command, *rest, *form]


def _one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]


# ---- autotune ---------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["first", "last"])
def test_autotune_takes_every_spelling_and_tunes_the_same(
    fake_op, fresh_tuner, tmp_path, capsys, where
):
    files = {}
    for label, form in _spellings(fake_op, where).items():
        cache = tmp_path / f"{len(files)}.json"
        rest = ["--shapes", "4,8", "--tuning-file", str(cache)]
        assert main(_argv("autotune", rest, form, where)) == 0, (label, capsys.readouterr().err)
        capsys.readouterr()
        doc = json.loads(cache.read_text())
        files[label] = sorted((e["op"], e["inputs"][0]["shape"][0]) for e in doc["entries"])
        fresh_tuner.clear()  # each spelling tunes from nothing
    first = next(iter(files.values()))
    assert len(first) == 2
    assert all(v == first for v in files.values()), files


@pytest.mark.parametrize(
    "form, message",
    [
        (
            [],
            "no op given; name one, e.g. `flashinfer autotune mm ...` or "
            "`flashinfer autotune --op mm ...` (autotunable ops: ",
        ),
        (["OTHER", "--op", "OP"], "two different ops given: 'OTHER' and --op 'OP'"),
        (["--op", "OTHER", "OP"], "two different ops given: 'OP' and --op 'OTHER'"),
    ],
    ids=["neither", "positional and a different option", "option and a different positional"],
)
def test_autotune_usage_error_for_no_op_or_two(fake_op, tmp_path, capsys, form, message):
    form = [fake_op if f == "OP" else f for f in form]
    message = message.replace("'OP'", repr(fake_op))
    cache = tmp_path / "t.json"
    assert main(["autotune", *form, "--shapes", "4", "--tuning-file", str(cache)]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert line.startswith("flashinfer autotune: error: ") and message in line, line
    if not form:
        assert fake_op in line  # the ops it can tune are named
    assert not cache.exists()  # nothing tuned, nothing written


def test_autotune_unknown_op_names_it_either_way(fake_op, tmp_path, capsys):
    for form in (["nope"], ["--op", "nope"]):
        assert main(["autotune", *form, "--shapes", "4", "--tuning-file", str(tmp_path / "t")]) == 2
        line = _one_error_line(capsys.readouterr().err)
        assert "unknown op 'nope'; autotunable ops: " in line and "--op nope" not in line


# ---- explain ----------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["first", "last"])
def test_explain_takes_every_spelling_and_prints_the_same(capsys, where):
    outputs = {}
    for label, form in _spellings("mm", where).items():
        assert main(_argv("explain", ["--shapes", "4x4x4", "--json"], form, where)) == 0, label
        outputs[label] = json.loads(capsys.readouterr().out)
    first = next(iter(outputs.values()))
    assert first[0]["api"] == "flashinfer.mm", first
    assert all(v == first for v in outputs.values()), outputs


@pytest.mark.parametrize(
    "form, message",
    [
        (
            [],
            "no op given; name one, e.g. `flashinfer explain mm ...` or "
            f"`flashinfer explain --op mm ...` (ops with backends: {ops_with_backends()}",
        ),
        (["mm", "--op", "rmsnorm"], "two different ops given: 'mm' and --op 'rmsnorm'"),
        (["--op", "rmsnorm", "mm"], "two different ops given: 'mm' and --op 'rmsnorm'"),
        (["--op", "mm", "MM"], "two different ops given: 'MM' and --op 'mm'"),
    ],
    ids=[
        "neither",
        "positional and a different option",
        "option then a different positional",
        "differ in case",
    ],
)
def test_explain_usage_error_for_no_op_or_two(capsys, form, message):
    assert main(["explain", *form, "--shapes", "4x4x4"]) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert line.startswith("flashinfer explain: error: ") and message in line, line


# ---- the help ----------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["autotune", "explain"])
def test_the_help_shows_both_spellings(capsys, command):
    assert main([command, "--help"]) == 0
    out = capsys.readouterr().out
    usage = out.split("\n\n", 1)[0]
    assert "[--op OP]" in usage and usage.rstrip().endswith("[op]"), usage
    assert f"flashinfer {command} mm --shapes" in out
    assert f"flashinfer {command} --op mm --shapes" in out
    assert "`--op OP` is the same" in " ".join(out.split())


def test_the_cli_page_lists_both_spellings():
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "docs" / "_ext"))
    try:
        import flashinfer_reference
    finally:
        sys.path.pop(0)
    text = "\n".join(flashinfer_reference.cli_rst())
    for command in ("autotune", "explain"):
        section = text.split(f"flashinfer {command}\n", 1)[1].split("\nflashinfer ", 1)[0]
        assert "* ``op``:" in section and "* ``--op OP``:" in section, section
