"""Schema migrations: Alembic, driven from Python, safe when several processes open at once.

The revisions live in the top-level `migrations/` folder of a source checkout and inside the
package (`memstore/_migrations`) in a built wheel.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy import Connection, Engine, func, select
from sqlalchemy.exc import DBAPIError

from memstore.errors import MigrationError
from memstore.store.engine import WRITE
from memstore.store.tables import stored_on

__all__ = [
    "alembic_config",
    "check_foreign_keys",
    "current_revision",
    "downgrade",
    "head_revision",
    "include_name",
    "include_object_on",
    "is_current",
    "migrate_in",
    "migrations_dir",
    "sqlite_foreign_keys_off",
    "upgrade",
]

# An arbitrary, fixed key: every memstore process migrating one PostgreSQL database takes it.
_ADVISORY_LOCK_KEY = 0x6D656D73746F7265 & 0x7FFFFFFFFFFFFFFF


# Objects the revisions create by hand, which the SQLAlchemy models do not describe: the FTS5
# table (and its shadow tables) and PostgreSQL's expression index for full-text search.
_UNMODELLED_PREFIXES = ("nodes_fts", "ix_nodes_search")


def include_name(name: str | None, type_: str, parent_names: object) -> bool:
    """Alembic's filter for autogenerate: leave the hand-made search objects out."""
    del type_, parent_names
    return name is None or not name.startswith(_UNMODELLED_PREFIXES)


def include_object_on(dialect: str) -> Callable[[Any, str | None, str, bool, Any], bool]:
    """Alembic's filter for autogenerate on `dialect`: leave out the model's columns that this
    database does not store (`tables.POSTGRESQL_ONLY`)."""

    def include_object(
        obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any
    ) -> bool:
        del name, reflected, compare_to
        return type_ != "column" or stored_on(obj, dialect)

    return include_object


def migrations_dir() -> Path:
    """Where the Alembic revisions are: inside the installed package, or in the checkout."""
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "_migrations", package.parent / "migrations"):
        if (candidate / "env.py").is_file():
            return candidate
    raise MigrationError(f"memstore's migrations are missing (looked in {package})")


def alembic_config(connection: Connection | None = None) -> Config:
    """An Alembic configuration for memstore's revisions, optionally bound to a connection."""
    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    """The newest revision this memstore knows."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:
        raise MigrationError("memstore's migrations have no head revision")
    return head


def current_revision(connection: Connection) -> str | None:
    """The revision the database is at, or None for a database memstore never touched."""
    return MigrationContext.configure(connection).get_current_revision()


def is_current(connection: Connection) -> bool:
    """Whether the database is at the newest revision already."""
    return current_revision(connection) == head_revision()


def migrate_in(connection: Connection, revision: str = "head", *, upgrading: bool = True) -> None:
    """Migrate inside `connection`'s transaction, holding a lock so that concurrent openers take
    turns (PostgreSQL: an advisory lock; SQLite: the BEGIN IMMEDIATE write lock it holds)."""
    if connection.dialect.name == "postgresql":
        connection.execute(select(func.pg_advisory_xact_lock(_ADVISORY_LOCK_KEY)))
    if upgrading and revision == "head" and is_current(connection):
        return  # another process finished the migration while we waited for the lock
    config = alembic_config(connection)
    if upgrading:
        command.upgrade(config, revision)
    else:
        command.downgrade(config, revision)


def _migrate(engine: Engine, revision: str, *, upgrading: bool) -> None:
    try:
        with (
            engine.connect().execution_options(**{WRITE: True}) as connection,
            sqlite_foreign_keys_off(connection),
            connection.begin(),
        ):
            migrate_in(connection, revision, upgrading=upgrading)
            check_foreign_keys(connection)
    except DBAPIError as exc:
        raise MigrationError(f"migrating the database to {revision!r} failed: {exc.orig}") from exc
    except CommandError as exc:  # an unknown or ambiguous revision, a step past either end
        raise MigrationError(
            f"cannot migrate the database to {revision!r}: {exc} (memstore's revisions are "
            f"{_known_revisions()}; 'head' is the newest, 'base' removes memstore's tables)"
        ) from exc


def _known_revisions() -> str:
    """memstore's revisions, oldest first, for an error message."""
    scripts = ScriptDirectory.from_config(alembic_config()).walk_revisions()
    return ", ".join(reversed([script.revision for script in scripts]))


@contextmanager
def sqlite_foreign_keys_off(connection: Connection) -> Iterator[None]:
    """SQLite: migrate with foreign keys off (set outside the transaction), as Alembic advises.

    A batch migration rebuilds a table by copying it and dropping the old one, and that DROP
    deletes every row first: with foreign keys on, ON DELETE CASCADE would walk each parent
    chain (a 3,000-turn session exceeds SQLite's trigger depth) and empty the child tables.
    `check_foreign_keys` checks the result before the transaction commits.
    """
    if connection.dialect.name != "sqlite":
        yield
        return
    driver = connection.connection.driver_connection
    assert driver is not None
    driver.execute("PRAGMA foreign_keys = OFF")
    try:
        yield
    finally:
        driver.execute("PRAGMA foreign_keys = ON")


def check_foreign_keys(connection: Connection) -> None:
    """SQLite: refuse (roll back) a migration that left a row pointing at nothing."""
    if connection.dialect.name != "sqlite":
        return
    broken = connection.exec_driver_sql("PRAGMA foreign_key_check").first()
    if broken is not None:
        raise MigrationError(f"the migration left a {broken[0]} row whose {broken[2]} is missing")


def upgrade(engine: Engine, revision: str = "head", *, only_if_needed: bool = False) -> None:
    """Bring the schema up to `revision`; with `only_if_needed`, skip the lock when current."""
    if only_if_needed and revision == "head":
        with engine.connect() as connection:
            if is_current(connection):
                return
    _migrate(engine, revision, upgrading=True)


def downgrade(engine: Engine, revision: str) -> None:
    """Take the schema down to `revision` (`base` removes every memstore table)."""
    _migrate(engine, revision, upgrading=False)
