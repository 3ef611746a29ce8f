"""What every store operation does, written once for the sync and the async store.

An operation is a *plan* (`contract`): a generator that yields statements and receives each
one's result, driven by `SessionStore` on a `Connection` and by `AsyncSessionStore` on an
`AsyncConnection`. The plans live in one module per concept:

- `contract`: what a plan yields and receives (`Plan`, `Step`, `COMMIT`, `UNSET`);
- `nodes`: node rows decoded, the node ids the store can hold, lookups by id, a session's nodes;
- `sessions`: `SessionInfo`, listing and filtering sessions, their title, tags and metadata;
- `paging`: the keyset cursors and time window of a session listing;
- `appends`: appending turns and nodes, inserting rows, forking a path into a new session;
- `metadata`: reading sessions' metadata, merging into it while appending (one transaction);
- `search_index`: writing SQLite's full-text index and its backlog;
- `paths`: reading the path from the root to a leaf, or its newest turns;
- `stats`: totals over the whole store;
- `retention`: when sessions expire, and pruning sessions and branches no head reaches.

This package re-exports what the rest of memstore uses, so that callers name `plans.X`.
"""

from __future__ import annotations

from memstore.store.plans.appends import (
    BLOCK_ROWS,
    INSERT_RECORDS,
    append_node,
    append_records,
    append_turns,
    chain_nodes,
    insert_nodes,
    insert_rows,
    parse_usages,
    record_usage,
    store_usage,
)
from memstore.store.plans.contract import (
    COMMIT,
    ROLLBACK,
    UNSET,
    Boundary,
    Plan,
    Step,
    StepResult,
    Unset,
    as_call,
    now_ms,
)
from memstore.store.plans.forks import fork_session
from memstore.store.plans.metadata import (
    MetadataMerges,
    StoredMetadata,
    append_merging_metadata,
    read_metadata,
)
from memstore.store.plans.nodes import (
    MAX_NODE_ID,
    head,
    load_session,
    lookup_by_ids,
    lookup_id,
    node_from_row,
    node_id_problem,
    node_rows,
    nodes_from_rows,
    refuse_bad_node_ids,
    resolve_node_id,
    stored_ids,
)
from memstore.store.plans.paging import SessionOrder, Window, epoch_ms
from memstore.store.plans.paths import load_path, load_path_nodes
from memstore.store.plans.retention import (
    Expiry,
    ExpiryDefaults,
    PruneFilters,
    PruneReport,
    expiry_defaults_of,
    prune,
    set_expiry,
    set_expiry_default,
)
from memstore.store.plans.search_index import (
    LONG_TEXT,
    SEARCH_BACKLOG,
    backlog_waiting,
    index_backlog,
)
from memstore.store.plans.sessions import (
    NATIVE_AGENT,
    SessionInfo,
    SessionPage,
    agent_of,
    delete_session,
    ensure_session,
    list_session_ids,
    list_sessions,
    session_info,
    session_page,
    update_session,
)
from memstore.store.plans.stats import (
    StoreStats,
    TenantTotals,
    UsageGrouping,
    UsageTotals,
    node_usages,
    store_stats,
    tenant_totals,
    usage_totals,
)

__all__ = [
    "BLOCK_ROWS",
    "COMMIT",
    "INSERT_RECORDS",
    "LONG_TEXT",
    "MAX_NODE_ID",
    "NATIVE_AGENT",
    "ROLLBACK",
    "SEARCH_BACKLOG",
    "UNSET",
    "Boundary",
    "Expiry",
    "ExpiryDefaults",
    "MetadataMerges",
    "Plan",
    "PruneFilters",
    "PruneReport",
    "SessionInfo",
    "SessionOrder",
    "SessionPage",
    "Step",
    "StepResult",
    "StoreStats",
    "StoredMetadata",
    "TenantTotals",
    "Unset",
    "UsageGrouping",
    "UsageTotals",
    "Window",
    "agent_of",
    "append_merging_metadata",
    "append_node",
    "append_records",
    "append_turns",
    "as_call",
    "backlog_waiting",
    "chain_nodes",
    "delete_session",
    "ensure_session",
    "epoch_ms",
    "expiry_defaults_of",
    "fork_session",
    "head",
    "index_backlog",
    "insert_nodes",
    "insert_rows",
    "list_session_ids",
    "list_sessions",
    "load_path",
    "load_path_nodes",
    "load_session",
    "lookup_by_ids",
    "lookup_id",
    "node_from_row",
    "node_id_problem",
    "node_rows",
    "node_usages",
    "nodes_from_rows",
    "now_ms",
    "parse_usages",
    "prune",
    "read_metadata",
    "record_usage",
    "refuse_bad_node_ids",
    "resolve_node_id",
    "session_info",
    "session_page",
    "set_expiry",
    "set_expiry_default",
    "store_stats",
    "store_usage",
    "stored_ids",
    "tenant_totals",
    "update_session",
    "usage_totals",
]
