"""Writing files so that a failure never leaves a partial one behind."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

__all__ = ["atomic_text_file"]


@contextmanager
def atomic_text_file(path: Path) -> Iterator[TextIO]:
    """A UTF-8 text file (no newline translation) that appears at `path` only on success."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".memstore-{uuid.uuid4().hex}.tmp")  # short: any name fits
    try:
        # Mode "x" creates the file with the usual permissions (the umask applies).
        with temporary.open("x", encoding="utf-8", newline="") as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
