"""``flashinfer explain``'s example is README's Quick look problem, and says what the Quick
look says.

The Quick look multiplies a 16x2048 by a 2048x32 float32 tensor and notes that mm's
experimental backend "fits but is experimental, so it is left out" (``dropped_experimental
_backends``).  The command's example (:data:`flashinfer.cli.explain.EXAMPLE`, shown by
``flashinfer explain --help``, README and ``docs/backend_control.rst``) must be that problem,
so a reader who runs it sees the same thing: here every text is checked to name the same
shape, and the example is run (as a user would, gate off) and its table compared with the
Quick look and with the output the docs print.

On a CPU-only machine the printed table needs ``TRITON_INTERPRET=1``: the docs' console
blocks export it on a line of their own before the command, and the example is run with
exactly the variables a block exports (none else of ``FLASHINFER_*`` or
``TRITON_INTERPRET``).  It is also run without the variable, and compared with what the docs
say a user sees then.

Stable lane: the experimental backend's name is read from the op and from README, never
written here.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import flashinfer
from flashinfer.backend_families import TRITON, family_of
from flashinfer.cli import build_parser, main
from flashinfer.cli.explain import EXAMPLE

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
BACKEND_CONTROL = (ROOT / "docs" / "backend_control.rst").read_text()


def _section(text: str, title: str) -> str:
    start = text.index(f"\n{title}\n") + len(title) + 2
    end = text.find("\n## ", start)
    return text[start : end if end >= 0 else None]


QUICK_LOOK = _section(README, "## Quick look")
[QUICK_LOOK_CODE] = re.findall(r"```python\n(.*?)```", QUICK_LOOK, flags=re.S)


def _quick_look_problem() -> tuple[int, int, int]:
    """(M, N, K) of the Quick look's ``a, b = torch.randn(M, K), torch.randn(K, N)``."""
    for node in ast.walk(ast.parse(QUICK_LOOK_CODE)):
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.targets[0], ast.Tuple)
            and [t.id for t in node.targets[0].elts if isinstance(t, ast.Name)] == ["a", "b"]
        ):
            assert isinstance(node.value, ast.Tuple), ast.unparse(node)
            a, b = (tuple(ast.literal_eval(arg) for arg in c.args) for c in node.value.elts)  # type: ignore[attr-defined]
            for call in node.value.elts:  # torch.randn(...) with no dtype: float32
                assert ast.unparse(call).startswith("torch.randn("), ast.unparse(call)
                assert not call.keywords, ast.unparse(call)  # type: ignore[attr-defined]
            (m, k), (k2, n) = a, b
            assert k == k2, (a, b)
            return m, n, k
    raise AssertionError("README's Quick look no longer assigns `a, b = torch.randn(...), ...`")


def _quick_look_dropped() -> list[str]:
    """The list the Quick look's comment shows ``dropped_experimental_backends`` to be."""
    line = next(x for x in QUICK_LOOK_CODE.splitlines() if "dropped_experimental_backends" in x)
    return list(ast.literal_eval(line.split("listed here:", 1)[1].strip()))


EXPORT = re.compile(r"\$ export (\w+)=(\S+)$")
"""A console block's ``$ export NAME=VALUE`` line, before its command."""


def _console_blocks(text: str, fence: str) -> list[tuple[dict[str, str], list[str]]]:
    """The ``$ flashinfer explain ...`` blocks of a page: (the variables the block exports
    before the command, [command, output lines...])."""
    found = []
    for block in re.findall(fence, text, flags=re.S):
        lines = [line for line in block.splitlines() if line.strip()]
        if not lines:
            continue
        indent = len(lines[0]) - len(lines[0].lstrip())
        lines = [line[indent:] for line in lines]
        exports: dict[str, str] = {}
        while lines and (export := EXPORT.match(lines[0])):
            exports[export[1]] = export[2]
            lines = lines[1:]
        if lines and lines[0].startswith("$ flashinfer explain"):
            found.append((exports, lines))
    return found


_RUNS: dict[tuple[str, tuple[tuple[str, str], ...]], subprocess.CompletedProcess[str]] = {}


def _run(command: str, exports: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``command`` (``flashinfer ...``) as a user runs it: a fresh process, the gate off,
    no restriction of ``"auto"``, ``TRITON_INTERPRET`` only if ``exports`` sets it.

    Run once per command and exports: a fresh process given the same ones prints the same."""
    key = (command, tuple(sorted(exports.items())))
    if key not in _RUNS:
        _RUNS[key] = _run_fresh(command, exports)
    return _RUNS[key]


def _run_fresh(command: str, exports: dict[str, str]) -> subprocess.CompletedProcess[str]:
    argv = shlex.split(command)
    assert argv[0] == "flashinfer", command
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("FLASHINFER_") and k != "TRITON_INTERPRET"
    }
    env.update(exports)
    return subprocess.run(
        [sys.executable, "-m", "flashinfer", *argv[1:]],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


README_BLOCK = r"```console\n(.*?)```"
DOCS_BLOCK = r"code-block:: console\n\n(.*?)(?:\n\S|\Z)"
INTERPRETED = {"TRITON_INTERPRET": "1"}
"""What the docs' blocks export: on CPU, Triton's kernels run only through its interpreter."""


# ---- every text names the same problem -------------------------------------------------


def test_the_example_is_the_quick_look_problem():
    m, n, k = _quick_look_problem()
    assert EXAMPLE == f"flashinfer explain mm --shapes {m}x{n}x{k}"  # MxNxK; float32: no --dtype


def test_the_help_readme_docs_and_module_docstring_show_the_example():
    explain = next(
        a.choices["explain"] for a in build_parser()._actions if getattr(a, "choices", None)
    )
    assert EXAMPLE in (explain.epilog or "")
    shapes = EXAMPLE.split("--shapes ", 1)[1]
    [shapes_help] = [a.help for a in explain._actions if "--shapes" in a.option_strings]
    assert f"e.g. {shapes} for mm" in (shapes_help or "")
    readme_blocks = _console_blocks(QUICK_LOOK, README_BLOCK)
    docs_blocks = _console_blocks(BACKEND_CONTROL, DOCS_BLOCK)
    # The printed table is the interpreter's: each block says so, in the line a user copies.
    assert [(env, b[0]) for env, b in readme_blocks] == [(INTERPRETED, f"$ {EXAMPLE}")]
    assert [(env, b[0]) for env, b in docs_blocks] == [(INTERPRETED, f"$ {EXAMPLE}")]
    import flashinfer.cli as cli

    assert f"flashinfer explain mm --shapes {shapes} " in (cli.__doc__ or "")


# ---- the example says what the Quick look says ----------------------------------------


@pytest.fixture(scope="module")
def example_output() -> str:
    proc = _run(EXAMPLE, INTERPRETED)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_the_example_shows_the_experimental_backend_viable_and_left_out_by_the_gate(
    example_output,
):
    m, n, k = _quick_look_problem()
    a, b = torch.randn(m, k), torch.randn(k, n)
    with pytest.MonkeyPatch.context() as mp:
        for name in list(os.environ):
            if name.startswith("FLASHINFER_"):
                mp.delenv(name)
        flashinfer.mm(a, b)
        dropped = list(flashinfer.mm.dropped_experimental_backends)
    # What the Quick look says: the experimental backends that fit are left out of "auto".
    assert dropped == _quick_look_dropped() and dropped, dropped
    assert example_output.startswith(
        f"flashinfer.mm(a=float32[{m}, {k}] on cpu, b=float32[{k}, {n}]"
    )
    gated = re.findall(r"^ *(\w+) +experimental +yes +left out \(gate\) ", example_output, re.M)
    assert gated == dropped, example_output
    choice = re.search(r"^candidates: (.*)\nchoice: '(\w+)' \(heuristic\)$", example_output, re.M)
    assert choice is not None, example_output
    assert not set(dropped) & set(ast.literal_eval(choice[1]))
    assert choice[2] in flashinfer.mm.stable_backends


def test_the_op_option_spelling_of_the_example_prints_the_same(example_output, monkeypatch, capsys):
    # In this process (TRITON_INTERPRET=1, as the example's run, and the gate off); the
    # example itself runs as a user runs it, above.  Only the verdict cache's counts are this
    # process's own (other tests filled it): the rest is the same, line for line.
    for name in list(os.environ):
        if name.startswith("FLASHINFER_"):
            monkeypatch.delenv(name)
    assert os.environ["TRITON_INTERPRET"] == INTERPRETED["TRITON_INTERPRET"]
    assert main(shlex.split(EXAMPLE.replace(" mm ", " --op mm "))[1:]) == 0
    counts = re.compile(
        r"^(verdict cache: )\d+( of \d+ call signatures \(stored )\d+(, evicted )\d+\)$", re.M
    )
    out = capsys.readouterr().out
    assert counts.search(example_output), example_output
    assert counts.sub(r"\1N\2N\3N)", out) == counts.sub(r"\1N\2N\3N)", example_output)


PAGES = pytest.mark.parametrize(
    "page, fence",
    [(QUICK_LOOK, README_BLOCK), (BACKEND_CONTROL, DOCS_BLOCK)],
    ids=["README", "backend_control.rst"],
)


@PAGES
def test_the_output_the_docs_print_is_what_the_example_prints(page, fence):
    [(exports, block)] = _console_blocks(page, fence)
    proc = _run(EXAMPLE, exports)
    assert proc.returncode == 0, proc.stderr
    # Every line, the last ones too (the verdict cache's count): what the reader sees.
    assert block[1:] == proc.stdout.splitlines()


@pytest.fixture(scope="module")
def uninterpreted_output() -> str:
    proc = _run(EXAMPLE, {})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@PAGES
def test_what_the_docs_say_the_example_prints_without_the_interpreter_holds(
    uninterpreted_output, page, fence
):
    # "Without the variable, the two Triton rows read `no  left out (checker)`, with the
    # reason `on CPU, needs TRITON_INTERPRET=1`, and the candidates are `['torch']`."
    text = " ".join(page.split())
    said = re.search(
        r"[Ww]ithout (?:it|the variable), the two Triton rows read `+(no +left out \(checker\))`+,"
        r" with the reason `+([^`]+)`+, and the candidates are `+([^`]+)`+",
        text,
    )
    assert said is not None, "the page no longer says what the example prints without it"
    verdict, reason, candidates = said.groups()
    triton = [n for n, fn in flashinfer.mm.backend_checks.items() if family_of(fn) is TRITON]
    assert len(triton) == 2, triton
    rows = {
        m[1]: m[2]
        for m in re.finditer(
            r"^  (\w+) +(?:stable|experimental) +(.*)$", uninterpreted_output, re.M
        )
    }
    for name in triton:
        assert re.sub(r" +", " ", rows[name]).startswith(verdict.replace("  ", " ")), rows[name]
        assert reason in rows[name], rows[name]
    assert f"\ncandidates: {candidates}\n" in uninterpreted_output, uninterpreted_output
