"""Who is importing a session (`sessions.importing`), and whether that import still runs.

See `memstore.store.importing`: SQLite commits an import of a new session as it goes, marking
the session's row with its owner until it completes.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import threading
from dataclasses import asdict, dataclass
from pathlib import Path

from memstore.errors import SessionImportingError

__all__ = ["ImportOwner", "refusal", "refuse_if_importing", "release", "running_as"]

_running: set[str] = set()  # the tokens of this process's imports (and cleanups) in progress
_running_lock = threading.Lock()


def _process_start(pid: int) -> str | None:
    """When process `pid` started (Linux: clock ticks since boot), or None where unknown; "Z"
    for a zombie (dead, not yet reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    return "Z" if fields[0] == "Z" else fields[19]


@dataclass(frozen=True)
class ImportOwner:
    """The process (and the import in it) that marked a session as being imported."""

    host: str
    pid: int
    started: str | None
    token: str

    @classmethod
    def mine(cls) -> ImportOwner:
        """A new owner: this process, and a token of its own."""
        pid = os.getpid()
        return cls(socket.gethostname(), pid, _process_start(pid), secrets.token_hex(8))

    @classmethod
    def parse(cls, marker: str) -> ImportOwner | None:
        """The owner a `sessions.importing` value names (None: not one memstore wrote)."""
        try:
            return cls(**json.loads(marker))
        except (ValueError, TypeError):
            return None

    @property
    def marker(self) -> str:
        """The `sessions.importing` value naming this owner."""
        return json.dumps(asdict(self), sort_keys=True)

    def __str__(self) -> str:
        return f"process {self.pid} on {self.host}"

    def alive(self) -> bool:
        """Whether the import may still be running (see the module docstring)."""
        if self.host != socket.gethostname():
            return True  # another machine's process: nothing here can tell
        if self.pid == os.getpid() and self.started == _process_start(self.pid):
            with _running_lock:
                return self.token in _running
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass  # another user's process: it exists
        started = _process_start(self.pid)
        return started != "Z" and (self.started is None or started in (None, self.started))


def running_as(owner: ImportOwner) -> None:
    """Count `owner` as running in this process (until `release`)."""
    with _running_lock:
        _running.add(owner.token)


def release(owner: ImportOwner) -> None:
    """Forget `owner` as running in this process (its import ended, one way or another)."""
    with _running_lock:
        _running.discard(owner.token)


def refusal(session_id: str, owner: ImportOwner | None) -> SessionImportingError:
    """The error for a write to a session `owner` is importing."""
    who = str(owner) if owner is not None else "another process"
    return SessionImportingError(
        f"session {session_id!r} is being imported by {who}: it cannot be written until that "
        "import completes (it is absent until then); wait for it, or stop that process (its "
        "partial import is then deleted)"
    )


def refuse_if_importing(session_id: str, marker: str | None) -> None:
    """Raise SessionImportingError when a session's `importing` value says an import runs."""
    if marker is not None:
        raise refusal(session_id, ImportOwner.parse(marker))
