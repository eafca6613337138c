"""A test scope published as ``ci/test-scope-N`` commit statuses, and read back.

A scope travels from the bot's comment workflow to pr-test.yml as commit statuses: its
targets joined into descriptions of at most 140 characters (:func:`chunk_targets`), written in
order with blanks for a previous, longer scope's stale chunks (:func:`publish_plan`), and
reassembled, validated again, from what GitHub's API lists (:func:`read_scope`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import ScopeError
from .targets import TARGETS_ROOT, split_targets, validate_targets

#: GitHub's limit on a commit status description.
STATUS_DESCRIPTION_LIMIT = 140
CONTEXT_PREFIX = "ci/test-scope-"
STATUS_STATE = "success"
# The context's regular expression reads untrusted text, so it must run in linear time
# however it is called (tests/pr_checks/test_regex_linear_time.py lists and attacks it).
# N has at most MAX_SCOPE_DIGITS digits: a larger one is no status of ours (and blanking up to
# it would write that many statuses). fullmatch: no trailing newline slips through "$".
MAX_SCOPE_DIGITS = 4
_CONTEXT_RE = re.compile(r"ci/test-scope-([1-9][0-9]{0,3})")


def chunk_targets(targets: Sequence[str], limit: int = STATUS_DESCRIPTION_LIMIT) -> list[str]:
    """Greedily join targets with single spaces into chunks of at most ``limit`` characters.

    Splits only between targets; a single target longer than ``limit`` is an error.
    ``" ".join(chunks).split(" ") == list(targets)`` for any non-empty targets.
    """
    too_long = [t for t in targets if len(t) > limit]
    if too_long:
        raise ScopeError(
            [
                f"target {t!r}: is {len(t)} characters, longer than the {limit}-character "
                "status description limit; name a shorter path"
                for t in too_long
            ]
        )
    chunks: list[str] = []
    current = ""
    for target in targets:
        if not current:
            current = target
        elif len(current) + 1 + len(target) <= limit:
            current += " " + target
        else:
            chunks.append(current)
            current = target
    if current:
        chunks.append(current)
    return chunks


def targets_of_chunks(chunks: Sequence[str]) -> list[str]:
    """The targets ``chunks`` carry, validated again (they passed through other hands)."""
    return validate_targets(split_targets(" ".join(chunks)), TARGETS_ROOT)


def publish_plan(
    chunks: Sequence[str], prev_max: int, generation: str | None = None
) -> list[dict[str, str]]:
    """Statuses to write, in order: ``ci/test-scope-1..len(chunks)`` carrying the chunks,
    then blank descriptions for ``len(chunks)+1..prev_max`` (statuses cannot be deleted, so
    a shrinking scope would otherwise keep stale trailing chunks). ``generation`` (the
    comment's URL) goes into every ``target_url`` so a half-written scope is detectable."""
    if prev_max < 0:
        raise ValueError("prev_max must be >= 0")
    plan = []
    for n, description in enumerate(chunks, start=1):
        plan.append({"context": f"{CONTEXT_PREFIX}{n}", "description": description})
    for n in range(len(chunks) + 1, prev_max + 1):
        plan.append({"context": f"{CONTEXT_PREFIX}{n}", "description": ""})
    for status in plan:
        status["state"] = STATUS_STATE
        if generation:
            status["target_url"] = generation
    return plan


def load_statuses(text: str) -> list[dict[str, Any]]:
    """Statuses from GitHub's API output: a list, ``{"statuses": [...]}`` (combined status),
    several JSON documents back to back (``gh api --paginate``) or a list of pages."""
    decoder = json.JSONDecoder()
    values: list[Any] = []
    index = 0
    text = text.strip()
    while index < len(text):
        try:
            value, index = decoder.raw_decode(text, index)
        except RecursionError:  # nesting deeper than the interpreter's stack
            raise ScopeError(["statuses: JSON nested too deeply"]) from None
        values.append(value)
        while index < len(text) and text[index].isspace():
            index += 1
    statuses: list[dict[str, Any]] = []
    # An explicit stack, not recursion: the depth of untrusted input must not matter.
    pending: list[Any] = [values]
    while pending:
        value = pending.pop()
        if isinstance(value, list):
            pending.extend(reversed(value))
        elif isinstance(value, dict) and "statuses" in value and "context" not in value:
            pending.append(value["statuses"])
        elif isinstance(value, dict):
            statuses.append(value)
        else:
            raise ScopeError([f"unexpected value in statuses: {value!r}"])
    return statuses


def latest_by_context(statuses: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """The newest status per context: highest ``id`` when present, else the first seen
    (the API lists newest first)."""
    latest: dict[str, Mapping[str, Any]] = {}
    for status in statuses:
        context = status.get("context")
        if not isinstance(context, str):
            continue
        old = latest.get(context)
        if old is None:
            latest[context] = status
        elif isinstance(status.get("id"), int) and isinstance(old.get("id"), int):
            if status["id"] > old["id"]:
                latest[context] = status
    return latest


def scope_statuses(
    statuses: Iterable[Mapping[str, Any]], creator: str | None = None
) -> dict[int, Mapping[str, Any]]:
    """The latest ``ci/test-scope-N`` statuses by N (optionally only those ``creator`` set)."""
    if creator is not None:
        statuses = [s for s in statuses if ((s.get("creator") or {}).get("login") or "") == creator]
    result: dict[int, Mapping[str, Any]] = {}
    for context, status in latest_by_context(statuses).items():
        m = _CONTEXT_RE.fullmatch(context)
        if m:
            result[int(m.group(1))] = status
    return result


def max_scope_index(statuses: Iterable[Mapping[str, Any]], creator: str | None = None) -> int:
    """The highest N of any ``ci/test-scope-N`` on the commit (0 when none): what to blank."""
    return max(scope_statuses(statuses, creator), default=0)


@dataclass(frozen=True)
class Scope:
    targets: tuple[str, ...]
    chunks: tuple[str, ...]
    max_index: int

    @property
    def scoped(self) -> bool:
        return bool(self.targets)

    @property
    def test_path(self) -> str:
        return " ".join(self.targets)


def read_scope(statuses: Iterable[Mapping[str, Any]], creator: str | None = None) -> Scope:
    """Reassemble the published scope: chunks sorted by N numerically (10 after 9), blank
    trailing chunks dropped, targets validated again. Raises ScopeError when the statuses
    are inconsistent (a non-blank chunk after a blank one, or chunks from different
    commands), so a half-published scope fails loudly instead of running something else."""
    by_index = scope_statuses(statuses, creator)
    chunks: list[str] = []
    errors: list[str] = []
    generation: object = None
    blank_at: int | None = None
    for n in sorted(by_index):
        status = by_index[n]
        description = (status.get("description") or "").strip()
        if not description:
            if blank_at is None:
                blank_at = n
            continue
        if blank_at is not None:
            errors.append(
                f"{CONTEXT_PREFIX}{n} is set but {CONTEXT_PREFIX}{blank_at} is blank "
                "(a scope was half published); post the command again"
            )
            continue
        if n != len(chunks) + 1:
            errors.append(f"{CONTEXT_PREFIX}{len(chunks) + 1} is missing before {n}")
            continue
        url = status.get("target_url") or None
        if not chunks:
            generation = url
        elif url != generation:
            errors.append(
                f"{CONTEXT_PREFIX}{n} comes from a different command than "
                f"{CONTEXT_PREFIX}1 (a scope was half published); post the command again"
            )
            continue
        chunks.append(description)
    if errors:
        raise ScopeError(errors)
    if not chunks:
        return Scope((), (), max(by_index, default=0))
    targets = targets_of_chunks(chunks)
    return Scope(tuple(targets), tuple(chunks), max(by_index))
