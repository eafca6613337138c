"""Every recipe docs/experimental.rst gives for ExperimentalWarning works, and the ones that
cannot work are shown not to.

Command-line and environment forms run in fresh interpreters (subprocesses, started
together to save time); ``FLASHINFER_EXPERIMENTAL_WARNINGS``'s rules are also checked
in-process, where the variable is read at each warning.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from flashinfer import ExperimentalWarning, flashinfer_experimental_api

VARIABLE = "FLASHINFER_EXPERIMENTAL_WARNINGS"
CATEGORY = "flashinfer.api_logging.ExperimentalWarning"

# A user's script: an experimental API and an explicitly named experimental backend, each
# used twice; it prints what happened to each use ("ran" or "refused").
APP = """
import json

import torch

from flashinfer import (
    ExperimentalWarning,
    backend_requirement,
    experimental_backend,
    flashinfer_experimental_api,
    supported_compute_capability,
)


@flashinfer_experimental_api
def preview(x):
    return x


@supported_compute_capability([80], cpu=True)
def stable_ok(x, backend="auto"):
    return True


@experimental_backend
@supported_compute_capability([80], cpu=True)
def risky_ok(x, backend="auto"):
    return True


@backend_requirement({"stable": stable_ok, "risky": risky_ok})
def op(x, backend="auto"):
    return backend


def attempt(call):
    try:
        call()
    except ExperimentalWarning:
        return "refused"
    return "ran"


uses = {
    "api": [attempt(lambda: preview(1)) for _ in range(2)],
    "backend": [attempt(lambda: op(torch.ones(2), backend="risky")) for _ in range(2)],
}
print(json.dumps(uses))
"""

RAN = {"api": ["ran", "ran"], "backend": ["ran", "ran"]}
REFUSED = {"api": ["refused", "refused"], "backend": ["refused", "refused"]}

# Test files for pytest's own recipes (pytest resolves the category late, after imports).
PYTEST_TESTS = """
import warnings

import pytest

from flashinfer import ExperimentalWarning, flashinfer_experimental_api


def fresh_api():
    @flashinfer_experimental_api
    def preview(x):
        return x

    return preview


def test_escalated():
    with pytest.raises(ExperimentalWarning):
        fresh_api()(1)


def test_escalated_again():
    with pytest.raises(ExperimentalWarning):
        fresh_api()(1)
"""

# A second test module, under a module-level mark that overrides any option.
PYTEST_MARKED = """
import pytest

from flashinfer import flashinfer_experimental_api

pytestmark = pytest.mark.filterwarnings("ignore::flashinfer.ExperimentalWarning")


def test_mark_ignores():
    @flashinfer_experimental_api
    def preview(x):
        return x

    preview(1)
"""

# Each scenario is a shell command run in a folder holding app.py and test_recipe.py.
SCENARIOS = {
    "PYTHONWARNINGS category": "PYTHONWARNINGS=error::flashinfer.ExperimentalWarning python app.py",
    # The category, and module fields naming flashinfer (which would escalate if they matched).
    "-W category": (
        f"python -W error::{CATEGORY} -W error::Warning:flashinfer "
        "-W error::UserWarning:flashinfer.api_logging app.py"
    ),
    "-W message": "python -W error:Experimental app.py",
    # A catch-all Python option (PYTHONWARNINGS=default, or -X dev's) does not undo the variable.
    "variable error": f"PYTHONWARNINGS=default {VARIABLE}=error python app.py",
    "variable ignore": f"PYTHONDEVMODE=1 {VARIABLE}=ignore python app.py",
    # pytest resolves the category in its own options late, after imports.
    "pytest ini": "python -m pytest -k escalated",
    "pytest -W": f"python -m pytest -W error::{CATEGORY}",
    "pytest variable": f"{VARIABLE}=error python -m pytest -k escalated",
}

# What docs/experimental.rst shows for the scenarios that work (each is part of its command).
DOCUMENTED = {
    "-W message": "python -W error:Experimental app.py",
    "variable error": f"{VARIABLE}=error python app.py",
    "variable ignore": f"{VARIABLE}=ignore python app.py",
    "pytest -W": f"pytest -W error::{CATEGORY}",
    "pytest variable": f"{VARIABLE}=error python -m pytest",
}
PYTEST_INI = f"filterwarnings =\n    error::{CATEGORY}"
PYTEST_MARK = 'pytestmark = pytest.mark.filterwarnings("ignore::flashinfer.ExperimentalWarning")'


def _prepare(folder: Path, name: str) -> None:
    folder.mkdir()
    (folder / "app.py").write_text(APP)
    (folder / "test_recipe.py").write_text(PYTEST_TESTS)
    (folder / "test_marked.py").write_text(PYTEST_MARKED)
    # This folder is pytest's rootdir: nothing of the repository's set-up applies.
    ini = "[pytest]\naddopts = -p no:cacheprovider\n"
    if name == "pytest ini":
        ini += PYTEST_INI + "\n"
    (folder / "pytest.ini").write_text(ini)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, subprocess.CompletedProcess]:
    base = tmp_path_factory.mktemp("recipes")
    # An installed package, as users have it: without PYTHONPATH, which would put the
    # package on sys.path before Python reads -W and PYTHONWARNINGS.
    gone = ("PYTHONWARNINGS", "PYTHONPATH", VARIABLE)
    env = {k: v for k, v in os.environ.items() if k not in gone}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])

    def run(name: str) -> subprocess.CompletedProcess:
        folder = base / name.replace(" ", "_")
        _prepare(folder, name)
        return subprocess.run(
            ["bash", "-c", SCENARIOS[name]],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(zip(SCENARIOS, pool.map(run, SCENARIOS), strict=True))


def _uses(proc: subprocess.CompletedProcess) -> dict[str, list[str]]:
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.parametrize(
    ("scenario", "module"),
    [("-W category", "flashinfer.api_logging"), ("PYTHONWARNINGS category", "flashinfer")],
)
def test_a_category_of_flashinfer_in_python_options_cannot_work(runs, scenario, module):
    """Python reads -W and PYTHONWARNINGS while it starts, before site-packages is on
    sys.path: naming this package's category there is rejected, and nothing changes."""
    proc = runs[scenario]
    assert f"Invalid -W option ignored: invalid module name: '{module}'" in proc.stderr
    assert _uses(proc) == RAN  # each use warned once, as with no option at all
    assert proc.stderr.count("ExperimentalWarning:") == 2, proc.stderr


def test_the_module_field_of_python_options_does_not_select_these_warnings(runs):
    """The module field is matched against the module a warning is attributed to: the
    caller's (here __main__), never flashinfer's, because the warnings point at the line
    that used the experimental code."""
    proc = runs["-W category"]
    assert proc.stderr.count("Invalid -W option") == 1  # the module fields are valid options
    assert _uses(proc) == RAN


def test_a_message_filter_on_the_command_line_refuses_every_use(runs):
    """Every ExperimentalWarning starts with "Experimental", which a -W message field
    matches (case-insensitively) without naming the category."""
    assert _uses(runs["-W message"]) == REFUSED


def test_the_variable_escalates_even_under_a_catch_all_python_option(runs):
    # PYTHONWARNINGS=default (as -X dev does) would otherwise decide first.
    assert _uses(runs["variable error"]) == REFUSED


def test_the_variable_silences_even_in_development_mode(runs):
    proc = runs["variable ignore"]
    assert _uses(proc) == RAN
    assert "ExperimentalWarning" not in proc.stderr


@pytest.mark.parametrize("scenario", ["pytest ini", "pytest -W", "pytest variable"])
def test_pytest_recipes_escalate_in_every_test(runs, scenario):
    """pytest's filterwarnings ini option, its -W option and its mark resolve the category
    after imports, so they work; the variable survives pytest's per-test warning state."""
    proc = runs[scenario]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    passed = 3 if scenario == "pytest -W" else 2  # -k escalated leaves the mark's test out
    assert f"{passed} passed" in proc.stdout, proc.stdout


# ---- FLASHINFER_EXPERIMENTAL_WARNINGS, in-process --------------------------------------


def _fresh_api():
    @flashinfer_experimental_api
    def preview(x):
        return x

    return preview


def _shown(record: list[warnings.WarningMessage]) -> list[type[Warning]]:
    return [w.category for w in record]


@pytest.mark.parametrize("code_filter", ["ignore", "always", "error"])
@pytest.mark.parametrize("action", ["error", "ignore", "default", "always", "module", "once"])
def test_the_variable_decides_over_any_code_filter(monkeypatch, code_filter, action):
    monkeypatch.setenv(VARIABLE, action)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter(code_filter)
        if action == "error":
            with pytest.raises(ExperimentalWarning):
                _fresh_api()(1)
        else:
            _fresh_api()(1)
    expected = [] if action in ("error", "ignore") else [ExperimentalWarning]
    assert _shown(record) == expected


def test_the_variable_is_applied_again_after_a_catch_warnings_block(monkeypatch):
    monkeypatch.setenv(VARIABLE, "error")
    first, second = _fresh_api(), _fresh_api()
    with warnings.catch_warnings():
        with pytest.raises(ExperimentalWarning):
            first(1)
    with warnings.catch_warnings():  # the filter list of the first block is gone
        warnings.simplefilter("ignore")
        with pytest.raises(ExperimentalWarning):
            second(1)


def test_the_variable_empty_is_unset(monkeypatch):
    monkeypatch.setenv(VARIABLE, "")
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("ignore", ExperimentalWarning)
        _fresh_api()(1)
    assert record == []


@pytest.mark.parametrize("value", ["Error", "ERROR", " error", "error ", "e", "all", "yes", "1"])
def test_a_bad_value_warns_once_naming_the_variable_and_is_ignored(monkeypatch, value):
    monkeypatch.setenv(VARIABLE, value)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        _fresh_api()(1)
        _fresh_api()(1)
    assert _shown(record) == [RuntimeWarning, ExperimentalWarning, ExperimentalWarning]
    message = str(record[0].message)
    assert f"{VARIABLE}={value!r} is not a recognised value; ignoring it" in message
    for action in ("'default'", "'error'", "'ignore'", "'always'", "'module'", "'once'"):
        assert action in message
    assert record[0].filename == __file__


def _recipes_section() -> str:
    text = (Path(__file__).resolve().parents[1] / "docs" / "experimental.rst").read_text()
    return text[text.index("Silencing or escalating") :]


def test_the_docs_show_the_recipes_that_work():
    section = _recipes_section()
    for name, shown in DOCUMENTED.items():
        assert shown in SCENARIOS[name] and shown in section, shown
    unindented = section.replace("\n   ", "\n")  # code blocks are indented by 3
    assert PYTEST_INI in unindented and PYTEST_MARK in section and PYTEST_MARK in PYTEST_MARKED


def test_the_docs_show_no_python_option_naming_the_category_as_a_recipe():
    """They may name it in prose, to say why it cannot work, never in a code block."""
    section = _recipes_section()
    blocks = section.split(".. code-block::")[1:]
    for block in blocks:
        body = [line for line in block.splitlines()[1:] if line.startswith("   ") or not line]
        code = "\n".join(body)
        for line in code.splitlines():
            if "python" in line and "pytest" not in line or "PYTHONWARNINGS" in line:
                assert "::flashinfer" not in line and ":flashinfer" not in line, line
    assert "site-packages" in section  # the reason is given
