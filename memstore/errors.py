"""The memstore error hierarchy: every error memstore raises on purpose derives from MemstoreError.

MemstoreError
├── InvalidJsonError        text that is not valid JSON, or a value JSON cannot carry
├── InvalidTurnError        a turn that breaks the contract, naming the field at fault
├── InvalidArgumentError    an argument memstore cannot use (a negative limit, an odd filter)
├── InvalidSessionIdError   a session id that is empty, too long or unsafe as a file name
├── GraphError              a session DAG refused an operation
│   ├── UnknownNodeError    a node id the session does not hold
│   │   └── AmbiguousNodeError  a short id that more than one node's id starts with
│   └── BrokenLineageError  a parent link that leads nowhere, or in a circle
├── CondensationError       a summary could not be produced; the history is untouched
├── InvokerConfigError      a model invoker missing a key, a model or a valid URL
├── MissingExtraError       an optional extra not installed (an adapter, the HTTP invokers)
├── JsonlError              a session file refused, naming the file and line
├── BranchError             an agent session's branch that is missing, protected or taken
├── SessionClosedError      a framework session used after its close()
├── OutputFileError         an export target that cannot be written (a directory, no space)
└── StoreError              the session store refused an operation
    ├── HeadMovedError      a compare-and-set append lost to another writer
    ├── NodeConflictError   the same node id with different content
    ├── InvalidNodeIdError  a node id too long or not storable as text
    ├── UnknownSessionError a session that does not exist, where one is required
    ├── SessionExistsError  a session id that is taken, where a new one is required
    ├── SessionImportingError  a session another import is still writing (absent until done)
    ├── DatabaseError       the database failed (connection, lock, disk)
    ├── QueryError          a read-only query refused or failed
    │   └── TimeLimitError  a search or query that ran past its time limit and was stopped
    ├── ReadOnlyStoreError  a write through a store opened for reading only
    ├── EventLoopError      an async store used from a second event loop (one loop each)
    ├── StoreNotReadyError  no memstore database there, or one at another revision
    │   └── DatabaseTooNewError  a database a newer memstore has migrated
    └── MigrationError      the schema could not be brought up to date
"""

from __future__ import annotations


class MemstoreError(Exception):
    """Base class of every error memstore raises on purpose."""


class InvalidJsonError(MemstoreError, ValueError):
    """Text that is not valid JSON, or a value that JSON cannot represent."""


class InvalidTurnError(MemstoreError, ValueError):
    """A turn that breaks the contract; the message names the field at fault."""


class InvalidArgumentError(MemstoreError, ValueError):
    """An argument memstore cannot use: a limit below zero, a filter value it cannot match."""


class GraphError(MemstoreError):
    """A session DAG refused an operation."""


class UnknownNodeError(GraphError, KeyError):
    """A node id that the session does not hold."""

    def __init__(self, session_id: str, node_id: str) -> None:
        super().__init__(f"session {session_id!r} has no node {node_id!r}")
        self.session_id = session_id
        self.node_id = node_id

    def __str__(self) -> str:
        # KeyError would otherwise render the message with quotes around it.
        return str(self.args[0])


class AmbiguousNodeError(UnknownNodeError):
    """A short node id (a prefix) that more than one of the session's node ids starts with."""

    def __init__(self, session_id: str, prefix: str, candidates: list[str], more: bool) -> None:
        listed = ", ".join(candidates) + (", ..." if more else "")
        KeyError.__init__(
            self,
            f"session {session_id!r}: the short id {prefix!r} is ambiguous: it starts "
            f"{listed}; give more of the id",
        )
        self.session_id = session_id
        self.node_id = prefix
        self.candidates = candidates


class BrokenLineageError(GraphError):
    """A parent link that names a node the session does not hold, or that loops."""

    def __init__(self, session_id: str, node_id: str, missing_parent: str, *, cycle: bool = False):
        problem = "which leads back to itself" if cycle else "which the session does not hold"
        super().__init__(
            f"session {session_id!r}: node {node_id!r} names parent {missing_parent!r}, {problem}"
        )
        self.session_id = session_id
        self.node_id = node_id
        self.missing_parent = missing_parent


class CondensationError(MemstoreError):
    """The model could not produce a summary; the caller still holds the full history."""


class InvalidSessionIdError(MemstoreError, ValueError):
    """A session id that is empty, too long, or unsafe as a file name."""


class StoreError(MemstoreError):
    """The session store refused an operation or its database failed."""


class HeadMovedError(StoreError):
    """A compare-and-set append found the session head moved by another writer."""

    def __init__(self, session_id: str, expected: str | None, actual: str | None) -> None:
        super().__init__(
            f"session {session_id!r}: expected head {expected!r} but another writer moved it to "
            f"{actual!r}; reload the session and retry"
        )
        self.session_id = session_id
        self.expected = expected
        self.actual = actual


class NodeConflictError(StoreError):
    """A node id the session already holds with different content."""


class InvalidNodeIdError(StoreError, ValueError):
    """A node id the store cannot hold: longer than 255 characters, or not storable text."""


class UnknownSessionError(StoreError, KeyError):
    """A session id the store does not hold, where one is required."""

    def __str__(self) -> str:
        return str(self.args[0])


class SessionExistsError(StoreError):
    """A session id that is already taken, where a new one is required."""


class SessionImportingError(StoreError):
    """A write to a session that an import is still writing: until it completes, the session
    is absent to readers and refused to writers. The message names the importing process."""


class DatabaseError(StoreError):
    """The database failed (connection, lock, disk); the original error is chained."""


class QueryError(StoreError):
    """A read-only query that was refused or failed (`memstore sql`)."""


class TimeLimitError(QueryError):
    """A search or read-only query that ran past its time limit and was stopped."""


class ReadOnlyStoreError(StoreError):
    """A write (an append, an import, a migration) through a store opened with read_only=True."""


class EventLoopError(StoreError, RuntimeError):
    """An AsyncSessionStore called from an event loop other than the one it runs on (another
    thread's, or none: trio): one store serves the tasks of one asyncio loop. Nothing was run."""


class StoreNotReadyError(StoreError):
    """A store opened for reading where there is no memstore database at this memstore's
    revision: a missing file, a database without memstore's tables, or one at an older revision.
    The message says what to run; nothing was created or changed."""


class DatabaseTooNewError(StoreNotReadyError):
    """A database at a memstore revision this memstore does not know: a newer memstore migrated
    it. The message names the package to upgrade; nothing was changed."""


class MigrationError(StoreError):
    """The database schema could not be brought to the version this memstore needs."""


class InvokerConfigError(MemstoreError, ValueError):
    """An invoker was configured without something it needs: an API key, a model, a valid URL."""


class MissingExtraError(MemstoreError, ImportError):
    """An optional extra's package is not installed; the message names the pip command."""

    def __init__(self, what: str, extra: str, cause: ImportError) -> None:
        from memstore._package import install_hint

        super().__init__(f"{what} needs the '{extra}' extra: {install_hint(extra)} ({cause})")
        self.extra = extra


class BranchError(MemstoreError, ValueError):
    """A branch of an OpenAI Agents advanced session (`MemstoreAdvancedSession`) refused: a
    missing branch or turn, `main` (which cannot be deleted), a blank name, or a name already
    used in the session. Nothing was written."""


class SessionClosedError(MemstoreError, RuntimeError):
    """A framework session used after its `close()`: open a new one."""


class OutputFileError(MemstoreError, OSError):
    """A file or directory an export cannot write: it names the path and the reason."""


class JsonlError(MemstoreError, ValueError):
    """A JSONL session file memstore refuses, with the file and line at fault."""

    def __init__(self, path: object, line: int | None, problem: str) -> None:
        where = f"{path}:{line}" if line is not None else f"{path}"
        super().__init__(f"{where}: {problem}")
        self.path = path
        self.line = line
        self.problem = problem
