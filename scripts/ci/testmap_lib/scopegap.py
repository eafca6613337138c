"""What a declared experimental scope leaves out: the experimental tests a change reaches
(the selection, read from the map) that none of the scope's targets covers.  The bot's reply
to ``@flashinfer-bot run <paths>`` names them, so a reviewer sees what the scope misses
before the targeted run starts."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

LISTED = 30  # names in a reply at most; the rest are counted


def covers(target: str, test: str) -> bool:
    """Whether pytest run on ``target`` runs ``test`` (a node ID or a test file)."""
    target = target.rstrip("/")
    if test == target or test.startswith(target + "::") or test.startswith(target + "["):
        return True
    # A folder covers what lies under it; a file target never covers another file.
    return not target.endswith(".py") and "::" not in target and test.startswith(target + "/")


def left_out(reached: Iterable[str], scope: Sequence[str]) -> list[str]:
    """The reached tests no target of ``scope`` covers, sorted."""
    return sorted(t for t in set(reached) if not any(covers(s, t) for s in scope))


def reply(
    result: dict[str, Any], every_experimental: Iterable[str], scope: Sequence[str], map_note: str
) -> str:
    """The paragraph for the bot's reply (Markdown)."""
    if result["mode"] == "all":
        why = "; ".join(
            f"{r['file'] or '-'}: {r['detail']}" for r in result["reasons"] if r["tests"] == "all"
        )
        reached = list(every_experimental)
        head = f"This change runs everything ({why}), so it reaches every experimental test"
    else:
        reached = result["tests"]["experimental"]
        head = f"This change reaches {len(reached)} experimental test(s)"
    missing = left_out(reached, scope)
    if not missing:
        return f"{head}; the scope covers all of them ({map_note})."
    listing = "\n".join(missing[:LISTED])
    more = f"\n... and {len(missing) - LISTED} more" if len(missing) > LISTED else ""
    return (
        f"{head}; the scope leaves out {len(missing)} of them ({map_note}). The experimental "
        f"lane runs them either way; name them in the scope to run them in the targeted "
        f"lane too:\n\n```text\n{listing}{more}\n```"
    )
