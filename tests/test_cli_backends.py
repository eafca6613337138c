"""``flashinfer backends``: an environment report that tells the truth.

What it says can run is what a call can run: a Triton backend's row and its checker both ask
the probe in :mod:`flashinfer.kernels.availability`.  The probe is tested here with the
interpreter's own dependency (numpy) and Triton itself blocked by an import hook, in a
subprocess, so the report and a real call are compared on a machine that lacks them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from throwaway_experimental import shipped_experimental, throwaway

import flashinfer
from flashinfer.cli import main
from flashinfer.kernels import availability, triton_device_reason

GATE = "FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS"
TRITON_ROWS = [
    ("flashinfer.mm", "triton"),
    ("flashinfer.rmsnorm", "triton"),
]


def run(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if k not in (GATE, "TRITON_INTERPRET")}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=full_env
    )


# The command in one fresh interpreter (the test process has imported triton under the
# interpreter, which the report would rightly call out): each run prints its own report.
# The report reads the environment on each call and imports neither triton nor numpy (checked
# after each run), so one interpreter stands for one fresh process per setting.  It ends
# with the comparison of report and calls that _compare makes, nothing blocked.
CLI_RUNS = """
import contextlib, io, json, os, sys
import flashinfer.cli as c
from flashinfer.kernels import availability

def report(args, env):
    for name in ("TRITON_INTERPRET", "FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS"):
        os.environ.pop(name, None)
    os.environ.update(env)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = c.main(args)
    return {"code": code, "out": buf.getvalue(), "imported": "triton" in sys.modules}

runs = {
    "interpreter_0": report(["backends"], {"TRITON_INTERPRET": "0"}),
    "unset": report(["backends"], {}),
    "json": report(["backends", "--json"], {GATE: "1", "TRITON_INTERPRET": "1"}),
}
assert availability._find_problem("triton") is None
runs["find_problem_imported"] = "triton" in sys.modules
# Then the report and real calls, with the interpreter on (what _compare runs, unblocked).
os.environ.pop(GATE, None)
os.environ["TRITON_INTERPRET"] = "1"
import warnings
warnings.simplefilter("ignore")
""".replace("GATE", repr(GATE))


def _cli_runs_script() -> str:
    compare = COMPARE.format(blocked="a_module_nobody_imports")
    return CLI_RUNS + compare + '\nruns["compared"] = compared\nprint(json.dumps(runs))\n'


@pytest.fixture(scope="module")
def cli_runs() -> dict:
    proc = run(_cli_runs_script())
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def cli(runs: dict, name: str) -> str:
    result = runs[name]
    assert result["code"] == 0 and not result["imported"], result
    return result["out"]


# --------------------------------------------------------------------------------------
# The report
# --------------------------------------------------------------------------------------


def test_table_reports_versions_devices_interpreter_and_gate(cli_runs):
    out = cli(cli_runs, "interpreter_0")
    lines = out.splitlines()
    # The header (at most 3 lines), the table, then the details: versions one per line.
    table = next(i for i, line in enumerate(lines) if line.startswith("API "))
    assert table <= 4 and lines[0].startswith("flashinfer ")
    fields = {line.split()[0] for line in lines[table:] if line.strip()}
    for field in ("flashinfer", "python", "torch", "triton", "numpy"):
        assert field in fields, out
    assert torch.__version__ in out
    assert "  TRITON_INTERPRET='0': Triton kernels need CUDA tensors" in lines[table:]
    assert lines[1] == f"experimental gate: {GATE}=unset -> off"
    if not torch.cuda.is_available():
        assert "cpu only (no CUDA device)" in out
    else:
        name = torch.cuda.get_device_name(0)
        assert name in out and "compute capability" in out
    assert all(len(line) <= 100 for line in lines), max(lines, key=len)


def test_table_names_apis_as_users_call_them_one_row_per_backend(cli_runs):
    lines = cli(cli_runs, "unset").splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("API "))
    assert lines[header].split() == ["API", "BACKEND", "KIND", "RUNS", "HERE"]
    rows = [line.split(None, 3) for line in lines[header + 1 :] if line.startswith("flashinfer.")]
    backends = {(r[0], r[1]): r for r in rows}
    assert ("flashinfer.mm", "torch") in backends and ("flashinfer.rmsnorm", "torch") in backends
    # Each backend's kind is the op's (experimental rows of a throwaway op: below).
    for op in (flashinfer.mm, flashinfer.rmsnorm):
        for name in op.backend_checks:
            kind = "experimental" if name in op.experimental_backends else "stable"
            assert backends[(f"flashinfer.{op.api_name}", name)][2] == kind
    assert not any("gemm." in line or "not dispatched" in line for line in lines)
    if not torch.cuda.is_available():
        # No interpreter here: each Triton row gives the short reason and points at the
        # advice, which is printed once below the table.
        for key in TRITON_ROWS:
            assert backends[key][3] == "no: on CPU, needs TRITON_INTERPRET=1 [1]"
        notes = [line for line in lines if line.startswith("[")]
        assert len(notes) == 1 and notes[0].startswith("[1] set it before triton is imported")


def test_json_carries_the_same_facts(cli_runs):
    doc = json.loads(cli(cli_runs, "json"))
    assert set(doc["versions"]) == {
        "flashinfer",
        "python",
        "torch",
        "torch_cuda",
        "torch_hip",
        "triton",
        "numpy",
    }
    assert doc["versions"]["torch"] == torch.__version__
    assert doc["triton_interpret"] == "1"
    assert doc["gate"] == {"variable": GATE, "value": "1", "on": True, "note": None}
    apis = {a["api"]: a for a in doc["apis"]}
    assert apis["flashinfer.mm"]["qualified_name"] == "flashinfer.gemm.mm"
    mm = {b["name"]: b for b in apis["flashinfer.mm"]["backends"]}
    assert mm["torch"] == {
        "name": "torch",
        "experimental": False,
        "runnable": True,
        "reason": None,
        "advice": None,
        "graduated_in": None,
    }
    assert mm["triton"]["runnable"] is True  # the interpreter is on and numpy imports
    for name, row in mm.items():
        assert row["experimental"] is (name in flashinfer.mm.experimental_backends)
    _, experimental_apis = shipped_experimental()
    assert {a["qualified_name"] for a in doc["apis"] if a["experimental"]} == experimental_apis
    if not torch.cuda.is_available():
        assert doc["devices"] == [] and doc["compute_capability"] is None


def test_table_marks_experimental_backends_and_apis(monkeypatch, capsys):
    made = throwaway(monkeypatch)
    assert main(["backends"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = {tuple(r[:2]): r for r in (line.split(None, 3) for line in lines) if len(r) == 4}
    assert rows[(made.op.api_key, "plain")][2] == "stable"
    assert rows[(made.op.api_key, "trial")][2] == "experimental"
    api = rows[(made.api_feature, "-")]
    assert api[2] == "experimental" and "API" in api[3]


def test_unrecognised_gate_value_is_reported_with_its_raw_value(monkeypatch, capsys):
    monkeypatch.setenv(GATE, "yes")
    assert main(["backends"]) == 0
    out = capsys.readouterr().out
    assert f"{GATE}='yes' -> off" in out and "unrecognised value" in out


# --------------------------------------------------------------------------------------
# The probe: the report and a call agree when a dependency is out of reach
# --------------------------------------------------------------------------------------

BLOCK = """
import sys

class _Block:
    # An import hook that makes `blocked` unimportable, as on a machine without it.
    blocked = None

    def find_spec(self, name, path=None, target=None):
        if self.blocked and (name == self.blocked or name.startswith(self.blocked + ".")):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

_hook = _Block()
sys.meta_path.insert(0, _hook)
"""

COMPARE = """
import io, json
import torch
import flashinfer
from flashinfer.cli import main

buf = io.StringIO()
sys.stdout, real = buf, sys.stdout
main(["backends", "--json"])
sys.stdout = real
apis = json.loads(buf.getvalue())["apis"]
report = {{a["api"]: {{b["name"]: b for b in a["backends"]}} for a in apis}}

calls = {{}}
a, b = torch.randn(8, 1024), torch.randn(1024, 4)
x, w = torch.randn(4, 32), torch.ones(32)
for api, backend, call in [
    ("flashinfer.mm", "triton", lambda: flashinfer.mm(a, b, backend="triton")),
    ("flashinfer.rmsnorm", "triton", lambda: flashinfer.rmsnorm(x, w, backend="triton")),
]:
    try:
        call()
        calls[api + ":" + backend] = None
    except Exception as exc:
        calls[api + ":" + backend] = {{"value_error": isinstance(exc, ValueError), "msg": str(exc)}}
# backend="auto" still works: it picks the torch backend.
assert torch.allclose(flashinfer.mm(a, b), a @ b, atol=1e-3)
assert torch.allclose(
    flashinfer.rmsnorm(x, w), x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6), atol=1e-5
)
loaded = {blocked!r} in sys.modules
compared = {{"report": report, "calls": calls, "blocked_loaded": loaded}}
"""


BLOCKED = ("numpy", "triton")


@pytest.fixture(scope="module")
def blocked_runs() -> dict[str, dict]:
    """The comparison with each dependency blocked in turn, in one interpreter: a blocked
    module is never imported (checked), so the probe, forgotten between the two, finds the
    next one missing as a machine without it would."""
    driver = "results = {}\n"
    for blocked in BLOCKED:  # blocked before anything imports it
        driver += f"_hook.blocked = {blocked!r}\n"
        driver += "from flashinfer.kernels import reset_probe\nreset_probe()\n"
        driver += f"exec({COMPARE.format(blocked=blocked)!r})\nresults[{blocked!r}] = compared\n"
    proc = run(
        BLOCK + driver + "print(json.dumps(results))",
        env={"TRITON_INTERPRET": "1", "PYTHONWARNINGS": "ignore"},
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU interpreter's imports")
@pytest.mark.parametrize(
    ("blocked", "reason", "advice"),
    [
        ("numpy", "the Triton interpreter needs numpy", "pip install numpy"),
        ("triton", "Triton is not installed", "pip install triton"),
    ],
)
def test_report_and_call_agree_when_a_dependency_is_missing(blocked_runs, blocked, reason, advice):
    result = blocked_runs[blocked]
    assert not result["blocked_loaded"]
    for api, backend in TRITON_ROWS:
        row = result["report"][api][backend]
        assert row["runnable"] is False
        assert row["reason"].startswith(reason), row
        assert row["advice"] == advice
        error = result["calls"][f"{api}:{backend}"]
        # The call is refused before any kernel runs, with the report's reason and advice.
        assert error is not None and error["value_error"], error
        assert row["reason"] in error["msg"] and advice in error["msg"], error


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU interpreter's imports")
def test_report_and_call_agree_when_everything_is_there(cli_runs):
    result = cli_runs["compared"]  # the end of the reports' interpreter: nothing blocked
    for api, backend in TRITON_ROWS:
        assert result["report"][api][backend]["runnable"] is True
        assert result["calls"][f"{api}:{backend}"] is None


# --------------------------------------------------------------------------------------
# The probe in-process: each answer, and that it is cached per device and setting
# --------------------------------------------------------------------------------------


@pytest.fixture
def fresh_probe(monkeypatch):
    """A probe with no answers yet, in a process that has not imported Triton (the mode
    Triton was imported in, and a variable changed since: tests/test_triton_interpret_order.py)."""
    availability.reset_probe()
    monkeypatch.setattr(availability, "_TRITON_LIBRARY", ("not_imported.standard", "cdiv"))
    yield
    monkeypatch.undo()
    availability.reset_probe()


def test_probe_answers_per_device_kind_and_interpreter_setting(monkeypatch, fresh_probe):
    imported: list[str] = []

    def fake_problem(module: str) -> str | None:
        imported.append(module)
        return None

    monkeypatch.setattr(availability, "_find_problem", fake_problem)
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    cpu_off = availability.triton_unavailable("cpu")
    assert cpu_off is not None and "TRITON_INTERPRET=1" in cpu_off.reason
    assert imported == []  # nothing to import when the interpreter is off
    assert availability.triton_unavailable("cuda") is None
    assert imported == ["triton"]
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert availability.triton_unavailable("cpu") is None
    assert imported == ["triton", "triton", *availability.INTERPRETER_IMPORTS]
    availability.triton_unavailable("cuda")  # a new (device, setting) pair: probed
    seen = len(imported)
    for _ in range(3):
        availability.triton_unavailable("cpu")
        availability.triton_unavailable("cuda")
    assert len(imported) == seen  # each answer is cached
    other = availability.triton_unavailable("mps")
    assert other is not None and "'mps'" in other.reason


def test_probe_reports_a_broken_install_with_the_error(monkeypatch, fresh_probe):
    def broken(module: str) -> str | None:
        return "RuntimeError: CUDA driver mismatch" if module == "triton" else None

    monkeypatch.setattr(availability, "_find_problem", broken)
    problem = availability.triton_unavailable("cuda")
    assert problem is not None
    assert problem.reason == "Triton cannot be imported (RuntimeError: CUDA driver mismatch)"
    assert "pip install --force-reinstall triton" in problem.fix
    assert str(problem) == f"{problem.reason}; {problem.fix}"


@pytest.mark.parametrize(
    ("problems", "reason", "fix"),
    [
        # Triton imports numpy itself under the interpreter: named as numpy's absence.
        (
            {"triton": "ModuleNotFoundError: No module named 'numpy'"},
            "the Triton interpreter needs numpy, which is not installed",
            "pip install numpy",
        ),
        (
            {"numpy": "ModuleNotFoundError: No module named 'numpy.core'"},
            "the Triton interpreter needs numpy, which is not installed",
            "pip install numpy",
        ),
        (
            {"numpy": "ImportError: numpy is built for another Python"},
            "the Triton interpreter needs numpy, which cannot be imported "
            "(ImportError: numpy is built for another Python)",
            "reinstall it: pip install --force-reinstall numpy",
        ),
        (
            {"triton": "ModuleNotFoundError: No module named 'triton'"},
            "Triton is not installed",
            "pip install triton",
        ),
        (
            {"triton": "ModuleNotFoundError: No module named 'something_else'"},
            "Triton cannot be imported (ModuleNotFoundError: No module named 'something_else')",
            "reinstall it: pip install --force-reinstall triton",
        ),
    ],
)
def test_probe_names_what_is_missing_and_the_fix(monkeypatch, fresh_probe, problems, reason, fix):
    monkeypatch.setattr(availability, "_find_problem", problems.get)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    problem = availability.triton_unavailable("cpu")
    assert problem == availability.TritonUnavailable(reason, fix)


def test_find_problem_asks_the_real_import_system_without_importing(cli_runs):
    assert availability._find_problem("json") is None
    problem = availability._find_problem("no_such_module_anywhere")
    assert problem == "ModuleNotFoundError: No module named 'no_such_module_anywhere'"
    # In a process that never imported triton: the probe finds it without importing it.
    assert cli_runs["find_problem_imported"] is False, "the probe imported triton"


def test_checkers_give_the_probe_answer_on_a_call(monkeypatch, fresh_probe):
    import flashinfer

    monkeypatch.setattr(
        availability,
        "_probed",
        {
            ("cpu", True): availability.TritonUnavailable("probe says no", "do the thing"),
            ("cpu", False): availability.TritonUnavailable("probe says no", "do the thing"),
        },
    )
    x, w = torch.randn(2, 8), torch.ones(8)
    with pytest.raises(ValueError, match="probe says no; do the thing"):
        flashinfer.rmsnorm(x, w, backend="triton")
    a, b = torch.randn(4, 8), torch.randn(8, 4)
    with pytest.raises(ValueError, match="probe says no; do the thing"):
        flashinfer.mm(a, b, backend="triton")
    flashinfer.mm(a, b)  # auto: the probe's "no" leaves triton out of the candidates
    assert list(flashinfer.mm.suitable_auto_backends) == ["torch"]


# --------------------------------------------------------------------------------------
# What a row knows of a backend: the family its checker declares, never a guess
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def family_op():
    """A throwaway op whose backends declare each family, and one that declares none."""
    from flashinfer.backend_dispatch import backend_requirement, supported_compute_capability
    from flashinfer.backend_families import TORCH, TRITON, backend_family

    @backend_family(TRITON)
    def check_declared_triton(x):
        return True  # never names triton_device_reason: the declaration is what counts

    @backend_family(TORCH)
    def check_declared_torch(x):
        # Names it (a global, as in the package's Triton checkers), yet is a torch backend.
        return triton_device_reason is not None

    @supported_compute_capability(TORCH.compute_capabilities, cpu=True)
    def check_undeclared(x):
        return True

    @backend_requirement(
        {
            "declared_triton": check_declared_triton,
            "declared_torch": check_declared_torch,
            "undeclared": check_undeclared,
        }
    )
    def family_probe_op(x, backend="auto"):
        return x

    assert "triton_device_reason" not in check_declared_triton.__code__.co_names
    assert "triton_device_reason" in check_declared_torch.__code__.co_names
    return family_probe_op


def _probe_says_no(monkeypatch):
    no = availability.TritonUnavailable("probe says no", "do the thing")
    monkeypatch.setattr(
        availability, "_probed", {(d, i): no for d in ("cpu", "cuda") for i in (True, False)}
    )


def test_report_reads_the_declared_family_not_the_checker_code(monkeypatch, family_op):
    from flashinfer.cli.backends import _UNDECLARED_ADVICE, _UNDECLARED_REASON, backends_report

    _probe_says_no(monkeypatch)
    entry = next(a for a in backends_report()["apis"] if a["qualified_name"] == family_op.api_key)
    rows = {b["name"]: b for b in entry["backends"]}
    assert rows["declared_triton"] == {
        "name": "declared_triton",
        "experimental": False,
        "runnable": False,
        "reason": "probe says no",
        "advice": "do the thing",
        "graduated_in": None,
    }
    assert rows["declared_torch"]["runnable"] is True
    assert rows["declared_torch"]["reason"] is None
    # Undeclared: whether it needs Triton is unknown, so whether it runs is too.
    assert rows["undeclared"]["runnable"] is None
    assert rows["undeclared"]["reason"] == _UNDECLARED_REASON
    assert rows["undeclared"]["advice"] == _UNDECLARED_ADVICE
    assert "@backend_family(TRITON)" in _UNDECLARED_ADVICE


def test_a_capability_refusal_is_a_no_whatever_the_family(monkeypatch, family_op):
    from flashinfer.cli.backends import backend_runnable

    _probe_says_no(monkeypatch)
    for backend in family_op.backend_checks:
        runnable, reason, _ = backend_runnable(family_op, backend, 50)  # below every family's list
        assert runnable is False and reason is not None and "50" in reason, (backend, reason)


def test_table_says_unknown_for_an_undeclared_backend():
    from flashinfer.cli.backends import api_rows, fit_rows

    report = {
        "apis": [
            {
                "api": "x.op",
                "experimental": False,
                "backends": [
                    {"name": "a", "experimental": False, "runnable": None, "reason": "r"}
                    | {"advice": "declare it"},
                    {"name": "b", "experimental": False, "runnable": False, "reason": "why"}
                    | {"advice": None},
                    {"name": "c", "experimental": False, "runnable": True, "reason": None}
                    | {"advice": None},
                ],
            }
        ]
    }
    rows, notes = api_rows(report)
    assert [r[-1] for r in rows[1:]] == ["unknown: r [1]", "no: why", "yes"]
    assert notes == ["declare it"]
    long = [rows[0], ("x.op", "a", "stable", "unknown: " + "u" * 120)]
    long.append(("x.op", "b", "stable", "no: " + "n" * 120))
    fitted_notes: list[str] = []
    fitted = fit_rows(long, fitted_notes)
    assert [r[-1] for r in fitted[1:]] == ["unknown: see [1]", "no: see [2]"]
    assert fitted_notes == ["u" * 120, "n" * 120]


def test_table_of_a_process_with_an_undeclared_backend(monkeypatch, capsys, family_op):
    _probe_says_no(monkeypatch)
    assert main(["backends"]) == 0
    out = capsys.readouterr().out
    rows = [line.split(None, 3) for line in out.splitlines() if family_op.api_key in line]
    verdicts = {r[1]: r[3] for r in rows}
    assert verdicts["declared_torch"] == "yes"
    assert verdicts["declared_triton"].startswith("no: ")
    assert verdicts["undeclared"].startswith("unknown: ")
    assert "declares no backend family" in out
