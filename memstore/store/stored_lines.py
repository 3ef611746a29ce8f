"""A session read back as the lines of its JSONL file, exactly as written: streamed in stored
order for an export, and compared with a file that is imported again (its already-imported
part must be unchanged)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from sqlalchemy import bindparam, select

from memstore.errors import JsonlError, UnknownSessionError
from memstore.jsonl import Line, Record, append_lines, head_line, node_line
from memstore.store import import_batch
from memstore.store.plans import Plan, lookup_id, node_rows
from memstore.store.prepared import Prepared
from memstore.store.tables import (
    IN_STORED_ORDER,
    NOT_IMPORTING,
    nodes,
    of_tenant,
    records,
    sessions,
)

__all__ = ["StoredLines", "export_session", "match_lines", "match_prefix", "stored_text"]

# A session's lines are read from two streams in stored order, merged rather than joined record by
# record (an index lookup each): its log records, and its nodes. A node is stored with the first
# record that names it, so the next node in `_NODES_IN_ORDER` is the one a record names, unless the
# record repeats an earlier node; those few are looked up, a batch of records at a time. Both are
# streamed from the driver's cursor (server-side ones on PostgreSQL), a batch at a time.
_RECORDS_IN_ORDER = Prepared(
    select(records.c.kind, records.c.node_id, records.c.raw)
    .where(of_tenant(records), records.c.session_id == bindparam("session_id"))
    .order_by(records.c.pk),
    streamed=True,
)
_NODES_IN_ORDER = Prepared(
    select(nodes.c.id, nodes.c.parent_id, nodes.c.turn_json, nodes.c.created_at)
    .where(of_tenant(nodes), nodes.c.session_id == bindparam("session_id"), IN_STORED_ORDER)
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


def stored_text(record: Record) -> str:
    """The line a file's record is stored as (its exact text, or the one its rendering gives)."""
    if record.raw is not None:
        return record.raw
    assert record.node_id is not None, "a record without its raw line names a node"
    if record.kind == "head":
        return head_line(record.node_id)
    return node_line(record.node_id, record.parent, record.turn_json, record.created_at)


class StoredLines:
    """A session's stored lines, a batch of records at a time (see `_RECORDS_IN_ORDER`)."""

    def __init__(
        self, session_id: str, records: Iterator[_LogRow], nodes: Iterator[_NodeRow]
    ) -> None:
        self.session_id = session_id
        self.records = records
        self.nodes = nodes
        self.pending = next(nodes, None)  # the first node no record has named yet

    @classmethod
    def open(cls, session_id: str) -> Plan[StoredLines]:
        """Start both streams (each query runs when first read)."""
        params = {"session_id": session_id}
        records: Any = yield _RECORDS_IN_ORDER, params
        nodes: Any = yield _NODES_IN_ORDER, params
        return cls(session_id, records, nodes)

    def next_batch(self) -> Plan[tuple[str, int]]:
        """The text of the next batch of records, exactly as written, and how many lines it
        holds; ("", 0) at the end."""
        batch = list(itertools.islice(self.records, import_batch.BATCH_ROWS))
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


def common_prefix(first: bytes, second: bytes) -> int:
    """How many bytes `first` and `second` start with in common."""
    pairs = enumerate(zip(first, second, strict=False))
    return next((at for at, (a, b) in pairs if a != b), min(len(first), len(second)))


def match_prefix(path: Path, session_id: str, file: BinaryIO) -> Plan[tuple[int, int]]:
    """Check that what was imported before is still the file's prefix; returns its bytes and
    lines. The file is left positioned just after the prefix."""
    offset = lines = 0
    stored = yield from StoredLines.open(session_id)
    try:
        while True:
            text, count = yield from stored.next_batch()
            if not count:
                return offset, lines
            expected = text.encode()
            found = file.read(len(expected))
            if found != expected:
                same = common_prefix(expected, found)
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


def match_lines(
    path: Path, session_id: str, lines: Iterator[tuple[Line, str]]
) -> Plan[tuple[int, int]]:
    """`match_prefix` for a file whose lines are stored other than as read (through a store's
    redactor): `lines` gives each line of the file and its text as stored, compared line by line
    with the session's; returns the bytes and lines of the file that were imported before. The
    file is left wherever `lines` stopped reading it."""
    offset = count = 0
    stored = yield from StoredLines.open(session_id)
    try:
        pending: list[str] = []  # stored lines not compared yet, last first
        rest = ""  # the start of a stored line that the next batch ends
        while True:
            if not pending:
                text, read = yield from stored.next_batch()
                if not read and not rest:
                    return offset, count
                pieces = (rest + text).split("\n")
                rest = pieces.pop() if read else ""  # at the end, the last line has no newline
                pending = [piece + "\n" for piece in reversed(pieces)]
                if not read:
                    pending[0] = pending[0][:-1]
                continue  # (a batch may end no line)
            expected = pending.pop()
            found = next(lines, None)
            if found is None or found[1] != expected:
                raise JsonlError(
                    path,
                    count + 1,
                    "this line, as the store's redactor makes it, differs from what was "
                    f"imported into session {session_id!r} before; the file's already-imported "
                    "part changed, or was imported through another redactor (import it under "
                    "another session id, or delete the session first)",
                )
            offset, count = found[0].end, found[0].number
    finally:
        stored.close()


def export_session(session_id: str, out: TextIO) -> Plan[int]:
    """Write a session's records as JSONL to `out`; returns the number of lines.

    Raises:
        UnknownSessionError: there is no such session.
    """
    found = select(sessions.c.id).where(sessions.c.id == lookup_id(session_id), NOT_IMPORTING)
    if (yield found).first() is None:
        raise UnknownSessionError(f"no session {session_id!r}")
    count = 0
    stored = yield from StoredLines.open(session_id)
    try:
        while True:
            text, lines = yield from stored.next_batch()
            if not lines:
                return count
            out.write(text)  # one write per batch of records
            count += lines
    finally:
        stored.close()
