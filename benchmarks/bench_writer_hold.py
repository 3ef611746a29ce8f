"""How long a SQLite append holds the writer lock, and on what: one process appending
`bench_writers.py`'s turn (about 200 bytes) to one session, `writer_turns` and the prepared
statements timed from the outside.

Each append's hold (from the writer turn taken to its release) is split into: BEGIN IMMEDIATE
(taken to the first statement), the statements (on the driver's cursor), the Python between
them (the plan and the driver loop) and the commit (the last statement to the release); and the
hold's CPU time (the thread's: without the time the scheduler took the process off the CPU).
Prints each part's median and mean over `--appends` appends. While the lock is held every other
writer waits, so with 8 writers on 2 cores what shortens it shortens their turns (see
`bench_writers.py`). To compare two checkouts, run it from each in turn.

    python benchmarks/bench_writer_hold.py [--appends 3000]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from memstore import SessionStore
from memstore.store import writer_turns
from memstore.store.prepared import Prepared, PreparedRows

WARM_UP = 200
PARTS = ("hold", "BEGIN IMMEDIATE", "statements", "Python between", "commit", "hold, CPU")


class Clock:
    """The marks of the hold under way: (what, when), and every finished hold's."""

    def __init__(self) -> None:
        self.marks: list[tuple[str, float]] | None = None
        self.cpu_start = 0.0
        self.holds: list[list[tuple[str, float]]] = []
        self.cpus: list[float] = []

    def mark(self, what: str) -> None:
        if self.marks is not None:
            self.marks.append((what, time.perf_counter()))


def instrument(clock: Clock) -> None:
    """Time the writer turns and the prepared statements (the append path's)."""
    take, release, run = writer_turns.take, writer_turns.release, Prepared.run

    def timed_take(info: dict[str, Any], path: str | None, timeout: float) -> None:
        take(info, path, timeout)
        clock.marks = [("take", time.perf_counter())]
        clock.cpu_start = time.thread_time()

    def timed_release(info: dict[str, Any]) -> None:
        if clock.marks is not None:
            clock.mark("release")
            clock.holds.append(clock.marks)
            clock.cpus.append(time.thread_time() - clock.cpu_start)
            clock.marks = None
        release(info)

    def timed_run(self: Prepared, cursor: Any, dialect: Any, params: Any) -> PreparedRows:
        clock.mark("start")
        rows = run(self, cursor, dialect, params)
        clock.mark("end")
        return rows

    writer_turns.take = timed_take
    writer_turns.release = timed_release
    Prepared.run = timed_run  # type: ignore[method-assign]


def turn(n: int) -> dict[str, Any]:
    """`bench_writers.py`'s turn."""
    text = f"worker 0 turn {n}: " + "the upload fails when the timeout is short " * 4
    return {"role": "user", "blocks": [{"kind": "text", "text": text}]}


def parts(hold: list[tuple[str, float]]) -> dict[str, float]:
    """One hold's parts, in seconds."""
    times = [when for _, when in hold]
    spans = list(itertools.pairwise(hold))
    return {
        "hold": times[-1] - times[0],
        "BEGIN IMMEDIATE": times[1] - times[0],
        "statements": sum(b[1] - a[1] for a, b in spans if a[0] == "start"),
        "Python between": sum(b[1] - a[1] for a, b in spans[1:-1] if a[0] == "end"),
        "commit": times[-1] - times[-2],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--appends", type=int, default=3000)
    args = parser.parse_args()
    clock = Clock()
    instrument(clock)
    with tempfile.TemporaryDirectory() as folder:
        store = SessionStore(f"sqlite:///{Path(folder) / 'memstore.db'}")
        for n in range(WARM_UP):
            store.append("w0", turn(n))
        clock.holds.clear()
        clock.cpus.clear()
        for n in range(args.appends):
            store.append("w0", turn(n))
        store.close()
    measured = [parts(hold) for hold in clock.holds]
    statements = statistics.median(len(hold) // 2 - 1 for hold in clock.holds)
    print(f"{args.appends} appends, {statements:.0f} statements each; per append, µs:")
    for part in PARTS:
        values = clock.cpus if part == "hold, CPU" else [m[part] for m in measured]
        median, mean = statistics.median(values) * 1e6, statistics.mean(values) * 1e6
        print(f"  {part:<16} median {median:6.1f}  mean {mean:6.1f}")


if __name__ == "__main__":
    main()
