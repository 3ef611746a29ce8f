"""Writing exports: never a partial regular file, never a device or FIFO replaced, one-line errors.

A regular file is written next to its destination and moved into place only on success, with the
old file's permissions (a hard-linked file is instead overwritten in place once the whole export
is ready, so its links survive). `-` is standard output; a character device, FIFO or socket
(`/dev/null`, `mkfifo`, a shell's `>(...)`) is written as a stream. The temporary file is locked
while it is written, so the next export into the same directory removes any that a killed export
left behind without touching one another export is still writing.
"""

from __future__ import annotations

import contextlib
import enum
import os
import shutil
import stat
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from memstore.errors import InvalidArgumentError, OutputFileError

__all__ = [
    "STDOUT",
    "ExportFormat",
    "atomic_text_file",
    "is_stream_target",
    "remove_stale_temporaries",
]

STDOUT = "-"
"""The path that names standard output."""
TEMPORARY_GLOB = ".memstore-*.tmp"

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no locks, stale files are left alone
    fcntl = None  # type: ignore[assignment]


class ExportFormat(enum.StrEnum):
    """What an export writes: the legacy JSONL file, a Markdown transcript, or an HTML page."""

    JSONL = "jsonl"
    MD = "md"
    HTML = "html"

    @classmethod
    def of(cls, value: ExportFormat | str | None, path: Path | None = None) -> ExportFormat:
        """`value` as a format; None: the one `path`'s extension asks for (.md, .markdown,
        .html, .htm; case ignored), JSONL otherwise.

        Raises:
            InvalidArgumentError: `value` names no format.
        """
        if value is None:
            suffix = path.suffix.lower() if path is not None else ""
            return _SUFFIX_FORMATS.get(suffix, cls.JSONL)
        try:
            return cls(value)
        except ValueError:
            names = ", ".join(repr(item.value) for item in cls)
            raise InvalidArgumentError(
                f"unknown export format {value!r}; expected one of {names}"
            ) from None

    @property
    def suffix(self) -> str:
        """The file extension an export of every session gives its files."""
        return f".{self.value}"


_SUFFIX_FORMATS = {
    ".md": ExportFormat.MD,
    ".markdown": ExportFormat.MD,
    ".html": ExportFormat.HTML,
    ".htm": ExportFormat.HTML,
}


def is_stream_target(path: Path) -> bool:
    """True for `-` and for an existing character device, FIFO or socket."""
    if str(path) == STDOUT:
        return True
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


@contextmanager
def atomic_text_file(path: Path) -> Iterator[TextIO]:
    """A UTF-8 text stream (no newline translation) to `path`; see the module docstring.

    Raises:
        OutputFileError: `path` is a directory, or cannot be written (permissions, full disk).
    """
    with _explained(path):
        if str(path) == STDOUT:
            yield _stdout()
        elif is_stream_target(path):
            with path.open("w", encoding="utf-8", newline="") as stream:
                yield stream
        else:
            with _regular_file(path) as out:
                yield out


def _stdout() -> TextIO:
    stream = sys.stdout
    if hasattr(stream, "reconfigure"):
        stream.flush()
        stream.reconfigure(encoding="utf-8", newline="")
    return stream


@contextmanager
def _explained(path: Path) -> Iterator[None]:
    """Turn the operating system's refusal to write `path` into one line naming it."""
    try:
        yield
    except IsADirectoryError as exc:
        raise OutputFileError(f"{path} is a directory: name a file to write") from exc
    except BrokenPipeError:
        raise  # the reader went away: not an error of ours to explain
    except OSError as exc:
        if isinstance(exc, OutputFileError):
            raise
        reason = exc.strerror or str(exc)
        raise OutputFileError(f"cannot write {path}: {reason}") from exc


@contextmanager
def _regular_file(path: Path) -> Iterator[TextIO]:
    if path.is_dir():
        raise IsADirectoryError(21, "Is a directory", str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(path.parent)
    existing = _stat_or_none(path)
    temporary = path.with_name(f".memstore-{uuid.uuid4().hex}.tmp")  # short: any name fits
    try:
        # Mode "x" creates the file with the usual permissions (the umask applies).
        with temporary.open("x", encoding="utf-8", newline="") as out:
            _lock(out)
            yield out
            out.flush()
            os.fsync(out.fileno())
            if existing is not None and existing.st_nlink > 1:
                _overwrite_in_place(temporary, path)
            else:
                if existing is not None:
                    os.chmod(temporary, stat.S_IMODE(existing.st_mode))
                os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def _stat_or_none(path: Path) -> os.stat_result | None:
    try:
        return path.stat()
    except FileNotFoundError:
        return None


def _overwrite_in_place(source: Path, target: Path) -> None:
    """Copy a finished export over a hard-linked file, keeping its inode and so its links."""
    with source.open("rb") as read, target.open("r+b") as write:
        shutil.copyfileobj(read, write, 1 << 20)
        write.truncate()
        write.flush()
        os.fsync(write.fileno())


def _lock(file: TextIO) -> None:
    if fcntl is not None:
        fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)


def remove_stale_temporaries(directory: Path) -> list[Path]:
    """Remove the `.memstore-*.tmp` files in `directory` that no live export holds locked."""
    removed: list[Path] = []
    if fcntl is None:
        return removed
    for candidate in directory.glob(TEMPORARY_GLOB):
        with contextlib.suppress(OSError), candidate.open("rb") as file:
            try:
                fcntl.flock(file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # another export is writing it
            candidate.unlink()
            removed.append(candidate)
    return removed
