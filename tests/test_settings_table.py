"""The one table of environment variables (``flashinfer.settings``) and the two reference pages
rendered from the code (``docs/configuration.rst``, ``docs/cli.rst``): the table lists every
variable the package reads, statically and at run time, and the pages list every row, every
sub-command and every option."""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from flashinfer.settings import ENVIRONMENT, environment_variable

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "flashinfer"
sys.path.insert(0, str(ROOT / "docs" / "_ext"))
import flashinfer_reference  # noqa: E402  (docs/_ext: the directives' renderers)

#: What names an environment variable of ours, or of Triton's that we read.
VARIABLE = re.compile(r"(?:FLASHINFER|TRITON)_[A-Z0-9_]+")
LISTED = {row.name for row in ENVIRONMENT}


def named_variables(source: str) -> set[str]:
    """The variable names a module's code spells out: string constants that are exactly such
    a name, leaving out docstrings and ``__all__`` (which lists Python names)."""
    tree = ast.parse(source)
    skipped: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            skipped.add(id(body[0].value))  # a docstring (or a bare string statement)
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            skipped.update(id(n) for n in ast.walk(node.value))
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in skipped
        and VARIABLE.fullmatch(node.value)
    }


def _modules() -> dict[str, str]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path.read_text(encoding="utf-8")
    return found


def test_the_scan_finds_a_read_and_ignores_docstrings_and_all():
    source = textwrap.dedent(
        '''
        """Mentions FLASHINFER_IN_DOCSTRING."""
        import os
        __all__ = ["FLASHINFER_PYTHON_NAME"]
        X = os.environ.get("FLASHINFER_SOMETHING_NEW")
        Y = "text naming FLASHINFER_IN_A_SENTENCE"
        def f():
            """FLASHINFER_IN_FUNCTION_DOC"""
            return os.getenv("TRITON_OTHER")
        '''
    )
    assert named_variables(source) == {"FLASHINFER_SOMETHING_NEW", "TRITON_OTHER"}


def test_every_variable_the_code_names_is_in_the_table():
    missing = {
        f"{module}: {name}"
        for module, source in _modules().items()
        if module != "flashinfer.settings.environment"
        for name in named_variables(source) - LISTED
    }
    assert not missing, f"add these to flashinfer/settings/environment.py: {sorted(missing)}"


def environment_reads(source: str) -> list[int]:
    """Lines where a module reads the environment itself (``os.environ[...]``, ``.get``,
    ``in``, iteration, ``os.getenv``, ``from os import environ``).  Copying the whole of it
    for a child process (``dict(os.environ, ...)``, ``os.environ.items()``/``.copy()``) is
    not a read of a variable."""
    tree = ast.parse(source)
    copies: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "dict" and node.args:
            copies.add(id(node.args[0]))
        if isinstance(node, ast.Attribute) and node.attr in ("items", "copy"):
            copies.add(id(node.value))
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "os":
            if any(a.name in ("environ", "environb", "getenv") for a in node.names):
                lines.append(node.lineno)
        spelled = ast.unparse(node) if isinstance(node, ast.Attribute) else ""
        if spelled in ("os.environ", "os.environb", "os.getenv") and id(node) not in copies:
            lines.append(node.lineno)
    return sorted(lines)


def test_the_read_finder_finds_reads_and_leaves_copies():
    source = textwrap.dedent(
        """
        import os
        from os import getenv
        a = os.environ.get("FLASHINFER_X")
        b = os.environ["TRITON_Y"]
        c = "FLASHINFER_Z" in os.environ
        d = [k for k in os.environ]
        env = dict(os.environ, TRITON_INTERPRET="1")
        env2 = {k: v for k, v in os.environ.items()}
        """
    )
    assert environment_reads(source) == [3, 4, 5, 6, 7]


def test_only_the_reader_reads_the_environment():
    """Each variable is read one way: ``flashinfer.settings.read`` (or ``raw``) applies its
    row.  A module that reads ``os.environ`` itself bypasses the row's parse rule, its
    warning and strict settings."""
    reading = {
        module
        for module, source in _modules().items()
        if module != "flashinfer.settings" and environment_reads(source)
    }
    assert reading == set(), "read through flashinfer.settings.read"


@pytest.mark.parametrize("row", ENVIRONMENT, ids=lambda r: r.name)
def test_each_row_is_read_where_it_says(row):
    modules = _modules()
    for module in row.read_by:
        assert module in modules, f"{row.name}: read_by names {module}, which does not exist"
    # The first module names the variable itself; the others may use its constant.
    assert row.name in named_variables(modules[row.read_by[0]]), row.read_by[0]
    for field in ("summary", "values", "default", "read_when", "bad_value"):
        assert getattr(row, field).strip(), f"{row.name}: empty {field}"
    if row.topic:
        assert (ROOT / "docs" / f"{row.topic}.rst").exists(), row.topic


def test_the_rows_are_unique_and_found_by_name():
    assert len(LISTED) == len(ENVIRONMENT)
    assert environment_variable("FLASHINFER_BACKENDS").name == "FLASHINFER_BACKENDS"
    with pytest.raises(KeyError, match="FLASHINFER_LOGLEVEL"):
        environment_variable("FLASHINFER_NOT_A_SETTING")


# What a session of a user reads: the ops on every path, explain, the CLI's reports, tuning.
_WORKLOAD = r"""
import json, os, sys

reads = set()


class Recording(type(os.environ)):
    def __getitem__(self, key):
        self._note(key)
        return super().__getitem__(key)

    def __contains__(self, key):
        self._note(key)
        return super().__contains__(key)

    def get(self, key, default=None):
        self._note(key)
        return super().get(key, default)

    def _note(self, key):
        frame = sys._getframe(2)
        while frame is not None and frame.f_globals.get("__name__", "").startswith("os"):
            frame = frame.f_back
        module = frame.f_globals.get("__name__", "") if frame is not None else ""
        if module == "flashinfer" or module.startswith("flashinfer."):
            reads.add((module, str(key)))


env = os.environ
os.environ = Recording(env._data, env.encodekey, env.decodekey, env.encodevalue, env.decodevalue)
os.getenv = lambda key, default=None: os.environ.get(key, default)

import io
import warnings

import torch

import flashinfer
from flashinfer.autotuner import autotune
from flashinfer.cli import main

warnings.simplefilter("ignore")
x, w = torch.randn(4, 64), torch.randn(64)
a, b = torch.randn(8, 32), torch.randn(32, 16)
for _ in range(2):
    flashinfer.rmsnorm(x, w)
    flashinfer.rmsnorm(x, w, backend="torch")
    flashinfer.mm(a, b)
    flashinfer.mm(a, b, backend="torch", skip_check=True)
    flashinfer.fused_add_rmsnorm(x.clone(), x.clone(), w)
flashinfer.mm.explain(a, b)
with flashinfer.use_backends(mm=["torch"]), autotune():
    flashinfer.mm(a, b)
out, err = io.StringIO(), io.StringIO()
sys.stdout, sys.stderr = out, err
commands = [["backends"], ["backends", "--json"], ["experimental"], ["nonsense"]]
for argv in [*commands, ["explain", "mm", "--shapes", "8x16x32"]]:
    main(argv)
sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
print(json.dumps(sorted(reads)))
"""


def test_every_variable_read_at_run_time_is_in_the_table():
    """A read the source scan cannot see (a name built at run time) is caught here: the
    workload runs with ``os.environ`` recording which of flashinfer's modules read which key."""
    # `flashinfer backends` reports every FLASHINFER_*/TRITON_* variable set: one the table
    # does not list (a developer's TRITON_CACHE_DIR) is left out of the workload's
    # environment, so that reporting it is not taken for a read.  A read of an unlisted name
    # is still recorded, set or not.
    env = {k: v for k, v in os.environ.items() if not VARIABLE.fullmatch(k) or k in LISTED}
    done = subprocess.run(
        [sys.executable, "-c", _WORKLOAD],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    reads = [tuple(pair) for pair in json.loads(done.stdout.strip().splitlines()[-1])]
    ours = {key for _, key in reads if VARIABLE.fullmatch(key)}
    assert ours, "the workload read none of the variables: the recorder is not working"
    unlisted = {(m, k) for m, k in reads if k not in LISTED}
    assert not unlisted, f"read but not in flashinfer/settings/environment.py: {unlisted}"
    bypassing = {(m, k) for m, k in reads if m not in {"flashinfer.settings"}}
    assert not bypassing, bypassing


# ---- the pages ------------------------------------------------------------------------


def test_the_configuration_page_shows_every_row():
    text = "\n".join(flashinfer_reference.environment_rst())
    for row in ENVIRONMENT:
        assert f"\n{row.name}\n{'-' * len(row.name)}\n" in f"\n{text}", row.name
    assert ".. flashinfer-environment::" in (ROOT / "docs" / "configuration.rst").read_text()


def _walk(parser: argparse.ArgumentParser, prefix: str = "") -> list[tuple[str, str]]:
    """Every (sub-command, option or argument) of the parser, independently of the renderer."""
    found: list[tuple[str, str]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.append((name, ""))
                found += _walk(sub, name)
        elif action.dest != "help":
            spelled = action.option_strings[-1] if action.option_strings else action.dest
            found.append((prefix, spelled))
    return found


def test_the_cli_page_shows_every_subcommand_and_option():
    from flashinfer.cli import build_parser

    text = "\n".join(flashinfer_reference.cli_rst())
    sections = re.split(r"\n(?=flashinfer \w+\n-+\n)", text)
    by_command = {s.split("\n", 1)[0].removeprefix("flashinfer "): s for s in sections[1:]}
    walked = _walk(build_parser())
    assert walked, "the parser walk found nothing"
    for command, option in walked:
        if option == "":
            assert command in by_command, f"no section for flashinfer {command}"
        else:
            where = by_command[command] if command else sections[0]
            assert f"``{option}" in where, f"{command or 'flashinfer'}: {option} not listed"
    assert ".. flashinfer-cli::" in (ROOT / "docs" / "cli.rst").read_text()


def test_the_renderer_turns_quoted_values_and_options_into_literals():
    assert flashinfer_reference._text("'1' or unset, --force; Python's") == (
        "``1`` or unset, ``--force``; Python's"
    )
    importlib.reload(flashinfer_reference)  # the module is importable on its own


# ---- the reader ------------------------------------------------------------------------


def test_the_reader_applies_the_row_and_follows_the_environment(monkeypatch):
    from flashinfer import settings

    name = "FLASHINFER_LOGLEVEL"
    monkeypatch.delenv(name, raising=False)
    assert settings.read(name) == 0 and settings.raw(name) is None
    for value, level in (("3", 3), (" 2", 2), ("", 0), ("3", 3)):  # each value, again
        monkeypatch.setenv(name, value)
        assert settings.read(name) == level and settings.reader(name)() == level
    monkeypatch.setenv(name, "debug")
    said: list[str] = []
    assert settings.read(name, report=said.append) == 0
    assert said == [settings.unrecognised_value(name, "debug", "treating it as 0 (no logging)",
                                                environment_variable(name).accepted)]  # fmt: skip
    # A grammar that lives with its reader, and its reason in the message.
    monkeypatch.setenv("FLASHINFER_BACKENDS", "mm")
    settings.forget_unrecognised_values()  # once per value: another test may have warned

    def refuse(text: str) -> object:
        raise ValueError(f"{text!r} has no '='")

    with pytest.warns(RuntimeWarning, match="'mm' has no '='; the whole value is ignored"):
        assert settings.read("FLASHINFER_BACKENDS", parse=refuse) == {}
    with pytest.raises(KeyError, match="FLASHINFER_LOGLEVEL"):
        settings.read("FLASHINFER_NOT_A_SETTING")


def test_the_reader_reads_a_replaced_environ(monkeypatch):
    """A mock of ``os.environ`` (not its bytes dict) is what the reader then reads."""
    from unittest import mock

    from flashinfer import settings

    with mock.patch.object(os, "environ", {"FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS": "1"}):
        assert settings.read("FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS") is True
        assert settings.reader("FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS")() is True
    monkeypatch.delenv("FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS", raising=False)
    assert settings.read("FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS") is False
