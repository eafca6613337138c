"""Drive ``with`` blocks in several threads or asyncio tasks by a generated schedule.

Each worker (a thread, or a task) serves commands: ``("enter", k)`` enters ``blocks[k]``
with a real ``with`` statement and serves the next commands inside it, ``"exit"`` leaves
its innermost block, ``"observe"`` only reports.  After each command the worker replies with
``observe()`` as seen from inside it, so a test compares every step with its model.  One
block object may be entered by several workers at once, and nested in one.  Every wait has
a timeout: a worker that hangs fails the test instead of hanging it.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from hypothesis import strategies as st

WAIT_S = 20.0

#: Two workers in the same block object, the first to enter leaving first.
CROSSED = [(0, ("enter", 0)), (1, ("enter", 0)), (0, "exit"), (1, "exit")]


def close_in_thread(generator: Any) -> BaseException | None:
    """Close ``generator`` from another thread (waiting at most :data:`WAIT_S`); what the
    close raised there, or None."""
    failure: list[BaseException] = []

    def target() -> None:
        try:
            generator.close()
        except BaseException as exc:
            failure.append(exc)

    t = threading.Thread(target=target)
    t.start()
    t.join(timeout=WAIT_S)
    assert not t.is_alive(), "closing the generator hung"
    return failure[0] if failure else None


def schedules(workers: int, blocks: int) -> st.SearchStrategy[list[tuple[int, Any]]]:
    """Generated schedules: per step a worker and ``("enter", k)``, ``"exit"`` or
    ``"observe"`` (an exit with no block open observes)."""
    command = st.one_of(
        st.just("exit"), st.just("observe"), st.tuples(st.just("enter"), st.integers(0, blocks - 1))
    )
    return st.lists(st.tuples(st.integers(0, workers - 1), command), max_size=30)


def run_in_threads(
    blocks: Sequence[Any],
    schedule: Sequence[tuple[int, Any]],
    workers: int,
    observe: Callable[[], Any],
) -> list[tuple[int, Any, Any]]:
    """Run ``schedule`` (``(worker, command)`` pairs) on ``workers`` threads; returns
    ``(worker, command, observed)`` per command, then each worker's observation once all its
    blocks are left (command ``"done"``)."""
    inboxes = [queue.Queue() for _ in range(workers)]
    replies: queue.Queue = queue.Queue()

    def serve(w: int) -> bool:
        """Serve commands until "exit" (True) or "quit" (False)."""
        while True:
            command = inboxes[w].get(timeout=WAIT_S)
            if command == "quit":
                return False
            if command == "exit":
                return True
            if command != "observe":
                with blocks[command[1]]:
                    replies.put((w, command, observe()))
                    if not serve(w):
                        return False
                command = "exit"
            replies.put((w, command, observe()))

    def main(w: int) -> None:
        try:
            serve(w)
        except BaseException as exc:  # reported to the test's thread
            replies.put((w, "error", exc))

    threads = [threading.Thread(target=main, args=(w,), daemon=True) for w in range(workers)]
    for t in threads:
        t.start()
    return _drive(schedule, workers, inboxes, replies, lambda q, c: q.put(c), replies.get, threads)


def _steps(schedule: Sequence[tuple[int, Any]], workers: int) -> list[tuple[int, Any, bool]]:
    """The commands the workers get, ``(worker, command, last)``: ``schedule`` with an exit
    of a worker inside no block made an observe, then each worker leaving every block it is
    in and observing once more (``last``: that observation is reported as ``"done"``)."""
    depth = [0] * workers
    steps = []
    for w, command in schedule:
        if command == "exit" and depth[w] == 0:
            command = "observe"
        depth[w] += 1 if command not in ("exit", "observe") else -1 if command == "exit" else 0
        steps.append((w, command, False))
    for w in range(workers):
        steps += [(w, "exit", False)] * depth[w]
        steps.append((w, "observe", True))
    return steps


def _drive(schedule, workers, inboxes, replies, send, receive, threads) -> list:
    seen: list[tuple[int, Any, Any]] = []
    try:
        for w, command, last in _steps(schedule, workers):
            send(inboxes[w], command)
            reply = receive(timeout=WAIT_S)
            if reply[1] == "error":
                raise reply[2]
            seen.append((w, "done", reply[2]) if last else reply)
    finally:
        for w in range(workers):
            send(inboxes[w], "quit")
        for t in threads:
            t.join(timeout=WAIT_S)
            assert not t.is_alive(), "a worker thread hung"
    return seen


def run_in_tasks(
    blocks: Sequence[Any],
    schedule: Sequence[tuple[int, Any]],
    workers: int,
    observe: Callable[[], Any],
) -> list[tuple[int, Any, Any]]:
    """:func:`run_in_threads` with asyncio tasks of one event loop as the workers."""

    async def main() -> list:
        inboxes = [asyncio.Queue() for _ in range(workers)]
        replies: asyncio.Queue = asyncio.Queue()

        async def serve(w: int) -> bool:
            while True:
                command = await asyncio.wait_for(inboxes[w].get(), WAIT_S)
                if command == "quit":
                    return False
                if command == "exit":
                    return True
                if command != "observe":
                    with blocks[command[1]]:
                        replies.put_nowait((w, command, observe()))
                        if not await serve(w):
                            return False
                    command = "exit"
                replies.put_nowait((w, command, observe()))

        async def task(w: int) -> None:
            try:
                await serve(w)
            except BaseException as exc:
                replies.put_nowait((w, "error", exc))

        tasks = [asyncio.create_task(task(w)) for w in range(workers)]
        seen: list = []
        try:
            for w, command, last in _steps(schedule, workers):
                inboxes[w].put_nowait(command)
                reply = await asyncio.wait_for(replies.get(), WAIT_S)
                if reply[1] == "error":
                    raise reply[2]
                seen.append((w, "done", reply[2]) if last else reply)
        finally:
            for w in range(workers):
                inboxes[w].put_nowait("quit")
            await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), WAIT_S)
        return seen

    return asyncio.run(main())


def body(block: Any) -> Iterator[str]:
    """A generator that enters ``block``, suspends inside it, then suspends after it."""
    with block:
        yield "inside"
    yield "after"


#: The actions of :func:`run_generator_program`: start a generator (suspended inside its
#: block), resume one out of its block, close one (here or from another thread), enter or
#: leave a block by hand in the program's own frame.
GENERATOR_ACTIONS = ("gen", "resume", "close", "close_thread", "enter", "exit")


def run_generator_program(
    actions: Sequence[tuple[str, int]],
    block_for: Callable[[int], Any],
    blocks: int,
    check: Callable[[list[int], Any], None],
) -> None:
    """Run ``actions`` (``(action, n)``, ``n`` picking the block or the generator) in the
    current context; after each, ``check(stack, step)`` with the indexes of the open entries
    in the order they were entered.  Then closes what is still open."""
    open_entries: list[tuple[object, int]] = []  # (owner, block index), oldest first
    gens: list[dict] = []  # live generators: {"gen", "inside", "k"}
    direct: list[tuple[int, Any]] = []  # entered by hand in this frame, oldest first
    for kind, n in actions:
        k = n % blocks
        if kind == "gen":
            record = {"gen": body(block_for(k)), "k": k, "inside": True}
            assert next(record["gen"]) == "inside"
            gens.append(record)
            open_entries.append((record, k))
        elif kind in ("resume", "close", "close_thread") and gens:
            record = gens[n % len(gens)]
            if kind == "resume" and not record["inside"]:
                continue
            if kind == "resume":
                assert next(record["gen"]) == "after"
            else:
                if kind == "close":
                    record["gen"].close()
                elif (failure := close_in_thread(record["gen"])) is not None:
                    raise failure
                gens.remove(record)
            if record["inside"]:
                record["inside"] = False
                open_entries.remove((record, record["k"]))
        elif kind == "enter":
            block = block_for(k)
            block.__enter__()
            direct.append((k, block))
            open_entries.append(("direct", k))
        elif kind == "exit" and direct:
            k, block = direct.pop()  # by hand in one frame, as nested with statements would
            block.__exit__(None, None, None)
            newest = max(i for i, e in enumerate(open_entries) if e == ("direct", k))
            del open_entries[newest]
        else:
            continue
        check([k for _, k in open_entries], (kind, n))
    for record in gens:
        record["gen"].close()
    while direct:
        direct.pop()[1].__exit__(None, None, None)


def expected_states(
    schedule: Sequence[tuple[int, Any]], workers: int, state_of: Callable[[list[int]], Any]
) -> list[tuple[int, Any, Any]]:
    """What each step should observe: ``state_of(stack)``, the stack being the indexes of the
    blocks the worker is inside, outermost first (each worker on its own)."""
    stacks: list[list[int]] = [[] for _ in range(workers)]
    out = []
    for w, command in schedule:
        if command == "exit" and not stacks[w]:
            command = "observe"
        if command == "exit":
            stacks[w].pop()
        elif command != "observe":
            stacks[w].append(command[1])
        out.append((w, command, state_of(stacks[w])))
    for w in range(workers):
        while stacks[w]:
            stacks[w].pop()
            out.append((w, "exit", state_of(stacks[w])))
        out.append((w, "done", state_of([])))
    return out
