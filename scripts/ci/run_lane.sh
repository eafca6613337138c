#!/usr/bin/env bash
# One pytest lane, as scripts/check.sh and the CI jobs run it:
#
#   bash scripts/ci/run_lane.sh stable|experimental [paths] [extra pytest args]
#
# With nothing set it runs the whole lane in one process, in file order: what .ci/run and a
# contributor's `bash scripts/check.sh --all` run.  Paths (a file, folder or node id that
# exists) replace the lane's folder, and any selection; `-k EXPR` and the other pytest options
# narrow further (write an option's path value as --option=PATH).  Just one backend's
# conformance cases that can run here (tests/conformance_scope.py):
#   bash scripts/ci/run_lane.sh experimental --conformance-scope=rmsnorm:tworow \
#     tests/experimental/test_conformance_experimental.py
# CI sets (docs/ci.rst):
#   CI_WORKERS=N|auto       pytest-xdist workers on this machine, --dist worksteal (unset
#                           or 0: one process)
#   CI_SELECTION=FILE       `testmap.py select --json` output: run what the change reaches
#                           (a selection of everything runs the lane's folder whole; a lane
#                           the change does not reach runs nothing and says so)
#   CI_RANDOM_ORDER_SEED=N  shuffle (pytest-random-order, module buckets), seed printed
#   CI_JUNIT=FILE           write a JUnit report (scripts/ci/run_verdict.py reads it)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

lane="${1:-}"
case "$lane" in
  stable) root=tests ;;
  experimental) root=tests/experimental ;;
  *)
    echo "run_lane.sh: the lane must be stable or experimental, got '${lane}'" >&2
    exit 2
    ;;
esac
shift

args=(-q -p no:cacheprovider)
workers="${CI_WORKERS:-0}"
if [ "$workers" != 0 ]; then
  # worksteal: a worker that runs out takes half of another's queue, so a long test near the
  # end does not leave the other workers idle (tests/conftest.py also starts the modules of
  # slow tests first).
  args+=(-n "$workers" --dist worksteal)
fi
if [ -n "${CI_RANDOM_ORDER_SEED:-}" ]; then
  echo "random order: seed ${CI_RANDOM_ORDER_SEED}" \
    "(again: CI_RANDOM_ORDER_SEED=${CI_RANDOM_ORDER_SEED} bash scripts/ci/run_lane.sh ${lane})"
  args+=(--random-order-bucket=module "--random-order-seed=${CI_RANDOM_ORDER_SEED}")
fi
if [ -n "${CI_JUNIT:-}" ]; then
  args+=("--junitxml=${CI_JUNIT}")
fi

options=()
paths=()
for arg in "$@"; do
  if [[ "$arg" != -* && -e "${arg%%::*}" ]]; then
    paths+=("$arg")
  else
    options+=("$arg")
  fi
done

targets=("$root")
if [ "${#paths[@]}" -gt 0 ]; then
  targets=("${paths[@]}")
elif [ -n "${CI_SELECTION:-}" ]; then
  keep="$(mktemp)"
  listed="$(mktemp)"
  trap 'rm -f "$keep" "$listed"' EXIT
  if ! python scripts/ci/testmap.py targets \
    --selection "$CI_SELECTION" --lane "$lane" --keep-file "$keep" >"$listed"; then
    # Fail open: a selection that cannot be read runs the lane whole.
    echo "${lane} lane: the selection could not be read; running the whole lane" >&2
    : >"$keep"
  else
    mapfile -t targets <"$listed"
  fi
  if [ "${#targets[@]}" -eq 0 ]; then
    echo "${lane} lane: the change reaches none of its tests (selection: ${CI_SELECTION}); nothing to run"
    exit 0
  fi
  if [ -s "$keep" ]; then
    echo "${lane} lane: the selection, $(wc -l <"$keep") test(s) in ${#targets[@]} file(s)"
    export TESTMAP_KEEP="$keep"
    export PYTHONPATH="$PWD/scripts/ci${PYTHONPATH:+:$PYTHONPATH}"
    args+=(-p testmap_keep)
  fi
fi

python -m pytest "${args[@]}" "${options[@]}" -- "${targets[@]}"
