"""A bad ``FLASHINFER_BACKENDS`` is echoed in its warning cut to a readable length.

Issue 21, item 18 (first half): a 70 KB invalid value was printed whole.  The property, over
generated invalid values of any length and any place of the bad part: the warning is bounded
in length; a long value shows its first ``ECHO_LIMIT`` characters, an ellipsis and its
length; a short one is shown whole.  In-process: the variable is read again for each case.
"""

from __future__ import annotations

import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flashinfer.dispatch import restrictions
from flashinfer.settings import forget_unrecognised_values

BOUND = 4 * restrictions.ECHO_LIMIT + 400  # the echoes, the explanation and the format


@pytest.fixture
def reread():
    """Read the variable again as in a fresh process (each call; so it may serve every
    generated input); restore the state afterwards."""
    saved = restrictions._env_read, dict(restrictions._env)

    def read(monkeypatch: pytest.MonkeyPatch, value: str) -> list[str]:
        monkeypatch.setenv(restrictions.BACKENDS_ENV, value)
        forget_unrecognised_values()
        restrictions._env_read = False
        restrictions._env.clear()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            restrictions._read_env()
        assert restrictions._env == {}  # ignored as a whole
        return [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]

    yield read
    restrictions._env_read, restrictions._env = saved[0], saved[1]
    restrictions._update_switch()


_long_text = st.text(st.characters(codec="utf-8", exclude_characters=";=\x00"), min_size=1)
_bad_values = st.one_of(
    # a part that is not API=BACKEND, long
    st.tuples(st.just("mm=torch;"), _long_text.map(lambda t: "x" * 300 + t)).map("".join),
    # an unknown API with a long name
    st.integers(200, 80_000).map(lambda n: "mm=torch;" + "a" * n + "=torch"),
    # an unknown backend with a long name, first or last
    st.integers(200, 80_000).map(lambda n: "mm=" + "t" * n),
    st.integers(200, 80_000).map(lambda n: "rmsnorm=torch;mm=torch," + "q" * n),
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(value=_bad_values)
def test_a_long_bad_value_is_cut_in_the_warning(value, reread):
    with pytest.MonkeyPatch.context() as mp:
        (message,) = reread(mp, value)
    assert len(message) <= BOUND, len(message)
    limit = restrictions.ECHO_LIMIT
    assert message.startswith(f"{restrictions.BACKENDS_ENV}={value[:limit] + '...'!r}")
    assert f"the value is {len(value)} characters long" in message
    assert "the whole value is ignored" in message


@pytest.mark.parametrize("value", ["mm:torch", "mm=trtion", "nope=torch", "mm=torch;;", "m" * 150])
def test_a_short_bad_value_is_shown_whole(value, reread):
    with pytest.MonkeyPatch.context() as mp:
        (message,) = reread(mp, value)
    assert message.startswith(f"{restrictions.BACKENDS_ENV}={value!r} is not a recognised value")
    assert "characters long" not in message and "characters cut" not in message
