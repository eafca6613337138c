#!/usr/bin/env bash
# Build the documentation as CI does: HTML and the doctests, warnings as errors.
#
#   bash scripts/docs/build_docs.sh            # both builds
#   bash scripts/docs/build_docs.sh html       # only one of them (html | doctest)
#
# Needs the package installed (pip install -e .) and docs/requirements.txt.
# Output: docs/_build/html, docs/_build/doctest and docs/_build/doctest-interpret, with the
# read sources in docs/_build/doctrees and docs/_build/doctrees-interpret
# (docs/_build is git-ignored).
#
# The doctests run twice: as a user runs the examples on a CPU-only machine, TRITON_INTERPRET
# unset (an example that needs it says so on its page and is skipped), then with
# TRITON_INTERPRET=1 (every example).  The caller's TRITON_INTERPRET is ignored.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.."

if ! python -c "import sphinx, furo, myst_parser" 2>/dev/null; then
    echo "build_docs: sphinx, furo or myst-parser missing; run: pip install -r docs/requirements.txt" >&2
    exit 1
fi

# The gate starts off whatever the caller's environment says; so does Triton's interpreter.
unset FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS TRITON_INTERPRET

builders=("${@:-html doctest}")
# shellcheck disable=SC2206
builders=(${builders[*]})
for builder in "${builders[@]}"; do
    case "$builder" in
        html | doctest) ;;
        *) echo "build_docs: unknown builder '$builder' (html | doctest)" >&2; exit 2 ;;
    esac
    echo "== sphinx-build -b $builder (TRITON_INTERPRET unset)"
    # One read of the sources (autodoc imports the package) serves both builders; the
    # interpreter's run reads its own, as a doctest's :skipif: is decided while reading.
    python -m sphinx -W --keep-going -b "$builder" -d docs/_build/doctrees docs "docs/_build/$builder"
    if [ "$builder" = doctest ]; then
        echo "== sphinx-build -b doctest (TRITON_INTERPRET=1)"
        TRITON_INTERPRET=1 python -m sphinx -W --keep-going -b doctest \
            -d docs/_build/doctrees-interpret docs docs/_build/doctest-interpret
    fi
done
echo "build_docs: OK (${builders[*]})"
