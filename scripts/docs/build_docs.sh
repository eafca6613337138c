#!/usr/bin/env bash
# Build the documentation as CI does: HTML and the doctests, warnings as errors.
#
#   bash scripts/docs/build_docs.sh            # both builds
#   bash scripts/docs/build_docs.sh html       # only one of them (html | doctest)
#
# Needs the package installed (pip install -e .) and docs/requirements.txt.
# Output: docs/_build/html and docs/_build/doctest (docs/_build is git-ignored).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.."

if ! python -c "import sphinx, furo, myst_parser" 2>/dev/null; then
    echo "build_docs: sphinx, furo or myst-parser missing; run: pip install -r docs/requirements.txt" >&2
    exit 1
fi

# Examples run on CPU; the gate starts off whatever the caller's environment says.
export TRITON_INTERPRET="${TRITON_INTERPRET:-1}"
unset FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS

builders=("${@:-html doctest}")
# shellcheck disable=SC2206
builders=(${builders[*]})
for builder in "${builders[@]}"; do
    case "$builder" in
        html | doctest) ;;
        *) echo "build_docs: unknown builder '$builder' (html | doctest)" >&2; exit 2 ;;
    esac
    echo "== sphinx-build -b $builder"
    python -m sphinx -W --keep-going -b "$builder" docs "docs/_build/$builder"
done
echo "build_docs: OK (${builders[*]})"
