"""A tenant's store against a store without a tenant (the default tenant), as ratios in one run:
issue 31's goal, a tenant-scoped durable `append` and `load_path` within 1.1x of unscoped ones.

For each backend (SQLite, and PostgreSQL with `--postgres`) and each way of getting an engine
(the store makes its own; one is handed in, `SessionStore(engine, tenant=...)`), two stores of
one database, one without a tenant and one of tenant `acme`, beside a third tenant's
`--others` turns: each appends the same `--turns` turns one by one (one transaction each), the
two taking turns in 50 slices, which of the two goes first alternating, so that the machine's
noise lands on both alike; then `load_path` of the whole chain, `--repeat` times, taking turns.
A ratio is the tenant's median over the unscoped one's median (of the slices' mean append
times, and of the loads). PostgreSQL connects as a plain login (not a superuser, no
BYPASSRLS), which the row-level security policies bind, as docs/tenants.md says to.

    python benchmarks/bench_tenants.py [--postgres postgresql://127.0.0.1:5432/test]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from functools import partial
from pathlib import Path

from bench_store import SLICES, timed, turn
from scratch_schemas import FreshSchemas

from memstore import SessionStore
from memstore.store import create_store_engine

TENANT = "acme"


@contextmanager
def sqlite_url() -> Iterator[str]:
    with tempfile.TemporaryDirectory() as root:
        yield f"sqlite:///{Path(root) / 'tenants.db'}"


@contextmanager
def postgres_url(server: str) -> Iterator[str]:
    """A fresh schema owned by a plain login, as that login's URL."""
    with FreshSchemas(server) as schemas:
        name = f"memstore_bench_tenants_{os.getpid()}"
        login = schemas.login(name)
        yield schemas.store_url(schemas.new(owner=name), login)


def open_pair(url: str, handed_in: bool, stack: ExitStack) -> list[SessionStore]:
    """The unscoped store and the tenant's, on engines of their own or handed in."""
    stores = []
    for tenant in ("", TENANT):  # "": a store opened without one
        where = create_store_engine(url) if handed_in else url
        if handed_in:
            stack.callback(where.dispose)  # type: ignore[union-attr]
        stores.append(stack.enter_context(SessionStore(where, tenant=tenant)))
    return stores


def measure(url: str, handed_in: bool, turns: int, others: int, repeat: int) -> list[float]:
    """Median append (per turn) and load_path times, unscoped then the tenant's, in seconds."""
    with ExitStack() as stack:
        with SessionStore(url, tenant="globex") as other:
            other.append_many("s", [turn(i) for i in range(others)])
        stores = open_pair(url, handed_in, stack)
        items = [turn(i) for i in range(turns)]
        slices: list[list[float]] = [[], []]
        per_slice = max(1, turns // SLICES)
        for number, start in enumerate(range(0, turns, per_slice)):
            order = (0, 1) if number % 2 else (1, 0)
            for index in order:
                began = time.perf_counter()
                for item in items[start : start + per_slice]:
                    stores[index].append("s", item)
                done = len(items[start : start + per_slice])
                slices[index].append((time.perf_counter() - began) / done)
        loads: list[list[float]] = [[], []]
        for number in range(repeat):
            for index in (0, 1) if number % 2 else (1, 0):
                loads[index].append(timed(partial(stores[index].load_path, "s")))
        for store in stores:
            assert len(store.load_path("s")) == turns
        return [statistics.median(times) for times in (*slices, *loads)]


def report(label: str, figures: list[float]) -> None:
    plain_append, tenant_append, plain_load, tenant_load = figures
    print(
        f"{label:28} append {plain_append * 1e6:7.0f} / {tenant_append * 1e6:7.0f} us "
        f"({tenant_append / plain_append:.3f}x)   load_path {plain_load * 1e3:7.1f} / "
        f"{tenant_load * 1e3:7.1f} ms ({tenant_load / plain_load:.3f}x)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--postgres", metavar="URL", help="PostgreSQL too, at URL")
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--others", type=int, default=2000, help="another tenant's turns")
    parser.add_argument("--repeat", type=int, default=21, help="load_path runs of each")
    args = parser.parse_args()
    backends: list[tuple[str, Callable[[], AbstractContextManager[str]]]] = [("SQLite", sqlite_url)]
    if args.postgres:
        backends.append(("PostgreSQL", partial(postgres_url, args.postgres)))
    print(f"load average {os.getloadavg()[0]:.1f}; unscoped / tenant {TENANT!r}, medians")
    for name, make in backends:
        for handed_in in (False, True):
            with make() as url:
                figures = measure(url, handed_in, args.turns, args.others, args.repeat)
            engine = "engine handed in" if handed_in else "own engine"
            report(f"{name}, {engine}", figures)
    print(f"load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
