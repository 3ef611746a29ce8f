"""Benchmark memstore's start-up against importing SQLAlchemy, the floor every store use pays.

Run ``python benchmarks/bench_startup.py [--runs N]``. Each row starts fresh interpreters, in
turn with the floor, and keeps the best of N runs:

- ``import`` rows: the import time a statement causes, as ``-X importtime`` reports it (the
  cumulative times of the imports it starts; without the interpreter's own start-up);
- ``process`` rows: the wall time of the whole process, interpreter start-up included, as a user
  waits for it (``memstore --help`` is ``python -m memstore --help``).

The exit status is 1 when ``import memstore`` takes more than 1.5 times ``import sqlalchemy`` or
``memstore --help`` more than 2 times ``python -c "import sqlalchemy"``.
"""

from __future__ import annotations

import argparse
import functools
import re
import subprocess
import sys
import time
from collections.abc import Callable

IMPORT_GOAL = 1.5
HELP_GOAL = 2.0


def import_microseconds(statement: str) -> float:
    """What `statement` costs in imports: -X importtime's cumulative times of top-level imports."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", statement],
        capture_output=True,
        text=True,
        check=True,
    )
    pattern = re.compile(r"^import time:\s+\d+ \|\s+(\d+) \| (?! )", re.M)
    return float(sum(int(found) for found in pattern.findall(done.stderr)))


def process_seconds(*args: str) -> float:
    """Wall time of one fresh interpreter running `args`."""
    started = time.perf_counter()
    subprocess.run([sys.executable, *args], capture_output=True, check=True)
    return time.perf_counter() - started


def best(runs: int, measure: dict[str, Callable[[], float]]) -> dict[str, float]:
    """The best of `runs` rounds of every measurement, each round taking them in turn."""
    results: dict[str, float] = {}
    for _ in range(runs):
        for name, take in measure.items():
            value = take()
            results[name] = min(results.get(name, value), value)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    runs = parser.parse_args().runs
    imports = ("import sqlalchemy", "import memstore", "from memstore import SessionStore")
    measure: dict[str, Callable[[], float]] = {
        statement: functools.partial(import_microseconds, statement) for statement in imports
    }
    measure["python -c 'import sqlalchemy'"] = lambda: process_seconds("-c", "import sqlalchemy")
    measure["memstore --help"] = lambda: process_seconds("-m", "memstore", "--help")
    measure["python -c 'import memstore'"] = lambda: process_seconds("-c", "import memstore")
    figures = best(runs, measure)
    floor_import = figures["import sqlalchemy"]
    floor_process = figures["python -c 'import sqlalchemy'"]
    print(f"best of {runs} runs, Python {sys.version.split()[0]}")
    for name, value in figures.items():
        if name.startswith(("import", "from")):
            print(
                f"{name:36} {value / 1000:8.1f} ms  {value / floor_import:5.2f}x import sqlalchemy"
            )
        else:
            print(
                f"{name:36} {value * 1000:8.1f} ms  {value / floor_process:5.2f}x the process floor"
            )
    import_ratio = figures["import memstore"] / floor_import
    help_ratio = figures["memstore --help"] / floor_process
    met = import_ratio <= IMPORT_GOAL and help_ratio <= HELP_GOAL
    print(
        f"goals: import memstore {import_ratio:.2f}x (at most {IMPORT_GOAL}x), "
        f"memstore --help {help_ratio:.2f}x (at most {HELP_GOAL}x): {'met' if met else 'MISSED'}"
    )
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
