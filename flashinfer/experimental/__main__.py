"""``python -m flashinfer.experimental [--json]``: an alias of ``flashinfer experimental``.

The same command, with the same output (text and JSON): the state of the experimental gate,
then every experimental API and backend with its kind, name, feature, owner, tracking issue
and graduation date.  The command is :mod:`flashinfer.cli`'s; the listing is
:mod:`flashinfer.lifecycle`.
"""

from __future__ import annotations

import sys

from flashinfer.cli import main

if __name__ == "__main__":
    sys.exit(main(["experimental", *sys.argv[1:]]))
