"""The longest wait of an appender to another session while a big JSONL file imports (SQLite).

One process imports a file of `--megabytes` into a new session; another process appends one turn
at a time to another session, as fast as it can, from the moment the import starts until it
ends, and records how long each append took. Prints the import's time, how many appends
completed while it ran, and the appender's longest and 99th-percentile append.

    python benchmarks/bench_import_wait.py [--megabytes 150] [--alone]

`--alone` times the import without the appender (to compare imports, say against main's).
"""

from __future__ import annotations

import argparse
import multiprocessing
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_transfer import write_session

from memstore import SessionStore


def append_until(url: str, started: Any, stop: Any, results: Any) -> None:
    """Append to session `other` until `stop` is set; send every append's (start, seconds)."""
    store = SessionStore(url)
    store.append("other", {"role": "user", "blocks": [{"kind": "text", "text": "warm up"}]})
    started.set()
    timings: list[tuple[float, float]] = []
    n = 0
    while not stop.is_set():
        turn = {"role": "user", "blocks": [{"kind": "text", "text": f"append {n}"}]}
        begun = time.monotonic()
        store.append("other", turn)
        timings.append((begun, time.monotonic() - begun))
        n += 1
    store.close()
    results.put(timings)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=150)
    parser.add_argument("--alone", action="store_true", help="time the import alone, then exit")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        source = root / "big.jsonl"
        write_session(source, options.megabytes)
        url = f"sqlite:///{root / 'db.sqlite'}"
        SessionStore(url).close()
        if options.alone:
            begun = time.monotonic()
            with SessionStore(url) as store:  # closing it checkpoints what is left in the WAL
                store.import_jsonl(source, session_id="big")
            print(f"import of {options.megabytes:g} MB alone: {time.monotonic() - begun:.1f} s")
            return 0
        context = multiprocessing.get_context("spawn")
        started, stop, results = context.Event(), context.Event(), context.Queue()
        appender = context.Process(target=append_until, args=(url, started, stop, results))
        appender.start()
        started.wait()
        with SessionStore(url) as store:
            begun = time.monotonic()
            report = store.import_jsonl(source, session_id="big")
            ended = time.monotonic()
        stop.set()
        timings: list[tuple[float, float]] = results.get()
        appender.join()
    during = sorted(seconds for start, seconds in timings if start < ended)
    finished_during = sum(1 for start, seconds in timings if start + seconds < ended)
    print(f"import of {options.megabytes:g} MB ({report.records} records): {ended - begun:.1f} s")
    print(f"appends begun during it: {len(during)}, finished before it ended: {finished_during}")
    if during:
        p99 = during[min(len(during) - 1, int(len(during) * 0.99))]
        print(f"appender's longest wait: {during[-1]:.3f} s, 99th percentile: {p99:.3f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
