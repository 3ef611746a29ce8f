"""The SQL session store: the only part of memstore that speaks SQL.

`SessionStore` is synchronous; `AsyncSessionStore` (in `memstore.store.aio`, needs the `async`
extra) runs the same plans on an asyncio engine.
"""

from memstore.store.compaction import CompactionResult
from memstore.store.engine import DEFAULT_URL, create_store_engine
from memstore.store.plans import UNSET, SessionInfo
from memstore.store.sync import SessionHandle, SessionStore

__all__ = [
    "DEFAULT_URL",
    "UNSET",
    "CompactionResult",
    "SessionHandle",
    "SessionInfo",
    "SessionStore",
    "create_store_engine",
]
