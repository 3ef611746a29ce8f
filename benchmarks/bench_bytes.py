"""Bytes per turn on PostgreSQL, relation by relation, against a floor of one bare table.

Appends `--turns` turns (default 5,000) of the peer harness's shapes (issue 33's `workload.py`:
a user text of 300-800 characters, an assistant text with a tool call, a tool result of about
2 KB; about 1.2 KB of JSON a turn) to one session of a fresh schema, one durable `append` at a
time (or `--batch N` turns per `append_many`), then sums each relation's size with its TOAST
table, no VACUUM. The floor stores the same turns' JSON in one table `(session_id, seq,
turn_json)` with its primary key, as the peer harness's raw floor does. It also builds the
full-text index again at once beside the appended one: the difference is room an index grown
one turn at a time holds that one built at once does not.

    python benchmarks/bench_bytes.py --postgres URL [--turns 5000] [--batch 1]
"""

from __future__ import annotations

import argparse
import json
import random
from typing import Any

from scratch_schemas import scratch_schema

from memstore import SessionStore

GOAL = 2.0
VOCABULARY = (
    "the agent tool call result file line error test build module function value config "
    "session store turn message node parent leaf graph path table index query commit write "
    "read load append json block text input output python import class return async await"
)
WORDS = VOCABULARY.split()
TOOLS = ("read_file", "write_file", "run_shell", "search_code", "list_dir", "apply_patch")
SIZES = """
SELECT c.relname, pg_relation_size(c.oid) + COALESCE(pg_total_relation_size(c.reltoastrelid), 0)
FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'i')
"""


def words(rng: random.Random, low: int, high: int) -> str:
    target = rng.randint(low, high)
    text = ""
    while len(text) < target:
        text += rng.choice(WORDS) + " "
    return text[:target]


def turns(count: int) -> list[dict[str, Any]]:
    """The peer harness's cycle of three turns: user text, assistant text + call, result."""
    rng = random.Random(20240611)
    made: list[dict[str, Any]] = []
    for n in range(count):
        call = f"call_{n // 3:06d}"
        if n % 3 == 0:
            made.append(
                {"role": "user", "blocks": [{"kind": "text", "text": words(rng, 300, 800)}]}
            )
        elif n % 3 == 1:
            tool: dict[str, Any] = {"kind": "tool_call", "id": call, "name": rng.choice(TOOLS)}
            tool["input"] = {"path": f"src/{rng.choice(WORDS)}.py", "query": words(rng, 20, 60)}
            text = {"kind": "text", "text": words(rng, 300, 800)}
            made.append({"role": "assistant", "blocks": [text, tool]})
        else:
            result = {"kind": "tool_result", "callId": call, "output": words(rng, 1900, 2200)}
            made.append({"role": "user", "blocks": [result]})
    return made


def measure(url: str, count: int, batch: int) -> tuple[dict[str, int], int, int]:
    """Each relation's bytes after memstore's appends; the floor's; the full-text index built
    again at once."""
    made = turns(count)
    with SessionStore(url) as store:
        for first in range(0, count, batch):
            if batch == 1:
                store.append("s", made[first])
            else:
                store.append_many("s", made[first : first + batch])
        with store.engine.begin() as connection:
            sizes = {str(name): int(size) for name, size in connection.exec_driver_sql(SIZES)}
            connection.exec_driver_sql(
                "CREATE TABLE floor (session_id text, seq int, turn_json text,"
                " PRIMARY KEY (session_id, seq))"
            )
            rows = [("s", n, json.dumps(t, separators=(",", ":"))) for n, t in enumerate(made)]
            driver: Any = connection.connection.driver_connection
            with driver.cursor() as cursor, cursor.copy("COPY floor FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
            floor = connection.exec_driver_sql("SELECT pg_total_relation_size('floor')").scalar()
            connection.exec_driver_sql("CREATE INDEX again ON nodes USING gin (search_vector)")
            again = connection.exec_driver_sql("SELECT pg_relation_size('again')").scalar()
    return sizes, int(floor or 0), int(again or 0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", required=True, help="a server to make a fresh schema on")
    parser.add_argument("--turns", type=int, default=5000)
    parser.add_argument("--batch", type=int, default=1, help="turns per append_many (1: append)")
    args = parser.parse_args()
    with scratch_schema(args.postgres) as url:
        sizes, floor, again = measure(url, args.turns, args.batch)
    per_turn = {name: size / args.turns for name, size in sizes.items()}
    print(f"{args.turns:,} turns, {args.batch} per call; bytes per turn by relation:")
    for name, size in sorted(per_turn.items(), key=lambda item: -item[1]):
        if size >= 1:
            print(f"  {name:40} {size:8,.0f}")
    total = sum(per_turn.values())
    print(f"  full-text index built again at once      {again / args.turns:8,.0f}")
    ratio = total / (floor / args.turns)
    print(f"memstore {total:,.0f}, floor {floor / args.turns:,.0f}: {ratio:.2f}x (goal <= {GOAL}x)")
    return 0 if ratio <= GOAL else 1


if __name__ == "__main__":
    raise SystemExit(main())
