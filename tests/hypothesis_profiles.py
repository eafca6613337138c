"""Hypothesis profiles for both lanes, chosen by tests/conftest.py.

``ci``: the draws depend on the test's code only (``derandomize``), nothing is read from or
written to a local example database, nothing fails for being slow (a loaded runner is not a
bug): the lane's verdict is the commit's, not the seed's or the machine's.  A failure prints
its reproduction blob.

Elsewhere (a developer's machine) Hypothesis' own default holds: random draws and the local
database, so a new counterexample can still be found, and is then pinned with ``@example``.

The rule is Hypothesis' own: ``ci`` where the ``CI`` variable is set, to any value (CI services
set it; .ci/run exports it).  Recent Hypothesis releases ship this very profile and load it
themselves; registering and loading it here keeps it on the older releases pyproject.toml
allows.  ``pytest --hypothesis-profile NAME`` overrides either way.
"""

from __future__ import annotations

from collections.abc import Mapping

from hypothesis import HealthCheck, settings

CI_PROFILE = "ci"
DEFAULT_PROFILE = "default"

settings.register_profile(
    CI_PROFILE,
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)


def profile_for(environ: Mapping[str, str]) -> str:
    """``ci`` where ``CI`` is set (any value, as Hypothesis reads it), else the default."""
    return CI_PROFILE if "CI" in environ else DEFAULT_PROFILE


def load_for(environ: Mapping[str, str]) -> str:
    """Load the profile ``environ`` calls for (:func:`profile_for`); return its name."""
    name = profile_for(environ)
    settings.load_profile(name)
    return name
