"""The selection over this repository's own history: for each of the last N commits on the
current branch (first parents), the selection for the commit against its parent, read with
one map (the map's tests and what they ran stand in for each parent's; a commit whose files
the map never saw runs everything, which the table shows).

Prints one row per commit (share selected, mode, the rules that fired) and the median share.
``--mutants K`` also flips K operators or constants (drawn from ``--seed``) inside the
functions each commit touched, and runs each mutant in full and selected: a miss is a test
that fails (or errors) in full but was not selected.  "In full" is the suite the map was
recorded on (its pytest arguments that name paths; both lanes when it names none), so a map
recorded on a few files replays against those files.  The selected tests and the rest
run apart (together one full run, so a mutant costs one full suite); a mutant whose
selection is everything is not run: nothing can be missed.
"""

from __future__ import annotations

import ast
import collections
import copy
import os
import random
import signal
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from testmap_lib.gitdiff import DiffError, diff, git, show
from testmap_lib.mapfile import MapError, TestMap, load
from testmap_lib.record import lane_runs
from testmap_lib.rules import Selection, result_json, select, share
from testmap_lib.scopes import parse_scopes
from testmap_lib.walltime import LaneSeconds, estimate, lane_seconds

_FLIPS = {
    ast.Lt: ast.GtE,
    ast.GtE: ast.Lt,
    ast.Gt: ast.LtE,
    ast.LtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.And: ast.Or,
    ast.Or: ast.And,
}


def history(repo: Path, n: int) -> list[tuple[str, str, str]]:
    """``(commit, parent, subject)`` for the last ``n`` first-parent commits, newest first."""
    out = git(repo, "log", "--first-parent", f"-n{n + 1}", "--format=%H%x00%s")
    rows = [line.split("\x00", 1) for line in out.splitlines() if line]
    return [(rows[i][0], rows[i + 1][0], rows[i][1]) for i in range(len(rows) - 1)]


def replay(
    repo: Path,
    map_path: Path,
    commits: int,
    mutants: int,
    seed: int,
    fixed: dict[str, float] | None = None,
    workers: int = 4,
    how: MutantRun | None = None,
) -> int:
    try:
        m = load(map_path)
    except MapError as exc:
        print(f"testmap replay: {exc}", file=sys.stderr)
        return 2
    try:
        rows = history(repo, commits)
    except DiffError as exc:
        print(f"testmap replay: {exc}", file=sys.stderr)
        return 2
    shares: list[float] = []
    known_shares: list[float] = []
    costs = RuleCosts()
    lanes: list[LaneSeconds] = []
    print(f"{'commit':12}  {'share':>6}  {'mode':6}  rules (count)   subject")
    for commit, parent, subject in rows:
        sel = select(repo, m, parent, commit, described=parent)
        unknown = _label_unknown_to_map(repo, m, sel.reasons)
        res = result_json(sel, m)
        rules = collections.Counter(r["rule"] for r in res["reasons"])
        costs.add(sel, res, m)
        chosen = res["tests"]["stable"] + res["tests"]["experimental"]
        lanes.append(lane_seconds(m, chosen, everything=res["mode"] == "all"))
        shares.append(res["share"])
        if not unknown:
            known_shares.append(res["share"])
        fired = ", ".join(f"{k}({v})" for k, v in sorted(rules.items()))
        print(f"{commit[:12]}  {res['share']:6.1%}  {res['mode']:6}  {fired}   {subject[:50]}")
    if shares:
        print(f"\nmedian share over {len(shares)} commits: {statistics.median(shares):.1%}")
        if known_shares and len(known_shares) < len(shares):
            print(
                f"median share over the {len(known_shares)} commits whose Python files the "
                f"map's tree holds: {statistics.median(known_shares):.1%}"
            )
        print(costs.table(len(shares)))
        print(estimate(m, lanes, fixed or {}, workers))
    if mutants:
        return _mutants(repo, m, rows, mutants, seed, how or MutantRun())
    return 0


UNKNOWN = " (not in the map's tree: a replay artifact)"


def _label_unknown_to_map(repo: Path, m: TestMap, reasons: list[dict]) -> bool:
    """Mark the "no test used it" reasons whose file does not exist at the map's commit:
    the map is from a later tree, so it cannot know a file deleted or renamed since (in CI
    the map stands for the parent, where the file exists).  The selection is unchanged:
    the mark only says why.  True when any reason was marked."""
    marked = False
    for r in reasons:
        if r["rule"] in ("unused-python-file", "unused-package-file") and r["file"]:
            if show(repo, m.commit, r["file"]) is None:
                r["rule"] += UNKNOWN
                marked = True
    return marked


class RuleCosts:
    """Per rule: the commits it forced to "all" and what that cost (the share the commit
    would have had without the rules that ran everything), and the commits whose share it
    decided (the rule whose own tests weigh the most)."""

    def __init__(self) -> None:
        self.forced: collections.Counter[str] = collections.Counter()
        self.alone: collections.Counter[str] = collections.Counter()
        self.cost: collections.Counter[str] = collections.Counter()
        self.files: dict[str, collections.Counter[str]] = {}
        self.decided: collections.Counter[str] = collections.Counter()
        self.decided_over: collections.Counter[str] = collections.Counter()
        self.everyone: collections.Counter[str] = collections.Counter()
        self.everyone_commits = 0

    def add(self, sel: Selection, res: dict, m: TestMap) -> None:
        if res["mode"] == "all":
            forcing = [r for r in res["reasons"] if r["tests"] == "all"]
            rules = sorted({r["rule"] for r in forcing})
            without = share(sel.tests, m)
            for rule in rules:
                self.forced[rule] += 1
                self.cost[rule] += (1.0 - without) / len(rules)
                if len(rules) == 1:
                    self.alone[rule] += 1
                files = self.files.setdefault(rule, collections.Counter())
                files.update({r["file"] or "-" for r in forcing if r["rule"] == rule})
            return
        # Code every recorded test ran (the APIs' decoration at import, say): the rule is
        # right to select everything, and no finer rule can do better.
        every = {rule for rule, chosen in sel.chosen if m.tests and len(chosen) >= len(m.tests)}
        self.everyone.update(every)
        self.everyone_commits += bool(every)
        weights: dict[str, float] = {}
        for rule, chosen in sel.chosen:
            if chosen:
                weights[rule] = max(weights.get(rule, 0.0), share(chosen, m))
        if weights:
            top = max(sorted(weights), key=lambda k: weights[k])
            self.decided[top] += 1
            if res["share"] > 0.4:
                self.decided_over[top] += 1

    def table(self, commits: int) -> str:
        out = [
            "\nwhy a commit ran everything, per rule (commits forced to all; of them, by this "
            "rule alone; share it cost, points of the mean over all commits):"
        ]
        for rule, n in self.forced.most_common():
            top = ", ".join(f"{f} {c}" for f, c in self.files[rule].most_common(3))
            out.append(
                f"  {rule:40} {n:4} {self.alone[rule]:4} {100 * self.cost[rule] / commits:6.1f}"
                f"   ({top})"
            )
        out.append(
            "which rule decided a subset's share (the rule whose own tests weigh the most: "
            "commits; of them over 40%):"
        )
        for rule, n in self.decided.most_common():
            out.append(f"  {rule:40} {n:4} {self.decided_over[rule]:4}")
        rules = ", ".join(f"{r} {n}" for r, n in self.everyone.most_common())
        out.append(
            f"subsets that changed code every recorded test ran (import-time code such as "
            f"the APIs' decoration): {self.everyone_commits} ({rules or 'none'})"
        )
        return "\n".join(out)


def _mutable(n: ast.AST) -> bool:
    """A node ``_mutate`` can flip: a comparison or operator it knows, an int or bool."""
    if isinstance(n, ast.Compare):
        return type(n.ops[0]) in _FLIPS
    if isinstance(n, ast.BinOp | ast.BoolOp):
        return type(n.op) in _FLIPS
    return isinstance(n, ast.Constant) and type(n.value) in (int, bool)


def _mutate(source: str, functions: set[str], rng: random.Random) -> str | None:
    tree = ast.parse(source)
    sites: list[ast.AST] = []

    def walk(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                name = prefix + node.name
                if name in functions:
                    sites.extend(n for n in ast.walk(node) if _mutable(n))
                walk(node.body, name + ".<locals>.")
            elif isinstance(node, ast.ClassDef):
                walk(node.body, prefix + node.name + ".")

    walk(tree.body, "")
    if not sites:
        return None
    site = copy.deepcopy(rng.choice(sites))
    if isinstance(site, ast.Compare) and type(site.ops[0]) in _FLIPS:
        site.ops[0] = _FLIPS[type(site.ops[0])]()
    elif isinstance(site, ast.BinOp | ast.BoolOp) and type(site.op) in _FLIPS:
        site.op = _FLIPS[type(site.op)]()
    elif isinstance(site, ast.Constant):
        site.value = (not site.value) if isinstance(site.value, bool) else site.value + 1
    else:
        return None
    # Only the node's own text changes (ast.unparse of the whole file would reformat every
    # line, and the selection would see module-level changes everywhere).
    return _splice(source, site, f"({ast.unparse(site)})")


def _splice(source: str, node: ast.expr, text: str) -> str:
    """``source`` with ``node``'s text replaced by ``text`` (AST columns are UTF-8 bytes)."""
    lines = source.splitlines(keepends=True)

    def offset(line: int, col: int) -> int:
        prefix = lines[line - 1].encode("utf-8")[:col].decode("utf-8", errors="replace")
        return sum(len(x) for x in lines[: line - 1]) + len(prefix)

    assert node.end_lineno is not None and node.end_col_offset is not None
    start = offset(node.lineno, node.col_offset)
    end = offset(node.end_lineno, node.end_col_offset)
    return source[:start] + text + source[end:]


def _failing(
    repo: Path, targets: list[str], workers: int = 0, timeout: float | None = None
) -> dict[str, str]:
    """``{node ID: pytest's summary line}`` of the tests that fail or error when pytest
    runs ``targets`` (one pytest per lane, as CI runs them: one command naming both lanes
    collects the stable one only), on ``workers`` xdist workers (0: one process).  A lane
    that runs past ``timeout`` seconds (a mutant can loop forever) counts as one failure
    named ``<timed out: ...>``."""
    failing: dict[str, str] = {}
    xdist = ["-n", str(workers)] if workers > 0 else []
    # As CI runs them (tests/hypothesis_profiles.py): Hypothesis' draws fixed by the code,
    # so a random draw cannot fail one run and pass the other and pass for a miss.
    env = {**os.environ, "CI": os.environ.get("CI", "true")}
    for args in lane_runs(repo, targets):
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfE"]
        cmd += [*xdist, *args]
        try:
            proc = subprocess.run(
                cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=timeout
            )
        except subprocess.TimeoutExpired:
            paths = " ".join(a for a in args if not a.startswith("-"))
            name = f"<timed out after {timeout:.0f} s: pytest {paths}>"
            failing[name] = name
            continue
        failing |= {
            line.split()[1]: line
            for line in proc.stdout.splitlines()
            if line.startswith(("FAILED ", "ERROR ")) and len(line.split()) > 1
        }
    return failing


def full_suite(repo: Path, m: TestMap) -> list[str]:
    """The paths the map was recorded on (both lanes when its arguments name none)."""
    args = [str(a) for a in m.meta.get("pytest_args", [])]
    paths = [a for a in args if not a.startswith("-") and (repo / a.split("::")[0]).exists()]
    return paths or ["tests", "tests/experimental"]


@dataclass
class MutantRun:
    """How a replay's mutant runs: xdist ``workers`` per pytest (0: one process), a
    ``timeout`` in seconds per pytest (None: none), at most ``limit`` mutants run."""

    workers: int = 0
    timeout: float | None = None
    limit: int | None = None


@dataclass
class _Tally:
    ran: int = 0
    killed: int = 0  # mutants some test failed in full
    misses: int = 0
    everything: int = 0  # not run: their selection held every test


def _mutants(repo: Path, m: TestMap, rows: list, per_commit: int, seed: int, how: MutantRun) -> int:
    """Mutants in the work tree (restored after each).  Each runs as two disjoint pytest
    runs that together are the full run: the selected tests, then the full suite less
    them (``--deselect``).  A failure in the second is a miss.  A mutant whose selection
    holds every recorded test cannot be missed and is not run (the line says so)."""
    rng = random.Random(seed)
    suite = full_suite(repo, m)
    runs = " and ".join(f"pytest {' '.join(args)}" for args in lane_runs(repo, suite))
    bound = f", at most {how.limit}" if how.limit is not None else ""
    print(
        f"\nmutants (seed {seed}, {per_commit} per touched file{bound}, commits in a seeded "
        f"order): the full run is {runs}"
    )
    tally = _Tally()
    # Commits in a seeded order: a bound on the mutants samples the whole history, not the
    # newest commits (which often touch the same few files).
    rows = rng.sample(rows, len(rows))
    # A SIGTERM (a CI timeout, kill) raises SystemExit in this thread, so the finally that
    # puts a mutated file back runs instead of leaving the mutant in the work tree.
    previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        for commit, parent, _ in rows:
            for ch in diff(repo, parent, commit):
                path = repo / ch.path
                if ch.status not in ("M", "R") or not ch.path.startswith("flashinfer/"):
                    continue
                if not ch.path.endswith(".py") or not path.is_file():
                    continue
                # The functions the commit touched, named in its own version of the file,
                # then mutated by name in the work tree (the map's tree): lines have moved.
                then = parse_scopes(show(repo, commit, ch.path) or "")
                touched = {then.scope_of(n) for n in ch.new_lines}
                for _ in range(per_commit):
                    if how.limit is not None and tally.ran >= how.limit:
                        break
                    label = f"{ch.path} ({commit[:12]})"
                    if not _one_mutant(repo, m, suite, (path, label), touched, rng, how, tally):
                        break
    finally:
        signal.signal(signal.SIGTERM, previous)
    print(
        f"\nmutants: {tally.ran}, misses: {tally.misses}; {tally.killed} of them failed a "
        "test in full (a mutant no test fails proves nothing); "
        f"{tally.everything} not run (selection: everything)"
    )
    return 1 if tally.misses else 0


def _one_mutant(
    repo: Path,
    m: TestMap,
    suite: list[str],
    where: tuple[Path, str],
    touched: set[str],
    rng: random.Random,
    how: MutantRun,
    tally: _Tally,
) -> bool:
    """Draw one mutant of ``touched`` in ``where`` (the file, and how to name it), select
    for it, run it unless the selection holds everything, put the file back; False when
    there is nothing to flip."""
    path, label = where
    original = path.read_text(encoding="utf-8")
    mutant = _mutate(original, touched, rng)
    if mutant is None:
        return False
    try:
        path.write_text(mutant, encoding="utf-8")
        sel = result_json(select(repo, m, "HEAD", None, described="HEAD"), m)
        chosen = sel["tests"]["stable"] + sel["tests"]["experimental"]
        if sel["mode"] == "all" or sel["share"] >= 1.0:
            tally.everything += 1
            print(f"mutant in {label}: the selection runs everything, so no test can be missed")
            return True
        picked = _failing(repo, chosen, how.workers, how.timeout) if chosen else {}
        rest = [*suite, *(f"--deselect={t}" for t in chosen)]
        missed = _failing(repo, rest, how.workers, how.timeout)
    finally:
        path.write_text(original, encoding="utf-8")
    tally.ran += 1
    tally.killed += bool(picked or missed)
    tally.misses += len(missed)
    print(
        f"mutant {tally.ran} in {label}: {len(picked | missed)} fail in full, "
        f"{len(missed)} missed by the selection ({sel['mode']}, {sel['share']:.0%})"
    )
    for nodeid in sorted(missed):
        print(f"  missed: {nodeid}\n    {missed[nodeid][:300]}")  # why it failed
    return True
