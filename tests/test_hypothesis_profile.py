"""The stable lane's Hypothesis draws are the commit's, not the seed's: under CI (the ``CI``
variable, which GitHub Actions sets and .ci/run exports) tests/conftest.py loads the ``ci``
profile (tests/hypothesis_profiles.py), so two runs draw the same examples; elsewhere
Hypothesis' default holds, and ``--hypothesis-profile`` overrides either way."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import hypothesis
import pytest
from hypothesis_profiles import CI_PROFILE, DEFAULT_PROFILE, profile_for

ROOT = Path(__file__).resolve().parents[1]
# The variables by which Hypothesis itself detects CI (hypothesis._settings._CI_VARS in recent
# releases); the "elsewhere" run clears them all, or it would be a CI run under GitHub Actions.
CI_VARIABLES = {
    "CI",
    "__TOX_ENVIRONMENT_VARIABLE_ORIGINAL_CI",
    "TF_BUILD",
    "bamboo.buildKey",
    "BUILDKITE",
    "CIRCLECI",
    "CIRRUS_CI",
    "CODEBUILD_BUILD_ID",
    "GITHUB_ACTIONS",
    "GITLAB_CI",
    "HEROKU_TEST_RUN_ID",
    "TEAMCITY_VERSION",
} | set(getattr(hypothesis._settings, "_CI_VARS", ()))

# Records each draw and the profile in force; run by a pytest subprocess with tests/conftest.py
# as a plugin (``-p conftest``), as the lanes load it.
PROBE = textwrap.dedent(
    """
    import os

    from hypothesis import given, settings, strategies as st


    @given(st.lists(st.integers()))
    def test_draws(values):
        with open(os.environ["PROBE_OUT"], "a", encoding="utf-8") as out:
            out.write(f"{settings.get_current_profile_name()} {values}\\n")
    """
)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, DEFAULT_PROFILE),
        ("true", CI_PROFILE),
        ("1", CI_PROFILE),
        ("", CI_PROFILE),  # set to any value, as Hypothesis itself reads it
    ],
)
def test_the_ci_profile_is_chosen_when_ci_is_set(value, expected):
    environ = {} if value is None else {"CI": value}
    assert profile_for(environ) == expected


def _probe(tmp_path: Path, name: str, ci: str | None, *args: str) -> list[str]:
    test = tmp_path / "test_probe.py"
    test.write_text(PROBE, encoding="utf-8")
    out = tmp_path / f"{name}.txt"
    env = {k: v for k, v in os.environ.items() if k not in CI_VARIABLES}
    if ci is not None:
        env["CI"] = ci
    env["PROBE_OUT"] = str(out)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "tests"), str(ROOT)])
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "conftest"]
    done = subprocess.run(
        [*argv, *args, str(test)], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return out.read_text(encoding="utf-8").splitlines()


def test_under_ci_two_runs_draw_the_same_examples(tmp_path):
    first = _probe(tmp_path, "first", "true")
    second = _probe(tmp_path, "second", "true")
    assert {line.split(" ", 1)[0] for line in first} == {CI_PROFILE}
    assert first == second


def test_elsewhere_hypothesis_default_holds_and_the_option_overrides(tmp_path):
    assert {line.split(" ", 1)[0] for line in _probe(tmp_path, "dev", None)} == {DEFAULT_PROFILE}
    chosen = _probe(tmp_path, "chosen", "true", "--hypothesis-profile", DEFAULT_PROFILE)
    assert {line.split(" ", 1)[0] for line in chosen} == {DEFAULT_PROFILE}


def test_ci_run_exports_ci_before_the_test_command():
    lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    export = lines.index('export CI="${CI:-true}"')
    assert export < next(i for i, line in enumerate(lines) if "scripts/test.sh" in line)
