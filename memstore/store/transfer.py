"""Import of legacy JSONL session files, byte for byte, as store plans.

An import is all or nothing: a refused file leaves the database as it was. It runs in one
transaction per file, except on SQLite into a new session, which commits as it goes but stays
invisible until complete (see `importing`). It is incremental: the records already imported
must still be the file's prefix (compared byte by byte, streaming: `stored_lines`); only the
lines after them are added. Lines are read, checked and inserted in batches (`import_batch`), so
memory stays bounded by the largest line, not the file. The export, the import's inverse, is
`stored_lines.export_session`, named here too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from sqlalchemy import update

from memstore.errors import InvalidArgumentError, JsonlError, MemstoreError
from memstore.jsonl import ReadOutcome, Record, read_records, session_files, verify_node_id
from memstore.redact import Redactor
from memstore.store import import_batch, importing
from memstore.store.bulk import paused_gc
from memstore.store.import_batch import (
    FileImport,
    FileProgress,
    ImportBatch,
    ImportReport,
    Progress,
    start_import,
)
from memstore.store.import_redaction import ImportRedaction
from memstore.store.node_lines import NodeLine, node_line
from memstore.store.owners import ImportOwner, release
from memstore.store.plans import (
    Plan,
    ensure_session,
    node_id_problem,
    node_rows,
    now_ms,
    stored_ids,
)
from memstore.store.policy import Backend
from memstore.store.stored_lines import export_session, match_lines, match_prefix, stored_text
from memstore.store.tables import of_tenant, sessions
from memstore.types import Migrator, is_storable_text, validate_session_id

__all__ = [
    "FileImport",
    "FileProgress",
    "ImportReport",
    "Progress",
    "export_session",
    "import_file",
    "import_plans",
    "import_targets",
]

CHUNK_BYTES = 4_000_000
"""At most this many bytes of lines are parsed and checked at a time (with
`import_batch.batch_rows`)."""
READ_AHEAD_ROWS, READ_AHEAD_BYTES = 2 * import_batch.BATCH_ROWS, 1_000_000
"""How far a chunk grows (at most) while a chunked import leaves the lock free: a record read
takes ten times its bytes or more until it is inserted, so memory stays near a plain chunk's."""


@dataclass
class _ImportOptions:
    migrators: Sequence[Migrator]
    verify: bool
    keep_mismatched: bool
    progress: Progress | None
    redact: Redactor | None = None
    redaction: ImportRedaction | None = None
    """The file's records through `redact`: one for the whole file (the ids it changed)."""


def _import_node(
    report: FileImport, record: Record, known: set[str], batch: ImportBatch, options: _ImportOptions
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
    records: Iterator[Record], rows: int, longer: Callable[[], bool] | None = None
) -> Iterator[list[Record]]:
    """The records, in chunks of `rows` (`import_batch.batch_rows`; or fewer, of CHUNK_BYTES):
    read ahead so that the ids a chunk names are looked up in one query. While `longer()`
    holds, a chunk grows up to READ_AHEAD_ROWS or READ_AHEAD_BYTES. A line that does not parse
    is raised after the chunk of the lines before it was handled, as without the read-ahead."""
    while True:
        chunk: list[Record] = []
        size = 0
        ended = True
        try:
            with paused_gc():  # parsed turns: many small containers, and no cycles among them
                for record in records:
                    chunk.append(record)
                    size += len(record.line.data)
                    full = len(chunk) >= rows and (
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


def _node_lines(path: Path, chunk: list[Record]) -> dict[int, NodeLine]:
    """The usage and key lines of `chunk` (see `memstore.store.node_lines`), by position.

    Raises:
        JsonlError: a usage or key line that is malformed, naming the file, line and field.
    """
    found: dict[int, NodeLine] = {}
    for position, record in enumerate(chunk):
        try:
            line = node_line(record)
        except MemstoreError as exc:
            raise JsonlError(path, record.line.number, str(exc)) from exc
        if line is not None:
            found[position] = line
    return found


def _known_ids(
    backend: Backend,
    session_id: str,
    chunk: list[Record],
    batch: ImportBatch,
    line_nodes: Iterable[str] = (),
) -> Plan[set[str]]:
    """The ids that `chunk` names (nodes, parents, heads, usage and key lines' nodes) which the
    session holds already, stored or waiting in `batch`. Memory stays bounded by the chunk, not
    the session."""
    named = {record.node_id for record in chunk} | {record.parent for record in chunk}
    named |= set(line_nodes)
    wanted = [
        node_id
        for node_id in named
        if node_id is not None and node_id not in batch.node_ids and is_storable_text(node_id)
    ]
    stored = stored_ids(backend, session_id, wanted)
    return set((yield stored).scalars()) | batch.node_ids if wanted else set(batch.node_ids)


def import_file(
    backend: Backend,
    path: Path,
    session_id: str,
    *,
    migrators: Sequence[Migrator] = (),
    verify: bool = True,
    keep_mismatched: bool = False,
    progress: Progress | None = None,
    redact: Redactor | None = None,
) -> Plan[FileImport]:
    """Import one JSONL file into a session (incrementally), each turn through `redact` (see
    `import_redaction`); see the module docstring."""
    from memstore.foreign import check_format  # here: memstore.foreign imports the store

    validate_session_id(session_id)
    check_format(path, "jsonl")  # a pi or Claude Code file is refused, naming its format
    options = _ImportOptions(migrators, verify, keep_mismatched, progress, redact)
    if redact is not None:
        options.redaction = ImportRedaction(redact, path, verify=verify and not keep_mismatched)
    report = FileImport(path, session_id)
    with path.open("rb") as file:
        yield from start_import(backend)
        owner = ImportOwner.mine()
        try:
            if backend.imports_commit_as_they_go and (
                yield from importing.claim_new_session(backend, session_id, owner)
            ):
                yield from _import_new(backend, report, file, options, owner)
                return report
        finally:
            release(owner)
        report.leaf = yield from ensure_session(backend, session_id, now_ms())
        offset, lines = yield from _imported_part(path, session_id, file, options)
        batch = yield from _import_records(backend, report, file, options, offset, lines)
    report.unchanged = report.records == 0
    if not report.unchanged:
        yield (
            update(sessions)
            .where(of_tenant(sessions), sessions.c.id == session_id)
            .values(head=report.leaf, **batch.session_times())
        )
    return report


def _imported_part(
    path: Path, session_id: str, file: BinaryIO, options: _ImportOptions
) -> Plan[tuple[int, int]]:
    """The bytes and lines of the file imported before (`match_prefix`); through a redactor,
    the lines as it makes them are compared with those stored (`match_lines`), and the
    redaction goes on from there (the ids it changed), counting only the lines after them."""
    redaction = options.redaction
    if redaction is None:
        return (yield from match_prefix(path, session_id, file))
    records = redaction.records(read_records(path, file, options.migrators))
    lines = ((record.line, stored_text(record)) for record in records)
    offset, count = yield from match_lines(path, session_id, lines)
    file.seek(offset)
    redaction.changed = 0
    return offset, count


def _import_new(
    backend: Backend,
    report: FileImport,
    file: BinaryIO,
    options: _ImportOptions,
    owner: ImportOwner,
) -> Plan[None]:
    """Import a file into a new session claimed by `owner`, committing as it goes (SQLite: see
    `importing`); a refused or failed import deletes what it committed."""
    chunks = importing.Chunks()
    try:
        batch = yield from _import_records(backend, report, file, options, 0, 0, chunks)
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
    backend: Backend,
    report: FileImport,
    file: BinaryIO,
    options: _ImportOptions,
    offset: int,
    lines: int,
    chunks: importing.Chunks | None = None,
) -> Plan[ImportBatch]:
    """Import the file's records from `offset` (line `lines` + 1) on, checking each; sets the
    report's counts and leaf. With `chunks`, commit when they say (see `importing`)."""
    path, session_id, progress = report.path, report.session_id, options.progress
    outcome = ReadOutcome([])
    batch = ImportBatch(backend, session_id)
    records = read_records(
        path, file, options.migrators, offset=offset, number=lines + 1, outcome=outcome
    )
    redaction = options.redaction
    if redaction is not None:
        records = redaction.records(records)
    longer = chunks.reading_ahead if chunks is not None else None
    for chunk in _in_chunks(records, import_batch.batch_rows(backend), longer):
        # The ids these lines name that the session holds already.
        given = _node_lines(path, chunk)
        named = (line.node for line in given.values())
        known = yield from _known_ids(backend, session_id, chunk, batch, named)
        for position, record in enumerate(chunk):
            if position in given:
                line = given[position]
                if line.node not in known:
                    raise JsonlError(
                        path,
                        record.line.number,
                        f"{line.kind} names node {line.node!r}, which no earlier line defines",
                    )
                batch.add_node_line(line)
            elif record.kind == "node":
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
    report.redacted = redaction.changed if redaction is not None else 0
    return batch


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
    backend: Backend,
    path: Path,
    session_id: str | None,
    *,
    migrators: Sequence[Migrator],
    verify: bool,
    keep_mismatched: bool,
    progress: Progress | None,
    redact: Redactor | None = None,
) -> Iterator[tuple[Path, Plan[FileImport]]]:
    """One import plan per file that an import of `path` covers (each all or nothing), for the
    sync and async stores alike."""
    for file, target in import_targets(path, session_id):
        yield (
            file,
            import_file(
                backend,
                file,
                target,
                migrators=migrators,
                verify=verify,
                keep_mismatched=keep_mismatched,
                progress=progress,
                redact=redact,
            ),
        )
