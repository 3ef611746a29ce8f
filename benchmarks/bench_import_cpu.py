"""CPU of a PostgreSQL import, on both sides of the connection, by import batch size.

Imports the file `bench_transfer.py` writes into a scratch schema, in batches of
`import_batch.BATCH_ROWS` records times 1 and times PostgreSQL's `import_batch_scale`, the two
taking turns (into emptied tables), and prints the medians (and ranges) of the wall time, the
client's CPU (`time.process_time`) and the server backend's (`/proc/PID/stat`: the server must
run on this machine). CPU times hold steadier than wall times on a loaded machine.

    python benchmarks/bench_import_cpu.py --postgres URL [--megabytes 10] [--rounds 8]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import psycopg
from bench_transfer import write_session
from scratch_schemas import scratch_schema

from memstore import SessionStore
from memstore.store.policy import POSTGRESQL

NAME = "memstore_bench_import_cpu"  # the application name that finds the import's backend
TICK = os.sysconf("SC_CLK_TCK")


def backend_cpu(admin: psycopg.Connection) -> float:
    """The CPU seconds of the import's server backends so far."""
    total = 0.0
    query = "SELECT pid FROM pg_stat_activity WHERE application_name = %s"
    for (pid,) in admin.execute(query, (NAME,)).fetchall():
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / TICK
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", required=True, help="a PostgreSQL server's URL")
    parser.add_argument("--megabytes", type=float, default=10)
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()
    scales = (1, POSTGRESQL.import_batch_scale)
    figures: dict[int, dict[str, list[float]]] = {
        scale: {"wall": [], "client": [], "server": []} for scale in scales
    }
    with tempfile.TemporaryDirectory() as folder, scratch_schema(args.postgres) as url:
        source = Path(folder) / "bench.jsonl"
        records = write_session(source, args.megabytes)
        admin = psycopg.connect(args.postgres.replace("+psycopg", "", 1), autocommit=True)
        with SessionStore(f"{url}&application_name={NAME}") as store:
            for round_ in range(args.rounds):
                for scale in scales if round_ % 2 == 0 else scales[::-1]:
                    object.__setattr__(POSTGRESQL, "import_batch_scale", scale)
                    with psycopg.connect(url, autocommit=True) as connection:
                        connection.execute("TRUNCATE sessions CASCADE")
                    server = backend_cpu(admin)
                    wall, client = time.perf_counter(), time.process_time()
                    store.import_jsonl(source, session_id="bench")
                    figures[scale]["wall"].append(time.perf_counter() - wall)
                    figures[scale]["client"].append(time.process_time() - client)
                    figures[scale]["server"].append(backend_cpu(admin) - server)
        object.__setattr__(POSTGRESQL, "import_batch_scale", scales[1])
        admin.close()
    print(f"{args.megabytes:g} MB, {records} records; medians of {args.rounds} (range), seconds")
    for scale, measured in figures.items():
        cells = (
            f"{name} {statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"
            for name, values in measured.items()
        )
        print(f"batches of {scale}x BATCH_ROWS: " + "  ".join(cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
