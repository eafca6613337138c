#!/usr/bin/env bash
# The stable lane on the oldest torch pyproject.toml admits: the declared range is the tested
# one (issue 44).  Optional, not part of .ci/run: it needs a second torch installed.
#
#   bash scripts/ci/torch_floor.sh [paths] [pytest args]   (what run_lane.sh stable takes)
#
# Reads the floor from pyproject.toml ("torch>=X") and runs `run_lane.sh stable` with the
# virtual environment TORCH_FLOOR_VENV (default .venv-torch-floor), which must hold exactly
# that torch and the package (it installs nothing, as no script here does: a missing one is
# refused with the two commands that make it; .ci/run or a contributor runs them).  With no
# paths it runs the whole stable lane; TORCH_FLOOR_QUICK=1 runs the op and compile files
# only (19 minutes on this project's loaded 2-core machine).  On public PyPI for Linux torch
# is a CUDA build: add --index-url https://download.pytorch.org/whl/cpu for the CPU one.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

floor="$(sed -n 's/^ *"torch>=\([0-9.]*\).*/\1/p' pyproject.toml | head -n 1)"
if [ -z "$floor" ]; then
  echo "torch_floor.sh: no \"torch>=X\" requirement in pyproject.toml" >&2
  exit 2
fi
venv="${TORCH_FLOOR_VENV:-.venv-torch-floor}"
python="$venv/bin/python"
have="$("$python" -c 'import torch; print(torch.__version__.split("+")[0])' 2>/dev/null || true)"
if [ "$have" != "$floor" ]; then
  echo "torch_floor.sh: $venv must hold torch $floor (it has: ${have:-none}); make it with:" >&2
  echo "  python3 -m venv $venv && $venv/bin/pip install torch==$floor && $venv/bin/pip install -e '.[test]'" >&2
  exit 2
fi
echo "torch $have (the floor pyproject.toml declares), from $venv"

if [ "${TORCH_FLOOR_QUICK:-0}" = 1 ] && [ "$#" -eq 0 ]; then
  set -- tests/test_norm.py tests/test_gemm.py tests/test_compile.py tests/test_autocast.py \
    tests/test_torch_func.py
fi
PATH="$(cd "$venv/bin" && pwd):$PATH" exec bash scripts/ci/run_lane.sh stable "$@"
