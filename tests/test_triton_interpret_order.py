"""``TRITON_INTERPRET`` changed after ``import triton`` (a notebook's usual order): Triton
decided its mode at import, so the report, ``explain`` and the support checkers say the
Triton backends cannot run here, and ``"auto"`` skips them (issue 21, item 20).

Each case is a fresh process, since the order of the import and the variable is the point.
The property: whatever the variable at ``import triton`` and whatever it is at the call,
the probe's answer and a real call agree (the probe says yes: the kernel runs and matches
torch; the probe says no: the call is refused with the probe's words, never an
``InterpreterError``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SET_AFTER = "cannot run here: TRITON_INTERPRET was set after triton was imported"
RESTART = "restart with it set first"


def _python(code: str, at_import: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    if at_import is not None:
        env["TRITON_INTERPRET"] = at_import
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_set_after_import_is_reported_everywhere_and_auto_skips_triton():
    code = """
        import io, json, os
        import triton  # first, as a notebook does
        os.environ["TRITON_INTERPRET"] = "1"
        import torch
        import flashinfer
        from flashinfer.cli import main
        from flashinfer.cli.backends import backends_report

        found = {}
        report = backends_report()
        found["at_import"] = report["triton_interpret_at_import"]
        from flashinfer.dispatch.families import family_of
        from flashinfer.dispatch.op import registered_ops

        ops = {op.api_key: op for op in registered_ops()}
        checker = lambda a, b: ops[a["qualified_name"]].backend_checks[b["name"]]
        found["rows"] = [
            [b["reason"], family_of(checker(a, b)).needs_triton]
            for a in report["apis"]
            for b in a["backends"]
            if a["qualified_name"] in ops
        ]
        a, b = torch.randn(8, 16), torch.randn(16, 4)
        found["explain"] = flashinfer.mm.explain(a, b).verdict("triton").why_not
        try:
            flashinfer.mm(a, b, backend="triton")
            found["named"] = "ran"
        except Exception as exc:
            found["named"] = f"{type(exc).__name__}: {exc}"
        with flashinfer.use_backends(mm=["triton", "torch"]):
            c = flashinfer.mm(a, b)
            found["auto"] = list(flashinfer.mm.suitable_auto_backends)
        found["auto_correct"] = bool(torch.allclose(c, a @ b, atol=1e-5))
        import contextlib
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            found["cli"] = main(["explain", "rmsnorm", "--shapes", "4x8", "--json"])
        found["cli_explain"] = json.loads(out.getvalue())
        table = io.StringIO()
        with contextlib.redirect_stdout(table):
            main(["backends"])
        found["table"] = table.getvalue()
        print(json.dumps(found, default=str))
    """
    proc = _python(code, at_import=None)
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout.splitlines()[-1])
    assert found["at_import"] is False
    # Every backend that needs Triton says why not, in those words; the others run.
    assert any(needs_triton for _, needs_triton in found["rows"])
    for reason, needs_triton in found["rows"]:
        assert reason == (SET_AFTER if needs_triton else None)
    assert SET_AFTER in found["explain"] and RESTART in found["explain"]
    assert SET_AFTER in found["named"] and "InterpreterError" not in found["named"]
    assert found["auto"] == ["torch"] and found["auto_correct"]
    assert found["cli"] == 0
    [rmsnorm] = found["cli_explain"]
    verdicts = {v["backend"]: v for v in rmsnorm["verdicts"]}
    assert not verdicts["triton"]["can_run"] and SET_AFTER in verdicts["triton"]["why_not"]
    # The report's TRITON_INTERPRET line says it too, with what to do.
    lines = found["table"].splitlines()
    line = next(i for i, t in enumerate(lines) if t.lstrip().startswith("TRITON_INTERPRET"))
    below = lines[line + 1]
    assert "set after triton was imported" in below and RESTART in below


PROPERTY = """
    import os, json
    import triton
    import torch
    import flashinfer
    from flashinfer.kernels.availability import triton_unavailable

    a, b = torch.randn(8, 16), torch.randn(16, 4)
    results = []
    for now in (None, "1", "0", "true", "1", None):
        if now is None:
            os.environ.pop("TRITON_INTERPRET", None)
        else:
            os.environ["TRITON_INTERPRET"] = now
        problem = triton_unavailable("cpu")
        try:
            c = flashinfer.mm(a, b, backend="triton")
            outcome = "ran" if torch.allclose(c, a @ b, atol=1e-4) else "wrong result"
        except Exception as exc:
            outcome = f"{type(exc).__name__}: {exc}"
        results.append([now, None if problem is None else str(problem), outcome])
    print(json.dumps(results))
"""


@pytest.mark.parametrize("at_import", [None, "1", "0"])
def test_the_probe_and_a_call_agree_whatever_the_order(at_import):
    proc = _python(PROPERTY, at_import)
    assert proc.returncode == 0, proc.stderr
    for now, problem, outcome in json.loads(proc.stdout.splitlines()[-1]):
        case = f"TRITON_INTERPRET={at_import!r} at import, {now!r} at the call"
        if problem is None:
            assert outcome == "ran", f"{case}: the probe said yes, the call gave {outcome}"
        else:
            assert outcome != "ran" and problem in outcome, f"{case}: {problem} / {outcome}"
            assert "InterpreterError" not in outcome, case
        if at_import != "1" and now == "1":
            assert problem is not None and problem.startswith(SET_AFTER), case
        if at_import == "1" and now == "1":
            assert problem is None, case  # the order a script uses: Triton runs
