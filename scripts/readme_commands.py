"""Print one of README.md's two set-up-and-run commands: ``main`` (the CLI) or ``test``.

README.md gives exactly two ```bash blocks, in that order; ``.ci/run`` runs the ``test`` one
as written, and ``tests/test_readme.py`` checks both.  Reading them from README means CI and
the documentation cannot drift apart.
"""

from __future__ import annotations

import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
WHICH = ("main", "test")


def bash_blocks(text: str) -> list[str]:
    """The contents of every fenced ```bash block, in order (a line-by-line scan: no regex)."""
    blocks: list[str] = []
    current: list[str] | None = None
    for line in text.splitlines():
        if current is None:
            if line.strip() == "```bash":
                current = []
        elif line.strip() == "```":
            blocks.append("\n".join(current).strip())
            current = None
        else:
            current.append(line)
    return blocks


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in WHICH:
        print(f"usage: readme_commands.py {'|'.join(WHICH)}", file=sys.stderr)
        return 2
    blocks = bash_blocks(README.read_text(encoding="utf-8"))
    if len(blocks) != 2:
        print(
            f"README.md must give exactly two ```bash blocks, found {len(blocks)}", file=sys.stderr
        )
        return 1
    print(blocks[WHICH.index(argv[0])])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
