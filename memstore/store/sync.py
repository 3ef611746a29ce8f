"""SessionStore: the session DAGs in SQL, through a synchronous SQLAlchemy engine."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine
from sqlalchemy.engine import URL

from memstore.errors import MemstoreError, ReadOnlyStoreError
from memstore.graph import SessionGraph
from memstore.store import (
    compaction,
    exports,
    foreign,
    importing,
    plans,
    search,
    short_ids,
    sources,
    transfer,
)
from memstore.store.engine import DEFAULT_URL, LOCK_GAP_SECONDS, SCHEMA, WRITE, store_engine
from memstore.store.errors import translate_database_errors
from memstore.store.exports import ExportedFile, ExportFormat, ExportReport
from memstore.store.files import atomic_text_file
from memstore.store.handle import HandleBase
from memstore.store.migrate import check_ready, current_revision, downgrade, upgrade
from memstore.store.plans import (
    COMMIT,
    UNSET,
    Boundary,
    Plan,
    SessionInfo,
    Step,
    StoreStats,
    Unset,
    as_call,
)
from memstore.store.prepared import Prepared, stream_rows
from memstore.store.readonly import (
    DEFAULT_MEMORY_MB,
    DEFAULT_QUERY_SECONDS,
    DEFAULT_TEMP_MB,
    QueryResult,
    run_read_only,
)
from memstore.store.search import SearchHit
from memstore.store.time_limits import DEFAULT_SEARCH_SECONDS, PROGRESS_STEPS, SqliteTimeLimit
from memstore.store.transfer import FileProgress, ImportReport, Progress
from memstore.types import (
    Clock,
    CompactionPolicy,
    Migrator,
    ModelCard,
    ModelInvoker,
    SessionNode,
    Turn,
    TurnLike,
)

__all__ = ["SessionHandle", "SessionStore"]

T = TypeVar("T")


def execute(connection: Connection, step: Step) -> Any:
    """One step of a plan: a prepared statement on the driver's cursor, SQLite's progress
    handler for a time limit, else through Core."""
    if isinstance(step, SqliteTimeLimit):
        driver: Any = connection.connection.driver_connection  # sqlite3.Connection
        return driver.set_progress_handler(step.handler, PROGRESS_STEPS)
    if isinstance(step, tuple) and isinstance(step[0], Prepared):
        if step[0].streamed:
            return stream_rows(step[0], connection.connection, connection.dialect, step[1])
        return step[0].run(_cursor(connection), connection.dialect, step[1])
    return connection.execute(*as_call(step))


_CURSOR = "memstore_cursor"


def _cursor(connection: Connection) -> Any:
    """The driver connection's cursor for prepared statements, made once per connection (a
    prepared step reads its rows before the next step runs)."""
    info = connection.connection.info  # kept with the driver connection, across checkouts
    cursor = info.get(_CURSOR)
    if cursor is None:
        cursor = info[_CURSOR] = connection.connection.cursor()
    return cursor


def drive(plan: Plan[T], connection: Connection) -> T:
    """Run a plan's statements on `connection`, feeding each result back to the plan (or the
    error it raised: the plan may clean up, then re-raise). After a `Boundary` step the next
    statement begins a new transaction, LOCK_GAP_SECONDS later at the earliest: SQLite's other
    writers, which retry every 100 ms while they wait, take the write lock in between."""
    released: float | None = None  # when a boundary ended the last transaction
    result: Any
    try:
        step = next(plan)
        while True:
            try:
                if isinstance(step, Boundary):
                    (connection.commit if step is COMMIT else connection.rollback)()
                    released, result = time.monotonic(), None
                else:
                    if released is not None:
                        time.sleep(max(0.0, released + LOCK_GAP_SECONDS - time.monotonic()))
                        connection.begin()
                        released = None
                    result = execute(connection, step)
            except BaseException as error:  # Ctrl-C too: the plan's cleanup runs
                step = plan.throw(error)
            else:
                step = plan.send(result)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


@contextmanager
def transaction(engine: Engine, *, write: bool) -> Iterator[Connection]:
    """A connection inside one transaction; writing ones take SQLite's write lock at once."""
    with engine.connect() as connection:
        if write:
            connection.execution_options(**{WRITE: True})
        with connection.begin():
            yield connection


def run(engine: Engine, plan: Plan[T], *, write: bool, action: str) -> T:
    """Run a plan in a transaction (or several: see `drive`), with database errors translated
    (naming `action`); what is left uncommitted when it fails is rolled back."""
    with translate_database_errors(action), engine.connect() as connection:
        if write:
            connection.execution_options(**{WRITE: True})
        connection.begin()
        result = drive(plan, connection)
        connection.commit()
        return result


class SessionStore:
    """Branchable session DAGs in a SQL database (SQLite by default, or PostgreSQL).

    One store may be shared by every thread of a process: each call is its own transaction on a
    connection of the engine's pool. Open it in each process (after a fork, not before).

    Args:
        url: a database URL (`sqlite:///path.db`, `postgresql://host/db`) or an Engine.
        migrators: applied, in order, to every record imported from JSONL files.
        auto_migrate: bring the schema up to date when the store opens (a read-only store
            checks that it is instead); False does neither.
        read_only: open for reading only: never create the database or migrate it, and refuse
            writes (ReadOnlyStoreError). Opening raises StoreNotReadyError, saying what to run,
            for a missing SQLite file, a database without memstore's tables or at an older
            revision. A SQLite file is read wherever it can be read (a read-only directory too).
        schema: PostgreSQL only: the schema every memstore object lives in, its version table
            included (made on first upgrade). Default: the connection's current schema
            (usually `public`). SQLite has no schemas: giving one is an InvalidArgumentError.

    Raises:
        StoreNotReadyError: read-only, and the database is not at this memstore's revision.
        DatabaseTooNewError: a newer memstore migrated the database (read-only or not).
        MigrationError: the schema could not be brought up to date, e.g. because another's
            tables have memstore's names.
    """

    def __init__(
        self,
        url: str | URL | Engine = DEFAULT_URL,
        *,
        migrators: Sequence[Migrator] = (),
        auto_migrate: bool = True,
        read_only: bool = False,
        schema: str | None = None,
    ) -> None:
        self.engine = store_engine(url, schema=schema, read_only=read_only)
        self.schema: str | None = self.engine.get_execution_options().get(SCHEMA)
        self.read_only = read_only
        self.migrators = tuple(migrators)
        self.dialect = self.engine.dialect.name
        if auto_migrate:
            try:
                with translate_database_errors("opening the store"):
                    if read_only:
                        check_ready(self.engine)
                    else:
                        upgrade(self.engine, only_if_needed=True)
                if not read_only and self.dialect == "sqlite":
                    with importing.reported_if_not_cleaned():
                        self.clean_abandoned_imports()
            except BaseException:
                self.close()  # no connection left open behind a store that never opened
                raise

    def clean_abandoned_imports(self, *, force: Collection[str] = ()) -> list[str]:
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
        plan = importing.abandoned_imports(self.dialect, force)
        found = self._run(plan, write=False, action="looking for abandoned imports")
        if not found:
            return []
        cleaning = importing.clean_abandoned(self.dialect, found)
        return self._run(cleaning, write=True, action=importing.deleting(found))

    def _writable(self, action: str) -> None:
        """Refuse a write through a store opened for reading only."""
        if self.read_only:
            raise ReadOnlyStoreError(
                f"{action}: this store was opened read-only (read_only=True); open it without "
                "read_only to write"
            )

    def schema_revision(self) -> str | None:
        """The Alembic revision the database is at (None: memstore never touched it)."""
        with translate_database_errors("reading the schema revision"), self.engine.connect() as c:
            return current_revision(c)

    def upgrade_schema(self, revision: str = "head") -> None:
        """Migrate the schema up to `revision` (what `auto_migrate` does on open)."""
        self._writable(f"upgrading the schema to {revision!r}")
        with translate_database_errors(f"upgrading the schema to {revision!r}"):
            upgrade(self.engine, revision)

    def downgrade_schema(self, revision: str) -> None:
        """Migrate the schema down to `revision`; `base` drops memstore's tables and data."""
        self._writable(f"downgrading the schema to {revision!r}")
        with translate_database_errors(f"downgrading the schema to {revision!r}"):
            downgrade(self.engine, revision)

    def close(self) -> None:
        """Release the engine's connections."""
        self.engine.dispose()

    def __enter__(self) -> SessionStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @contextmanager
    def transaction(self, *, write: bool) -> Iterator[Connection]:
        """A connection inside one transaction; writing ones take SQLite's write lock at once."""
        if write:
            self._writable("a writing transaction")
        with transaction(self.engine, write=write) as connection:
            yield connection

    def _run(self, plan: Plan[T], *, write: bool, action: str) -> T:
        if write:
            self._writable(action)
        return run(self.engine, plan, write=write, action=action)

    def append_node(
        self, session_id: str, node: SessionNode, *, expected_head: str | Unset | None = UNSET
    ) -> None:
        """Store `node` and move the session's head to it, in one transaction.

        Appending a node that is already stored is idempotent and still moves the head. With
        `expected_head` the append is a compare-and-set: it commits only if the head is still
        that id (None: the session is empty).

        Raises:
            HeadMovedError: `expected_head` was given and the head is elsewhere.
            UnknownNodeError: the node's parent is not in the session.
            NodeConflictError: the session holds the node's id with different content.
        """
        plan = plans.append_node(self.dialect, session_id, node, expected_head)
        self._run(plan, write=True, action=f"appending to session {session_id!r}")

    def append(
        self,
        session_id: str,
        turn: TurnLike,
        *,
        expected_head: str | Unset | None = UNSET,
        created_at: int | None = None,
        parent: str | Unset = UNSET,
    ) -> SessionNode:
        """Append `turn` at the session's head, whatever other writers do meanwhile.

        The head is read inside the writing transaction, whose first statement locks the session
        against other writers, so concurrent appends to one session make one linear chain with
        no retry and no fork. The node's id is its content address (parent, turn, created_at).
        `expected_head`, `created_at` and `parent` work as in `append_many`.

        Raises:
            HeadMovedError: `expected_head` was given and the head is elsewhere.
            InvalidTurnError: `turn` breaks the contract; nothing was written.
        """
        (node,) = self.append_many(
            session_id, [turn], expected_head=expected_head, created_at=created_at, parent=parent
        )
        return node

    def append_many(
        self,
        session_id: str,
        turns: Iterable[TurnLike],
        *,
        expected_head: str | Unset | None = UNSET,
        created_at: int | None = None,
        parent: str | Unset = UNSET,
    ) -> list[SessionNode]:
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
            parent: chain from this node instead of the head (a fork); the head still moves
                to the new chain's end.

        Raises:
            HeadMovedError: `expected_head` was given, the head is elsewhere, and the call is no
                repeat.
            InvalidTurnError: a turn breaks the contract; nothing was written.
            UnknownNodeError: the session has no node `parent`; nothing was written.
        """
        plan = plans.append_turns(
            self.dialect, session_id, turns, expected_head, created_at, parent
        )
        return self._run(plan, write=True, action=f"appending to session {session_id!r}")

    def load_session(self, session_id: str) -> SessionGraph:
        """The whole DAG of a session; a missing session is an empty graph."""
        return self._run(plans.load_session(session_id), write=False, action="loading a session")

    def list_sessions(self) -> list[str]:
        """Every session id, sorted."""
        return self._run(plans.list_session_ids(), write=False, action="listing sessions")

    def load_path(
        self, session_id: str, leaf: str | None = None, *, last: int | None = None
    ) -> list[Turn]:
        """The turns from the root to `leaf` (default: the head): a session that is one chain
        is read flat, in the order stored; any other is walked in SQL, parent by parent.

        With `last=N`, only the newest N turns (walked: N steps, whatever the session's size),
        moved back so that the first is never a tool_result cut off from its tool_call. A
        missing or empty session gives [].

        Raises:
            UnknownNodeError: the session has no node `leaf`.
        """
        plan = plans.load_path(self.dialect, session_id, leaf, last)
        return self._run(plan, write=False, action="loading a path")

    def load_path_nodes(
        self, session_id: str, leaf: str | None = None, *, last: int | None = None
    ) -> list[SessionNode]:
        """Like `load_path`, but the nodes (ids, parents, times) rather than only the turns."""
        plan = plans.load_path_nodes(self.dialect, session_id, leaf, last)
        return self._run(plan, write=False, action="loading a path")

    def head(self, session_id: str) -> str | None:
        """The session's head node id, or None."""
        return self._run(plans.head(session_id), write=False, action="reading a head")

    def resolve_node_id(self, session_id: str, node_id: str) -> str:
        """The full id of the node that `node_id` (the id, or a unique prefix of it) names.

        Raises:
            UnknownNodeError: no node of the session has or starts with that id.
            AmbiguousNodeError: several nodes' ids start with it (they are listed).
        """
        plan = plans.resolve_node_id(session_id, node_id)
        return self._run(plan, write=False, action="looking up a node id")

    def short_node_ids(self, session_id: str, node_ids: Iterable[str]) -> dict[str, str]:
        """Each of `node_ids` the session holds, mapped to the shortest prefix of it (8
        characters at least) that no other id of the session starts with, as git shortens
        hashes, or to the whole id when it starts another; `resolve_node_id` takes each back
        to its id. Ids the session does not hold are left out."""
        plan = short_ids.short_node_ids(session_id, node_ids)
        return self._run(plan, write=False, action="shortening node ids")

    def sessions(
        self,
        *,
        tag: str | None = None,
        title_contains: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        limit: int | None = None,
    ) -> list[SessionInfo]:
        """Sessions with their metadata, most recently updated first, optionally filtered."""
        plan = plans.list_sessions(
            tag=tag, title_contains=title_contains, metadata=metadata, limit=limit
        )
        return self._run(plan, write=False, action="listing sessions")

    def session_info(self, session_id: str) -> SessionInfo:
        """One session's metadata. Raises UnknownSessionError when it does not exist."""
        return self._run(plans.session_info(session_id), write=False, action="reading a session")

    def update_session(
        self,
        session_id: str,
        *,
        title: str | Unset | None = UNSET,
        tags: Sequence[str] | Unset = UNSET,
        metadata: Mapping[str, Any] | Unset | None = UNSET,
    ) -> None:
        """Set a session's title, tags (replacing them) or metadata object."""
        plan = plans.update_session(
            self.dialect, session_id, title=title, tags=tags, metadata=metadata
        )
        self._run(plan, write=True, action=f"updating session {session_id!r}")

    def delete_session(self, session_id: str) -> bool:
        """Delete a session and everything in it; False when there was no such session."""
        plan = plans.delete_session(session_id)
        return self._run(plan, write=True, action=f"deleting session {session_id!r}")

    def fork_session(self, source_id: str, leaf: str | None, new_id: str) -> str | None:
        """Copy the path to `leaf` (None: the head) into a new session; returns its head.

        Raises:
            UnknownSessionError: no session `source_id`.
            SessionExistsError: `new_id` is taken.
            UnknownNodeError: the source has no node `leaf`.
        """
        plan = plans.fork_session(self.dialect, source_id, leaf, new_id)
        return self._run(plan, write=True, action=f"forking session {source_id!r}")

    def compact_session(
        self,
        session_id: str,
        model_card: ModelCard,
        invoker: ModelInvoker,
        policy: CompactionPolicy | None = None,
        *,
        clock: Clock | None = None,
    ) -> compaction.CompactionResult:
        """Condense the head's path onto a new branch: a summary root node, then the kept tail.

        The summary turn records what it condensed under `memstore.condensed`; the head moves
        to the new branch and the old branch stays loadable. The model is called between two
        transactions; the branch is written in one, only if the head is still the one read.
        The model runs on an event loop of its own: inside a running loop, use
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
        read = compaction.read_head_path(self.dialect, session_id)
        head, path = self._run(read, write=False, action=f"reading session {session_id!r}")
        draft = asyncio.run(
            compaction.draft_branch(session_id, head, path, model_card, invoker, policy, clock)
        )
        if draft.nodes:
            branch = compaction.append_branch(self.dialect, session_id, draft.nodes, head)
            self._run(branch, write=True, action=f"compacting session {session_id!r}")
        return draft.result

    def import_jsonl(
        self,
        path: str | os.PathLike[str],
        *,
        session_id: str | None = None,
        verify: bool = True,
        keep_mismatched: bool = False,
        progress: Progress | None = None,
    ) -> ImportReport:
        """Import a legacy JSONL session file, or every `*.jsonl` file of a directory.

        Each file is one session (by default its file name's stem), imported all or nothing,
        and passes through the store's migrators. On SQLite a new session's import commits as
        it goes, so that other writers wait a moment, not the whole file; the session stays
        absent to readers, and refused to writers (SessionImportingError), until it completes.
        Importing again adds only what the file gained since; a file whose imported part
        changed is refused. With `verify`, every node id must be its content hash
        (`keep_mismatched=True` imports mismatches with a warning).

        Raises:
            JsonlError: naming the file and line; that file's import left no trace.
        """
        report = ImportReport()
        plans_ = transfer.import_plans(
            self.dialect,
            Path(path),
            session_id,
            migrators=self.migrators,
            verify=verify,
            keep_mismatched=keep_mismatched,
            progress=progress,
        )
        for file, plan in plans_:
            report.files.append(self._run(plan, write=True, action=f"importing {file}"))
        return report

    def import_pi(
        self, path: str | os.PathLike[str], *, progress: Progress | None = None
    ) -> ImportReport:
        """Import pi session files: a file, or every `*.jsonl` under a directory (recursively).

        Each file is one transaction and one session (its file name's stem). The entries' tree
        is kept (messages, compactions and branch summaries as nodes under their parents' nodes;
        the last entry is the head); headers, model changes, labels and names become the
        session's metadata, tags and title; usage and cost go to `node_usage`. Every line is
        kept, so `export_jsonl` writes the file back byte for byte. Importing again adds only
        what the file gained.

        Raises:
            JsonlError: naming the file and line; that file's import left no trace.
        """
        return self.import_foreign(path, agent="pi", progress=progress)

    def import_claude_code(
        self, path: str | os.PathLike[str], *, progress: Progress | None = None
    ) -> ImportReport:
        """Import Claude Code transcripts: a file, or every `*.jsonl` under a directory.

        Like `import_pi`. Sidechains stay in their session; a subagent transcript
        (`<session>/subagents/agent-<id>.jsonl`) becomes session `<session>~agent-<id>`, whose
        metadata names its `parentSession`.
        """
        return self.import_foreign(path, agent="claude-code", progress=progress)

    def import_foreign(
        self,
        path: str | os.PathLike[str],
        *,
        agent: str = "auto",
        progress: Progress | None = None,
    ) -> ImportReport:
        """Import pi or Claude Code files (`agent`: "pi", "claude-code" or "auto", which tells
        each file's agent from its first lines). See `import_pi`."""
        report = ImportReport()
        for file, plan in foreign.foreign_import_plans(
            self.dialect, Path(path), agent, progress=progress
        ):
            report.files.append(self._run(plan, write=True, action=f"importing {file}"))
        return report

    def import_files(
        self,
        paths: Iterable[str | os.PathLike[str]],
        *,
        source: str = "auto",
        session_id: str | None = None,
        verify: bool = True,
        keep_mismatched: bool = False,
        file_progress: FileProgress | None = None,
    ) -> ImportReport:
        """Import every file `paths` name or hold (`~` is the home directory), each in its own
        transaction, in the format `source` names: "auto" (each file's, told by its first
        lines), "jsonl", "pi" or "claude-code". A file refused (its lines, or a format other
        than `source`) or a path that cannot be read is kept in the report's `failures` (it
        left no trace, not even an empty session) and the others still import.

        Raises:
            InvalidArgumentError: an unknown source, or `session_id` for more than one file.
        """
        report = ImportReport()
        for file, plan in sources.import_plans(
            self.dialect,
            paths,
            source=source,
            session_id=session_id,
            migrators=self.migrators,
            verify=verify,
            keep_mismatched=keep_mismatched,
            file_progress=file_progress,
        ):
            try:
                done = self._run(plan, write=True, action=f"importing {file}")
            except MemstoreError as exc:
                report.failures.append(exc)
            else:
                report.files.append(done)
        return report

    def import_file(
        self,
        path: str | os.PathLike[str],
        *,
        source: str = "jsonl",
        session_id: str | None = None,
        verify: bool = True,
        keep_mismatched: bool = False,
        progress: Progress | None = None,
    ) -> ImportReport:
        """Import one file (or directory) from `source`: `import_jsonl` or `import_foreign`."""
        if source == "jsonl":
            return self.import_jsonl(
                path,
                session_id=session_id,
                verify=verify,
                keep_mismatched=keep_mismatched,
                progress=progress,
            )
        return self.import_foreign(path, agent=source, progress=progress)

    def export_jsonl(self, session_id: str, path: str | os.PathLike[str]) -> int:
        """Write a session as the JSONL file the original store would hold; returns its lines.

        The file is written next to its destination and moved into place, so a failed export
        never leaves a partial file.
        """
        with atomic_text_file(Path(path)) as out:
            plan = transfer.export_session(session_id, out)
            return self._run(plan, write=False, action=f"exporting session {session_id!r}")

    def export_session(
        self,
        session_id: str,
        path: str | os.PathLike[str],
        *,
        format: ExportFormat | str | None = None,
        agent: str | None = None,
    ) -> ExportedFile:
        """Write one session to `path` (`-`: standard output), replacing a regular file only
        once the whole export is written, keeping its permissions.

        Args:
            format: "jsonl" (the legacy file, byte for byte), "md" (the head's transcript) or
                "html" (the whole tree as one page); default: from `path`'s extension, else JSONL.
            agent: "pi" or "claude-code": write a session imported from that agent back as
                its file, byte for byte (JSONL only).

        Raises:
            UnknownSessionError: there is no such session.
            StoreError: `agent` is given and the session came from another agent.
            InvalidArgumentError: an unknown format or agent, or `agent` with a format not JSONL.
            OutputFileError: `path` cannot be written (a directory, no space).
        """
        target = Path(path)
        form = ExportFormat.of(format, target)
        exports.check_agent(agent, form)
        plan = exports.export_plan(session_id, target, form, agent=agent)
        return self._run(plan, write=False, action=f"exporting session {session_id!r}")

    def export_sessions(
        self,
        directory: str | os.PathLike[str] = ".",
        *,
        format: ExportFormat | str = ExportFormat.JSONL,
        agent: str | None = None,
    ) -> ExportReport:
        """Write every session into `directory`, each as `<id>.<format>` (a name changed only
        where it would be too long or collide with another's where case or accents are
        ignored); with `agent`, every session imported from it in its own folder layout (e.g.
        under `~/.claude/projects`). A session whose file cannot be written is refused in the
        report, with the reason; the others are written.

        Raises:
            InvalidArgumentError: an unknown format or agent, or `agent` with a format not JSONL.
            OutputFileError: `directory` is standard output or a file.
        """
        program = exports.export_program(Path(directory), ExportFormat.of(format), agent)
        try:
            call = next(program)
            while True:
                try:
                    result = self._run(call.plan, write=False, action=call.action)
                except MemstoreError as exc:
                    call = program.throw(exc)
                else:
                    call = program.send(result)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    def stats(self, *, top: int = 10) -> StoreStats:
        """Totals over the whole store: sessions, nodes, records, tool calls, top tools."""
        return self._run(plans.store_stats(top), write=False, action="reading statistics")

    def index_search_backlog(self) -> int:
        """SQLite: index the turns that writes of a few nodes left in the full-text backlog
        (`search` does it first), returning how many. PostgreSQL indexes each write: 0."""
        self._writable("indexing the full-text backlog")
        if self.dialect != "sqlite":
            return 0
        return self._run(plans.index_backlog(), write=True, action="indexing for search")

    def _index_search_backlog_if_any(self) -> None:
        """Before a search, a store that can write indexes the backlog: every turn it finds is
        then ranked by the index (a read-only store matches the backlog in memory)."""
        if (
            self.dialect == "sqlite"
            and not self.read_only
            and self._run(plans.backlog_waiting(), write=False, action="searching")
        ):
            self.index_search_backlog()

    def search(
        self,
        query: str,
        *,
        session_id: str | None = None,
        limit: int = 20,
        timeout: float | None = DEFAULT_SEARCH_SECONDS,
    ) -> list[SearchHit]:
        """Turns whose text, thinking, tool inputs or outputs contain every word of `query`.

        Best matches first; `snippet` marks the matched words with [brackets]. Any text is a
        valid query: quotes, operators and SQL in it are searched for as plain words, case
        and accents aside (`naive` finds `naïve`).

        Raises:
            TimeLimitError: a statement of the search ran longer than `timeout` seconds
                (default 10; None: no limit).
        """
        self._index_search_backlog_if_any()
        plan = search.search(
            self.dialect, query, session_id=session_id, limit=limit, timeout=timeout
        )
        return self._run(plan, write=False, action="searching")

    def read_only_query(
        self,
        sql: str,
        *,
        limit: int = 1000,
        timeout: float = DEFAULT_QUERY_SECONDS,
        read_url: str | None = None,
        max_temp_mb: float = DEFAULT_TEMP_MB,
        max_memory_mb: float = DEFAULT_MEMORY_MB,
    ) -> QueryResult:
        """Run one SQL statement that only reads (the views are there for this), stopped after
        `timeout` seconds (default 5) or, on SQLite, once its temporary files pass
        `max_temp_mb` MB (default 500) or its memory `max_memory_mb` MB (default 500). On
        PostgreSQL it runs over the login `read_url` names
        (default `$MEMSTORE_READ_URL`, else the store's own).

        Raises:
            QueryError: the statement writes, is more than one statement, fails, runs out of
                time, temporary space or memory; or the PostgreSQL login is privileged (a superuser,
                server files, ...).
            KeyboardInterrupt: Ctrl-C stopped it (on PostgreSQL it is cancelled on the server).
        """
        with translate_database_errors("running a query"):
            return run_read_only(
                self.engine,
                sql,
                limit=limit,
                timeout=timeout,
                read_url=read_url,
                max_temp_mb=max_temp_mb,
                max_memory_mb=max_memory_mb,
            )

    def session(self, session_id: str) -> SessionHandle:
        """A light handle on one session: it reads the head (one query), not the graph."""
        return SessionHandle(self, session_id, self.head(session_id))


class SessionHandle(HandleBase):
    """One session, through a SessionStore (see HandleBase)."""

    def __init__(self, store: SessionStore, session_id: str, head: str | None) -> None:
        super().__init__(session_id, head)
        self.store = store

    def append(self, turn: TurnLike, *, expected_head: str | Unset | None = UNSET) -> SessionNode:
        """Append `turn` at the store's head (or after `branch_from`'s node) and persist it.

        Raises:
            HeadMovedError: `expected_head` was given and the head is elsewhere.
        """
        (node,) = self.append_many([turn], expected_head=expected_head)
        return node

    def append_many(
        self, turns: Iterable[TurnLike], *, expected_head: str | Unset | None = UNSET
    ) -> list[SessionNode]:
        """Append `turns` as one chain (see `SessionStore.append_many`), at the store's head or
        after `branch_from`'s node."""
        nodes = self.store.append_many(
            self.session_id, turns, expected_head=expected_head, parent=self._fork_parent()
        )
        return self._moved_to(nodes)

    def refresh(self) -> str | None:
        """Read the store's head again (one query), after other writers appended; returns it."""
        return self._seen(self.store.head(self.session_id))

    def path(self, *, last: int | None = None) -> list[Turn]:
        """The turns from the root (or the newest `last`) to this handle's head."""
        if self.head is None:
            return []
        return self.store.load_path(self.session_id, self.head, last=last)

    def load_graph(self) -> SessionGraph:
        """The session's whole DAG, loaded now (its `leaf` is the store's head)."""
        return self.store.load_session(self.session_id)
