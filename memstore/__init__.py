"""memstore: a memory LLM agents can trust.

Context condensation, a run event ledger, and branchable, content-addressed session DAGs.
"""

import importlib
from typing import TYPE_CHECKING, Any

from memstore import jsjson
from memstore.errors import (
    AmbiguousNodeError,
    BranchError,
    BrokenLineageError,
    CondensationError,
    DatabaseError,
    DatabaseTooNewError,
    EventLoopError,
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
    MissingExtraError,
    NodeConflictError,
    OutputFileError,
    QueryError,
    ReadOnlyStoreError,
    SessionClosedError,
    SessionExistsError,
    SessionImportingError,
    StoreError,
    StoreNotReadyError,
    TimeLimitError,
    UnknownNodeError,
    UnknownSessionError,
)

if TYPE_CHECKING:
    from memstore.condense import (
        SUMMARY_HEADING,
        compact,
        estimate_context_tokens,
        find_cut_point,
        render_transcript,
        should_compact,
        summarize,
    )
    from memstore.graph import (
        SessionGraph,
    )
    from memstore.hashing import (
        hash_node,
    )
    from memstore.jsonl import (
        JsonlSessionStore,
    )
    from memstore.ledger import (
        RunLedger,
        SnapshotAccumulator,
    )
    from memstore.store import (
        CompactionResult,
        SessionHandle,
        SessionInfo,
        SessionStore,
    )
    from memstore.store.aio import AsyncSessionHandle, AsyncSessionStore
    from memstore.store.exports import ExportedFile, ExportFormat, ExportReport, RefusedExport
    from memstore.store.names import include_object
    from memstore.store.plans import (
        SessionPage,
        StoreStats,
        TenantTotals,
        UsageTotals,
    )
    from memstore.store.plans.erasure import (
        ErasureReport,
    )
    from memstore.store.plans.erasure_receipts import (
        ErasureReceipt,
    )
    from memstore.store.plans.retention import (
        ExpiryDefaults,
        PrunedBranches,
        PrunedSession,
        PruneReport,
    )
    from memstore.store.plans.usage_rollup import (
        UsageRollup,
    )
    from memstore.store.readonly import (
        QueryResult,
    )
    from memstore.store.search import (
        SearchHit,
    )
    from memstore.store.transfer import (
        ImportReport,
    )
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
    from memstore.usage import NodeUsage

__version__ = "0.1.0"

# generated: exports by scripts/gen_docs.py from the imports above; do not edit
_EXPORTED_FROM: dict[str, tuple[str, ...]] = {
    "memstore.condense": (
        "SUMMARY_HEADING",
        "compact",
        "estimate_context_tokens",
        "find_cut_point",
        "render_transcript",
        "should_compact",
        "summarize",
    ),
    "memstore.graph": ("SessionGraph",),
    "memstore.hashing": ("hash_node",),
    "memstore.jsonl": ("JsonlSessionStore",),
    "memstore.ledger": (
        "RunLedger",
        "SnapshotAccumulator",
    ),
    "memstore.store": (
        "CompactionResult",
        "SessionHandle",
        "SessionInfo",
        "SessionStore",
    ),
    "memstore.store.aio": (
        "AsyncSessionHandle",
        "AsyncSessionStore",
    ),
    "memstore.store.exports": (
        "ExportedFile",
        "ExportFormat",
        "ExportReport",
        "RefusedExport",
    ),
    "memstore.store.names": ("include_object",),
    "memstore.store.plans": (
        "SessionPage",
        "StoreStats",
        "TenantTotals",
        "UsageTotals",
    ),
    "memstore.store.plans.erasure": ("ErasureReport",),
    "memstore.store.plans.erasure_receipts": ("ErasureReceipt",),
    "memstore.store.plans.retention": (
        "ExpiryDefaults",
        "PrunedBranches",
        "PrunedSession",
        "PruneReport",
    ),
    "memstore.store.plans.usage_rollup": ("UsageRollup",),
    "memstore.store.readonly": ("QueryResult",),
    "memstore.store.search": ("SearchHit",),
    "memstore.store.transfer": ("ImportReport",),
    "memstore.types": (
        "AgentConfig",
        "Block",
        "Channel",
        "Clock",
        "CompactionPolicy",
        "Conversation",
        "FaultedEvent",
        "ImageBlock",
        "Migrator",
        "ModelCard",
        "ModelInvoker",
        "PendingTool",
        "RunError",
        "RunEvent",
        "RunPhase",
        "RunSnapshot",
        "SessionHead",
        "SessionNode",
        "SettledEvent",
        "SnapshotEvent",
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
        "Usage",
        "parse_turn",
        "validate_session_id",
    ),
    "memstore.usage": ("NodeUsage",),
}
"""Where each lazily exported name lives: importing memstore stays fast."""

__all__ = [
    "SUMMARY_HEADING",
    "AgentConfig",
    "AmbiguousNodeError",
    "AsyncSessionHandle",
    "AsyncSessionStore",
    "Block",
    "BranchError",
    "BrokenLineageError",
    "Channel",
    "Clock",
    "CompactionPolicy",
    "CompactionResult",
    "CondensationError",
    "Conversation",
    "DatabaseError",
    "DatabaseTooNewError",
    "ErasureReceipt",
    "ErasureReport",
    "EventLoopError",
    "ExpiryDefaults",
    "ExportFormat",
    "ExportReport",
    "ExportedFile",
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
    "MissingExtraError",
    "ModelCard",
    "ModelInvoker",
    "NodeConflictError",
    "NodeUsage",
    "OutputFileError",
    "PendingTool",
    "PruneReport",
    "PrunedBranches",
    "PrunedSession",
    "QueryError",
    "QueryResult",
    "ReadOnlyStoreError",
    "RefusedExport",
    "RunError",
    "RunEvent",
    "RunLedger",
    "RunPhase",
    "RunSnapshot",
    "SearchHit",
    "SessionClosedError",
    "SessionExistsError",
    "SessionGraph",
    "SessionHandle",
    "SessionHead",
    "SessionImportingError",
    "SessionInfo",
    "SessionNode",
    "SessionPage",
    "SessionStore",
    "SettledEvent",
    "SnapshotAccumulator",
    "SnapshotEvent",
    "StoreError",
    "StoreNotReadyError",
    "StoreStats",
    "StreamDone",
    "StreamError",
    "StreamEvent",
    "StreamOptions",
    "StreamTextDelta",
    "StreamThinkingDelta",
    "TenantTotals",
    "TextBlock",
    "TextDeltaEvent",
    "ThinkingBlock",
    "ThinkingDeltaEvent",
    "TimeLimitError",
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
    "UsageRollup",
    "UsageTotals",
    "__version__",
    "compact",
    "estimate_context_tokens",
    "find_cut_point",
    "hash_node",
    "include_object",
    "jsjson",
    "parse_turn",
    "render_transcript",
    "should_compact",
    "summarize",
    "validate_session_id",
]
# end generated: exports
_MODULE_OF = {name: module for module, names in _EXPORTED_FROM.items() for name in names}


def __getattr__(name: str) -> Any:
    """Import an exported name's module on first use (the async store needs the `async` extra)."""
    module_name = _MODULE_OF.get(name)
    if module_name is None:
        raise AttributeError(f"module 'memstore' has no attribute {name!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        if module_name != "memstore.store.aio":
            raise
        raise MissingExtraError(name, "async", exc) from exc
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_MODULE_OF})
