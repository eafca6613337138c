"""``python -m flashinfer.experimental``: list every experimental API and backend.

Prints kind, name, feature, owner, tracking issue and graduation date of each (``--json``
for machine-readable output).  The listing itself is :mod:`flashinfer.lifecycle`.
"""

from __future__ import annotations

import sys

from flashinfer.lifecycle import main

if __name__ == "__main__":
    sys.exit(main())
