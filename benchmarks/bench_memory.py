"""Peak memory of importing and exporting one big JSONL file (the goal: under 300 MB for 1 GB).

Writes a linear session of ordinary turns (about --megabytes), then imports it into a fresh
SQLite file and exports it again, each in a fresh process that reports its peak resident memory
(`VmHWM`, Linux) before and after. The export is checked to be the file, byte for byte.

    python benchmarks/bench_memory.py [--megabytes 1000] [--postgres URL]
"""

from __future__ import annotations

import argparse
import filecmp
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_transfer import write_session

GOAL_MB = 300

MEASURE = """
import sys
from memstore import SessionStore

def peak_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024

url, operation, source, target = sys.argv[1:]
store = SessionStore(url)
store.list_sessions()
before = peak_mb()
if operation == "import":
    store.delete_session("big")
    store.import_jsonl(source, session_id="big")
else:
    store.export_jsonl("big", target)
print(before, peak_mb())
"""


def run(url: str, operation: str, source: Path, target: Path) -> tuple[float, float, float]:
    """(peak MB before, peak MB after, seconds) of one operation in a fresh process."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, url, operation, str(source), str(target)],
        capture_output=True,
        text=True,
        check=True,
    )
    before, after = map(float, done.stdout.split())
    return before, after, time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=1000)
    parser.add_argument("--postgres", help="also measure against this PostgreSQL database")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        source, target = root / "big.jsonl", root / "export.jsonl"
        records = write_session(source, args.megabytes)
        size = source.stat().st_size / 1e6
        print(f"{size:.0f} MB, {records} records")
        urls = [("SQLite", f"sqlite:///{root / 'memstore.db'}")]
        if args.postgres:
            urls.append(("PostgreSQL", args.postgres))
        worst = 0.0
        for name, url in urls:
            for operation in ("import", "export"):
                before, after, seconds = run(url, operation, source, target)
                worst = max(worst, after)
                print(
                    f"{name:10} {operation}: peak {after:6.0f} MB (started at {before:.0f} MB), "
                    f"{seconds:6.1f} s, {size / seconds:5.1f} MB/s"
                )
            assert filecmp.cmp(source, target, shallow=False), "the export is not the file"
            target.unlink()
    print(f"goal: peak under {GOAL_MB} MB; {'met' if worst < GOAL_MB else 'MISSED'}")
    return 0 if worst < GOAL_MB else 1


if __name__ == "__main__":
    raise SystemExit(main())
