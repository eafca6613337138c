"""``python -m flashinfer.experimental [--json]``: an alias of ``flashinfer experimental``."""

from __future__ import annotations

import sys

from flashinfer.cli import main

if __name__ == "__main__":
    sys.exit(main(["experimental", *sys.argv[1:]]))
