"""Run by the tests under the `claude-agent-sdk` package's own virtual environment: what the SDK's
transcript reader makes of a folder of Claude Code sessions, as JSON on stdout; or a title and tag
written into a session by the SDK's own session mutations.

    python claude_sdk_reader.py read PROJECT_DIR
    python claude_sdk_reader.py rename PROJECT_DIR SESSION TITLE TAG
    python claude_sdk_reader.py folders CWD...     (the project folder the SDK looks in, per cwd)
    python claude_sdk_reader.py chain FILE...      (the message chain the SDK builds, per file)

HOME (or CLAUDE_CONFIG_DIR) must name the folder whose `.claude/projects` holds the transcripts.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import Any

import claude_agent_sdk as sdk  # type: ignore[import-not-found, unused-ignore]


def read(directory: str) -> dict[str, Any]:
    """Every session of the project: its info, its message chain, and its subagents' chains."""
    sessions: dict[str, Any] = {}
    for info in sdk.list_sessions(directory=directory, include_worktrees=False):
        session_id = info.session_id
        single = sdk.get_session_info(session_id, directory=directory)
        messages = sdk.get_session_messages(session_id, directory=directory)
        subagents = {
            agent_id: [
                message.uuid
                for message in sdk.get_subagent_messages(session_id, agent_id, directory=directory)
            ]
            for agent_id in sdk.list_subagents(session_id, directory=directory)
        }
        sessions[session_id] = {
            "listed": dataclasses.asdict(info),
            "info": None if single is None else dataclasses.asdict(single),
            "chain": [message.uuid for message in messages],
            "subagents": subagents,
        }
    return sessions


def main() -> None:
    command, directory, *rest = sys.argv[1:]
    if command == "chain":
        from claude_agent_sdk._internal.sessions import (  # type: ignore[import-not-found, unused-ignore]
            _entries_to_session_messages,
            _parse_transcript_entries,
        )

        chains = []
        for path in [directory, *rest]:
            with open(path, encoding="utf-8") as file:
                entries = _parse_transcript_entries(file.read())
            chains.append([m.uuid for m in _entries_to_session_messages(entries, None, 0)])
        json.dump(chains, sys.stdout)
    elif command == "folders":
        from claude_agent_sdk._internal.sessions import (  # type: ignore[import-not-found, unused-ignore]
            _sanitize_path,
        )

        json.dump([_sanitize_path(cwd) for cwd in [directory, *rest]], sys.stdout)
    elif command == "read":
        json.dump(read(directory), sys.stdout)
    elif command == "rename":
        session_id, title, tag = rest
        sdk.rename_session(session_id, title, directory=directory)
        sdk.tag_session(session_id, tag, directory=directory)
        json.dump({"renamed": session_id}, sys.stdout)
    else:
        raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    main()
