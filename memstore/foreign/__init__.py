"""Other agents' session files: pi's and Claude Code's JSONL trees, read into memstore's DAG.

No SQL here: `memstore.store.foreign` imports what these readers make, one transaction per file,
and keeps every line's bytes so that an export writes the file back exactly.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from memstore.errors import InvalidArgumentError, JsonlError
from memstore.foreign._common import (
    AGENTS,
    Entry,
    ForeignReader,
    SessionFacts,
    UsageRow,
    decode_line,
)
from memstore.foreign.claude_code import ClaudeCodeReader, looks_like_claude_code
from memstore.foreign.pi import PiReader, looks_like_pi
from memstore.jsonl import is_torn, looks_like_legacy, read_lines, session_files

__all__ = [
    "AGENTS",
    "FORMAT_NAMES",
    "ClaudeCodeReader",
    "Entry",
    "ForeignReader",
    "ForeignTarget",
    "PiReader",
    "SessionFacts",
    "Sniffed",
    "UsageRow",
    "agent_file",
    "check_format",
    "foreign_files",
    "foreign_target",
    "foreign_targets",
    "new_reader",
    "sniff_format",
]

_SNIFF_LINES = 20
FORMAT_NAMES = {
    "jsonl": "legacy JSONL",
    "pi": "a pi session",
    "claude-code": "a Claude Code transcript",
}
"""Each file format memstore imports, as messages name it."""
_CLAUDE_UNSAFE = re.compile(r"[^a-zA-Z0-9]")
_CLAUDE_NAME_LIMIT = 200


class Sniffed(NamedTuple):
    """What a file's first lines show: its format (None: they do not tell), whether they are
    all blank (or there are none), and the first that is not JSON."""

    format: str | None
    empty: bool
    first_error: JsonlError | None
    torn: bool = False  # the lines end in a torn one (which an import skips)


class ForeignTarget(NamedTuple):
    """One file to import: which agent wrote it, its session, and the session it belongs to
    (a Claude Code subagent transcript's parent session; None otherwise)."""

    path: Path
    agent: str
    session_id: str
    parent_session: str | None = None


def new_reader(agent: str) -> ForeignReader:
    """A fresh reader for one file of `agent` ("pi" or "claude-code")."""
    if agent == "pi":
        return PiReader()
    if agent == "claude-code":
        return ClaudeCodeReader()
    raise InvalidArgumentError(f"unknown agent {agent!r}; expected one of {', '.join(AGENTS)}")


def sniff_format(path: Path) -> Sniffed:
    """Which format a session file is in, from its first lines (see `Sniffed`).

    Raises:
        JsonlError: the file cannot be read.
    """
    first_error: JsonlError | None = None
    empty = True
    try:
        with path.open("rb") as file:
            for line in itertools.islice(read_lines(file, path=path), _SNIFF_LINES):
                try:
                    _, value = decode_line(path, line)
                except JsonlError as error:
                    if is_torn(line, error):  # an agent still writing its only line
                        return Sniffed(None, empty, first_error, torn=True)
                    first_error, empty = first_error or error, False
                    continue
                empty = empty and not line.data.strip(b" \t\r")
                if (found := _format_of(value)) is not None:
                    return Sniffed(found, False, None)
    except OSError as exc:
        raise JsonlError(path, None, f"cannot read it: {exc.strerror or exc}") from exc
    return Sniffed(None, empty, first_error)


def _format_of(value: Any) -> str | None:
    """The format one parsed line shows, if any."""
    if not isinstance(value, dict):
        return None
    if looks_like_pi(value):
        return "pi"
    if looks_like_claude_code(value):
        return "claude-code"
    return "jsonl" if looks_like_legacy(value) else None


def check_format(path: Path, asked: str) -> str:
    """The format to import `path` as: `asked` ("jsonl", "pi", "claude-code"), or for "auto"
    the one its first lines show. An empty file is legacy JSONL (what memstore exports for a
    session without turns); a legacy file may hold only records of other types.

    Raises:
        JsonlError: the file's lines show another format than asked (naming it), or (but for
            "jsonl") none: the first line that is not JSON, or the file as a whole.
    """
    sniffed = sniff_format(path)
    if sniffed.format is not None:
        if asked in ("auto", sniffed.format):
            return sniffed.format
        raise JsonlError(
            path,
            None,
            f"looks like {FORMAT_NAMES[sniffed.format]}, not {FORMAT_NAMES[asked]}: "
            f"use --from {sniffed.format} or --from auto",
        )
    if asked == "jsonl" or (sniffed.empty and asked == "auto"):
        return "jsonl"
    if sniffed.empty and sniffed.torn and sniffed.first_error is None:
        return asked if asked != "auto" else "jsonl"  # whole lines none: skipped with a warning
    if sniffed.empty:
        raise JsonlError(path, None, f"empty, not {FORMAT_NAMES[asked]}: nothing to import")
    if sniffed.first_error is not None:
        raise sniffed.first_error
    raise JsonlError(
        path,
        None,
        f"its first {_SNIFF_LINES} lines look like none of the formats memstore reads "
        f"({', '.join(FORMAT_NAMES.values())})",
    )


def foreign_files(path: Path) -> list[Path]:
    """The files an import of `path` reads: the file, or every `*.jsonl` under a directory
    (recursively, sorted).

    Raises:
        JsonlError: `path` does not exist or is not a regular file.
    """
    return session_files(path, recursive=True)


def foreign_targets(path: Path, agent: str = "auto") -> list[ForeignTarget]:
    """The files an import of `path` covers (see `foreign_files`), each with its agent
    (`auto`: detected per file) and session id (see `foreign_target`); `~` is the home."""
    if agent != "auto":
        new_reader(agent)  # checks the name
    return [foreign_target(file, agent) for file in foreign_files(path.expanduser())]


def foreign_target(file: Path, agent: str = "auto") -> ForeignTarget:
    """One file's agent (`auto`: told by its first lines) and session id: its file name's
    stem; a Claude Code subagent transcript (`<session>/subagents/agent-<id>.jsonl`) becomes
    `<session>~agent-<id>`, whose parent is `<session>`.

    Raises:
        JsonlError: the file's lines are not `agent`'s, or with `auto` neither agent's.
    """
    found = check_format(file, agent)
    if found == "jsonl":
        raise JsonlError(
            file, None, f"looks like {FORMAT_NAMES['jsonl']}, not a pi or Claude Code file"
        )
    if file.parent.name == "subagents" and found == "claude-code":
        parent = file.parent.parent.name
        return ForeignTarget(file, found, f"{parent}~{file.stem}", parent)
    return ForeignTarget(file, found, file.stem)


def agent_file(root: Path, agent: str, session_id: str, metadata: Mapping[str, Any]) -> Path:
    """Where the agent keeps a session's file under `root` (its `~/.pi/agent/sessions` or
    `~/.claude/projects`): in the folder it names after the session's cwd, a Claude Code
    subagent's transcript under its parent session's `subagents/`. Without a cwd: `root`."""
    cwd = metadata.get("cwd")
    folder = root
    if isinstance(cwd, str) and cwd:
        folder = root / (_pi_folder(cwd) if agent == "pi" else _claude_folder(cwd))
    parent = metadata.get("parentSession")
    if agent == "claude-code" and isinstance(parent, str) and session_id.startswith(f"{parent}~"):
        return folder / parent / "subagents" / f"{session_id[len(parent) + 1 :]}.jsonl"
    return folder / f"{session_id}.jsonl"


def _pi_folder(cwd: str) -> str:
    """pi's folder for a cwd (its `getDefaultSessionDir`)."""
    trimmed = cwd[1:] if cwd[:1] in ("/", "\\") else cwd
    return "--" + re.sub(r"[/\\:]", "-", trimmed) + "--"


def _claude_folder(cwd: str) -> str:
    """Claude Code's project folder for a cwd (every character but ASCII letters and digits a
    hyphen; a long one cut, with a hash of the whole, as the Claude Code CLI and SDK do)."""
    name = _CLAUDE_UNSAFE.sub("-", cwd)
    if len(name) <= _CLAUDE_NAME_LIMIT:
        return name
    return f"{name[:_CLAUDE_NAME_LIMIT]}-{_js_hash36(cwd)}"


def _js_hash36(text: str) -> str:
    """JavaScript's `(h << 5) - h + code` string hash, as a base-36 magnitude."""
    value = 0
    for char in text:
        value = ((value << 5) - value + ord(char)) & 0xFFFFFFFF
    if value >= 0x80000000:
        value -= 0x100000000
    value = abs(value)
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        value, rest = divmod(value, 36)
        out = digits[rest] + out
        if value == 0:
            return out
