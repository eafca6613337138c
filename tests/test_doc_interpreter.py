"""The docs' examples run as a user runs them, and say so when they need Triton's interpreter.

A user on a CPU-only machine runs an example with ``TRITON_INTERPRET`` unset unless the page
tells them to set it.  So ``docs/conf.py`` does not set it, and ``scripts/docs/build_docs.sh``
(CI's docs step) runs the doctests twice: with the variable unset, then with
``TRITON_INTERPRET=1``.  An example that needs the interpreter (a Triton kernel on CPU
tensors) carries ``:skipif: not TRITON_INTERPRETED`` (skipped by the first run, run by the
second), and the prose just before it, which the reader sees, says it needs
``TRITON_INTERPRET=1``.  String operations only.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted(p for p in DOCS.glob("**/*.rst") if "_build" not in p.parts)
SKIPIF = "not TRITON_INTERPRETED"
"""The one condition an example that needs the interpreter is skipped on."""
SAYS = "needs ``TRITON_INTERPRET=1``"
"""What the prose before such an example says (whitespace aside)."""
TEST_DIRECTIVES = ("doctest", "testcode", "testsetup", "testcleanup", "testoutput")


def _env(**set_: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(set_)
    return env


def _blocks(page: Path) -> list[tuple[int, str, str | None, str]]:
    """Each doctest-family directive of ``page``: (line number, directive, its ``:skipif:``
    or None, the prose since the previous directive: unindented lines only)."""
    lines = page.read_text().splitlines()
    found = []
    prose: list[str] = []
    for i, line in enumerate(lines):
        if line.startswith(".. ") and "::" in line:
            name = line[3:].split("::", 1)[0].strip()
            skipif = None
            for option in lines[i + 1 :]:
                if not option.startswith("   :"):
                    break
                key, _, value = option.strip()[1:].partition(":")
                if key == "skipif":
                    skipif = value.strip()
            if name in TEST_DIRECTIVES:
                found.append((i + 1, name, skipif, " ".join(" ".join(prose).split())))
            prose = []
        elif line and not line[0].isspace():
            prose.append(line)
    return found


def test_the_pages_have_examples_that_need_the_interpreter():
    marked = [(p.name, n) for p in PAGES for n, _, skipif, _ in _blocks(p) if skipif]
    assert {"compile.rst", "experimental.rst"} <= {page for page, _ in marked}, marked


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(DOCS)))
def test_an_example_skipped_without_the_interpreter_says_on_its_page_that_it_needs_it(page):
    for line, name, skipif, prose in _blocks(page):
        where = f"{page.relative_to(ROOT)}:{line} (.. {name}::)"
        if skipif is not None:
            assert skipif == SKIPIF, f"{where}: skipif {skipif!r}, expected {SKIPIF!r}"
            assert SAYS in prose, (
                f"{where} is skipped without TRITON_INTERPRET, but the text before it does "
                f"not say it {SAYS}: {prose[-300:]!r}"
            )
        elif name in ("doctest", "testcode"):
            assert SAYS not in prose, (
                f"{where}: the text before it says it {SAYS}, but the example lacks "
                f":skipif: {SKIPIF} (it would fail with the variable unset)"
            )


def _global_setup() -> str:
    tree = ast.parse((DOCS / "conf.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == [
            "doctest_global_setup"
        ]:
            value = ast.literal_eval(node.value)
            assert isinstance(value, str)
            return value
    raise AssertionError("docs/conf.py no longer sets doctest_global_setup")


@pytest.mark.parametrize("value, interpreted", [(None, False), ("1", True), ("0", False)])
def test_the_skip_condition_reads_the_variable_as_triton_does(value, interpreted):
    code = f"{_global_setup()}\nprint({SKIPIF})"
    env = _env() if value is None else _env(TRITON_INTERPRET=value)
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(not interpreted)


def test_the_docs_configuration_leaves_the_variable_as_the_user_has_it():
    code = (
        "import os, runpy\n"
        f"runpy.run_path({str(DOCS / 'conf.py')!r})\n"
        "print(os.environ.get('TRITON_INTERPRET'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=_env(), capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "None"


def test_the_docs_build_runs_the_doctests_without_and_with_the_interpreter(tmp_path):
    # A stand-in `python` records each call the script makes, with the variable it saw.
    log = tmp_path / "calls"
    stub = tmp_path / "bin" / "python"
    stub.parent.mkdir()
    stub.write_text(f'#!/usr/bin/env bash\necho "${{TRITON_INTERPRET-unset}} $*" >> {str(log)!r}\n')
    stub.chmod(0o755)
    env = _env(TRITON_INTERPRET="1")  # the caller's value is not what the examples see
    env["PATH"] = f"{stub.parent}{os.pathsep}{env['PATH']}"
    out = subprocess.run(
        ["bash", str(ROOT / "scripts" / "docs" / "build_docs.sh")],
        env=env,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    sphinx = [line.split() for line in log.read_text().splitlines() if "-m sphinx" in line]
    runs = [(call[0], call[call.index("-b") + 1]) for call in sphinx]
    assert runs == [("unset", "html"), ("unset", "doctest"), ("1", "doctest")], runs
    outdirs = [call[-1] for call in sphinx]
    assert len(set(outdirs)) == 3, outdirs  # the second run keeps the first one's report
