"""``FLASHINFER_STRICT_SETTINGS=1`` (issue 34, item 16): a malformed value of any variable the
settings page lists raises ``SettingsError`` at its first use, naming the variable, the value
and what is accepted; by default the same value warns once and fails open.  The malformed
values are drawn, per variable."""

from __future__ import annotations

import io
import os
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from flashinfer.settings import ENVIRONMENT, STRICT_SETTINGS_ENV, SettingsError

# Values an environment variable can hold: no NUL, no lone surrogate.
TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), max_size=40
)
SWITCH = TEXT.filter(lambda v: v not in ("", "0", "1"))


def _not_int(value: str) -> bool:
    try:
        int(value or 0)
    except ValueError:
        return True
    return False


def _backends_rejects(value: str) -> bool:
    from flashinfer.dispatch.backend_names import parse_env_value

    if not value.strip():
        return False
    try:
        parse_env_value(value, "FLASHINFER_BACKENDS")
    except ValueError:
        return True
    return False


def _read_gate() -> Any:
    from flashinfer.gating.gate import experimental_auto_backends_allowed

    return experimental_auto_backends_allowed()


def _read_backends() -> Any:
    from flashinfer.dispatch import restrictions

    saved = restrictions._env_read, dict(restrictions._env)
    restrictions._env_read = False
    restrictions._env.clear()
    try:
        restrictions._read_env()
        return dict(restrictions._env)
    finally:
        restrictions._env.clear()
        restrictions._env.update(saved[1])
        restrictions._env_read = saved[0]
        restrictions._update_switch()


def _read_warnings_action() -> Any:
    from flashinfer.settings import read

    return read("FLASHINFER_EXPERIMENTAL_WARNINGS")


def _read_log_level() -> Any:
    from flashinfer.gating.stable_marker import api_log_level

    return api_log_level()


def _read_dispatch_log() -> Any:
    from flashinfer.dispatch.choice_log import read_switch

    return read_switch()


def _read_autotuner_log() -> Any:
    import contextlib

    from flashinfer.autotuner.timing import log

    printed = io.StringIO()
    with contextlib.redirect_stderr(printed):
        log("a line")
    return printed.getvalue()  # nothing printed: off


# variable -> (a read at its first use, what it reads as when it fails open, malformed values)
READERS: dict[str, tuple[Callable[[], Any], Any, st.SearchStrategy[str]]] = {
    "FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS": (_read_gate, False, SWITCH),
    "FLASHINFER_BACKENDS": (
        _read_backends,
        {},
        st.one_of(
            st.builds(lambda b: f"rmsnorm={b}", TEXT.filter(lambda b: b.strip())),
            st.builds(lambda a: f"{a}=torch", TEXT),
            TEXT,
        ).filter(_backends_rejects),
    ),
    "FLASHINFER_EXPERIMENTAL_WARNINGS": (
        _read_warnings_action,
        None,
        TEXT.filter(
            lambda v: v and v not in ("default", "error", "ignore", "always", "module", "once")
        ),
    ),
    "FLASHINFER_LOGLEVEL": (_read_log_level, 0, TEXT.filter(_not_int)),
    "FLASHINFER_DISPATCH_LOG": (_read_dispatch_log, False, SWITCH),
    "FLASHINFER_AUTOTUNER_LOG": (_read_autotuner_log, "", SWITCH),
}

NOT_CHECKED = {
    # Triton's own switch: every value means something to Triton (anything but its true
    # spellings is off), so no value is malformed for flashinfer to refuse.
    "TRITON_INTERPRET",
    # The switch itself: a malformed value raises whenever strictness is asked (below).
    STRICT_SETTINGS_ENV,
    # Read by the command's error handler: said on stderr, not raised (test below).
    "FLASHINFER_CLI_TRACEBACK",
}

PINNED = {  # the spellings the issue names, for every variable
    "FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS": ["yes", "true", "on", " 1"],
    "FLASHINFER_BACKENDS": ["rmsnorm=trition", "mm", "mm=torch;;"],
    "FLASHINFER_EXPERIMENTAL_WARNINGS": ["errors", "Error"],
    "FLASHINFER_LOGLEVEL": ["yes", "1.5", "debug"],
    "FLASHINFER_DISPATCH_LOG": ["yes", "true", "2"],
    "FLASHINFER_AUTOTUNER_LOG": ["yes", "true", "2"],
}


def test_every_listed_variable_is_checked_or_says_why_not():
    listed = {row.name for row in ENVIRONMENT}
    assert set(READERS) | NOT_CHECKED == listed


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str, str | None], None]]:
    from flashinfer.settings import forget_unrecognised_values

    saved = dict(os.environ)

    def set_env(name: str, value: str | None) -> None:
        forget_unrecognised_values()
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value

    yield set_env
    os.environ.clear()
    os.environ.update(saved)
    forget_unrecognised_values()


def _strict_raises(env: Any, name: str, value: str) -> None:
    read = READERS[name][0]
    env(STRICT_SETTINGS_ENV, "1")
    env(name, value)
    for _ in range(2):  # at its first use, and at each use after: nothing is remembered
        with pytest.raises(SettingsError) as caught:
            read()
        error = caught.value
        assert (error.variable, error.value) == (name, value)
        message = str(error)
        assert f"{name}={value!r}" in message and "Accepted values: " in message
        assert f"set {name} to an accepted value or unset it" in message


def _default_warns_and_fails_open(env: Any, name: str, value: str) -> None:
    read, fails_open_as, _ = READERS[name]
    env(STRICT_SETTINGS_ENV, None)
    env(name, value)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert read() == fails_open_as
        assert read() == fails_open_as
    said = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(said) == 1, said  # once
    assert said[0].startswith(f"{name}=") and "is not a recognised value" in said[0]


@pytest.mark.parametrize("name", sorted(READERS))
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_a_malformed_value_raises_under_strict_and_warns_by_default(env, name, data):
    value = data.draw(READERS[name][2], label="value")
    _strict_raises(env, name, value)
    _default_warns_and_fails_open(env, name, value)


@pytest.mark.parametrize("name,value", [(n, v) for n, vs in PINNED.items() for v in vs])
def test_the_spellings_the_issue_names(env, name, value):
    _strict_raises(env, name, value)
    _default_warns_and_fails_open(env, name, value)


@pytest.mark.parametrize("name", sorted(READERS))
def test_accepted_values_do_not_raise_under_strict(env, name):
    accepted = {"FLASHINFER_BACKENDS": "rmsnorm=torch", "FLASHINFER_EXPERIMENTAL_WARNINGS": "once"}
    env(STRICT_SETTINGS_ENV, "1")
    for value in (accepted.get(name, "0"), ""):
        env(name, value)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            READERS[name][0]()


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(value=SWITCH)
@example(value="yes")
def test_a_malformed_strict_switch_raises_when_it_is_asked(env, value):
    env(STRICT_SETTINGS_ENV, value)
    env("FLASHINFER_DISPATCH_LOG", "yes")
    with pytest.raises(SettingsError) as caught:
        _read_dispatch_log()
    assert caught.value.variable == STRICT_SETTINGS_ENV


@pytest.mark.parametrize("strict", [False, True])
def test_a_malformed_cli_traceback_is_said_on_stderr(env, strict):
    from flashinfer.cli import traceback_asked

    env(STRICT_SETTINGS_ENV, "1" if strict else None)
    env("FLASHINFER_CLI_TRACEBACK", "yes")
    err = io.StringIO()
    assert traceback_asked(err) is False  # off either way: the failure's line stands
    word = "error" if strict else "warning"
    assert err.getvalue().startswith(f"flashinfer: {word}: FLASHINFER_CLI_TRACEBACK='yes'")


def test_the_report_runs_under_strict_and_shows_the_bad_values(env):
    import contextlib

    from flashinfer.cli import main

    env(STRICT_SETTINGS_ENV, "1")
    env("FLASHINFER_BACKENDS", "rmsnorm=trition")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["backends"]) == 0
    assert "FLASHINFER_BACKENDS='rmsnorm=trition'" in out.getvalue()
