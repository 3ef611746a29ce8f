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

    def new(self) -> str:
        """A new schema's name."""
        name = f"memstore_bench_{uuid.uuid4().hex[:12]}"
        self.admin.execute(f'CREATE SCHEMA "{name}"')
        self.names.append(name)
        return name

    def store_url(self, name: str) -> str:
        """The server's URL with the schema `name` as the search path (for memstore and peers)."""
        separator = "&" if "?" in self.url else "?"
        return f"{self.url}{separator}options=-csearch_path%3D{name}"

    def new_url(self) -> str:
        """A new schema's URL."""
        return self.store_url(self.new())

    def close(self) -> None:
        for name in self.names:
            self.admin.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
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
