"""The legacy JSONL session file: reading it line by line, checking it, writing it byte-exact.

One file per session, one record per line, `\\n`-terminated: `{"type":"node","node":...}` and
`{"type":"head","leaf":...}` as the original writer wrote them with `JSON.stringify`. This module
has no SQL: the SQL store's import and export (`memstore.store.transfer`) and the file-backed
`JsonlSessionStore` both build on it.
"""

from __future__ import annotations

import hashlib
import logging
import os
import stat
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Literal, NamedTuple

from memstore import jsjson
from memstore.blocks import turn_problem
from memstore.errors import InvalidJsonError, InvalidSessionIdError, JsonlError
from memstore.graph import SessionGraph
from memstore.hashing import hash_node_text
from memstore.tombstones import is_tombstone
from memstore.types import (
    MAX_CREATED_AT,
    MIN_CREATED_AT,
    Migrator,
    SessionNode,
    Turn,
    validate_session_id,
)

__all__ = [
    "JsonlSessionStore",
    "Line",
    "Record",
    "append_lines",
    "export_file",
    "export_files",
    "file_name_key",
    "head_line",
    "looks_like_legacy",
    "node_line",
    "parse_record",
    "read_lines",
    "read_records",
    "session_file",
    "session_files",
    "turn_problem",
]

logger = logging.getLogger(__name__)

BOM = b"\xef\xbb\xbf"
CHUNK_SIZE = 1 << 20
MAX_LINE_BYTES = 256 << 20
"""The longest line memstore reads (256 MiB): a longer one is refused as soon as it is seen,
before it is held whole, so reading takes at most this much memory plus one chunk."""
RecordKind = Literal["node", "head", "other"]


class Line(NamedTuple):
    """One line of a file: its 1-based number, byte offset, bytes (without the newline).

    Lines and records are named tuples, not frozen dataclasses: as immutable, and made in a
    third of the time, which counts at millions of lines per import."""

    number: int
    offset: int
    data: bytes
    terminated: bool

    @property
    def end(self) -> int:
        """The byte offset just past this line and its newline."""
        return self.offset + len(self.data) + self.terminated


def read_lines(
    stream: BinaryIO, *, offset: int = 0, number: int = 1, path: object = "<stream>"
) -> Iterator[Line]:
    """The lines of a binary stream, split on `\\n` alone, read in bounded chunks.

    `offset` and `number` say where the stream's current position is in the file; `path` names
    it in errors.

    Raises:
        JsonlError: a line is longer than MAX_LINE_BYTES (raised before it is held whole).
    """
    pending: list[bytes] = []  # the pieces of an unfinished line: joined once, not copied per chunk
    size = 0
    start = offset
    while chunk := stream.read(CHUNK_SIZE):
        *complete, rest = chunk.split(b"\n")
        for piece in complete:
            data = b"".join((*pending, piece)) if pending else piece
            pending, size = [], 0
            if len(data) > MAX_LINE_BYTES:
                raise _too_long(path, number)
            yield Line(number, start, data, True)
            number += 1
            start += len(data) + 1
        if rest:
            pending.append(rest)
            size += len(rest)
            if size > MAX_LINE_BYTES:
                raise _too_long(path, number)
    if pending:
        yield Line(number, start, b"".join(pending), False)


def _too_long(path: object, number: int) -> JsonlError:
    return JsonlError(
        path,
        number,
        f"the line is longer than {MAX_LINE_BYTES >> 20} MiB, the most memstore reads "
        "(split the turn, or store large files outside the session)",
    )


# --- records ------------------------------------------------------------------------------------


class Record(NamedTuple):
    """One parsed record: a node, a head, or another line kept only for its bytes.

    `raw` is the line's exact text (with its newline, if it had one) when the canonical
    rendering of the record would not reproduce it; None when it would.
    """

    line: Line
    kind: RecordKind
    raw: str | None
    node_id: str | None = None
    parent: str | None = None
    created_at: int = 0
    turn: dict[str, Any] | None = None
    turn_json: str = ""


def _id_json(value: str | None) -> str:
    """`JSON.stringify` of an id: quick for the usual ASCII letters and digits (hashes)."""
    if value is not None and value.isascii() and value.isalnum():
        return f'"{value}"'
    return jsjson.dumps(value)


def _time_json(value: int) -> str:
    """`JSON.stringify` of a time: quick for integers JavaScript holds exactly."""
    if type(value) is int and -_SAFE_INTEGER <= value <= _SAFE_INTEGER:
        return str(value)
    return jsjson.dumps(value)


_SAFE_INTEGER = 2**53 - 1


def node_line(node_id: str, parent: str | None, turn_json: str, created_at: int) -> str:
    """The line the original writer writes for a node (with its newline)."""
    return _node_line(_id_json(node_id), parent, turn_json, created_at)


def head_line(leaf: str) -> str:
    """The line the original writer writes for a head marker (with its newline)."""
    return _head_line(_id_json(leaf))


def append_lines(node_id: str, parent: str | None, turn_json: str, created_at: int) -> str:
    """The two lines the original `appendNode` writes: the node, then a head naming it."""
    id_json = _id_json(node_id)
    return _node_line(id_json, parent, turn_json, created_at) + _head_line(id_json)


def _node_line(id_json: str, parent: str | None, turn_json: str, created_at: int) -> str:
    start, end = _node_line_around(id_json, parent, created_at)
    return f"{start}{turn_json}{end}"


def _node_line_around(id_json: str, parent: str | None, created_at: int) -> tuple[str, str]:
    """A node line's text before its turn's JSON and after it (with the newline)."""
    return (
        f'{{"type":"node","node":{{"id":{id_json},"parent":{_id_json(parent)},"turn":',
        f',"createdAt":{_time_json(created_at)}}}}}\n',
    )


def _head_line(leaf_json: str) -> str:
    return f'{{"type":"head","leaf":{leaf_json}}}\n'


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _refuse(path: object, line: Line, problem: str) -> JsonlError:
    return JsonlError(path, line.number, problem)


def _node_record(path: object, line: Line, text: str, node: Any) -> Record:
    if not isinstance(node, dict):
        raise _refuse(path, line, 'a node record needs a "node" object')
    node_id, parent = node.get("id"), node.get("parent")
    if not isinstance(node_id, str) or not node_id:
        raise _refuse(path, line, "node.id must be a non-empty string")
    if parent is not None and not isinstance(parent, str):
        raise _refuse(path, line, "node.parent must be a string or null")
    created_at = _as_int(node.get("createdAt"))
    if created_at is None:
        raise _refuse(path, line, "node.createdAt must be an integer (epoch milliseconds)")
    if not MIN_CREATED_AT <= created_at <= MAX_CREATED_AT:
        raise _refuse(
            path,
            line,
            f"node.createdAt {node.get('createdAt')!r} is out of range: the databases hold "
            "times (epoch milliseconds) from -2**63 to 2**63-1",
        )
    problem = turn_problem(node.get("turn"))
    if problem is not None:
        raise _refuse(path, line, f"node {node_id!r}: {problem}")
    turn_json = jsjson.dumps(node["turn"])
    canonical = line.terminated and _is_node_line(text, node_id, parent, turn_json, created_at)
    return Record(
        line,
        "node",
        None if canonical else _raw(line, text),
        node_id,
        parent,
        created_at,
        node["turn"],
        turn_json,
    )


def _is_node_line(
    text: str, node_id: str, parent: str | None, turn_json: str, created_at: int
) -> bool:
    """Whether `text` is the line `node_line` writes (less its newline), compared in place:
    a huge turn is not copied once more."""
    start, end = _node_line_around(_id_json(node_id), parent, created_at)
    return (
        len(text) + 1 == len(start) + len(turn_json) + len(end)
        and text.startswith(start)
        and text.startswith(turn_json, len(start))
        and text.endswith(end[:-1])
    )


def _raw(line: Line, text: str) -> str:
    """The line's exact text, with its newline if it had one."""
    return text + "\n" if line.terminated else text


def _decode(path: object, line: Line) -> str:
    if line.offset == 0 and line.data.startswith(BOM):
        raise _refuse(
            path, line, "the file starts with a byte order mark (BOM); save it as UTF-8 without one"
        )
    try:
        return line.data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _refuse(path, line, f"invalid UTF-8 at byte {line.offset + exc.start}") from exc


_HEAD_START, _HEAD_END = '{"type":"head","leaf":"', '"}'


def _canonical_head_leaf(text: str) -> str | None:
    """The leaf of a head line exactly as the original writer writes it for an id of ASCII
    letters and digits (half of all lines), found without parsing; None for any other line."""
    if text.startswith(_HEAD_START) and text.endswith(_HEAD_END):
        leaf = text[len(_HEAD_START) : -len(_HEAD_END)]
        if leaf.isascii() and leaf.isalnum():
            return leaf
    return None


def parse_record(path: object, line: Line, migrators: Sequence[Migrator] = ()) -> Record:
    """Parse and check one line: JSON, then the migrators, then the record's shape.

    Raises:
        JsonlError: naming the file and line, for any line the store must refuse.
    """
    text = _decode(path, line)
    if not migrators and (leaf := _canonical_head_leaf(text)) is not None:
        return Record(line, "head", None if line.terminated else text, leaf)
    if not text.strip(" \t\r"):
        return Record(line, "other", _raw(line, text))
    try:
        value = jsjson.loads(text)
    except InvalidJsonError as exc:
        raise _refuse(path, line, f"not valid JSON: {exc}") from exc
    for migrator in migrators:
        try:
            value = migrator.upgrade(value)
        except Exception as exc:
            raise _refuse(path, line, f"migrator {migrator.id!r} failed: {exc!r}") from exc
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        raise _refuse(path, line, 'a record must be an object with a string "type"')
    if value["type"] == "node":
        return _node_record(path, line, text, value.get("node"))
    raw = _raw(line, text)
    if value["type"] == "head":
        leaf = value.get("leaf")
        if not isinstance(leaf, str) or not leaf:
            raise _refuse(path, line, 'a head record needs a non-empty string "leaf"')
        return Record(line, "head", None if head_line(leaf) == raw else raw, leaf)
    return Record(line, "other", raw)


def looks_like_legacy(value: dict[str, Any]) -> bool:
    """Whether a parsed line is a legacy node or head record (other types tell no format)."""
    if value.get("type") == "node":
        return isinstance(value.get("node"), dict)
    return value.get("type") == "head" and isinstance(value.get("leaf"), str)


def is_torn(line: Line, error: JsonlError) -> bool:
    """Whether a refused line is the torn tail of a crash: the last line, unterminated, and
    not JSON (or cut inside a UTF-8 sequence). Anything else is a real error."""
    if line.terminated:
        return False
    cause = error.__cause__
    return isinstance(cause, InvalidJsonError | UnicodeDecodeError)


@dataclass
class ReadOutcome:
    """What `read_records` saw besides the records: warnings about a recovered tail."""

    warnings: list[str]


def read_records(
    path: object,
    stream: BinaryIO,
    migrators: Sequence[Migrator] = (),
    *,
    offset: int = 0,
    number: int = 1,
    outcome: ReadOutcome | None = None,
) -> Iterator[Record]:
    """Parse every line of `stream`; a torn final line is skipped with a warning in `outcome`."""
    for line in read_lines(stream, offset=offset, number=number, path=path):
        try:
            yield parse_record(path, line, migrators)
        except JsonlError as error:
            if not is_torn(line, error):
                raise
            warning = (
                f"{path}:{line.number}: the last line is torn (no newline, not JSON: a crash "
                f"mid-append?); imported the {line.offset} bytes before it"
            )
            if outcome is not None:
                outcome.warnings.append(warning)
            logger.warning(warning)


def verify_node_id(path: object, record: Record) -> str | None:
    """A message if the node's id is not the content hash of its parent, turn and time, unless
    its turn is a tombstone (`memstore.tombstones`): an erased node keeps the id of the content
    it no longer holds, and a tombstone holds nothing an id could vouch for."""
    assert record.node_id is not None
    expected = hash_node_text(record.parent, record.turn_json.encode(), record.created_at)
    if expected == record.node_id or is_tombstone(record.turn_json):
        return None
    return (
        f"{path}:{record.line.number}: node id {record.node_id!r} is not its content hash "
        f"({expected!r})"
    )


# --- the file-backed store ----------------------------------------------------------------------


FILE_NAME_LIMIT = 255
"""Bytes in a file name on common file systems (ext4, XFS, APFS, btrfs)."""


def session_files(path: Path, *, recursive: bool) -> list[Path]:
    """The files an import of `path` reads: the file, or the `*.jsonl` files of a directory
    (below it too when `recursive`), sorted.

    Raises:
        JsonlError: `path` does not exist, cannot be read, or is not a regular file (a device,
            a FIFO: `/dev/null` is not an empty session).
    """
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise JsonlError(path, None, "no such file or directory") from None
    except OSError as exc:
        raise JsonlError(path, None, f"cannot read it: {exc.strerror or exc}") from exc
    if stat.S_ISDIR(mode):
        found = path.rglob("*.jsonl") if recursive else path.glob("*.jsonl")
        return sorted(item for item in found if item.is_file())
    if not stat.S_ISREG(mode):
        kind = _file_kind(mode)
        raise JsonlError(path, None, f"not a regular file but {kind}: nothing to import")
    return [path]


def _file_kind(mode: int) -> str:
    """What a file that is not a regular file or a directory is, for a message."""
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    return "a socket" if stat.S_ISSOCK(mode) else "not a file"


def session_file(root: Path, session_id: str, suffix: str = ".jsonl") -> Path:
    """`<root>/<session_id><suffix>`, for a session id that cannot leave `root`.

    Raises:
        InvalidSessionIdError: the id is invalid, or too long for a file name (its UTF-8 bytes
            and the suffix exceed 255).
    """
    name = f"{validate_session_id(session_id)}{suffix}"
    if len(name.encode()) > FILE_NAME_LIMIT:
        raise InvalidSessionIdError(
            f"session id {session_id[:40]!r}... is too long for a file name: {name!r} would be "
            f"{len(name.encode())} bytes, and file names hold at most {FILE_NAME_LIMIT}"
        )
    return root / name


def export_file(root: Path, session_id: str, suffix: str = ".jsonl") -> Path:
    """Where an export of every session writes `session_id`: `session_file`, except that an id
    too long for a file name is cut short and made unique with a hash of the whole id."""
    try:
        return session_file(root, session_id, suffix)
    except InvalidSessionIdError:
        if len(f"{session_id}{suffix}".encode()) <= FILE_NAME_LIMIT:
            raise
    return _tagged_file(root, session_id, suffix, 16)


def _tagged_file(root: Path, session_id: str, suffix: str, digits: int) -> Path:
    """The id cut to fit, then `~` and the first `digits` hex digits of its SHA-256."""
    tag = "~" + hashlib.sha256(session_id.encode()).hexdigest()[:digits] + suffix
    prefix = session_id.encode()[: FILE_NAME_LIMIT - len(tag)].decode(errors="ignore")
    return root / f"{prefix}{tag}"


def file_name_key(name: str) -> str:
    """What a file system that ignores case and Unicode normalization (macOS, Windows) compares:
    the canonical caseless form NFD(casefold(NFD(name)))."""
    return unicodedata.normalize("NFD", unicodedata.normalize("NFD", name).casefold())


def export_files(root: Path, session_ids: Iterable[str], suffix: str = ".jsonl") -> dict[str, Path]:
    """A file under `root` for each session, no two the same even where case or Unicode
    normalization is ignored.

    Each id keeps its own name (`export_file`) when no earlier id (in sorted order) took it; one
    that would collide gets `~` and a SHA-256 prefix of the id, longer until the name is free.
    """
    ids = sorted(set(session_ids))
    chosen: dict[str, Path] = {}
    taken: set[str] = set()
    for session_id in ids:  # plain names first: a tagged name never takes an id's own name
        path = export_file(root, session_id, suffix)
        if path.stem == session_id and file_name_key(path.name) not in taken:
            chosen[session_id] = path
            taken.add(file_name_key(path.name))
    for session_id in ids:
        if session_id in chosen:
            continue
        for digits in (16, 32, 64):
            path = _tagged_file(root, session_id, suffix, digits)
            if file_name_key(path.name) not in taken:
                break
        else:  # 64 hex digits collide only with a name made to collide: refuse, never overwrite
            raise InvalidSessionIdError(f"session id {session_id!r} has no free file name")
        chosen[session_id] = path
        taken.add(file_name_key(path.name))
    return chosen


class JsonlSessionStore:
    """The original store: one append-only JSONL file per session under `root`.

    Same methods as the SQL store's seed API. Useful for users who keep their files, and as the
    baseline the SQL store is measured and checked against.
    """

    def __init__(self, root: str | os.PathLike[str], migrators: Sequence[Migrator] = ()) -> None:
        self.root = Path(root)
        self.migrators = tuple(migrators)

    def append_node(self, session_id: str, node: SessionNode) -> None:
        """Append the node record and a head record naming it, in one write."""
        path = session_file(self.root, session_id)
        turn_json = node.turn.json_text()
        lines = append_lines(node.id, node.parent, turn_json, node.created_at)
        self.root.mkdir(parents=True, exist_ok=True)
        with path.open("ab") as file:
            file.write(lines.encode())

    def load_session(self, session_id: str) -> SessionGraph:
        """Replay the session's file; a missing file is an empty session."""
        path = session_file(self.root, session_id)
        nodes: list[SessionNode] = []
        leaf: str | None = None
        if path.exists():
            with path.open("rb") as file:
                for record in read_records(path, file, self.migrators):
                    if record.kind == "node":
                        nodes.append(_node_from_record(record))
                    elif record.kind == "head":
                        leaf = record.node_id
        return SessionGraph.hydrate(session_id, nodes, leaf)

    def list_sessions(self) -> list[str]:
        """The ids of every `.jsonl` file under root (none when root does not exist)."""
        if not self.root.is_dir():
            return []
        return sorted(path.stem for path in self.root.glob("*.jsonl") if path.is_file())


def _node_from_record(record: Record) -> SessionNode:
    assert record.node_id is not None
    return SessionNode(
        id=record.node_id,
        parent=record.parent,
        turn=Turn.model_validate(jsjson.loads(record.turn_json)),
        created_at=record.created_at,
    )
