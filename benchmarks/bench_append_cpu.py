"""The client's CPU per durable append on PostgreSQL (issue 33): one process appending turns of
about 200 bytes (bench_writers' turn) to a session of its own, memstore's `append` against
bench_writers' floor (psycopg's INSERT of one row and COMMIT, prepared), the two taking turns
in slices so that the machine's noise lands on both alike. Prints the CPU time of each
(`time.process_time`: the process's user and system time; waiting for the server is not
counted) per append and memstore's over the floor's, per round and their median.

With `--only SIDE`, that side alone appends `--appends` turns and nothing is printed: a run
for an instruction count, under `valgrind --tool=cachegrind --cache-sim=no`, whose "I refs"
at two counts of appends, their difference over the difference in appends, is the client's
user-space instructions per append, steady where CPU times move with the machine's load.

    python benchmarks/bench_append_cpu.py --postgres URL [--appends 2000] [--rounds 3]
    valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \\
        python benchmarks/bench_append_cpu.py --postgres URL --only memstore --appends 100
    (and --appends 600)
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from scratch_schemas import FreshSchemas

SLICES = 20
WARM_UP = 20


def turn_text(n: int) -> str:
    """bench_writers' turn: about 200 bytes."""
    return f"worker 0 turn {n}: " + "the upload fails when the timeout is short " * 4


def memstore_appender(url: str) -> Callable[[int], None]:
    """`SessionStore.append` of one turn to session `w0`."""
    from memstore import SessionStore

    store = SessionStore(url)

    def append(n: int) -> None:
        store.append("w0", {"role": "user", "blocks": [{"kind": "text", "text": turn_text(n)}]})

    return append


def floor_appender(schemas: FreshSchemas, schema: str) -> Callable[[int], None]:
    """psycopg's prepared INSERT of one row and COMMIT, into a bare table."""
    import psycopg

    connection: Any = psycopg.connect(schemas.url, options=f"-csearch_path={schema}")
    connection.execute(
        "CREATE TABLE floor_turns (id bigserial PRIMARY KEY, session text, body text)"
    )
    connection.commit()

    def append(n: int) -> None:
        sql = "INSERT INTO floor_turns (session, body) VALUES (%s, %s)"
        connection.execute(sql, ("w0", turn_text(n)), prepare=True)
        connection.commit()

    return append


def cpu_per_append(sides: list[Callable[[int], None]], appends: int) -> list[float]:
    """Each side's CPU seconds per append, the sides taking turns in SLICES slices."""
    spent = [0.0] * len(sides)
    step = max(1, appends // SLICES)
    for start in range(0, appends, step):
        for index, append in enumerate(sides):
            began = time.process_time()
            for n in range(start, min(appends, start + step)):
                append(n)
            spent[index] += time.process_time() - began
    return [seconds / appends for seconds in spent]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--postgres", metavar="URL", required=True)
    parser.add_argument("--appends", type=int, default=2000, help="per side and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", choices=("memstore", "floor"), help="one side, silently")
    args = parser.parse_args()
    with FreshSchemas(args.postgres) as schemas:
        schema = schemas.new()
        sides = {
            "memstore": memstore_appender(schemas.store_url(schema)),
            "floor": floor_appender(schemas, schema),
        }
        for append in sides.values():
            for n in range(WARM_UP):
                append(n)
        if args.only:
            for n in range(args.appends):
                sides[args.only](n)
            return
        ratios = []
        for number in range(1, args.rounds + 1):
            ours, floor = cpu_per_append([sides["memstore"], sides["floor"]], args.appends)
            ratios.append(ours / floor)
            print(
                f"round {number}: memstore {ours * 1e6:.0f} µs, floor {floor * 1e6:.0f} µs "
                f"of CPU per append: {ours / floor:.2f}x"
            )
        print(f"median {statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}x)")


if __name__ == "__main__":
    main()
