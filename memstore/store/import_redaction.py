"""Imports through a store's redactor (`memstore.redact`): the records of one file as the store
keeps them once its redactor has run on every turn.

A legacy JSONL node whose turn the redactor changed is stored as the line the original
JavaScript writer would write for the redacted turn, under the redacted turn's content address;
the nodes under it (their parent changed), the head, usage and key lines naming them follow the new
ids. Every other line is kept byte for byte. A pi or Claude Code entry the redactor changed
keeps its id; its line is the entry with its strings redacted, written as `JSON.stringify` would
(which needs a redactor that reads lines: `secrets()` does).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memstore import jsjson
from memstore.errors import JsonlError, MemstoreError
from memstore.hashing import hash_node
from memstore.jsonl import Record, verify_node_id
from memstore.redact import Redactor, SecretRedactor, apply_redactor
from memstore.store.node_lines import node_line
from memstore.types import Turn

__all__ = ["ImportRedaction"]


class ImportRedaction:
    """The redaction of one file's records; `changed` counts the turns the redactor changed."""

    def __init__(self, redact: Redactor, path: Path, *, verify: bool = True) -> None:
        self.redact = redact
        self.path = path
        self.verify = verify
        self.changed = 0
        self.ids: dict[str, str] = {}
        """The file's node ids that the redaction changed, and their new ids."""

    def records(self, records: Iterator[Record]) -> Iterator[Record]:
        """Legacy JSONL records as the store keeps them (see the module)."""
        for record in records:
            yield self._record(record)

    def _record(self, record: Record) -> Record:
        if record.kind == "node":
            return self._node(record)
        if record.kind == "head" and record.node_id in self.ids:
            return record._replace(raw=None, node_id=self.ids[record.node_id])
        raw = record.raw
        if self.ids and raw is not None:
            try:
                found = node_line(record)
            except MemstoreError:
                return record  # refused, naming the line, where the import reads node lines
            if found is not None and found.node in self.ids:
                line = found.text(self.ids[found.node])
                return record._replace(raw=line + ("\n" if raw.endswith("\n") else ""))
        return record

    def _skips(self, turn_json: str) -> bool:
        """Whether the redactor certainly leaves a turn with this JSON text as it is, told
        without parsing it (`SecretRedactor.may_change`)."""
        return isinstance(self.redact, SecretRedactor) and not self.redact.may_change(turn_json)

    def _node(self, record: Record) -> Record:
        assert record.node_id is not None
        if self._skips(record.turn_json) and record.parent not in self.ids:
            return record
        turn = Turn.from_json_text(record.turn_json)
        redacted = apply_redactor(self.redact, turn)
        changed = redacted.json_text() != record.turn_json
        parent = self.ids.get(record.parent, record.parent) if record.parent else record.parent
        if not changed and parent == record.parent:
            return record
        if self.verify and (mismatch := verify_node_id(self.path, record)) is not None:
            raise JsonlError(self.path, record.line.number, mismatch.split(": ", 1)[1])
        self.changed += changed
        node_id = hash_node(parent, redacted, record.created_at)
        self.ids[record.node_id] = node_id
        return Record(
            record.line,
            "node",
            None,  # the line the writer writes for this node
            node_id,
            parent,
            record.created_at,
            redacted.to_json(),
            redacted.json_text(),
        )

    def entry(self, line_number: int, raw: str, turn: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """A pi or Claude Code entry's line and turn through the redactor: as they were, or
        the line with its strings redacted (`SecretRedactor.redact_json`) and the turn.

        Raises:
            JsonlError: the redactor changed the turn but cannot redact lines.
        """
        if self._skips(jsjson.dumps(turn)):
            return raw, turn
        redacted = apply_redactor(self.redact, Turn.model_validate(turn))
        if redacted.to_json() == turn:
            return raw, turn
        if not isinstance(self.redact, SecretRedactor):
            raise JsonlError(
                self.path,
                line_number,
                "the store's redactor changed this entry, and only a redactor that reads whole "
                "lines (memstore.redact.secrets()) can redact a pi or Claude Code file, whose "
                "lines are kept as they are",
            )
        self.changed += 1
        body = raw.rstrip("\r\n")
        line = jsjson.dumps(self.redact.redact_json(jsjson.loads(body))) + raw[len(body) :]
        return line, redacted.to_json()
