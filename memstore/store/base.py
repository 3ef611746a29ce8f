"""StoreBase: every store operation, written once for `SessionStore` and `AsyncSessionStore`.

Each operation is one method: a program (see `operation`) that yields the plans it runs, and
says nothing of how they run. The shells, `sync.SessionStore` and `aio.AsyncSessionStore`, carry
the requests out; reading an operation through either gives the method a user calls, with this
signature and docstring. To add an operation, write one method here (or in `exchange` for files
in and out, `retention` for expiry and pruning) and decorate it with `@operation`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import Engine

from memstore.graph import SessionGraph
from memstore.store import compaction, importing, plans, search
from memstore.store.erasure import Erasure
from memstore.store.keyed import KeyedAppends
from memstore.store.listing import Listing
from memstore.store.metadata import SessionMetadata
from memstore.store.migrate import current_revision, downgrade, upgrade
from memstore.store.node_ids import NodeIds
from memstore.store.operation import Await, OnEngine, Program, operation
from memstore.store.plans import UNSET, Expiry, Unset
from memstore.store.plans.appends import UsageLike, UsagesLike
from memstore.store.readonly import (
    DEFAULT_MEMORY_MB,
    DEFAULT_QUERY_SECONDS,
    DEFAULT_TEMP_MB,
    QueryResult,
    run_read_only,
)
from memstore.store.retention import Retention
from memstore.store.search import SearchHit
from memstore.store.search_role import SearchRole
from memstore.store.time_limits import DEFAULT_SEARCH_SECONDS
from memstore.types import (
    Clock,
    CompactionPolicy,
    ModelCard,
    ModelInvoker,
    SessionNode,
    Turn,
    TurnLike,
)

__all__ = ["StoreBase"]


def _revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        return current_revision(connection)


class StoreBase(Listing, Retention, Erasure, KeyedAppends, NodeIds, SessionMetadata, SearchRole):
    """Every store operation (the session DAGs here, files in and out in `Exchange`, listings
    and totals in `Listing`, expiry and pruning in `Retention`, erasure and its receipts in
    `Erasure`, keyed appends in `KeyedAppends`, short node ids in `NodeIds`, sessions' metadata
    in `SessionMetadata`, PostgreSQL's search role in `SearchRole`), without I/O; see the module."""

    @operation
    def clean_abandoned_imports(self, *, force: Collection[str] = ()) -> Program[list[str]]:
        """Delete what imports that no longer run left (SQLite commits an import of a new
        session as it goes, invisible until complete); returns the sessions' ids. Opening a
        store for writing does it (and only logs a failure: a full disk must not stop reads).

        Args:
            force: sessions to take over whatever their import's state: one whose process
                cannot be reached (another machine, a hung process). A forced import that still
                runs fails.

        Raises:
            InvalidArgumentError: `force` names a session that is not being imported.
        """
        plan = importing.abandoned_imports(self.backend, force)
        found = yield from self._read(plan, "looking for abandoned imports")
        if not found:
            return []
        cleaning = importing.clean_abandoned(self.backend, found)
        return (yield from self._write(cleaning, importing.deleting(found)))

    def _cleaning_on_open(self) -> Program[None]:
        """What opening a store for writing does after the schema: clean abandoned imports
        (where imports commit as they go), a failure only logged."""
        if self.read_only or not self.backend.imports_commit_as_they_go:
            return
        with importing.reported_if_not_cleaned():
            yield from StoreBase.clean_abandoned_imports.program(self)

    @operation
    def schema_revision(self) -> Program[str | None]:
        """The Alembic revision the database is at (None: memstore never touched it)."""
        return (yield from OnEngine(_revision, "reading the schema revision"))

    @operation
    def upgrade_schema(self, revision: str = "head") -> Program[None]:
        """Migrate the schema up to `revision` (what `auto_migrate` does on open)."""
        action = f"upgrading the schema to {revision!r}"
        self._writable(action)
        yield from OnEngine(lambda engine: upgrade(engine, revision), action)

    @operation
    def downgrade_schema(self, revision: str) -> Program[None]:
        """Migrate the schema down to `revision`; `base` drops memstore's tables and data."""
        action = f"downgrading the schema to {revision!r}"
        self._writable(action)
        yield from OnEngine(lambda engine: downgrade(engine, revision), action)

    @operation
    def append_node(
        self, session_id: str, node: SessionNode, *, expected_head: str | Unset | None = UNSET
    ) -> Program[None]:
        """Store `node` and move the session's head to it, in one transaction.

        Appending a node that is already stored is idempotent and still moves the head. With
        `expected_head` the append is a compare-and-set: it commits only if the head is still
        that id (None: the session is empty). A store whose redactor (`redact=`) would change
        the node's turn takes the node only if the session holds it already: its id is the
        content address of the turn as given, which such a store never stores.

        Raises:
            HeadMovedError: `expected_head` was given and the head is elsewhere.
            UnknownNodeError: the node's parent is not in the session.
            NodeConflictError: the session holds the node's id with different content.
            InvalidArgumentError: the store's redactor would change the turn of a node the
                session does not hold (naming the node); nothing was written.
        """
        refusal = self._unredacted(node)
        plan = plans.append_node(self.backend, session_id, node, expected_head, stored_only=refusal)
        yield from self._write(plan, f"appending to session {session_id!r}")

    @operation
    def append(
        self,
        session_id: str,
        turn: TurnLike,
        *,
        expected_head: str | Unset | None = UNSET,
        created_at: int | None = None,
        parent: str | Unset = UNSET,
        usage: UsageLike | None = None,
    ) -> Program[SessionNode]:
        """Append `turn` at the session's head, whatever other writers do meanwhile.

        The head is read inside the writing transaction, whose first statement locks the session
        against other writers, so concurrent appends to one session make one linear chain with
        no retry and no fork. The node's id is its content address (parent, turn, created_at).
        `expected_head`, `created_at`, `parent` and `usage` work as in `append_many`.

        Raises:
            HeadMovedError: `expected_head` was given and the head is elsewhere.
            InvalidTurnError: `turn` breaks the contract; nothing was written.
            InvalidArgumentError: `usage` is malformed (naming the field); nothing was written.
        """
        plan = plans.append_turns(
            self.backend,
            session_id,
            self._redacted([turn]),
            expected_head,
            created_at,
            parent,
            usage,
        )
        (node,) = yield from self._write(plan, f"appending to session {session_id!r}")
        return node

    @operation
    def append_many(
        self,
        session_id: str,
        turns: Iterable[TurnLike],
        *,
        expected_head: str | Unset | None = UNSET,
        created_at: int | None = None,
        parent: str | Unset | None = UNSET,
        usage: UsagesLike = None,
    ) -> Program[list[SessionNode]]:
        """Append `turns` at the session's head as one chain, in one transaction: all or nothing.

        The records written, and so the JSONL export, are those of appending the turns one by
        one at `created_at` (epoch ms; default: now), each node a child of the one before.

        A call is a *repeat* of an earlier one that succeeded when it has the same session, the
        same `expected_head`, the same turns (same JSON text) and the same explicit
        `created_at`: its nodes' content addresses are then those stored. A repeat writes
        nothing (no node, record or head move, even if other writers appended since) and returns
        the stored nodes. So a retry after a lost acknowledgement is safe when the call passes
        both `expected_head` and `created_at`; without them every call appends anew.

        Args:
            session_id: the session (created if missing).
            turns: Turn models or wire dicts, oldest first; [] writes nothing.
            expected_head: compare-and-set: append only if the head is still this id (None: the
                session is empty).
            created_at: every new node's time, epoch ms.
            parent: chain from this node instead of the head (a fork; None: a new root); the
                head still moves to the new chain's end.
            usage: what the model call(s) cost (`NodeUsage` or a mapping of its fields):
                one, recorded against the last turn, or a list with one entry (or None) per
                turn. Stored in `node_usage` beside the node, never in the turn: ids are the
                same with or without it; the JSONL export carries it on a line of its own.

        Raises:
            HeadMovedError: `expected_head` was given, the head is elsewhere, and the call is no
                repeat.
            InvalidTurnError: a turn breaks the contract; nothing was written.
            UnknownNodeError: the session has no node `parent`; nothing was written.
            InvalidArgumentError: `usage` is malformed (naming the field) or its list's length
                is not the turns'; nothing was written.
        """
        plan = plans.append_turns(
            self.backend,
            session_id,
            self._redacted(turns),
            expected_head,
            created_at,
            parent,
            usage,
        )
        return (yield from self._write(plan, f"appending to session {session_id!r}"))

    @operation
    def record_usage(
        self, session_id: str, usage: UsageLike, *, node_id: str | None = None
    ) -> Program[str]:
        """Store what the model call behind a node cost (default: the head's), replacing what
        it had, beside the node (see `append_many`'s `usage`); returns the node's id. For usage
        known only after the turns were appended, such as an agent run's.

        Raises:
            UnknownSessionError: the session has no turns (and `node_id` is None).
            UnknownNodeError: the session has no node `node_id`.
            InvalidArgumentError: a malformed usage, naming the field.
        """
        plan = plans.record_usage(self.backend, session_id, node_id, usage)
        return (yield from self._write(plan, f"recording usage in session {session_id!r}"))

    @operation
    def load_session(self, session_id: str) -> Program[SessionGraph]:
        """The whole DAG of a session; a missing session is an empty graph."""
        return (yield from self._read(plans.load_session(session_id), "loading a session"))

    @operation
    def list_sessions(self) -> Program[list[str]]:
        """Every session id, sorted."""
        return (yield from self._read(plans.list_session_ids(), "listing sessions"))

    @operation
    def load_path(
        self, session_id: str, leaf: str | None = None, *, last: int | None = None
    ) -> Program[list[Turn]]:
        """The turns from the root to `leaf` (default: the head): a session that is one chain
        is read flat, in the order stored; any other is walked in SQL, parent by parent.

        With `last=N`, only the newest N turns (walked: N steps, whatever the session's size),
        moved back so that the first is never a tool_result cut off from its tool_call. A
        missing or empty session gives [].

        Raises:
            UnknownNodeError: the session has no node `leaf`.
        """
        plan = plans.load_path(self.backend, session_id, leaf, last)
        return (yield from self._read(plan, "loading a path"))

    @operation
    def load_path_nodes(
        self, session_id: str, leaf: str | None = None, *, last: int | None = None
    ) -> Program[list[SessionNode]]:
        """Like `load_path`, but the nodes (ids, parents, times) rather than only the turns."""
        plan = plans.load_path_nodes(self.backend, session_id, leaf, last)
        return (yield from self._read(plan, "loading a path"))

    @operation
    def head(self, session_id: str) -> Program[str | None]:
        """The session's head node id, or None."""
        return (yield from self._read(plans.head(session_id), "reading a head"))

    @operation
    def update_session(
        self,
        session_id: str,
        *,
        title: str | Unset | None = UNSET,
        tags: Sequence[str] | Unset = UNSET,
        metadata: Mapping[str, Any] | Unset | None = UNSET,
        expires_at: Expiry | Unset = UNSET,
    ) -> Program[None]:
        """Set a session's title, tags (replacing them), metadata or expiry (`Expiry`).

        Raises:
            InvalidArgumentError: `metadata` is not a mapping with string keys, an empty tag,
                a value the backend cannot store (PostgreSQL: a NUL character), or a malformed
                expiry; nothing was written.
        """
        plan = plans.update_session(
            self.backend, session_id, title=title, tags=tags, metadata=metadata, expiry=expires_at
        )
        yield from self._write(plan, f"updating session {session_id!r}")

    @operation
    def delete_session(self, session_id: str) -> Program[bool]:
        """Delete a session and everything in it; False when there was no such session."""
        plan = plans.delete_session(session_id)
        return (yield from self._write(plan, f"deleting session {session_id!r}"))

    @operation
    def fork_session(
        self,
        source_id: str,
        leaf: str | None,
        new_id: str,
        *,
        metadata: Mapping[str, Any] | None = None,
    ) -> Program[str | None]:
        """Copy the path to `leaf` (None: the head) into a new session, with `metadata` as its
        metadata object (in the same transaction); returns its head.

        Raises:
            UnknownSessionError: no session `source_id`.
            SessionExistsError: `new_id` is taken.
            UnknownNodeError: the source has no node `leaf`.
            InvalidArgumentError: `metadata` is not a mapping with string keys.
        """
        plan = plans.fork_session(self.backend, source_id, leaf, new_id, metadata)
        return (yield from self._write(plan, f"forking session {source_id!r}"))

    @operation
    def compact_session(
        self,
        session_id: str,
        model_card: ModelCard,
        invoker: ModelInvoker,
        policy: CompactionPolicy | None = None,
        *,
        clock: Clock | None = None,
    ) -> Program[compaction.CompactionResult]:
        """Condense the head's path onto a new branch: a summary root node, then the kept tail.

        The summary turn records what it condensed under `memstore.condensed`, and its node the
        summarizer's usage (the `done` events' tokens, in `node_usage`); the head moves to the
        new branch and the old branch stays loadable. The model is called between two
        transactions; the branch is written in one, only if the head is still the one read.
        `SessionStore` calls the model on an event loop of its own: inside a running loop, use
        AsyncSessionStore.

        Args:
            session_id: the session to compact.
            model_card: the summarizing model: requests are sized to its window.
            invoker: the summarizing model's invoker.
            policy: how many recent turns to keep verbatim (default `CompactionPolicy()`).
            clock: the new nodes' `created_at` (epoch ms); default the system clock.

        Raises:
            UnknownSessionError: there is no such session.
            CondensationError: the model could not produce a summary; nothing was written.
            HeadMovedError: another writer moved the head meanwhile; nothing was written.
        """
        read = compaction.read_head_path(self.backend, session_id)
        head, path = yield from self._read(read, f"reading session {session_id!r}")
        draft = yield from Await(
            compaction.draft_branch(
                session_id, head, path, model_card, invoker, policy, clock, self.redact
            )
        )
        if draft.nodes:
            branch = compaction.append_branch(
                self.backend, session_id, draft.nodes, head, draft.usage
            )
            yield from self._write(branch, f"compacting session {session_id!r}")
        return draft.result

    @operation
    def index_search_backlog(self) -> Program[int]:
        """SQLite: index the turns that writes of a few nodes left in the full-text backlog
        (`search` does it first), returning how many. PostgreSQL indexes each write: 0."""
        self._writable("indexing the full-text backlog")
        if not self.backend.search_backlog:
            return 0
        return (yield from self._write(plans.index_backlog(), "indexing for search"))

    @operation
    def search(
        self,
        query: str,
        *,
        session_id: str | None = None,
        limit: int = 20,
        timeout: float | None = DEFAULT_SEARCH_SECONDS,
    ) -> Program[list[SearchHit]]:
        """Turns whose text, thinking, tool inputs or outputs contain every word of `query`.

        Best matches first; `snippet` marks the matched words with [brackets]. Any text is a
        valid query: quotes, operators and SQL in it are searched for as plain words, case
        and accents aside (`naive` finds `naïve`).

        Raises:
            TimeLimitError: a statement of the search ran longer than `timeout` seconds
                (default 10; None: no limit).
        """
        # A store that can write indexes the backlog first: every turn found is then ranked by
        # the index (a read-only store matches the backlog in memory).
        if (
            self.backend.search_backlog
            and not self.read_only
            and (yield from self._read(plans.backlog_waiting(), "searching"))
        ):
            yield from StoreBase.index_search_backlog.program(self)
        plan = search.search(
            self.backend, query, session_id=session_id, limit=limit, timeout=timeout
        )
        return (yield from self._read(plan, "searching"))

    @operation
    def read_only_query(
        self,
        sql: str,
        *,
        limit: int = 1000,
        timeout: float = DEFAULT_QUERY_SECONDS,
        read_url: str | None = None,
        max_temp_mb: float = DEFAULT_TEMP_MB,
        max_memory_mb: float = DEFAULT_MEMORY_MB,
    ) -> Program[QueryResult]:
        """Run one SQL statement that only reads (the views are there for this), stopped after
        `timeout` seconds (default 5) or, on SQLite, once its temporary files pass `max_temp_mb`
        MB (default 500) or its memory `max_memory_mb` MB (default 500). On PostgreSQL it runs
        over the login `read_url` names (default `$MEMSTORE_READ_URL`, else the store's own).

        Raises:
            QueryError: the statement writes, is not one statement, fails or runs out of time,
                space or memory; or the PostgreSQL login is privileged (a superuser, ...).
            KeyboardInterrupt: Ctrl-C stopped it (on PostgreSQL it is cancelled on the server).
        """

        def query(engine: Engine) -> QueryResult:
            return run_read_only(
                engine,
                sql,
                limit=limit,
                timeout=timeout,
                read_url=read_url,
                max_temp_mb=max_temp_mb,
                max_memory_mb=max_memory_mb,
                tenant=self.tenant,
            )

        return (yield from OnEngine(query, "running a query"))
