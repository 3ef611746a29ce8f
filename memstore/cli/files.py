"""Session files in and out: `import` (once or `--watch`) and `export`."""

from __future__ import annotations

import enum
import functools
import json
import logging
import signal
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from memstore.cli._common import (
    NodeKey,
    TenantOption,
    app,
    counted,
    emit_json,
    err,
    friendly_errors,
    open_store,
    out,
    short_ids,
    shown_id,
)
from memstore.store.files import ExportFormat

if TYPE_CHECKING:
    from memstore.store import SessionStore
    from memstore.store.exports import ExportedFile
    from memstore.store.transfer import FileImport, FileProgress
    from memstore.store.transfer import Progress as ImportProgress


class ImportSource(enum.StrEnum):
    """Which kind of session file `memstore import` reads."""

    JSONL = "jsonl"
    PI = "pi"
    CLAUDE_CODE = "claude-code"
    AUTO = "auto"


@app.command("import")
@friendly_errors
def import_files(
    ctx: typer.Context,
    paths: Annotated[
        list[Path],
        typer.Argument(help="Session files, or directories of them.", show_default=False),
    ],
    source: Annotated[
        ImportSource,
        typer.Option(
            "--from",
            help="auto: each file's format, told by its first lines; jsonl: memstore's legacy "
            "JSONL files; pi: pi coding-agent sessions; claude-code: Claude Code transcripts, "
            "subagents included. A file of another format is refused. Directories are read "
            "recursively, except for jsonl.",
        ),
    ] = ImportSource.AUTO,
    session: Annotated[
        str | None,
        typer.Option(help="Session id for a single legacy file (default: its name)."),
    ] = None,
    verify: Annotated[
        bool, typer.Option(help="Check that every node id is its content hash (jsonl).")
    ] = True,
    keep_mismatched: Annotated[
        bool, typer.Option(help="Import nodes whose id is not their hash, with a warning (jsonl).")
    ] = False,
    watch: Annotated[
        bool,
        typer.Option(
            "--watch",
            help="Keep going: import new and grown files under PATHS as agents write them, "
            "until interrupted (Ctrl-C).",
        ),
    ] = False,
    interval: Annotated[
        float, typer.Option(help="With --watch, seconds between looks at the files.", min=0.05)
    ] = 1.0,
    redact_secrets: Annotated[
        bool,
        typer.Option(
            "--redact-secrets",
            help="Replace API keys, bearer tokens, private keys, passwords in URLs and JWTs "
            "with markers naming their kind before storing (secrets() of memstore.redact); "
            "the report counts the turns changed. Import such a file again with it too.",
        ),
    ] = False,
    as_json: Annotated[
        bool,
        typer.Option("--json", help="Print the report as JSON (with --watch: a line per file)."),
    ] = False,
    tenant: TenantOption = None,
) -> None:
    """Import session files: memstore's legacy JSONL, or pi's and Claude Code's.

    pi keeps its sessions in ~/.pi/agent/sessions, Claude Code in ~/.claude/projects.

    Each file is one session, imported all or nothing. Importing a file again adds only what it
    gained since; a file whose imported part changed is refused. A bad file is reported and
    skipped; the exit status is 1 if any was.
    """
    from memstore.redact import secrets

    if session is not None and (watch or source not in (ImportSource.JSONL, ImportSource.AUTO)):
        raise typer.BadParameter("--session names one legacy file's session (--from jsonl)")
    _check_session_option(paths, session)
    _report_warnings_ourselves()
    options: dict[str, Any] = {
        "source": source.value,
        "verify": verify,
        "keep_mismatched": keep_mismatched,
    }
    with open_store(ctx, tenant=tenant, redact=secrets() if redact_secrets else None) as store:
        if watch:
            _watch(store, paths, options, interval, as_json)
            return
        with _progress_bars() as file_progress:
            report = store.import_files(
                paths, session_id=session, file_progress=file_progress, **options
            )
        short = short_ids(store, [(item.session_id, item.leaf) for item in report.files])
    failures = [str(failure) for failure in report.failures]
    if as_json:
        emit_json({"files": [_import_json(item) for item in report.files], "errors": failures})
    else:
        if report.files:
            _print_import_table(report.files, short, redact_secrets)
        for item in report.files:
            for warning in item.warnings:
                err.print(f"[yellow]warning:[/yellow] {escape(warning)}", soft_wrap=True)
        for failure in failures:
            err.print(f"[red]error:[/red] {escape(failure)}", soft_wrap=True)
    if failures:
        raise typer.Exit(1)


@functools.cache
def _report_warnings_ourselves() -> None:
    """The import command prints each warning a report holds; the log line would repeat it."""
    logging.getLogger("memstore.jsonl").addHandler(logging.NullHandler())


def _check_session_option(paths: list[Path], session: str | None) -> None:
    """--session names one file's session: refused, before anything is imported, for more."""
    if session is not None and (len(paths) > 1 or paths[0].is_dir()):
        given = f"{len(paths)} paths were" if len(paths) > 1 else f"{paths[0]} is a directory"
        raise typer.BadParameter(
            f"it names the session of a single file, but {given} given: import the files one "
            "by one, or leave --session out (each file's name becomes its session id)",
            param_hint="'--session'",
        )


@contextmanager
def _progress_bars() -> Iterator[FileProgress]:
    """A progress bar per file being imported (bytes and lines), on stderr's terminal only:
    off one (a log, a pipe) a bar would only leave a blank line behind."""
    from rich.progress import DownloadColumn, Progress, TextColumn

    columns = (*Progress.get_default_columns(), DownloadColumn(), TextColumn("{task.fields[n]}"))
    with Progress(*columns, console=err, transient=True, disable=not err.is_terminal) as bars:

        @contextmanager
        def file_bar(file: Path) -> Iterator[ImportProgress | None]:
            try:
                size = file.stat().st_size
            except OSError:
                yield None  # the import says what is wrong with the file
                return
            task = bars.add_task(file.name, total=size, n="")

            def advance(done: int, records: int) -> None:
                bars.update(task, completed=done, n=f"{records} lines")

            try:
                yield advance
            finally:
                bars.remove_task(task)

        yield file_bar


def _watch(
    store: SessionStore,
    paths: list[Path],
    options: dict[str, Any],
    interval: float,
    as_json: bool,
) -> None:
    """Import what is there, then new and grown files as they appear, until interrupted."""
    from memstore.watch import FileWatcher, watch

    for path in paths:
        if not path.exists():
            raise typer.BadParameter(f"{path} does not exist", param_hint="PATHS")
    recursive = options["source"] != ImportSource.JSONL
    watcher = FileWatcher(paths, recursive=recursive)

    def on_change(files: list[Path]) -> None:
        with _progress_bars() as file_progress:
            report = store.import_files(files, file_progress=file_progress, **options)
        for item in report.files:
            if as_json:
                print(json.dumps(_import_json(item), ensure_ascii=False), flush=True)
            elif not item.unchanged:
                out.print(_import_line(item), soft_wrap=True)
        for failure in report.failures:
            err.print(f"[red]error:[/red] {escape(str(failure))}", soft_wrap=True)

    shown = ", ".join(str(path) for path in paths)
    err.print(f"watching {escape(shown)} (every {interval:g} s); Ctrl-C stops", soft_wrap=True)
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        watch(watcher, on_change, interval=interval, stop=threading.Event())
    except KeyboardInterrupt:
        err.print("stopped watching")
    finally:
        signal.signal(signal.SIGTERM, previous)


def _interrupt(signum: int, frame: object) -> None:
    """SIGTERM stops a watch as Ctrl-C does (between transactions or rolling one back)."""
    raise KeyboardInterrupt


def _import_line(item: FileImport) -> str:
    notes = "".join(f"; {escape(warning)}" for warning in item.warnings)
    redacted = f", {counted(item.redacted, 'turn', '')} redacted" if item.redacted else ""
    return f"{escape(item.session_id)}: +{item.records} lines, +{item.nodes} nodes{redacted}{notes}"


def _import_json(item: FileImport) -> dict[str, Any]:
    return {
        "path": str(item.path),
        "sessionId": item.session_id,
        "records": item.records,  # lines of the file, as `stats` counts them
        "nodes": item.nodes,
        "leaf": item.leaf,
        "unchanged": item.unchanged,
        "redacted": item.redacted,  # turns the redactor changed (--redact-secrets)
        "warnings": item.warnings,
    }


def _print_import_table(
    reports: list[FileImport], short: Mapping[NodeKey, str], redacting: bool
) -> None:
    """The import's table; redacting, with a column of the turns the redactor changed."""
    from memstore.terminal import data_table

    rows = [
        (
            item.session_id,
            str(item.records),
            str(item.nodes),
            *((str(item.redacted),) if redacting else ()),
            shown_id(short, item.session_id, item.leaf),
            "unchanged" if item.unchanged else counted(len(item.warnings), "warning", ""),
        )
        for item in reports
    ]
    headers = ("session", "lines", "nodes", *(("redacted",) if redacting else ()), "leaf", "note")
    copyable = (True, True, True, *((True,) if redacting else ()), True, False)
    out.print(data_table(headers, rows, copyable=copyable, width=out.width, title="imported"))


class AgentName(enum.StrEnum):
    """Which agent's file `memstore export --to` writes back."""

    PI = "pi"
    CLAUDE_CODE = "claude-code"


@app.command()
@friendly_errors
def export(
    ctx: typer.Context,
    session: Annotated[str | None, typer.Argument(help="The session to export.")] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="The file ('-': standard output; a device or FIFO is written as a stream; "
            "default: SESSION.FORMAT here), or with --all the directory (default: here).",
            show_default=False,
        ),
    ] = None,
    all_sessions: Annotated[
        bool, typer.Option("--all", help="Export every session into the -o directory.")
    ] = False,
    form: Annotated[
        ExportFormat | None,
        typer.Option(
            "--format",
            help="jsonl: the legacy file, byte for byte; md: the head's transcript; "
            "html: the whole tree as one self-contained page (default: from the -o file's "
            "extension, .md, .html or .htm; else jsonl).",
            show_default=False,
        ),
    ] = None,
    to: Annotated[
        AgentName | None,
        typer.Option(
            "--to",
            help="Write a session imported from pi or Claude Code back as that agent's file, "
            "byte for byte; with --all, every session from that agent in the agent's own "
            "folders under -o (e.g. ~/.claude/projects).",
            show_default=False,
        ),
    ] = None,
    tenant: TenantOption = None,
) -> None:
    """Write sessions back as legacy JSONL files (byte for byte), or as readable transcripts;
    with --to, as the pi or Claude Code files they were imported from.

    A regular file is replaced only once the export is complete, keeping its permissions. With
    --all, a session whose file cannot be written (a cwd no folder name can hold, a path that
    would leave -o) gets one line saying why, the others are written, and the exit status is 1.
    """
    from memstore.jsonl import export_file

    if all_sessions == (session is not None):
        raise typer.BadParameter("name one SESSION, or pass --all")
    if to is not None and form not in (None, ExportFormat.JSONL):
        raise typer.BadParameter("--to writes the agent's JSONL file: leave out --format")
    agent = to.value if to is not None else None
    with open_store(ctx, tenant=tenant, read_only=True) as store:
        if session is not None:
            chosen = form or (ExportFormat.JSONL if to is not None else None)
            suffix = f".{(chosen or ExportFormat.JSONL).value}"
            target = output or export_file(Path("."), session, suffix)
            done = store.export_session(session, target, format=chosen, agent=agent)
            _print_exported(done)
            return
        report = store.export_sessions(
            output or Path("."), format=form or ExportFormat.JSONL, agent=agent
        )
    for item in report.files:
        _print_exported(item)
    for refused in report.refused:
        err.print(
            f"[red]error:[/red] session {escape(repr(refused.session_id))} not exported: "
            f"{escape(refused.reason)}",
            highlight=False,
            soft_wrap=True,
        )
    if not report.complete:
        raise typer.Exit(1)


def _print_exported(item: ExportedFile) -> None:
    """One line per file written (on stderr when the file is standard output, keeping a
    stream's bytes clean)."""
    written = f"{item.lines} lines" if item.lines is not None else f"{item.size} bytes"
    note = f" ({item.renamed})" if item.renamed else ""
    (err if item.stream else out).print(
        f"{escape(item.session_id)}: {written} -> {escape(str(item.path))}{note}", soft_wrap=True
    )
