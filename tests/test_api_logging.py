"""flashinfer.api_logging: the markers, the gate and the once-only warnings."""

from __future__ import annotations

import inspect
import threading
import warnings

import pytest

import flashinfer
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

GATE = "FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS"


def _experimental_warnings(record: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in record if issubclass(w.category, ExperimentalWarning)]


def test_experimental_warning_is_a_user_warning():
    assert issubclass(ExperimentalWarning, UserWarning)
    assert flashinfer.ExperimentalWarning is ExperimentalWarning


def test_alias():
    assert experimental_api is flashinfer_experimental_api


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
    assert len(messages) == 1
    assert "fused" in messages[0]
    assert "may change or disappear without deprecation" in messages[0]


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


def test_bad_graduate_by_is_rejected_at_decoration():
    with pytest.raises(ValueError, match="YYYY-MM-DD"):
        flashinfer_experimental_api(graduate_by="next spring")(lambda x: x)


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
    message = str(record[0].message)
    assert GATE in message and repr(value) in message and "'1'" in message
    assert record[0].filename == __file__


def test_gate_is_read_at_call_time(monkeypatch):
    monkeypatch.setenv(GATE, "1")
    assert experimental_auto_backends_allowed()
    monkeypatch.setenv(GATE, "0")
    assert not experimental_auto_backends_allowed()
    monkeypatch.delenv(GATE)
    assert not experimental_auto_backends_allowed()


def test_require_gate(monkeypatch):
    with pytest.raises(RuntimeError, match=f"{GATE}=1.*") as info:
        require_experimental_auto_backends("paged_decode")
    assert "paged_decode" in str(info.value)
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
    assert len(messages) == 2
    assert "selected explicitly" in messages[0]
    assert "picked automatically" in messages[1] and GATE in messages[1]
    assert all(w.filename == __file__ for w in record)
