"""flashinfer.api_logging: the markers, the gate and the once-only warnings."""

from __future__ import annotations

import asyncio
import inspect
import pickle
import re
import subprocess
import sys
import threading
import warnings

import pytest
import torch

import flashinfer
import flashinfer.api_logging as api_logging
from flashinfer.api_logging import (
    ExperimentalWarning,
    api_inventory,
    experimental_api,
    experimental_auto_backends_allowed,
    flashinfer_api,
    flashinfer_experimental_api,
    require_experimental_auto_backends,
    reset_experimental_warnings,
    warn_experimental_backend_once,
)
from flashinfer.gating.messages import (
    auto_feature_disabled,
    automatic_selection,
    experimental_api_used,
    explicit_selection,
    unrecognised_gate_value,
)

GATE = "FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS"


def _experimental_warnings(record: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in record if issubclass(w.category, ExperimentalWarning)]


def test_experimental_warning_is_a_user_warning():
    assert issubclass(ExperimentalWarning, UserWarning)
    assert flashinfer.ExperimentalWarning is ExperimentalWarning


def test_alias():
    assert experimental_api is flashinfer_experimental_api


def test_upstream_name_of_the_gate_variable():
    # Upstream's code and tests name the variable through this private alias.
    from flashinfer.api_logging import _EXPERIMENTAL_AUTO_ENV_VAR

    assert _EXPERIMENTAL_AUTO_ENV_VAR == GATE == api_logging.ALLOW_EXPERIMENTAL_AUTO_BACKENDS_ENV


def test_the_warning_category_lives_at_the_upstream_path():
    """Filters (``-W``, pytest's filterwarnings) and pickles name the category by
    ``__module__``: it stays ``flashinfer.api_logging`` wherever the code lives."""
    assert ExperimentalWarning.__module__ == "flashinfer.api_logging"
    assert pickle.loads(pickle.dumps(ExperimentalWarning)) is ExperimentalWarning


def test_names_the_package_imports_from_api_logging_stay():
    """The public names, upstream's private aliases, and what the dispatcher, the CLI and
    the checks import from this module."""
    for name in api_logging.__all__:
        assert hasattr(api_logging, name), name
    for name in (
        "_EXPERIMENTAL_AUTO_ENV_VAR",
        "_WARNED_EXPERIMENTAL_BACKENDS",
        "_inventory",
        "backend_warning_flag",
        "make_experimental_info",
    ):
        assert hasattr(api_logging, name), name
    from flashinfer.api_logging import _WARNED_EXPERIMENTAL_BACKENDS

    assert _WARNED_EXPERIMENTAL_BACKENDS is api_logging._WARNED_EXPERIMENTAL_BACKENDS


# ---- the experimental API marker ------------------------------------------------------


def test_bare_marker_warns_once_and_runs():
    @flashinfer_experimental_api
    def fused(x, y=2, *, scale=1.0):
        """Add things."""
        return (x + y) * scale

    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        assert fused(1) == 3
        assert fused(1, 3, scale=2.0) == 8
        assert fused(x=1, y=1) == 2
    messages = _experimental_warnings(record)
    assert messages == [experimental_api_used(fused.__qualname__, fused.__qualname__)]


def test_warning_points_at_the_callers_line():
    @flashinfer_experimental_api
    def api(x):
        return x

    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        api(1)
        line = inspect.currentframe().f_lineno - 1
    assert record[0].filename == __file__
    assert record[0].lineno == line


def test_marker_with_arguments_names_the_feature():
    @flashinfer_experimental_api(feature="fused_norm", owner="@alice", tracking_issue=12)
    def api(x):
        return x

    assert api.experimental_feature == "fused_norm"
    assert api.experimental_info.owner == "@alice"
    assert api.experimental_info.tracking_issue == "12"
    with pytest.warns(ExperimentalWarning, match="feature 'fused_norm'"):
        api(1)


def test_marker_metadata_signature_and_docstring():
    def original(a: int, b: str = "x", *args: int, c: float, **kw: object) -> str:
        """Original text."""
        return b

    marked = flashinfer_experimental_api(original)
    assert marked.is_experimental is True and original.is_experimental is True
    assert marked.experimental_feature == original.__qualname__
    assert original.experimental_feature == original.__qualname__
    assert inspect.signature(marked) == inspect.signature(original)
    assert marked.__name__ == "original"
    assert marked.__module__ == original.__module__
    assert marked.__wrapped__ is original
    assert marked.__doc__.startswith("**Experimental API**")
    assert marked.__doc__.endswith("Original text.")
    with pytest.warns(ExperimentalWarning):
        assert marked(1, "y", 2, 3, c=1.0, extra=1) == "y"


@pytest.mark.parametrize("feature", [None, "fused_norm", "Experimental_Thing"])
@pytest.mark.parametrize("kind", ["function", "class"])
def test_banner_says_experimental_in_lowercase_before_the_original_docstring(feature, kind):
    if kind == "function":

        def target(x):
            """Original text."""
            return x

    else:

        class target:  # noqa: N801 - same name in both branches
            """Original text."""

    marked = flashinfer_experimental_api(feature=feature)(target)
    banner, _, rest = marked.__doc__.partition("\n\n")
    # Upstream's test looks for the lowercase word, whatever the feature is called.
    assert "experimental" in banner.replace(marked.experimental_feature, "")
    assert rest == "Original text."
    assert GATE not in marked.__doc__  # calling an experimental API needs no variable


def test_marker_on_methods_static_and_class_methods():
    class Thing:
        def __init__(self):
            self.v = 5

        @flashinfer_experimental_api
        def method(self, x):
            return self.v + x

        @flashinfer_experimental_api
        @staticmethod
        def static(x):
            return x * 2

        @flashinfer_experimental_api
        @classmethod
        def klass(cls, x):
            return (cls.__name__, x)

    t = Thing()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        assert t.method(1) == 6
        assert Thing.static(3) == 6 and t.static(3) == 6
        assert Thing.klass(1) == ("Thing", 1)
        assert t.method(2) == 7
    assert len(_experimental_warnings(record)) == 3
    assert Thing.__dict__["static"].__func__.is_experimental
    assert Thing.__dict__["klass"].__func__.is_experimental


def test_marker_on_class_warns_at_first_instantiation():
    @flashinfer_experimental_api
    class Widget:
        """A widget."""

        def __init__(self, size):
            self.size = size

    assert Widget.is_experimental
    assert "A widget." in Widget.__doc__
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        assert Widget(3).size == 3
        Widget(4)
    assert len(_experimental_warnings(record)) == 1
    assert inspect.signature(Widget) == inspect.signature(lambda size: None)


def test_marker_warns_once_under_many_threads():
    @flashinfer_experimental_api
    def api(x):
        return x

    barrier = threading.Barrier(16)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")

        def call():
            barrier.wait()
            for _ in range(50):
                api(1)

        threads = [threading.Thread(target=call) for _ in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert len(_experimental_warnings(record)) == 1


def test_marker_never_reads_the_gate(monkeypatch):
    @flashinfer_experimental_api
    def api(x):
        return x

    monkeypatch.setenv(GATE, "0")
    with pytest.warns(ExperimentalWarning):
        assert api(2) == 2
    monkeypatch.setenv(GATE, "bogus")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a gate read would warn about the bogus value
        assert api(3) == 3


def test_reset_makes_each_warning_fire_again():
    @flashinfer_experimental_api
    def api(x):
        return x

    with pytest.warns(ExperimentalWarning):
        api(1)
    reset_experimental_warnings()
    with pytest.warns(ExperimentalWarning):
        api(1)


def test_bad_graduate_by_is_recorded_and_warned_not_raised():
    """Malformed metadata never stops an import: recorded, one warning, CI's check fails
    (tests/pr_checks/test_experimental_lifecycle.py)."""
    from flashinfer.lifecycle import ExperimentalMetadataWarning

    with pytest.warns(ExperimentalMetadataWarning, match="YYYY-MM-DD") as caught:
        api = flashinfer_experimental_api(graduate_by="next spring")(lambda x: x)
    assert len(caught) == 1
    with pytest.warns(ExperimentalWarning):  # still a working API; its first call warns
        assert api(2) == 2
    assert api.experimental_info.graduate_by is None
    assert any("next spring" in p for p in api.experimental_info.problems)


def test_marker_rejects_non_callables():
    with pytest.raises(TypeError, match="decorates functions"):
        flashinfer_experimental_api(42)


# ---- the stable marker and the inventory ----------------------------------------------


def test_stable_marker_returns_the_function_and_records_it(monkeypatch):
    monkeypatch.delenv("FLASHINFER_LOGLEVEL", raising=False)

    def stable_api_for_inventory(x):
        """Doc."""
        return x

    marked = flashinfer_api(stable_api_for_inventory)
    assert marked is stable_api_for_inventory  # zero cost when logging is off
    names = [r.name for r in api_inventory(experimental=False)]
    assert f"{__name__}.{stable_api_for_inventory.__qualname__}" in names


@pytest.mark.parametrize("order", ["stable_outer", "experimental_outer"])
def test_markers_compose_in_either_order(order):
    def api_for_order(x):
        return x

    api_for_order.__qualname__ = f"api_for_order_{order}"
    if order == "stable_outer":
        marked = flashinfer_api(flashinfer_experimental_api(api_for_order))
    else:
        marked = flashinfer_experimental_api(flashinfer_api(api_for_order))
    key = f"{__name__}.api_for_order_{order}"
    experimental = {r.name for r in api_inventory(experimental=True)}
    stable = {r.name for r in api_inventory(experimental=False)}
    assert key in experimental and key not in stable
    with pytest.warns(ExperimentalWarning):
        assert marked(5) == 5


def test_stable_marker_logs_calls_when_asked(monkeypatch, caplog):
    monkeypatch.setenv("FLASHINFER_LOGLEVEL", "3")

    def logged_api(x, *, flag=False):
        return x

    marked = flashinfer_api(logged_api)
    assert marked is not logged_api
    with caplog.at_level("INFO", logger="flashinfer.api"):
        marked(7, flag=True)
    assert "logged_api(7, flag=True)" in caplog.text


# ---- the gate ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, False), ("", False), ("0", False), ("1", True)],
)
def test_gate_values(monkeypatch, value, expected):
    if value is None:
        monkeypatch.delenv(GATE, raising=False)
    else:
        monkeypatch.setenv(GATE, value)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert experimental_auto_backends_allowed() is expected


@pytest.mark.parametrize("value", ["true", "yes", " 1", "2", "on"])
def test_gate_other_values_are_off_and_warn_once_per_value(monkeypatch, value):
    monkeypatch.setenv(GATE, value)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        assert experimental_auto_backends_allowed() is False
        assert experimental_auto_backends_allowed() is False
    assert len(record) == 1
    assert str(record[0].message) == unrecognised_gate_value(value)
    assert record[0].filename == __file__


def test_gate_is_read_at_call_time(monkeypatch):
    monkeypatch.setenv(GATE, "1")
    assert experimental_auto_backends_allowed()
    monkeypatch.setenv(GATE, "0")
    assert not experimental_auto_backends_allowed()
    monkeypatch.delenv(GATE)
    assert not experimental_auto_backends_allowed()


def test_require_gate(monkeypatch):
    with pytest.raises(RuntimeError) as info:
        require_experimental_auto_backends("paged_decode")
    assert str(info.value) == auto_feature_disabled("paged_decode")
    monkeypatch.setenv(GATE, "1")
    require_experimental_auto_backends("paged_decode")


def test_backend_warning_once_per_pair_and_wording():
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        warn_experimental_backend_once("ops.mm", "split_k")
        warn_experimental_backend_once("ops.mm", "split_k")
        warn_experimental_backend_once("ops.mm", "split_k", automatic=True)
        warn_experimental_backend_once("ops.bmm", "split_k", automatic=True)
    messages = _experimental_warnings(record)
    assert messages == [
        explicit_selection("ops.mm", "split_k"),
        automatic_selection("ops.bmm", "split_k"),
    ]
    assert all(w.filename == __file__ for w in record)


@pytest.mark.parametrize(
    ("key", "plain"),
    [
        ("flashinfer.gemm.mm", "mm"),
        ("tests.test_x.make.<locals>.api", "api"),
        ("api", "api"),
        ("pkg.Class.method", "method"),
    ],
)
@pytest.mark.parametrize("automatic", [False, True])
def test_backend_warning_quotes_the_plain_api_name(key, plain, automatic):
    expected = (automatic_selection if automatic else explicit_selection)(key, "risky")
    assert repr(plain) in expected
    assert key == plain or repr(key) not in expected
    with pytest.warns(ExperimentalWarning, match=f"^{re.escape(expected)}$"):
        warn_experimental_backend_once(key, "risky", automatic=automatic)


def _op_with_experimental_backend(calls):
    from flashinfer.utils import backend_requirement, experimental_backend
    from flashinfer.utils import supported_compute_capability as capability

    @capability([80], cpu=True)
    def stable_ok(x, backend="auto"):
        return True

    @experimental_backend
    @capability([80], cpu=True)
    def risky_ok(x, backend="auto"):
        return True

    @backend_requirement({"stable": stable_ok, "risky": risky_ok})
    def api(x, backend="auto"):
        calls.append(backend)
        return backend

    return api


def test_explicit_backend_warning_through_the_dispatcher_names_the_api():
    api = _op_with_experimental_backend([])
    expected = explicit_selection(api.api_key, "risky")
    assert "'api'" in expected  # the plain name the user calls
    with pytest.warns(ExperimentalWarning, match=f"^{re.escape(expected)}$"):
        api(torch.ones(2), backend="risky")


def test_assigning_the_warned_record_forgets_or_sets_backend_warnings(monkeypatch):
    """Upstream's tests forget backend warnings with
    ``monkeypatch.setattr(api_logging, "_WARNED_EXPERIMENTAL_BACKENDS", set())``."""
    api = _op_with_experimental_backend([])
    x = torch.ones(2)
    with pytest.warns(ExperimentalWarning):
        api(x, backend="risky")
    assert (api.api_key, "risky") in api_logging._WARNED_EXPERIMENTAL_BACKENDS
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        api(x, backend="risky")  # warned already: silent
    monkeypatch.setattr(api_logging, "_WARNED_EXPERIMENTAL_BACKENDS", set())
    explicit = re.escape(explicit_selection(api.api_key, "risky"))
    with pytest.warns(ExperimentalWarning, match=explicit):
        api(x, backend="risky")  # the generated fast path reads the same flag
    monkeypatch.setattr(api_logging, "_WARNED_EXPERIMENTAL_BACKENDS", {(api.api_key, "risky")})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        api(x, backend="risky")  # listed in the assigned record: counts as warned


# ---- the class marker wraps __new__ ----------------------------------------------------


def _make_class(kind):
    """A fresh class of each shape; called twice, it gives an unmarked twin to compare to."""
    if kind == "only_init":

        class Thing:
            def __init__(self, a, b=2):
                self.v = (a, b)

    elif kind == "only_new":

        class Thing:
            def __new__(cls, a, b=2):
                obj = super().__new__(cls)
                obj.v = (a, b)
                return obj

    elif kind == "both":

        class Thing:
            def __new__(cls, *args, **kwargs):
                obj = super().__new__(cls)
                obj.new_args = (args, kwargs)
                return obj

            def __init__(self, a, b=2):
                self.v = (a, b)

    elif kind == "neither":

        class Thing:
            pass

    elif kind == "builtin_new":

        class Thing(tuple):
            pass

    return Thing


def _subclass(base, kind):
    if kind == "sub_plain":

        class Sub(base):
            pass

    elif kind == "sub_init":

        class Sub(base):
            def __init__(self, *args, **kwargs):
                self.sub = (args, kwargs)

    elif kind == "sub_new":

        class Sub(base):
            def __new__(cls, *args, **kwargs):
                obj = super().__new__(cls, *args, **kwargs)
                obj.sub = (args, kwargs)
                return obj

    return Sub


CLASS_KINDS = ["only_init", "only_new", "both", "neither", "builtin_new"]
CALLS = [((), {}), ((1,), {}), ((1, 3), {}), ((), {"a": 1}), ((1,), {"c": 5}), (([1, 2],), {})]


def _outcome(cls, args, kwargs):
    try:
        obj = cls(*args, **kwargs)
    except TypeError as exc:
        return ("TypeError", str(exc))
    state = dict(vars(obj)) if hasattr(obj, "__dict__") else None
    return ("ok", type(obj) is cls, state, tuple(obj) if isinstance(obj, tuple) else None)


@pytest.mark.parametrize("kind", CLASS_KINDS)
@pytest.mark.parametrize("sub", [None, "sub_plain", "sub_init", "sub_new"])
def test_marked_class_constructs_exactly_like_its_unmarked_twin(kind, sub):
    marked, twin = flashinfer_experimental_api(_make_class(kind)), _make_class(kind)
    if sub is not None:
        marked, twin = _subclass(marked, sub), _subclass(twin, sub)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalWarning)
        for args, kwargs in CALLS:
            assert _outcome(marked, args, kwargs) == _outcome(twin, args, kwargs), (args, kwargs)
    try:
        expected = inspect.signature(twin)
    except ValueError:  # no signature for the twin either
        return
    assert inspect.signature(marked) == expected


@pytest.mark.parametrize("kind", CLASS_KINDS)
@pytest.mark.parametrize("sub", ["sub_plain", "sub_init", "sub_new"])
def test_marked_subclass_of_a_marked_class_constructs_like_its_twin_and_warns_for_both(kind, sub):
    base = flashinfer_experimental_api(feature="base")(_make_class(kind))
    marked = flashinfer_experimental_api(feature="sub")(_subclass(base, sub))
    twin = _subclass(_make_class(kind), sub)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        for args, kwargs in CALLS:
            assert _outcome(marked, args, kwargs) == _outcome(twin, args, kwargs), (args, kwargs)
    assert sorted(_experimental_warnings(record)) == sorted(
        [
            experimental_api_used("base", base.__qualname__),
            experimental_api_used("sub", marked.__qualname__),
        ]
    )


@pytest.mark.parametrize("kind", CLASS_KINDS)
def test_marked_class_warns_once_for_it_and_its_subclasses(kind):
    marked = flashinfer_experimental_api(_make_class(kind))
    sub = _subclass(marked, "sub_init")
    args = ([1, 2],) if kind == "builtin_new" else (1,) if kind != "neither" else ()
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        sub(*args)
        line = inspect.currentframe().f_lineno - 1
        marked(*args)
        sub(*args)
    messages = _experimental_warnings(record)
    assert messages == [experimental_api_used(marked.__qualname__, marked.__qualname__)]
    assert (record[0].filename, record[0].lineno) == (__file__, line)
    assert marked.is_experimental and sub.is_experimental  # inherited attribute


# ---- coroutine functions, generators and async generators stay what they are -----------


def test_async_function_stays_a_coroutine_function_and_warns_at_its_caller():
    @flashinfer_experimental_api
    async def fetch(x, *, scale=2):
        await asyncio.sleep(0)
        return x * scale

    assert inspect.iscoroutinefunction(fetch)
    assert inspect.signature(fetch) == inspect.signature(fetch.__wrapped__)
    with pytest.raises(TypeError):
        fetch()  # a wrong call fails when it is made, as it would unwrapped

    async def main():
        first = await fetch(1)
        line = inspect.currentframe().f_lineno - 1
        return [first, await fetch(2, scale=3)], line

    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        result, line = asyncio.run(main())
    assert result == [2, 6]
    assert len(_experimental_warnings(record)) == 1
    assert (record[0].filename, record[0].lineno) == (__file__, line)


def test_async_method_stays_a_coroutine_function():
    class Client:
        @flashinfer_experimental_api
        async def get(self, x):
            return x + 1

    assert inspect.iscoroutinefunction(Client.get)
    assert inspect.iscoroutinefunction(Client().get)
    with pytest.warns(ExperimentalWarning):
        assert asyncio.run(Client().get(1)) == 2


def _generator_function():
    def gen(n):
        received = []
        for i in range(n):
            try:
                got = yield i
            except KeyError as exc:
                got = f"thrown {exc}"
            received.append(got)
        return received

    return gen


def _drive_generator(gen):
    g = gen(4)
    steps = [next(g), g.send("a"), g.throw(KeyError("k"))]
    steps.append(g.send("b"))
    try:
        g.send("c")
    except StopIteration as stop:
        steps.append(("returned", stop.value))
    closing = gen(2)
    next(closing)
    closing.close()
    return steps


def test_generator_function_stays_one_and_passes_send_throw_and_return_on():
    marked = flashinfer_experimental_api(_generator_function())
    assert inspect.isgeneratorfunction(marked)
    with pytest.warns(ExperimentalWarning) as record:
        steps = _drive_generator(marked)
    assert steps == _drive_generator(_generator_function())
    assert len(_experimental_warnings(record)) == 1


def _async_generator_function(log):
    async def agen(n):
        try:
            for i in range(n):
                try:
                    got = yield i
                except KeyError as exc:
                    got = f"thrown {exc}"
                log.append(got)
        finally:
            log.append("closed")

    return agen


async def _drive_async_generator(agen):
    g = agen(4)
    steps = [await g.__anext__(), await g.asend("a"), await g.athrow(KeyError("k"))]
    steps.append([v async for v in g])  # the rest; None is sent for each
    closing = agen(3)
    await closing.__anext__()
    await closing.aclose()
    return steps


def test_async_generator_function_stays_one_and_passes_asend_athrow_aclose_on():
    marked_log, twin_log = [], []
    marked = flashinfer_experimental_api(_async_generator_function(marked_log))
    assert inspect.isasyncgenfunction(marked)
    with pytest.warns(ExperimentalWarning) as record:
        steps = asyncio.run(_drive_async_generator(marked))
    twin = _async_generator_function(twin_log)
    assert steps == asyncio.run(_drive_async_generator(twin))
    assert marked_log == twin_log
    assert len(_experimental_warnings(record)) == 1


# ---- a warning escalated to an error refuses every use, not only the first ------------


def test_error_filter_refuses_every_call_of_an_experimental_api():
    calls = []

    @flashinfer_experimental_api
    def api(x):
        calls.append(x)

    with warnings.catch_warnings():
        warnings.simplefilter("error", ExperimentalWarning)
        for _ in range(3):
            with pytest.raises(ExperimentalWarning):
                api(1)
    assert calls == []
    with pytest.warns(ExperimentalWarning):  # filter gone: warns once, and runs
        api(2)
    assert calls == [2]


def test_error_filter_refuses_every_call_of_an_experimental_backend():
    calls = []
    api = _op_with_experimental_backend(calls)
    explicit = re.escape(explicit_selection(api.api_key, "risky"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ExperimentalWarning)
        for _ in range(3):
            with pytest.raises(ExperimentalWarning, match=explicit):
                api(torch.ones(2), backend="risky")
        assert api(torch.ones(2), backend="stable") == "stable"
    assert calls == ["stable"]


# ---- a bad gate value warns when flashinfer is imported -------------------------------


def test_bad_gate_value_warns_at_import_at_the_import_line(tmp_path):
    script = tmp_path / "app.py"
    script.write_text(
        "import flashinfer\n"
        "print(flashinfer.experimental_auto_backends_allowed())\n"  # same value: no repeat
    )
    env = {**__import__("os").environ, GATE: "yes"}
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "False\n"
    assert proc.stderr.count("RuntimeWarning") == 1, proc.stderr
    assert f"{script}:1: RuntimeWarning: {unrecognised_gate_value('yes')}\n" in proc.stderr
