"""The verdict cache: a repeated call signature is decided by a lookup (issue 20).

The shipped ops' real checks (common check, support checkers, heuristic, preferences) are
put behind *twin* ops whose bodies and runners report what would run instead of running a
kernel, so that calls can use tensors of more than 2**31 elements (a lazily allocated
storage, never touched) and every checker's limits.  The property: a call served from the
cache does what the uncached reference path (``op.call_reference``) does, the same backend,
error, records and warnings, while the gate, ``TRITON_INTERPRET``, the restriction and the
tuner's table change between calls.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
import sys
import tracemalloc
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch.utils._python_dispatch import TorchDispatchMode

import flashinfer
from flashinfer.autotuner import AutoTuner, autotune
from flashinfer.backend_dispatch import Backend, backend_requirement
from flashinfer.dispatch.verdicts import MAX_PATTERNS, reads_environment, reads_tensor_data
from flashinfer.kernels import INT32_MAX, reset_probe
from flashinfer.settings import forget_unrecognised_values

GATE = "FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS"
INTERPRET = "TRITON_INTERPRET"
_ids = itertools.count()

# Virtual memory only: nothing reads or writes it (the twins never run a kernel).
BIG = torch.empty(INT32_MAX + 8192, dtype=torch.float16)


# --------------------------------------------------------------------------------------
# Twins of the shipped ops
# --------------------------------------------------------------------------------------


class Reporter:
    """A runner that says what ran instead of running it."""

    def __init__(self, name: str, delay_s: float = 0.0) -> None:
        self.name, self.delay_s = name, delay_s

    def tactic_space(self) -> list[Any]:
        return [None]

    def tactics(self, inputs: tuple) -> list[Any]:
        return [None]

    def __call__(self, inputs: Any, tactic: Any = None, *rest: Any) -> tuple:
        if self.delay_s:
            import time

            time.sleep(self.delay_s)
        return ("ran", self.name, tactic)


def twin(op: Any, *, routed: bool) -> Any:
    """An op with ``op``'s checks and table whose body reports the backend it would run;
    ``routed``: registered with the autotuner (``direct=True``), as ``mm`` is."""
    table = [
        Backend(name, check=d.check, run=Reporter(name), prefer=d.prefer)
        for name, d in op.backends.items()
    ]

    def body(*args: Any, **kwargs: Any) -> tuple:
        backend = kwargs.get("backend", "auto")
        if backend == "auto":
            backend = fn.suitable_auto_backends[0]
        return ("body", backend)

    body.__signature__ = op.dispatcher._sig.signature  # type: ignore[attr-defined]
    body.__qualname__ = body.__name__ = f"twin_{op.api_name}_{next(_ids)}"
    body.__module__ = __name__
    fn = backend_requirement(table, common_check=op.common_check, heuristic_func=op.heuristic_func)(
        body
    )
    if routed:
        # torch is made the slowest, so that tuning picks another candidate where one fits
        runners = {n: Reporter(n, 0.002 if n == "torch" else 0.0) for n in op.backends}
        AutoTuner.register(fn, runners, direct=True)
    return fn


RMSNORM = twin(flashinfer.rmsnorm, routed=False)
MM = twin(flashinfer.mm, routed=True)
# mm's experimental backend, by what the package declares (stable tests never name one).
(MM_EXPERIMENTAL,) = flashinfer.mm.experimental_backends


# --------------------------------------------------------------------------------------
# Inputs around every checker's limits
# --------------------------------------------------------------------------------------

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int32]


def _matrix(rows: int, cols: int, dtype: torch.dtype, layout: str) -> torch.Tensor:
    """A ``(rows, cols)`` tensor in ``layout``; the ``big_*`` layouts are views of BIG whose
    largest element offset is 2**31 - 1 (fits 32 bits) or 2**31 (does not)."""
    if layout.startswith("big_"):
        cols = max(cols, 1)
        stride = INT32_MAX - (cols - 1) + (1 if layout == "big_over" else 0)
        return BIG.as_strided((2, cols), (stride, 1))
    if layout == "meta":
        return torch.empty(rows, cols, dtype=dtype, device="meta")
    if layout == "transposed":
        return torch.zeros(cols, rows, dtype=dtype).t()
    if layout == "strided_cols":
        return torch.zeros(rows, cols * 2, dtype=dtype)[:, ::2]
    if layout == "expanded":
        return torch.zeros(1, cols, dtype=dtype).expand(rows, cols)
    if layout == "offset":  # one element into its storage: another alignment
        return torch.zeros(rows * cols + 1, dtype=dtype)[1:].view(rows, cols)
    if layout == "parameter":
        return torch.nn.Parameter(torch.zeros(rows, cols, dtype=dtype), requires_grad=False)
    return torch.zeros(rows, cols, dtype=dtype)


LAYOUTS = [
    "contiguous",
    "transposed",
    "strided_cols",
    "expanded",
    "offset",
    "parameter",
    "meta",
    "big_fits",
    "big_over",
]


# Each call is drawn as a spec: one choice per field.  Repeated entries weight the choices
# towards calls that run, where the verdicts that a stale cache could get wrong are.
RMSNORM_FIELDS: dict[str, list[Any]] = {
    "dtype": [torch.float32, torch.float32, torch.float16, torch.bfloat16, torch.int32],
    "rows": [3, 3, 0, 1],
    "hidden": [64, 64, 0, 1, 255],
    "layout": ["contiguous", "contiguous", *LAYOUTS],
    "weight": ["ok", "ok", "ok", "short", "dtype", "strided", "2d"],
    "out": [None, None, "ok", "shape", "input"],
    "eps": [1e-6, 1e-6, 0.0, -1.0, math.nan, True, 1],
    "backend": ["auto", "auto", "torch", "triton", "triton", "nope"],
    "skip_check": [False, False, True],
}
MM_FIELDS: dict[str, list[Any]] = {
    "dtype": [torch.float32, torch.float32, torch.float16, torch.bfloat16, torch.int32],
    "m": [8, 8, 64, 65, 0, 1],  # split-K: M <= 64
    "k": [1024, 1024, 1023, 1],  # split-K: K >= 1024
    "n": [16, 16, 0, 1],
    "a_layout": ["contiguous", "contiguous", *LAYOUTS],
    "b_layout": ["contiguous", "contiguous", "transposed", "meta"],
    "b_dtype": ["same", "same", torch.float32],
    "out_dtype": [None, None, torch.float32, torch.float16, torch.int8],
    "out": [False, False, True],
    "backend": ["auto", "auto", "torch", "triton", MM_EXPERIMENTAL, MM_EXPERIMENTAL, "nope"],
    "skip_check": [False, False, True],
}


def rmsnorm_call(spec: dict[str, Any]) -> tuple[tuple, dict]:
    x = _matrix(spec["rows"], spec["hidden"], spec["dtype"], spec["layout"])
    width, weight_kind = x.shape[-1], spec["weight"]
    wdtype = torch.float16 if weight_kind == "dtype" and x.dtype != torch.float16 else x.dtype
    if weight_kind == "short":
        w = torch.zeros(max(width - 1, 0), dtype=wdtype)
    elif weight_kind == "strided":
        w = torch.zeros(width * 2, dtype=wdtype)[::2]
    elif weight_kind == "2d":
        w = torch.zeros(1, width, dtype=wdtype)
    else:
        w = torch.zeros(width, dtype=wdtype, device=x.device)
    kwargs: dict[str, Any] = {"backend": spec["backend"]}
    if spec["out"] == "ok":
        kwargs["out"] = x if spec["layout"].startswith("big_") else torch.empty_like(x)
    elif spec["out"] == "shape":
        kwargs["out"] = torch.empty(1, dtype=x.dtype)
    elif spec["out"] == "input":
        kwargs["out"] = x
    if spec["skip_check"]:
        kwargs["skip_check"] = True
    return (x, w, spec["eps"]), kwargs


def mm_call(spec: dict[str, Any]) -> tuple[tuple, dict]:
    a = _matrix(spec["m"], spec["k"], spec["dtype"], spec["a_layout"])
    b_dtype = a.dtype if spec["b_dtype"] == "same" else spec["b_dtype"]
    b = _matrix(a.shape[1], spec["n"], b_dtype, spec["b_layout"])
    kwargs: dict[str, Any] = {"backend": spec["backend"]}
    if spec["out_dtype"] is not None:
        kwargs["out_dtype"] = spec["out_dtype"]
    if spec["out"]:
        kwargs["out"] = torch.empty(a.shape[0], b.shape[1], dtype=spec["out_dtype"] or a.dtype)
    if spec["skip_check"]:
        kwargs["skip_check"] = True
    return (a, b), kwargs


@st.composite
def call_family(draw: st.DrawFn, fields: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """A call's spec and up to three variants of it, each differing in one field: calls
    whose signatures differ in one item, which a cache keyed on too little would mix up."""
    base = {name: draw(st.sampled_from(choices)) for name, choices in fields.items()}
    family = [base]
    for _ in range(draw(st.integers(0, 3))):
        name = draw(st.sampled_from(sorted(fields)))
        family.append({**base, name: draw(st.sampled_from(fields[name]))})
    return family


# --------------------------------------------------------------------------------------
# The state that changes between calls
# --------------------------------------------------------------------------------------


@contextlib.contextmanager
def environment(**values: str | None) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in values}
    try:
        for k, v in values.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def outcome(op: Any, fn: Any, args: tuple, kwargs: dict) -> dict:
    """Everything observable about one call, from a clean per-thread and warning state."""
    state = op.dispatcher._state
    state.r.suitable = ["stale"]
    state.r.dropped = ("stale",) if op.experimental_backends else ()
    op.dispatcher._live.dropped = bool(op.experimental_backends)
    flashinfer.reset_experimental_warnings()
    forget_unrecognised_values()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result: Any = ("ok", fn(*args, **kwargs))
        except Exception as exc:  # noqa: BLE001 - the error itself is compared
            result = ("error", type(exc), str(exc))
    return {
        "result": result,
        "suitable": list(op.suitable_auto_backends),
        "dropped": list(op.dropped_experimental_backends),
        "warnings": [(w.category, str(w.message)) for w in caught],
    }


STEPS = st.tuples(
    st.sampled_from([None, "1", "1", "0", "maybe"]),  # the gate
    st.sampled_from([None, "1", "1"]),  # TRITON_INTERPRET
    st.sampled_from([None, ("torch",), ("triton", "torch"), (MM_EXPERIMENTAL, "triton")]),
    st.sampled_from(["keep", "tune", "clear"]),  # the tuner's table
)


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_cached_and_uncached_decisions_agree(data: st.DataObject) -> None:
    op = data.draw(st.sampled_from([RMSNORM, MM]), label="op")
    family = data.draw(call_family(MM_FIELDS if op is MM else RMSNORM_FIELDS), label="calls")
    calls = [(mm_call if op is MM else rmsnorm_call)(spec) for spec in family]
    op.verdict_cache.clear()
    tuner = AutoTuner.get()
    saved = (tuner.warmup, tuner.repeat)
    tuner.warmup, tuner.repeat = 1, 1
    try:
        # The calls again and again, in changing states: a verdict cached in one state
        # must not serve a call in another.
        for _ in range(data.draw(st.integers(1, 8), label="steps")):
            gate, interpret, listed, table = data.draw(STEPS, label="state")
            args, kwargs = data.draw(st.sampled_from(calls), label="call")
            with environment(**{GATE: gate, INTERPRET: interpret}):
                restriction = contextlib.nullcontext()
                if listed is not None:
                    names = [b for b in listed if b in op.backend_checks]
                    restriction = flashinfer.use_backends({op: names})  # type: ignore[assignment]
                with restriction:
                    if table == "clear":
                        tuner.clear()
                    elif table == "tune" and op is MM:
                        with warnings.catch_warnings(), autotune():
                            warnings.simplefilter("ignore")
                            with contextlib.suppress(Exception):
                                op(*args, **{k: v for k, v in kwargs.items() if k != "backend"})
                    reference = outcome(op, op.call_reference, args, kwargs)
                    for _ in range(3):  # learns the types, stores the verdict, hits it
                        cached = outcome(op, op, args, kwargs)
                    assert cached == reference, (args, kwargs)
    finally:
        tuner.warmup, tuner.repeat = saved
        tuner.clear()


# --------------------------------------------------------------------------------------
# What is cached, and what never is
# --------------------------------------------------------------------------------------


def _op(checks: dict[str, Any], **kw: Any) -> Any:
    def api(x: torch.Tensor, n: int = 0, backend: str = "auto") -> str:
        return backend if backend != "auto" else fn.suitable_auto_backends[0]

    api.__qualname__ = api.__name__ = f"api_{next(_ids)}"
    fn = backend_requirement(checks, **kw)(api)
    return fn


def _prime(fn: Any, *args: Any, **kwargs: Any) -> Any:
    fn(*args, **kwargs)  # learns the argument types
    return fn(*args, **kwargs)  # stores the verdict


def test_a_checker_that_reads_tensor_data_is_never_cached() -> None:
    def positive(x: torch.Tensor) -> bool:
        if not bool((x > 0).all()):
            raise ValueError("needs positive values")
        return True

    def anything(x: torch.Tensor) -> bool:
        return True

    ones, minus = torch.ones(4), -torch.ones(4)  # one signature, different values
    # Unmarked, "auto"'s first verdict would be reused for other values: the property the
    # mark protects.
    unmarked = _op({"pos": positive, "any": anything})
    assert _prime(unmarked, ones) == "pos"
    assert unmarked(minus) == "pos"  # stale: the data changed, "pos" cannot run it

    marked = _op({"pos": reads_tensor_data(positive), "any": anything})
    for _ in range(3):
        assert marked(ones) == "pos" and marked(minus) == "any"
        assert marked(ones, backend="pos") == "pos"
        with pytest.raises(ValueError, match="needs positive values"):
            marked(minus, backend="pos")
    assert not marked.dispatcher.verdicts_cacheable and len(marked.verdict_cache) == 0
    assert marked.explain(ones).cache is None


@pytest.mark.parametrize("where", ["common_check", "heuristic_func"])
def test_an_op_whose_common_check_or_heuristic_reads_data_caches_nothing(where: str) -> None:
    def check(x: torch.Tensor) -> bool:
        return True

    def reader(*args: Any, **kwargs: Any) -> Any:
        return args[0] if where == "heuristic_func" else True

    fn = _op({"a": check}, **{where: reads_tensor_data(reader)})
    for _ in range(3):
        fn(torch.ones(2))
        fn(torch.ones(2), backend="a")
    assert not fn.dispatcher.verdicts_cacheable and len(fn.verdict_cache) == 0
    assert fn.explain(torch.ones(2)).cache is None


def test_memory_stays_bounded_over_100000_distinct_signatures() -> None:
    fn = _op({"a": lambda x: True})
    cache = fn.verdict_cache
    x = torch.ones(2)
    tracemalloc.start()
    try:
        sizes = []
        for n in range(100_000):
            fn(x, n)  # n is part of the signature: each call a new one
            if n in (20_000, 99_999):
                sizes.append(tracemalloc.get_traced_memory()[0])
    finally:
        tracemalloc.stop()
    info = cache.info()
    assert info.size == cache.cap and info.evicted == info.stored - cache.cap
    assert info.stored == 100_000 - 1  # all but the first call (it learnt the types)
    # Full at 20,000 already: 80,000 more signatures add no memory (a little slack for
    # the interpreter's own caches).
    assert sizes[1] - sizes[0] < 256 * 1024, sizes
    # The oldest were forgotten first; the newest are served from the cache.
    assert (0, *_key_tail(fn, x, 0)) not in cache.memo
    assert "verdict cache: 4096 of 4096 call signatures" in str(fn.explain(x, 99_999))


def _key_tail(fn: Any, x: torch.Tensor, n: int) -> tuple:
    return (x.shape, x.stride(), x.dtype, x.device, n, "auto", None, None, False)


def test_a_smaller_cap_evicts_oldest_first() -> None:
    fn = _op({"a": lambda x: True})
    fn.verdict_cache.cap = 3
    x = torch.ones(2)
    for n in range(6):
        fn(x, n)
    kept = [k[5] for k in fn.verdict_cache.memo]
    assert kept == [3, 4, 5]


def test_failures_are_never_cached_and_a_later_state_change_takes_effect() -> None:
    a, b = torch.zeros(8, 1024), torch.zeros(1024, 16)
    with environment(**{INTERPRET: None}):
        for _ in range(3):
            with pytest.raises(ValueError, match="TRITON_INTERPRET"):
                MM(a, b, backend="triton")
        assert not any(k[9] == "triton" for k in MM.verdict_cache.memo)
    with environment(**{INTERPRET: "1"}):  # declared by the Triton family's checkers
        assert MM(a, b, backend="triton") == ("body", "triton")
        assert _prime(MM, a, b, backend="triton") == ("body", "triton")
    with environment(**{INTERPRET: None}), pytest.raises(ValueError, match="TRITON_INTERPRET"):
        MM(a, b, backend="triton")  # the variable is part of the signature


@pytest.mark.parametrize("declared_by", ["common_check", "checker"])
def test_an_explicit_call_follows_the_environment_its_checks_declare(declared_by: str) -> None:
    """An explicit call follows what the common check and its backend's checker declare;
    a call of the other backend is decided alike whatever the variable says."""
    var = "FLASHINFER_TEST_VERDICT_ENV"

    @reads_environment(var)
    def from_env(x: torch.Tensor, n: int = 0, backend: str = "auto") -> bool:
        if os.environ.get(var) != "1":
            raise ValueError(f"needs {var}=1")
        return True

    def anything(x: torch.Tensor) -> bool:
        return True

    if declared_by == "common_check":
        fn = _op({"a": anything, "b": anything}, common_check=from_env)
    else:
        fn = _op({"a": from_env, "b": anything})
    x = torch.ones(2)
    with environment(**{var: "1"}):
        assert _prime(fn, x, backend="a") == "a"
    with environment(**{var: None}), pytest.raises(ValueError, match=f"needs {var}=1"):
        fn(x, backend="a")
    if declared_by == "checker":
        with environment(**{var: None}):
            assert _prime(fn, x, backend="b") == "b"


def test_reset_probe_forgets_every_verdict() -> None:
    x = torch.ones(2)
    fn = _op({"a": lambda x: True})
    _prime(fn, x)
    assert len(fn.verdict_cache) == 1
    reset_probe()
    assert len(fn.verdict_cache) == 0 and fn.verdict_cache.info().cleared >= 1


def test_the_gate_and_the_restriction_are_followed_by_cached_auto_calls() -> None:
    a, b = torch.zeros(8, 1024), torch.zeros(1024, 16)
    with environment(**{INTERPRET: "1", GATE: None}):
        assert _prime(MM, a, b)[1] == "torch"
        assert MM.dropped_experimental_backends == [MM_EXPERIMENTAL]
        with environment(**{GATE: "1"}):
            _prime(MM, a, b)
            assert MM_EXPERIMENTAL in MM.suitable_auto_backends
            assert list(MM.dropped_experimental_backends) == []
        with flashinfer.use_backends({MM: ["triton"]}):
            _prime(MM, a, b)
            assert list(MM.suitable_auto_backends) == ["triton"]
        _prime(MM, a, b)
        assert MM.dropped_experimental_backends == [MM_EXPERIMENTAL]


def test_an_unrecognised_gate_value_is_read_and_warned_about_as_without_a_cache() -> None:
    a, b = torch.zeros(8, 1024), torch.zeros(1024, 16)
    with environment(**{INTERPRET: "1", GATE: "yes"}):
        for _ in range(3):
            forget_unrecognised_values()  # the warning is once per value: reset, it warns again
            with pytest.warns(RuntimeWarning, match="not a recognised value"):
                assert MM(a, b)[1] == "torch"
        assert not any(k[-3] == b"yes" for k in MM.verdict_cache.memo)


def test_argument_types_learnt_in_place_up_to_the_cap() -> None:
    fn = _op({"a": lambda x: True})
    public = fn
    code = fn.__code__
    values: list[Any] = [0, True, 1.5, "s", None, b"b", 2j, torch.float16, torch.device("cpu")]
    for v in values:
        _prime(fn, torch.ones(1), v)
    assert fn is public and fn.__code__ is not code  # the same function, new code
    assert len(fn.dispatcher._front.patterns) == MAX_PATTERNS
    before = len(fn.verdict_cache)
    assert fn(torch.ones(1), torch.device("cpu")) == "a"  # past the cap: checked, uncached
    assert len(fn.verdict_cache) == before


def test_a_named_backend_runs_its_checks_every_call() -> None:
    """Explicit calls are not cached: their two checks cost what reading the signature does
    (benchmarks/bench_call_overhead.py); "auto" calls of the same signature are."""
    seen = []

    def check(x: torch.Tensor) -> bool:
        seen.append(1)
        return True

    fn = _op({"a": check})
    x = torch.ones(2)
    for _ in range(3):
        assert fn(x, backend="a") == "a"
    assert len(seen) == 3 and len(fn.verdict_cache) == 0
    _prime(fn, x)
    seen.clear()
    assert fn(x) == "a" and seen == [] and len(fn.verdict_cache) == 1


def test_tensor_subclasses_and_lists_are_checked_every_call() -> None:
    class Sub(torch.Tensor):
        pass

    seen = []

    def check(x: torch.Tensor, n: Any = 0) -> bool:
        seen.append(1)
        return True

    fn = _op({"a": check})
    for _ in range(3):
        fn(torch.ones(2).as_subclass(Sub))
        fn(torch.ones(2), [1, 2])
    assert len(seen) == 6 and len(fn.verdict_cache) == 0


class _Ops(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: list[Any] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        self.ops.append(func)
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("listed", [None, ("triton", MM_EXPERIMENTAL)])
def test_a_cached_decision_runs_no_check_no_tensor_op_and_no_warnings_code(listed: Any) -> None:
    """Capture-safe: after the first calls of a signature, deciding it allocates no tensor,
    synchronises nothing and does not enter the warnings module (unrestricted, and under a
    restriction that lists an experimental backend, which warns once)."""
    a, b = torch.zeros(8, 1024), torch.zeros(1024, 16)
    restriction = (
        flashinfer.use_backends({MM: list(listed)}) if listed else contextlib.nullcontext()
    )
    with environment(**{INTERPRET: "1", GATE: "1"}), warnings.catch_warnings(), restriction:
        warnings.simplefilter("ignore")
        backend = "auto"
        _prime(MM, a, b, backend=backend)
        entered: list[str] = []

        def profile(frame: Any, event: str, arg: Any) -> None:
            if event == "call":
                entered.append(f"{frame.f_code.co_filename}:{frame.f_code.co_name}")

        mode = _Ops()
        with mode:
            sys.setprofile(profile)
            try:
                result = MM(a, b, backend=backend)
            finally:
                sys.setprofile(None)
    assert result[0] in ("body", "ran")
    assert mode.ops == []
    assert not [e for e in entered if "warnings" in e or "check" in e.rsplit(":", 1)[1]], entered
