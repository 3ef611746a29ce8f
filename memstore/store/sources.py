"""Imports of many paths in any format: each file in its format (named, or told by its first
lines), in its own transaction, a refused path or file reported without stopping the others.

A path that does not exist, is not a regular file, or is a directory without `*.jsonl` files
becomes a target that is refused when its turn comes, so that `import_files` reports it in
order, as it reports a file refused by its lines.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import NamedTuple

from memstore.errors import InvalidArgumentError, JsonlError, MemstoreError
from memstore.foreign import FORMAT_NAMES, check_format, foreign_target
from memstore.jsonl import session_files
from memstore.redact import Redactor
from memstore.store.foreign import import_foreign_file
from memstore.store.plans import Plan
from memstore.store.policy import Backend
from memstore.store.transfer import FileImport, FileProgress, Progress, import_file
from memstore.types import Migrator

__all__ = ["IMPORT_SOURCES", "ImportTarget", "import_plans", "import_targets"]

IMPORT_SOURCES = ("auto", "jsonl", "pi", "claude-code")
"""What `SessionStore.import_files` reads: any of the formats (told per file), legacy JSONL,
pi, or Claude Code."""


class ImportTarget(NamedTuple):
    """One file to import, in the format asked for; `refusal` when the path cannot be."""

    path: Path
    source: str
    session_id: str | None = None
    refusal: MemstoreError | None = None


def import_targets(
    paths: Iterable[str | os.PathLike[str]], source: str = "auto", session_id: str | None = None
) -> list[ImportTarget]:
    """The files an import of `paths` from `source` covers: each file, or each `*.jsonl` of a
    directory (below it too, but for "jsonl"); `~` is the user's home.

    Raises:
        InvalidArgumentError: an unknown source, or `session_id` for anything but one file
            (legacy JSONL, named or told).
    """
    if source not in IMPORT_SOURCES:
        raise InvalidArgumentError(f"unknown source {source!r}; expected one of {IMPORT_SOURCES}")
    given = [Path(path).expanduser() for path in paths]
    if session_id is not None and (source not in ("jsonl", "auto") or len(given) != 1):
        raise InvalidArgumentError(
            "a session id names one legacy file's session (--from jsonl or auto, one file)"
        )
    targets: list[ImportTarget] = []
    for path in given:
        try:
            files = session_files(path, recursive=source != "jsonl")
            if session_id is not None and files != [path]:
                raise InvalidArgumentError(
                    f"{path} is a directory: a session id can only be given for a single file"
                )
        except JsonlError as error:
            targets.append(ImportTarget(path, source, refusal=error))
            continue
        if not files:
            empty = JsonlError(path, None, "no .jsonl files in this directory: nothing to import")
            targets.append(ImportTarget(path, source, refusal=empty))
        targets.extend(ImportTarget(file, source, session_id) for file in files)
    return targets


def import_plans(
    backend: Backend,
    paths: Iterable[str | os.PathLike[str]],
    *,
    source: str,
    session_id: str | None,
    migrators: Sequence[Migrator],
    verify: bool,
    keep_mismatched: bool,
    file_progress: FileProgress | None,
    redact: Redactor | None = None,
) -> Iterator[tuple[Path, Plan[FileImport]]]:
    """One plan per file `import_targets` finds (each its own transaction), run inside
    `file_progress`'s context for its file (the caller runs it before taking the next).

    Raises:
        InvalidArgumentError: see `import_targets` (before the first plan).
    """
    for target in import_targets(paths, source, session_id):
        with file_progress(target.path) if file_progress is not None else nullcontext() as progress:
            yield (
                target.path,
                _import_target(
                    backend, target, migrators, verify, keep_mismatched, progress, redact
                ),
            )


def _import_target(
    backend: Backend,
    target: ImportTarget,
    migrators: Sequence[Migrator],
    verify: bool,
    keep_mismatched: bool,
    progress: Progress | None,
    redact: Redactor | None,
) -> Plan[FileImport]:
    """Import one target in its format; a refused one raises before anything is written."""
    if target.refusal is not None:
        raise target.refusal
    path = target.path
    found = check_format(path, target.source)
    if found != "jsonl":
        if target.session_id is not None:
            raise JsonlError(
                path, None, f"looks like {FORMAT_NAMES[found]}: a session id names a legacy file's"
            )
        foreign = foreign_target(path, found)
        plan = import_foreign_file(backend, foreign, progress=progress, redact=redact)
        return (yield from plan)
    session_id = target.session_id if target.session_id is not None else path.stem
    return (
        yield from import_file(
            backend,
            path,
            session_id,
            migrators=migrators,
            verify=verify,
            keep_mismatched=keep_mismatched,
            progress=progress,
            redact=redact,
        )
    )
