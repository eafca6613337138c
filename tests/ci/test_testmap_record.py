"""``scripts/ci/testmap.py record`` on a small synthetic project: what a test ran directly,
in a subprocess, in a shared fixture and at its file's import, and what it read as data, all
credited to it; durations recorded; the overhead printed."""

from __future__ import annotations

import subprocess
import sys

import pytest
from testmap_lib import mapfile

from . import (
    TESTMAP,
    commit,
    git,
    no_hypothesis_plugin,  # noqa: F401 - autouse, module scope
    write,
)

MOD = """\
def direct():
    return 1


def in_child():
    return 2


def fixture_work():
    return 3


def at_collect():
    return [4]


def nobody():
    return 5


def late_work():
    return 6


def before_exit():
    return 7
"""

TEST = """\
import subprocess
import sys

import pytest

from pkg import mod

CASES = mod.at_collect()  # runs at import, once, before any test


@pytest.fixture(scope="module")
def shared():
    return mod.fixture_work()  # set up during the first test that asks


def test_direct():
    assert mod.direct() == 1


def test_child():
    code = "from pkg import mod; mod.in_child()"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_child_leaving_by_os_exit():
    code = "import os; from pkg import mod; mod.before_exit(); os._exit(0)"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_reads():
    with open("docs/page.md", encoding="utf-8") as fh:
        assert fh.read()


def test_fixture_one(shared):
    pass


def test_fixture_two(shared):
    pass


@pytest.fixture(scope="module")
def late():
    return mod.late_work()  # asked for by name, inside another fixture


@pytest.fixture
def picked(request):
    return request.getfixturevalue("late")


def test_late_one(picked):
    pass


def test_late_two(picked):
    pass
"""


# Like flashinfer's dispatch: a checker whose verdict is cached (cleared by forget_verdicts),
# and a dispatcher generated once, by exec, with no file behind its lines.
VERDICTS = """\
_CACHE = {}


def forget_verdicts():
    _CACHE.clear()


def decide(x):
    return x > 0


def check(x):
    if x not in _CACHE:
        _CACHE[x] = decide(x)
    return _CACHE[x]
"""

CODEGEN = """\
from flashinfer.dispatch import verdicts

_BUILT = {}


def compile_function(source, ns):
    exec(compile(source, "<flashinfer generated dispatcher>", "exec"), ns)
    return ns["dispatch"]


def emit():
    return compile_function("def dispatch(x):\\n    return check(x)\\n", {"check": verdicts.check})


def call(x):
    if "op" not in _BUILT:
        _BUILT["op"] = emit()
    return _BUILT["op"](x)
"""

# A function a module runs at its import: only the first test file that imports it runs it.
BOOT = """\
def read_switch():
    return True


SWITCH = read_switch()
"""

BOOT_TESTS = """\
import pkg.boot


def test_boot():
    assert pkg.boot.SWITCH
"""

OPS_TEST = """\
from flashinfer import codegen


def test_op_first():
    assert codegen.call(1)


def test_op_second():
    assert codegen.call(1)


def test_no_op():
    pass
"""


EXP_TEST = """\
from pkg.boot import read_switch


def test_exp_lane():
    assert read_switch()
"""


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[mapfile.TestMap, str]:
    try:
        import coverage  # noqa: F401
    except ImportError:
        pytest.fail("coverage.py missing: it comes with the test extra, pip install -e '.[test]'")
    root = tmp_path_factory.mktemp("recorder") / "project"
    root.mkdir()
    git(root, "init", "-q")
    write(
        root,
        {
            "pytest.ini": "[pytest]\nnorecursedirs = tests/experimental\n",
            "tests/experimental/test_exp_lane.py": EXP_TEST,
            "pkg/__init__.py": "",
            "pkg/mod.py": MOD,
            "tests/test_rec.py": TEST,
            "docs/page.md": "# A page\n",
            "flashinfer/__init__.py": "",
            "flashinfer/dispatch/__init__.py": "",
            "flashinfer/dispatch/verdicts.py": VERDICTS,
            "flashinfer/codegen.py": CODEGEN,
            "tests/test_ops.py": OPS_TEST,
            "pkg/boot.py": BOOT,
            "tests/test_boot_a.py": BOOT_TESTS,
            "tests/test_boot_b.py": BOOT_TESTS,
        },
    )
    sha = commit(root, "base")
    out = root.parent / "testmap.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(TESTMAP),
            "record",
            "--repo",
            str(root),
            "--out",
            str(out),
            "-q",
            "tests",
            "tests/experimental",
        ],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    m = mapfile.load(out)
    assert m.commit == sha
    return m, proc.stdout


def test_both_lanes_are_recorded_each_in_its_own_pytest(recorded) -> None:
    """One pytest naming ``tests tests/experimental`` would collect the stable lane only."""
    m, out = recorded
    exp = m.tests["tests/experimental/test_exp_lane.py::test_exp_lane"]
    assert exp.lane == "experimental"
    assert "pkg/boot.py::read_switch" in exp.functions
    assert out.count("==> recording run: pytest") == 2


def _functions(m: mapfile.TestMap, name: str) -> set[str]:
    return m.tests[f"tests/test_rec.py::{name}"].functions


def test_every_test_is_recorded_with_its_duration(recorded) -> None:
    m, _ = recorded
    assert {n.split("::")[1] for n in m.tests} == {
        "test_direct",
        "test_child",
        "test_reads",
        "test_fixture_one",
        "test_fixture_two",
        "test_late_one",
        "test_late_two",
        "test_child_leaving_by_os_exit",
        "test_op_first",
        "test_op_second",
        "test_no_op",
        "test_boot",
        "test_exp_lane",
    }
    assert all(t.duration > 0 for t in m.tests.values())
    assert {t.lane for n, t in m.tests.items() if "test_exp_lane" not in n} == {"stable"}


def test_what_a_test_runs_is_credited_to_it_alone(recorded) -> None:
    m, _ = recorded
    assert "pkg/mod.py::direct" in _functions(m, "test_direct")
    assert "pkg/mod.py::direct" not in _functions(m, "test_reads")
    assert not any("nobody" in f for t in m.tests.values() for f in t.functions)


def test_a_subprocess_is_credited_to_the_test_that_started_it(recorded) -> None:
    m, _ = recorded
    assert "pkg/mod.py::in_child" in _functions(m, "test_child")
    assert "pkg/mod.py::in_child" not in _functions(m, "test_direct")


def test_a_subprocess_leaving_by_os_exit_is_credited_too(recorded) -> None:
    """``os._exit`` skips atexit, where coverage saves (the gloo ranks leave this way)."""
    m, _ = recorded
    assert "pkg/mod.py::before_exit" in _functions(m, "test_child_leaving_by_os_exit")


def test_a_shared_fixture_is_credited_to_every_test_that_uses_it(recorded) -> None:
    m, _ = recorded
    for name in ("test_fixture_one", "test_fixture_two"):
        assert "pkg/mod.py::fixture_work" in _functions(m, name)
    assert "pkg/mod.py::fixture_work" not in _functions(m, "test_direct")


def test_a_shared_fixture_asked_for_by_name_is_credited_to_every_test_that_got_it(
    recorded,
) -> None:
    """``request.getfixturevalue("late")``: the test's static fixture names do not hold
    it, and its setup ran during the first test only (tests/test_autotune_distributed.py's
    process groups: a mutant in the ranks' code went unselected)."""
    m, _ = recorded
    for name in ("test_late_one", "test_late_two"):
        assert "pkg/mod.py::late_work" in _functions(m, name), name
    assert "pkg/mod.py::late_work" not in _functions(m, "test_fixture_one")


def test_import_time_code_is_credited_to_the_files_tests(recorded) -> None:
    m, _ = recorded
    rec = [t for nodeid, t in m.tests.items() if nodeid.startswith("tests/test_rec.py::")]
    assert all("pkg/mod.py::at_collect" in t.functions for t in rec)
    assert all({"pkg/mod.py", "pkg/__init__.py"} <= t.files for t in rec)


def test_a_file_read_as_data_is_credited(recorded) -> None:
    m, _ = recorded
    assert "docs/page.md" in m.tests["tests/test_rec.py::test_reads"].data
    assert "docs/page.md" not in m.tests["tests/test_rec.py::test_direct"].data


def test_the_overhead_is_printed(recorded) -> None:
    _, out = recorded
    assert "overhead" in out and "plain run" in out


def test_a_cached_verdict_and_a_generated_dispatcher_credit_every_test_that_uses_them(
    recorded,
) -> None:
    """The second test hits the verdict cache and the dispatcher the first one generated;
    both are still credited with the checker and the generator."""
    m, _ = recorded
    for name in ("test_op_first", "test_op_second"):
        functions = m.tests[f"tests/test_ops.py::{name}"].functions
        assert "flashinfer/dispatch/verdicts.py::decide" in functions, name
        assert "flashinfer/codegen.py::emit" in functions, name
    assert "flashinfer/codegen.py::emit" not in m.tests["tests/test_ops.py::test_no_op"].functions


def test_import_time_code_is_credited_to_every_test_that_imported_the_module(recorded) -> None:
    """pkg.boot runs read_switch() once, while the first of the two files is collected."""
    m, _ = recorded
    for name in ("tests/test_boot_a.py::test_boot", "tests/test_boot_b.py::test_boot"):
        assert "pkg/boot.py::read_switch" in m.tests[name].functions, name
    assert "pkg/boot.py::read_switch" not in _functions(m, "test_direct")
