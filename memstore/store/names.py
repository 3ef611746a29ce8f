"""The names of memstore's database objects, and the Alembic filter that hides them from an
application's autogenerate. Kept free of SQLAlchemy so that an application's `env.py` and
`import memstore` stay light.

An application that keeps its own tables in the database memstore uses, and migrates them with
Alembic, passes `include_object` to `context.configure(...)` in its `env.py`: autogenerate then
neither drops memstore's tables, views and version table nor reports them as changes.
"""

from __future__ import annotations

__all__ = [
    "LEGACY_VERSION_TABLE",
    "SEARCH_PREFIX",
    "TABLES",
    "VERSION_TABLE",
    "VIEWS",
    "include_object",
    "is_memstore_name",
]

VERSION_TABLE = "memstore_alembic_version"
"""Where memstore keeps its Alembic revision, apart from an application's `alembic_version`."""

LEGACY_VERSION_TABLE = "alembic_version"
"""Where memstore kept its revision before it had a table of its own (moved on upgrade)."""

TABLES = frozenset(
    {
        "sessions",
        "session_tags",
        "nodes",
        "node_blocks",
        "records",
        "node_usage",
        "node_keys",
        "expiry_defaults",
        "erasures",
        "pruned_usage",
        "summary_subjects",
    }
)
"""memstore's tables (`memstore.store.tables` models them; a test checks the two agree)."""

_FILTERED_VIEWS = ("blocks", "turns", "tool_calls", "session_stats", "session_sources")
VIEWS = frozenset(
    {*_FILTERED_VIEWS, *(f"{view}_all" for view in _FILTERED_VIEWS), "node_search", "usage"}
)
"""memstore's views, made by the migrations for `memstore sql` and other readers (`<view>_all`:
the view's rows including sessions still being imported, migration 0018; `usage`, 0024)."""

SEARCH_PREFIX = "nodes_fts"
"""SQLite's full-text tables, their shadow tables and triggers all start with this."""


def is_memstore_name(name: str | None) -> bool:
    """Whether a table, view or other object of that name is one memstore makes."""
    if name is None:
        return False
    return (
        name in TABLES or name in VIEWS or name == VERSION_TABLE or name.startswith(SEARCH_PREFIX)
    )


def include_object(
    object_: object, name: str | None, type_: str, reflected: bool, compare_to: object
) -> bool:
    """Alembic's `include_object` for an application sharing its database with memstore.

    Leaves out a table found in the database under one of memstore's names that the
    application's own metadata does not declare (its indexes and constraints go with it). A table
    the application declares is always compared, so an application's own `sessions` table, in
    another PostgreSQL schema than memstore's, is migrated as usual.
    """
    del object_
    if type_ != "table":
        return True
    return not (reflected and compare_to is None and is_memstore_name(name))
