"""Keyed appends as a session grows: `append_keyed` of `--batch` turns with random UUID keys
(the Claude Agent SDK's entries carry one each) into one session of a fresh store, up to
`--keys`; each batch's time, which should not grow with the session (issue 32). The tables are
never analyzed, as in a new database whose autovacuum has not come round yet.

    python benchmarks/bench_keyed.py [--postgres URL] [--keys 20000] [--batch 500]
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from pathlib import Path

from scratch_schemas import scratch_schema

from memstore import SessionStore


def run(url: str, keys: int, batch: int) -> list[float]:
    """Each batch's seconds."""
    seconds = []
    with SessionStore(url) as store:
        for start in range(0, keys, batch):
            numbers = range(start, min(start + batch, keys))
            turns = [
                {"role": "user", "blocks": [{"kind": "text", "text": f"entry {n}"}]}
                for n in numbers
            ]
            began = time.perf_counter()
            store.append_keyed("s", turns, [str(uuid.uuid4()) for _ in numbers])
            seconds.append(time.perf_counter() - began)
    return seconds


def report(backend: str, seconds: list[float]) -> None:
    tenth = max(1, len(seconds) // 10)
    first, last = sum(seconds[:tenth]) / tenth, sum(seconds[-tenth:]) / tenth
    print(
        f"{backend}: first tenth {first * 1000:,.0f} ms a batch, "
        f"last tenth {last * 1000:,.0f} ms: {last / first:.2f}x"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", help="also on this server, in a fresh schema")
    parser.add_argument("--keys", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=500)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        report("SQLite", run(f"sqlite:///{Path(folder) / 'keyed.db'}", args.keys, args.batch))
    if args.postgres:
        with scratch_schema(args.postgres) as url:
            report("PostgreSQL", run(url, args.keys, args.batch))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
