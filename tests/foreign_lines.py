"""Small pi and Claude Code session files in their documented shapes, for the command-line
and watch tests (the format tests use files the agents' own code writes)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["claude_code_lines", "pi_lines", "write_lines"]

START_MS = 1_764_835_200_000  # 2025-12-04T08:00:00Z


def _iso(offset: int) -> str:
    seconds = (START_MS + offset * 1000) // 1000
    return f"2025-12-04T08:{seconds // 60 % 60:02d}:{seconds % 60:02d}.000Z"


def _line(value: dict[str, Any]) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode() + b"\n"


def pi_lines(session_id: str, exchanges: int) -> list[bytes]:
    """A format 3 pi session: a header, then `exchanges` rounds of a user asking, the assistant
    calling `bash`, its result and the assistant's answer, each entry under the one before."""
    lines = [
        _line(
            {
                "type": "session",
                "version": 3,
                "id": session_id,
                "timestamp": _iso(0),
                "cwd": "/work/demo",
            }
        )
    ]
    parent: str | None = None
    for n in range(exchanges):
        usage = {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0, "cost": {"total": 0.01}}
        assistant = {"role": "assistant", "provider": "anthropic", "model": "claude-sonnet-4-5"}
        messages: list[dict[str, Any]] = [
            {"role": "user", "content": [{"type": "text", "text": f"question {n} about zebras"}]},
            {
                **assistant,
                "content": [
                    {"type": "toolCall", "id": f"call-{n}", "name": "bash", "arguments": {}}
                ],
                "usage": usage,
                "stopReason": "toolUse",
            },
            {
                "role": "toolResult",
                "toolCallId": f"call-{n}",
                "toolName": "bash",
                "content": [{"type": "text", "text": f"output {n}"}],
                "isError": False,
            },
            {
                **assistant,
                "content": [{"type": "text", "text": f"answer {n}"}],
                "usage": usage,
                "stopReason": "stop",
            },
        ]
        for k, message in enumerate(messages):
            entry_id = f"e{n}x{k}"
            timestamp = START_MS + (4 * n + k) * 1000
            lines.append(
                _line(
                    {
                        "type": "message",
                        "id": entry_id,
                        "parentId": parent,
                        "timestamp": _iso(4 * n + k),
                        "message": {**message, "timestamp": timestamp},
                    }
                )
            )
            parent = entry_id
    return lines


def claude_code_lines(session_id: str, exchanges: int) -> list[bytes]:
    """A Claude Code transcript: `exchanges` rounds of a user prompt and an assistant reply,
    chained by uuid and parentUuid."""
    lines: list[bytes] = []
    parent: str | None = None
    common = {"sessionId": session_id, "cwd": "/work/demo", "version": "2.0.0"}
    for n in range(2 * exchanges):
        uuid = f"00000000-0000-4000-8000-{n:012d}"
        if n % 2 == 0:
            message: dict[str, Any] = {"role": "user", "content": f"prompt {n // 2} about zebras"}
        else:
            message = {
                "id": f"msg_{n}",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [{"type": "text", "text": f"reply {n // 2}"}],
                "usage": {"input_tokens": 7, "output_tokens": 3},
            }
        record = {
            "parentUuid": parent,
            "isSidechain": False,
            "type": message["role"],
            "uuid": uuid,
            "timestamp": _iso(n),
            "message": message,
            **common,
        }
        lines.append(_line(record))
        parent = uuid
    return lines


def write_lines(path: Path, lines: list[bytes]) -> Path:
    """Write `lines` to `path` (its folders made), returning the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(lines))
    return path
