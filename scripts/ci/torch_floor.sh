#!/usr/bin/env bash
# The stable lane on the oldest torch pyproject.toml admits: the declared range is the tested
# one (issue 44).  Not part of .ci/run (optional: it installs a second torch).
#
#   bash scripts/ci/torch_floor.sh [paths] [pytest args]   (what run_lane.sh stable takes)
#
# Reads the floor from pyproject.toml ("torch>=X"), makes a virtual environment with exactly
# that torch and the package's test extra (once: TORCH_FLOOR_VENV, default
# .venv-torch-floor), and runs `run_lane.sh stable` in it.  With no paths it runs the whole
# stable lane; TORCH_FLOOR_QUICK=1 runs the op and compile files only (about 8 minutes here).
# pip uses the index it is configured with: on public PyPI for Linux torch is a CUDA build,
# so set TORCH_FLOOR_INDEX=https://download.pytorch.org/whl/cpu for the CPU one.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

floor="$(sed -n 's/^ *"torch>=\([0-9.]*\).*/\1/p' pyproject.toml | head -n 1)"
if [ -z "$floor" ]; then
  echo "torch_floor.sh: no \"torch>=X\" requirement in pyproject.toml" >&2
  exit 2
fi
venv="${TORCH_FLOOR_VENV:-.venv-torch-floor}"
python="$venv/bin/python"
if [ ! -x "$python" ] || [ "$("$python" -c 'import torch; print(torch.__version__.split("+")[0])' 2>/dev/null)" != "$floor" ]; then
  python3 -m venv "$venv"
  index=()
  if [ -n "${TORCH_FLOOR_INDEX:-}" ]; then
    index=(--index-url "$TORCH_FLOOR_INDEX")
  fi
  "$python" -m pip install -q "${index[@]}" "torch==$floor"
  "$python" -m pip install -q -e ".[test]"
fi
"$python" -c "import torch; v = torch.__version__.split('+')[0]; assert v == '$floor', v; print('torch', torch.__version__)"

if [ "${TORCH_FLOOR_QUICK:-0}" = 1 ] && [ "$#" -eq 0 ]; then
  set -- tests/test_norm.py tests/test_gemm.py tests/test_compile.py tests/test_autocast.py \
    tests/test_torch_func.py
fi
PATH="$(cd "$venv/bin" && pwd):$PATH" exec bash scripts/ci/run_lane.sh stable "$@"
