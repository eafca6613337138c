"""Sphinx directives that render reference pages from the code, so that they cannot drift.

``.. flashinfer-environment::`` renders :data:`flashinfer.settings.ENVIRONMENT` (every
environment variable the package reads); ``.. flashinfer-cli::`` renders the ``flashinfer``
command's parser (``flashinfer.cli.build_parser``): every sub-command, argument and option;
``.. flashinfer-report-schema::`` renders the schema of ``flashinfer backends --json``
(:data:`flashinfer.cli.report_schema.FIELDS`); ``.. flashinfer-generated-dispatchers::``
includes every file of ``docs/generated/dispatchers/`` (each op's generated code, written by
``scripts/docs/write_dispatchers.py``).  The text comes from :func:`environment_rst`,
:func:`cli_rst`, :func:`report_schema_rst` and :func:`generated_dispatchers_rst`, which the
tests also call.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from docutils import nodes
from docutils.parsers.rst import Directive
from docutils.statemachine import StringList
from sphinx.util.nodes import nested_parse_with_titles


def _literal(text: str) -> str:
    return f"``{text}``"


_QUOTED = re.compile(r"(?<![A-Za-z])'([^'\s]+)'")
_OPTION = re.compile(r"(?<![\w`-])(--[a-z][a-z-]*)")
_BACKTICKED = re.compile(r"(?<!`)`([^`]+)`(?!`)")


def _text(plain: str) -> str:
    """Plain text (the table's, argparse's) as reST: quoted values and options as literals
    (else reST's smart quotes would turn ``--force`` into a dash)."""
    plain = _BACKTICKED.sub(r"``\1``", plain)
    return _OPTION.sub(r"``\1``", _QUOTED.sub(r"``\1``", plain))


def environment_rst() -> list[str]:
    """One section per variable: its summary, then a field list of the table's columns."""
    from flashinfer.settings import ENVIRONMENT

    lines: list[str] = []
    for row in ENVIRONMENT:
        lines += [row.name, "-" * len(row.name), "", _text(row.summary), ""]
        fields = [
            ("Values", _text(row.values)),
            ("Default", _text(row.default)),
            ("Read", _text(row.read_when)),
            ("A bad value", _text(row.bad_value)),
            ("Read by", ", ".join(_literal(m) for m in row.read_by)),
        ]
        if row.topic:
            fields.append(("More", f":doc:`{row.topic}`"))
        lines += [f":{name}: {text}" for name, text in fields]
        lines.append("")
    return lines


def _option_line(action: argparse.Action) -> str:
    if action.option_strings:
        names = ", ".join(action.option_strings)
        if action.nargs == 0:
            return _literal(names)
        metavar = action.metavar or action.dest.upper()
        return _literal(f"{names} {metavar}")
    return _literal(action.metavar or action.dest)


def _arguments(parser: argparse.ArgumentParser) -> list[str]:
    lines: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) or action.dest == "help":
            continue
        text = (action.help or "").replace("%(prog)s", parser.prog).strip()
        if text and text[-1] not in ".:;!?":
            text += "."
        if action.choices:
            text += " Choices: " + ", ".join(_literal(str(c)) for c in action.choices) + "."
        shown = action.default not in (None, False, argparse.SUPPRESS)
        if shown and action.option_strings and "default" not in text.lower():
            text += f" Default: {_literal(str(action.default))}."
        lines += [f"* {_option_line(action)}: {_text(text.strip())}"]
    return lines


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def cli_rst() -> list[str]:
    """The command's usage and options, then one section per sub-command."""
    from flashinfer.cli import build_parser

    parser = build_parser()
    lines = ["Usage::", "", "    " + parser.format_usage().strip(), ""]
    lines += _arguments(parser) + [""]
    for name, sub in _subcommands(parser).items():
        title = f"flashinfer {name}"
        lines += [title, "-" * len(title), "", _text((sub.description or "").strip()), ""]
        lines += ["Usage::", ""]
        lines += ["    " + line for line in sub.format_usage().strip().splitlines()]
        lines += [""] + _arguments(sub) + [""]
        if sub.epilog:
            lines += ["::", ""] + ["    " + line for line in sub.epilog.splitlines()] + [""]
    return lines


def report_schema_rst() -> list[str]:
    """The fields of ``flashinfer backends --json``, as a table."""
    from flashinfer.cli.report_schema import schema_rst

    return schema_rst()


GENERATED_DISPATCHERS = Path(__file__).resolve().parents[1] / "generated" / "dispatchers"


def generated_dispatchers_rst() -> list[str]:
    """One section per op's file of generated code, the file included as it is."""
    lines: list[str] = []
    for path in sorted(GENERATED_DISPATCHERS.glob("*.py")):
        title = f"flashinfer.{path.stem}"
        shown = f"docs/generated/dispatchers/{path.name}"
        lines += [title, "-" * len(title), "", f"``{shown}``:", ""]
        lines += [f".. literalinclude:: /generated/dispatchers/{path.name}"]
        lines += ["   :language: python", ""]
    return lines


def operators_rst() -> list[str]:
    """One section per stable op of the one list of ops (``flashinfer.api_modules.OPS``), in
    its order: the op's reference is its docstring.  Experimental APIs are left out until
    they graduate (policy rule 7), so a new stable op needs no edit of the page."""
    import importlib

    from flashinfer.api_modules import OPS

    lines: list[str] = []
    for name, module in OPS.items():
        api = getattr(importlib.import_module(module), name)
        if getattr(api, "experimental_info", None) is not None:
            continue
        title = f"flashinfer.{name}"
        lines += [title, "-" * len(title), "", f".. autofunction:: flashinfer.{name}", ""]
    return lines


class _Rendered(Directive):
    has_content = False
    render: Any = None

    def run(self) -> list[Any]:
        text = StringList(type(self).render(), source="flashinfer_reference")
        container = nodes.section()
        container.document = self.state.document
        nested_parse_with_titles(self.state, text, container)
        return list(container.children)


class EnvironmentDirective(_Rendered):
    render = staticmethod(environment_rst)


class CliDirective(_Rendered):
    render = staticmethod(cli_rst)


class ReportSchemaDirective(_Rendered):
    render = staticmethod(report_schema_rst)


class OperatorsDirective(_Rendered):
    render = staticmethod(operators_rst)


class GeneratedDispatchersDirective(_Rendered):
    render = staticmethod(generated_dispatchers_rst)

    def run(self) -> list[Any]:
        # The folder's mtime changes when a file comes or goes: re-read the page then.
        self.state.document.settings.env.note_dependency(str(GENERATED_DISPATCHERS))
        return super().run()


def setup(app: Any) -> dict[str, Any]:
    app.add_directive("flashinfer-environment", EnvironmentDirective)
    app.add_directive("flashinfer-cli", CliDirective)
    app.add_directive("flashinfer-report-schema", ReportSchemaDirective)
    app.add_directive("flashinfer-generated-dispatchers", GeneratedDispatchersDirective)
    app.add_directive("flashinfer-operators", OperatorsDirective)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
