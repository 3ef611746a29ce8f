"""What the pi and Claude Code readers share: one entry per line, the tree they keep, the
session facts they gather, and the checks that name a line when the input is wrong.

A reader is fed a file's lines in order and says, for each, whether it becomes a node (a turn
under its parent's node) or stays a record kept only for its bytes. Entries that are not
messages (a model change, a label, a progress record) still sit in the source's tree: an entry
under them hangs from the nearest message above them (their *anchor*).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from memstore import jsjson
from memstore.errors import InvalidJsonError, JsonlError
from memstore.jsonl import BOM, Line, turn_problem
from memstore.store.compaction import METADATA_KEY
from memstore.types import MAX_CREATED_AT, MIN_CREATED_AT

__all__ = [
    "AGENTS",
    "Entry",
    "ForeignReader",
    "Mapper",
    "Problem",
    "SessionFacts",
    "Tree",
    "Unmapped",
    "UsageRow",
    "as_float",
    "as_int",
    "checked_turn",
    "condensed_turn",
    "content_blocks",
    "decode_line",
    "epoch_ms",
    "lenient",
    "need",
    "shared_block",
]

AGENTS = ("pi", "claude-code")


class Problem(ValueError):  # noqa: N818 (not raised out of memstore: becomes a JsonlError)
    """What is wrong with one line; the reader's caller names the file and line."""


class Unmapped(Problem):
    """A well-formed part of a kind memstore has no block for: kept as it is, without a note."""


class UsageRow(NamedTuple):
    """What a model call cost, for the `node_usage` table."""

    provider: str | None
    model: str | None
    input_tokens: int | None
    output_tokens: int | None
    cache_read_tokens: int | None
    cache_write_tokens: int | None
    cost_usd: float | None


class Entry(NamedTuple):
    """What one line becomes: a node (`node_id` set) or a record kept only for its bytes."""

    node_id: str | None = None
    parent: str | None = None
    created_at: int = 0
    turn: dict[str, Any] | None = None
    usage: UsageRow | None = None


@dataclass
class SessionFacts:
    """Session-level facts read from the file: its metadata, title, tags and head."""

    agent: str
    meta: dict[str, Any] = field(default_factory=dict)
    title: str | None = None
    tags: set[str] = field(default_factory=set)
    head: str | None = None
    notes: list[str] = field(default_factory=list)  # what the last line needed recovering from

    def metadata(self) -> dict[str, Any]:
        """The session's metadata: the agent it came from, then what its file says."""
        return {"agent": self.agent, **self.meta}


class ForeignReader(Protocol):
    """Reads one agent's session file, a parsed line at a time."""

    facts: SessionFacts

    def read(self, value: Any) -> Entry:
        """The entry that one parsed line makes (raises Problem for a line to refuse)."""
        ...


class Tree:
    """The source's tree of entry ids, and the node each entry hangs from (its anchor)."""

    def __init__(self, *, orphans: list[str] | None = None) -> None:
        self.anchors: dict[str, str | None] = {}  # entry id -> the nearest node at or above it
        self.orphans = orphans  # given: an unknown parent makes a root, noted here

    def anchor_of_parent(self, entry_id: str, parent: str | None) -> str | None:
        """The node an entry under `parent` hangs from. An unknown parent is a Problem, or,
        for a tree that takes orphans, a root with a note."""
        if parent is None:
            return None
        if parent not in self.anchors:
            problem = f"entry {entry_id!r} names parent {parent!r}, which no earlier line defines"
            if self.orphans is None:
                raise Problem(problem)
            self.orphans.append(f"{problem}; kept as a root")
            return None
        return self.anchors[parent]

    def add(self, entry_id: str, anchor: str | None) -> None:
        self.anchors[entry_id] = anchor

    def __contains__(self, entry_id: object) -> bool:
        return entry_id in self.anchors


def decode_line(path: object, line: Line) -> tuple[str, Any]:
    """A line's text (with its newline, as written) and its JSON object (None: a blank line,
    or JSON that is not an object, which the agents' own readers skip too).

    Raises:
        JsonlError: naming the file and line (its cause tells a torn tail from a bad line).
    """
    if line.offset == 0 and line.data.startswith(BOM):
        raise JsonlError(path, line.number, "the file starts with a byte order mark (BOM)")
    try:
        text = line.data.decode("utf-8")
    except UnicodeDecodeError as exc:
        error = JsonlError(path, line.number, f"invalid UTF-8 at byte {line.offset + exc.start}")
        raise error from exc
    raw = text + "\n" if line.terminated else text
    if not text.strip(" \t\r"):
        return raw, None
    try:
        value = jsjson.loads(text)
    except InvalidJsonError as exc:
        raise JsonlError(path, line.number, f"not valid JSON: {exc}") from exc
    return raw, value if isinstance(value, dict) else None


Mapper = Callable[[Any, list[str]], dict[str, Any]]
"""Maps a content part to a memstore block, noting in the list what it could not keep whole."""


def lenient(block: Callable[[Any], dict[str, Any]], prefix: str) -> Mapper:
    """`block`, except that a string among the parts is a text block (its text is kept and
    searched), and a part it refuses is kept as an unknown block `<prefix>.<type>`: silently
    for a kind memstore has no block for (`Unmapped`), with a note for a malformed part."""

    def mapped(part: Any, notes: list[str]) -> dict[str, Any]:
        if isinstance(part, str):
            return {"kind": "text", "text": part}
        try:
            return block(part)
        except Problem as problem:
            kind = part.get("type") if isinstance(part, dict) else None
            name = f"{prefix}.{kind if isinstance(kind, str) else 'invalid'}"
            if not isinstance(problem, Unmapped):
                notes.append(f"{problem}; kept as a {name} block, which search does not read")
            return {"kind": name, "part": part}

    return mapped


def content_blocks(content: Any, block: Mapper, notes: list[str]) -> list[dict[str, Any]]:
    """memstore blocks from a message's content: a string, or parts that `block` maps."""
    if content is None:
        return []
    if isinstance(content, str):
        return [{"kind": "text", "text": content}]
    return [block(part, notes) for part in need(content, list, "message content")]


def shared_block(part: dict[str, Any], call_type: str, input_key: str) -> dict[str, Any] | None:
    """The block of a text, thinking or tool call part, which both agents write alike (their
    tool call's type and input key aside); None for any other part."""
    kind = part.get("type")
    if kind == "text":
        return {"kind": "text", "text": need(part.get("text"), str, "text part's text")}
    if kind == "thinking":
        return {"kind": "thinking", "text": need(part.get("thinking"), str, "thinking part")}
    if kind == call_type:
        call_id = need(part.get("id"), str, f"{call_type} id")
        name = need(part.get("name"), str, f"{call_type} name")
        return {"kind": "tool_call", "id": call_id, "name": name, "input": part.get(input_key)}
    return None


def need(value: Any, kind: type | tuple[type, ...], what: str) -> Any:
    """`value` if it is of `kind`; else Problem naming `what`."""
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise Problem(f"{what} is {type(value).__name__}, not what the format says")
    return value


def epoch_ms(value: Any, fallback: int = 0) -> int:
    """Epoch milliseconds from a number or an ISO 8601 time; `fallback` when neither.

    Raises:
        Problem: a number outside the signed 64-bit range both databases hold.
    """
    if isinstance(value, bool):
        return fallback
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return _in_range(int(value), value)
    if isinstance(value, str):
        try:
            moment = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return fallback
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=datetime.UTC)
        return int(moment.timestamp() * 1000)
    return fallback


def _in_range(milliseconds: int, written: Any) -> int:
    """`milliseconds` if the databases can hold it; else Problem naming the time as written."""
    if not MIN_CREATED_AT <= milliseconds <= MAX_CREATED_AT:
        raise Problem(
            f"timestamp {written!r} is out of range: the databases hold times (epoch "
            "milliseconds) from -2**63 to 2**63-1"
        )
    return milliseconds


def checked_turn(turn: dict[str, Any]) -> dict[str, Any]:
    """`turn` if memstore's Turn accepts it; else Problem saying why."""
    problem = turn_problem(turn)
    if problem is not None:
        raise Problem(problem)
    return turn


def condensed_turn(summary: str, condensed: dict[str, Any]) -> dict[str, Any]:
    """A summary turn carrying memstore's record of what it condensed (as compaction writes)."""
    blocks = [{"kind": "text", "text": summary}]
    return {"role": "user", "blocks": blocks, METADATA_KEY: {"condensed": condensed}}


def as_int(value: Any) -> int | None:
    """An integer count, or None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def as_float(value: Any) -> float | None:
    """A number, or None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)
