"""Small fake tunable ops for the autotuner tests (not a test module).

``make_op`` builds an op through the real dispatcher (``backend_requirement``) with one
counting runner per backend, registers it with the autotuner and returns it: by default
the way :data:`DIRECT` says (``tests/test_autotuner.py`` runs every test both ways: the
body calling ``AutoTuner.run``, and the dispatcher routing auto calls to the tuner).  Each call
gets a unique qualified name, so tests never share tuned keys.  ``clean_tuner`` is the
body of the tests' autouse fixtures: short timings, no tuned results left over.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import torch

from flashinfer.autotuner import AutoTuner
from flashinfer.backend_dispatch import (
    backend_requirement,
    experimental_backend,
    reads_tensor_data,
    supported_compute_capability,
)

_ids = itertools.count()

#: ``AutoTuner.register(..., direct=DIRECT)`` for ops made without ``direct=``.
DIRECT = False


#: The timing budget of the tests' tuner: each pair is timed for a few milliseconds after
#: its first call (timing is by time, flashinfer.autotuner.timing; the default, 1 s, spends
#: about 0.125 s on a cheap pair).
TEST_BUDGET_S = 0.002


@contextlib.contextmanager
def clean_tuner(
    warmup: int, repeat: int, budget_s: float | None = TEST_BUDGET_S
) -> Iterator[AutoTuner]:
    """The autotuner with these timings and no tuned results; both, and the switch margin
    (a test may change it), restored on exit."""
    tuner = AutoTuner.get()
    saved = (tuner.warmup, tuner.repeat, tuner.budget_s, tuner.switch_margin)
    tuner.warmup, tuner.repeat, tuner.budget_s = warmup, repeat, budget_s
    tuner.clear()
    try:
        yield tuner
    finally:
        tuner.warmup, tuner.repeat, tuner.budget_s, tuner.switch_margin = saved
        tuner.clear()


class FakeRunner:
    """Counts calls; tactic ``t`` sleeps ``delays.get(t, 0)`` seconds; ``fail`` tactics raise."""

    def __init__(
        self,
        name: str,
        space: Sequence[Any] = (None,),
        delays: dict[Any, float] | None = None,
        fail: Iterable[Any] = (),
    ) -> None:
        self.name = name
        self.space = list(space)
        self.delays = delays or {}
        self.fail = list(fail)
        self.calls: list[Any] = []
        self.tactics_calls = 0

    def tactic_space(self) -> Sequence[Any]:
        return self.space

    def tactics(self, inputs: tuple) -> Sequence[Any]:
        self.tactics_calls += 1
        return self.space

    def __call__(self, inputs: tuple, tactic: Any = None) -> Any:
        self.calls.append(tactic)
        if tactic in self.fail:
            raise RuntimeError(f"{self.name} tactic {tactic!r} failed")
        delay = self.delays.get(tactic, 0.0)
        if delay:
            time.sleep(delay)
        return (self.name, tactic)


def make_op(
    runners: dict[str, FakeRunner],
    *,
    experimental: Iterable[str] = (),
    supports: Callable[[str, torch.Tensor], bool] | None = None,
    register: bool = True,
    direct: bool | None = None,
) -> Any:
    """A fake op ``op(x, backend="auto")`` whose backends are ``runners``' keys."""
    experimental = set(experimental)
    n = next(_ids)
    checks = {}
    for name in runners:

        def check(x: torch.Tensor, backend: str = "auto", *, _n: str = name) -> bool:
            return supports is None or supports(_n, x)

        check = supported_compute_capability([80, 90], cpu=True)(check)
        if supports is not None:  # it may read state a test changes: never cache its verdicts
            check = reads_tensor_data(check)
        if name in experimental:
            check = experimental_backend(owner="@tests", tracking_issue=3)(check)
        checks[name] = check

    def fake(x: torch.Tensor, backend: str = "auto") -> Any:
        if backend == "auto":
            return AutoTuner.get().run(op, runners, (x,))
        return runners[backend]((x,))

    fake.__name__ = fake.__qualname__ = f"fake_op_{n}"
    op = backend_requirement(checks)(fake)
    if register:
        AutoTuner.register(op, runners, direct=DIRECT if direct is None else direct)
    return op


class SpyRunner:
    """Delegates to a real runner and records each run's backend name in ``log``."""

    def __init__(self, name: str, runner: Any, log: list[str]) -> None:
        self.name, self.runner, self.log = name, runner, log

    def tactic_space(self) -> Any:
        return self.runner.tactic_space()

    def tactics(self, inputs: tuple) -> Any:
        return self.runner.tactics(inputs)

    def __call__(self, inputs: tuple, tactic: Any = None) -> Any:
        self.log.append(self.name)
        return self.runner(inputs, tactic)


def zeros_of(dims: Sequence[int], dtype: Any, device: Any) -> dict[str, Any]:
    """A fake op's inputs for ``--shapes N``: ``x``, zeros of shape ``(N,)``."""
    return {"x": torch.zeros(*dims)}


def declare_cli_inputs(
    monkeypatch: Any,
    op: Any,
    make: Callable[..., dict[str, Any]] = zeros_of,
    ndims: tuple[int, ...] = (1,),
    example: str = "4",
) -> None:
    """Declare ``op``'s example inputs (``flashinfer.testing.EXAMPLE_INPUTS``) for this test
    only, as an op module declares its own: ``--shapes N`` builds ``make((N,), ...)``."""
    from flashinfer.testing import EXAMPLE_INPUTS, ExampleInputs

    inputs = ExampleInputs("N", ndims, make, example, op_name=op.api_name)
    monkeypatch.setitem(EXAMPLE_INPUTS, op.api_name, inputs)


def tune_from_cli(monkeypatch: Any, runners: dict[str, Any]) -> Any:
    """A fake op (``make_op(runners)``) that ``flashinfer autotune --op <its api_name>
    --shapes N`` can tune: its inputs are zeros of shape ``(N,)``.  Returns the op."""
    op = make_op(runners)
    declare_cli_inputs(monkeypatch, op)
    return op


def script_timings(
    monkeypatch: Any, timings_ms: dict[tuple[str, Any], Any], spread: float = 0.1
) -> None:
    """Replace the tuner's timer: pair ``(backend, tactic)`` measures ``timings_ms[...]``,
    either ``median`` in ms (its IQR ``spread`` of that) or ``(median, iqr)`` in ms.  Each
    pair's runner is still called once, as the timer would."""
    from flashinfer.autotuner import timing
    from flashinfer.autotuner.timing import Median

    def fake_measure(fn: Any, inputs: Any, **kwargs: Any) -> Median:
        fn()
        value = timings_ms[(fn.func.name, fn.args[1])]
        median, iqr = value if isinstance(value, tuple) else (value, value * spread)
        return Median(median / 1e3, iqr / 1e3)

    monkeypatch.setattr(timing, "measure", fake_measure)


def tuned_choice(runners: dict[str, Any]) -> tuple[tuple[str, Any], Any]:
    """Tune a fresh fake op of ``runners`` on one call: ``((backend, tactic), record)``."""
    from flashinfer.autotuner import autotune

    op = make_op(runners)
    with autotune():
        op(torch.zeros(4))
    record = AutoTuner.get().last_tuning()
    return (record.choice.backend, record.choice.tactic), record


def ops_with_backends() -> str:
    """The ops of the one list (``flashinfer.api_modules.OPS``) that have backends, sorted
    and joined as the commands list them ("ops with backends: ...")."""
    import flashinfer
    from flashinfer.api_modules import OPS

    return ", ".join(sorted(n for n in OPS if hasattr(getattr(flashinfer, n), "dispatcher")))
