#!/usr/bin/env python3
"""The ``@flashinfer-bot run`` command and the test scope it publishes. Standard library only.

Pure functions, and a small CLI so the workflows hold no logic:

- ``decide --comment-file F [--check-exists DIR] [--github-output FILE]``: parse a PR comment
  and decide. Prints the decision as JSON; writes ``action``, ``test_path`` and
  ``message_file`` outputs. Actions: ``none`` (not a command), ``run-default`` (bare
  command: default lanes, earlier scope cleared), ``run-scoped`` (valid paths: publish the
  scope), ``reject`` (anything else: say why, start nothing; never an unscoped run).
- ``plan --decision-file F (--prev-max N | --statuses-file S) [--generation URL]``: the
  commit statuses ``ci/test-scope-N`` to write, chunks first, then blanks for stale chunks.
- ``read --statuses-file S [--creator LOGIN] [--github-output FILE]``: reassemble the scope
  published on a commit (N sorted numerically), validated again.
- ``results --needs JSON [--optional JOB]``: the final verdict of pr-test.yml; a published
  scope whose lane did not succeed fails it; an optional job may be skipped, not fail.

This script is the command line; its parts live in ``scope/``, one job per module (the
comment and its decision, the statuses, the verdict).

Exit codes: 0 done (a rejected command is a decision, not a failure of this script),
2 invalid input, 1 internal error.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

# The parts live in scope/, one job per module; this script is their command line and keeps
# their names importable from it as before.
from scope.comment import (  # noqa: E402
    BOT_HANDLE,
    ROOT,
    Command,
    Decision,
    decide,
    find_commands,
    looks_like_paths,
)
from scope.errors import (  # noqa: E402
    EXIT_INTERNAL,
    EXIT_INVALID,
    EXIT_OK,
    ScopeError,
    guarded_main,
    read_input,
)
from scope.statuses import (  # noqa: E402
    CONTEXT_PREFIX,
    MAX_SCOPE_DIGITS,
    STATUS_STATE,
    Scope,
    chunk_targets,
    latest_by_context,
    load_statuses,
    max_scope_index,
    publish_plan,
    read_scope,
    scope_statuses,
    targets_of_chunks,
)
from scope.verdict import check_results  # noqa: E402

__all__ = [
    "BOT_HANDLE",
    "CONTEXT_PREFIX",
    "EXIT_INTERNAL",
    "EXIT_INVALID",
    "EXIT_OK",
    "MAX_SCOPE_DIGITS",
    "ROOT",
    "STATUS_STATE",
    "Command",
    "Decision",
    "Scope",
    "build_parser",
    "check_results",
    "decide",
    "find_commands",
    "latest_by_context",
    "load_statuses",
    "looks_like_paths",
    "main",
    "max_scope_index",
    "publish_plan",
    "read_scope",
    "run",
    "scope_statuses",
]


def _write_outputs(path: str | None, values: Mapping[str, str]) -> None:
    if path is None:
        return
    with open(path, "a", encoding="utf-8") as out:
        for key, value in values.items():
            if "\n" in value or "\r" in value:
                raise ValueError(f"output {key} contains a newline")
            out.write(f"{key}={value}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("decide", help="parse a comment and decide")
    p.add_argument("--comment-file", required=True)
    p.add_argument("--check-exists", metavar="ROOT_DIR")
    p.add_argument("--decision-out", help="also write the decision JSON here")
    p.add_argument("--message-out", help="write the reply message here")
    p.add_argument("--github-output")

    p = sub.add_parser("plan", help="statuses to write for a decision")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--decision-file")
    src.add_argument("--chunks-file", help="one chunk per line (empty file: clear the scope)")
    prev = p.add_mutually_exclusive_group(required=True)
    prev.add_argument("--prev-max", type=int)
    prev.add_argument("--statuses-file")
    p.add_argument("--creator")
    p.add_argument("--generation", help="the comment URL, stored as each target_url")
    p.add_argument("--format", choices=("json", "tsv"), default="json")

    p = sub.add_parser("read", help="reassemble the scope published on a commit")
    p.add_argument("--statuses-file", required=True)
    p.add_argument("--creator")
    p.add_argument("--github-output")

    p = sub.add_parser("results", help="verdict over toJSON(needs)")
    p.add_argument("--needs", required=True, help="JSON")
    p.add_argument("--scope-job", default="scope")
    p.add_argument(
        "--optional",
        action="append",
        default=[],
        metavar="JOB",
        help="a job that may be skipped (the GPU job where no GPU runner exists); repeatable",
    )
    return parser


def run(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.cmd == "decide":
        decision = decide(read_input(args.comment_file, "--comment-file"), args.check_exists)
        data = decision.to_json()
        print(json.dumps(data, indent=2))
        if args.decision_out:
            Path(args.decision_out).write_text(json.dumps(data), encoding="utf-8")
        if args.message_out:
            Path(args.message_out).write_text(decision.message + "\n", encoding="utf-8")
        _write_outputs(
            args.github_output, {"action": decision.action, "test_path": decision.test_path}
        )
        return EXIT_OK
    if args.cmd == "plan":
        if args.decision_file:
            data = json.loads(read_input(args.decision_file, "--decision-file"))
            if data.get("action") not in ("run-default", "run-scoped"):
                raise ScopeError([f"nothing to publish for action {data.get('action')!r}"])
            chunks = [str(c) for c in data.get("chunks", [])]
            # Validate again: the file passed through the workflow's hands.
            scoped = data["action"] == "run-scoped"
            chunks = chunk_targets(targets_of_chunks(chunks)) if scoped else []
        else:
            text = read_input(args.chunks_file, "--chunks-file")
            lines = [line for line in text.splitlines() if line.strip()]
            chunks = chunk_targets(targets_of_chunks(lines)) if lines else []
        if args.statuses_file:
            statuses = load_statuses(read_input(args.statuses_file, "--statuses-file"))
            prev_max = max_scope_index(statuses, args.creator)
        else:
            prev_max = args.prev_max
            if prev_max < 0:
                raise ScopeError(["--prev-max must be >= 0"])
        plan = publish_plan(chunks, prev_max, args.generation)
        if args.format == "json":
            print(json.dumps(plan, indent=2))
        else:
            for status in plan:
                print(f"{status['context']}\t{status['description']}")
        return EXIT_OK
    if args.cmd == "read":
        statuses = load_statuses(read_input(args.statuses_file, "--statuses-file"))
        found = read_scope(statuses, args.creator)
        print(
            json.dumps(
                {
                    "scoped": found.scoped,
                    "targets": list(found.targets),
                    "test_path": found.test_path,
                    "chunks": list(found.chunks),
                    "max_index": found.max_index,
                },
                indent=2,
            )
        )
        _write_outputs(
            args.github_output,
            {"scoped": "true" if found.scoped else "false", "test_path": found.test_path},
        )
        return EXIT_OK
    if args.cmd == "results":
        try:
            needs = json.loads(args.needs)
        except json.JSONDecodeError as exc:
            raise ScopeError([f"--needs is not JSON: {exc}"]) from exc
        problems = check_results(needs, args.scope_job, args.optional)
        for problem in problems:
            print(f"error: {problem}", file=sys.stderr)
        if problems:
            return EXIT_INVALID
        print("all lanes passed")
        return EXIT_OK
    raise AssertionError(args.cmd)


def main(argv: Sequence[str] | None = None) -> int:
    return guarded_main(run, argv, "bot_command.py")


if __name__ == "__main__":
    sys.exit(main())
