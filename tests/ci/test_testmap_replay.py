"""``scripts/ci/testmap.py replay``: the selection over a repository's history, one row per
commit, read with one map standing for each commit's parent."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from testmap_lib import mapfile

from . import (
    TESTMAP,
    commit,
    no_hypothesis_plugin,  # noqa: F401 - autouse, module scope
    write,
)
from .test_testmap_rules import repo  # noqa: F401 - the synthetic repository fixture


def _replay(root: Path, map_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(TESTMAP), "replay", "--map", str(map_path), *args],
        cwd=root,
        capture_output=True,
        text=True,
    )


def test_each_commit_is_selected_against_its_parent(repo, tmp_path: Path) -> None:  # noqa: F811
    root, _, m = repo
    text = (root / "flashinfer/mod.py").read_text(encoding="utf-8")
    write(root, {"flashinfer/mod.py": text.replace("return x * 2", "return x * 3")})
    commit(root, "used_by_b changed")
    write(root, {"docs/unread.md": "# still unread\n"})
    commit(root, "an unread doc")
    write(root, {"pyproject.toml": "[project]\nname = 'y'\n"})
    commit(root, "build file")
    map_path = tmp_path / "map.json"
    mapfile.save(m, map_path)
    proc = _replay(root, map_path, "--commits", "3")
    assert proc.returncode == 0, proc.stderr
    rows = {line.split("   ")[-1].strip(): line for line in proc.stdout.splitlines()[1:4]}
    # Each row is the commit against its parent, not against the map's commit: the
    # function change selects test_b alone (3 of 10 recorded seconds), later rows do not
    # inherit it.
    assert "30.0%  subset  function(1)" in rows["used_by_b changed"]
    assert " 0.0%  none    unread-file(1)" in rows["an unread doc"]
    assert "100.0%  all     run-all-file(1)" in rows["build file"]
    assert "median share over 3 commits: 30.0%" in proc.stdout
    # Per rule: commits it forced to all, of them alone, the share it cost (points of the
    # mean: the build file's commit would have selected nothing, 1/3 of the 3 commits).
    assert re.search(
        r"^  run-all-file +1 +1 +33\.3 +\(pyproject\.toml 1\)$", proc.stdout, re.MULTILINE
    ), proc.stdout
    # The subset rows: which rule decided the share, and whether it went over 40%.
    assert re.search(r"^  function +1 +0$", proc.stdout, re.MULTILINE), proc.stdout


def test_a_file_the_maps_tree_lacks_is_labelled_a_replay_artifact(
    repo,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A map from a later tree cannot know a file deleted since: the replay still runs
    everything for it (fail open) and says why, apart from the real unused files."""
    root, _, m = repo
    write(root, {"flashinfer/gone.py": "def f():\n    return 1\n"})
    commit(root, "a module added")
    write(root, {"flashinfer/gone.py": "def f():\n    return 2\n"})
    commit(root, "the module changed")
    write(root, {"flashinfer/gone.py": None})
    later = commit(root, "the module deleted")
    map_path = tmp_path / "map.json"
    mapfile.save(mapfile.TestMap(later, m.tests, m.session_functions), map_path)
    proc = _replay(root, map_path, "--commits", "3")
    assert proc.returncode == 0, proc.stderr
    row = next(line for line in proc.stdout.splitlines() if "the module changed" in line)
    assert "100.0%  all" in row and "not in the map's tree: a replay artifact" in row
    assert "median share over the 1 commits whose Python files the map's tree holds" in (
        proc.stdout
    )


def test_the_replay_counts_subsets_that_changed_code_every_test_ran(
    repo,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A module-level line of a module every test imported selects them all: the count
    says so (no finer rule could select less); a function change does not count."""
    root, _, m = repo
    text = (
        (root / "flashinfer/mod.py").read_text(encoding="utf-8").replace("LIMIT = 3", "LIMIT = 4")
    )
    write(root, {"flashinfer/mod.py": text})
    commit(root, "every test imported it")
    write(root, {"flashinfer/mod.py": text.replace("return x * 2", "return x * 3")})
    commit(root, "one test ran it")
    map_path = tmp_path / "map.json"
    importers = {k: v for k, v in m.tests.items() if "flashinfer/mod.py" in v.files}
    mapfile.save(mapfile.TestMap(m.commit, importers, m.session_functions), map_path)
    proc = _replay(root, map_path, "--commits", "2")
    assert proc.returncode == 0, proc.stderr
    assert "every recorded test ran (import-time code such as the APIs' decoration): 1 (" in (
        proc.stdout
    )
    assert "decoration): 1 (module-level 1)" in proc.stdout, proc.stdout


def test_the_replay_prints_the_ci_wall_time_estimate(repo, tmp_path: Path) -> None:  # noqa: F811
    root, _, m = repo
    write(root, {"docs/unread.md": "# still unread\n"})
    commit(root, "an unread doc")
    map_path = tmp_path / "map.json"
    mapfile.save(m, map_path)
    proc = _replay(root, map_path, "--commits", "1", "--fixed", "lint=1,types=1,checks=1,docs=1")
    assert proc.returncode == 0, proc.stderr
    # 10 recorded seconds + 4 fixed = 14 serially; the unread doc selects nothing, so the
    # pull request waits for the checks job alone (4 s).
    assert "today, everything serially (.ci/run):" in proc.stdout
    assert "= 0.29 of today's (target <= 0.33)" in proc.stdout
    bad = _replay(root, map_path, "--fixed", "lint=fast")
    assert bad.returncode == 2 and "'fast' is not a number of seconds" in bad.stderr


def test_a_missing_map_is_a_usage_error(tmp_path: Path) -> None:
    proc = _replay(tmp_path, tmp_path / "none.json")
    assert proc.returncode == 2 and "no map" in proc.stderr


MUTANT_FILES = {
    "flashinfer/__init__.py": "",
    "flashinfer/mod.py": "def add(x):\n    return x + 1\n\n\ndef mul(x):\n    return x * 2\n",
    "tests/test_add.py": "from flashinfer.mod import add\n\n\ndef test_add():\n"
    "    assert add(1) == 2\n",
    "tests/test_mul.py": "from flashinfer.mod import mul\n\n\ndef test_mul():\n"
    "    assert mul(2) == 4\n",
}


def _mutant_repo(tmp_path: Path, add_tests: set[str], mod_used: bool = True) -> tuple[Path, Path]:
    """A history whose last commit touched ``add``, and a map that credits ``add`` to
    ``add_tests`` (right: test_add; wrong: test_mul); ``mod_used=False``: no test of the
    map used flashinfer/mod.py (so a change there runs everything)."""
    from . import git

    root = tmp_path / "mutants"
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    write(root, MUTANT_FILES)
    commit(root, "base")
    text = MUTANT_FILES["flashinfer/mod.py"].replace("return x + 1", "return 1 + x")
    write(root, {"flashinfer/mod.py": text})
    sha = commit(root, "add touched")
    files = {"flashinfer/__init__.py", "flashinfer/mod.py"} if mod_used else set()
    tests = {}
    for name in ("tests/test_add.py::test_add", "tests/test_mul.py::test_mul"):
        fns = {"flashinfer/mod.py::add"} if name in add_tests else set()
        if name.endswith("test_mul") and mod_used:
            fns.add("flashinfer/mod.py::mul")
        tests[name] = mapfile.TestRecord("stable", 1.0, files | {name.split("::")[0]}, fns)
    m = mapfile.TestMap(sha, tests, meta={"pytest_args": ["-q", "tests"]})
    map_path = tmp_path / "mutants.json"
    mapfile.save(m, map_path)
    return root, map_path


def test_mutants_run_in_full_and_selected_and_a_miss_fails(tmp_path: Path) -> None:
    root, right = _mutant_repo(tmp_path, {"tests/test_add.py::test_add"})
    proc = _replay(root, right, "--commits", "1", "--mutants", "2", "--seed", "3")
    head = "mutants (seed 3, 2 per touched file, commits in a seeded order): the full run is "
    assert head + "pytest tests" in proc.stdout
    assert "mutants: 2, misses: 0" in proc.stdout and proc.returncode == 0, proc.stdout
    assert "1 fail in full, 0 missed" in proc.stdout
    assert "2 of them failed a test in full" in proc.stdout
    # A map that credits add() to the wrong test: the selection misses test_add.
    wrong_root, wrong = _mutant_repo(tmp_path / "w", {"tests/test_mul.py::test_mul"})
    proc = _replay(wrong_root, wrong, "--commits", "1", "--mutants", "2", "--seed", "3")
    assert proc.returncode == 1 and "misses: 0" not in proc.stdout, proc.stdout
    # Each miss says why it failed (pytest's summary line), to tell a miss from a flake.
    assert "  missed: tests/test_add.py::test_add\n    FAILED tests/test_add.py::test_add" in (
        proc.stdout
    )
    assert (wrong_root / "flashinfer/mod.py").read_text() == (
        root / "flashinfer/mod.py"
    ).read_text()


def test_a_mutant_whose_selection_is_everything_is_not_run(tmp_path: Path) -> None:
    """No test can be missed when everything runs: the replay says so instead of paying
    for a full suite that proves nothing."""
    root, unused = _mutant_repo(tmp_path, set(), mod_used=False)
    proc = _replay(root, unused, "--commits", "1", "--mutants", "1", "--seed", "3")
    assert "the selection runs everything, so no test can be missed" in proc.stdout
    assert "mutants: 0, misses: 0; 0 of them failed a test in full" in proc.stdout
    assert "1 not run (selection: everything)" in proc.stdout and proc.returncode == 0


def test_a_terminated_replay_puts_the_mutated_file_back(tmp_path: Path) -> None:
    """SIGTERM (a CI timeout) while a mutant's tests run: the work tree gets its file
    back, not the mutant."""
    import signal
    import time

    root, right = _mutant_repo(tmp_path, {"tests/test_add.py::test_add"})
    slow = "import time\n\nfrom flashinfer.mod import add\n\n\ndef test_add():\n"
    write(root, {"tests/test_add.py": slow + "    time.sleep(60)\n"})
    commit(root, "a slow test")
    mod = root / "flashinfer/mod.py"
    original = mod.read_text()
    cmd = [sys.executable, str(TESTMAP), "replay", "--map", str(right), "--commits", "2"]
    proc = subprocess.Popen([*cmd, "--mutants", "1"], cwd=root, stdout=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while mod.read_text() == original and time.monotonic() < deadline:
        time.sleep(0.05)
    assert mod.read_text() != original, "the mutant was never written"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 143
    assert mod.read_text() == original


def test_the_mutant_limit_bounds_the_mutants_in_all(tmp_path: Path) -> None:
    root, right = _mutant_repo(tmp_path, {"tests/test_add.py::test_add"})
    args = ("--commits", "1", "--mutants", "2", "--seed", "3", "--mutant-limit", "1")
    proc = _replay(root, right, *args)
    assert "2 per touched file, at most 1, commits in a seeded order)" in proc.stdout
    assert "mutants: 1, misses: 0" in proc.stdout and proc.returncode == 0, proc.stdout


def test_the_full_run_runs_each_lane_in_its_own_pytest(tmp_path: Path) -> None:
    """``pytest tests tests/experimental`` collects the stable lane only (the second path
    is inside the first, and norecursedirs skips it): a failure there would never count."""
    from testmap_lib.record import lane_runs
    from testmap_lib.replay import _failing

    root = tmp_path / "lanes"
    write(
        root,
        {
            "pytest.ini": "[pytest]\nnorecursedirs = tests/experimental\n",
            "tests/test_s.py": "def test_s():\n    assert False\n",
            "tests/experimental/test_e.py": "def test_e():\n    assert False\n",
        },
    )
    args = ["-q", "-p", "no:cacheprovider", "tests", "tests/experimental"]
    assert lane_runs(root, args) == [args[:4], [*args[:3], "tests/experimental"]]
    assert lane_runs(root, ["-q", "tests"]) == [["-q", "tests"]]
    both = {"tests/test_s.py::test_s", "tests/experimental/test_e.py::test_e"}
    assert set(_failing(root, ["tests", "tests/experimental"])) == both
    # On xdist workers, the same failures.
    assert set(_failing(root, ["tests", "tests/experimental"], workers=2)) == both


def test_mutant_runs_run_as_ci_does(tmp_path: Path, monkeypatch) -> None:
    """With ``CI`` set, so Hypothesis draws what the code fixes (tests/hypothesis_profiles):
    a random draw failing one run and not the other would pass for a miss."""
    from testmap_lib.replay import _failing

    monkeypatch.delenv("CI", raising=False)
    root = tmp_path / "ci"
    write(
        root, {"tests/test_ci.py": "import os\n\n\ndef test_ci():\n    assert 'CI' in os.environ\n"}
    )
    assert _failing(root, ["tests"]) == {}


def test_a_mutant_run_that_hangs_counts_as_a_failure(tmp_path: Path) -> None:
    """A flipped loop condition can run forever: the run stops at the timeout and its
    lane counts as failed (in the unselected rest, a miss), never as passed."""
    from testmap_lib.replay import _failing

    root = tmp_path / "hang"
    write(root, {"tests/test_h.py": "import time\n\n\ndef test_h():\n    time.sleep(60)\n"})
    failing = _failing(root, ["tests"], timeout=3)
    assert len(failing) == 1 and next(iter(failing)).startswith("<timed out after 3 s")
