"""Exports: sessions written as files, one session or every one, by either store.

A session is written as the legacy JSONL file (byte for byte), its head's transcript in Markdown,
the whole tree as one HTML page, or, for a session imported from pi or Claude Code, that agent's
own file in that agent's folder layout. No SQL here: each file is one plan (its reads) that
writes the file as it goes, through `atomic_text_file`, so a failed export never leaves a partial
file; `export_program` chooses the files and drives one such plan per session. A session whose
file cannot be written (a cwd that makes no file name, a path that would leave the directory)
is refused with the reason, and the other sessions are still written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memstore.errors import InvalidArgumentError, OutputFileError, StoreError, UnknownSessionError
from memstore.store import plans, transfer
from memstore.store.files import STDOUT, ExportFormat, atomic_text_file, is_stream_target
from memstore.store.operation import Program, Run
from memstore.store.plans import Plan, SessionInfo

__all__ = [
    "ExportFormat",
    "ExportReport",
    "ExportedFile",
    "RefusedExport",
    "export_plan",
    "export_program",
]

AGENT_NAMES = ("pi", "claude-code")
"""The agents whose files an export writes back (`agent=`)."""


@dataclass(frozen=True)
class ExportedFile:
    """One session written: where, in which format, and how much (JSONL: `lines`; Markdown and
    HTML: `size` in bytes). `renamed` says why a file of an export of every session is not
    named after its session; `stream` is True for standard output, a device or a FIFO."""

    session_id: str
    path: Path
    format: ExportFormat
    lines: int | None = None
    size: int | None = None
    renamed: str | None = None
    stream: bool = False


@dataclass(frozen=True)
class RefusedExport:
    """A session an export of several did not write, and why (one line a user can act on)."""

    session_id: str
    reason: str


@dataclass
class ExportReport:
    """What an export of several sessions wrote, and the sessions it refused."""

    files: list[ExportedFile] = field(default_factory=list)
    refused: list[RefusedExport] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """True when every session was written."""
        return not self.refused


def export_plan(
    session_id: str,
    path: Path,
    form: ExportFormat,
    *,
    agent: str | None = None,
    renamed: str | None = None,
) -> Plan[ExportedFile]:
    """Write one session to `path` in `form`; with `agent`, only a session imported from it.

    Raises:
        UnknownSessionError: there is no such session.
        StoreError: `agent` is given and the session came from another agent (or memstore).
        OutputFileError: `path` cannot be written.
    """
    info: SessionInfo | None = None
    if agent is not None or form is not ExportFormat.JSONL:
        info = yield from plans.session_info(session_id)
    if agent is not None and info is not None and info.agent != agent:
        raise StoreError(
            f"session {session_id!r} came from {info.agent}, not {agent}: writing a session "
            f"back as {agent}'s file needs one imported from {agent} (memstore does not convert "
            "between agents)"
        )
    stream = is_stream_target(path)
    if form is ExportFormat.JSONL:
        with atomic_text_file(path) as out:
            lines = yield from transfer.export_session(session_id, out)
        return ExportedFile(session_id, path, form, lines=lines, renamed=renamed, stream=stream)
    graph = yield from plans.load_session(session_id)
    document = _render(graph, form, info.title if info is not None else None)
    with atomic_text_file(path) as out:
        out.write(document)
    size = len(document.encode())
    return ExportedFile(session_id, path, form, size=size, renamed=renamed, stream=stream)


def _render(graph: Any, form: ExportFormat, title: str | None) -> str:
    """A session's Markdown transcript (its head's path) or HTML page (its whole tree)."""
    from memstore.render import render_html, render_markdown

    if form is ExportFormat.MD:
        return render_markdown(graph, title=title)
    return render_html(graph, title=title)


def check_agent(agent: str | None, form: ExportFormat) -> None:
    """Refuse an agent memstore cannot write back, or a format other than its JSONL.

    Raises:
        InvalidArgumentError: an unknown agent, or a format other than JSONL with one.
    """
    if agent is None:
        return
    if agent not in AGENT_NAMES:
        raise InvalidArgumentError(
            f"unknown agent {agent!r}; expected one of {', '.join(AGENT_NAMES)}"
        )
    if form is not ExportFormat.JSONL:
        raise InvalidArgumentError(
            f"an export as {agent}'s file is JSONL (its own bytes), not {form.value}"
        )


def export_directory(directory: Path) -> Path:
    """`directory`, checked to be one that an export of every session can write into.

    Raises:
        OutputFileError: it is standard output or an existing file that is not a directory.
    """
    if str(directory) == STDOUT or (directory.exists() and not directory.is_dir()):
        raise OutputFileError(
            f"{directory} is not a directory: an export of every session writes one file per "
            "session into a directory"
        )
    return directory


def export_program(directory: Path, form: ExportFormat, agent: str | None) -> Program[ExportReport]:
    """Every session into `directory` (with `agent`: every session imported from it, in its
    folder layout), each in its own transaction; see the module docstring for refusals. A
    program (see `operation`): `StoreBase.export_sessions` is it.

    Raises:
        InvalidArgumentError: an unknown agent, or a format other than JSONL with one.
        OutputFileError: `directory` is not a directory.
    """
    check_agent(agent, form)
    export_directory(directory)
    infos: list[SessionInfo] = yield from Run(plans.list_sessions(), "listing sessions")
    report = ExportReport()
    for session_id, target, renamed in _targets(directory, form, agent, infos, report):
        plan = export_plan(session_id, target, form, agent=agent, renamed=renamed)
        try:
            action = f"exporting session {session_id!r}"
            report.files.append((yield from Run(plan, action, files=True)))
        except (OutputFileError, UnknownSessionError) as exc:  # deleted since the listing too
            report.refused.append(RefusedExport(session_id, str(exc)))
    return report


def _targets(
    directory: Path,
    form: ExportFormat,
    agent: str | None,
    infos: Iterable[SessionInfo],
    report: ExportReport,
) -> list[tuple[str, Path, str | None]]:
    """Each session's file, sorted by id, and why it is not named after the session (if it
    is not); a session whose file cannot be named is refused."""
    from memstore.jsonl import export_files

    if agent is None:
        found = export_files(directory, [info.id for info in infos], form.suffix)
        return [(key, path, _renamed(key, path, form)) for key, path in sorted(found.items())]
    chosen: list[tuple[str, Path, str | None]] = []
    for info in sorted(infos, key=lambda item: item.id):
        if info.agent != agent:
            continue
        target = agent_target(directory, agent, info.id, info.metadata)
        if isinstance(target, Path):
            chosen.append((info.id, target, None))
        else:
            report.refused.append(RefusedExport(info.id, target))
    return chosen


def agent_target(
    root: Path, agent: str, session_id: str, metadata: Mapping[str, Any]
) -> Path | str:
    """Where the agent keeps a session's file under `root` (`foreign.agent_file`), or why no
    file there can hold it: a cwd with a NUL, a folder name longer than a file name may be, a
    path that leads outside `root` (through a symbolic link, say)."""
    from memstore.foreign import agent_file
    from memstore.jsonl import FILE_NAME_LIMIT

    cwd = metadata.get("cwd")
    if isinstance(cwd, str) and "\0" in cwd:
        return f"its cwd {cwd!r} holds a NUL character, which no folder name can"
    target = agent_file(root, agent, session_id, metadata)
    try:
        for part in target.relative_to(root).parts:
            if len(part.encode()) > FILE_NAME_LIMIT:
                return (
                    f"the folder {agent} names after its cwd would be {len(part.encode())} "
                    f"bytes long ({part[:40]}...), and file names hold at most {FILE_NAME_LIMIT}"
                )
        if not target.resolve().is_relative_to(root.resolve()):
            return f"its file {target} would be written outside {root}"
    except (OSError, RuntimeError, ValueError) as exc:  # a symlink loop, text no path can hold
        return f"its file {target!r} cannot be named here: {exc}"
    return target


def _renamed(session_id: str, target: Path, form: ExportFormat) -> str | None:
    """Why an export of every session names a file otherwise than `<id><suffix>` (see
    `jsonl.export_files`), or None when it does not."""
    from memstore.jsonl import FILE_NAME_LIMIT

    if target.stem == session_id:
        return None
    if len(f"{session_id}{form.suffix}".encode()) > FILE_NAME_LIMIT:
        return "the id is too long for a file name"
    return "another session's file has this name where case or accents are ignored"
