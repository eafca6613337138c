"""Every test file belongs to exactly one lane, and the marker slices partition the suite.

Lanes (the commands CI runs):
    stable        pytest tests/               (pytest.ini's norecursedirs skips tests/experimental)
    experimental  pytest tests/experimental
Slices within a lane: ``-m "not gpu"`` (CPU) and ``-m gpu`` (GPU) must be disjoint and
together select everything the lane collects.

Nothing is hard-coded: the files are globbed and the lanes are asked, through one
``pytest --collect-only -m "not gpu"`` subprocess per lane and a small probe plugin that
records every test module pytest starts to collect (so a module that errors or skips at
import still counts as collected by its lane) and the final item ids after marker selection;
then it runs the selection hooks again, with ``-m gpu``, on the items the lane collected (the
same hooks, pytest's ``-m`` among them, that a ``-m gpu`` run calls; collecting the stable
lane again would take as long as the first time).

And the stable lane stays independent of experimental code: no ``tests/*.py`` imports a
shipped feature of ``flashinfer.experimental`` or names a shipped experimental backend in a
string (the names are read from the package, so adding a backend needs no edit here).
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

# Tens of seconds: started first on xdist workers (tests/conftest.py).
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
LANES = {"stable": "tests", "experimental": "tests/experimental"}
# The "not gpu" run also yields everything the lane collects: selected plus deselected; the
# probe then selects with the others (-m gpu) on the same items.
SELECTIONS = {"cpu": "not gpu", "gpu": "gpu"}
PROBE = textwrap.dedent(
    """
    import json
    import os

    import pytest

    _modules = set()
    _collected = []  # every item, before any selection hook ran
    _deselected = {}  # the marker expression -> the ids it deselected
    _again = []  # while the other expressions' selections run


    def pytest_collectstart(collector):
        if isinstance(collector, pytest.Module):
            _modules.add(str(collector.path))


    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(items):
        if not _again:
            _collected[:] = items


    def pytest_deselected(items):
        key = _again[-1] if _again else "first"
        _deselected.setdefault(key, []).extend(item.nodeid for item in items)


    def pytest_collection_finish(session):
        config = session.config
        data = {"modules": sorted(_modules), "selections": {}}
        data["selections"][config.option.markexpr] = {
            "items": [i.nodeid for i in session.items],
            "deselected": _deselected.get("first", []),
        }
        for expression in json.loads(os.environ["LANE_PROBE_ALSO"]):
            config.option.markexpr, items = expression, list(_collected)
            _again.append(expression)
            config.hook.pytest_collection_modifyitems(session=session, config=config, items=items)
            data["selections"][expression] = {
                "items": [i.nodeid for i in items],
                "deselected": _deselected.get(expression, []),
            }
        with open(os.environ["LANE_PROBE_OUT"], "w", encoding="utf-8") as out:
            json.dump(data, out)
    """
)


@dataclass(frozen=True)
class Collected:
    modules: frozenset[str]  # paths relative to the project root
    items: frozenset[str]  # selected by the marker expression
    deselected: frozenset[str]

    @property
    def everything(self) -> frozenset[str]:
        return self.items | self.deselected


def _probe_dir(tmp: Path) -> Path:
    probe = tmp / "probe"
    probe.mkdir(exist_ok=True)
    (probe / "lane_probe.py").write_text(PROBE, encoding="utf-8")
    return probe


def collect(project: Path, target: str, tmp: Path, tag: str, *options: str) -> dict[str, Collected]:
    """Run ``pytest --collect-only`` on ``target`` from ``project`` and read the probe: what
    each of ``SELECTIONS`` selects, by name."""
    out = tmp / f"{tag}.json"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS")}
    env["LANE_PROBE_OUT"] = str(out)
    first, *others = SELECTIONS.values()
    env["LANE_PROBE_ALSO"] = json.dumps(others)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(_probe_dir(tmp)), *filter(None, [env.get("PYTHONPATH")])]
    )
    cmd = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
    cmd += ["-p", "lane_probe", *options, "-m", first, target]
    proc = subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True, timeout=600)
    # Exit 0, or 2 (a collection error in someone's test file: still collected by its lane),
    # or 5 (nothing collected, e.g. a lane with no tests yet). Anything else is a failure to
    # collect at all (a broken conftest.py, a bad option) and nothing can be proved.
    if proc.returncode not in (0, 2, 5) or not out.exists():
        pytest.fail(
            f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n"
            f"{proc.stderr[-3000:]}"
        )
    data = json.loads(out.read_text(encoding="utf-8"))
    modules = frozenset(
        Path(m).resolve().relative_to(project.resolve()).as_posix() for m in data["modules"]
    )
    return {
        name: Collected(
            modules,
            frozenset(data["selections"][marker]["items"]),
            frozenset(data["selections"][marker]["deselected"]),
        )
        for name, marker in SELECTIONS.items()
    }


def find_test_files(project: Path) -> set[str]:
    """Every file under tests/ that pytest's default python_files patterns name."""
    found = set()
    for pattern in ("test_*.py", "*_test.py"):
        for path in (project / "tests").rglob(pattern):
            rel = path.relative_to(project)
            if "__pycache__" in rel.parts or any(p.startswith(".") for p in rel.parts):
                continue
            found.add(rel.as_posix())
    return found


def collect_all(project: Path, tmp: Path, *options: str) -> dict[tuple[str, str], Collected]:
    jobs = {}
    with ThreadPoolExecutor(max_workers=2) as pool:
        for lane, target in LANES.items():
            if (project / target).is_dir():
                jobs[lane] = pool.submit(collect, project, target, tmp, lane, *options)
        return {(lane, sel): got for lane, job in jobs.items() for sel, got in job.result().items()}


@pytest.fixture(scope="module")
def repo_files_and_lanes(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[set[str], dict[tuple[str, str], Collected]]:
    # Other people add and remove tests while this runs: a file counts if it existed both
    # before the lanes were collected and after.
    before = find_test_files(REPO)
    lanes = collect_all(REPO, tmp_path_factory.mktemp("lanes"))
    return before & find_test_files(REPO), lanes


@pytest.fixture(scope="module")
def repo_lanes(
    repo_files_and_lanes: tuple[set[str], dict[tuple[str, str], Collected]],
) -> dict[tuple[str, str], Collected]:
    return repo_files_and_lanes[1]


def _empty() -> Collected:
    return Collected(frozenset(), frozenset(), frozenset())


# --------------------------------------------------------------------------------------------
# The real suite


def test_every_test_file_is_in_exactly_one_lane(
    repo_files_and_lanes: tuple[set[str], dict[tuple[str, str], Collected]],
) -> None:
    files, repo_lanes = repo_files_and_lanes
    assert "tests/test_lanes.py" in files
    stable = repo_lanes.get(("stable", "cpu"), _empty()).modules
    experimental = repo_lanes.get(("experimental", "cpu"), _empty()).modules
    in_both = sorted(stable & experimental)
    in_neither = sorted(files - stable - experimental)
    assert not in_both, f"collected by both lanes: {in_both}"
    assert not in_neither, f"collected by no lane: {in_neither}"
    assert all(m.startswith("tests/experimental/") for m in experimental)
    assert not any(m.startswith("tests/experimental/") for m in stable)


def test_the_lanes_collect_disjoint_items(repo_lanes: dict[tuple[str, str], Collected]) -> None:
    stable = repo_lanes.get(("stable", "cpu"), _empty()).everything
    experimental = repo_lanes.get(("experimental", "cpu"), _empty()).everything
    assert not stable & experimental


@pytest.mark.parametrize("lane", list(LANES))
def test_cpu_and_gpu_selections_partition_the_lane(
    repo_lanes: dict[tuple[str, str], Collected], lane: str
) -> None:
    if (lane, "cpu") not in repo_lanes:
        pytest.skip(f"{LANES[lane]} does not exist yet")
    everything = repo_lanes[(lane, "cpu")].everything
    cpu = repo_lanes[(lane, "cpu")].items
    gpu = repo_lanes[(lane, "gpu")].items
    assert not cpu & gpu, f"selected by both -m 'not gpu' and -m gpu: {sorted(cpu & gpu)}"
    assert cpu | gpu == everything, f"selected by neither: {sorted(everything - cpu - gpu)}"


# --------------------------------------------------------------------------------------------
# The mechanism, on a synthetic project using the repository's own pytest.ini


@pytest.fixture
def synthetic(tmp_path: Path) -> Iterator[Path]:
    project = tmp_path / "project"
    files = {
        "tests/test_stable.py": "def test_a():\n    pass\n",
        "tests/sub/test_nested.py": "def test_b():\n    pass\n",
        # Only tests/experimental itself is a lane: a nested dir of that name is not.
        "tests/sub/experimental/test_not_the_lane.py": "def test_c():\n    pass\n",
        "tests/experimental/test_exp.py": (
            "import pytest\n\n\n@pytest.mark.gpu\ndef test_gpu():\n    pass\n\n\n"
            "def test_cpu():\n    pass\n"
        ),
        "tests/experimental/feature/test_deep.py": "def test_d():\n    pass\n",
        "tests/experimental/feature/test_broken.py": "raise ImportError('mid-edit')\n",
        "tests/experimental/test_skipped.py": (
            "import pytest\n\npytest.skip('no backend', allow_module_level=True)\n"
        ),
    }
    for rel, text in files.items():
        path = project / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    shutil.copy(REPO / "pytest.ini", project / "pytest.ini")
    yield project


def test_norecursedirs_excludes_the_experimental_lane(synthetic: Path, tmp_path: Path) -> None:
    # Its tests draw no examples: Hypothesis' plugin would only cost start-up time.
    lanes = collect_all(synthetic, tmp_path, "-p", "no:hypothesispytest")
    stable = lanes[("stable", "cpu")].modules
    experimental = lanes[("experimental", "cpu")].modules
    assert lanes[("stable", "gpu")].modules == stable
    assert stable == {
        "tests/test_stable.py",
        "tests/sub/test_nested.py",
        "tests/sub/experimental/test_not_the_lane.py",
    }
    assert experimental == {
        "tests/experimental/test_exp.py",
        "tests/experimental/feature/test_deep.py",
        "tests/experimental/feature/test_broken.py",
        "tests/experimental/test_skipped.py",
    }
    assert stable | experimental == find_test_files(synthetic)
    assert lanes[("experimental", "gpu")].items == {"tests/experimental/test_exp.py::test_gpu"}
    assert lanes[("experimental", "cpu")].items == {
        "tests/experimental/test_exp.py::test_cpu",
        "tests/experimental/feature/test_deep.py::test_d",
    }


# --------------------------------------------------------------------------------------------
# The stable lane never names experimental code (flashinfer/experimental/README.md, "Testing")

ADVICE = "move it to tests/experimental/ or derive it from op.experimental_backends"
EXPERIMENTAL = "flashinfer.experimental"


@dataclass(frozen=True)
class Shipped:
    backends: frozenset[str]  # experimental backends of the package's ops, stable on none
    features: frozenset[str]  # folders of flashinfer/experimental/ (splitk_gemm, ...)


def shipped_experimental_code() -> Shipped:
    import flashinfer
    from flashinfer.api_modules import API_MODULES
    from flashinfer.backend_dispatch import registered_ops

    flashinfer.load_all_apis()
    ops = [op for op in registered_ops() if op.__module__ in API_MODULES]
    folder = REPO / "flashinfer" / "experimental"
    features = {p.parent.name for p in folder.glob("*/__init__.py")}
    experimental = {b for op in ops for b in op.experimental_backends}
    # A name that is also some op's stable backend is ambiguous in a string: not counted.
    stable = {b for op in ops for b in op.stable_backends}
    return Shipped(frozenset(experimental - stable), frozenset(features))


def _names_a_feature(text: str, features: frozenset[str]) -> bool:
    """``flashinfer.experimental.<feature>`` or ``flashinfer/experimental/<feature>`` of a
    shipped feature, anywhere in ``text`` (module paths, file paths, code for a subprocess).
    The namespace alone, and made-up features of a fixture, name nothing that can go away."""
    for match in re.finditer(r"flashinfer[./]experimental[./](\w+)", text):
        if match[1] in features:
            return True
    return False


def _names_a_backend(text: str, backends: frozenset[str]) -> bool:
    """The string holds a shipped experimental backend's name as a word of its own (the
    name, ``backend='x'``, ``[backend=x]``, a list's repr, a pattern for a table row)."""
    words = set(re.findall(r"\w+", text))
    return not words.isdisjoint(backends)


def experimental_mentions(source: str, filename: str, shipped: Shipped) -> list[str]:
    """``file:line: what`` for each import of, or string naming, shipped experimental code."""
    found: list[tuple[int, str]] = []

    def flag(node: ast.AST, what: str) -> None:
        line = getattr(node, "lineno", 0)
        found.append((line, f"{filename}:{line}: {what}; {ADVICE}"))

    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            # The bare namespace re-exports the markers and imports no feature (policy,
            # "Containment"): it stays whichever feature goes, so only features count.
            for alias in node.names:
                if _names_a_feature(alias.name, shipped.features):
                    flag(node, f"imports {alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if _names_a_feature(node.module, shipped.features):
                flag(node, f"imports from {node.module}")
            elif node.module == EXPERIMENTAL:
                for alias in node.names:
                    if alias.name in shipped.features:
                        flag(node, f"imports {EXPERIMENTAL}.{alias.name}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if _names_a_feature(node.value, shipped.features):
                flag(node, f"names experimental code: {node.value[:60]!r}")
            elif _names_a_backend(node.value, shipped.backends):
                flag(node, f"names an experimental backend: {node.value[:60]!r}")
    return [text for _, text in sorted(found)]


def test_stable_tests_never_name_shipped_experimental_code() -> None:
    shipped = shipped_experimental_code()
    found = []
    for path in sorted((REPO / "tests").glob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        found += experimental_mentions(path.read_text(encoding="utf-8"), rel, shipped)
    assert not found, "\n".join(found)


FIXTURE = """
import flashinfer.experimental
from flashinfer.experimental import experimental_backend
import flashinfer.experimental.fastk_gemm.support
from flashinfer.experimental.fastk_gemm import support
from flashinfer.experimental import fastk_gemm
from flashinfer.experimental.made_up import kernel
CODE = "import flashinfer.experimental.fastk_gemm.kernel"
PATH = "flashinfer/experimental/fastk_gemm/support.py"
MADE_UP = "flashinfer.experimental.made_up.support"
assert "fastk" not in op.suitable_auto_backends
op(a, b, backend="fastk")
FEATURE = "flashinfer.gemm.mm[backend=fastk]"
ROW = r"fastk +experimental +yes"
LINE = "experimental left out: ['fastk']"
FINE = ("fastk_gemm", "split_k", "fastkernel", "backend='torch'")
"""


def test_the_guard_names_each_mention_with_its_line_and_what_to_do() -> None:
    shipped = Shipped(frozenset({"fastk"}), frozenset({"fastk_gemm"}))
    found = experimental_mentions(FIXTURE, "tests/test_fixture.py", shipped)
    lines = ["4", "5", "6", "8", "9", "11", "12", "13", "14", "15"]
    assert [line.split(":")[1] for line in found] == lines
    assert all(line.startswith("tests/test_fixture.py:") for line in found)
    assert all(line.endswith(ADVICE) for line in found)
    assert "imports flashinfer.experimental.fastk_gemm.support;" in found[0]
    assert "names an experimental backend: 'fastk'" in found[5]
    # Nothing shipped: every line names code that cannot go away, and nothing is found.
    assert experimental_mentions(FIXTURE, "x.py", Shipped(frozenset(), frozenset())) == []


def test_the_guard_knows_what_the_package_ships() -> None:
    shipped = shipped_experimental_code()
    import flashinfer

    assert shipped.backends >= set(flashinfer.mm.experimental_backends)
    assert all((REPO / "flashinfer" / "experimental" / f).is_dir() for f in shipped.features)
