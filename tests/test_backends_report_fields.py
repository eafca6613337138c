"""``flashinfer backends``' details (issue 23): the settings in effect with their meaning, the
OS and CPU, the CUDA runtime and driver, how flashinfer was installed, the tuning file; the
first screen's layout; and ``--json`` held to its documented, versioned schema
(:mod:`flashinfer.cli.report_schema`, rendered into ``docs/report_schema.rst``)."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

import flashinfer.cli.environment_report as er
from flashinfer.cli import main
from flashinfer.cli.report_schema import FIELDS, SCHEMA_VERSION, schema_problems, schema_rst
from flashinfer.settings import ENVIRONMENT

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))
import flashinfer_reference  # noqa: E402  (docs/_ext: the directives' renderers)

GATE = "FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS"


def _clean_env(**extra: str) -> dict[str, str]:
    """This environment without any FLASHINFER_*/TRITON_* variable, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLASHINFER_", "TRITON_"))}
    env.update(extra)
    return env


def _report(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> dict:
    assert main(["backends", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


# --------------------------------------------------------------------------------------
# Settings
# --------------------------------------------------------------------------------------


def test_every_variable_of_the_table_has_an_interpreter():
    """A row added to flashinfer/settings/environment.py needs its meaning in the report."""
    assert set(er.INTERPRETERS) == {row.name for row in ENVIRONMENT}


@pytest.mark.parametrize(
    "name, raw, valid, parsed, words",
    [
        (GATE, "1", True, True, "on:"),
        (GATE, "0", True, False, "off:"),
        (GATE, "yes", False, False, "unrecognised value"),
        ("FLASHINFER_BACKENDS", "mm=torch", True, {"flashinfer.mm": ["torch"]}, "mm -> torch"),
        (
            "FLASHINFER_BACKENDS",
            "mm=triton,torch;rmsnorm=torch",
            True,
            {"flashinfer.mm": ["triton", "torch"], "flashinfer.rmsnorm": ["torch"]},
            "in that order",
        ),
        ("FLASHINFER_BACKENDS", "mm=nope", False, None, "ignored as a whole"),
        ("FLASHINFER_BACKENDS", "mm", False, None, "is not API=BACKEND"),
        ("FLASHINFER_BACKENDS", "  ", True, {}, "not restricted"),
        ("FLASHINFER_EXPERIMENTAL_WARNINGS", "error", True, "error", "'error'"),
        ("FLASHINFER_EXPERIMENTAL_WARNINGS", "loud", False, None, "accepted: 'default'"),
        ("FLASHINFER_LOGLEVEL", "3", True, 3, "with its arguments"),
        ("FLASHINFER_LOGLEVEL", "1", True, 1, "name is logged"),
        ("FLASHINFER_LOGLEVEL", "0", True, 0, "not logged"),
        ("FLASHINFER_LOGLEVEL", "lots", False, 0, "not an integer"),
        ("FLASHINFER_DISPATCH_LOG", "1", True, True, "stderr too"),
        ("FLASHINFER_DISPATCH_LOG", "2", False, False, "warns once"),
        ("FLASHINFER_AUTOTUNER_LOG", "yes", False, False, "counts as off"),
        ("FLASHINFER_CLI_TRACEBACK", "1", True, True, "traceback"),
        ("TRITON_INTERPRET", "True", True, True, "interpreter"),
        ("TRITON_INTERPRET", "0", True, False, "need CUDA tensors"),
        ("TRITON_INTERPRET", "maybe", False, False, "need CUDA tensors"),
    ],
)
def test_each_variable_is_read_as_the_package_reads_it(name, raw, valid, parsed, words):
    got_valid, got_parsed, meaning = er.INTERPRETERS[name](raw)
    assert (got_valid, got_parsed) == (valid, parsed), meaning
    assert words in meaning


def test_the_settings_list_every_set_variable_with_its_meaning(monkeypatch):
    for name in [n for n in os.environ if n.startswith(("FLASHINFER_", "TRITON_"))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("FLASHINFER_LOGLEVEL", "3")
    monkeypatch.setenv("FLASHINFER_BAKCENDS", "mm=torch")  # a typo
    monkeypatch.setenv("FLASHINFER_ZZZZZZZZZZZZZZZZZZZZ", "1")  # close to nothing
    monkeypatch.setenv("TRITON_CACHE_DIR", "/tmp/triton")
    rows = {r["name"]: r for r in er.environment_settings()}
    assert list(rows) == sorted(rows)
    assert rows["FLASHINFER_LOGLEVEL"]["read_by"] == "flashinfer"
    assert rows["FLASHINFER_LOGLEVEL"]["parsed"] == 3 and rows["FLASHINFER_LOGLEVEL"]["valid"]
    typo = rows["FLASHINFER_BAKCENDS"]
    assert typo["read_by"] == "unknown" and typo["suggestion"] == "FLASHINFER_BACKENDS"
    assert "likely a typo of FLASHINFER_BACKENDS" in typo["meaning"]
    far = rows["FLASHINFER_ZZZZZZZZZZZZZZZZZZZZ"]
    assert far["suggestion"] is None and "no known name is close" in far["meaning"]
    assert rows["TRITON_CACHE_DIR"]["read_by"] == "triton"
    assert rows["TRITON_CACHE_DIR"]["value"] == "/tmp/triton"
    # TRITON_INTERPRET decides every Triton row: listed even when unset.
    interpret = rows["TRITON_INTERPRET"]
    assert interpret["value"] is None and interpret["meaning"].startswith("unset")
    # Other variables are not listed at all.
    assert not [n for n in rows if not n.startswith(("FLASHINFER_", "TRITON_"))]


def test_flashinfer_backends_shows_on_the_first_screen_and_below():
    """FLASHINFER_BACKENDS restricts 'auto' for the whole process: the header names it, the
    details say what it restricts, and --json carries it parsed.  A subprocess: the variable
    is read once per process."""
    code = (
        "import io, sys; from flashinfer.cli import main\n"
        "for argv in (['backends'], ['backends', '--json']):\n"
        "    assert main(argv) == 0\n"
        "    print('=====')\n"
    )
    env = _clean_env(FLASHINFER_BACKENDS="mm=torch", FLASHINFER_BAKCENDS="x", TRITON_INTERPRET="1")
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env
    )
    assert proc.returncode == 0, proc.stderr
    text, doc, _ = proc.stdout.split("=====\n")
    lines = text.splitlines()
    table = next(i for i, line in enumerate(lines) if line.startswith("API "))
    header = lines[: table - 1]
    assert len(header) <= 3 and lines[table - 1] == "", header
    assert any("FLASHINFER_BACKENDS" in line for line in header), header
    assert any("FLASHINFER_BAKCENDS unknown (a typo?)" in line for line in header), header
    details = "\n".join(lines[table:])
    assert "FLASHINFER_BACKENDS='mm=torch': backend='auto' restricted" in details
    assert "flashinfer.mm\n      -> torch" in details or "flashinfer.mm -> torch" in details
    assert "likely a typo of\n" in details or "likely a typo of FLASHINFER_BACKENDS" in details
    assert all(len(line) <= 100 for line in lines), max(lines, key=len)
    parsed = json.loads(doc)
    assert schema_problems(parsed) == []
    rows = {r["name"]: r for r in parsed["environment"]}
    assert rows["FLASHINFER_BACKENDS"]["parsed"] == {"flashinfer.mm": ["torch"]}
    assert rows["FLASHINFER_BAKCENDS"]["suggestion"] == "FLASHINFER_BACKENDS"


# --------------------------------------------------------------------------------------
# System, CUDA
# --------------------------------------------------------------------------------------


def test_the_system_is_reported(monkeypatch, capsys):
    system = _report(monkeypatch, capsys)["system"]
    assert system["machine"] == platform.machine()
    assert system["system"] == platform.system()
    assert system["cpu_count"] == os.cpu_count()
    if hasattr(os, "sched_getaffinity"):
        assert system["cpus_usable"] == len(os.sched_getaffinity(0))
    if Path("/proc/cpuinfo").exists() and "model name" in Path("/proc/cpuinfo").read_text():
        assert system["cpu_model"]


def test_cpu_model_falls_back_when_proc_is_absent(monkeypatch):
    def no_file(*args, **kwargs):
        raise OSError("no /proc here")

    monkeypatch.setattr("builtins.open", no_file)
    monkeypatch.setattr(platform, "processor", lambda: "Some CPU")
    assert er._cpu_model() == "Some CPU"
    monkeypatch.setattr(platform, "processor", lambda: "")
    assert er._cpu_model() is None


def test_cuda_is_absent_on_a_machine_without_it(monkeypatch, capsys):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the present case is tested below")
    doc = _report(monkeypatch, capsys)
    assert doc["cuda"] == {"runtime": torch.version.cuda, "driver": None}
    assert main(["backends"]) == 0
    out = capsys.readouterr().out
    assert "CUDA driver       none found" in out


def test_cuda_runtime_and_driver_when_present(monkeypatch):
    monkeypatch.setattr(torch.version, "cuda", "12.4")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch._C, "_cuda_getDriverVersion", lambda: 12080, raising=False)
    assert er.cuda_info() == {"runtime": "12.4", "driver": "12.8"}
    # A driver that cannot be asked leaves the runtime.
    monkeypatch.setattr(torch._C, "_cuda_getDriverVersion", lambda: 0, raising=False)
    assert er.cuda_info() == {"runtime": "12.4", "driver": None}

    def broken() -> int:
        raise RuntimeError("no driver")

    monkeypatch.setattr(torch._C, "_cuda_getDriverVersion", broken, raising=False)
    assert er.cuda_info()["driver"] is None


# --------------------------------------------------------------------------------------
# Install
# --------------------------------------------------------------------------------------

SHA = "0123456789abcdef0123456789abcdef01234567"


def _repo(tmp_path: Path, head: str) -> Path:
    git = tmp_path / ".git"
    (git / "refs" / "heads").mkdir(parents=True)
    (git / "HEAD").write_text(head + "\n")
    return tmp_path


def test_git_commit_from_a_loose_ref(tmp_path):
    tree = _repo(tmp_path, "ref: refs/heads/main")
    (tree / ".git" / "refs" / "heads" / "main").write_text(SHA + "\n")
    assert er.git_commit(tree) == (SHA, "main")


def test_git_commit_from_packed_refs(tmp_path):
    tree = _repo(tmp_path, "ref: refs/heads/feature/x")
    (tree / ".git" / "packed-refs").write_text(
        "# pack-refs with: peeled fully-peeled sorted\n"
        f"{'f' * 40} refs/heads/other\n{SHA} refs/heads/feature/x\n"
    )
    assert er.git_commit(tree) == (SHA, "feature/x")


def test_git_commit_of_a_detached_head_an_unborn_branch_and_no_repo(tmp_path):
    assert er.git_commit(_repo(tmp_path / "detached", SHA)) == (SHA, None)
    assert er.git_commit(_repo(tmp_path / "unborn", "ref: refs/heads/main")) == (None, "main")
    assert er.git_commit(_repo(tmp_path / "garbage", "not a head")) == (None, None)
    (tmp_path / "plain").mkdir()
    assert er.git_commit(tmp_path / "plain") == (None, None)
    assert er.git_commit(tmp_path / "does-not-exist") == (None, None)


def test_git_commit_of_a_worktree(tmp_path):
    main_git = tmp_path / "main" / ".git"
    (main_git / "refs" / "heads").mkdir(parents=True)
    (main_git / "refs" / "heads" / "topic").write_text(SHA)
    wt_git = main_git / "worktrees" / "wt"
    wt_git.mkdir(parents=True)
    (wt_git / "HEAD").write_text("ref: refs/heads/topic\n")
    (wt_git / "commondir").write_text("../..\n")
    tree = tmp_path / "wt"
    tree.mkdir()
    (tree / ".git").write_text(f"gitdir: {wt_git}\n")
    assert er.git_commit(tree) == (SHA, "topic")


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_git_commit_agrees_with_git_on_this_checkout():
    done = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=30
    )
    if done.returncode != 0:
        pytest.skip("this tree is not a git checkout")
    assert er.git_commit(ROOT)[0] == done.stdout.strip()


@pytest.mark.parametrize(
    "direct, version, kind",
    [
        ({"url": "file:///src/fi", "dir_info": {"editable": True}}, "0.1.0", "editable"),
        ({"url": "file:///src/fi", "dir_info": {}}, "0.1.0", "local directory"),
        (
            {"url": "https://x/fi.git", "vcs_info": {"vcs": "git", "commit_id": SHA}},
            "0.1.0",
            "vcs",
        ),
        ({"url": "https://x/fi-0.1.0.tar.gz", "archive_info": {}}, "0.1.0", "archive"),
        (None, "0.1.0", "wheel"),
        (None, None, "not installed"),
    ],
)
def test_install_kind_from_direct_url(monkeypatch, tmp_path, direct, version, kind):
    monkeypatch.setattr(er, "_direct_url", lambda: direct)
    monkeypatch.setattr(er, "installed_version", lambda: version)
    monkeypatch.setattr(er, "git_commit", lambda tree: (SHA, "main"))
    info = er.install_info()
    assert info["kind"] == kind and info["version"] == version
    assert info["path"] == str(Path(er.__file__).resolve().parents[1])
    if kind == "editable":
        assert info["source_path"] == "/src/fi" and info["git_commit"] == SHA
        assert "not from the editable checkout" in info["note"]  # imported from elsewhere
        # The checkout this package is imported from: no note.  (Other folders, wherever the
        # checkout lies: test_the_editable_note_holds_wherever_the_checkout_is.)
        here = Path(er.__file__).resolve().parents[2]
        monkeypatch.setattr(er, "_direct_url", lambda: {**direct, "url": here.as_uri()})
        assert er.install_info()["note"] is None
    elif kind == "vcs":
        assert info["git_commit"] == SHA and info["git_branch"] is None
    elif kind == "not installed":
        assert info["source_path"] == str(Path(info["path"]).parent)
    elif kind in ("wheel", "local directory", "archive"):
        assert info["git_commit"] is None
    assert er._install_line(info)  # each kind has its line


# A folder name: any text a POSIX file name can hold (no "/", no NUL, not "." or "..").
FOLDER_NAMES = st.text(
    st.characters(exclude_characters="/\0", exclude_categories=("Cs",)), min_size=1, max_size=12
).filter(lambda name: name not in (".", ".."))


@settings(max_examples=60, deadline=None)
@given(parent=FOLDER_NAMES, name=FOLDER_NAMES)
@example(parent="src", name="p")  # issue 34: a one-character checkout name
@example(parent="my work", name="flash infer")
@example(parent="ü ñ", name="日本")
@example(parent="x", name="100% #1?")
@example(parent="link", name="b")  # the symlink's own name: it lives in a folder of its own
@example(parent="x", name=".y")  # one character shorter is ".": no folder of that name
@example(parent="x", name="..y")  # ... or "..", the parent
def test_the_editable_note_holds_wherever_the_checkout_is(parent, name):
    """The editable note ("imported from ..., not from the editable checkout") is absent for
    the checkout the package is imported from, whatever its path, also through a symlink on
    either side; present for a folder whose path merely starts like it, or extends it."""
    with (
        tempfile.TemporaryDirectory() as tmp,
        tempfile.TemporaryDirectory() as links,
        pytest.MonkeyPatch.context() as mp,
    ):
        checkout = Path(tmp, parent, name)
        module = checkout / "flashinfer" / "cli" / "environment_report.py"
        module.parent.mkdir(parents=True)
        module.touch()
        link = Path(links, "link")
        link.symlink_to(checkout, target_is_directory=True)
        mp.setattr(er, "installed_version", lambda: "0.1.0")
        mp.setattr(er, "git_commit", lambda tree: (SHA, "main"))

        def note(source: Path, imported: Path = module) -> str | None:
            url = {"url": source.as_uri(), "dir_info": {"editable": True}}
            mp.setattr(er, "_direct_url", lambda: url)
            mp.setattr(er, "__file__", str(imported))
            info = er.install_info()
            assert info["source_path"] == str(source)  # the URL's path, read back whole
            return info["note"]

        assert note(checkout) is None
        assert note(link) is None  # the editable install names the checkout through a link
        assert note(checkout, link / "flashinfer" / "cli" / "environment_report.py") is None
        others = [checkout.with_name(name + "0")]  # a longer name: another folder
        if name[:-1] not in ("", ".", ".."):
            others.append(checkout.with_name(name[:-1]))  # a shorter one
        for other in others:
            other.mkdir()
            assert note(other) is not None, other


def test_this_install_is_reported(monkeypatch, capsys):
    info = _report(monkeypatch, capsys)["install"]
    assert info["distribution"] == "flashinfer-gating"
    assert info["kind"] in {"editable", "local directory", "archive", "vcs", "wheel"}
    assert Path(info["path"], "__init__.py").exists()
    if info["kind"] == "editable":
        assert Path(info["source_path"]).is_dir()


# --------------------------------------------------------------------------------------
# Tuning file, layout, schema
# --------------------------------------------------------------------------------------


def test_no_setting_names_a_tuning_file(monkeypatch, capsys):
    """No variable of the table names a tuning file, so the field is null and the text says
    why (a new variable that names one would show up in this test's first assertion)."""
    names_a_file = [
        row.name
        for row in ENVIRONMENT
        if "CACHE" in row.name or row.name.endswith(("_FILE", "_PATH", "_DIR"))
    ]
    assert not names_a_file, "report the tuning file it names in autotuner_file"
    assert _report(monkeypatch, capsys)["autotuner_file"] is None
    assert main(["backends"]) == 0
    assert "tuning file       none: no setting names one" in capsys.readouterr().out


def test_the_first_screen_is_the_header_then_the_table(monkeypatch, capsys):
    assert main(["backends"]) == 0
    lines = capsys.readouterr().out.splitlines()
    table = next(i for i, line in enumerate(lines) if line.startswith("API "))
    assert table <= 4 and lines[table - 1] == ""
    assert lines[0].startswith(f"flashinfer {flashinfer_version()}, torch {torch.__version__}")
    assert lines[1].startswith(f"experimental gate: {GATE}=")
    # The details come after the table.
    below = lines[table:]
    for start in ("python ", "settings (", "os ", "cpu ", "CUDA runtime", "install "):
        assert any(line.startswith(start) for line in below), start


def flashinfer_version() -> str:
    from flashinfer._version import __version__

    return __version__


def test_the_json_follows_the_documented_schema(monkeypatch, capsys):
    monkeypatch.setenv("FLASHINFER_LOGLEVEL", "2")
    monkeypatch.setenv("FLASHINFER_TYPO_HERE", "1")
    doc = _report(monkeypatch, capsys)
    assert doc["schema_version"] == SCHEMA_VERSION
    assert list(doc)[0] == "schema_version"
    assert schema_problems(doc) == []
    assert doc["environment"], "the schema check saw no setting"


def test_the_schema_check_finds_what_drifted(monkeypatch, capsys):
    doc = _report(monkeypatch, capsys)
    doc["new_field"] = 1
    doc["system"]["cpu_count"] = "two"
    del doc["install"]["kind"]
    doc["apis"][0]["backends"] = [{"name": "x"}]
    doc["schema_version"] = 1
    problems = schema_problems(doc)
    assert "new_field: in the report but not in the schema" in problems
    assert "system.cpu_count: str is not integer|null" in problems
    assert "install.kind: in the schema but not in the report" in problems
    assert "apis[].backends[].runnable: in the schema but not in the report" in problems
    assert f"schema_version: 1, not {SCHEMA_VERSION}" in problems


def test_the_schema_page_is_rendered_from_the_fields():
    text = "\n".join(flashinfer_reference.report_schema_rst())
    assert text == "\n".join(schema_rst())
    for field in FIELDS:
        assert f"``{field.path}``" in text, field.path
    page = (ROOT / "docs" / "report_schema.rst").read_text()
    assert ".. flashinfer-report-schema::" in page
    assert "report_schema" in (ROOT / "docs" / "index.rst").read_text()
    assert ":doc:`report_schema`" in (ROOT / "docs" / "cli.rst").read_text()
