"""The generated fast path of ``backend_requirement`` agrees with the reference path.

``backend_requirement`` returns a *generated* function (``op.__generated_source__``) that
does the binding in its own parameter list and calls checkers directly; its failures are
handed to the readable reference logic.  ``op.call_reference`` runs the same call through
``inspect.Signature.bind`` and ``BackendRequirementOp._select``.  For the same call the two
must choose the same backend (and record the same ``suitable_auto_backends`` and
``dropped_experimental_backends``), emit the same warnings, and raise the same error, type
and message.  The body of every op here returns what it saw, so a disagreement anywhere
shows up as a difference in the outcome.
"""

from __future__ import annotations

import builtins
import contextlib
import inspect
import os
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any
from unittest import mock

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import flashinfer
import flashinfer.dispatch.capability as bd
from flashinfer.api_logging import flashinfer_experimental_api
from flashinfer.backend_dispatch import (
    BackendSupportedError,
    UnsupportedInputsError,
    backend_requirement,
    experimental_backend,
    supported_compute_capability,
)
from flashinfer.dispatch.verdicts import cacheable_pattern
from flashinfer.gating.messages import (
    auto_refused_by_common_check,
    automatic_selection,
    every_candidate_rejected,
    explicit_selection,
    gate_exclusion_reason,
    only_experimental_fit,
)

GATE = "FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS"

# API parameter lists exercised: plain, keyword-only, positional-only, *args/**kwargs.
SIGNATURES: dict[str, str] = {
    "plain": "(x, w, scale=1.0, backend='auto')",
    "kwonly": "(x, w, *, scale=1.0, backend='auto')",
    "posonly": "(x, w, /, scale=1.0, backend='auto')",
    "varargs": "(x, *rest, backend='auto', **extra)",
    "kwargs": "(x, w=None, backend='auto', **extra)",
    "backend_first": "(backend, x, w=None)",
    # declares the dispatcher's skip_check itself (so that type checkers see it)
    "declared_skip": "(x, w, *, backend='auto', skip_check=False)",
}

# How a checker declares its parameters relative to the API's.
CHECKER_STYLES = ("same", "kwargs", "subset", "star_kwargs", "subset_reordered")


# --------------------------------------------------------------------------------------
# Building ops from a description
# --------------------------------------------------------------------------------------


def _size(value: Any) -> int:
    return value.numel() if isinstance(value, torch.Tensor) else int(value)


class Recorder:
    """Counts checker/heuristic calls and keeps the arguments each received."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}
        self.seen: dict[str, dict[str, Any]] = {}

    def hit(self, who: str, args: dict[str, Any]) -> None:
        self.calls[who] = self.calls.get(who, 0) + 1
        self.seen[who] = args

    def reset(self) -> None:
        self.calls.clear()
        self.seen.clear()


def _make(source: str, ns: dict[str, Any], name: str) -> Callable[..., Any]:
    exec(source, ns)  # noqa: S102 - test helper building functions of a given signature
    return ns[name]


def _verdict(behaviour: str, args: dict[str, Any]) -> bool:
    if behaviour == "ok":
        return True
    if behaviour == "false":
        return False
    if behaviour == "raise":
        raise ValueError("checker says these inputs are not supported")
    if behaviour == "small":  # a verdict that depends on the input values
        return _size(args["x"]) < 3
    if behaviour == "type_error":
        raise TypeError("checker crashed")
    raise AssertionError(behaviour)


def make_checker(
    signature: str, style: str, behaviour: str, who: str, rec: Recorder
) -> Callable[..., Any]:
    """A checker with the API's parameter list, or a different one (``style``)."""
    params = {
        "same": signature[1:-1],
        "kwargs": "**kw",
        "subset": "x, backend='auto'",
        "star_kwargs": "*a, **kw",
        "subset_reordered": "backend, x",
    }[style]
    ns = {"_verdict": _verdict, "_rec": rec, "_b": behaviour, "_who": who}
    source = (
        f"def check({params}):\n"
        "    _args = dict(locals())\n"
        "    _args.update(_args.pop('kw', {}))\n"
        "    _rec.hit(_who, _args)\n"
        "    return _verdict(_b, _args)\n"
    )
    return _make(source, ns, "check")


def mark_capability(checker: Callable[..., Any], rule: str) -> Callable[..., Any]:
    if rule == "undeclared":
        return checker
    ccs, cpu = {
        "cpu_80_90": ([80, 90], True),
        "cpu_90": ([90], True),
        "gpu_80_90": ([80, 90], False),
        "gpu_90": ([90], False),
    }[rule]
    return supported_compute_capability(ccs, cpu=cpu)(checker)


def make_heuristic(kind: str, rec: Recorder) -> Callable[..., Any] | None:
    if kind == "none":
        return None

    def heuristic(candidates: list[str], *args: Any, **kwargs: Any) -> list[str]:
        rec.hit("heuristic", {"candidates": list(candidates)})
        if kind == "identity":
            return candidates
        if kind == "reverse":
            return list(reversed(candidates))
        if kind == "reverse_in_place":
            candidates.reverse()
            return candidates
        if kind == "drop_first":
            return candidates[1:]
        if kind == "empty":
            return []
        if kind == "add_unknown":  # a name that is no backend (a runner's) is kept
            return ["not_a_backend", *candidates]
        if kind == "add_in_place":  # ... also by editing the list it was given
            candidates.insert(0, "not_a_backend")
            return candidates
        if kind == "add_refused":  # a backend the checks refused is never added back
            return [*candidates, "a", "b", "e", "z"]
        if kind == "duplicate":  # ... nor name one twice
            return [*candidates, *candidates]
        if kind == "duplicate_reversed":
            return [*reversed(candidates), *candidates]
        raise AssertionError(kind)

    return heuristic


def make_op(
    signature: str,
    backends: list[tuple[str, str, str, bool, str]],
    common: str | None = None,
    common_style: str = "same",
    heuristic: str = "none",
    rec: Recorder | None = None,
) -> tuple[Any, Recorder]:
    """An op whose body returns (backend, suitable copy, dropped copy, arguments seen).

    ``backends``: (name, checker style, behaviour, experimental, capability rule).
    """
    rec = rec or Recorder()
    holder: list[Any] = []

    def body(args: dict[str, Any]) -> tuple[Any, ...]:
        op = holder[0]
        return (
            args.get("backend"),
            list(op.suitable_auto_backends),
            list(op.dropped_experimental_backends),
            args,
        )

    api = _make(f"def api{signature}:\n    return _body(dict(locals()))\n", {"_body": body}, "api")
    checks: dict[str, Any] = {}
    for name, style, behaviour, experimental, rule in backends:
        chk = mark_capability(make_checker(signature, style, behaviour, name, rec), rule)
        if experimental:
            chk = experimental_backend(chk)
        checks[name] = chk
    common_fn = None
    if common is not None:
        common_fn = make_checker(signature, common_style, common, "common", rec)
    op = backend_requirement(checks, common_fn, make_heuristic(heuristic, rec))(api)
    holder.append(op)
    return op, rec


# --------------------------------------------------------------------------------------
# Running a call through both paths
# --------------------------------------------------------------------------------------


def _fake_find(*values: Any) -> int | None:
    """Capability lookup that treats tensors carrying ``fake_cc`` as CUDA tensors."""
    for value in values:
        if isinstance(value, torch.Tensor) and hasattr(value, "fake_cc"):
            return value.fake_cc
    return None


@contextlib.contextmanager
def fake_cuda() -> Iterator[None]:
    with (
        mock.patch.object(bd, "find_compute_capability", _fake_find),
        mock.patch.object(bd.CUDA_STATE, "absent", False),
    ):
        yield


@contextlib.contextmanager
def gate(value: str | None) -> Iterator[None]:
    old = os.environ.get(GATE)
    if value is None:
        os.environ.pop(GATE, None)
    else:
        os.environ[GATE] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(GATE, None)
        else:
            os.environ[GATE] = old


def outcome(op: Any, fn: Callable[..., Any], args: tuple, kwargs: dict, rec: Recorder) -> dict:
    """Everything observable about one call, from a clean per-thread and warning state."""
    state = op.dispatcher._state
    # A previous call's records (only ops with experimental backends ever record drops).
    state.r.suitable = ["stale"]
    state.r.dropped = ("stale",) if op.experimental_backends else ()
    op.dispatcher._live.dropped = bool(op.experimental_backends)
    flashinfer.reset_experimental_warnings()
    rec.reset()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result: Any = ("ok", fn(*args, **kwargs))
        except Exception as exc:  # noqa: BLE001 - the error itself is what is compared
            result = ("error", type(exc), str(exc))
    return {
        "result": result,
        "dropped_after": list(op.dropped_experimental_backends),
        "warnings": [(w.category, str(w.message)) for w in caught],
        # On a failure the fast path re-runs checks in the reference logic to explain it;
        # on success both paths call each checker exactly once.
        "calls": dict(rec.calls) if result[0] == "ok" else None,
    }


_REAL_ENVIRON = os.environ  # what the settings reader reads directly (a mock is not)


def _cacheable(op: Any, args: tuple, kwargs: dict) -> bool:
    """Whether the verdict of this successful call is cached (see flashinfer.dispatch.verdicts)."""
    plan = op.dispatcher
    if not plan.verdicts_cacheable or os.environ is not _REAL_ENVIRON:
        return False
    skip_check = kwargs.get("skip_check", False)
    kwargs = {k: v for k, v in kwargs.items() if k != "skip_check"}
    bound = plan._sig.bind(*args, **kwargs)
    bound.apply_defaults()
    backend = bound.arguments.get("backend", "auto")
    if backend != "auto":  # a named backend: never cached, its checks run every call
        return skip_check  # (with skip_check=True there is no check to run)
    unrecognised_gate = os.environ.get(GATE) not in (None, "", "0", "1")
    if plan.experimental_backends and unrecognised_gate:
        return False  # an unrecognised gate value is read (and warned about) every call
    values = [bound.arguments[n] for n in plan._sig.names]
    return cacheable_pattern(values) is not None


def both(op: Any, rec: Recorder, *args: Any, **kwargs: Any) -> tuple[dict, dict]:
    """The call through the generated path and through the reference.  The generated path
    is called from an empty verdict cache (it runs every check), then twice more (the first
    call of a new argument-type pattern is not cached, the next one stores its verdict), and
    the last call, served from the cache when the call is cacheable, must be the same in
    everything but the checks it ran."""
    op.dispatcher.verdict_cache.clear()
    fast = outcome(op, op, args, kwargs, rec)
    outcome(op, op, args, kwargs, rec)
    cached = outcome(op, op, args, kwargs, rec)
    cached_calls = cached.pop("calls")
    checked = {k: v for k, v in fast.items() if k != "calls"}
    assert cached == checked, f"\ncached:  {cached}\nchecked: {checked}"
    if fast["result"][0] == "error":  # failures are never cached: the checks run again
        assert len(op.dispatcher.verdict_cache) == 0
    elif _cacheable(op, args, kwargs):  # served from the cache: no check ran
        assert cached_calls == {}, cached_calls
    ref = outcome(op, op.call_reference, args, kwargs, rec)
    return fast, ref


def assert_agree(op: Any, rec: Recorder, *args: Any, **kwargs: Any) -> dict:
    fast, ref = both(op, rec, *args, **kwargs)
    assert fast == ref, f"\nfast:      {fast}\nreference: {ref}\n{op.__generated_source__}"
    return fast


# --------------------------------------------------------------------------------------
# Hypothesis: random ops, random calls
# --------------------------------------------------------------------------------------

BEHAVIOURS = ("ok", "false", "raise", "small")
RULES = ("undeclared", "cpu_80_90", "cpu_90", "gpu_80_90", "gpu_90")
HEURISTICS = (
    "none",
    "identity",
    "reverse",
    "reverse_in_place",
    "drop_first",
    "empty",
    "add_unknown",
    "add_in_place",
    "add_refused",
    "duplicate",
    "duplicate_reversed",
)


@st.composite
def backend_tables(draw: st.DrawFn, signature_key: str) -> list[tuple[str, str, str, bool, str]]:
    names = draw(
        st.lists(st.sampled_from(["a", "b", "e", "z"]), min_size=1, max_size=4, unique=True)
    )
    styles = CHECKER_STYLES
    if signature_key == "backend_first":  # "subset" assumes a defaulted backend
        styles = tuple(s for s in styles if s != "subset")
    return [
        (
            name,
            draw(st.sampled_from(styles)),
            draw(st.sampled_from(BEHAVIOURS)),
            draw(st.booleans()),
            draw(st.sampled_from(RULES)),
        )
        for name in names
    ]


@st.composite
def calls(draw: st.DrawFn, signature_key: str, backend_names: list[str]) -> tuple[tuple, dict, str]:
    """Arguments for one call: each parameter by position, by keyword, or left to its default."""
    sig = inspect.signature(_make(f"def f{SIGNATURES[signature_key]}: pass\n", {}, "f"))
    tensors = draw(st.booleans())
    size = draw(st.sampled_from([2, 4]))
    x: Any = torch.zeros(size) if tensors else size
    cc = draw(st.sampled_from([None, None, 80, 90, 75]))
    if cc is not None and tensors:
        x.fake_cc = cc
    # None, a list and an int are not backend names: a TypeError, the same in both paths
    backend = draw(st.sampled_from([*backend_names, "auto", "auto", "nope", None, ["a"], 3]))
    values = {"x": x, "w": torch.ones(2) if tensors else 7, "scale": 2.0, "backend": backend}
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    positional_open = True
    for p in sig.parameters.values():
        if p.name == "skip_check":  # drawn below, for every signature
            continue
        if p.kind == p.VAR_POSITIONAL:
            if positional_open:
                rest = draw(st.lists(st.sampled_from([1, "r"]), max_size=2))
                if cc is not None and tensors and draw(st.booleans()):
                    # the only "CUDA" tensor sits in *rest
                    del x.fake_cc
                    marked = torch.zeros(1)
                    marked.fake_cc = cc
                    rest.append(marked)
                args += rest
            continue
        if p.kind == p.VAR_KEYWORD:
            kwargs.update(draw(st.dictionaries(st.sampled_from(["k1", "k2"]), st.integers(0, 3))))
            continue
        how = draw(
            st.sampled_from(
                [
                    h
                    for h in ("pos", "kw", "default")
                    if (h != "pos" or (positional_open and p.kind != p.KEYWORD_ONLY))
                    and (h != "kw" or p.kind != p.POSITIONAL_ONLY)
                    and (h != "default" or p.default is not p.empty)
                ]
            )
        )
        if how == "pos":
            args.append(values[p.name])
        else:
            positional_open = False
            if how == "kw":
                kwargs[p.name] = values[p.name]
    if draw(st.sampled_from([False, False, False, True])):
        kwargs["skip_check"] = True
    return tuple(args), kwargs, draw(st.sampled_from([None, None, "0", "1", "1", "yes", ""]))


def draw_op(data: st.DataObject, signature_key: str) -> tuple[Any, Any, list]:
    """A random op of the signature (backends, common check, heuristic, maybe routed), the
    recorder of its calls, and its backend table."""
    backends = data.draw(backend_tables(signature_key), label="backends")
    common = data.draw(st.sampled_from([None, None, "ok", "false", "raise", "small"]), "common")
    common_style = data.draw(st.sampled_from(CHECKER_STYLES), "common_style")
    if signature_key == "backend_first" and common_style == "subset":
        common_style = "same"
    heuristic = data.draw(st.sampled_from(HEURISTICS), "heuristic")
    op, rec = make_op(SIGNATURES[signature_key], backends, common, common_style, heuristic)
    if op.dispatcher.routed_inputs() is not None and data.draw(st.booleans(), "routed"):
        op.dispatcher.route_auto(recording_router(op))
    return op, rec, backends


@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data(), signature_key=st.sampled_from(sorted(SIGNATURES)))
def test_fast_path_agrees_with_reference(data: st.DataObject, signature_key: str) -> None:
    op, rec, backends = draw_op(data, signature_key)
    args, kwargs, gate_value = data.draw(calls(signature_key, [b[0] for b in backends]), "call")
    with gate(gate_value), fake_cuda():
        assert_agree(op, rec, *args, **kwargs)


@settings(max_examples=150, deadline=None)
@given(data=st.data(), signature_key=st.sampled_from(sorted(SIGNATURES)))
def test_common_check_only_agrees(data: st.DataObject, signature_key: str) -> None:
    """An op with no backend table: the common check carries the capability rule."""
    rec = Recorder()
    common = data.draw(st.sampled_from(["ok", "false", "raise", "small"]), "common")
    rule = data.draw(st.sampled_from(RULES), "rule")
    sig = SIGNATURES[signature_key]
    api = _make(f"def api{sig}:\n    return dict(locals())\n", {}, "api")
    common_fn = mark_capability(make_checker(sig, "same", common, "common", rec), rule)
    op = backend_requirement({}, common_check=common_fn)(api)
    args, kwargs, _ = data.draw(calls(signature_key, []), "call")
    with fake_cuda():
        assert_agree(op, rec, *args, **kwargs)


# --------------------------------------------------------------------------------------
# Explicit scenarios (readable failures for each rule)
# --------------------------------------------------------------------------------------

PLAIN = SIGNATURES["plain"]


def _table(**behaviours: str) -> list[tuple[str, str, str, bool, str]]:
    return [(name, "same", b, False, "undeclared") for name, b in behaviours.items()]


X, W = torch.zeros(2), torch.ones(2)


def plain_call(signature_key: str) -> tuple[tuple, dict[str, Any]]:
    """A valid call of each signature (x and w, no backend): positions where needed."""
    return {
        "plain": ((X, W), {}),
        "kwonly": ((X, W), {}),
        "posonly": ((X, W), {}),
        "varargs": ((X,), {}),
        "kwargs": ((X,), {"w": W}),
        "backend_first": ((), {"x": X, "w": W}),
        "declared_skip": ((X, W), {}),
    }[signature_key]


# ---- routed auto calls (route_auto) ----


def recording_router(op: Any) -> Callable[[Sequence[str], tuple], tuple]:
    """A router (``route_auto``) returning what it was handed, and the op's records then."""

    def route(candidates: Sequence[str], inputs: tuple) -> tuple:
        records = (list(op.suitable_auto_backends), list(op.dropped_experimental_backends))
        return ("routed", list(candidates), inputs, records)

    return route


# Per routable signature: calls spelling out x=X, w=W (and scale=3.0 where it exists)
# positionally and by keyword, and what a routed auto call hands on for them; then a call
# leaving the rest to defaults, with what that hands on.
ROUTED_CALLS: dict[str, tuple[list[tuple[tuple, dict]], tuple, tuple, tuple]] = {
    "plain": (
        [((X, W, 3.0), {}), ((), {"x": X, "w": W, "scale": 3.0}), ((X,), {"w": W, "scale": 3.0})],
        (X, W, 3.0),
        ((X, W), {}),
        (X, W, 1.0),
    ),
    "kwonly": (
        [((X, W), {"scale": 3.0}), ((), {"x": X, "w": W, "scale": 3.0})],
        (X, W, 3.0),
        ((X, W), {}),
        (X, W, 1.0),
    ),
    "posonly": (
        [((X, W, 3.0), {}), ((X, W), {"scale": 3.0})],
        (X, W, 3.0),
        ((X, W), {}),
        (X, W, 1.0),
    ),
    "backend_first": (
        [(("auto", X, W), {}), ((), {"backend": "auto", "x": X, "w": W})],
        (X, W),
        (("auto", X), {}),
        (X, None),
    ),
}


@pytest.mark.parametrize("signature_key", sorted(ROUTED_CALLS))
def test_routed_auto_calls_hand_on_every_argument_but_backend(signature_key):
    op, rec = make_op(SIGNATURES[signature_key], _table(a="ok", b="ok"), heuristic="reverse")
    op.dispatcher.route_auto(recording_router(op))
    spelled, expected, (d_args, d_kwargs), with_defaults = ROUTED_CALLS[signature_key]
    for args, kwargs in spelled:
        out = assert_agree(op, rec, *args, **kwargs)
        assert out["result"][1] == ("routed", ["b", "a"], expected, (["b", "a"], [])), out
    out = assert_agree(op, rec, *d_args, **d_kwargs)
    assert out["result"][1][2] == with_defaults
    # explicit backends still reach the body
    explicit = (("a", X, W), {}) if signature_key == "backend_first" else ((X, W), {"backend": "a"})
    assert assert_agree(op, rec, *explicit[0], **explicit[1])["result"][1][0] == "a"
    # removing the router restores the body
    op.dispatcher.route_auto(None)
    assert op.dispatcher.auto_route is None
    assert assert_agree(op, rec, *spelled[0][0], **spelled[0][1])["result"][1][0] == "auto"


@pytest.mark.parametrize("signature_key", ["varargs", "kwargs"])
def test_apis_with_star_parameters_cannot_be_routed(signature_key):
    op, _ = make_op(SIGNATURES[signature_key], _table(a="ok"))
    assert op.dispatcher.routed_inputs() is None
    with pytest.raises(TypeError, match=r"can only be routed .*no \*args or \*\*kwargs"):
        op.dispatcher.route_auto(recording_router(op))


def test_gate_is_read_through_a_replaced_os_environ():
    """A test that swaps ``os.environ`` for another mapping (``mock.patch``) is obeyed:
    the inline read checks it is still the real one."""
    backends = [("a", "same", "ok", False, "undeclared"), ("e", "same", "ok", True, "undeclared")]
    op, rec = make_op(PLAIN, backends)
    with gate("1"):  # the real environment says on; the replacement says nothing
        with mock.patch.object(os, "environ", {}):
            out = assert_agree(op, rec, X, W)
    assert out["result"][1][:3] == ("auto", ["a"], ["e"])
    with gate(None), mock.patch.object(os, "environ", {GATE: "1"}):
        out = assert_agree(op, rec, X, W)
    assert out["result"][1][:3] == ("auto", ["a", "e"], [])


@pytest.mark.parametrize("signature_key", sorted(SIGNATURES))
@pytest.mark.parametrize("backend", ["a", "e", "auto", "nope"])
@pytest.mark.parametrize("gate_value", [None, "1"])
def test_every_signature_positional_keyword_default(signature_key, backend, gate_value):
    backends = [
        ("a", "same", "ok", False, "cpu_80_90"),
        ("e", "same", "ok", True, "cpu_90"),
    ]
    op, rec = make_op(SIGNATURES[signature_key], backends, common="ok", heuristic="reverse")
    sig = inspect.signature(op)
    params = [p for p in sig.parameters.values() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    values = {"x": X, "w": W, "scale": 3.0, "backend": backend, "skip_check": False}
    styles = []
    # every parameter by keyword where allowed; positionally where allowed; defaults omitted
    kw = {p.name: values[p.name] for p in params if p.kind != p.POSITIONAL_ONLY}
    pos_only = [values[p.name] for p in params if p.kind == p.POSITIONAL_ONLY]
    styles.append((tuple(pos_only), kw))
    positional = [
        values[p.name] for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    styles.append(
        (tuple(positional), {p.name: values[p.name] for p in params if p.kind == p.KEYWORD_ONLY})
    )
    required = [p for p in params if p.default is p.empty]
    styles.append(
        (
            tuple(values[p.name] for p in required if p.kind != p.KEYWORD_ONLY),
            {"backend": backend} if "backend" not in {p.name for p in required} else {},
        )
    )
    with gate(gate_value):
        for args, kwargs in styles:
            assert_agree(op, rec, *args, **kwargs)


def test_explicit_stable_backend():
    op, rec = make_op(PLAIN, _table(a="ok", b="ok"))
    out = assert_agree(op, rec, X, W, backend="b")
    assert out["result"][1][0] == "b"
    assert out["calls"] == {"b": 1}
    assert out["warnings"] == []


def test_explicit_experimental_backend_warns_once_and_runs():
    backends = [("a", "same", "ok", False, "undeclared"), ("e", "same", "ok", True, "undeclared")]
    op, rec = make_op(PLAIN, backends)
    out = assert_agree(op, rec, X, W, backend="e")
    assert out["result"][1][0] == "e"
    assert [c for c, _ in out["warnings"]] == [flashinfer.ExperimentalWarning]
    assert out["warnings"][0][1] == explicit_selection(op.api_key, "e")


@pytest.mark.parametrize("gate_value", [None, "0", "", "1"])
def test_auto_gate_off_and_on(gate_value):
    backends = [
        ("e", "same", "ok", True, "undeclared"),
        ("a", "same", "ok", False, "undeclared"),
        ("b", "same", "false", False, "undeclared"),
    ]
    op, rec = make_op(PLAIN, backends)
    with gate(gate_value):
        out = assert_agree(op, rec, X, W)
    backend, suitable, dropped, _ = out["result"][1]
    if gate_value == "1":
        assert (backend, suitable, dropped) == ("auto", ["e", "a"], [])
        assert out["warnings"][0][1] == automatic_selection(op.api_key, "e")
    else:
        assert (backend, suitable, dropped) == ("auto", ["a"], ["e"])
        assert out["dropped_after"] == ["e"]
        assert out["warnings"] == []
    assert out["calls"] == {"e": 1, "a": 1, "b": 1}


def test_auto_only_experimental_fits_gate_off():
    backends = [
        ("a", "same", "false", False, "undeclared"),
        ("e", "same", "ok", True, "undeclared"),
    ]
    op, rec = make_op(PLAIN, backends)
    out = assert_agree(op, rec, X, W)
    kind, exc_type, message = out["result"]
    assert (kind, exc_type) == ("error", BackendSupportedError)
    refused = "support check returned False for these inputs"
    assert message == only_experimental_fit(
        "api", ["e"], {"a": refused, "e": gate_exclusion_reason()}
    )
    assert out["dropped_after"] == ["e"]


def test_unknown_backend():
    op, rec = make_op(PLAIN, _table(a="ok"))
    out = assert_agree(op, rec, X, W, backend="nope")
    assert out["result"][:2] == ("error", BackendSupportedError)
    assert "does not support backend 'nope'" in out["result"][2]


@pytest.mark.parametrize("common", ["ok", "false", "raise", "type_error"])
def test_unknown_backend_is_reported_before_the_common_check(common):
    """Both paths name the unknown backend, whatever the common check would have said."""
    op, rec = make_op(PLAIN, _table(a="ok"), common=common)
    out = assert_agree(op, rec, X, W, backend="nope")
    assert out["result"][:2] == ("error", BackendSupportedError)


@pytest.mark.parametrize("backend", ["a", "auto"])
def test_checker_false(backend):
    op, rec = make_op(PLAIN, _table(a="false"))
    out = assert_agree(op, rec, X, W, backend=backend)
    expected = UnsupportedInputsError if backend == "a" else BackendSupportedError
    assert out["result"][:2] == ("error", expected)
    if backend == "a":
        assert out["result"][2] == (
            "Problem size is not supported for api with backend 'a': its support check "
            "returned False for these inputs"
        )


def test_unsupported_inputs_error_is_both_upstream_types():
    """Upstream's contract: a problem-size rejection is a ValueError; ours is also a
    BackendSupportedError, so either except clause catches it."""
    assert issubclass(UnsupportedInputsError, ValueError)
    assert issubclass(UnsupportedInputsError, BackendSupportedError)


def test_checker_raising_value_error_explicit_names_op_backend_and_reason():
    op, rec = make_op(PLAIN, _table(a="raise"))
    out = assert_agree(op, rec, X, W, backend="a")
    assert out["result"] == (
        "error",
        UnsupportedInputsError,
        "api cannot run these inputs with backend 'a': checker says these inputs are not supported",
    )
    for fn in (op, op.call_reference):
        with pytest.raises(UnsupportedInputsError) as info:
            fn(X, W, backend="a")
        assert type(info.value.__cause__) is ValueError  # the checker's own error
        assert str(info.value.__cause__) == "checker says these inputs are not supported"


def test_checker_raising_other_errors_propagates_explicit():
    """Only a ValueError is a checker's "no"; anything else is a bug and propagates."""
    op, rec = make_op(PLAIN, _table(a="type_error"))
    out = assert_agree(op, rec, X, W, backend="a")
    assert out["result"] == ("error", TypeError, "checker crashed")


@pytest.mark.parametrize("signature_key", sorted(SIGNATURES))
@pytest.mark.parametrize("bad", [["a"], ("a",), 3, None, b"a"])
def test_backend_that_is_not_a_str_is_a_type_error_naming_it(signature_key, bad):
    """Not only the list the attack used: any non-str value, in both paths, before any
    check runs, with the parameter, the value and the valid backends in the message."""
    op, rec = make_op(SIGNATURES[signature_key], _table(a="ok", b="ok"), common="ok")
    args, kwargs = plain_call(signature_key)
    out = assert_agree(op, rec, *args, **kwargs, backend=bad)
    kind, exc_type, message = out["result"]
    assert (kind, exc_type) == ("error", TypeError)
    assert message == (
        f"api: backend must be one backend name (a str), got {type(bad).__name__} {bad!r}. "
        "Available backends: 'a', 'b', or 'auto'."
    )


def test_checker_raising_value_error_in_auto_skips_the_backend():
    op, rec = make_op(PLAIN, _table(a="raise", b="ok"))
    out = assert_agree(op, rec, X, W)
    assert out["result"][1][:2] == ("auto", ["b"])
    op2, rec2 = make_op(PLAIN, _table(a="raise"))
    out2 = assert_agree(op2, rec2, X, W)
    assert "support check rejected the inputs: checker says" in out2["result"][2]


def test_checker_raising_other_errors_propagates_in_auto():
    op, rec = make_op(PLAIN, _table(a="type_error", b="ok"))
    out = assert_agree(op, rec, X, W)
    assert out["result"] == ("error", TypeError, "checker crashed")


def test_common_check_false_explicit_is_a_value_error_naming_the_backend():
    op, rec = make_op(PLAIN, _table(a="ok"), common="false")
    out = assert_agree(op, rec, X, W, backend="a")
    assert out["result"] == (
        "error",
        UnsupportedInputsError,
        "Problem size is not supported for api with backend 'a': its common check returned "
        "False for these inputs",
    )


@pytest.mark.parametrize("gate_value", [None, "1"])
def test_common_check_false_auto_is_a_selection_failure(gate_value):
    """Upstream: an automatic-selection failure (BackendSupportedError, not a ValueError),
    no word of the gate, and the dropped list of an earlier call cleared."""
    backends = [("a", "same", "ok", False, "undeclared"), ("e", "same", "ok", True, "undeclared")]
    op, rec = make_op(PLAIN, backends, common="false")
    with gate(gate_value):
        out = assert_agree(op, rec, X, W)  # outcome() leaves a stale dropped record first
    kind, exc_type, message = out["result"]
    assert (kind, exc_type) == ("error", BackendSupportedError)
    assert not issubclass(exc_type, ValueError)
    refused = "its common check returned False for these inputs"
    assert message == auto_refused_by_common_check("api", refused)
    assert GATE not in message
    assert out["dropped_after"] == []


@pytest.mark.parametrize("backend", ["a", "auto"])
def test_common_check_raising_propagates_its_value_error(backend):
    """A common check that raises is the API's input validation: its ValueError as is."""
    op, rec = make_op(PLAIN, _table(a="ok"), common="raise")
    out = assert_agree(op, rec, X, W, backend=backend)
    assert out["result"] == ("error", ValueError, "checker says these inputs are not supported")


@pytest.mark.parametrize(
    ("heuristic", "expected"),
    [
        ("identity", ["a", "b", "c"]),
        ("reverse", ["c", "b", "a"]),
        ("reverse_in_place", ["c", "b", "a"]),
        ("drop_first", ["b", "c"]),
        ("add_unknown", ["not_a_backend", "a", "b", "c"]),
        ("add_in_place", ["not_a_backend", "a", "b", "c"]),
        ("duplicate", ["a", "b", "c"]),
        ("duplicate_reversed", ["c", "b", "a"]),
    ],
)
def test_heuristic_reorders_and_drops(heuristic, expected):
    op, rec = make_op(PLAIN, _table(a="ok", b="ok", c="ok"), heuristic=heuristic)
    out = assert_agree(op, rec, X, W)
    assert out["result"][1][:2] == ("auto", expected)
    assert out["calls"]["heuristic"] == 1


@settings(max_examples=200, deadline=None)
@given(
    answer=st.lists(st.sampled_from(["a", "b", "c", "zz"]), max_size=8),
    fits=st.sets(st.sampled_from(["a", "b", "c"]), min_size=1),
)
def test_candidates_follow_the_heuristic_once_each(answer, fits):
    """Whatever the heuristic answers (repeats, unknown names, viable or not), the
    candidates are the names it gave that are viable backends or no backend at all (a
    runner's name, kept as upstream keeps it), in its order, each once, in both paths."""

    def checker(name: str) -> Callable[..., bool]:
        return lambda x, backend="auto": name in fits

    op = backend_requirement(
        {n: checker(n) for n in ("a", "b", "c")},
        heuristic_func=lambda candidates, x, backend="auto": list(answer),
    )(lambda x, backend="auto": list(op.suitable_auto_backends))
    expected = list(dict.fromkeys(n for n in answer if n in fits or n == "zz"))
    for fn in (op, op.call_reference):
        if expected:
            assert fn(X) == expected
        else:
            with pytest.raises(BackendSupportedError, match="left out by the heuristic"):
                fn(X)


def test_heuristic_dropping_everything():
    op, rec = make_op(PLAIN, _table(a="ok", b="ok"), heuristic="empty")
    out = assert_agree(op, rec, X, W)
    assert out["result"][:2] == ("error", BackendSupportedError)
    assert "left out by the heuristic" in out["result"][2]


def test_heuristic_sees_only_stable_candidates_with_gate_off():
    backends = [("e", "same", "ok", True, "undeclared"), ("a", "same", "ok", False, "undeclared")]
    op, rec = make_op(PLAIN, backends, heuristic="identity")
    fast = outcome(op, op, (X, W), {}, rec)
    assert rec.seen["heuristic"]["candidates"] == ["a"]
    ref = outcome(op, op.call_reference, (X, W), {}, rec)
    assert rec.seen["heuristic"]["candidates"] == ["a"]
    assert fast == ref


CAPABILITY_CASES = [
    # rule, fake cc (None: CPU tensors), runs?
    ("undeclared", None, True),
    ("undeclared", 90, False),
    ("cpu_80_90", None, True),
    ("cpu_80_90", 90, True),
    ("cpu_80_90", 75, False),
    ("gpu_80_90", None, False),
    ("gpu_80_90", 80, True),
    ("gpu_90", 80, False),
]


@pytest.mark.parametrize(("rule", "cc", "runs"), CAPABILITY_CASES)
@pytest.mark.parametrize("backend", ["a", "auto"])
def test_capability_rules(rule, cc, runs, backend):
    op, rec = make_op(PLAIN, [("a", "same", "ok", False, rule)])
    x = torch.zeros(2)
    if cc is not None:
        x.fake_cc = cc
    with fake_cuda():
        out = assert_agree(op, rec, x, W, backend=backend)
    assert (out["result"][0] == "ok") is runs, out
    if not runs:
        assert out["result"][1] is BackendSupportedError


@pytest.mark.parametrize(
    ("rule", "runs"), [("undeclared", True), ("cpu_90", True), ("gpu_90", False)]
)
def test_capability_rules_with_no_tensors(rule, runs):
    op, rec = make_op(PLAIN, [("a", "same", "ok", False, rule)])
    for backend in ("a", "auto"):
        out = assert_agree(op, rec, 1, 2, backend=backend)
        assert (out["result"][0] == "ok") is runs


@pytest.mark.parametrize(
    ("rule", "runs"), [("undeclared", True), ("cpu_90", True), ("gpu_90", False)]
)
def test_capability_rules_on_real_cpu_tensors(rule, runs):
    """No fake: the real capability lookup of a CPU-only process."""
    op, rec = make_op(PLAIN, [("a", "same", "ok", False, rule)])
    for backend in ("a", "auto"):
        out = assert_agree(op, rec, X, W, backend=backend)
        assert (out["result"][0] == "ok") is runs


def test_capability_found_in_star_args():
    """A "CUDA" tensor passed only through ``*args`` decides the capability in both paths."""
    op, rec = make_op(SIGNATURES["varargs"], [("a", "same", "ok", False, "gpu_90")])
    marked = torch.zeros(1)
    marked.fake_cc = 90
    with fake_cuda():
        out = assert_agree(op, rec, 1, marked, backend="a")
    assert out["result"][0] == "ok"


# ---- binding errors ------------------------------------------------------------------


@pytest.mark.parametrize("signature_key", ["plain", "kwonly", "posonly", "backend_first"])
@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda f: f(), id="missing"),
        pytest.param(lambda f: f(X, W, nope=1), id="unexpected-keyword"),
        pytest.param(lambda f: f(X, W, 1.0, "a", 5, 6), id="too-many-positionals"),
        pytest.param(lambda f: f(X, W, x=X), id="twice"),
    ],
)
def test_binding_errors_are_type_errors_in_both_paths(signature_key, call):
    op, rec = make_op(SIGNATURES[signature_key], _table(a="ok"), common="ok")
    with pytest.raises(TypeError):
        call(op)
    with pytest.raises(TypeError):
        call(op.call_reference)
    assert rec.calls == {}  # nothing was checked


def test_positional_only_passed_by_keyword_is_a_type_error():
    op, rec = make_op(SIGNATURES["posonly"], _table(a="ok"))
    with pytest.raises(TypeError):
        op(X, w=W)
    with pytest.raises(TypeError):
        op.call_reference(X, w=W)


# ---- skip_check ----------------------------------------------------------------------


@pytest.mark.parametrize("signature_key", sorted(SIGNATURES))
def test_skip_check_with_a_named_backend_calls_the_body_with_no_checks(signature_key):
    backends = [("a", "same", "false", False, "gpu_90"), ("e", "same", "raise", True, "gpu_90")]
    op, rec = make_op(SIGNATURES[signature_key], backends, common="raise", heuristic="empty")
    args, kwargs = plain_call(signature_key)
    for backend in ("a", "e", "nope"):
        results = []
        for fn in (op, op.call_reference):
            rec.reset()
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                got = fn(*args, **kwargs, backend=backend, skip_check=True)
            assert rec.calls == {}
            results.append((got[0], got[3]))
        assert results[0] == results[1]
        assert results[0][0] == backend


SKIP_AUTO_TABLE = [
    ("a", "same", "ok", False, "undeclared"),
    ("b", "same", "false", False, "undeclared"),
    ("e", "same", "ok", True, "undeclared"),
]


@pytest.mark.parametrize("signature_key", sorted(SIGNATURES))
@pytest.mark.parametrize("gate_value", [None, "1"])
@pytest.mark.parametrize("spelled", ["default", "explicit"])
def test_skip_check_auto_selects_as_a_checked_call(signature_key, gate_value, spelled):
    """backend="auto" (by default or spelled out) with skip_check=True still chooses: the
    common check, the support checkers, the gate and the heuristic run as on a checked
    call (upstream runs the common check there too)."""
    op, rec = make_op(SIGNATURES[signature_key], SKIP_AUTO_TABLE, common="ok", heuristic="reverse")
    args, kwargs = plain_call(signature_key)
    if spelled == "explicit" or signature_key == "backend_first":
        kwargs = {**kwargs, "backend": "auto"}
    with gate(gate_value):
        out = assert_agree(op, rec, *args, **kwargs, skip_check=True)
    backend, suitable, dropped, _ = out["result"][1]
    assert out["calls"] == {"common": 1, "a": 1, "b": 1, "e": 1, "heuristic": 1}
    if gate_value == "1":
        assert (backend, suitable, dropped) == ("auto", ["e", "a"], [])
        assert out["warnings"][0][1] == automatic_selection(op.api_key, "e")
    else:  # the gate applies: the experimental backend never joins the candidates
        assert (backend, suitable, dropped) == ("auto", ["a"], ["e"])
        assert out["warnings"] == []


def test_skip_check_auto_with_nothing_suitable_raises_the_selection_error():
    op, rec = make_op(PLAIN, _table(a="false", b="raise"), common="ok")
    out = assert_agree(op, rec, X, W, skip_check=True)
    kind, exc_type, message = out["result"]
    assert (kind, exc_type) == ("error", BackendSupportedError)
    assert message.startswith(every_candidate_rejected("api", {}))  # then each reason


def test_skip_check_auto_on_a_routed_op_calls_the_body_with_the_candidates_recorded():
    """route_auto's contract: skip_check=True calls reach the body, which finds this
    call's candidates in suitable_auto_backends (what mm's body hands the autotuner)."""
    op, rec = make_op(PLAIN, SKIP_AUTO_TABLE, common="ok", heuristic="reverse")
    op.dispatcher.route_auto(recording_router(op))
    out = assert_agree(op, rec, X, W, skip_check=True)
    assert out["result"][1][:3] == ("auto", ["a"], ["e"])


@settings(max_examples=150, deadline=None)
@given(data=st.data(), signature_key=st.sampled_from(sorted(SIGNATURES)))
def test_skip_check_auto_chooses_as_a_checked_call_does(data, signature_key):
    """The property behind the fix: skip_check=True changes nothing about what
    backend="auto" chooses, records, warns or raises, whatever the common check says (it
    runs, as upstream runs it)."""
    backends = data.draw(backend_tables(signature_key), label="backends")
    heuristic = data.draw(st.sampled_from(HEURISTICS), "heuristic")
    common = data.draw(st.sampled_from(["ok", "false", "raise"]), "common")
    op, rec = make_op(SIGNATURES[signature_key], backends, common=common, heuristic=heuristic)
    args, kwargs = plain_call(signature_key)
    if signature_key == "backend_first":
        kwargs = {**kwargs, "backend": "auto"}
    gate_value = data.draw(st.sampled_from([None, "0", "1"]), "gate")
    with gate(gate_value):
        checked = outcome(op, op, args, kwargs, rec)
        skipped = outcome(op, op, args, {**kwargs, "skip_check": True}, rec)
    assert skipped == checked


@pytest.mark.parametrize("path", ["fast", "reference"])
def test_skip_check_auto_never_reuses_another_calls_candidates(path):
    """A fresh thread has no list to reuse (the body's ``[0]`` was an IndexError), and a
    thread whose last checked call had other inputs does not reuse that stale list."""

    def small(x, backend="auto"):
        return x.numel() < 3

    def any_size(x, backend="auto"):
        return True

    @backend_requirement({"small": small, "big": any_size})
    def op(x, backend="auto"):
        return op.suitable_auto_backends[0], list(op.suitable_auto_backends)

    fn = op if path == "fast" else op.call_reference
    seen: list[Any] = []

    def run() -> None:
        seen.append(fn(torch.zeros(1), skip_check=True))  # a fresh thread
        seen.append(fn(torch.zeros(8)))  # a checked call: only "big" fits
        seen.append(fn(torch.zeros(1), skip_check=True))  # not that stale list

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert seen == [("small", ["small", "big"]), ("big", ["big"]), ("small", ["small", "big"])]


@pytest.mark.parametrize(
    "params",
    [
        "x, skip_check=False, backend='auto'",
        "x, *, skip_check=True, backend='auto'",
        "x, *, skip_check, backend='auto'",
        "x, *, skip_check=0, backend='auto'",
    ],
)
def test_declared_skip_check_must_be_keyword_only_defaulting_to_false(params):
    api = _make(f"def api({params}):\n    return x\n", {}, "api")
    with pytest.raises(TypeError, match=r"declare it as `\*, skip_check: bool = False`"):
        backend_requirement({"a": lambda x, backend: True})(api)


def test_declared_skip_check_is_taken_by_the_dispatcher():
    """An API may declare skip_check (so that type checkers see it): the dispatcher takes
    it, checkers and body never receive it (the body sees its default)."""
    op, rec = make_op(SIGNATURES["declared_skip"], _table(a="false"), common="raise")
    assert list(inspect.signature(op).parameters) == ["x", "w", "backend", "skip_check"]
    assert op.dispatcher.routed_inputs() == ["x", "w"]
    for fn in (op, op.call_reference):
        got = fn(X, W, backend="a", skip_check=True)
        assert got[0] == "a" and got[3]["skip_check"] is False
        with pytest.raises(ValueError, match="checker says"):
            fn(X, W, backend="a")
    rec.reset()
    op(X, W, backend="a", skip_check=True)
    assert rec.calls == {}


# ---- checkers called once, with the right arguments ----------------------------------


@pytest.mark.parametrize("signature_key", sorted(SIGNATURES))
@pytest.mark.parametrize("style", CHECKER_STYLES)
def test_checkers_called_once_with_the_api_arguments(signature_key, style):
    if signature_key == "backend_first" and style == "subset":
        pytest.skip("'subset' declares backend with a default after x")
    sig = SIGNATURES[signature_key]
    backends = [("a", style, "ok", False, "undeclared"), ("b", style, "ok", False, "undeclared")]
    op, rec = make_op(sig, backends, common="ok", common_style=style, heuristic="identity")
    args, kwargs = plain_call(signature_key)
    expected = {"x": X, "w": W} if "w" in sig else {"x": X}
    for backend, checked in (("a", {"common", "a"}), ("auto", {"common", "a", "b", "heuristic"})):
        expected["backend"] = backend
        for fn in (op, op.call_reference):
            rec.reset()
            got = fn(*args, **kwargs, backend=backend)
            assert got[0] == backend
            assert rec.calls == dict.fromkeys(checked, 1)
            for who in checked - {"heuristic"}:
                seen = rec.seen[who]
                for name, value in expected.items():
                    if style in ("subset", "subset_reordered") and name == "w":
                        continue
                    assert seen[name] is value, (who, name, seen)


def test_checker_with_a_parameter_the_api_lacks_is_rejected_at_decoration():
    def api(x, backend="auto"):
        return x

    def checker(x, alpha, backend="auto"):
        return True

    with pytest.raises(TypeError, match="alpha"):
        backend_requirement({"a": checker})(api)
    with pytest.raises(TypeError, match="alpha"):
        backend_requirement({"a": lambda x, backend: True}, common_check=checker)(api)


def test_checker_with_an_extra_defaulted_parameter_is_accepted():
    def api(x, backend="auto"):
        return x

    seen = []

    def checker(x, backend="auto", alpha=5):
        seen.append((x, backend, alpha))
        return True

    op = backend_requirement({"a": checker})(api)
    assert op(1, backend="a") == 1
    assert op.call_reference(1, backend="a") == 1
    assert seen == [(1, "a", 5), (1, "a", 5)]


def test_checker_with_the_same_names_in_another_order_gets_each_value_by_name():
    def api(x, w, backend="auto"):
        return backend

    seen = []

    def checker(w, x, backend="auto"):
        seen.append((x, w))
        return True

    op = backend_requirement({"a": checker})(api)
    assert op("X", "W", backend="a") == "a"
    assert op.call_reference("X", "W", backend="a") == "a"
    assert seen == [("X", "W"), ("X", "W")]


def test_checker_without_an_introspectable_signature():
    # a builtin with no signature: called with the API's own argument spec
    calls_seen = []

    class Checker:
        __signature__ = "none"  # inspect.signature raises TypeError on it

        def __call__(self, *args, **kwargs):
            calls_seen.append((args, kwargs))
            return True

    chk = Checker()
    with pytest.raises((TypeError, ValueError)):
        inspect.signature(chk)

    def api(x, *, backend="auto"):
        return backend

    op = backend_requirement({"a": chk})(api)
    assert op(1, backend="a") == "a"
    assert op.call_reference(1, backend="a") == "a"
    assert calls_seen == [((1,), {"backend": "a"})] * 2


# ---- the generated function dressed as the API ---------------------------------------


def test_generated_function_keeps_the_api_metadata():
    def gemm(a, b, *, alpha=1.0, backend="auto"):
        """Multiply."""
        return a

    op = backend_requirement({"a": lambda a, b, alpha, backend: True})(gemm)
    assert inspect.signature(op) == inspect.signature(gemm)
    assert op.__name__ == "gemm"
    assert op.__qualname__ == gemm.__qualname__
    assert op.__doc__ == "Multiply."
    assert op.__module__ == gemm.__module__
    assert op.__wrapped__ is gemm
    # The code keeps the name of its role (tests/test_generated_code.py)
    assert op.__generated_source__.startswith("def gemm_dispatcher(")
    assert op.dispatcher.function is op
    # skip_check is accepted though not part of the documented signature
    assert op(1, 2, skip_check=True) == 1


def test_generated_function_works_as_a_method():
    seen = []

    def check(self, x, backend="auto"):
        seen.append((self, x, backend))
        return self.ok

    class Layer:
        def __init__(self, ok):
            self.ok = ok

        @backend_requirement({"a": check, "b": check}, heuristic_func=lambda c, *a, **k: c[::-1])
        def forward(self, x, backend="auto"):
            """Run."""
            return (self, x, backend, list(Layer.forward.suitable_auto_backends))

    layer = Layer(True)
    assert layer.forward(1) == (layer, 1, "auto", ["b", "a"])
    assert layer.forward(1, backend="a") == (layer, 1, "a", ["b", "a"])
    assert Layer.forward.call_reference(layer, 1) == (layer, 1, "auto", ["b", "a"])
    assert seen[0] == (layer, 1, "auto")
    assert inspect.signature(layer.forward) == inspect.signature(
        Layer.forward.__wrapped__.__get__(layer)
    )
    assert layer.forward.__doc__ == "Run."
    bad = Layer(False)
    errors = []
    for call in (
        lambda: bad.forward(1, backend="a"),
        lambda: Layer.forward.call_reference(bad, 1, backend="a"),
    ):
        with pytest.raises(ValueError) as info:
            call()
        errors.append(str(info.value))
    assert errors[0] == errors[1]


def test_stacked_under_the_experimental_api_marker():
    """``@flashinfer_experimental_api`` over a dispatched op: exact-signature wrapper."""

    def api(x, w=None, *, backend="auto"):
        return backend

    op = backend_requirement({"a": lambda x, w, backend: True})(api)
    wrapped = flashinfer_experimental_api(op)
    assert inspect.signature(wrapped) == inspect.signature(api)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert wrapped(1, backend="a") == "a"
        assert wrapped(x=1) == "auto"
    assert len([w for w in caught if issubclass(w.category, flashinfer.ExperimentalWarning)]) == 1
    with pytest.raises(TypeError):
        wrapped()
    with pytest.raises(BackendSupportedError):
        wrapped(1, backend="nope")


# ---- per-thread records across calls ---------------------------------------------------


def test_dropped_record_is_cleared_by_the_next_call_in_both_paths():
    backends = [("a", "same", "ok", False, "undeclared"), ("e", "same", "ok", True, "undeclared")]
    op, rec = make_op(PLAIN, backends)
    for fn in (op, op.call_reference):
        fn(X, W)
        assert list(op.dropped_experimental_backends) == ["e"]
        fn(X, W, backend="a")
        assert list(op.dropped_experimental_backends) == []
        fn(X, W)
        with pytest.raises(BackendSupportedError):
            fn(X, W, backend="nope")
        assert list(op.dropped_experimental_backends) == []


def test_explicit_call_leaves_suitable_backends_of_the_last_auto_call():
    op, rec = make_op(PLAIN, _table(a="ok", b="ok"), heuristic="reverse")
    for fn in (op, op.call_reference):
        op.dispatcher._state.r.suitable = []
        fn(X, W)
        assert list(op.suitable_auto_backends) == ["b", "a"]
        assert fn(X, W, backend="a")[1] == ["b", "a"]


@pytest.fixture(autouse=True)
def _quiet_gate_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", flashinfer.ExperimentalWarning)
        yield


def test_heuristic_cannot_bring_back_a_dropped_experimental_backend_in_place():
    """Gate off: a heuristic editing its candidate list cannot re-add the experimental one."""

    def heuristic(candidates, x, w, scale=1.0, backend="auto"):
        candidates.insert(0, "e")
        return candidates

    op = backend_requirement(
        {
            "a": lambda x, w, scale, backend: True,
            "e": experimental_backend(lambda x, w, scale, backend: True),
        },
        heuristic_func=heuristic,
    )(lambda x, w, scale=1.0, backend="auto": list(op.suitable_auto_backends))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert op(X, W) == ["a"]
        assert op.call_reference(X, W) == ["a"]
    assert caught == []


def test_parameters_named_like_builtins_do_not_shadow_the_generated_code():
    """Generated code names its locals after the API's parameters: the builtins it uses
    must not be reachable through such names (a parameter may be called ``type``)."""

    def api(type, ValueError=None, BaseException=None, backend="auto"):  # noqa: A002, N803
        return backend, list(op.suitable_auto_backends)

    def refuse(type, ValueError=None, BaseException=None, backend="auto"):  # noqa: A002, N803
        raise builtins.ValueError("never fits")

    op = backend_requirement({"no": refuse, "yes": lambda *a, **k: True})(api)
    assert op(1) == ("auto", ["yes"])
    assert op.call_reference(1) == ("auto", ["yes"])
    op.dispatcher.route_auto(lambda candidates, inputs: (list(candidates), inputs))
    assert op(1, "v", "b") == (["yes"], (1, "v", "b"))
