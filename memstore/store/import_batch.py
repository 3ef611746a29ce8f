"""What an import builds as it goes: its rows, a batch at a time, and its report.

Both importers (legacy JSONL: `transfer`; pi and Claude Code files: `foreign`) queue a file's
rows in an `ImportBatch` and flush it every `BATCH_ROWS` records, so that memory stays bounded
by a batch, not the file.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import case, literal, text

from memstore.errors import MemstoreError
from memstore.jsonl import Record
from memstore.store.copying import BulkRows
from memstore.store.node_lines import NodeLine
from memstore.store.plans import INSERT_RECORDS, Plan, insert_rows
from memstore.store.plans.appends import upsert_usage
from memstore.store.plans.keyed import insert_keys
from memstore.store.policy import Backend
from memstore.store.rows import stored_rows
from memstore.store.tables import sessions

__all__ = [
    "BATCH_ROWS",
    "FileImport",
    "FileProgress",
    "ImportBatch",
    "ImportReport",
    "Progress",
    "batch_rows",
    "start_import",
]

BATCH_ROWS = 1000
"""Records inserted (and read back, on export) a batch at a time, times the backend's
`import_batch_scale` on import (`batch_rows`). Read as `BATCH_ROWS` wherever it is used, so
that a test can make batches tiny."""
Progress = Callable[[int, int], None]
"""Called as records are imported: (bytes read so far, records read so far)."""
FileProgress = Callable[[Path], AbstractContextManager[Progress | None]]
"""Given each file as its import starts: a context around that file's import, giving its
progress callback (bytes read, records) or None."""


def batch_rows(backend: Backend) -> int:
    """The records an import on `backend` reads, checks and inserts at a time."""
    return BATCH_ROWS * backend.import_batch_scale


def start_import(backend: Backend) -> Plan[None]:
    """Run the statements an import's transaction starts with on `backend`."""
    for statement in backend.import_setup:
        yield text(statement)


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
    redacted: int = 0
    """Turns the store's redactor changed (see `memstore.redact`)."""


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
    def redacted(self) -> int:
        """Turns the store's redactor changed, over all files."""
        return sum(item.redacted for item in self.files)

    @property
    def warnings(self) -> list[str]:
        """Every file's warnings."""
        return [warning for item in self.files for warning in item.warnings]


class ImportBatch:
    """Rows waiting to be inserted: nodes first (blocks and records refer to them)."""

    def __init__(self, backend: Backend, session_id: str) -> None:
        self.backend = backend
        self.session_id = session_id
        self.nodes: list[dict[str, Any]] = []
        self.blocks: list[Iterable[dict[str, Any]]] = []  # each node's rows, built as inserted
        self.records: list[dict[str, Any]] = []
        self.usage: list[dict[str, Any]] = []  # `node_usage` rows, from usage lines
        self.keys: list[dict[str, Any]] = []  # `node_keys` rows, from key lines
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
        rows = batch_rows(self.backend)
        if len(self.records) >= 2 * rows:
            return True
        return len(self.records) >= rows and self.records[-1]["kind"] != "node"

    def add_node(self, record: Record) -> None:
        """Queue a checked node record's rows (its `nodes` row now, its block rows as they
        are inserted)."""
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

    def add_node_line(self, line: NodeLine) -> None:
        """Queue what a usage or key line gives a node (of the session, or of this batch)."""
        row = {"session_id": self.session_id, "node_id": line.node}
        if line.usage is not None:
            self.usage.append({**row, **line.usage.row()})
        else:
            self.keys.append({**row, "key": line.key})

    def session_times(self) -> dict[str, Any]:
        """The session row's new times, from the nodes added rather than the clock: created at
        the earliest (unless the row is older: it held turns before), updated at the latest."""
        if self.earliest is None:
            return {}
        earliest = literal(self.earliest)
        created = case((sessions.c.created_at > earliest, earliest), else_=sessions.c.created_at)
        return {"created_at": created, "updated_at": self.latest}

    def flush(self) -> Plan[None]:
        """Insert what is queued: nodes, their blocks and search text, then the records."""
        if self.nodes:
            blocks = itertools.chain.from_iterable(self.blocks)
            yield from insert_rows(self.backend, self.session_id, self.nodes, blocks, bulk=True)
            self.nodes, self.blocks = [], []
        if self.records:
            yield BulkRows(INSERT_RECORDS, self.records)
            self.records = []
        if self.usage:
            yield from upsert_usage(self.backend, self.usage)
            self.usage = []
        if self.keys:
            yield from insert_keys(self.backend, self.keys)
            self.keys = []
        self.node_ids = set()
