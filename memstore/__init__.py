"""memstore: a memory LLM agents can trust.

Context condensation, a run event ledger, and branchable, content-addressed session DAGs.
"""

from typing import TYPE_CHECKING, Any

from memstore import jsjson
from memstore.condense import (
    SUMMARY_HEADING,
    compact,
    estimate_context_tokens,
    find_cut_point,
    render_transcript,
    should_compact,
    summarize,
)
from memstore.errors import (
    AmbiguousNodeError,
    BrokenLineageError,
    CondensationError,
    DatabaseError,
    GraphError,
    HeadMovedError,
    InvalidArgumentError,
    InvalidJsonError,
    InvalidNodeIdError,
    InvalidSessionIdError,
    InvalidTurnError,
    InvokerConfigError,
    JsonlError,
    MemstoreError,
    MigrationError,
    NodeConflictError,
    OutputFileError,
    QueryError,
    SessionExistsError,
    StoreError,
    UnknownNodeError,
    UnknownSessionError,
)
from memstore.graph import SessionGraph
from memstore.hashing import hash_node
from memstore.jsonl import JsonlSessionStore
from memstore.ledger import RunLedger, SnapshotAccumulator
from memstore.store import CompactionResult, SessionHandle, SessionInfo, SessionStore
from memstore.store.plans import StoreStats
from memstore.store.readonly import QueryResult
from memstore.store.search import SearchHit
from memstore.store.transfer import ImportReport
from memstore.types import (
    AgentConfig,
    Block,
    Channel,
    Clock,
    CompactionPolicy,
    Conversation,
    FaultedEvent,
    ImageBlock,
    Migrator,
    ModelCard,
    ModelInvoker,
    PendingTool,
    RunError,
    RunEvent,
    RunPhase,
    RunSnapshot,
    SessionHead,
    SessionNode,
    SettledEvent,
    SnapshotEvent,
    StreamDone,
    StreamError,
    StreamEvent,
    StreamOptions,
    StreamTextDelta,
    StreamThinkingDelta,
    TextBlock,
    TextDeltaEvent,
    ThinkingBlock,
    ThinkingDeltaEvent,
    ToolCallBlock,
    ToolFinishedEvent,
    ToolOutcome,
    ToolResultBlock,
    ToolStartedEvent,
    Turn,
    TurnLike,
    UnknownBlock,
    Usage,
    parse_turn,
    validate_session_id,
)

if TYPE_CHECKING:
    from memstore.store.aio import AsyncSessionHandle, AsyncSessionStore

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """Import the async store on first use: it needs the `async` extra (greenlet, aiosqlite)."""
    if name in ("AsyncSessionStore", "AsyncSessionHandle"):
        try:
            from memstore.store import aio
        except ImportError as exc:
            raise ImportError(
                f"{name} needs the async extra: pip install 'memstore[async]' ({exc})"
            ) from exc
        return getattr(aio, name)
    raise AttributeError(f"module 'memstore' has no attribute {name!r}")


__all__ = [
    "SUMMARY_HEADING",
    "AgentConfig",
    "AmbiguousNodeError",
    "AsyncSessionHandle",
    "AsyncSessionStore",
    "Block",
    "BrokenLineageError",
    "Channel",
    "Clock",
    "CompactionPolicy",
    "CompactionResult",
    "CondensationError",
    "Conversation",
    "DatabaseError",
    "FaultedEvent",
    "GraphError",
    "HeadMovedError",
    "ImageBlock",
    "ImportReport",
    "InvalidArgumentError",
    "InvalidJsonError",
    "InvalidNodeIdError",
    "InvalidSessionIdError",
    "InvalidTurnError",
    "InvokerConfigError",
    "JsonlError",
    "JsonlSessionStore",
    "MemstoreError",
    "MigrationError",
    "Migrator",
    "ModelCard",
    "ModelInvoker",
    "NodeConflictError",
    "OutputFileError",
    "PendingTool",
    "QueryError",
    "QueryResult",
    "RunError",
    "RunEvent",
    "RunLedger",
    "RunPhase",
    "RunSnapshot",
    "SearchHit",
    "SessionExistsError",
    "SessionGraph",
    "SessionHandle",
    "SessionHead",
    "SessionInfo",
    "SessionNode",
    "SessionStore",
    "SettledEvent",
    "SnapshotAccumulator",
    "SnapshotEvent",
    "StoreError",
    "StoreStats",
    "StreamDone",
    "StreamError",
    "StreamEvent",
    "StreamOptions",
    "StreamTextDelta",
    "StreamThinkingDelta",
    "TextBlock",
    "TextDeltaEvent",
    "ThinkingBlock",
    "ThinkingDeltaEvent",
    "ToolCallBlock",
    "ToolFinishedEvent",
    "ToolOutcome",
    "ToolResultBlock",
    "ToolStartedEvent",
    "Turn",
    "TurnLike",
    "UnknownBlock",
    "UnknownNodeError",
    "UnknownSessionError",
    "Usage",
    "__version__",
    "compact",
    "estimate_context_tokens",
    "find_cut_point",
    "hash_node",
    "jsjson",
    "parse_turn",
    "render_transcript",
    "should_compact",
    "summarize",
    "validate_session_id",
]
