"""The recording run: the suite under coverage.py with one context per test (the plugin and
the site hook in ``recorder_site/``), then the contexts folded into a map.

Why coverage.py: its C tracer with dynamic contexts runs on Python 3.10 and 3.11, where
``sys.monitoring`` does not exist, and it already follows subprocesses through a startup
hook; on 3.12+ coverage can use ``sys.monitoring`` itself (``COVERAGE_CORE=sysmon``), so one
recorder serves every supported Python.  Lines are folded into functions (:mod:`.scopes`).
"""

from __future__ import annotations

import datetime
import glob
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from testmap_lib.gitdiff import DiffError, git
from testmap_lib.mapfile import TestMap, TestRecord, lane_of
from testmap_lib.scopes import MODULE, Scopes, import_closure, scopes_of_file

SITE = Path(__file__).resolve().parent / "recorder_site"

RCFILE = """\
[run]
source = {repo}
data_file = {out}/.coverage
parallel = true
disable_warnings =
    no-data-collected
    module-not-measured
    module-not-imported
    already-imported
    no-ctracer
    couldnt-parse
"""


def _pytest(args: Sequence[str], env: dict[str, str], repo: Path) -> tuple[int, float]:
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args]
    start = time.perf_counter()
    rc = subprocess.run(cmd, cwd=repo, env=env).returncode
    return rc, time.perf_counter() - start


class _Contexts:
    def __init__(self) -> None:
        self.files: dict[str, set[str]] = {}
        self.functions: dict[str, set[str]] = {}
        self.data: dict[str, set[str]] = {}

    def add_lines(self, repo: Path, data_file: str) -> None:
        import coverage

        data = coverage.CoverageData(basename=data_file)
        data.read()
        scopes: dict[str, Scopes] = {}
        for measured in data.measured_files():
            try:
                rel = Path(measured).resolve().relative_to(repo).as_posix()
            except ValueError:
                continue
            if rel not in scopes:
                scopes[rel] = scopes_of_file(repo / rel)
            by_line = data.contexts_by_lineno(measured)
            for line, contexts in by_line.items():
                scope = scopes[rel].scope_of(line)
                for ctx in contexts:
                    self.files.setdefault(ctx, set()).add(rel)
                    if scope != MODULE:
                        self.functions.setdefault(ctx, set()).add(f"{rel}::{scope}")

    def add_reads(self, path: str) -> None:
        for ctx, rel in json.loads(Path(path).read_text(encoding="utf-8")):
            self.data.setdefault(ctx, set()).add(rel)


def _conftests(repo: Path, test_file: str) -> list[str]:
    out = []
    here = Path(test_file).parent
    while True:
        c = here / "conftest.py"
        if (repo / c).is_file():
            out.append(c.as_posix())
        if here == Path("."):
            return out
        here = here.parent


PACKAGE = "flashinfer/"


def generator_files(repo: Path) -> set[str]:
    """The package files that generate code (define or call ``compile_function``)."""
    found = set()
    for path in (repo / PACKAGE).rglob("*.py"):
        try:
            if "compile_function(" in path.read_text(encoding="utf-8"):
                found.add(path.relative_to(repo).as_posix())
        except (OSError, UnicodeDecodeError):
            continue
    return found


def credit_generators(tests: dict[str, TestRecord], own: dict[str, set[str]], repo: Path) -> None:
    """Generated code has no file: coverage cannot see it run.  A dispatcher is generated
    once per op, by whichever test calls the op first, and later tests run it without
    running its generators.  So every test whose own code (not its file's import) ran
    package code is credited with every generator function any test ran: a change to a
    generator selects every test that may run what it generates."""
    generators = generator_files(repo)
    ran = {
        fn for rec in tests.values() for fn in rec.functions if fn.split("::", 1)[0] in generators
    }
    for nodeid, rec in tests.items():
        if any(fn.startswith(PACKAGE) for fn in own.get(nodeid, ())):
            rec.functions |= ran


def credit_import_time(tests: dict[str, TestRecord], functions: dict[str, set[str]]) -> None:
    """A module runs once per process, when the first test file that imports it is
    collected, so import-time code (``_to_stderr = read_switch()``, case declarations)
    would be credited to that file's tests alone.  Every function that ran while a test file
    was collected is credited to every test that imported its module."""
    import_time: dict[str, set[str]] = {}
    for context, fns in functions.items():
        if context.startswith("collect:"):
            for fn in fns:
                import_time.setdefault(fn.split("::", 1)[0], set()).add(fn)
    for rec in tests.values():
        for path in rec.files & import_time.keys():
            rec.functions |= import_time[path]


def build_map(repo: Path, out: Path, commit: str, meta: dict) -> TestMap:
    ctx = _Contexts()
    for data_file in sorted(glob.glob(str(out / ".coverage.*"))):
        ctx.add_lines(repo, data_file)
    for reads in sorted(glob.glob(str(out / "reads-*.json"))):
        ctx.add_reads(reads)
    recorded = json.loads((out / "tests.json").read_text(encoding="utf-8"))
    closure_cache: dict[str, set[str]] = {}
    tests = {}
    for nodeid, info in recorded.items():
        test_file = nodeid.split("::", 1)[0]
        names = [nodeid, f"collect:{test_file}", *info["fixtures"]]
        rec = TestRecord(lane_of(nodeid), float(info["duration"]))
        for name in names:
            rec.files |= ctx.files.get(name, set())
            rec.functions |= ctx.functions.get(name, set())
            rec.data |= ctx.data.get(name, set())
        rec.files |= import_closure(repo, [test_file, *_conftests(repo, test_file)], closure_cache)
        rec.files.add(test_file)
        tests[nodeid] = rec
    own = {
        nodeid: set().union(
            ctx.functions.get(nodeid, set()),
            *(ctx.functions.get(f, set()) for f in recorded[nodeid]["fixtures"]),
        )
        for nodeid in tests
    }
    credit_generators(tests, own, repo)
    credit_import_time(tests, ctx.functions)
    session = ctx.functions.get("", set())
    return TestMap(commit, tests, session, meta)


EXPERIMENTAL_ROOT = "tests/experimental"


def lane_runs(repo: Path, args: Sequence[str]) -> list[list[str]]:
    """``args`` as one pytest command per lane.  One command naming both ``tests`` and
    ``tests/experimental`` collects the stable lane only: pytest drops the second path as
    inside the first, and pytest.ini's ``norecursedirs`` then skips it.  So, as CI runs the
    lanes, the stable paths and the experimental paths each get a pytest of their own
    (the options go to both); ``args`` naming one lane (or no path) stay one command."""

    def lane(arg: str) -> str | None:
        if arg.startswith("-"):
            return None
        path = arg.split("::", 1)[0].rstrip("/")
        if path == EXPERIMENTAL_ROOT or path.startswith(EXPERIMENTAL_ROOT + "/"):
            return "experimental"
        return "stable" if (repo / path).exists() else None

    paths: dict[str, list[str]] = {"stable": [], "experimental": []}
    options: list[str] = []
    for arg in args:
        which = lane(arg)
        (paths[which] if which else options).append(arg)
    if not (paths["stable"] and paths["experimental"]):
        return [list(args)]
    return [options + paths["stable"], options + paths["experimental"]]


def _record_one(
    repo: Path, args: Sequence[str], env: dict[str, str], commit: str, meta: dict
) -> tuple[int, float, TestMap | None, float]:
    """One recording run: (pytest's exit code, seconds, the map or None, fold seconds)."""
    with tempfile.TemporaryDirectory(prefix="testmap-") as tmp:
        out = Path(tmp)
        rc_file = out / "coveragerc"
        rc_file.write_text(RCFILE.format(repo=repo, out=out), encoding="utf-8")
        rec_env = {
            **env,
            "TESTMAP_RC": str(rc_file),
            "TESTMAP_REPO": str(repo),
            "TESTMAP_DIR": str(out),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(SITE), env.get("PYTHONPATH")])),
        }
        rc, seconds = _pytest(["-p", "testmap_plugin", *args], rec_env, repo)
        if not (out / "tests.json").is_file():
            print(f"testmap record: pytest exited {rc} before any test ran", file=sys.stderr)
            return rc or 1, seconds, None, 0.0
        start = time.perf_counter()
        m = build_map(repo, out, commit, meta)
        return rc, seconds, m, time.perf_counter() - start


def merge(maps: Sequence[TestMap]) -> TestMap:
    """Maps of the same commit recorded by separate runs (the lanes) as one."""
    first = maps[0]
    tests: dict[str, TestRecord] = {}
    session: set[str] = set()
    for m in maps:
        tests.update(m.tests)
        session |= m.session_functions
    return TestMap(first.commit, tests, session, dict(first.meta))


def record(repo: Path, out_path: Path, pytest_args: Sequence[str], baseline: bool) -> int:
    try:
        import coverage  # noqa: F401
    except ImportError:
        print("testmap record: coverage.py is missing: pip install -e '.[test]'", file=sys.stderr)
        return 2
    try:
        commit = git(repo, "rev-parse", "HEAD").strip()
        dirty = bool(git(repo, "status", "--porcelain", "--untracked-files=no").strip())
    except DiffError as exc:
        print(f"testmap record: {exc}", file=sys.stderr)
        return 2
    env = {k: v for k, v in os.environ.items() if not k.startswith("TESTMAP_")}
    runs = lane_runs(repo, pytest_args)
    plain_s = None
    if baseline:
        plain_s = 0.0
        for args in runs:
            print(f"==> plain run (for the overhead): pytest {' '.join(args)}", flush=True)
            plain_s += _pytest(args, env, repo)[1]
    meta = {
        "recorded_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "python": sys.version.split()[0],
        "pytest_args": list(pytest_args),
    }
    if dirty:
        meta["dirty"] = True
    rc, recorded_s, fold_s = 0, 0.0, 0.0
    maps = []
    for args in runs:
        print(f"==> recording run: pytest {' '.join(args)}", flush=True)
        one_rc, seconds, one, folded = _record_one(repo, args, env, commit, meta)
        rc, recorded_s, fold_s = rc or one_rc, recorded_s + seconds, fold_s + folded
        if one is None:
            return rc
        maps.append(one)
    m = merge(maps)
    from testmap_lib.mapfile import save

    save(m, out_path)
    print(
        f"==> map: {len(m.tests)} tests at {commit[:12]}{' (dirty tree)' if dirty else ''} "
        f"-> {out_path} (folded in {fold_s:.1f}s)"
    )
    line = f"==> recorded run {recorded_s:.1f}s"
    if plain_s:
        line += f", plain run {plain_s:.1f}s: overhead {recorded_s / plain_s:.2f}x"
    print(line)
    if rc != 0:
        print(f"testmap record: pytest exited {rc}; the map holds what ran", file=sys.stderr)
    return rc
