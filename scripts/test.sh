#!/usr/bin/env bash
# The whole test suite, as README.md and .ci/run give it: every step of the project's one
# check command, scripts/check.sh --all (lint, types, both pytest lanes, the repository
# checks, the docs).  Kept as README's entry point; the steps live in check.sh only.
set -euo pipefail
exec bash "$(dirname "${BASH_SOURCE[0]}")/check.sh" --all "$@"
