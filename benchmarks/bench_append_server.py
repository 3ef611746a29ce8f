"""The server's time per PostgreSQL append (issue 33): `memstore_append` as this code's schema
has it against an older revision's (default 0037: the function in a subtransaction), two
`SessionStore`s appending bench_writers' turn to a session of their own, taking turns in
slices. Each call's execution time is the server's own, from its log
(`log_min_duration_statement = 0`, set for these connections only: a superuser's URL, and the
server's log file readable here); the client's CPU (`time.process_time`) per append beside it.

    python benchmarks/bench_append_server.py --postgres URL \\
        --log /var/log/postgresql/postgresql-15-main.log [--appends 2000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from bench_append_cpu import turn_text
from scratch_schemas import FreshSchemas

SLICES = 20
WARM_UP = 500  # a session of some turns, as an application's
LOGGED = "-clog_min_duration_statement%3D0 -clog_parameter_max_length%3D0"
_EXECUTE = re.compile(
    r"\[(\d+)\] .*duration: ([0-9.]+) ms  execute [^:]*: SELECT .*memstore_append\("
)


def appender(schemas: FreshSchemas, revision: str | None) -> tuple[Callable[[int], None], str]:
    """`SessionStore.append` of one turn into a fresh schema (at `revision` when given, else the
    newest); its connections log each statement's time under a name of their own."""
    from memstore import SessionStore

    name = f"bench_append_server_{uuid.uuid4().hex[:8]}"
    url = schemas.store_url(schemas.new()) + f"%20{LOGGED}&application_name={name}"
    store = SessionStore(url)
    if revision is not None:
        store.downgrade_schema(revision)

    def append(n: int) -> None:
        store.append("w0", {"role": "user", "blocks": [{"kind": "text", "text": turn_text(n)}]})

    for n in range(WARM_UP):
        append(n)
    return append, name


def backends(schemas: FreshSchemas, name: str) -> set[str]:
    """The server processes of the connections named `name`."""
    found = schemas.admin.execute(
        "SELECT pid FROM pg_stat_activity WHERE application_name = %s", (name,)
    ).fetchall()
    return {str(pid) for (pid,) in found}


def call_times(log: Path, start: int, pids: set[str]) -> list[float]:
    """The logged execution times (ms) of `memstore_append` by `pids` after byte `start`."""
    with log.open("rb") as lines:
        lines.seek(start)
        text = lines.read().decode(errors="replace")
    found = (_EXECUTE.search(line) for line in text.splitlines())
    return [float(match[2]) for match in found if match and match[1] in pids]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--postgres", metavar="URL", required=True)
    parser.add_argument("--log", type=Path, required=True, help="the server's log file")
    parser.add_argument("--against", default="0037", help="the older revision")
    parser.add_argument("--appends", type=int, default=2000, help="per side and round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with FreshSchemas(args.postgres) as schemas:
        sides = {"new": appender(schemas, None), args.against: appender(schemas, args.against)}
        ratios = []
        step = max(1, args.appends // SLICES)
        for number in range(1, args.rounds + 1):
            start = args.log.stat().st_size
            cpu = dict.fromkeys(sides, 0.0)
            for first in range(0, args.appends, step):
                turns = list(sides.items())  # each side first in every other slice
                for side, (append, _) in turns if first // step % 2 else reversed(turns):
                    began = time.process_time()
                    for n in range(first, min(args.appends, first + step)):
                        append(WARM_UP + number * args.appends + n)
                    cpu[side] += time.process_time() - began
            time.sleep(1)  # the log written
            medians = {}
            for side, (_, name) in sides.items():
                times = call_times(args.log, start, backends(schemas, name))
                medians[side] = statistics.median(times)
                print(
                    f"round {number}, {side}: {len(times)} calls, server median "
                    f"{medians[side] * 1000:.0f} µs (p10 "
                    f"{statistics.quantiles(times, n=10)[0] * 1000:.0f}, p90 "
                    f"{statistics.quantiles(times, n=10)[-1] * 1000:.0f}), client CPU "
                    f"{cpu[side] / args.appends * 1e6:.0f} µs per append"
                )
            ratios.append(medians["new"] / medians[args.against])
            print(f"round {number}: new over {args.against}: {ratios[-1]:.2f}x")
        print(f"median {statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}x)")


if __name__ == "__main__":
    main()
