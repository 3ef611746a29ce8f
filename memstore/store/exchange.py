"""Exchange: the store operations that move sessions in and out of files (see `StoreBase`).

Each file's import is its own plan, and so its own transaction (on SQLite, several: a new
session commits as it goes); an export streams its rows into a file moved into place at the
end. The plans do file I/O as they run (`files=True`: off the async store's event loop).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from memstore.errors import MemstoreError
from memstore.store import exports, foreign, sources, transfer
from memstore.store.core import StoreCore
from memstore.store.exports import ExportedFile, ExportReport
from memstore.store.files import ExportFormat, atomic_text_file
from memstore.store.operation import Program, operation
from memstore.store.transfer import FileProgress, ImportReport, Progress

__all__ = ["Exchange"]


class Exchange(StoreCore):
    """Imports and exports, as operations of both stores."""

    @operation
    def import_jsonl(
        self,
        path: str | os.PathLike[str],
        *,
        session_id: str | None = None,
        verify: bool = True,
        keep_mismatched: bool = False,
        progress: Progress | None = None,
    ) -> Program[ImportReport]:
        """Import a legacy JSONL session file, or every `*.jsonl` file of a directory.

        Each file is one session (by default its file name's stem), imported all or nothing,
        and passes through the store's migrators. On SQLite a new session's import commits as
        it goes, so that other writers wait a moment, not the whole file; the session stays
        absent to readers, and refused to writers (SessionImportingError), until it completes.
        Importing again adds only what the file gained since; a file whose imported part
        changed is refused. With `verify`, every node id must be its content hash
        (`keep_mismatched=True` imports mismatches with a warning).

        Raises:
            JsonlError: naming the file and line; that file's import left no trace.
        """
        report = ImportReport()
        for file, plan in transfer.import_plans(
            self.backend,
            Path(path),
            session_id,
            migrators=self.migrators,
            verify=verify,
            keep_mismatched=keep_mismatched,
            progress=progress,
            redact=self.redact,
        ):
            report.files.append((yield from self._write(plan, f"importing {file}", files=True)))
        return report

    @operation
    def import_pi(
        self, path: str | os.PathLike[str], *, progress: Progress | None = None
    ) -> Program[ImportReport]:
        """Import pi session files: a file, or every `*.jsonl` under a directory (recursively).

        Each file is one transaction and one session (its file name's stem). The entries' tree
        is kept (messages, compactions and branch summaries as nodes under their parents' nodes;
        the last entry is the head); headers, model changes, labels and names become the
        session's metadata, tags and title; usage and cost go to `node_usage`. Every line is
        kept, so `export_jsonl` writes the file back byte for byte. Importing again adds only
        what the file gained.

        Raises:
            JsonlError: naming the file and line; that file's import left no trace.
        """
        agent = "pi"
        return (
            yield from Exchange.import_foreign.program(self, path, agent=agent, progress=progress)
        )

    @operation
    def import_claude_code(
        self, path: str | os.PathLike[str], *, progress: Progress | None = None
    ) -> Program[ImportReport]:
        """Import Claude Code transcripts: a file, or every `*.jsonl` under a directory.

        Like `import_pi`. Sidechains stay in their session; a subagent transcript
        (`<session>/subagents/agent-<id>.jsonl`) becomes session `<session>~agent-<id>`, whose
        metadata names its `parentSession`.
        """
        agent = "claude-code"
        return (
            yield from Exchange.import_foreign.program(self, path, agent=agent, progress=progress)
        )

    @operation
    def import_foreign(
        self,
        path: str | os.PathLike[str],
        *,
        agent: str = "auto",
        progress: Progress | None = None,
    ) -> Program[ImportReport]:
        """Import pi or Claude Code files (`agent`: "pi", "claude-code" or "auto", which tells
        each file's agent from its first lines). See `import_pi`."""
        report = ImportReport()
        for file, plan in foreign.foreign_import_plans(
            self.backend, Path(path), agent, progress=progress, redact=self.redact
        ):
            report.files.append((yield from self._write(plan, f"importing {file}", files=True)))
        return report

    @operation
    def import_files(
        self,
        paths: Iterable[str | os.PathLike[str]],
        *,
        source: str = "auto",
        session_id: str | None = None,
        verify: bool = True,
        keep_mismatched: bool = False,
        file_progress: FileProgress | None = None,
    ) -> Program[ImportReport]:
        """Import every file `paths` name or hold (`~` is the home directory), each in its own
        transaction, in the format `source` names: "auto" (each file's, told by its first
        lines), "jsonl", "pi" or "claude-code". A file refused (its lines, or a format other
        than `source`) or a path that cannot be read is kept in the report's `failures` (it
        left no trace, not even an empty session) and the others still import.

        Raises:
            InvalidArgumentError: an unknown source, or `session_id` for more than one file.
        """
        report = ImportReport()
        for file, plan in sources.import_plans(
            self.backend,
            paths,
            source=source,
            session_id=session_id,
            migrators=self.migrators,
            verify=verify,
            keep_mismatched=keep_mismatched,
            file_progress=file_progress,
            redact=self.redact,
        ):
            try:
                done = yield from self._write(plan, f"importing {file}", files=True)
            except MemstoreError as exc:
                report.failures.append(exc)
            else:
                report.files.append(done)
        return report

    @operation
    def import_file(
        self,
        path: str | os.PathLike[str],
        *,
        source: str = "jsonl",
        session_id: str | None = None,
        verify: bool = True,
        keep_mismatched: bool = False,
        progress: Progress | None = None,
    ) -> Program[ImportReport]:
        """Import one file (or directory) from `source`: `import_jsonl` or `import_foreign`."""
        if source == "jsonl":
            return (
                yield from Exchange.import_jsonl.program(
                    self,
                    path,
                    session_id=session_id,
                    verify=verify,
                    keep_mismatched=keep_mismatched,
                    progress=progress,
                )
            )
        agent = source
        return (
            yield from Exchange.import_foreign.program(self, path, agent=agent, progress=progress)
        )

    @operation
    def export_jsonl(self, session_id: str, path: str | os.PathLike[str]) -> Program[int]:
        """Write a session as the JSONL file the original store would hold; returns its lines.

        The file is written next to its destination and moved into place, so a failed export
        never leaves a partial file.
        """
        with atomic_text_file(Path(path)) as out:
            plan = transfer.export_session(session_id, out)
            action = f"exporting session {session_id!r}"
            return (yield from self._read(plan, action, files=True))

    @operation
    def export_session(
        self,
        session_id: str,
        path: str | os.PathLike[str],
        *,
        format: ExportFormat | str | None = None,
        agent: str | None = None,
    ) -> Program[ExportedFile]:
        """Write one session to `path` (`-`: standard output), replacing a regular file only
        once the whole export is written, keeping its permissions.

        Args:
            format: "jsonl" (the legacy file, byte for byte), "md" (the head's transcript) or
                "html" (the whole tree as one page); default: from `path`'s extension, else JSONL.
            agent: "pi" or "claude-code": write a session imported from that agent back as
                its file, byte for byte (JSONL only).

        Raises:
            UnknownSessionError: there is no such session.
            StoreError: `agent` is given and the session came from another agent.
            InvalidArgumentError: an unknown format or agent, or `agent` with a format not JSONL.
            OutputFileError: `path` cannot be written (a directory, no space).
        """
        target = Path(path)
        form = ExportFormat.of(format, target)
        exports.check_agent(agent, form)
        plan = exports.export_plan(session_id, target, form, agent=agent)
        return (yield from self._read(plan, f"exporting session {session_id!r}", files=True))

    @operation
    def export_sessions(
        self,
        directory: str | os.PathLike[str] = ".",
        *,
        format: ExportFormat | str = ExportFormat.JSONL,
        agent: str | None = None,
    ) -> Program[ExportReport]:
        """Write every session into `directory`, each as `<id>.<format>` (a name changed only
        where it would be too long or collide with another's where case or accents are
        ignored); with `agent`, every session imported from it in its own folder layout (e.g.
        under `~/.claude/projects`). A session whose file cannot be written is refused in the
        report, with the reason; the others are written.

        Raises:
            InvalidArgumentError: an unknown format or agent, or `agent` with a format not JSONL.
            OutputFileError: `directory` is standard output or a file.
        """
        form = ExportFormat.of(format)
        return (yield from exports.export_program(Path(directory), form, agent))
