"""Import and export of legacy JSONL session files, byte for byte, as store plans.

An import is all or nothing: a refused file leaves the database as it was. It runs in one
transaction per file, except on SQLite into a new session, which commits as it goes but stays
invisible until complete (see `importing`). It is incremental: the records already imported
must still be the file's prefix (compared byte by byte, streaming); only the lines after them
are added. Lines are read, checked and inserted in batches, so memory stays bounded by the
largest line, not the file."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from sqlalchemy import bindparam, case, literal, select, text, update

from memstore.errors import InvalidArgumentError, JsonlError, MemstoreError, UnknownSessionError
from memstore.jsonl import (
    ReadOutcome,
    Record,
    append_lines,
    head_line,
    node_line,
    read_records,
    session_files,
    verify_node_id,
)
from memstore.store import importing
from memstore.store.bulk import paused_gc
from memstore.store.owners import ImportOwner, release
from memstore.store.plans import (
    INSERT_RECORDS,
    Plan,
    ensure_session,
    insert_rows,
    lookup_id,
    node_id_problem,
    node_rows,
    now_ms,
    stored_ids,
)
from memstore.store.prepared import Prepared
from memstore.store.rows import stored_rows
from memstore.store.tables import IN_STORED_ORDER, NOT_IMPORTING, nodes, records, sessions
from memstore.types import Migrator, is_storable_text, validate_session_id

__all__ = [
    "FileImport",
    "ImportReport",
    "Progress",
    "export_session",
    "import_file",
    "import_plans",
    "import_targets",
]

BATCH_ROWS = 1000
CHUNK_BYTES = 4_000_000
"""At most this many bytes of lines are parsed and checked at a time (with BATCH_ROWS)."""
READ_AHEAD_ROWS, READ_AHEAD_BYTES = 2 * BATCH_ROWS, 1_000_000
"""How far a chunk grows (at most) while a chunked import leaves the lock free: a record read
takes ten times its bytes or more until it is inserted, so memory stays near a plain chunk's."""
Progress = Callable[[int, int], None]
"""Called as records are imported: (bytes read so far, records read so far)."""


@dataclass
class FileImport:
    """What importing one file did."""

    path: Path
    session_id: str
    records: int = 0
    nodes: int = 0
    leaf: str | None = None
    warnings: list[str] = field(default_factory=list)
    unchanged: bool = False


@dataclass
class ImportReport:
    """What an import did, file by file."""

    files: list[FileImport] = field(default_factory=list)
    failures: list[MemstoreError] = field(default_factory=list)
    """With `SessionStore.import_files`: the files refused (each left no trace), in order."""

    @property
    def records(self) -> int:
        """Records added, over all files."""
        return sum(item.records for item in self.files)

    @property
    def nodes(self) -> int:
        """Nodes added, over all files."""
        return sum(item.nodes for item in self.files)

    @property
    def warnings(self) -> list[str]:
        """Every file's warnings."""
        return [warning for item in self.files for warning in item.warnings]


# A session's lines are read from two streams in stored order, merged rather than joined record by
# record (an index lookup each): its log records, and its nodes. A node is stored with the first
# record that names it, so the next node in `_NODES_IN_ORDER` is the one a record names, unless the
# record repeats an earlier node; those few are looked up, a batch of records at a time. Both are
# streamed from the driver's cursor (server-side ones on PostgreSQL), a batch at a time.
_RECORDS_IN_ORDER = Prepared(
    select(records.c.kind, records.c.node_id, records.c.raw)
    .where(records.c.session_id == bindparam("session_id"))
    .order_by(records.c.pk),
    streamed=True,
)
_NODES_IN_ORDER = Prepared(
    select(nodes.c.id, nodes.c.parent_id, nodes.c.turn_json, nodes.c.created_at)
    .where(nodes.c.session_id == bindparam("session_id"), IN_STORED_ORDER)
    .order_by(nodes.c.pk),
    streamed=True,
)
_LogRow = tuple[str, str | None, str | None]  # kind, node_id, raw
_NodeRow = tuple[str, str | None, str, int]  # id, parent_id, turn_json, created_at


def _render(kind: str, node_id: str | None, node: _NodeRow | None) -> str:
    """The line (an append: the two lines) the original writer writes for a record; `node` is
    the stored node the record names, None for a head."""
    assert node_id is not None, "a record without its raw line names a node"
    if kind == "head":
        return head_line(node_id)
    assert node is not None, f"record of node {node_id!r} read without its node"
    _, parent_id, turn_json, created_at = node
    if kind == "append":
        return append_lines(node_id, parent_id, turn_json, created_at)
    return node_line(node_id, parent_id, turn_json, created_at)


class _StoredLines:
    """A session's stored lines, a batch of records at a time (see `_RECORDS_IN_ORDER`)."""

    def __init__(
        self, session_id: str, records: Iterator[_LogRow], nodes: Iterator[_NodeRow]
    ) -> None:
        self.session_id = session_id
        self.records = records
        self.nodes = nodes
        self.pending = next(nodes, None)  # the first node no record has named yet

    @classmethod
    def open(cls, session_id: str) -> Plan[_StoredLines]:
        """Start both streams (each query runs when first read)."""
        params = {"session_id": session_id}
        records: Any = yield _RECORDS_IN_ORDER, params
        nodes: Any = yield _NODES_IN_ORDER, params
        return cls(session_id, records, nodes)

    def next_batch(self) -> Plan[tuple[str, int]]:
        """The text of the next batch of records, exactly as written, and how many lines it
        holds; ("", 0) at the end."""
        batch = list(itertools.islice(self.records, BATCH_ROWS))
        texts: list[str] = []
        lines = len(batch)
        repeated: dict[int, _LogRow] = {}  # position in `texts`: a record of an earlier node
        for record in batch:
            kind, node_id, raw = record
            node = None
            if kind == "append" or kind == "node":
                lines += kind == "append"  # a node line and a head line
                if self.pending is not None and self.pending[0] == node_id:
                    node, self.pending = self.pending, next(self.nodes, None)
                elif raw is None:
                    repeated[len(texts)] = record
                    texts.append("")  # rendered below, once its node is read
                    continue
            texts.append(raw if raw is not None else _render(kind, node_id, node))
        if repeated:
            ids = {node_id for _, node_id, _ in repeated.values() if node_id is not None}
            found = {row.id: tuple(row) for row in (yield node_rows(self.session_id, ids))}
            for position, (kind, node_id, _) in repeated.items():
                texts[position] = _render(kind, node_id, found.get(node_id))
        return "".join(texts), lines

    def close(self) -> None:
        """Close both cursors (also when the caller stops early)."""
        for stream in (self.records, self.nodes):
            close = getattr(stream, "close", None)
            if close is not None:
                close()


def _common_prefix(first: bytes, second: bytes) -> int:
    """How many bytes `first` and `second` start with in common."""
    pairs = enumerate(zip(first, second, strict=False))
    return next((at for at, (a, b) in pairs if a != b), min(len(first), len(second)))


def _match_prefix(path: Path, session_id: str, file: BinaryIO) -> Plan[tuple[int, int]]:
    """Check that what was imported before is still the file's prefix; returns its bytes and
    lines. The file is left positioned just after the prefix."""
    offset = lines = 0
    stored = yield from _StoredLines.open(session_id)
    try:
        while True:
            text, count = yield from stored.next_batch()
            if not count:
                return offset, lines
            expected = text.encode()
            found = file.read(len(expected))
            if found != expected:
                same = _common_prefix(expected, found)
                raise JsonlError(
                    path,
                    lines + expected.count(b"\n", 0, same) + 1,
                    f"this line differs from what was imported into session {session_id!r} "
                    "before; the file's already-imported part changed (import it under "
                    "another session id, or delete the session first)",
                )
            offset += len(expected)
            lines += count
    finally:
        stored.close()


class _Batch:
    """Rows waiting to be inserted: nodes first (blocks and records refer to them)."""

    def __init__(self, dialect: str, session_id: str) -> None:
        self.dialect = dialect
        self.session_id = session_id
        self.nodes: list[dict[str, Any]] = []
        self.blocks: list[Iterable[dict[str, Any]]] = []  # each node's rows, built as inserted
        self.records: list[dict[str, Any]] = []
        self.node_ids: set[str] = set()
        self.earliest: int | None = None  # the times of every node added, across flushes
        self.latest: int | None = None

    def add_record(self, kind: str, node_id: str | None, raw: str | None) -> None:
        """Queue a record; a canonical head right after its canonical node makes an append."""
        last = self.records[-1] if self.records else None
        pairs = last is not None and (last["kind"], last["raw"], last["node_id"]) == (
            "node",
            None,
            node_id,
        )
        if kind == "head" and raw is None and pairs:
            last["kind"] = "append"  # type: ignore[index]
            return
        self.records.append(
            {"session_id": self.session_id, "kind": kind, "node_id": node_id, "raw": raw}
        )

    def full(self) -> bool:
        """Whether to flush now: enough rows, and not waiting for a node's head line (unless
        the file has nodes without heads, for twice as long)."""
        if len(self.records) >= 2 * BATCH_ROWS:
            return True
        return len(self.records) >= BATCH_ROWS and self.records[-1]["kind"] != "node"

    def add_node(self, record: Record) -> None:
        assert record.node_id is not None
        assert record.turn is not None
        row, blocks = stored_rows(
            self.session_id,
            record.node_id,
            record.parent,
            record.created_at,
            record.turn,
            record.turn_json,
        )
        self.nodes.append(row)
        self.blocks.append(blocks)
        self.node_ids.add(record.node_id)
        time = record.created_at
        self.earliest = time if self.earliest is None else min(self.earliest, time)
        self.latest = time if self.latest is None else max(self.latest, time)

    def session_times(self) -> dict[str, Any]:
        """The session row's new times, from the nodes added rather than the clock: created at
        the earliest (unless the row is older: it held turns before), updated at the latest."""
        if self.earliest is None:
            return {}
        earliest = literal(self.earliest)
        created = case((sessions.c.created_at > earliest, earliest), else_=sessions.c.created_at)
        return {"created_at": created, "updated_at": self.latest}

    def flush(self) -> Plan[None]:
        if self.nodes:
            blocks = itertools.chain.from_iterable(self.blocks)
            yield from insert_rows(self.dialect, self.session_id, self.nodes, blocks)
            self.nodes, self.blocks = [], []
        if self.records:
            yield INSERT_RECORDS, self.records
            self.records = []
        self.node_ids = set()


@dataclass
class _ImportOptions:
    migrators: Sequence[Migrator]
    verify: bool
    keep_mismatched: bool
    progress: Progress | None


def _import_node(
    report: FileImport, record: Record, known: set[str], batch: _Batch, options: _ImportOptions
) -> Plan[None]:
    path, number = report.path, record.line.number
    assert record.node_id is not None
    if record.parent is not None and record.parent not in known:
        raise JsonlError(
            path,
            number,
            f"node {record.node_id!r} names parent {record.parent!r}, "
            "which no earlier line defines",
        )
    if problem := node_id_problem(record.node_id):
        raise JsonlError(path, number, f"node id {record.node_id[:40]!r}... {problem}")
    if record.node_id in known:
        yield from batch.flush()
        stored = (yield node_rows(report.session_id, [record.node_id])).one()
        same = (stored.parent_id, stored.turn_json, stored.created_at)
        if same != (record.parent, record.turn_json, record.created_at):
            raise JsonlError(
                path, number, f"node {record.node_id!r} appears again with different content"
            )
        return
    if options.verify and (mismatch := verify_node_id(path, record)) is not None:
        if not options.keep_mismatched:
            raise JsonlError(
                path,
                number,
                mismatch.split(": ", 1)[1] + " (pass keep_mismatched=True to import it anyway)",
            )
        report.warnings.append(mismatch)
    known.add(record.node_id)
    batch.add_node(record)
    report.nodes += 1


def _in_chunks(
    records: Iterator[Record], longer: Callable[[], bool] | None = None
) -> Iterator[list[Record]]:
    """The records, in chunks of BATCH_ROWS (or fewer, of CHUNK_BYTES): read ahead so that the
    ids a chunk names are looked up in one query. While `longer()` holds, a chunk grows up to
    READ_AHEAD_ROWS or READ_AHEAD_BYTES. A line that does not parse is raised after the chunk
    of the lines before it was handled, as without the read-ahead."""
    while True:
        chunk: list[Record] = []
        size = 0
        ended = True
        try:
            with paused_gc():  # parsed turns: many small containers, and no cycles among them
                for record in records:
                    chunk.append(record)
                    size += len(record.line.data)
                    full = len(chunk) >= BATCH_ROWS and (
                        longer is None
                        or size >= READ_AHEAD_BYTES
                        or len(chunk) >= READ_AHEAD_ROWS
                        or not longer()
                    )
                    if full or size >= CHUNK_BYTES:
                        ended = False
                        break
        except JsonlError:
            yield chunk
            raise
        yield chunk
        if ended:
            return


def _known_ids(dialect: str, session_id: str, chunk: list[Record], batch: _Batch) -> Plan[set[str]]:
    """The ids that `chunk` names (nodes, parents, heads) which the session holds already,
    stored or waiting in `batch`. Memory stays bounded by the chunk, not the session."""
    named = {record.node_id for record in chunk} | {record.parent for record in chunk}
    wanted = [
        node_id
        for node_id in named
        if node_id is not None and node_id not in batch.node_ids and is_storable_text(node_id)
    ]
    stored = stored_ids(dialect, session_id, wanted)
    return set((yield stored).scalars()) | batch.node_ids if wanted else set(batch.node_ids)


def import_file(
    dialect: str,
    path: Path,
    session_id: str,
    *,
    migrators: Sequence[Migrator] = (),
    verify: bool = True,
    keep_mismatched: bool = False,
    progress: Progress | None = None,
) -> Plan[FileImport]:
    """Import one JSONL file into a session (incrementally); see the module docstring."""
    from memstore.foreign import check_format  # here: memstore.foreign imports the store

    validate_session_id(session_id)
    check_format(path, "jsonl")  # a pi or Claude Code file is refused, naming its format
    options = _ImportOptions(migrators, verify, keep_mismatched, progress)
    report = FileImport(path, session_id)
    with path.open("rb") as file:
        if dialect == "postgresql":
            # Plans cached while the tables were small (say, empty and never analyzed) would
            # keep checking foreign keys by sequential scan as the import grows them.
            yield text("SET LOCAL plan_cache_mode = force_custom_plan")
        owner = ImportOwner.mine()
        try:
            if dialect == "sqlite" and (yield from importing.claim_new_session(session_id, owner)):
                yield from _import_new(dialect, report, file, options, owner)
                return report
        finally:
            release(owner)
        report.leaf = yield from ensure_session(dialect, session_id, now_ms())
        offset, lines = yield from _match_prefix(path, session_id, file)
        batch = yield from _import_records(dialect, report, file, options, offset, lines)
    report.unchanged = report.records == 0
    if not report.unchanged:
        yield (
            update(sessions)
            .where(sessions.c.id == session_id)
            .values(head=report.leaf, **batch.session_times())
        )
    return report


def _import_new(
    dialect: str,
    report: FileImport,
    file: BinaryIO,
    options: _ImportOptions,
    owner: ImportOwner,
) -> Plan[None]:
    """Import a file into a new session claimed by `owner`, committing as it goes (SQLite: see
    `importing`); a refused or failed import deletes what it committed."""
    chunks = importing.Chunks()
    try:
        batch = yield from _import_records(dialect, report, file, options, 0, 0, chunks)
        values = {"head": report.leaf, **batch.session_times()}
        yield from importing.complete(report.session_id, owner, values)
    except GeneratorExit:
        raise
    except BaseException as error:
        if not chunks.committed:
            raise  # one transaction so far: it is rolled back
        try:
            yield from importing.abandon(report.session_id, owner)
        except Exception as cleanup:  # the next store opening the database deletes it
            error.add_note(f"deleting what the import wrote failed too: {cleanup}")
        raise
    report.unchanged = report.records == 0


def _import_records(
    dialect: str,
    report: FileImport,
    file: BinaryIO,
    options: _ImportOptions,
    offset: int,
    lines: int,
    chunks: importing.Chunks | None = None,
) -> Plan[_Batch]:
    """Import the file's records from `offset` (line `lines` + 1) on, checking each; sets the
    report's counts and leaf. With `chunks`, commit when they say (see `importing`)."""
    path, session_id, progress = report.path, report.session_id, options.progress
    outcome = ReadOutcome([])
    batch = _Batch(dialect, session_id)
    records = read_records(
        path, file, options.migrators, offset=offset, number=lines + 1, outcome=outcome
    )
    for chunk in _in_chunks(records, chunks.reading_ahead if chunks is not None else None):
        # The ids these lines name that the session holds already.
        known = yield from _known_ids(dialect, session_id, chunk, batch)
        for record in chunk:
            if record.kind == "node":
                yield from _import_node(report, record, known, batch, options)
            elif record.kind == "head":
                if record.node_id not in known:
                    raise JsonlError(
                        path,
                        record.line.number,
                        f"head names {record.node_id!r}, which no earlier line defines",
                    )
                report.leaf = record.node_id
            batch.add_record(record.kind, record.node_id, record.raw)
        report.records += len(chunk)
        commit = chunks is not None and chunks.due()
        if batch.full() or commit:
            yield from batch.flush()
            if progress is not None and chunk:
                progress(chunk[-1].line.end, lines + report.records)
        if commit and chunks is not None:
            yield from chunks.commit()  # the lock is free while the next lines are read
    yield from batch.flush()
    report.warnings.extend(outcome.warnings)
    return batch


FileProgress = Callable[[Path], AbstractContextManager[Progress | None]]
"""Given each file as its import starts: a context around that file's import, giving its
progress callback (bytes read, records) or None."""


def import_targets(path: Path, session_id: str | None = None) -> list[tuple[Path, str]]:
    """The (file, session id) pairs an import of `path` covers: the file itself, or each
    `*.jsonl` file of a directory; a session id defaults to the file name's stem."""
    path = path.expanduser()
    files = session_files(path, recursive=False)
    if session_id is not None and files != [path]:
        raise InvalidArgumentError(
            f"{path} is a directory: a session id can only be given for a single file"
        )
    return [(file, file.stem if session_id is None else session_id) for file in files]


def import_plans(
    dialect: str,
    path: Path,
    session_id: str | None,
    *,
    migrators: Sequence[Migrator],
    verify: bool,
    keep_mismatched: bool,
    progress: Progress | None,
) -> Iterator[tuple[Path, Plan[FileImport]]]:
    """One import plan per file that an import of `path` covers (each all or nothing), for the
    sync and async stores alike."""
    for file, target in import_targets(path, session_id):
        yield (
            file,
            import_file(
                dialect,
                file,
                target,
                migrators=migrators,
                verify=verify,
                keep_mismatched=keep_mismatched,
                progress=progress,
            ),
        )


def export_session(session_id: str, out: TextIO) -> Plan[int]:
    """Write a session's records as JSONL to `out`; returns the number of lines.

    Raises:
        UnknownSessionError: there is no such session.
    """
    found = select(sessions.c.id).where(sessions.c.id == lookup_id(session_id), NOT_IMPORTING)
    if (yield found).first() is None:
        raise UnknownSessionError(f"no session {session_id!r}")
    count = 0
    stored = yield from _StoredLines.open(session_id)
    try:
        while True:
            text, lines = yield from stored.next_batch()
            if not lines:
                return count
            out.write(text)  # one write per batch of records
            count += lines
    finally:
        stored.close()
