"""The SQL session store: the only part of memstore that speaks SQL.

`SessionStore` is synchronous; `AsyncSessionStore` (in `memstore.store.aio`, needs the `async`
extra) carries out the same operations (`StoreBase`, each written once) on an asyncio engine.
Names are imported on first use, so that the command line starts without loading SQLAlchemy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memstore.store.compaction import CompactionResult
    from memstore.store.engine import create_store_engine
    from memstore.store.plans import UNSET, SessionInfo
    from memstore.store.sync import SessionHandle, SessionStore

DEFAULT_URL = "sqlite:///memstore.db"
"""Where the store lives when no URL is given: a SQLite file in the working directory."""

SCHEMA_VARIABLE = "MEMSTORE_SCHEMA"
"""The environment variable naming memstore's PostgreSQL schema for the command line and
Alembic (unset: the connection's current schema, usually `public`)."""

_MODULE_OF = {
    "CompactionResult": "memstore.store.compaction",
    "create_store_engine": "memstore.store.engine",
    "UNSET": "memstore.store.plans",
    "SessionInfo": "memstore.store.plans",
    "SessionHandle": "memstore.store.sync",
    "SessionStore": "memstore.store.sync",
}


def __getattr__(name: str) -> Any:
    """Import an exported name's module on first use."""
    if name not in _MODULE_OF:
        raise AttributeError(f"module 'memstore.store' has no attribute {name!r}")
    value = getattr(importlib.import_module(_MODULE_OF[name]), name)
    globals()[name] = value
    return value


__all__ = [
    "DEFAULT_URL",
    "SCHEMA_VARIABLE",
    "UNSET",
    "CompactionResult",
    "SessionHandle",
    "SessionInfo",
    "SessionStore",
    "create_store_engine",
]
