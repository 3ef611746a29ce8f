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

from memstore import jsjson
from memstore.errors import InvalidArgumentError, JsonlError
from memstore.foreign._common import AGENTS, Entry, ForeignReader, SessionFacts, UsageRow
from memstore.foreign.claude_code import ClaudeCodeReader, looks_like_claude_code
from memstore.foreign.pi import PiReader, looks_like_pi
from memstore.jsonl import read_lines

__all__ = [
    "AGENTS",
    "ClaudeCodeReader",
    "Entry",
    "ForeignReader",
    "ForeignTarget",
    "PiReader",
    "SessionFacts",
    "UsageRow",
    "agent_file",
    "detect_agent",
    "foreign_files",
    "foreign_target",
    "foreign_targets",
    "new_reader",
    "sniff_agent",
]

_SNIFF_LINES = 20
_CLAUDE_UNSAFE = re.compile(r"[^a-zA-Z0-9]")
_CLAUDE_NAME_LIMIT = 200


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


def sniff_agent(path: Path) -> str | None:
    """Which agent wrote a session file, from its first lines; None when they do not tell."""
    with path.open("rb") as file:
        for line in itertools.islice(read_lines(file, path=path), _SNIFF_LINES):
            try:
                value = jsjson.loads(line.data.decode("utf-8"))
            except (ValueError, UnicodeDecodeError):
                continue
            if isinstance(value, dict) and looks_like_pi(value):
                return "pi"
            if isinstance(value, dict) and looks_like_claude_code(value):
                return "claude-code"
    return None


def detect_agent(path: Path) -> str:
    """Which agent wrote a session file, from its first lines.

    Raises:
        JsonlError: the file is neither a pi session nor a Claude Code transcript.
    """
    found = sniff_agent(path)
    if found is None:
        raise JsonlError(path, None, "neither a pi session nor a Claude Code transcript")
    return found


def foreign_files(path: Path) -> list[Path]:
    """The files an import of `path` reads: the file, or every `*.jsonl` under a directory
    (recursively, sorted).

    Raises:
        JsonlError: `path` does not exist.
    """
    if path.is_dir():
        return sorted(item for item in path.rglob("*.jsonl") if item.is_file())
    if path.is_file():
        return [path]
    raise JsonlError(path, None, "no such file or directory")


def foreign_targets(path: Path, agent: str = "auto") -> list[ForeignTarget]:
    """The files an import of `path` covers (see `foreign_files`), each with its agent
    (`auto`: detected per file) and session id (see `foreign_target`)."""
    if agent != "auto":
        new_reader(agent)  # checks the name
    return [foreign_target(file, agent) for file in foreign_files(path)]


def foreign_target(file: Path, agent: str = "auto") -> ForeignTarget:
    """One file's agent (`auto`: detected from its first lines) and session id: its file
    name's stem; a Claude Code subagent transcript (`<session>/subagents/agent-<id>.jsonl`)
    becomes `<session>~agent-<id>`, whose parent is `<session>`.

    Raises:
        JsonlError: `auto` and the file is neither agent's, or the other agent's than `agent`.
    """
    if agent == "auto":
        found = detect_agent(file)
    else:
        found = agent
        written_by = sniff_agent(file)
        if written_by not in (None, agent):
            raise JsonlError(
                file, None, f"a {written_by} session file, not {agent}'s (--from auto tells them)"
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
