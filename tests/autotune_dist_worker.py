"""One rank of the multi-process autotuner tests (not a test module; see
``tests/test_autotune_distributed.py``, which starts one process per rank).

    python tests/autotune_dist_worker.py SUITE RANK WORLD STORE OUT_DIR TIMEOUT_S

joins a gloo group through a ``FileStore`` at STORE (``timeout=TIMEOUT_S`` on every
collective), runs every scenario of SUITE in order on the same group, and writes what each
did to ``OUT_DIR/rank<RANK>.json``: ``{scenario: result}``, where a result is a dict of
facts, or ``{"error": type, "message": ..., "elapsed_s": ...}`` when it raised.

Timings are scripted, per rank (:func:`scripted_measure`): the runners are really called,
but the time a pair "took" is what the scenario says, so the tests are deterministic on a
busy machine.
"""

from __future__ import annotations

import builtins
import datetime
import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from autotuner_fakes import FakeRunner, make_op

from flashinfer.autotuner import (
    AutotuneConsistencyError,
    AutoTuner,
    Choice,
    autotune,
    make_key,
    persist,  # distributed saves through it
    set_autotune_process_group,
    timing,
)
from flashinfer.autotuner.distributed import SETTINGS
from flashinfer.autotuner.timing import Median

GATE = "FLASHINFER_ALLOW_EXPERIMENTAL_AUTO_BACKENDS"
RANK = WORLD = 0
#: (backend, tactic) -> seconds on each rank (a list indexed by rank), for the scenario
#: that runs now; a pair not listed takes 1 s everywhere.
SCRIPT: dict[tuple[str, Any], list[float]] = {}


def scripted_measure(fn: Any, inputs: tuple, **kwargs: Any) -> Median:
    fn()  # the runner really runs: failures raise, calls are counted
    runner, tactic = fn.func, fn.args[1]
    seconds = SCRIPT.get((runner.name, tactic), [1.0] * WORLD)[RANK]
    return Median(seconds, seconds / 10)


def x() -> torch.Tensor:
    return torch.zeros(4)


def record_of(op: Any) -> dict[str, Any]:
    """Call ``op`` once inside the current block; what the tuner recorded for it."""
    op(x())
    record = AutoTuner.get().last_tuning()
    return {
        "choice": None if record.choice is None else [record.choice.backend, record.choice.tactic],
        "timed": record.timed,
        "tried": record.tried,
        "failures": [[f.backend, f.tactic, f.reason] for f in record.failures],
    }


# ---- scenarios: each returns facts (JSON) or raises ---------------------------------------


def disagreeing_timings(group: Any) -> dict[str, Any]:
    """Each rank alone would pick another pair; together they pick the pair whose slowest
    rank is fastest."""
    names = ["a", "b", "c", "d"]
    # rank r finds backend names[r] fastest; "d" is never fastest anywhere but never slow.
    for i, name in enumerate(names[:-1]):
        SCRIPT[(name, None)] = [0.001 if r % 3 == i else 0.010 for r in range(WORLD)]
    SCRIPT[("d", None)] = [0.004] * WORLD
    runners = {name: FakeRunner(name) for name in names}
    alone = make_op(runners)
    with autotune():
        local = record_of(alone)
    together = make_op({name: FakeRunner(name) for name in names})
    with autotune(process_group=group):
        shared = record_of(together)
    return {"local": local, "shared": shared}


def gate_differs(group: Any) -> dict[str, Any]:
    """Rank 0 allows experimental backends, the others do not."""
    if RANK == 0:
        os.environ[GATE] = "1"
    try:
        op = make_op({"a": FakeRunner("a"), "exp": FakeRunner("exp")}, experimental=["exp"])
        with autotune(process_group=group):
            return record_of(op)
    finally:
        os.environ.pop(GATE, None)


def tactic_fails_on_one_rank(group: Any) -> dict[str, Any]:
    """Tactic 2 is the fastest everywhere but raises on the last rank only."""
    SCRIPT.update({("a", 1): [0.003] * WORLD, ("a", 2): [0.001] * WORLD, ("a", 3): [0.002] * WORLD})
    op = make_op({"a": FakeRunner("a", [1, 2, 3], fail=[2] if RANK == WORLD - 1 else [])})
    with autotune(process_group=group):
        return record_of(op)


def tactics_raise_on_one_rank(group: Any) -> dict[str, Any]:
    class Broken(FakeRunner):
        def tactics(self, inputs: tuple) -> Any:
            raise RuntimeError("no tactics on this rank")

    runner = Broken("a", [1, 2]) if RANK == WORLD - 1 else FakeRunner("a", [1, 2])
    with autotune(process_group=group):
        return record_of(make_op({"a": runner}))


def sharded(group: Any) -> dict[str, Any]:
    """Eight pairs split across the ranks; each rank times only its share."""
    runners = {"a": FakeRunner("a", [0, 1, 2, 3]), "b": FakeRunner("b", [0, 1, 2, 3])}
    for name in runners:
        for tactic in range(4):
            SCRIPT[(name, tactic)] = [0.010] * WORLD
    SCRIPT[("b", 2)] = [0.001] * WORLD  # the clear winner, timed by one rank only
    op = make_op(runners)
    with autotune(process_group=group, shard=True):
        facts = record_of(op)
    backend, tactic = facts["choice"]
    runners[backend].calls.remove(tactic)  # the call that ran the choice after tuning
    facts["timed_here"] = sorted(
        [name, tactic] for name, runner in runners.items() for tactic in runner.calls
    )
    return facts


def process_wide_group(group: Any) -> dict[str, Any]:
    """``set_autotune_process_group`` makes plain blocks collective; ``None`` undoes it."""
    SCRIPT[("a", None)] = [0.001 if r == 0 else 0.010 for r in range(WORLD)]
    SCRIPT[("b", None)] = [0.005] * WORLD
    set_autotune_process_group(group)
    try:
        with autotune():
            shared = record_of(make_op({"a": FakeRunner("a"), "b": FakeRunner("b")}))
    finally:
        set_autotune_process_group(None)
    with autotune():
        alone = record_of(make_op({"a": FakeRunner("a"), "b": FakeRunner("b")}))
    return {"shared": shared, "alone": alone}


def one_rank_had_it_tuned(group: Any) -> dict[str, Any]:
    """Rank 0 holds a choice for the key (set by hand), the others none: all time it again
    together, and every rank ends with the same choice; then a second call needs nothing."""
    SCRIPT.update({("a", None): [0.002] * WORLD, ("b", None): [0.001] * WORLD})
    runners = {"a": FakeRunner("a"), "b": FakeRunner("b")}
    op = make_op(runners)
    if RANK == 0:
        AutoTuner.get().set_choice(make_key(op.api_key, (x(),)), Choice("a", None, 1e-9))
    with autotune(process_group=group):
        first = record_of(op)
        calls = len(runners["b"].calls)
        second = record_of(op)
    return {"first": first, "second": second, "new_calls": len(runners["b"].calls) - calls}


def shared_file(group: Any, path: Path) -> dict[str, Any]:
    """Rank 0 reads the tuning file for every rank and alone writes it."""
    SCRIPT.update({("a", 1): [0.002] * WORLD, ("a", 2): [0.001] * WORLD})
    runners = {"a": FakeRunner("a", [1, 2])}
    op = make_op(runners)
    opened: list[str] = []
    saves: list[str] = []
    real_open, real_save = builtins.open, persist.save_into

    def spying_open(file: Any, *args: Any, **kwargs: Any) -> Any:
        if str(file) == str(path):
            opened.append(str(file))
            if RANK != 0:  # this rank must never read the file itself
                raise PermissionError(13, "only rank 0 may read", str(file))
        return real_open(file, *args, **kwargs)

    def spying_save(tuner: Any, where: Any, **kwargs: Any) -> int:
        saves.append(str(where))
        return real_save(tuner, where, **kwargs)

    builtins.open, persist.save_into = spying_open, spying_save
    try:
        with autotune(process_group=group, tuning_file=path):  # no file yet: tunes, rank 0 saves
            tuned = record_of(op)
        dist.barrier(group)  # the file is written before anyone reads it back
        AutoTuner.get().clear()
        with autotune(process_group=group, tuning_file=path):  # read by rank 0 for everyone
            loaded = record_of(op)
    finally:
        builtins.open, persist.save_into = real_open, real_save
    return {"tuned": tuned, "loaded": loaded, "opened": len(opened), "saves": len(saves)}


def unreadable_file(group: Any, path: Path) -> dict[str, Any]:
    """Rank 0 cannot read the tuning file: every rank raises its error (none waits)."""
    path.write_text("{}")
    real_open = builtins.open

    def refusing_open(file: Any, *args: Any, **kwargs: Any) -> Any:
        if str(file) == str(path):
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)

    builtins.open = refusing_open if RANK == 0 else real_open
    try:
        with autotune(process_group=group, tuning_file=path):
            return {"entered": True}
    finally:
        builtins.open = real_open


def directory_on_rank0_only(group: Any, out_dir: Path) -> dict[str, Any]:
    """Rank 0 alone reads and writes the file: a directory that only rank 0's host has (here:
    only rank 0's path names an existing one) is no reason for the other ranks to refuse."""
    where = out_dir / ("rank0_dir" if RANK == 0 else f"missing_on_rank{RANK}") / "tuned.json"
    if RANK == 0:
        where.parent.mkdir(exist_ok=True)
    SCRIPT.update({("a", 1): [0.002] * WORLD, ("a", 2): [0.001] * WORLD})
    op = make_op({"a": FakeRunner("a", [1, 2])})
    with autotune(process_group=group, tuning_file=where):
        tuned = record_of(op)
    return {"tuned": tuned, "saved": where.exists()}


def directory_missing_on_rank0(group: Any, out_dir: Path) -> dict[str, Any]:
    """Rank 0's directory is missing: every rank refuses, on entry, before any tuning."""
    where = out_dir / "no_such_dir" / "tuned.json"
    with autotune(process_group=group, tuning_file=where):
        return {"entered": True}


def killed_mid_tuning(group: Any) -> dict[str, Any]:
    """The last rank dies while it times a pair; the others must fail, not hang."""

    class Dying(FakeRunner):
        def __call__(self, inputs: tuple, tactic: Any = None) -> Any:
            if RANK == WORLD - 1:
                os._exit(17)
            return super().__call__(inputs, tactic)

    with autotune(process_group=group):
        return record_of(make_op({"a": Dying("a", [1, 2])}))


# ---- settings that differ between the ranks (issue 21, item 4) ----------------------------

#: The tuner's settings in SETTINGS, as (the value of every rank but 1, rank 1's value).
TUNER_VALUES: dict[str, tuple[Any, Any]] = {
    "switch_margin": (0.0, 10.0),
    "repeat": (1, 3),
    "warmup": (0, 2),
    "budget_s": (1.0, None),
}
#: When the setting starts to differ, per kind of setting: before the block is entered;
#: inside it, before its first call; between two keys tuned in it.  skip_ops: for a key never
#: tuned, and for one every rank agreed on before (so that no rank needs a collective call to
#: serve it).
WHEN: dict[str, tuple[str, ...]] = {
    **{name: ("entry", "block", "between_keys") for name in TUNER_VALUES},
    "skip_ops": ("fresh", "agreed"),
    "tuning_file": ("entry",),
}


def setting_differs(group: Any, out_dir: Path, name: str, when: str) -> dict[str, Any]:
    """Rank 1's ``name`` differs from the other ranks' (see WHEN); every rank should raise
    AutotuneConsistencyError before anything is timed.  The facts: the error, its
    ``differences``, this rank's value, and how many runner calls the failing step made."""
    runners = {"a": FakeRunner("a", [1, 2]), "b": FakeRunner("b")}
    op, second = make_op(runners), make_op({"a": FakeRunner("a")})
    tuner = AutoTuner.get()
    odd = RANK == 1
    start = time.monotonic()
    calls = 0
    value: Any = None

    def calls_now() -> int:
        return sum(len(r.calls) for r in runners.values())

    saved = {n: getattr(tuner, n) for n in TUNER_VALUES}
    try:
        if name in TUNER_VALUES:
            value = TUNER_VALUES[name][odd]
            if when == "entry":
                setattr(tuner, name, value)
            with autotune(process_group=group):
                if when == "between_keys":
                    second(x())  # the first key: tuned together, settings equal
                setattr(tuner, name, value)
                calls = calls_now()
                op(x())
        elif name == "skip_ops":
            value = [op.api_key] if odd else []
            if when == "agreed":
                with autotune(process_group=group):
                    op(x())
            calls = calls_now()
            with autotune(process_group=group, skip_ops=[op] if odd else []):
                op(x())
        elif name == "tuning_file":
            value = odd
            with autotune(process_group=group, tuning_file=out_dir / "tuned.json" if odd else None):
                op(x())
        else:
            raise KeyError(f"no case for the setting {name!r}: add one to setting_differs")
    except AutotuneConsistencyError as exc:
        return {
            "error": type(exc).__name__,
            "is_consistency_error": True,
            "message": str(exc),
            "differences": exc.differences,
            "value": value,
            "new_calls": calls_now() - calls,
            "elapsed_s": time.monotonic() - start,
        }
    finally:
        for n, v in saved.items():
            setattr(tuner, n, v)
    return {"value": value, "new_calls": calls_now() - calls}


def setting_cases() -> list[str]:
    """``setting_differs:<name>:<when>`` for every setting of SETTINGS (a setting this file
    has no case for still gets one: it fails, naming the setting)."""
    return [f"setting_differs:{n}:{w}" for n in SETTINGS for w in WHEN.get(n, ("entry",))]


SUITES: dict[str, list[str]] = {
    "main": [
        "disagreeing_timings",
        "gate_differs",
        "tactic_fails_on_one_rank",
        "tactics_raise_on_one_rank",
        "sharded",
        "process_wide_group",
        "one_rank_had_it_tuned",
        "shared_file",
        "unreadable_file",
        "directory_on_rank0_only",
        "directory_missing_on_rank0",
    ],
    "four": ["disagreeing_timings", "gate_differs", "sharded"],
    "kill": ["killed_mid_tuning"],
    "settings": setting_cases(),
}


def run(name: str, group: Any, out_dir: Path) -> dict[str, Any]:
    name, *args = name.split(":")
    scenario: Callable[..., dict[str, Any]] = globals()[name]
    SCRIPT.clear()
    AutoTuner.get().clear()
    start = time.monotonic()
    try:
        if args:
            return scenario(group, out_dir, *args)
        if name in ("shared_file", "unreadable_file"):
            return scenario(group, out_dir / f"{name}.json")
        if name.startswith("directory_"):
            return scenario(group, out_dir)
        return scenario(group)
    except Exception as exc:  # the facts are what raised, where, and how fast
        return {
            "error": type(exc).__name__,
            "is_consistency_error": isinstance(exc, AutotuneConsistencyError),
            "message": str(exc),
            "elapsed_s": time.monotonic() - start,
            "traceback": traceback.format_exc(),
        }


def main() -> None:
    global RANK, WORLD
    suite, rank, world, store, out, timeout = sys.argv[1:7]
    RANK, WORLD = int(rank), int(world)
    out_dir = Path(out)
    timing.measure = scripted_measure  # type: ignore[assignment]
    tuner = AutoTuner.get()
    tuner.warmup, tuner.repeat = 0, 1
    dist.init_process_group(
        "gloo",
        store=dist.FileStore(store, WORLD),
        rank=RANK,
        world_size=WORLD,
        timeout=datetime.timedelta(seconds=float(timeout)),
    )
    results: dict[str, Any] = {}
    try:
        for name in SUITES[suite]:
            results[name] = run(name, dist.group.WORLD, out_dir)
            # Written after each scenario: a later hang or death keeps what came before.
            (out_dir / f"rank{RANK}.json").write_text(json.dumps(results, default=repr))
    finally:
        dist.destroy_process_group()
    # Every result is on disk: leave without the interpreter's finalization, where a gloo
    # worker thread still joinable can abort the process ("terminate called without an
    # active exception", SIGABRT; pytorch/pytorch#179291).  Seen once in a full .ci/run,
    # on a rank that had finished every scenario; an exception above still exits non-zero.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
