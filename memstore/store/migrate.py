"""Schema migrations: Alembic, driven from Python, safe when several processes open at once.

The revisions live in the top-level `migrations/` folder of a source checkout and inside the
package (`memstore/_migrations`) in a built wheel.

memstore records its revision in a version table of its own, `memstore_alembic_version` (in
memstore's PostgreSQL schema, when it has one), so that an application's own Alembic history in
the same database (`alembic_version`) and memstore's never meet. A database an earlier memstore
migrated keeps its revision in `alembic_version`: readers take it from there, and the first
upgrade or downgrade moves it to memstore's table (only a revision of memstore's, in a database
holding memstore's tables, is taken as memstore's).

Opening a store that is up to date reads the version table with plain SQL and compares it with
`HEAD_REVISION`: Alembic (and the revisions' scripts) load only when a database is migrated or
holds a revision other than the head.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    Column,
    Connection,
    Engine,
    MetaData,
    String,
    Table,
    func,
    inspect,
    select,
    text,
)
from sqlalchemy.exc import DBAPIError
from sqlalchemy.schema import CreateSchema

from memstore._package import DISTRIBUTION
from memstore.errors import DatabaseTooNewError, MigrationError, StoreNotReadyError
from memstore.store.engine import SCHEMA, WRITE, shown_url, upgrade_command
from memstore.store.names import LEGACY_VERSION_TABLE, TABLES, VERSION_TABLE, is_memstore_name
from memstore.store.policy import backend_of
from memstore.store.tables import stored_on

if TYPE_CHECKING:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

__all__ = [
    "HEAD_REVISION",
    "SchemaState",
    "adopt_legacy_version",
    "alembic_config",
    "check_foreign_keys",
    "check_ready",
    "current_revision",
    "downgrade",
    "drop_empty_version_table",
    "head_revision",
    "include_name",
    "include_object_on",
    "is_current",
    "is_known_revision",
    "migrate_in",
    "migrations_dir",
    "newer_database_message",
    "require_ready",
    "schema_of",
    "schema_state",
    "sqlite_foreign_keys_off",
    "upgrade",
    "version_table_options",
]

HEAD_REVISION = "0040"
"""The newest revision in `migrations/versions` (a test checks that Alembic agrees)."""

# An arbitrary, fixed key: every memstore process migrating one PostgreSQL database takes it.
_ADVISORY_LOCK_KEY = 0x6D656D73746F7265 & 0x7FFFFFFFFFFFFFFF


# Objects the revisions create by hand, which the SQLAlchemy models do not describe: the FTS5
# table (and its shadow tables) and PostgreSQL's expression index for full-text search.
_UNMODELLED_PREFIXES = ("nodes_fts", "ix_nodes_search")


def include_name(name: str | None, type_: str, parent_names: object) -> bool:
    """Alembic's filter for memstore's autogenerate: only memstore's own tables (an application's
    tables in the same database are not memstore's to drop), without the hand-made search
    objects."""
    del parent_names
    if name is None:
        return True
    if type_ == "table" and name not in TABLES:
        return False
    return not name.startswith(_UNMODELLED_PREFIXES)


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
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    config.attributes["connection"] = connection
    return config


@functools.cache
def _script() -> ScriptDirectory:
    """memstore's revisions, read once per process."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config())


def head_revision() -> str:
    """The newest revision this memstore knows."""
    return HEAD_REVISION


@functools.cache
def _known_revisions() -> frozenset[str]:
    return frozenset(revision.revision for revision in _script().walk_revisions())


def is_known_revision(revision: str) -> bool:
    """Whether `revision` is one of this memstore's (else a newer memstore wrote it)."""
    return revision == HEAD_REVISION or revision in _known_revisions()


def schema_of(connection: Connection) -> str | None:
    """The PostgreSQL schema memstore lives in on this connection's engine (None: the current)."""
    schema: str | None = connection.get_execution_options().get(SCHEMA)
    return schema


def version_table_options(connection: Connection) -> dict[str, str | None]:
    """Alembic's options that put memstore's revision in its own table (and schema)."""
    return {"version_table": VERSION_TABLE, "version_table_schema": schema_of(connection)}


@dataclass(frozen=True)
class SchemaState:
    """Where a database's memstore schema is: its revision (None: no memstore tables), and
    whether an earlier memstore recorded it in `alembic_version` (moved on the next migration)."""

    revision: str | None
    legacy: bool = False


def _legacy_revision(connection: Connection) -> str | None:
    """memstore's revision as an earlier memstore recorded it in `alembic_version`, if this is
    such a database: the table holds exactly one revision of memstore's and memstore's tables
    are there. An application's revision there is not memstore's and is left alone."""
    schema = schema_of(connection)
    inspector = inspect(connection)
    if not inspector.has_table(LEGACY_VERSION_TABLE, schema=schema):
        return None
    if not all(inspector.has_table(name, schema=schema) for name in ("nodes", "records")):
        return None
    ours = [
        head for head in _versions_in(connection, LEGACY_VERSION_TABLE) if is_known_revision(head)
    ]
    return ours[0] if len(ours) == 1 else None


def _versions_in(connection: Connection, name: str) -> list[str]:
    """The revisions an Alembic version table holds ([] when there is no such table)."""
    table = _version_table(connection, name)
    if not inspect(connection).has_table(name, schema=table.schema):
        return []
    return list(connection.execute(select(table.c.version_num)).scalars())


def schema_state(connection: Connection) -> SchemaState:
    """The revision memstore's schema is at in this database (see SchemaState)."""
    revisions = _versions_in(connection, VERSION_TABLE)
    if len(revisions) > 1:  # memstore's history is one line: Alembic never writes two
        raise MigrationError(
            f"{_where(connection)}: memstore's version table holds several revisions "
            f"({', '.join(revisions)}); it should hold one"
        )
    if revisions:
        return SchemaState(revisions[0])
    legacy = _legacy_revision(connection)
    return SchemaState(legacy, legacy is not None)


def current_revision(connection: Connection) -> str | None:
    """The revision the database is at, or None for a database without memstore's tables."""
    return schema_state(connection).revision


def is_current(connection: Connection) -> bool:
    """Whether the database is at the newest revision already, in memstore's version table."""
    state = schema_state(connection)
    return state.revision == head_revision() and not state.legacy


def newer_database_message(where: str, revision: str) -> str:
    """One line: the database is newer than this memstore, and what to install."""
    from memstore import __version__

    return (
        f"{where} is newer than this memstore: it is at memstore revision {revision!r}, which "
        f"{DISTRIBUTION} {__version__} (newest revision {head_revision()!r}) does not know; "
        f"upgrade memstore to open it: pip install --upgrade {DISTRIBUTION}"
    )


def _where(connection: Connection) -> str:
    """The database (and schema) in messages, as the user named them."""
    schema = schema_of(connection)
    url = shown_url(connection.engine.url)
    return f"{url} (schema {schema!r})" if schema is not None else url


def _refuse_newer(connection: Connection, state: SchemaState) -> None:
    if state.revision is not None and not is_known_revision(state.revision):
        raise DatabaseTooNewError(newer_database_message(_where(connection), state.revision))


def require_ready(connection: Connection) -> None:
    """Raise unless memstore's schema is at this memstore's revision, saying what to run: the
    check of a store opened for reading, which never creates or migrates.

    Raises:
        StoreNotReadyError: no memstore tables, or an older revision.
        DatabaseTooNewError: a revision a newer memstore made.
    """
    state = schema_state(connection)
    head = head_revision()
    if state.revision == head:
        return
    _refuse_newer(connection, state)
    command_ = upgrade_command(connection.engine.url, schema_of(connection))
    if state.revision is None:
        raise StoreNotReadyError(
            f"{_where(connection)} holds no memstore tables: create them with {command_} (or by "
            "importing sessions into it); reading leaves the database as it is"
        )
    raise StoreNotReadyError(
        f"{_where(connection)} is at memstore revision {state.revision!r}, older than this "
        f"memstore's {head!r}: bring it up to date with {command_}"
    )


def check_ready(engine: Engine) -> None:
    """`require_ready` on a connection of its own (see there)."""
    with engine.connect() as connection:
        require_ready(connection)


def _foreign_objects(connection: Connection) -> list[str]:
    """Tables and views under memstore's names, where memstore (which has no revision here, so
    did not make them) would create its own: 'table 'sessions'', ..."""
    schema = schema_of(connection)
    inspector = inspect(connection)
    if schema is not None and schema not in inspector.get_schema_names():
        return []  # memstore's schema is still to be made: nothing can be in the way
    tables = inspector.get_table_names(schema=schema)
    views = inspector.get_view_names(schema=schema)
    found = [("table", name) for name in tables] + [("view", name) for name in views]
    return [
        f"{kind} {name!r}"
        for kind, name in found
        if is_memstore_name(name) and name != VERSION_TABLE
    ]


def _refuse_foreign_objects(connection: Connection) -> None:
    """memstore creates its tables only where no table or view of someone else's has their
    names (SQLite has no schemas to keep them apart; PostgreSQL may, given one)."""
    found = _foreign_objects(connection)
    if not found:
        return
    advice = (
        "give memstore a schema of its own (--schema, MEMSTORE_SCHEMA, schema=...)"
        if backend_of(connection.dialect.name).schemas
        else "use another database file for memstore"
    )
    raise MigrationError(
        f"{_where(connection)} already holds {', '.join(found)}, which memstore did not create: "
        f"memstore will not create its tables beside them; {advice}"
    )


def _version_table(connection: Connection, name: str) -> Table:
    """An Alembic version table, as Alembic defines it, in memstore's schema."""
    column = Column("version_num", String(32), nullable=False)
    return Table(name, MetaData(), column, schema=schema_of(connection))


def _drop_if_empty(connection: Connection, name: str) -> None:
    table = _version_table(connection, name)
    if not inspect(connection).has_table(name, schema=table.schema):
        return
    if connection.execute(select(func.count()).select_from(table)).scalar_one() == 0:
        table.drop(connection)


def adopt_legacy_version(connection: Connection) -> None:
    """Move the revision an earlier memstore kept in `alembic_version` to memstore's own version
    table (dropping `alembic_version` once empty); nothing when there is none of memstore's."""
    state = schema_state(connection)
    if not state.legacy or state.revision is None:
        return
    from alembic.runtime.migration import MigrationContext

    context = MigrationContext.configure(connection, opts=version_table_options(connection))
    context.stamp(_script(), state.revision)
    legacy = _version_table(connection, LEGACY_VERSION_TABLE)
    connection.execute(legacy.delete().where(legacy.c.version_num == state.revision))
    _drop_if_empty(connection, LEGACY_VERSION_TABLE)


def drop_empty_version_table(connection: Connection) -> None:
    """After a downgrade to base, remove memstore's (then empty) version table too, so that
    nothing of memstore's is left behind."""
    _drop_if_empty(connection, VERSION_TABLE)


def _create_schema(connection: Connection) -> None:
    """Create memstore's schema if missing (IF NOT EXISTS needs CREATE on the database too)."""
    schema = schema_of(connection)  # set on PostgreSQL only (`engine.check_schema`)
    if schema is not None and not inspect(connection).has_schema(schema):
        connection.execute(CreateSchema(schema))


def migrate_in(connection: Connection, revision: str = "head", *, upgrading: bool = True) -> None:
    """Migrate inside `connection`'s transaction, holding a lock so that concurrent openers take
    turns (PostgreSQL: an advisory lock; SQLite: the BEGIN IMMEDIATE write lock it holds).

    Raises:
        DatabaseTooNewError: a newer memstore migrated the database; nothing changed.
        MigrationError: memstore's tables would land beside another's of the same names.
    """
    if backend_of(connection.dialect.name).advisory_locks:
        connection.execute(text("SET LOCAL lock_timeout = 0"))  # a migration waits its turn
        connection.execute(select(func.pg_advisory_xact_lock(_ADVISORY_LOCK_KEY)))
    state = schema_state(connection)
    _refuse_newer(connection, state)
    if upgrading and revision == "head" and state.revision == head_revision() and not state.legacy:
        return  # another process finished the migration while we waited for the lock
    if upgrading and state.revision is None:
        _refuse_foreign_objects(connection)
        _create_schema(connection)
    from alembic import command

    config = alembic_config(connection)
    if upgrading:
        command.upgrade(config, revision)
    else:
        command.downgrade(config, revision)


def _migrate(engine: Engine, revision: str, *, upgrading: bool) -> None:
    from alembic.util import CommandError

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
            f"{_revision_list()}; 'head' is the newest, 'base' removes memstore's tables)"
        ) from exc


def _revision_list() -> str:
    """memstore's revisions, oldest first, for an error message."""
    return ", ".join(reversed([script.revision for script in _script().walk_revisions()]))


@contextmanager
def sqlite_foreign_keys_off(connection: Connection) -> Iterator[None]:
    """SQLite: migrate with foreign keys off (set outside the transaction), as Alembic advises.

    A batch migration's DROP deletes every row first: with foreign keys on, ON DELETE CASCADE
    would walk each parent chain (a 3,000-turn session exceeds SQLite's trigger depth) and empty
    the child tables. `check_foreign_keys` checks the result before the transaction commits.
    """
    if not backend_of(connection.dialect.name).migrates_with_foreign_keys_off:
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
    if not backend_of(connection.dialect.name).migrates_with_foreign_keys_off:
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
    """Take the schema down to `revision` (`base` removes every memstore table and its version
    table)."""
    _migrate(engine, revision, upgrading=False)
