"""Who is importing a session (`sessions.importing`), for the messages that name it.

See `memstore.store.importing`: SQLite commits an import of a new session as it goes, marking
the session's row with its owner until it completes. Whether that import still runs is asked of
the kernel (`memstore.store.import_locks`), by the mark's token; its host and pid are only told.
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import socket
from dataclasses import asdict, dataclass

from memstore.errors import SessionImportingError
from memstore.store.import_locks import is_token, let_go

__all__ = ["ImportOwner", "refusal", "refuse_if_importing", "release"]


@dataclass(frozen=True)
class ImportOwner:
    """The process (and the import in it) that marked a session as being imported."""

    host: str
    pid: int
    token: str

    @classmethod
    def mine(cls) -> ImportOwner:
        """A new owner: this process, and a token of its own."""
        return cls(socket.gethostname(), os.getpid(), secrets.token_hex(8))

    @property
    def marker(self) -> str:
        """The `sessions.importing` value naming this owner."""
        return json.dumps(asdict(self), sort_keys=True)

    def __str__(self) -> str:
        return f"process {self.pid} on {self.host}"


def _fields(marker: str) -> dict[str, object]:
    """A mark's fields; none for one that is not a JSON object (not memstore's, or damaged)."""
    try:
        fields = json.loads(marker)
    except ValueError:
        return {}
    return fields if isinstance(fields, dict) else {}


def token_of(marker: str) -> str | None:
    """The token of the import a mark names (None: it names none, so no import can hold it)."""
    token = _fields(marker).get("token")
    return token if is_token(token) else None


def importer(marker: str | None) -> str:
    """The importer a mark names, as a message tells it: whatever its fields hold."""
    if marker is None:
        return "another process"
    fields = _fields(marker)
    if token_of(marker) is None:
        return f"an import whose mark memstore cannot read ({marker[:80]!r})"
    return f"process {fields.get('pid')!s:.20} on {fields.get('host')!s:.80}"


def refusal(session_id: str, marker: str | None) -> SessionImportingError:
    """The error for a write to a session an import has marked (`marker`: its mark)."""
    command = f"memstore db clean-imports --force {shlex.quote(session_id)}"
    return SessionImportingError(
        f"session {session_id!r} is being imported by {importer(marker)}: it cannot be written "
        "until that import completes (it is absent until then). Wait for it; if that process "
        "has ended, `memstore db clean-imports` deletes what it wrote; if it cannot be reached "
        f"(another machine, a hung process), `{command}` takes the session over (its partial "
        "import is deleted)"
    )


def refuse_if_importing(session_id: str, marker: str | None) -> None:
    """Raise SessionImportingError when a session's `importing` value says an import runs."""
    if marker is not None:
        raise refusal(session_id, marker)


def release(owner: ImportOwner) -> None:
    """Forget `owner` as running in this process (its import ended, one way or another)."""
    let_go(owner.token)
