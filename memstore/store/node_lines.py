"""The lines of a native session's JSONL file that give one of its nodes what is kept beside it,
not in its turn: its usage (`memstore.usage`, table `node_usage`) and its writer's key
(`memstore.writer_keys`, table `node_keys`). An import reads them back into those tables; an
import through a redactor rewrites them for the nodes whose ids the redaction changed."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import ColumnElement, and_, func, or_

from memstore import jsjson
from memstore.jsonl import Record
from memstore.store.tables import records
from memstore.usage import USAGE_RECORD, NodeUsage, usage_from_record, usage_record
from memstore.writer_keys import KEY_RECORD, key_from_record, key_record

__all__ = ["NODE_LINE_TYPES", "NodeLine", "node_line", "node_line_opening", "node_lines_of"]

NODE_LINE_TYPES = (USAGE_RECORD, KEY_RECORD)
"""The record types of the lines that give a node what is kept beside it."""

_USAGE_START = f'{{"type":"{USAGE_RECORD}"'
_KEY_START = f'{{"type":"{KEY_RECORD}"'


def node_line_opening(kind: str, node_id: str | None = None) -> str:
    """How a line of type `kind` (one of `NODE_LINE_TYPES`) for node `node_id` begins, as
    written (None: for any node)."""
    opening = f'{{"type":"{kind}","node":'
    return opening if node_id is None else opening + jsjson.dumps(node_id)


def node_lines_of(ids: Sequence[str]) -> ColumnElement[bool]:
    """The `records` condition that finds the log's usage and key lines of the nodes `ids`:
    what goes with those nodes when an erasure or a prune removes them, so that no export
    carries a line naming a node it no longer holds (an import refuses such a line)."""
    by_length: dict[int, list[str]] = {}  # one `IN` per length of opening, not a LIKE per
    for kind in NODE_LINE_TYPES:  # line: SQLite refuses an expression 1,000 ORs deep
        for node_id in ids:
            opening = node_line_opening(kind, node_id)
            by_length.setdefault(len(opening), []).append(opening)
    return and_(
        records.c.kind == "other",
        records.c.node_id.is_(None),
        or_(
            *(
                func.substr(records.c.raw, 1, length).in_(openings)
                for length, openings in by_length.items()
            )
        ),
    )


@dataclass(frozen=True)
class NodeLine:
    """What one line gives node `node`: its usage, or its writer's key."""

    node: str
    usage: NodeUsage | None = None
    key: str | None = None

    @property
    def kind(self) -> str:
        """The line's record type, as its errors name it."""
        return USAGE_RECORD if self.usage is not None else KEY_RECORD

    def text(self, node: str) -> str:
        """The line (without its newline) that gives node `node` what this line gives."""
        if self.usage is not None:
            return usage_record(node, self.usage)
        assert self.key is not None
        return key_record(node, self.key)


def node_line(record: Record) -> NodeLine | None:
    """The node line `record` is, or None for a record of another kind (told from its first
    characters before any parsing, so other lines cost nothing).

    Raises:
        InvalidArgumentError: a usage or key line that is malformed.
    """
    raw = record.raw
    if record.kind != "other" or raw is None:
        return None
    if raw.startswith(_USAGE_START):
        usage = usage_from_record(jsjson.loads(raw))
        return None if usage is None else NodeLine(usage[0], usage=usage[1])
    if raw.startswith(_KEY_START):
        key = key_from_record(jsjson.loads(raw))
        return None if key is None else NodeLine(key[0], key=key[1])
    return None
