#!/usr/bin/env python3
"""Run what a change reaches: a per-test map, selection by rules that fail open, shards.

    python scripts/ci/testmap.py record --out testmap.json [--no-baseline] [pytest args]
    python scripts/ci/testmap.py select --map testmap.json --base REF [--head REF] [--json]
                                        [--shards K --shard I]
    python scripts/ci/testmap.py select --everything REASON --json   (a push to main)
    python scripts/ci/testmap.py targets --selection selection.json --lane stable|experimental
                                         --keep-file KEEP
    python scripts/ci/testmap.py scope-gap --map testmap.json --base REF [--head REF]
                                           --scope "tests/experimental/a.py ..."
    python scripts/ci/testmap.py replay [--commits N] [--map testmap.json] [--mutants K]
                                        [--mutant-limit M] [--seed S] [--fixed lint=S,...]
                                        [--workers W] [--mutant-workers W]
                                        [--mutant-timeout S]

``record`` runs pytest (once plainly, for the overhead, unless --no-baseline; then under the
recorder) and writes the map.  ``select`` prints the selection for the change from the map's
commit to ``--head`` (default: the work tree), with the pull request's own files as
``--base..--head``; ``--json`` prints ``{"mode", "reasons", "tests": {"stable",
"experimental"}, "share"}``; ``--everything REASON`` selects all without reading a diff.
``targets`` turns a selection into one lane's pytest targets (printed one per line; none
when the change reaches nothing in the lane) and the tests to keep among them
(``testmap_keep.py``, the plugin scripts/ci/run_lane.sh loads).  ``scope-gap`` names the
experimental tests the change reaches that a declared scope leaves out.  Rules:
testmap_lib/rules.py; map format: testmap_lib/mapfile.py; docs/ci.rst says what runs when.

Exit codes: 0 done (a selection of everything is a decision, not an error), 2 usage.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

from testmap_lib.mapfile import MapError, TestMap, load  # noqa: E402
from testmap_lib.rules import Selection, result_json, select, share  # noqa: E402
from testmap_lib.shards import deal  # noqa: E402

REPO = _HERE.parents[1]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="testmap.py", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    rec = sub.add_parser("record", help="run the suite under the recorder, write the map")
    rec.add_argument("--out", required=True, type=Path)
    rec.add_argument("--no-baseline", action="store_true", help="skip the plain run")
    rec.add_argument("--repo", type=Path, default=REPO)
    sel = sub.add_parser("select", help="what to run for a change")
    sel.add_argument("--map", required=True, type=Path)
    sel.add_argument("--base", help="the pull request's base (required unless --everything)")
    sel.add_argument("--head", default=None, help="default: the work tree")
    sel.add_argument("--json", action="store_true")
    sel.add_argument("--shards", type=int, default=None)
    sel.add_argument("--shard", type=int, default=None, help="1..K")
    sel.add_argument("--repo", type=Path, default=Path("."))
    sel.add_argument("--everything", metavar="REASON", help="select all, saying why (no diff)")
    tgt = sub.add_parser("targets", help="one lane's pytest targets from a selection")
    tgt.add_argument("--selection", required=True, type=Path, help="select --json output")
    tgt.add_argument("--lane", required=True, choices=("stable", "experimental"))
    tgt.add_argument("--keep-file", required=True, type=Path)
    gap = sub.add_parser("scope-gap", help="experimental tests reached but not in a scope")
    gap.add_argument("--map", required=True, type=Path)
    gap.add_argument("--base", required=True)
    gap.add_argument("--head", default=None, help="default: the work tree")
    gap.add_argument("--scope", required=True, help="the scope's targets, space-separated")
    gap.add_argument("--repo", type=Path, default=Path("."))
    rep = sub.add_parser("replay", help="the selection over this repository's history")
    rep.add_argument("--commits", type=int, default=100)
    rep.add_argument("--map", type=Path, default=Path("testmap.json"))
    rep.add_argument("--mutants", type=int, default=0, help="mutants per commit (run each)")
    rep.add_argument("--seed", type=int, default=0)
    rep.add_argument(
        "--mutant-limit", type=int, default=None, help="stop after this many mutants in all"
    )
    rep.add_argument(
        "--fixed",
        default="",
        help="seconds of the whole-always steps, for the wall-time estimate: "
        "lint=S,types=S,checks=S,docs=S",
    )
    rep.add_argument("--workers", type=int, default=4, help="xdist workers per lane (4)")
    rep.add_argument(
        "--mutant-workers", type=int, default=0, help="xdist workers for mutant runs (0: none)"
    )
    rep.add_argument(
        "--mutant-timeout", type=float, default=None, help="seconds per mutant pytest run"
    )
    rep.add_argument("--repo", type=Path, default=Path("."))
    return parser


def _select(args: argparse.Namespace) -> int:
    if args.base is None and not args.everything:
        print("testmap select: --base REF is required (or --everything REASON)", file=sys.stderr)
        return 2
    if (args.shards is None) != (args.shard is None):
        print("testmap select: --shards K and --shard I go together", file=sys.stderr)
        return 2
    if args.shards is not None and not 1 <= args.shard <= args.shards:
        print(
            f"testmap select: --shard must be 1..{args.shards}, got {args.shard}", file=sys.stderr
        )
        return 2
    repo = args.repo.resolve()
    m: TestMap | None
    try:
        m = load(args.map)
        error = None
    except MapError as exc:
        m, error = None, str(exc)
    if args.everything:
        sel = Selection()
        sel.everything(None, "requested", args.everything)
    else:
        sel = select(repo, m, args.base, args.head)
    if error is not None and not args.everything:
        sel.reasons[-1]["detail"] = f"{error}: running everything"
    result = result_json(sel, m)
    if args.shards is not None:
        every = result["tests"]["stable"] + result["tests"]["experimental"]
        if result["mode"] == "all" and m is None:
            every = ["tests"]  # no map: nothing to deal by; shard 1 runs the lane whole
        mine = deal(every, m, args.shards)[args.shard - 1]
        shard = result_json(sel, m, mine)
        shard["mode"] = result["mode"]
        shard["share"] = share(mine, m) if m is not None else 1.0 / args.shards
        result = shard
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    print(f"mode: {result['mode']} (share of recorded time: {result['share']:.1%})")
    for r in result["reasons"]:
        print(f"  {r['file'] or '-'}: {r['rule']}: {r['detail']} [{r['tests']}]")
    for lane in ("stable", "experimental"):
        for t in result["tests"][lane]:
            print(t)
    return 0


def _targets(args: argparse.Namespace) -> int:
    from testmap_lib.targets import lane_targets

    try:
        selection = json.loads(args.selection.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        # Fail open: an unreadable selection runs the lane whole.
        print(f"testmap targets: {exc}: running the whole lane", file=sys.stderr)
        selection = {"mode": "all"}
    files, keep = lane_targets(selection, args.lane)
    if keep is None:
        args.keep_file.write_text("", encoding="utf-8")
    else:
        args.keep_file.write_text("".join(k + "\n" for k in keep), encoding="utf-8")
    for f in files:
        print(f)
    return 0


def _scope_gap(args: argparse.Namespace) -> int:
    from testmap_lib.scopegap import reply

    repo = args.repo.resolve()
    try:
        m: TestMap | None = load(args.map)
        note = f"map recorded at {m.commit[:12]}"
    except MapError as exc:
        m, note = None, f"no usable map: {exc}"
    sel = select(repo, m, args.base, args.head)
    result = result_json(sel, m)
    stale = [r["detail"] for r in result["reasons"] if r["rule"] == "stale-map"]
    if stale:
        note = stale[0]
    every = [t for t, rec in m.tests.items() if rec.lane == "experimental"] if m else []
    if m is None:
        every = ["tests/experimental"]
    print(reply(result, every, args.scope.split(), note))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # record passes everything after its own options to pytest.
    if argv[:1] == ["record"]:
        own, rest = [], argv[1:]
        while rest and rest[0] in ("--out", "--no-baseline", "--repo"):
            take = 1 if rest[0] == "--no-baseline" else 2
            own += rest[:take]
            rest = rest[take:]
        if rest[:1] == ["--"]:
            rest = rest[1:]
        args = build_parser().parse_args(["record", *own])
        from testmap_lib.record import record

        return record(args.repo.resolve(), args.out, rest, baseline=not args.no_baseline)
    args = build_parser().parse_args(argv)
    if args.cmd == "select":
        return _select(args)
    if args.cmd == "targets":
        return _targets(args)
    if args.cmd == "scope-gap":
        return _scope_gap(args)
    from testmap_lib.replay import MutantRun, replay
    from testmap_lib.walltime import parse_fixed

    try:
        fixed = parse_fixed(args.fixed)
    except ValueError as exc:
        print(f"testmap replay: {exc}", file=sys.stderr)
        return 2
    if args.workers < 1:
        print(f"testmap replay: --workers must be at least 1, got {args.workers}", file=sys.stderr)
        return 2
    return replay(
        args.repo.resolve(),
        args.map,
        args.commits,
        args.mutants,
        args.seed,
        fixed,
        args.workers,
        MutantRun(args.mutant_workers, args.mutant_timeout, args.mutant_limit),
    )


if __name__ == "__main__":
    sys.exit(main())
