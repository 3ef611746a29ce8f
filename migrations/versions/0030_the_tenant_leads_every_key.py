"""The tenant leads every key: each primary key (but the row numbers `nodes.pk`, `records.pk`
and `erasures.id`), unique constraint, foreign key and index of memstore's tables starts with
`tenant` (migration 0028), so that two tenants may hold a session of the same id, and nodes of
the same content address, and a tenant's lookups read its own part of each index. Every view
gives each row's tenant and joins rows of one tenant only; `memstore_append` looks rows up by
the tenant it is given. Nothing else changes: every row keeps its values.

SQLite cannot change a table's keys in place: each table is made again, with the keys of its
stored definition given the tenant, its rows copied (row numbers included: the full-text
indexes name nodes by `pk`), and its indexes and triggers made again (the views are dropped
first and made again last). PostgreSQL changes the constraints and indexes in place.

The views are made from the definitions the revisions that made them wrote (0002, 0011, 0016,
0024; 0018 split each into `<view>_all` and `<view>`, which leaves out sessions being imported).
The downgrade puts the keys, views and function back; it refuses while another tenant's rows
exist (their keys would collide).

Revision ID: 0030
Revises: 0029
Create Date: 2026-12-06
"""

import re
from collections.abc import Callable, Sequence

import sqlalchemy as sa
from alembic import op

from memstore.errors import MigrationError
from memstore.store.revision_scripts import revision_module

revision: str = "0030"
down_revision: str | None = "0029"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Parents first (revision 0028's order): a table's foreign keys name tables made before it.
TABLES: tuple[str, ...] = revision_module("0028").TABLES
ROW_NUMBERED = ("nodes", "records", "erasures")  # their primary keys stay the row number
UNKEYED_INDEXES = ("ix_sessions_importing", "ix_sessions_expires_at")  # sets across tenants
FILTERED_VIEWS = ("blocks", "turns", "tool_calls", "session_stats", "session_sources")
VISIBLE = (
    "(tenant, session_id) NOT IN (SELECT tenant, id FROM sessions WHERE importing IS NOT NULL)"
)
OLD_VISIBLE = "session_id NOT IN (SELECT id FROM sessions WHERE importing IS NOT NULL)"


def _keyed(table: str, definition: str) -> str:
    """A table's or constraint's definition with the tenant first in its keys and their names."""
    if table not in ROW_NUMBERED:
        definition = re.sub(r"PRIMARY KEY \(", "PRIMARY KEY (tenant, ", definition)
    definition = re.sub(r"UNIQUE \(", "UNIQUE (tenant, ", definition)
    definition = re.sub(r"FOREIGN KEY ?\(", lambda m: f"{m.group(0)}tenant, ", definition)
    definition = re.sub(r"REFERENCES (\w+) ?\(", lambda m: f"{m.group(0)}tenant, ", definition)
    return re.sub(r"\b(fk|uq)_(\w+?)_(session_id|node_id)", r"\1_\2_tenant_\3", definition)


def _unkeyed(table: str, definition: str) -> str:
    """`_keyed` undone."""
    definition = re.sub(r"\b(fk|uq)_(\w+?)_tenant_", r"\1_\2_", definition)
    return definition.replace("(tenant, ", "(")


def _keyed_index(definition: str) -> str:
    """An index's CREATE INDEX with the tenant as its first column and in its name."""
    tables = "|".join(TABLES)
    definition = re.sub(rf"INDEX ix_({tables})_", r"INDEX ix_\1_tenant_", definition, count=1)
    return re.sub(r" ON (\S+)( USING \w+)? \(", lambda m: f"{m.group(0)}tenant, ", definition)


def _unkeyed_index(definition: str) -> str:
    """`_keyed_index` undone."""
    return definition.replace("_tenant_", "_", 1).replace("(tenant, ", "(", 1)


def _views(dialect: str, *, tenant: bool) -> list[str]:
    """The CREATE VIEW statements of every view, in the order they are made: as the revisions
    that made them wrote them, given the tenant (`tenant`) or not."""
    base = revision_module("0002")
    sqlite_views = revision_module("0016")
    usage = revision_module("0024")
    if dialect == "sqlite":
        views = [sqlite_views.NODE_SEARCH, sqlite_views.BLOCKS, sqlite_views.TURNS]
        views.append(sqlite_views.TOOL_CALLS)
    else:
        aggregate = base.TEXT_AGGREGATE["postgresql"]
        views = [sqlite_views.POSTGRES_NODE_SEARCH, base.BLOCKS]
        views += [base.TURNS.format(aggregate=aggregate), base.TOOL_CALLS]
    views.append(base.SESSION_STATS)
    views.append(revision_module("0011")._session_sources(dialect))
    views.append(usage.USAGE.format(day=usage.DAY[dialect]))
    made = []
    for view in views:
        for name in FILTERED_VIEWS:
            view = re.sub(rf"CREATE VIEW {name} AS", f"CREATE VIEW {name}_all AS", view)
        made.append(_tenant_view(view) if tenant else view)
    visible = VISIBLE if tenant else OLD_VISIBLE
    made += [
        f"CREATE VIEW {name} AS SELECT * FROM {name}_all WHERE {visible}" for name in FILTERED_VIEWS
    ]
    return made


def _tenant_first(match: re.Match[str]) -> str:
    """A view's SELECT with the tenant of its first column's table before it."""
    table = match.group(2) or ""
    return f"{match.group(1)}{table}tenant, {table}"


def _tenant_view(view: str) -> str:
    """A view's statement that gives each row's tenant first and joins one tenant's rows."""
    view = re.sub(
        r"(\w+)\.session_id = (\w+)\.(session_id|id)\b",
        r"\1.tenant = \2.tenant AND \1.session_id = \2.\3",
        view,
    )
    view = re.sub(r"(AS\s+SELECT\s+)(\w+\.)?", _tenant_first, view, count=1)
    # A tool call's node, and its result's, are joined on a tenant PostgreSQL cannot equate
    # with the other blocks' (`coalesce`): where a query filters on the result, the planner
    # could otherwise join results to call nodes by (tenant, session) alone, before it knows
    # the call, and read a session's nodes per result (minutes, on tables never analyzed).
    for node, block in (("cn", "c"), ("rn", "r")):
        view = view.replace(
            f"{node}.tenant = {block}.tenant", f"{node}.tenant = coalesce({block}.tenant, '')"
        )
    return view.replace(
        f"u.{OLD_VISIBLE}", VISIBLE.replace("tenant, session_id", "u.tenant, u.session_id", 1)
    )


VIEWS_DROPPED = (
    *FILTERED_VIEWS,
    *(f"{name}_all" for name in FILTERED_VIEWS),
    "usage",
    "node_search",
)


def _drop_views() -> None:
    for view in VIEWS_DROPPED:
        op.execute(f"DROP VIEW {view}")


def _make_views(*, tenant: bool) -> None:
    for statement in _views(op.get_bind().dialect.name, tenant=tenant):
        op.execute(statement)


def _sqlite_rebuild(table_sql: Callable[[str, str], str], index_sql: Callable[[str], str]) -> None:
    """Make each table again from its stored definition through `table_sql`, its rows copied,
    its indexes made again through `index_sql` (those of `UNKEYED_INDEXES` as they were), then
    the triggers on `nodes` as they were."""
    bind = op.get_bind()
    if bind.exec_driver_sql("PRAGMA foreign_keys").scalar():  # DROP TABLE would cascade
        raise MigrationError(
            "revision 0030 makes SQLite's tables again: it must run with foreign keys off "
            "(memstore's own migrations do; run `memstore db upgrade`)"
        )
    stored = "SELECT name, sql FROM sqlite_master WHERE type = :type AND tbl_name = :table"
    triggers = bind.execute(sa.text(stored), {"type": "trigger", "table": "nodes"}).all()
    for table in TABLES:
        ((_, definition),) = bind.execute(sa.text(stored), {"type": "table", "table": table}).all()
        indexes = bind.execute(sa.text(stored), {"type": "index", "table": table}).all()
        columns = ", ".join(
            f'"{row[1]}"' for row in bind.execute(sa.text(f"PRAGMA table_info({table})"))
        )
        made = re.sub(
            rf'CREATE TABLE "?{table}"? \(',
            f"CREATE TABLE new_{table} (",
            table_sql(table, definition),
        )
        op.execute(made)
        op.execute(f"INSERT INTO new_{table} ({columns}) SELECT {columns} FROM {table}")
        op.execute(f"DROP TABLE {table}")
        op.execute(f"ALTER TABLE new_{table} RENAME TO {table}")
        for name, sql in indexes:
            if sql is not None:  # an automatic index of a key has none: the table made it
                op.execute(sql if name in UNKEYED_INDEXES else index_sql(sql))
    for _, sql in triggers:
        op.execute(sql)


def _postgres_rekey(
    constraint_sql: Callable[[str, str], str], index_sql: Callable[[str], str]
) -> None:
    """Change each table's keys in place: its foreign keys dropped (all of them first), its
    primary key and unique constraints made again through `constraint_sql`, then its foreign
    keys, and its indexes through `index_sql`."""
    bind = op.get_bind()
    constraints = bind.execute(
        sa.text(
            "SELECT c.conrelid::regclass::text, c.conname, c.contype, pg_get_constraintdef(c.oid)"
            " FROM pg_constraint AS c JOIN pg_class AS t ON t.oid = c.conrelid"
            " WHERE t.relnamespace = current_schema()::regnamespace"
            " AND c.contype IN ('p', 'u', 'f')"
            " AND t.relname = ANY(:tables) ORDER BY c.contype"
        ),
        {"tables": list(TABLES)},
    ).all()
    indexes = bind.execute(
        sa.text(
            "SELECT i.indexname, i.indexdef FROM pg_indexes AS i"
            " WHERE i.schemaname = current_schema() AND i.tablename = ANY(:tables)"
            " AND i.indexname LIKE 'ix\\_%' AND i.indexname NOT LIKE 'ix\\_nodes\\_search%'"
        ),
        {"tables": list(TABLES)},
    ).all()
    changed = [
        row for row in constraints if row[2] != "p" or row[0].split(".")[-1] not in ROW_NUMBERED
    ]
    for table, name, _, _ in changed:  # foreign keys first ('f' < 'p' < 'u')
        op.execute(f"ALTER TABLE {table} DROP CONSTRAINT {name}")
    for table, name, _, definition in reversed(changed):  # keys before the foreign keys
        plain = table.split(".")[-1]
        new_name = constraint_sql(plain, name)
        op.execute(
            f"ALTER TABLE {table} ADD CONSTRAINT {new_name} {constraint_sql(plain, definition)}"
        )
    for name, definition in indexes:
        if name not in UNKEYED_INDEXES:
            op.execute(f"DROP INDEX {name}")
            op.execute(index_sql(definition))


FUNCTION_LOOKUPS = (
    ("ON CONFLICT (id)", "ON CONFLICT (tenant, id)"),
    (
        "SELECT 1 FROM nodes AS n WHERE n.session_id = p_session AND n.id = v_parent",
        "SELECT 1 FROM nodes AS n\n        WHERE n.tenant = p_tenant AND n.session_id = p_session"
        " AND n.id = v_parent",
    ),
    (
        "FROM nodes AS n WHERE n.session_id = p_session AND n.id = ids[i];",
        "FROM nodes AS n\n        WHERE n.tenant = p_tenant AND n.session_id = p_session"
        " AND n.id = ids[i];",
    ),
    (
        "UPDATE sessions SET head = ids[v_count], updated_at = p_now WHERE id = p_session;",
        "UPDATE sessions SET head = ids[v_count], updated_at = p_now\n"
        "    WHERE tenant = p_tenant AND id = p_session;",
    ),
)


def tenant_function() -> str:
    """`memstore_append` (migration 0028) with every lookup by the tenant it is given."""
    function = str(revision_module("0028").FUNCTION)
    for old, new in FUNCTION_LOOKUPS:
        if old not in function:  # pragma: no cover - revision 0028's text never changes
            raise AssertionError(f"memstore_append of revision 0028 lacks {old!r}")
        function = function.replace(old, new)
    return function


def _replace_function(function: str) -> None:
    op.execute(revision_module("0028").DROP)
    op.execute(function)


def upgrade() -> None:
    _drop_views()
    if op.get_bind().dialect.name == "sqlite":
        _sqlite_rebuild(_keyed, _keyed_index)
    else:
        _postgres_rekey(_keyed, _keyed_index)
        _replace_function(tenant_function())
    _make_views(tenant=True)


def downgrade() -> None:
    revision_module("0028").refuse_other_tenants("0030")
    _drop_views()
    if op.get_bind().dialect.name == "sqlite":
        _sqlite_rebuild(_unkeyed, _unkeyed_index)
    else:
        _postgres_rekey(_unkeyed, _unkeyed_index)
        _replace_function(str(revision_module("0028").FUNCTION))
    _make_views(tenant=False)
