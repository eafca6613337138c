"""The suite holds wherever the repository is cloned (issue 34, item 22): a one-character
folder name, spaces, non-ASCII, a symlinked checkout.  The tests that read the checkout's own
location (the install report's, in tests/test_backends_report_fields.py) are run in a copy of
the repository at such a path, through a symlink to it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from repo_copy import copy_repository

# The tests whose subject is the checkout's path (the editable note compares it).
LOCATION_TESTS = ["tests/test_backends_report_fields.py", "-k", "install or checkout"]


def test_the_install_report_tests_hold_in_an_odd_checkout_reached_through_a_link(tmp_path):
    checkout = copy_repository(tmp_path / "a folder ü ñ" / "p")
    link = tmp_path / "q"
    link.symlink_to(checkout, target_is_directory=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLASHINFER_", "PYTEST_"))}
    env["PYTHONPATH"] = str(link)  # the copy's package, imported through the link
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *LOCATION_TESTS]
    done = subprocess.run(argv, cwd=link, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    # It ran the copy's tests, not this checkout's.
    assert " passed" in done.stdout and "deselected" in done.stdout, done.stdout
    assert str(Path(__file__).resolve().parents[1]) not in done.stdout
