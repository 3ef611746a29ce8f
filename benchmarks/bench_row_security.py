"""What PostgreSQL's row-level security (migration 0031) costs a tenant's store, as ratios in
one run.

Three stores of tenant `acme`, each in a fresh schema of its own, all connecting as one plain
login (not a superuser, no BYPASSRLS: the login the policies bind), the schemas holding a
second tenant's rows alike (`--others` turns):

- `0030`: the schema at revision 0030, before the policies (the floor);
- `0031`: at revision 0031, the store's own engine (the tenant set once per connection);
- `0031, shared engine`: at 0031, on an engine handed in (the tenant set in each transaction).

Each appends the same `--turns` turns one by one (one transaction each), the three taking turns
in 50 slices so that the machine's noise lands on all alike; then `load_path` of the whole
chain, best of `--repeat`, taking turns. Goal (issue 31): within 1.1x of the floor.

    python benchmarks/bench_row_security.py --postgres postgresql://127.0.0.1:5432/test
"""

from __future__ import annotations

import argparse
import time
import uuid
from collections.abc import Callable
from functools import partial

from bench_store import SLICES, timed, turn
from scratch_schemas import FreshSchemas
from sqlalchemy import make_url

from memstore import SessionStore
from memstore.store import create_store_engine


def plain_login(schemas: FreshSchemas, names: list[str]) -> str:
    """A login that owns the schemas `names` and is neither a superuser nor BYPASSRLS."""
    login = f"memstore_bench_{uuid.uuid4().hex[:12]}"
    database = make_url(schemas.url).database
    schemas.admin.execute(f'CREATE ROLE "{login}" LOGIN NOSUPERUSER NOBYPASSRLS')
    schemas.admin.execute(f'GRANT CREATE ON DATABASE "{database}" TO "{login}"')
    for name in names:
        schemas.admin.execute(f'ALTER SCHEMA "{name}" OWNER TO "{login}"')
    return login


def drop_login(schemas: FreshSchemas, login: str, names: list[str]) -> None:
    for name in names:
        schemas.admin.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
    schemas.admin.execute(f'DROP OWNED BY "{login}"')
    schemas.admin.execute(f'DROP ROLE "{login}"')


def open_stores(schemas: FreshSchemas, names: list[str], login: str) -> list[SessionStore]:
    urls = [make_url(schemas.store_url(name)).set(username=login) for name in names]
    plain = [url.render_as_string(hide_password=False) for url in urls]
    floor = SessionStore(plain[0], tenant="acme", auto_migrate=False)
    floor.upgrade_schema("0030")
    own = SessionStore(plain[1], tenant="acme")
    shared = SessionStore(create_store_engine(plain[2]), tenant="acme")
    return [floor, own, shared]


def fill_others(
    stores: list[SessionStore], url_of: Callable[[SessionStore], str], turns: int
) -> None:
    """Another tenant's session of `turns` turns in each schema (rows the policies leave out)."""
    for store in stores:
        with SessionStore(url_of(store), tenant="globex", auto_migrate=False) as other:
            other.append_many("other", [turn(i) for i in range(turns)])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--postgres", metavar="URL", required=True)
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--others", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    labels = ["0030 (no policies)", "0031, own engine", "0031, shared engine"]
    with FreshSchemas(args.postgres) as schemas:
        names = [schemas.new() for _ in labels]
        login = plain_login(schemas, names)
        try:
            stores = open_stores(schemas, names, login)
            fill_others(stores, lambda store: store.engine.url.render_as_string(False), args.others)
            turns = [turn(i) for i in range(args.turns)]
            spent = [0.0] * len(stores)
            per_slice = max(1, args.turns // SLICES)
            for start in range(0, args.turns, per_slice):
                for index, store in enumerate(stores):
                    began = time.perf_counter()
                    for item in turns[start : start + per_slice]:
                        store.append("s", item)
                    spent[index] += time.perf_counter() - began
            loads = [float("inf")] * len(stores)
            for _ in range(args.repeat):
                for index, store in enumerate(stores):
                    loads[index] = min(loads[index], timed(partial(store.load_path, "s")))
            for store in stores:
                assert len(store.load_path("s")) == args.turns
                store.close()
                if store is stores[2]:
                    store.engine.dispose()
        finally:
            drop_login(schemas, login, names)
            schemas.names.clear()
    print(f"{args.turns} appends and load_path of {args.turns} turns, as a plain login")
    for index, label in enumerate(labels):
        append_us = spent[index] / args.turns * 1e6
        print(
            f"{label:22} append {append_us:8.0f} us ({spent[index] / spent[0]:.3f}x)   "
            f"load_path {loads[index] * 1e3:7.1f} ms ({loads[index] / loads[0]:.3f}x)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
