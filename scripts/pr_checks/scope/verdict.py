"""The final verdict of pr-test.yml over its lanes' results (``toJSON(needs)``).

Every lane must succeed; the targeted lane may be skipped only when no test scope was
published, so a published scope that did not run fails the pull request.  A job named
optional (the GPU job, where the repository has no GPU runner) may be skipped, never fail.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any


def check_results(
    needs: Mapping[str, Any], scope_job: str = "scope", optional: Collection[str] = ()
) -> list[str]:
    """Problems with the lanes' results (``toJSON(needs)``): every lane must succeed; only
    the targeted lane may be skipped, and only when no scope was published, and the
    ``optional`` jobs (skipped where no runner for them exists)."""
    problems = []
    scope_info = needs.get(scope_job)
    if scope_info is None:
        return [f"job {scope_job!r} is missing from needs"]
    scoped = (scope_info.get("outputs") or {}).get("scoped") == "true"
    for job, info in needs.items():
        result = info.get("result")
        if job.startswith("targeted") and result == "skipped" and not scoped:
            continue
        if job in optional and result == "skipped":
            continue
        if result != "success":
            extra = " although a test scope was published" if job.startswith("targeted") else ""
            problems.append(f"job {job!r} result is {result!r}{extra}")
    if scoped and not any(job.startswith("targeted") for job in needs):
        problems.append("a test scope was published but no targeted lane is in needs")
    return problems
