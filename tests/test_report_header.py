"""``flashinfer backends``' header and what frames the report (issue 34, item 18): the header
names or counts every variable set (drawn subsets), a rejected ``FLASHINFER_BACKENDS`` is
flagged there, ``--json`` puts the APIs first, and the report ends with where to report a
bug, whose template asks for the report."""

from __future__ import annotations

import io
import os
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from flashinfer.cli.environment_report import environment_settings, settings_summary

ROOT = Path(__file__).resolve().parents[1]

# name -> a value (accepted or not: the header counts the variable either way)
POOL = {
    "FLASHINFER_BACKENDS": "rmsnorm=trition",  # rejected
    "FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS": "1",
    "FLASHINFER_LOGLEVEL": "2",
    "FLASHINFER_DISPATCH_LOG": "yes",  # rejected
    "FLASHINFER_AUTOTUNER_LOG": "1",
    "FLASHINFER_CLI_TRACEBACK": "0",
    "FLASHINFER_EXPERIMENTAL_WARNINGS": "once",
    "FLASHINFER_STRICT_SETTINGS": "0",
    "TRITON_INTERPRET": "0",
    "TRITON_CACHE_DIR": "/tmp/triton",  # Triton's own
    "FLASHINFER_BAKCENDS": "mm=torch",  # unknown: a typo
    "FLASHINFER_SOMETHING_ELSE_ENTIRELY": "1",  # unknown
}

_PART = re.compile(
    r"(?:(?P<names>[A-Z0-9_, ]+?)(?: and (?P<more>\d+) more)?|(?P<n>\d+) (?:variables?|more))"
    r" (?P<label>rejected|unknown \(a typo\?\)|set)"
)


def _counted(line: str) -> tuple[int, list[str]]:
    """How many variables the header's settings line names or counts, and those it names."""
    assert line.startswith("settings (see below): "), line
    total, named = 0, []
    for part in line.removeprefix("settings (see below): ").split("; "):
        match = _PART.fullmatch(part)
        assert match is not None, part
        if match["n"]:
            total += int(match["n"])
        else:
            names = match["names"].split(", ")
            named += names
            total += len(names) + int(match["more"] or 0)
    return total, named


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in list(os.environ):
        if name.startswith(("FLASHINFER_", "TRITON_")):
            monkeypatch.delenv(name)
    return monkeypatch


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(chosen=st.sets(st.sampled_from(sorted(POOL)), min_size=1), width=st.integers(40, 200))
@example(  # the issue's report: three set, the header counted two
    chosen={"FLASHINFER_BACKENDS", "FLASHINFER_LOGLEVEL", "TRITON_CACHE_DIR"}, width=100
)
def test_the_header_names_or_counts_every_variable_set(clean_env, chosen, width):
    with pytest.MonkeyPatch.context() as mp:
        for name in chosen:
            mp.setenv(name, POOL[name])
        line = settings_summary({"environment": environment_settings()}, width=width)
    assert line is not None
    total, named = _counted(line)
    assert total == len(chosen), line
    assert set(named) <= chosen and len(named) == len(set(named)), line


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(others=st.sets(st.sampled_from(sorted(set(POOL) - {"FLASHINFER_BACKENDS"}))))
def test_a_rejected_backends_value_is_flagged_by_name(clean_env, others):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FLASHINFER_BACKENDS", "rmsnorm=trition")
        for name in others:
            mp.setenv(name, POOL[name])
        line = settings_summary({"environment": environment_settings()})
    assert line is not None and len(line) <= 100
    assert line.startswith("settings (see below): FLASHINFER_BACKENDS"), line
    assert re.match(
        r"settings \(see below\): FLASHINFER_BACKENDS[ ,A-Z_]*(and \d+ more )?rejected", line
    )


def test_an_accepted_backends_value_is_not_flagged(clean_env):
    clean_env.setenv("FLASHINFER_BACKENDS", "rmsnorm=torch")
    line = settings_summary({"environment": environment_settings()})
    assert line == "settings (see below): FLASHINFER_BACKENDS set"


# -- --json: what a reader wants first ---------------------------------------------------

KEYS = {  # every key the report had before the reorder: outside checks read them
    "schema_version",
    "versions",
    "cuda",
    "devices",
    "compute_capability",
    "triton_interpret",
    "triton_interpret_at_import",
    "gate",
    "environment",
    "system",
    "install",
    "autotuner_file",
    "apis",
    "missing_modules",
}


def test_json_puts_the_apis_before_the_versions_and_keeps_every_key():
    from flashinfer.cli.backends import backends_report
    from flashinfer.cli.report_schema import FIELDS, schema_problems

    report = backends_report()
    keys = list(report)
    assert keys[:2] == ["schema_version", "apis"]
    assert keys.index("apis") < keys.index("versions")
    assert set(keys) == KEYS
    assert keys == [f.path for f in FIELDS if "." not in f.path and "[" not in f.path]
    assert schema_problems(report) == []


# -- where to report a bug ---------------------------------------------------------------


def test_the_report_ends_with_the_tracker_and_the_template_asks_for_the_report():
    import argparse

    from flashinfer.cli.backends import cmd_backends
    from flashinfer.cli.common import ISSUE_TEMPLATE, ISSUE_TRACKER

    out = io.StringIO()
    assert cmd_backends(argparse.Namespace(json=False), out, io.StringIO()) == 0
    lines = out.getvalue().rstrip("\n").splitlines()
    assert lines[-1].strip() == ISSUE_TRACKER
    assert lines[-2].startswith("report a bug")
    template = ROOT / ISSUE_TEMPLATE
    assert ISSUE_TRACKER.endswith(f"template={template.name}")
    text = template.read_text()
    assert text.startswith("---\nname: ")  # GitHub's front matter: offered on "New issue"
    assert "`flashinfer backends`" in text
