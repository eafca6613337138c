"""Backend declarations (flashinfer.Backend): one value per backend, the table's two forms, and
the checks made when an API is decorated (names, collisions, experimental code unmarked).

What ``"auto"`` does with a declared preference is tested on the real operators in
tests/experimental/test_declared_preferences.py; here on toy APIs.
"""

from __future__ import annotations

import datetime
import pickle
import re
import shutil
import subprocess
import sys
import types
import warnings

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import flashinfer
from flashinfer import Backend, ExperimentalWarning, backend_requirement, experimental_backend
from flashinfer.backend_dispatch import supported_compute_capability
from flashinfer.gating.messages import automatic_selection

GATE = "FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS"
SOON = (datetime.date.today() + datetime.timedelta(days=60)).isoformat()  # a valid date


pytestmark = pytest.mark.usefixtures("isolated_op_registry")


@supported_compute_capability([80, 90], cpu=True)
def _accepts(x, backend="auto"):
    return True


def _run_double(x):
    return x * 2


def _run_triple(x):
    return x * 3


def _declared_api(*backends, heuristic=None):
    @backend_requirement(list(backends), heuristic_func=heuristic)
    def api(x, backend="auto"):
        if backend == "auto":
            backend = api.suitable_auto_backends[0]
        return api.implementations[backend](x)

    return api


def _in_module(fn, module):
    """A copy of ``fn`` that says it was defined in ``module``."""
    copy = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__)
    copy.__dict__.update(fn.__dict__)  # its marks
    copy.__module__ = module
    return copy


# ---- the declaration form ------------------------------------------------------------------


def test_the_body_runs_the_declared_implementation_of_the_chosen_backend():
    api = _declared_api(
        Backend("double", check=_accepts, run=_run_double),
        Backend("triple", check=_accepts, run=_run_triple),
    )
    x = torch.ones(3)
    assert torch.equal(api(x), x * 2)
    assert torch.equal(api(x, backend="triple"), x * 3)
    assert list(api.backends) == list(api.backend_checks) == ["double", "triple"]
    assert api.backend_checks["triple"] is _accepts
    assert dict(api.implementations) == {"double": _run_double, "triple": _run_triple}


def test_upstream_form_declares_no_implementations():
    @backend_requirement({"a": _accepts})
    def api(x, backend="auto"):
        return x

    assert dict(api.backends) == {} and dict(api.implementations) == {}
    assert api.has_backend("a") and api.stable_backends == ("a",)


def test_the_table_of_implementations_can_change_a_value_but_not_its_backends():
    api = _declared_api(Backend("double", check=_accepts, run=_run_double))
    table = api.implementations
    table["double"] = _run_triple  # a spy, a wrapper: allowed
    assert torch.equal(api(torch.ones(2), backend="double"), torch.full((2,), 3.0))
    with pytest.raises(KeyError, match="'extra' is not a backend of this API"):
        table["extra"] = _run_double
    for change in (
        lambda: table.pop("double"),
        lambda: table.update(extra=_run_double),
        lambda: table.setdefault("extra", _run_double),
        table.clear,
        table.popitem,
    ):
        with pytest.raises(TypeError, match="fixed by its backend table"):
            change()
    with pytest.raises(TypeError, match="fixed by its backend table"):
        del table["double"]
    assert list(table) == ["double"]
    assert pickle.loads(pickle.dumps(table)) == dict(table)  # a plain dict of the items


def test_a_declaration_refuses_what_is_not_callable():
    with pytest.raises(TypeError, match="Backend 'x': run must be callable, got str"):
        Backend("x", check=_accepts, run="kernel")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Backend 'x': prefer must be callable"):
        Backend("x", check=_accepts, run=_run_double, prefer=True)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Backend("x", _accepts, _run_double)  # type: ignore[misc]  # check and run by keyword


# ---- names, checked at decoration ------------------------------------------------------------

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


def _accepted_by_both_forms(name):
    """Whether the declaration form and upstream's dict form accept ``name`` (they must agree)."""
    verdicts = []
    for build in (
        lambda: _declared_api(Backend(name, check=_accepts, run=_run_double)),
        lambda: backend_requirement({name: _accepts})(lambda x, backend="auto": x),
    ):
        try:
            build()
        except ValueError as exc:
            assert str(name) in str(exc) or repr(name) in str(exc)
            verdicts.append(False)
        else:
            verdicts.append(True)
    assert verdicts[0] == verdicts[1], name
    return verdicts[0]


@given(st.one_of(st.text(max_size=8), st.from_regex(_NAME, fullmatch=True)))
def test_a_backend_name_is_an_ascii_identifier_other_than_auto(name):
    expected = bool(_NAME.fullmatch(name)) and name != "auto"
    assert _accepted_by_both_forms(name) == expected


@pytest.mark.parametrize(
    "name, match",
    [
        ("auto", r"'auto' is reserved: backend='auto' asks the dispatcher to choose"),
        ("auto|split", r"'auto\|split' is not a backend name: use ASCII letters, digits"),
        ("a,b", r"'a,b' is not a backend name"),
        ("-k", r"'-k' is not a backend name.*starting with a letter"),
        ("", r"'' is not a backend name"),
        ("_private", r"'_private' is not a backend name.*starting with a letter"),
        ("rowwise ", r"'rowwise ' is not a backend name"),
    ],
)
def test_a_bad_name_is_an_error_that_says_what_to_do(name, match):
    with pytest.raises(ValueError, match=match):
        Backend(name, check=_accepts, run=_run_double)

    with pytest.raises(ValueError, match=r"backend_requirement: .*api: the backend name " + match):

        @backend_requirement({name: _accepts})
        def api(x, backend="auto"):
            return x


def test_a_name_that_is_not_a_str_is_refused():
    with pytest.raises(ValueError, match="is a int, not a str"):
        backend_requirement({1: _accepts})(lambda x, backend="auto": x)  # type: ignore[dict-item]


def test_two_declarations_of_one_name_collide_naming_both_checkers():
    """The slip of the issue: an experimental backend reusing a stable name ("triton")
    silently replaced the stable checker in a dict literal.  Declarations carry their names,
    so the second one is refused."""

    @experimental_backend(owner="@alice", tracking_issue=1, graduate_by=SOON)
    @supported_compute_capability([90], cpu=True)
    def check_fast(x, backend="auto"):
        return True

    with pytest.raises(ValueError) as info:
        _declared_api(
            Backend("triton", check=_accepts, run=_run_double),
            Backend("triton", check=check_fast, run=_run_triple),
        )
    message = str(info.value)
    assert "has two backends named 'triton'" in message
    assert f"{__name__}._accepts" in message and "check_fast" in message
    assert "give the new backend a name of its own" in message


def test_the_two_forms_do_not_mix():
    with pytest.raises(TypeError, match="maps 'a' to a Backend declaration; pass declarations"):
        backend_requirement({"a": Backend("a", check=_accepts, run=_run_double)})(
            lambda x, backend="auto": x
        )
    with pytest.raises(TypeError, match="item 1 is function"):
        backend_requirement([Backend("a", check=_accepts, run=_run_double), _accepts])(
            lambda x, backend="auto": x
        )
    with pytest.raises(TypeError, match="must be a list of Backend declarations or a mapping"):
        backend_requirement("a")(lambda x, backend="auto": x)  # type: ignore[arg-type]


@pytest.mark.skipif(shutil.which("ruff") is None, reason="ruff is not installed")
def test_ruff_reports_a_duplicate_key_in_a_dict_literal_table(tmp_path):
    """A duplicate key of a dict literal never reaches the decorator; the lint the project
    runs (F601, in ruff's "F" rules selected in pyproject.toml) is what catches it."""
    source = tmp_path / "table.py"
    source.write_text(
        "from flashinfer import backend_requirement\n\n"
        "def check_a(x):\n    return True\n\n"
        "def check_b(x):\n    return True\n\n"
        '@backend_requirement({"triton": check_a, "triton": check_b})\n'
        'def api(x, backend="auto"):\n    return x\n'
    )
    root = __import__("pathlib").Path(flashinfer.__file__).parents[1]
    result = subprocess.run(
        ["ruff", "check", "--config", str(root / "pyproject.toml"), str(source)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1 and "F601" in result.stdout, result.stdout + result.stderr


# ---- experimental code in a stable backend, caught at decoration -----------------------------


def test_an_implementation_under_experimental_needs_a_marked_checker():
    run = _in_module(_run_double, "flashinfer.experimental.fast_norm.support")
    with pytest.raises(ValueError) as info:
        _declared_api(Backend("fast", check=_accepts, run=run))
    message = str(info.value)
    assert "the implementation of backend 'fast' is defined in module " in message
    assert "'flashinfer.experimental.fast_norm.support'" in message
    assert "not marked @experimental_backend" in message


def _run_imports_an_experimental_kernel(x):
    from flashinfer.experimental.fast_norm.kernel import fast  # type: ignore[import-not-found]

    return fast(x)


class _RunnerImportingAnExperimentalKernel:
    def __call__(self, inputs, tactic=None):
        from flashinfer.experimental.fast_gemm import kernel  # type: ignore[import-not-found]

        return kernel


@pytest.mark.parametrize(
    "run, where",
    [
        (_run_imports_an_experimental_kernel, "_run_imports_an_experimental_kernel"),
        (_RunnerImportingAnExperimentalKernel(), "__call__"),
    ],
)
def test_a_stable_implementation_importing_experimental_code_is_refused(run, where):
    """The slip of the issue: an unmarked checker in a stable module whose kernel lives
    under flashinfer/experimental/ became a stable backend that "auto" used with the gate
    off.  The declaration pairs the two, so the import is seen when the API is decorated."""
    with pytest.raises(ValueError) as info:
        _declared_api(Backend("fast", check=_accepts, run=run))
    message = str(info.value)
    assert "imports 'flashinfer.experimental." in message and f"(in {where})" in message
    assert "not marked @experimental_backend" in message


def test_a_relative_import_of_experimental_code_is_seen_too():
    namespace: dict = {"__name__": "flashinfer.fake_stable_module"}
    exec(  # a function of a stable flashinfer module: the import is relative
        "def run(x):\n    from .experimental.fast_norm import kernel\n    return kernel(x)\n",
        namespace,
    )
    with pytest.raises(ValueError, match="imports 'flashinfer.experimental.fast_norm'"):
        _declared_api(Backend("fast", check=_accepts, run=namespace["run"]))


def test_a_marked_backend_may_live_and_import_under_experimental():
    check = experimental_backend(owner="@alice", tracking_issue=1, graduate_by=SOON)(
        _in_module(_accepts, "flashinfer.experimental.fast_norm.support")
    )
    api = _declared_api(
        Backend("ref", check=_accepts, run=_run_double),
        Backend("fast", check=check, run=_run_imports_an_experimental_kernel),
    )
    assert api.experimental_backends == {"fast"} and api.stable_backends == ("ref",)


def test_an_unmarked_checker_under_experimental_is_named_before_its_preference():
    """The likelier mistake (a forgotten mark) is the one reported, not the preference."""
    check = _in_module(_accepts, "flashinfer.experimental.fast_norm.support")
    with pytest.raises(ValueError, match="is defined in module .* but the backend's checker"):
        _declared_api(Backend("fast", check=check, run=_run_double, prefer=lambda x: True))


def test_only_an_experimental_backend_declares_a_preference():
    with pytest.raises(
        ValueError, match="backend 'b' is stable .* but declares prefer=.*heuristic"
    ):
        _declared_api(Backend("b", check=_accepts, run=_run_double, prefer=lambda x: True))


# ---- a declared preference, on a toy API (the real operators: tests/experimental) ------------


def _experimental_check():
    @experimental_backend(owner="@alice", tracking_issue=1, graduate_by=SOON)
    @supported_compute_capability([90], cpu=True)
    def check_fast(x, backend="auto"):
        return True

    return check_fast


def _api_preferring_fast_for_long_inputs():
    return _declared_api(
        Backend("ref", check=_accepts, run=_run_double),
        Backend("fast", check=_experimental_check(), run=_run_double, prefer=lambda x: len(x) >= 4),
        heuristic=lambda candidates, x, backend="auto": sorted(candidates, key="fast".__eq__),
    )


@pytest.mark.parametrize("call", ["generated", "reference"])
def test_auto_puts_a_preferring_experimental_backend_first_only_with_the_gate_on(
    monkeypatch, recwarn, call
):
    api = _api_preferring_fast_for_long_inputs()
    run = api if call == "generated" else api.call_reference
    run(torch.ones(8))
    assert list(api.suitable_auto_backends) == ["ref"]  # gate off: never, not even listed
    assert list(api.dropped_experimental_backends) == ["fast"]
    monkeypatch.setenv(GATE, "1")
    run(torch.ones(2))
    assert list(api.suitable_auto_backends) == ["ref", "fast"]  # prefer says no: heuristic
    run(torch.ones(8))
    assert list(api.suitable_auto_backends) == ["fast", "ref"]  # prefer says yes
    assert automatic_selection(api.api_key, "fast") in [str(w.message) for w in recwarn]


def test_preferences_come_after_the_heuristic_which_stays_the_apis_own():
    api = _api_preferring_fast_for_long_inputs()
    assert api.heuristic_func(["fast", "ref"], torch.ones(8)) == ["ref", "fast"]  # its own
    prefer_first = api.dispatcher.prefer_first
    assert prefer_first(["ref", "fast"], {"x": torch.ones(8)}) == ["fast", "ref"]
    assert prefer_first(["ref", "fast"], {"x": torch.ones(2)}) == ["ref", "fast"]
    assert prefer_first(["ref"], {"x": torch.ones(8)}) == ["ref"]  # not a candidate: not asked


@pytest.mark.parametrize("gate", [None, "1"])
def test_explain_tells_the_preferred_choice_as_a_call_makes_it(monkeypatch, gate):
    if gate:
        monkeypatch.setenv(GATE, gate)
    api = _api_preferring_fast_for_long_inputs()
    explanation = api.explain(torch.ones(8))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExperimentalWarning)  # the automatic pick's warning
        api(torch.ones(8))
    assert explanation.chosen == api.suitable_auto_backends[0] == ("fast" if gate else "ref")


def test_a_preference_takes_a_subset_of_the_parameters_like_a_checker():
    def prefer(backend):  # only the backend argument; called by name
        return backend == "auto"

    api = _declared_api(
        Backend("ref", check=_accepts, run=_run_double),
        Backend("fast", check=_experimental_check(), run=_run_triple, prefer=prefer),
    )
    assert api.dispatcher.prefer_first(["ref", "fast"], {"x": 1, "backend": "auto"}) == [
        "fast",
        "ref",
    ]
    with pytest.raises(TypeError, match="preference of backend 'fast'.*has parameter 'y'"):
        _declared_api(
            Backend("fast", check=_experimental_check(), run=_run_triple, prefer=lambda y: True)
        )


def test_flashinfer_exports_backend_from_its_paths():
    import flashinfer.backend_dispatch as facade

    assert flashinfer.Backend is facade.Backend is Backend
    assert "Backend" in flashinfer.__all__ and "Backend" in facade.__all__
    assert sys.modules["flashinfer.backend_dispatch"] is facade
