"""The selection over this repository's own history: for each of the last N commits on the
current branch (first parents), the selection for the commit against its parent, read with
one map (the map's tests and what they ran stand in for each parent's; a commit whose files
the map never saw runs everything, which the table shows).

Prints one row per commit (share selected, mode, the rules that fired) and the median share.
``--mutants K`` also flips K operators or constants (drawn from ``--seed``) inside the
functions each commit touched, and runs each mutant in full and selected: a miss is a test
that fails (or errors) in full but was not selected.  "In full" is the suite the map was
recorded on (its pytest arguments that name paths; both lanes when it names none), so a map
recorded on a few files replays against those files.  That costs two pytest runs per
mutant.
"""

from __future__ import annotations

import ast
import collections
import copy
import random
import statistics
import subprocess
import sys
from pathlib import Path

from testmap_lib.gitdiff import DiffError, diff, git, show
from testmap_lib.mapfile import MapError, TestMap, load
from testmap_lib.rules import result_json, select
from testmap_lib.scopes import parse_scopes

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


def replay(repo: Path, map_path: Path, commits: int, mutants: int, seed: int) -> int:
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
    all_rules: collections.Counter[str] = collections.Counter()
    forced: collections.Counter[str] = collections.Counter()
    print(f"{'commit':12}  {'share':>6}  {'mode':6}  rules (count)   subject")
    for commit, parent, subject in rows:
        sel = select(repo, m, parent, commit, described=parent)
        res = result_json(sel, m)
        rules = collections.Counter(r["rule"] for r in res["reasons"])
        all_rules.update(rules)
        for r in res["reasons"]:
            if r["tests"] == "all":
                forced[f"{r['rule']}: {r['file']}"] += 1
        shares.append(res["share"])
        fired = ", ".join(f"{k}({v})" for k, v in sorted(rules.items()))
        print(f"{commit[:12]}  {res['share']:6.1%}  {res['mode']:6}  {fired}   {subject[:50]}")
    if shares:
        print(f"\nmedian share over {len(shares)} commits: {statistics.median(shares):.1%}")
        print("why a commit ran everything (rule: file, commits):")
        for what, count in forced.most_common(15):
            print(f"  {count:4}  {what}")
    if mutants:
        return _mutants(repo, m, rows, mutants, seed)
    return 0


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


def _failing(repo: Path, targets: list[str]) -> set[str]:
    """The node IDs that fail or error when pytest runs ``targets``."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfE", *targets]
    proc = subprocess.run(cmd, cwd=repo, capture_output=True, text=True)
    return {
        line.split()[1]
        for line in proc.stdout.splitlines()
        if line.startswith(("FAILED ", "ERROR ")) and len(line.split()) > 1
    }


def full_suite(repo: Path, m: TestMap) -> list[str]:
    """The paths the map was recorded on (both lanes when its arguments name none)."""
    args = [str(a) for a in m.meta.get("pytest_args", [])]
    paths = [a for a in args if not a.startswith("-") and (repo / a.split("::")[0]).exists()]
    return paths or ["tests", "tests/experimental"]


def _mutants(repo: Path, m: TestMap, rows: list, per_commit: int, seed: int) -> int:
    """Mutants in the work tree (restored after each): full run vs selected run."""
    rng = random.Random(seed)
    suite = full_suite(repo, m)
    print(f"\nmutants: the full run is pytest {' '.join(suite)}")
    misses = 0
    ran = 0
    for commit, parent, _ in rows:
        for ch in diff(repo, parent, commit):
            path = repo / ch.path
            if ch.status not in ("M", "R") or not ch.path.startswith("flashinfer/"):
                continue
            if not ch.path.endswith(".py"):
                continue
            if not path.is_file():
                continue
            original = path.read_text(encoding="utf-8")
            # The functions the commit touched, named in its own version of the file, then
            # mutated by name in the work tree (the map's tree), where lines have moved.
            then = show(repo, commit, ch.path) or ""
            touched = {parse_scopes(then).scope_of(n) for n in ch.new_lines}
            for _ in range(per_commit):
                mutant = _mutate(original, touched, rng)
                if mutant is None:
                    break
                try:
                    path.write_text(mutant, encoding="utf-8")
                    sel = result_json(select(repo, m, "HEAD", None, described="HEAD"), m)
                    chosen = sel["tests"]["stable"] + sel["tests"]["experimental"]
                    full = _failing(repo, suite)
                    if sel["mode"] == "all":
                        picked = full
                    else:  # nothing selected: nothing ran, every failure is a miss
                        picked = _failing(repo, chosen) if chosen else set()
                finally:
                    path.write_text(original, encoding="utf-8")
                ran += 1
                missed = full - picked
                misses += len(missed)
                print(
                    f"mutant {ran} in {ch.path} ({commit[:12]}): {len(full)} fail in full, "
                    f"{len(missed)} missed by the selection ({sel['mode']}, {sel['share']:.0%})"
                )
                for nodeid in sorted(missed):
                    print(f"  missed: {nodeid}")
    print(f"\nmutants: {ran}, misses: {misses}")
    return 1 if misses else 0
