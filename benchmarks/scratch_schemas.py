"""Scratch PostgreSQL schemas for the benchmarks: each run writes into schemas of its own on the
server it is given, dropped with everything they hold at the end, so a run neither reads nor
leaves rows in the database's other schemas."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType


class FreshSchemas:
    """Fresh, empty schemas on one PostgreSQL server, dropped at the end."""

    def __init__(self, url: str) -> None:
        import psycopg

        self.url = url
        self.admin = psycopg.connect(url.replace("+psycopg", "", 1), autocommit=True)
        self.names: list[str] = []
        self.roles: list[str] = []

    def new(self, owner: str | None = None) -> str:
        """A new schema's name; owned by the role `owner` when given (else by the URL's login)."""
        name = f"memstore_bench_{uuid.uuid4().hex[:12]}"
        authorization = f' AUTHORIZATION "{owner}"' if owner else ""
        self.admin.execute(f'CREATE SCHEMA "{name}"{authorization}')
        self.names.append(name)
        return name

    def login(self, name: str) -> str:
        """A login `name` that is neither a superuser nor has BYPASSRLS (the application's login
        of docs/tenants.md, which the row-level security policies bind), made if missing and
        dropped at the end if made here; the server's URL as that login."""
        from sqlalchemy import make_url

        made = self.admin.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,)).fetchone()
        if made is None:
            self.admin.execute(f'CREATE ROLE "{name}" LOGIN NOSUPERUSER NOBYPASSRLS')
            self.roles.append(name)
            database = self.admin.execute("SELECT current_database()").fetchone()
            assert database is not None
            self.admin.execute(f'GRANT CREATE ON DATABASE "{database[0]}" TO "{name}"')
        url = make_url(self.url).set(username=name, password=None)
        return url.render_as_string(hide_password=False)

    def store_url(self, name: str, server: str | None = None) -> str:
        """The server's URL (or `server`, another login's) with the schema `name` as the search
        path (for memstore and peers)."""
        server = server or self.url
        separator = "&" if "?" in server else "?"
        return f"{server}{separator}options=-csearch_path%3D{name}"

    def new_url(self) -> str:
        """A new schema's URL."""
        return self.store_url(self.new())

    def own_role(self, name: str) -> None:
        """Drop the role `name` at the end if it does not exist yet (whoever makes it)."""
        made = self.admin.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,)).fetchone()
        if made is None:
            self.roles.append(name)

    def close(self) -> None:
        for name in self.names:
            self.admin.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
        for role in self.roles:
            self.admin.execute(f'DROP OWNED BY "{role}"')
            self.admin.execute(f'DROP ROLE "{role}"')
        self.admin.close()

    def __enter__(self) -> FreshSchemas:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()


@contextmanager
def scratch_schema(url: str) -> Iterator[str]:
    """The URL of one new schema on the server at `url`, dropped on the way out."""
    with FreshSchemas(url) as schemas:
        yield schemas.new_url()
