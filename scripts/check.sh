#!/usr/bin/env bash
# The project's one check command, for contributors and for CI.
#
#   bash scripts/check.sh                  fast: lint, types, both test lanes, repository checks
#   bash scripts/check.sh --all            everything CI runs: also the docs
#   bash scripts/check.sh --step NAME      only that step (repeatable; CI's jobs split --all so)
#   bash scripts/check.sh [--all] --list   print the steps that would run, one per line
#
# Steps, in their order: lint, types, stable, experimental, checks, docs; with a lane chosen,
# types, checks and docs run beside the lanes (see the end of this file).
# README's test command runs scripts/test.sh, which is `check.sh --all`; .ci/run runs that
# command, and .github/workflows/pr-test.yml runs the same steps split over its jobs
# (tests/pr_checks/test_check_command.py pins both).  Every step must pass; a pytest lane
# that collects nothing exits 5 and fails the run, so a lane can never vanish into a green.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

ALL_STEPS=(lint types stable experimental checks docs)
# The stable lane is in the fast check: an experimental backend's author must see a stable
# test their change breaks (an op's new backend reaches its stable tests).
FAST_STEPS=(lint types stable experimental checks)

usage() {
  sed -n '2,8p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

say() { printf '\n==> %s\n' "$*"; }

step_lint() {
  say "lint: ruff"
  ruff check .
  ruff format --check .
}

step_types() {
  say "types: mypy on the package"
  mypy flashinfer
}

# The lanes run through scripts/ci/run_lane.sh, the whole lane on one pytest-xdist worker per
# CPU (CI_WORKERS=auto; CI_WORKERS=0 runs it in one process), unless CI sets CI_SELECTION (what
# a change reaches) or CI_RANDOM_ORDER_SEED (docs/ci.rst).  .ci/run sets none of them.
step_stable() {
  say "stable lane: pytest tests/ (tests/experimental/ excluded by norecursedirs)"
  CI_WORKERS="${CI_WORKERS:-auto}" bash scripts/ci/run_lane.sh stable
}

step_experimental() {
  say "experimental lane: pytest tests/experimental"
  CI_WORKERS="${CI_WORKERS:-auto}" bash scripts/ci/run_lane.sh experimental
}

step_checks() {
  say "repository checks: scripts/pr_checks"
  python scripts/pr_checks/experimental_test_scope.py --selftest
  # The template ships its experimental-tests block with commented examples only: untouched,
  # it must be rejected as invalid input (exit 2), not crash (exit 1) or pass (exit 0).
  local rc=0
  python scripts/pr_checks/experimental_test_scope.py \
    --body-file .github/pull_request_template.md --test-path >/dev/null 2>&1 || rc=$?
  if [ "$rc" -ne 2 ]; then
    echo "untouched experimental-tests block must exit 2, got $rc" >&2
    return 1
  fi
  python scripts/pr_checks/containment.py
  python scripts/pr_checks/experimental_placement.py
  python scripts/pr_checks/experimental_public_names.py
  python scripts/pr_checks/api_inventory.py
  python scripts/pr_checks/experimental_lifecycle.py
  bash scripts/pr_checks/run_actionlint.sh
}

step_docs() {
  say "docs: sphinx html and doctest, warnings as errors"
  bash scripts/docs/build_docs.sh
}

is_step() {
  local name="$1" known
  for known in "${ALL_STEPS[@]}"; do
    [ "$known" = "$name" ] && return 0
  done
  return 1
}

mode=fast
list=0
chosen=()
while [ "$#" -gt 0 ]; do
  case "$1" in
    --all) mode=all ;;
    --list) list=1 ;;
    --step)
      if [ "$#" -lt 2 ] || ! is_step "$2"; then
        echo "check.sh: --step needs one of: ${ALL_STEPS[*]}" >&2
        exit 2
      fi
      chosen+=("$2")
      shift
      ;;
    -h | --help) usage; exit 0 ;;
    *)
      echo "check.sh: unknown argument '$1'" >&2
      usage >&2
      exit 2
      ;;
  esac
  shift
done

if [ "${#chosen[@]}" -gt 0 ] && [ "$mode" = all ]; then
  echo "check.sh: --all runs every step; use it or --step, not both" >&2
  exit 2
fi
if [ "${#chosen[@]}" -eq 0 ]; then
  if [ "$mode" = all ]; then chosen=("${ALL_STEPS[@]}"); else chosen=("${FAST_STEPS[@]}"); fi
fi

# Run (or list) the chosen steps in the canonical order, each once.
selected=()
for step in "${ALL_STEPS[@]}"; do
  for want in "${chosen[@]}"; do
    if [ "$want" = "$step" ]; then
      selected+=("$step")
      break
    fi
  done
done

if [ "$list" -eq 1 ]; then
  printf '%s\n' "${selected[@]}"
  exit 0
fi
# Generated files a change can make stale (a new backend changes its op's dispatcher, which
# docs/generated/dispatchers/ shows): a contributor's run writes them again (commit them);
# CI (CI=true) leaves them, so tests/test_generated_dispatchers.py catches a stale one.
if [ "${CI:-}" != true ]; then
  say "generated files: python scripts/docs/write_dispatchers.py"
  python scripts/docs/write_dispatchers.py
fi
# The lanes keep every core busy (xdist); types, checks and docs use one core each.  With a
# lane chosen, those three run beside the lanes, in the background, one after the other in
# their order, their output held back and shown after the lanes; the run takes about as long
# as the lanes instead of their sum.  Lint is quick and runs first: its failure shows at once.
beside=()
ahead=()
lanes=0
for step in "${selected[@]}"; do
  case "$step" in
    types | checks | docs) beside+=("$step") ;;
    stable | experimental) ahead+=("$step") && lanes=1 ;;
    *) ahead+=("$step") ;;
  esac
done
if [ "$lanes" -eq 0 ]; then
  ahead=("${selected[@]}")
  beside=()
fi
if [ "${#beside[@]}" -gt 0 ]; then
  beside_log="$(mktemp)"
  (
    set -e
    for step in "${beside[@]}"; do "step_$step"; done
  ) >"$beside_log" 2>&1 &
  beside_pid=$!
  # A lane that fails ends the run: the steps beside it stop too.
  trap 'kill "$beside_pid" 2>/dev/null || true; rm -f "$beside_log"' EXIT
  say "beside the lanes, in the background: ${beside[*]} (output after the lanes)"
fi
for step in "${ahead[@]}"; do
  "step_$step"
done
if [ "${#beside[@]}" -gt 0 ]; then
  beside_status=0
  wait "$beside_pid" || beside_status=$?
  cat "$beside_log"
  if [ "$beside_status" -ne 0 ]; then
    printf '\n%s failed (exit %s)\n' "${beside[*]}" "$beside_status" >&2
    exit "$beside_status"
  fi
fi
printf '\nall checks passed: %s\n' "${selected[*]}"
