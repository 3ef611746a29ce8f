"""Importing pi and Claude Code session files (see `memstore.foreign`) as store plans.

The same guarantees as the JSONL adapter (`transfer`), whose machinery this reuses: one
transaction per file, nothing written when a line is refused, a torn final line skipped with a
warning, and incremental imports (what was imported before must still be the file's prefix; only
the lines after it are added). Every line is stored as a record with its exact text, so
`export_session` writes the file back byte for byte; a message line's record names its node.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sqlalchemy import update

from memstore import jsjson
from memstore.errors import InvalidArgumentError, JsonlError
from memstore.foreign import ForeignReader, ForeignTarget, foreign_targets, new_reader
from memstore.foreign._common import Entry, Problem, decode_line
from memstore.jsonl import Line, Record, is_torn, read_lines
from memstore.redact import Redactor
from memstore.store.copying import BulkRows
from memstore.store.import_batch import FileImport, ImportBatch, Progress, start_import
from memstore.store.import_redaction import ImportRedaction
from memstore.store.plans import (
    Plan,
    ensure_session,
    node_id_problem,
    now_ms,
    session_info,
    update_session,
)
from memstore.store.policy import Backend
from memstore.store.prepared import Prepared
from memstore.store.stored_lines import match_lines, match_prefix
from memstore.store.tables import node_usage, of_tenant, sessions
from memstore.types import validate_session_id

__all__ = ["foreign_import_plans", "import_foreign_file"]

INSERT_USAGE = Prepared.insert(node_usage, [c.name for c in node_usage.columns])


class _Lines:
    """A file's lines as entries: each parsed and read in order, a torn final line skipped."""

    def __init__(self, path: Path, reader: ForeignReader, report: FileImport) -> None:
        self.path = path
        self.reader = reader
        self.report = report

    def entries(self, file: Any) -> Iterator[tuple[Line, str, Entry]]:
        for line in read_lines(file, path=self.path):
            try:
                raw, value = decode_line(self.path, line)
            except JsonlError as error:
                if not is_torn(line, error):
                    raise
                self.report.warnings.append(
                    f"{self.path}:{line.number}: the last line is torn (no newline, not JSON: "
                    f"an agent still writing it?); imported the {line.offset} bytes before it"
                )
                return
            try:
                entry = Entry() if value is None else self.reader.read(value)
            except Problem as problem:
                raise JsonlError(self.path, line.number, str(problem)) from None
            notes = self.reader.facts.notes
            self.report.warnings.extend(f"{self.path}:{line.number}: {note}" for note in notes)
            notes.clear()
            yield line, raw, entry


class _UsageBatch:
    """`node_usage` rows waiting for their nodes to be inserted."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.rows: list[dict[str, Any]] = []

    def add(self, node_id: str, entry: Entry) -> None:
        if entry.usage is not None:
            self.rows.append(
                {"session_id": self.session_id, "node_id": node_id, **entry.usage._asdict()}
            )

    def flush(self) -> Plan[None]:
        if self.rows:
            yield BulkRows(INSERT_USAGE, self.rows)
            self.rows = []


def import_foreign_file(
    backend: Backend,
    target: ForeignTarget,
    *,
    progress: Progress | None = None,
    redact: Redactor | None = None,
) -> Plan[FileImport]:
    """Import one pi or Claude Code file into its session (incrementally), each turn through
    `redact` (see `import_redaction`)."""
    path, session_id = target.path, validate_session_id(target.session_id)
    report = FileImport(path, session_id)
    reader = new_reader(target.agent)
    redaction = None if redact is None else ImportRedaction(redact, path)
    with path.open("rb") as file:
        yield from start_import(backend)
        report.leaf = yield from ensure_session(backend, session_id, now_ms())
        if redaction is None:
            _, imported = yield from match_prefix(path, session_id, file)
        else:  # the lines as the redactor makes them are those stored
            lines = _redacted_lines(target, file, redaction)
            _, imported = yield from match_lines(path, session_id, lines)
            redaction.changed = 0
        file.seek(0)  # read again from the start: the imported lines rebuild the reader's tree
        batch, usage = ImportBatch(backend, session_id), _UsageBatch(session_id)
        for line, raw, entry in _Lines(path, reader, report).entries(file):
            if line.number <= imported:
                continue
            if redaction is not None and entry.turn is not None and entry.node_id is not None:
                raw, turn = redaction.entry(line.number, raw, entry.turn)
                entry = entry._replace(turn=turn)
            _add(path, line, raw, entry, batch, usage)
            report.records += 1
            report.nodes += entry.node_id is not None
            if batch.full():
                yield from batch.flush()
                yield from usage.flush()
                if progress is not None:
                    progress(line.end, line.number)
        yield from batch.flush()
        yield from usage.flush()
    report.unchanged = report.records == 0
    report.redacted = redaction.changed if redaction is not None else 0
    if not report.unchanged:
        report.leaf = reader.facts.head
        yield from _describe_session(backend, target, reader, batch.session_times())
    return report


def _redacted_lines(
    target: ForeignTarget, file: Any, redaction: ImportRedaction
) -> Iterator[tuple[Line, str]]:
    """Each line of the file and its text as stored through `redaction` (read with a reader of
    its own: the import reads the file again from its start)."""
    report = FileImport(target.path, target.session_id)  # its warnings: the import's own
    for line, raw, entry in _Lines(target.path, new_reader(target.agent), report).entries(file):
        if entry.turn is not None and entry.node_id is not None:
            raw, _ = redaction.entry(line.number, raw, entry.turn)
        yield line, raw


def _add(
    path: Path, line: Line, raw: str, entry: Entry, batch: ImportBatch, usage: _UsageBatch
) -> None:
    """Queue one line's rows: its record, and its node (with usage) if it makes one."""
    if entry.node_id is None or entry.turn is None:
        batch.add_record("other", None, raw)
        return
    if problem := node_id_problem(entry.node_id):
        raise JsonlError(path, line.number, f"id {entry.node_id[:40]!r} {problem}")
    turn_json = jsjson.dumps(entry.turn)
    record = Record(
        line, "node", raw, entry.node_id, entry.parent, entry.created_at, entry.turn, turn_json
    )
    batch.add_node(record)
    batch.add_record("node", entry.node_id, raw)
    usage.add(entry.node_id, entry)


def _describe_session(
    backend: Backend, target: ForeignTarget, reader: ForeignReader, times: dict[str, Any]
) -> Plan[None]:
    """The session's head, title, metadata and tags, from what its file said (added to what
    the session held; the file's say wins), and its times from its nodes'."""
    facts = reader.facts
    info = yield from session_info(target.session_id)
    metadata = {**info.metadata, **facts.metadata()}
    if target.parent_session is not None:
        metadata["parentSession"] = target.parent_session
    title = facts.title if facts.title is not None else info.title
    tags = sorted(set(info.tags) | facts.tags)
    try:
        yield from update_session(
            backend, target.session_id, title=title, tags=tags, metadata=metadata
        )
    except InvalidArgumentError as exc:  # the file's header holds what the database cannot
        raise JsonlError(target.path, None, f"the session's {exc}") from exc
    yield (
        update(sessions)
        .where(of_tenant(sessions), sessions.c.id == target.session_id)
        .values(head=facts.head, **times)
    )


def foreign_import_plans(
    backend: Backend,
    path: Path,
    agent: str,
    *,
    progress: Progress | None = None,
    redact: Redactor | None = None,
) -> Iterator[tuple[Path, Plan[FileImport]]]:
    """One import plan per file an import of `path` covers (each its own transaction)."""
    for target in foreign_targets(path, agent):
        yield target.path, import_foreign_file(backend, target, progress=progress, redact=redact)
