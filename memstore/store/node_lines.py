"""The lines of a native session's JSONL file that give one of its nodes what is kept beside it,
not in its turn: its usage (`memstore.usage`, table `node_usage`) and its writer's key
(`memstore.writer_keys`, table `node_keys`). An import reads them back into those tables; an
import through a redactor rewrites them for the nodes whose ids the redaction changed."""

from __future__ import annotations

from dataclasses import dataclass

from memstore import jsjson
from memstore.jsonl import Record
from memstore.usage import USAGE_RECORD, NodeUsage, usage_from_record, usage_record
from memstore.writer_keys import KEY_RECORD, key_from_record, key_record

__all__ = ["NodeLine", "node_line"]

_USAGE_START = f'{{"type":"{USAGE_RECORD}"'
_KEY_START = f'{{"type":"{KEY_RECORD}"'


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
