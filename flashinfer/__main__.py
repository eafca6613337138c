"""``python -m flashinfer``: the ``flashinfer`` command (see :mod:`flashinfer.cli`)."""

from __future__ import annotations

import sys

from flashinfer.cli import main

if __name__ == "__main__":
    sys.exit(main())
