"""The commands' help (issue 34, item 18): ``--help`` of every sub-command answers without
importing torch, and the ops' shape formats it shows come from the ops' declarations (read
from source by ``flashinfer.cli.declarations``), which agree with what the imported modules
declare."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from flashinfer.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[1]


def _subcommands() -> list[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return sorted(sub.choices)  # type: ignore[arg-type]


def test_the_subcommands_are_found():
    assert {"autotune", "backends", "experimental", "explain"} <= set(_subcommands())


@pytest.mark.parametrize("argv", [["--help"], *([c, "--help"] for c in _subcommands())])
def test_help_does_not_import_torch(argv):
    code = (
        "import sys\n"
        "from flashinfer.cli import main\n"
        f"code = main({argv!r})\n"
        "assert code == 0, code\n"
        "print('torch' in sys.modules, file=sys.stderr)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == "False", f"{argv} imported torch"
    assert "usage: flashinfer" in proc.stdout


def test_the_declarations_read_from_source_are_what_the_modules_declare():
    import flashinfer
    from flashinfer.autotuner import AutoTuner
    from flashinfer.cli.declarations import declared_examples
    from flashinfer.testing import EXAMPLE_INPUTS

    flashinfer.load_all_apis()
    declared = declared_examples()
    ops = set(flashinfer.api_modules.OPS)
    assert set(declared) == set(EXAMPLE_INPUTS) & ops
    tunable = {op.api_name for op, _ in AutoTuner.get().registered().values()}
    for name, d in declared.items():
        target = EXAMPLE_INPUTS[name]
        assert (d.shape_help, d.example) == (target.shape_help, target.example), name
        assert d.tunable == (name in tunable), name


def _help(*argv: str) -> str:
    out = io.StringIO()
    with redirect_stdout(out):
        assert main([*argv, "--help"]) == 0
    return out.getvalue()


def test_explain_help_shows_each_ops_shape_format():
    from flashinfer.testing import example_inputs_for

    text = _help("explain")
    target = example_inputs_for("rmsnorm")
    assert target is not None
    line = f"  rmsnorm +--shapes {re.escape(target.shape_help)}, e.g. {target.example}\n"
    assert re.search(line, text), text
    assert "TOKENSxHIDDEN" in text
    assert re.search(r"\n  mm +--shapes MxNxK", text), text


def test_autotune_help_lists_the_tunable_ops_as_before():
    text = _help("autotune")
    assert "tunable ops:\n  mm  --shapes MxNxK (a is MxK, b is KxN)\n" in text
    assert "rmsnorm  --shapes" not in text  # not registered with the autotuner
    assert "flashinfer autotune mm --shapes 64x64x64,128x64x32 --tuning-file tuned.json" in text
