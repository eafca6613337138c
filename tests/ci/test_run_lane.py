"""``scripts/ci/run_lane.sh``, the one way a pytest lane runs: with nothing set, the whole
lane (what .ci/run runs); with a selection, what the change reaches (every parametrization of
a selected test function, a lane it does not reach not at all); with workers, on xdist."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from . import SCRIPTS, write

FILES = {
    "pytest.ini": "[pytest]\nnorecursedirs = tests/experimental\n",
    "tests/test_a.py": (
        "import pytest\n\n\n@pytest.mark.parametrize('n', [1, 2, 3])\n"
        "def test_a(n):\n    pass\n\n\ndef test_a_other():\n    pass\n"
    ),
    "tests/test_b.py": "def test_b():\n    pass\n",
    "tests/experimental/test_exp.py": "def test_exp():\n    pass\n",
}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    write(root, FILES)
    shutil.copytree(SCRIPTS, root / "scripts" / "ci", ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _lane(root: Path, lane: str, *extra: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("CI_", "TESTMAP_"))}
    # The project's tests draw no examples: Hypothesis' plugin would only cost each of these
    # twenty-odd pytest runs about a second of start-up.
    clean["PYTEST_ADDOPTS"] = "-p no:hypothesispytest"
    return subprocess.run(
        ["bash", str(root / "scripts" / "ci" / "run_lane.sh"), lane, "-rA", *extra],
        cwd=root,
        env={**clean, **env},
        capture_output=True,
        text=True,
    )


def _passed(out: str) -> set[str]:
    return {line.split()[1] for line in out.splitlines() if line.startswith("PASSED ")}


def _selection(root: Path, mode: str, stable: list[str], experimental: list[str]) -> str:
    path = root / "selection.json"
    data = {"mode": mode, "reasons": [], "tests": {"stable": stable, "experimental": experimental}}
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def test_with_nothing_set_the_whole_lane_runs(project: Path) -> None:
    proc = _lane(project, "stable")
    assert proc.returncode == 0, proc.stdout
    assert len(_passed(proc.stdout)) == 5
    assert _passed(_lane(project, "experimental").stdout) == {
        "tests/experimental/test_exp.py::test_exp"
    }


def test_a_selection_runs_the_selected_functions_every_parametrization(project: Path) -> None:
    # The map knew test_a[1] only; test_a[2] and [3] are new parametrizations of it.
    sel = _selection(project, "subset", ["tests/test_a.py::test_a[1]"], [])
    proc = _lane(project, "stable", CI_SELECTION=sel)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _passed(proc.stdout) == {f"tests/test_a.py::test_a[{n}]" for n in (1, 2, 3)}
    assert "1 test(s) in 1 file(s)" in proc.stdout


def test_a_lane_the_change_does_not_reach_runs_nothing_and_says_so(project: Path) -> None:
    sel = _selection(project, "subset", ["tests/test_b.py"], [])
    proc = _lane(project, "experimental", CI_SELECTION=sel)
    assert proc.returncode == 0 and "reaches none of its tests" in proc.stdout
    assert _passed(_lane(project, "stable", CI_SELECTION=sel).stdout) == {"tests/test_b.py::test_b"}


def test_a_selection_of_everything_runs_the_lane_folder(project: Path) -> None:
    # The map's list may miss tests added since it was recorded: the folder is collected.
    sel = _selection(project, "all", ["tests/test_b.py::test_b"], [])
    assert len(_passed(_lane(project, "stable", CI_SELECTION=sel).stdout)) == 5


A_IDS = {f"tests/test_a.py::test_a[{n}]" for n in (1, 2, 3)}


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["tests/test_b.py"], {"tests/test_b.py::test_b"}),
        (["tests/test_a.py::test_a_other"], {"tests/test_a.py::test_a_other"}),
        (["tests/test_a.py", "-k", "test_a and 2"], {"tests/test_a.py::test_a[2]"}),
        (["-k", "test_b or other"], {"tests/test_b.py::test_b", "tests/test_a.py::test_a_other"}),
        (["tests/test_b.py", "tests/test_a.py::test_a"], A_IDS | {"tests/test_b.py::test_b"}),
    ],
    ids=["file", "node-id", "file-and-k", "k-only", "two-paths"],
)
@pytest.mark.parametrize("selection", [False, True], ids=["", "with-selection"])
def test_paths_and_k_narrow_the_lane(
    project: Path, extra: list[str], expected: set[str], selection: bool
) -> None:
    """Issue 43 item 22: a path (file, folder, node id) replaces the lane's folder, and a
    selection CI set; ``-k`` narrows; a path argument used to add to the whole lane."""
    env = {"CI_SELECTION": _selection(project, "subset", ["tests/test_b.py"], [])}
    proc = _lane(project, "stable", *extra, **(env if selection else {}))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    if selection and extra[0] == "-k":  # no path: the selection holds, -k narrows it
        expected = {"tests/test_b.py::test_b"}
    assert _passed(proc.stdout) == expected


def test_an_unreadable_selection_runs_the_whole_lane(project: Path) -> None:
    proc = _lane(project, "stable", CI_SELECTION=str(project / "missing.json"))
    assert proc.returncode == 0 and len(_passed(proc.stdout)) == 5
    assert "running the whole lane" in proc.stderr


def _installed(module: str) -> None:
    # Not a skip: both come with the test extra, so a missing one is a broken install.
    assert importlib.util.find_spec(module), f"{module} missing: pip install -e '.[test]'"


def _order(out: str) -> list[str]:
    return [line.split()[1] for line in out.splitlines() if line.startswith("PASSED ")]


def test_random_order_shuffles_by_the_printed_seed(project: Path) -> None:
    _installed("random_order")
    file_order = _order(_lane(project, "stable").stdout)
    orders = {}
    for seed in ("1", "2", "3", "4", "5"):
        proc = _lane(project, "stable", CI_RANDOM_ORDER_SEED=seed)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert f"random order: seed {seed}" in proc.stdout
        orders[seed] = _order(proc.stdout)
        assert sorted(orders[seed]) == sorted(file_order)
    assert any(order != file_order for order in orders.values())
    again = _lane(project, "stable", CI_RANDOM_ORDER_SEED="3")
    assert _order(again.stdout) == orders["3"]  # the printed seed reproduces the order


DIST_PROBE = """
def pytest_configure(config):
    if not hasattr(config, "workerinput"):  # the controller: how it hands out the tests
        with open("dist.txt", "w") as out:
            out.write(str(config.getoption("dist")))
"""


def test_workers_run_the_lane_and_the_selection_on_xdist(project: Path) -> None:
    _installed("xdist")
    write(project, {"conftest.py": DIST_PROBE})
    proc = _lane(project, "stable", CI_WORKERS="2")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "bringing up nodes" in proc.stdout and len(_passed(proc.stdout)) == 5
    # A worker that runs out steals from the others: a long test never holds the lane's end.
    assert (project / "dist.txt").read_text() == "worksteal"
    # Each worker keeps only the selection too.
    sel = _selection(project, "subset", ["tests/test_a.py::test_a_other", "tests/test_b.py"], [])
    proc = _lane(project, "stable", CI_WORKERS="2", CI_SELECTION=sel)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _passed(proc.stdout) == {"tests/test_a.py::test_a_other", "tests/test_b.py::test_b"}


def test_an_unknown_lane_is_a_usage_error(project: Path) -> None:
    proc = _lane(project, "both")
    assert proc.returncode == 2 and "stable or experimental" in proc.stderr


def test_run_lane_is_shellcheck_clean() -> None:
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "shellcheck comes with the test extra: pip install -e '.[test]'"
    result = subprocess.run(
        [shellcheck, str(SCRIPTS / "run_lane.sh")], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout


def test_check_sh_runs_the_lanes_through_run_lane() -> None:
    """.ci/run and check.sh --all run each whole lane, on one xdist worker per CPU unless
    CI_WORKERS says otherwise (CI_WORKERS=0: one process)."""
    check = (SCRIPTS.parents[1] / "scripts" / "check.sh").read_text(encoding="utf-8")
    for lane in ("stable", "experimental"):
        assert f'CI_WORKERS="${{CI_WORKERS:-auto}}" bash scripts/ci/run_lane.sh {lane}\n' in check
    ci_run = (SCRIPTS.parents[1] / ".ci" / "run").read_text(encoding="utf-8")
    assert "CI_WORKERS" not in ci_run and "CI_SELECTION" not in ci_run


class _Item:
    def __init__(self, nodeid: str, slow: bool = False) -> None:
        self.nodeid, self.slow = nodeid, slow

    def get_closest_marker(self, name: str) -> object:
        return object() if self.slow and name == "slow" else None


def test_the_modules_of_slow_tests_start_first_each_whole() -> None:
    """tests/conftest.py, on xdist workers: a module holding a slow test moves to the front
    whole (its module fixture is set up once), the order otherwise kept."""
    from conftest import slow_modules_first

    items = [
        _Item("tests/test_a.py::test_1"),
        _Item("tests/test_b.py::test_1"),
        _Item("tests/test_b.py::test_2", slow=True),
        _Item("tests/test_c.py::test_1"),
        _Item("tests/test_d.py::test_1[x]", slow=True),
        _Item("tests/test_d.py::test_2"),
    ]
    slow_modules_first(items)  # type: ignore[arg-type]
    assert [i.nodeid for i in items] == [
        "tests/test_b.py::test_1",
        "tests/test_b.py::test_2",
        "tests/test_d.py::test_1[x]",
        "tests/test_d.py::test_2",
        "tests/test_a.py::test_1",
        "tests/test_c.py::test_1",
    ]
