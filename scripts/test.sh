#!/usr/bin/env bash
# The whole test suite, as README.md and .ci/run give it. Each step must pass; a pytest lane
# that collects nothing exits 5 and fails the run, so a lane can never vanish into a green.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

step "lint: ruff"
ruff check .
ruff format --check .

step "types: mypy on the package"
mypy flashinfer

step "stable lane: pytest tests/ (tests/experimental/ excluded by norecursedirs)"
python -m pytest tests -q -p no:cacheprovider

step "experimental lane: pytest tests/experimental"
python -m pytest tests/experimental -q -p no:cacheprovider

step "repository checks: scripts/pr_checks"
python scripts/pr_checks/experimental_test_scope.py --selftest
# The template ships its experimental-tests block with commented examples only: untouched,
# it must be rejected as invalid input (exit 2), not crash (exit 1) or pass (exit 0).
rc=0
python scripts/pr_checks/experimental_test_scope.py \
  --body-file .github/pull_request_template.md --test-path >/dev/null 2>&1 || rc=$?
[ "$rc" -eq 2 ] || { echo "untouched experimental-tests block must exit 2, got $rc"; exit 1; }
python scripts/pr_checks/containment.py
python scripts/pr_checks/experimental_public_names.py
python scripts/pr_checks/api_inventory.py
python scripts/pr_checks/experimental_lifecycle.py
bash scripts/pr_checks/run_actionlint.sh

step "docs: sphinx html and doctest, warnings as errors"
bash scripts/docs/build_docs.sh

echo
echo "all test steps passed"
