"""Shared test set-up for both lanes (tests/ and tests/experimental/)."""

from __future__ import annotations

import os
import sys

# Triton kernels run on CPU tensors through the interpreter when there is no GPU. The
# variable must be set before triton is first imported, hence here, before any test module.
try:
    import torch

    _HAS_CUDA = torch.cuda.is_available()
except ImportError:  # pragma: no cover - torch is a hard dependency
    _HAS_CUDA = False
if not _HAS_CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")

import conformance_scope  # noqa: E402
import hypothesis_profiles  # noqa: E402
import pytest  # noqa: E402
from compile_spies import ran  # noqa: E402, F401 - the fixture: backends run by compiled calls

import flashinfer  # noqa: E402
import flashinfer.gating.op_registry as registry  # noqa: E402
from flashinfer.dispatch.restrictions import reset_block_flags  # noqa: E402

# Deterministic Hypothesis draws under CI; loaded before any test module builds its settings.
hypothesis_profiles.load_for(os.environ)


def pytest_addoption(parser: pytest.Parser) -> None:
    conformance_scope.add_option(parser)  # --conformance-scope API[:BACKEND]


def slow_modules_first(items: list[pytest.Item]) -> None:
    """Move the modules that hold a test marked ``slow`` to the front, each whole (a module's
    fixture is set up once) and in their order, the rest keeping theirs."""
    slow = {item.nodeid.split("::")[0] for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.nodeid.split("::")[0] not in slow)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    conformance_scope.select(config, items)
    if hasattr(config, "workerinput"):  # an xdist worker (not a pytest it started)
        # On xdist workers (scripts/ci/run_lane.sh): a minutes-long test started last would
        # hold the lane's end while the other workers wait; started first, it runs beside them.
        slow_modules_first(items)
    if _HAS_CUDA:
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (gpu marker); none is available")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The overlap attacks collection left out (they could not be built), counted with why;
    a ``--conformance-scope`` run's cases left out, counted with why."""
    scoped = conformance_scope.summary(terminalreporter.config)
    if scoped:
        terminalreporter.write_sep("-", "conformance scope")
        terminalreporter.write_line(scoped)
    testing = sys.modules.get("flashinfer.testing")  # not imported: no attack was collected
    summary = testing.unbuilt_overlap_summary() if testing is not None else ""
    if summary:
        terminalreporter.write_sep("-", "overlap attacks not built")
        terminalreporter.write_line(summary)


@pytest.fixture(autouse=True)
def _fresh_experimental_state(monkeypatch: pytest.MonkeyPatch):
    """Each test starts with no 'already warned' records, the gate and the warning switch unset."""
    monkeypatch.delenv("FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS", raising=False)
    # A developer's exported escalation would otherwise turn every pytest.warns into an error.
    monkeypatch.delenv("FLASHINFER_EXPERIMENTAL_WARNINGS", raising=False)
    flashinfer.reset_experimental_warnings()
    yield
    flashinfer.reset_experimental_warnings()


@pytest.fixture(autouse=True)
def _no_noisy_retiming():
    """Tests time fake runners of a few microseconds on a loaded CI machine: their spread is
    noise by nature, and a saved pick called noisy would be timed again when loaded (issue
    34, item 17), making every test that checks reuse depend on the machine's load.  So no
    measurement is noisy unless a test sets ``AutoTuner.noisy_spread`` itself (the tests of
    noisy picks do, tests/test_autotune_block_report.py)."""
    import math

    from flashinfer.autotuner import AutoTuner

    tuner = AutoTuner.get()
    saved, tuner.noisy_spread = tuner.noisy_spread, math.inf
    yield
    tuner.noisy_spread = saved


@pytest.fixture(autouse=True)
def _fresh_block_flags():
    """Each test starts with no API's block flag set: a ``use_backends`` block in an earlier
    test would otherwise keep that API's compiled calls opaque (the flag stays set)."""
    reset_block_flags()
    yield


@pytest.fixture
def isolated_op_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ops built by a test stay out of the process-wide registry (CLI listings, the API
    inventory's views, ``use_backends``' names).  The package's APIs are loaded first: one
    first imported during the test would otherwise register into the copy and vanish."""
    flashinfer.load_all_apis()
    monkeypatch.setattr(registry, "_registry", dict(registry._registry))


@pytest.fixture(scope="session")
def mypy_cache(tmp_path_factory: pytest.TempPathFactory):
    """One mypy cache for the session (tests/mypy_runner.py): the first run reads torch's
    annotations, which takes seconds."""
    return tmp_path_factory.mktemp("mypy-cache")
