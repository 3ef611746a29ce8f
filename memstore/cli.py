"""The `memstore` command line: a thin skin over the library.

Each command opens the store, makes one library call and renders the result; a memstore error
becomes one clear line on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import io
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ParamSpec, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from memstore import __version__
from memstore._package import DISTRIBUTION
from memstore.errors import InvalidArgumentError, MemstoreError, OutputFileError
from memstore.store import DEFAULT_URL, SCHEMA_VARIABLE
from memstore.store.files import ExportFormat

if TYPE_CHECKING:
    from memstore.store import SessionInfo, SessionStore
    from memstore.store.exports import ExportedFile
    from memstore.store.transfer import FileImport, FileProgress
    from memstore.store.transfer import Progress as ImportProgress
    from memstore.types import ModelInvoker

__all__ = ["app", "main"]

P = ParamSpec("P")
R = TypeVar("R")

app = typer.Typer(
    name="memstore",
    help="A memory LLM agents can trust: branchable sessions in SQLite or PostgreSQL.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",  # a docstring's lines join into paragraphs, as in `--help`'s tests
)
db_app = typer.Typer(help="Create, upgrade or inspect the database schema.", no_args_is_help=True)
app.add_typer(db_app, name="db")

COPYABLE_TEXT = 64

out = Console()
err = Console(stderr=True)


@dataclass
class Settings:
    """Options shared by every command."""

    db: str
    schema: str | None = None


def friendly_errors(command: Callable[P, R]) -> Callable[P, R]:
    """The one error wrapper of every command: a MemstoreError becomes one red line on stderr
    and exit status 1 (2 for arguments the library refuses, as for options Typer refuses)."""

    @functools.wraps(command)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            result = command(*args, **kwargs)
            sys.stdout.flush()  # an output error (a full disk, a closed pipe) surfaces here
            return result
        except MemstoreError as exc:
            err.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False, soft_wrap=True)
            raise typer.Exit(2 if isinstance(exc, InvalidArgumentError) else 1) from exc
        except OSError as exc:
            _drop_standard_output()
            err.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False, soft_wrap=True)
            raise typer.Exit(1) from exc

    return run


def _drop_standard_output() -> None:
    """Point standard output at /dev/null, so that its unwritable buffer is not flushed again
    at exit (which would print a second error, with a traceback)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):
        pass  # not a real file (a test's capture): nothing will flush it at exit


def open_store(
    ctx: typer.Context, *, auto_migrate: bool = True, read_only: bool = False
) -> SessionStore:
    """The store named by `--db` / MEMSTORE_DB (and `--schema` / MEMSTORE_SCHEMA). Commands that
    only read open it `read_only`: nothing is created or migrated, and a database that is not
    ready is one line saying what to run."""
    from memstore.store import SessionStore

    settings: Settings = ctx.obj
    return SessionStore(
        settings.db, auto_migrate=auto_migrate, read_only=read_only, schema=settings.schema
    )


def existing_session(store: SessionStore, session_id: str) -> SessionInfo:
    """The session every read names; one that does not exist is the same error for all of them.

    Raises:
        UnknownSessionError: no session `session_id`.
    """

    return store.session_info(session_id)


def json_record(value: Any) -> dict[str, Any]:
    """A dataclass (or dict) of memstore's as a `--json` object: keys in camelCase, as the JSONL
    files spell them (`createdAt`, `nodeId`); values, and keys inside them, as they are."""
    from pydantic.alias_generators import to_camel

    plain = dataclasses.is_dataclass(value) and not isinstance(value, type)
    items = dataclasses.asdict(value) if plain else dict(value)
    return {to_camel(key): item for key, item in items.items()}


def emit_json(value: Any) -> None:
    """Print a value as JSON for scripts (no colour, no wrapping): indented, or on one line when
    it nests deeper than the indenting encoder can go."""
    try:
        text = json.dumps(value, ensure_ascii=False, indent=2)
    except RecursionError:
        from memstore import jsjson

        text = jsjson.dumps(value)  # iterative: any depth
    print(text)


def _print_version(requested: bool) -> None:
    if requested:
        print(f"memstore {__version__} (the {DISTRIBUTION} distribution)")
        raise typer.Exit()


@app.callback()
def options(
    ctx: typer.Context,
    db: Annotated[
        str,
        typer.Option(
            "--db",
            envvar="MEMSTORE_DB",
            help="Database URL: sqlite:///file.db or postgresql://host/db.",
            show_default=True,
        ),
    ] = DEFAULT_URL,
    schema: Annotated[
        str | None,
        typer.Option(
            "--schema",
            envvar=SCHEMA_VARIABLE,
            help="PostgreSQL: the schema memstore's tables live in (default: the connection's "
            "current schema, usually public).",
            show_default=False,
        ),
    ] = None,
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """A memory LLM agents can trust: branchable sessions in SQLite or PostgreSQL."""
    ctx.obj = Settings(db=db, schema=schema or None)


@db_app.command("upgrade")
@friendly_errors
def db_upgrade(
    ctx: typer.Context,
    revision: Annotated[str, typer.Argument(help="Target revision.")] = "head",
) -> None:
    """Create the schema, or bring it up to REVISION (default: the newest)."""
    with open_store(ctx, auto_migrate=False) as store:
        store.upgrade_schema(revision)
        out.print(f"database at revision {store.schema_revision()}")


@db_app.command("downgrade", context_settings={"ignore_unknown_options": True})  # `-1` is a step
@friendly_errors
def db_downgrade(
    ctx: typer.Context,
    revision: Annotated[str, typer.Argument(help="Target revision; 'base' drops every table.")],
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Drop the tables for 'base' without asking.")
    ] = False,
) -> None:
    """Take the schema down to REVISION ('base' removes memstore's tables and their data, after
    asking, unless `--yes`)."""
    with open_store(ctx, auto_migrate=False) as store:
        if revision == "base" and not yes:
            _confirm_dropping_everything(store)
        store.downgrade_schema(revision)
        out.print(f"database at revision {store.schema_revision() or 'base'}")


def _confirm_dropping_everything(store: SessionStore) -> None:
    """Ask before `db downgrade base` deletes every session; refuse when nobody can answer."""
    count = len(store.list_sessions()) if store.schema_revision() else 0
    _confirm(f"Drop memstore's tables and the {count} session(s) they hold?", "dropped")


def _confirm(question: str, undone: str) -> None:
    """Ask `question` on a terminal; without one, refuse (nothing was `undone`) unless --yes."""
    if not sys.stdin.isatty():
        raise InvalidArgumentError(f"{question} Nothing was {undone}: pass --yes to confirm.")
    if not typer.confirm(question, default=False, err=True):
        raise typer.Exit(1)


@app.command("delete")
@friendly_errors
def delete(
    ctx: typer.Context,
    sessions: Annotated[
        list[str], typer.Argument(help="The sessions to delete.", show_default=False)
    ],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Delete without asking.")] = False,
) -> None:
    """Delete sessions, every branch and record of them (after asking, unless `--yes`).

    Every session named must exist; nothing is deleted otherwise.
    """
    with open_store(ctx) as store:
        for session in sessions:
            existing_session(store, session)
        if not yes:
            _confirm(f"Delete {len(sessions)} session(s): {', '.join(sessions)}?", "deleted")
        for session in sessions:
            store.delete_session(session)
            out.print(f"deleted {escape(session)}", soft_wrap=True, highlight=False)


_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 7 * 86_400}


def _duration(text: str | None, option: str) -> timedelta | None:
    """A duration written as a whole number and a unit (`90d`, `12h`, `30m`, `45s`, `2w`).

    Raises:
        InvalidArgumentError: naming `option`, when `text` is no such duration.
    """
    if text is None:
        return None
    number, unit = text[:-1], text[-1:]
    if unit not in _DURATION_UNITS or not number.isascii() or not number.isdigit():
        raise InvalidArgumentError(
            f"{option}: {text!r} is no duration: write a whole number and a unit, s, m, h, d "
            "or w (90d, 12h)"
        )
    try:
        return timedelta(seconds=int(number) * _DURATION_UNITS[unit])
    except OverflowError:
        raise InvalidArgumentError(f"{option}: {text!r} is longer than memstore can hold") from None


@app.command("prune")
@friendly_errors
def prune(
    ctx: typer.Context,
    older_than: Annotated[
        str | None,
        typer.Option(help="Whole sessions last updated longer ago than this (90d, 12h, 2w)."),
    ] = None,
    tag: Annotated[str | None, typer.Option(help="Whole sessions with this tag.")] = None,
    expired: Annotated[
        bool, typer.Option("--expired", help="Whole sessions past their expiry.")
    ] = False,
    unreachable: Annotated[
        bool,
        typer.Option(
            "--unreachable", help="The nodes no head reaches, in every session not deleted whole."
        ),
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run/--yes", help="Only report (the default), or delete.")
    ] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Delete whole sessions, or the branches no head reaches; by default only say what would go.

    The sessions matching every session filter given (`--older-than`, `--tag`, `--expired`) go
    whole; `--unreachable` deletes the nodes no head reaches from every other session (each
    head's ancestors stay). Each session and node is listed with the bytes of its stored turns;
    `--yes` deletes exactly that, in one transaction. SQLite's file shrinks after `VACUUM`.
    """
    older = _duration(older_than, "--older-than")
    with open_store(ctx, read_only=dry_run) as store:
        report = store.prune(
            older_than=older, tag=tag, expired=expired, unreachable=unreachable, dry_run=dry_run
        )
    if as_json:
        emit_json(
            {
                "deleted": report.deleted,
                "sessions": [
                    {
                        "sessionId": session.id,
                        "nodeCount": session.node_count,
                        "bytes": session.bytes,
                    }
                    for session in report.sessions
                ],
                "branches": [
                    {**json_record(branch), "nodeIds": list(branch.node_ids)}
                    for branch in report.branches
                ],
                "nodeCount": report.node_count,
                "bytes": report.bytes,
            }
        )
        return
    verb = "deleted" if report.deleted else "would delete"
    lines = [
        f"{verb} session {escape(session.id)}: {_count(session.node_count, 'node', '0 nodes')}, "
        f"{session.bytes:,} bytes"
        for session in report.sessions
    ]
    lines += [
        f"{verb} {_count(len(branch.node_ids), 'node', '0 nodes')} no head reaches in session "
        f"{escape(branch.session_id)} ({branch.bytes:,} bytes): {' '.join(branch.node_ids)}"
        for branch in report.branches
    ]
    total = (
        f"{_count(len(report.sessions), 'session', '0 sessions')} and "
        f"{_count(report.node_count, 'node', '0 nodes')}, {report.bytes:,} bytes of stored turns"
    )
    lines.append(
        f"deleted {total}"
        if report.deleted
        else f"would delete {total}; nothing was deleted: pass --yes to delete"
    )
    for line in lines:
        out.print(line, soft_wrap=True, highlight=False)


expiry_app = typer.Typer(
    help="Say when sessions expire: each session's own time, the store's and each tag's "
    "default (`prune --expired` deletes what has expired).",
    no_args_is_help=True,
)
app.add_typer(expiry_app, name="expiry")


def _written_duration(ms: int) -> str:
    """A duration in ms as `_duration` reads it, in the largest unit that divides it."""
    for unit, seconds in sorted(_DURATION_UNITS.items(), key=lambda item: -item[1]):
        if ms % (seconds * 1000) == 0:
            return f"{ms // (seconds * 1000)}{unit}"
    return f"{ms}ms"


def _expiry_json(session_id: str, expires_at: int | None) -> dict[str, Any]:
    return {"sessionId": session_id, "expiresAt": expires_at}


def _set_expiries(
    ctx: typer.Context, sessions: list[str], expires_at: int | None, as_json: bool
) -> None:
    """Give every session in `sessions` (all of which must exist) the expiry `expires_at`."""
    from memstore.store.plans.retention import epoch_ms

    epoch_ms(expires_at)  # refused before any session is changed
    with open_store(ctx) as store:
        for session in sessions:
            existing_session(store, session)
        for session in sessions:
            store.update_session(session, expires_at=expires_at)
    if as_json:
        emit_json([_expiry_json(session, expires_at) for session in sessions])
        return
    from memstore.terminal import format_time

    when = "by the defaults"
    if expires_at is not None:
        try:
            when = f"at {format_time(expires_at)} UTC"
        except (ValueError, OverflowError, OSError):  # past the year 9999
            when = f"at epoch ms {expires_at}"
    for session in sessions:
        out.print(f"{escape(session)} expires {when}", soft_wrap=True, highlight=False)


@expiry_app.command("set")
@friendly_errors
def expiry_set(
    ctx: typer.Context,
    sessions: Annotated[list[str], typer.Argument(help="The sessions.", show_default=False)],
    at: Annotated[
        str | None,
        typer.Option(help="Expire at this time (epoch ms, or ISO date/time, UTC unless zoned)."),
    ] = None,
    after: Annotated[
        str | None, typer.Option("--in", help="Expire this long from now (30d, 12h, 2w).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Give sessions an expiry of their own, `--at` a time or `--in` a duration from now.

    It overrides their tags' and the store's defaults; `memstore expiry clear` removes it.
    Every session named must exist; nothing is changed otherwise.
    """
    from memstore.store.plans import now_ms

    if (at is None) == (after is None):
        raise InvalidArgumentError("give exactly one of --at (a time) and --in (a duration)")
    later = _duration(after, "--in")
    if later is None:
        expires_at = _time_option(at, "--at")
    else:
        expires_at = now_ms() + later // timedelta(milliseconds=1)
    _set_expiries(ctx, sessions, expires_at, as_json)


@expiry_app.command("clear")
@friendly_errors
def expiry_clear(
    ctx: typer.Context,
    sessions: Annotated[list[str], typer.Argument(help="The sessions.", show_default=False)],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Remove sessions' own expiry, back to their tags' or the store's default.

    Every session named must exist; nothing is changed otherwise.
    """
    _set_expiries(ctx, sessions, None, as_json)


@expiry_app.command("default")
@friendly_errors
def expiry_default(
    ctx: typer.Context,
    after: Annotated[
        str | None,
        typer.Argument(
            help="How long after its last update a session expires (90d, 12h, 2w).",
            show_default=False,
        ),
    ] = None,
    tag: Annotated[
        str | None, typer.Option(help="The default of sessions with this tag (else the store's).")
    ] = None,
    remove: Annotated[bool, typer.Option("--remove", help="Remove the default.")] = False,
) -> None:
    """Set (or `--remove`) the store's default expiry, or a tag's with `--tag`.

    A session without an expiry of its own expires that long after its last update: by the
    longest default among its tags that have one, else by the store's.
    """
    if (after is None) != remove:
        raise InvalidArgumentError("give a duration (90d) or --remove, not both or neither")
    scope = "the store" if tag is None else f"tag {escape(tag)}"
    with open_store(ctx) as store:
        store.set_expiry_default(_duration(after, "AFTER"), tag=tag)
    said = "no default expiry"
    if after is not None:
        said = f"sessions expire {after} after their last update"
    out.print(f"{scope}: {said}", soft_wrap=True, highlight=False)


@expiry_app.command("defaults")
@friendly_errors
def expiry_defaults(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List the store's default expiry and each tag's."""
    with open_store(ctx, read_only=True) as store:
        defaults = store.expiry_defaults()
    tags = sorted(defaults.tags.items())
    if as_json:
        store_default = None
        if defaults.store is not None:
            store_default = {"afterMs": defaults.store, "after": _written_duration(defaults.store)}
        emit_json(
            {
                "store": store_default,
                "tags": [
                    {"tag": tag, "afterMs": ms, "after": _written_duration(ms)} for tag, ms in tags
                ],
            }
        )
        return
    lines = [
        "the store: "
        + ("no default" if defaults.store is None else _written_duration(defaults.store))
    ]
    lines += [f"tag {escape(tag)}: {_written_duration(ms)}" for tag, ms in tags]
    for line in lines:
        out.print(line, soft_wrap=True, highlight=False)


@db_app.command("current")
@friendly_errors
def db_current(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Show the schema revision of the database and the newest one memstore knows.

    The exit status is 0 when the database is up to date, 1 otherwise (no memstore tables, an
    older revision, or a newer memstore's). It only reads: a missing file is not created.
    """
    from memstore.store.engine import upgrade_command
    from memstore.store.migrate import head_revision, is_known_revision, newer_database_message

    with open_store(ctx, auto_migrate=False, read_only=True) as store:
        current, head = store.schema_revision(), head_revision()
        command = upgrade_command(store.engine.url, store.schema)
    if current is None:
        state = "behind"
        line = f"revision none (no memstore tables): create them with {command}"
    elif current == head:
        state, line = "current", f"revision {current}: up to date"
    elif is_known_revision(current):
        state = "behind"
        line = f"revision {current}: behind (newest is {head}): upgrade with {command}"
    else:
        state, line = "newer", newer_database_message("the database", current)
    if as_json:
        record = {"current": current, "head": head, "up_to_date": current == head, "state": state}
        emit_json(json_record(record))
    else:
        out.print(escape(line), soft_wrap=True, highlight=False)
    if state != "current":
        raise typer.Exit(1)


@db_app.command("clean-imports")
@friendly_errors
def db_clean_imports(
    ctx: typer.Context,
    force: Annotated[
        list[str] | None,
        typer.Option(
            "--force",
            metavar="SESSION",
            help="Take SESSION over whatever its import's state (repeatable): for an importer "
            "that cannot be reached; if it still runs, it fails.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Delete the partial imports (SQLite) whose process no longer runs, which stay hidden
    until deleted; opening the database for writing does it too."""
    with open_store(ctx, read_only=True):
        pass  # a database that is not ready: one line saying what to run, nothing created
    with open_store(ctx, auto_migrate=False) as store:  # opening cleans nothing: this reports all
        cleaned = store.clean_abandoned_imports(force=force or [])
    for session_id in cleaned:
        out.print(f"deleted the partial import of session {escape(repr(session_id))}")
    if not cleaned:
        out.print("no abandoned imports")


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
    as_json: Annotated[
        bool,
        typer.Option("--json", help="Print the report as JSON (with --watch: a line per file)."),
    ] = False,
) -> None:
    """Import session files: memstore's legacy JSONL, or pi's and Claude Code's.

    pi keeps its sessions in ~/.pi/agent/sessions, Claude Code in ~/.claude/projects.

    Each file is one session, imported all or nothing. Importing a file again adds only what it
    gained since; a file whose imported part changed is refused. A bad file is reported and
    skipped; the exit status is 1 if any was.
    """
    if session is not None and (watch or source not in (ImportSource.JSONL, ImportSource.AUTO)):
        raise typer.BadParameter("--session names one legacy file's session (--from jsonl)")
    _check_session_option(paths, session)
    _report_warnings_ourselves()
    options: dict[str, Any] = {
        "source": source.value,
        "verify": verify,
        "keep_mismatched": keep_mismatched,
    }
    with open_store(ctx) as store:
        if watch:
            _watch(store, paths, options, interval, as_json)
            return
        with _progress_bars() as file_progress:
            report = store.import_files(
                paths, session_id=session, file_progress=file_progress, **options
            )
        short = _short_ids(store, [(item.session_id, item.leaf) for item in report.files])
    failures = [str(failure) for failure in report.failures]
    if as_json:
        emit_json({"files": [_import_json(item) for item in report.files], "errors": failures})
    else:
        if report.files:
            _print_import_table(report.files, short)
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
    return f"{escape(item.session_id)}: +{item.records} lines, +{item.nodes} nodes{notes}"


def _import_json(item: FileImport) -> dict[str, Any]:
    return {
        "path": str(item.path),
        "sessionId": item.session_id,
        "records": item.records,  # lines of the file, as `stats` counts them
        "nodes": item.nodes,
        "leaf": item.leaf,
        "unchanged": item.unchanged,
        "warnings": item.warnings,
    }


def _print_import_table(reports: list[FileImport], short: Mapping[NodeKey, str]) -> None:
    from memstore.terminal import data_table

    rows = [
        (
            item.session_id,
            str(item.records),
            str(item.nodes),
            _shown(short, item.session_id, item.leaf),
            "unchanged" if item.unchanged else _count(len(item.warnings), "warning", ""),
        )
        for item in reports
    ]
    headers = ("session", "lines", "nodes", "leaf", "note")
    copyable = (True, True, True, True, False)
    out.print(data_table(headers, rows, copyable=copyable, width=out.width, title="imported"))


def _count(n: int, noun: str, none: str) -> str:
    """'1 warning', '3 warnings', or `none` for zero."""
    if n == 0:
        return none
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


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
    with open_store(ctx, read_only=True) as store:
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


class SessionOrderChoice(enum.StrEnum):
    """How `memstore sessions` orders sessions."""

    updated = "updated"
    id = "id"


def _time_option(value: str | None, name: str) -> int | None:
    """A time given on the command line: epoch milliseconds, or an ISO date or time (UTC
    unless it names its zone)."""
    from datetime import UTC, datetime

    if value is None:
        return None
    if value.lstrip("-").isdigit():
        return int(value)
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise InvalidArgumentError(
            f"{name} is epoch milliseconds or an ISO date or time (2026-12-01, "
            f"2026-12-01T10:00+01:00), not {value!r}"
        ) from None
    return int((moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp() * 1000)


@app.command("sessions")
@friendly_errors
def list_sessions(
    ctx: typer.Context,
    tag: Annotated[str | None, typer.Option(help="Only sessions with this tag.")] = None,
    limit: Annotated[int | None, typer.Option(min=0, help="At most this many.")] = None,
    page_size: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="List a page of this many and say how to get the next (--json: an object with "
            "sessions and nextCursor).",
        ),
    ] = None,
    cursor: Annotated[
        str | None,
        typer.Option(
            help="Continue after this cursor (a page's nextCursor); pages of 100 by default."
        ),
    ] = None,
    updated_before: Annotated[
        str | None,
        typer.Option(help="Only sessions updated before this (epoch ms, or ISO date/time, UTC)."),
    ] = None,
    updated_after: Annotated[
        str | None, typer.Option(help="Only sessions updated after this.")
    ] = None,
    order: Annotated[
        SessionOrderChoice,
        typer.Option(help="updated: newest first; id: by id (pages list each session once)."),
    ] = SessionOrderChoice.updated,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List sessions, most recently updated first, with their usage totals in `--json`.

    On a narrow terminal the branch count, then the agent, are left out so ids and times stay
    whole; `--json` has every field. With `--page-size` or `--cursor` it lists one page and
    prints the command for the next (keyset paging: as fast at any depth).
    """
    from memstore.terminal import data_table, format_time

    paged = page_size is not None or cursor is not None
    if paged and limit is not None:
        raise InvalidArgumentError("--limit lists the first sessions; page with --page-size alone")
    window: dict[str, Any] = {
        "tag": tag,
        "updated_before": _time_option(updated_before, "--updated-before"),
        "updated_after": _time_option(updated_after, "--updated-after"),
        "order": order.value,
    }
    next_cursor = None
    with open_store(ctx, read_only=True) as store:
        if paged:
            page = store.session_page(limit=page_size or 100, cursor=cursor, **window)
            infos, next_cursor = page.sessions, page.next_cursor
        else:
            infos = store.sessions(limit=limit, **window)
        short = {} if as_json else _short_ids(store, [(info.id, info.head) for info in infos])
    if as_json:
        listed = [_session_json(info) for info in infos]
        emit_json({"sessions": listed, "nextCursor": next_cursor} if paged else listed)
        return
    rows = [
        (
            info.id,
            info.agent,
            str(info.node_count),
            str(info.branch_count),
            format_time(info.updated_at),
            _shown(short, info.id, info.head),
            info.title or "",
        )
        for info in infos
    ]
    headers = ("session", "agent", "nodes", "branches", "updated (UTC)", "head", "title")
    copyable = (True, True, True, True, True, True, False)
    spare = ("branches", "agent")  # left out on a narrow terminal; --json always has them
    table = data_table(
        headers, rows, copyable=copyable, width=out.width, spare=spare, one_line=("title",)
    )
    out.print(table)
    if next_cursor is not None:
        err.print(f"next page: --cursor {next_cursor}", soft_wrap=True, highlight=False)


def _session_json(info: SessionInfo) -> dict[str, Any]:
    return {
        "sessionId": info.id,
        "agent": info.agent,
        "nodes": info.node_count,
        "branches": info.branch_count,
        "createdAt": info.created_at,
        "updatedAt": info.updated_at,
        "head": info.head,
        "title": info.title,
        "tags": list(info.tags),
        "metadata": dict(info.metadata),
        "expiresAt": info.expires_at,
        "inputTokens": info.input_tokens,
        "outputTokens": info.output_tokens,
        "cacheReadTokens": info.cache_read_tokens,
        "cacheWriteTokens": info.cache_write_tokens,
        "costUsd": info.cost_usd,
    }


@app.command()
@friendly_errors
def tree(
    ctx: typer.Context,
    session: Annotated[str, typer.Argument(help="The session to draw.")],
    depth: Annotated[
        int | None,
        typer.Option(min=0, help="Draw branches at most this many forks deep (0: the root's run)."),
    ] = None,
    all_turns: Annotated[
        bool, typer.Option("--all-turns", help="Draw every turn of a long run, unfolded.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print nodes as JSON.")] = False,
) -> None:
    """Draw a session's DAG: its branches, the head marked, each turn on one line; a long run
    without a fork shows its first and last turns and the head, folding the rest into a count."""
    from memstore.terminal import render_tree

    with open_store(ctx, read_only=True) as store:
        existing_session(store, session)
        graph = store.load_session(session)
    if as_json:
        nodes = [{"id": n.id, "parent": n.parent, "role": n.turn.role} for n in graph.all()]
        emit_json({"sessionId": session, "head": graph.leaf, "nodes": nodes})
    else:
        out.print(render_tree(graph, depth=depth, fold=not all_turns))


@app.command()
@friendly_errors
def show(
    ctx: typer.Context,
    session: Annotated[str, typer.Argument(help="The session to show.")],
    leaf: Annotated[
        str | None,
        typer.Option(help="End of the path: a node id or a unique prefix (default: the head)."),
    ] = None,
    last: Annotated[int | None, typer.Option(min=0, help="Only the newest N turns.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the nodes as JSON.")] = False,
) -> None:
    """Print the transcript of one path of a session (root to the head, or to --leaf)."""
    from memstore.terminal import render_transcript

    with open_store(ctx, read_only=True) as store:
        existing_session(store, session)
        if leaf is not None:
            leaf = store.resolve_node_id(session, leaf)  # a short id, as the tables show them
        nodes = store.load_path_nodes(session, leaf, last=last)
        short = {} if as_json else store.short_node_ids(session, (node.id for node in nodes))
    if as_json:
        from memstore.json_stream import write_nodes_json

        write_nodes_json(nodes, sys.stdout.write)
    else:
        out.print(render_transcript(nodes, short))


NodeKey = tuple[str, str]
"""A node as (session id, node id)."""


def _short_ids(store: SessionStore, wanted: Iterable[tuple[str, str | None]]) -> dict[NodeKey, str]:
    """Each (session, node id) pair's short id, unique in its session (a None id: no node)."""
    pairs = [(session_id, node_id) for session_id, node_id in wanted if node_id is not None]
    return store.short_node_ids_by_session(pairs) if pairs else {}


def _shown(short: Mapping[NodeKey, str], session_id: str, node_id: str | None) -> str:
    """A node id as tables show it: its short form, or whole when it has none (or '')."""
    return "" if node_id is None else short.get((session_id, node_id), node_id)


SNIPPET_WIDTH = 40
"""Characters a search snippet's column keeps at least, so that it reads as a phrase."""


@app.command()
@friendly_errors
def search(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="Words to find (all of them).")],
    session: Annotated[str | None, typer.Option(help="Only in this session.")] = None,
    limit: Annotated[int, typer.Option(min=0, help="At most this many hits.")] = 20,
    timeout: Annotated[
        float,
        typer.Option(min=0.001, help="Stop the search after this many seconds."),
    ] = 10.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Full-text search over text, thinking, tool calls and results, on every branch."""
    from memstore.terminal import data_table, format_time

    with open_store(ctx, read_only=True) as store:
        if session is not None:
            existing_session(store, session)
        hits = store.search(query, session_id=session, limit=limit, timeout=timeout)
        short = (
            {} if as_json else _short_ids(store, [(hit.session_id, hit.node_id) for hit in hits])
        )
    if as_json:
        emit_json([json_record(hit) for hit in hits])
        return
    if not hits:
        out.print("no matches", highlight=False)
        return
    rows = [
        (
            hit.session_id,
            hit.agent,
            _shown(short, hit.session_id, hit.node_id),
            hit.role,
            format_time(hit.created_at),
            " ".join(hit.snippet.split()),  # runs of spaces, tabs and newlines as one space
        )
        for hit in hits
    ]
    headers = ("session", "agent", "node", "role", "time (UTC)", "snippet")
    copyable = (True, True, True, True, True, False)
    readable = {"snippet": SNIPPET_WIDTH}  # narrower, a hit below its ids instead
    table = data_table(
        headers, rows, copyable=copyable, width=out.width, readable=readable, narrow="entries"
    )
    out.print(table)


SQL_TABLE_ROWS = 1000
"""Rows `sql` draws as a table, at most: a bigger answer is for `--json`, which prints it as
fast as it is read."""


@app.command()
@friendly_errors
def sql(
    ctx: typer.Context,
    statement: Annotated[str, typer.Argument(help="One SELECT (read-only).")],
    limit: Annotated[
        int,
        typer.Option(min=0, help=f"At most this many rows (a table: at most {SQL_TABLE_ROWS})."),
    ] = 1000,
    timeout: Annotated[
        float,
        typer.Option(min=0.001, help="Stop the query after this many seconds."),
    ] = 5.0,
    max_temp_mb: Annotated[
        float,
        typer.Option(
            min=0.001, help="SQLite: stop the query once its temporary files pass this many MB."
        ),
    ] = 500.0,
    max_memory_mb: Annotated[
        float,
        typer.Option(min=0.001, help="SQLite: stop the query once its memory passes this many MB."),
    ] = 500.0,
    read_url: Annotated[
        str | None,
        typer.Option(
            envvar="MEMSTORE_READ_URL",
            help="PostgreSQL: run the query as this login, one that can only read.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print rows as JSON objects.")] = False,
) -> None:
    """Run one read-only SQL query (the views turns, blocks, tool_calls, session_stats help)."""
    from memstore.terminal import data_table

    shown = limit if as_json else min(limit, SQL_TABLE_ROWS)  # a table is read, JSON is piped
    with open_store(ctx, read_only=True) as store:
        try:
            result = store.read_only_query(
                statement,
                limit=shown,
                timeout=timeout,
                read_url=read_url,
                max_temp_mb=max_temp_mb,
                max_memory_mb=max_memory_mb,
            )
        except KeyboardInterrupt:
            err.print("[red]error:[/red] the query was stopped (Ctrl-C)", highlight=False)
            raise typer.Exit(130) from None
    if as_json:
        emit_json([dict(zip(result.columns, row, strict=True)) for row in result.rows])
        return
    rows = [tuple("" if value is None else str(value) for value in row) for row in result.rows]
    copyable = [_copyable(column) for column in zip(*result.rows, strict=True)]
    copyable = copyable or [True] * len(result.columns)
    out.print(data_table(result.columns, rows, copyable=copyable, width=out.width))
    if result.truncated and shown < limit:
        err.print(
            f"(only the first {shown:,} rows: a table shows at most {SQL_TABLE_ROWS:,};"
            f" pass --json to print up to --limit {limit:,})"
        )
    elif result.truncated:
        err.print(f"(only the first {limit} rows; pass --limit to see more)")


class UsageGroupingChoice(enum.StrEnum):
    """How `memstore stats --by` groups usage."""

    session = "session"
    model = "model"
    day = "day"


@app.command()
@friendly_errors
def stats(
    ctx: typer.Context,
    by: Annotated[
        UsageGroupingChoice | None,
        typer.Option(help="Instead: tokens and cost (node_usage) by session, model or day (UTC)."),
    ] = None,
    limit: Annotated[int | None, typer.Option(min=0, help="With --by: at most this many.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Totals over the store: sessions, nodes, tool calls, failures, most used tools; or, with
    `--by`, what the model calls cost, the most expensive first."""
    from memstore.terminal import data_table

    if by is not None:
        with open_store(ctx, read_only=True) as store:
            groups = store.usage_stats(by.value, limit=limit)
        if as_json:
            emit_json([json_record(group) for group in groups])
            return
        headers = (by.value, "nodes", "input", "output", "cache read", "cache write", "USD")
        usage_rows = [
            (
                "" if group.key is None else group.key,
                str(group.nodes),
                str(group.input_tokens),
                str(group.output_tokens),
                str(group.cache_read_tokens),
                str(group.cache_write_tokens),
                f"{group.cost_usd:.4f}",
            )
            for group in groups
        ]
        out.print(data_table(headers, usage_rows, copyable=(True,) * 7, width=out.width))
        return
    with open_store(ctx, read_only=True) as store:
        totals = store.stats()
    if as_json:
        emit_json(json_record(totals))
        return
    out.print(
        f"{totals.sessions} sessions, {totals.nodes} nodes, {totals.records} lines of JSONL, "
        f"{totals.tool_calls} tool calls ({totals.failed_tool_calls} failed)"
    )
    rows = [(name, str(calls)) for name, calls in totals.top_tools]
    table = data_table(
        ("tool", "calls"), rows, copyable=(True, True), width=out.width, title="most used tools"
    )
    out.print(table)


def _copyable(values: Iterable[Any]) -> bool:
    """Whether a query's column holds values a user may copy whole: numbers, ids, times
    (anything without spaces up to 64 characters), rather than text to wrap."""
    texts = (value for value in values if isinstance(value, str))
    return not any(len(text) > COPYABLE_TEXT or any(c.isspace() for c in text) for text in texts)


class InvokerChoice(enum.StrEnum):
    """Which model `memstore compact` calls."""

    EXTRACTIVE = "extractive"
    OPENAI = "openai"
    ANTHROPIC = "anthropic"


def _invoker(choice: InvokerChoice, model: str, base_url: str | None) -> ModelInvoker:
    from memstore import invokers

    if choice is InvokerChoice.OPENAI:
        return invokers.openai_compatible(base_url, model)
    if choice is InvokerChoice.ANTHROPIC:
        return invokers.anthropic(model, base_url=base_url)
    return invokers.extractive()


@app.command()
@friendly_errors
def compact(
    ctx: typer.Context,
    session: Annotated[str, typer.Argument(help="The session whose head path to condense.")],
    invoker: Annotated[
        InvokerChoice,
        typer.Option(
            help="extractive: offline, no model; openai: any OpenAI-compatible "
            "endpoint (OPENAI_BASE_URL, OPENAI_API_KEY); anthropic: ANTHROPIC_API_KEY."
        ),
    ] = InvokerChoice.EXTRACTIVE,
    model: Annotated[str, typer.Option(help="The summarizing model's id.")] = "extractive",
    window: Annotated[
        int, typer.Option(min=1, help="The model's context window, in tokens.")
    ] = 128_000,
    max_output: Annotated[
        int | None, typer.Option(min=1, help="Tokens to reserve for the model's reply.")
    ] = None,
    base_url: Annotated[str | None, typer.Option(help="The API's base URL.")] = None,
    keep_recent: Annotated[int, typer.Option(min=0, help="Trailing turns kept verbatim.")] = 8,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Condense a session's head path into a new branch: a summary, then the kept tail.

    The old branch stays in place; the head moves to the new branch.
    """
    from memstore.condense import check_window
    from memstore.types import CompactionPolicy, ModelCard

    card = ModelCard(id=model, context_window=window, max_output_tokens=max_output)
    check_window(card)  # before the database is opened (the library checks it too)
    with open_store(ctx) as store:
        existing_session(store, session)
        chosen = _invoker(invoker, model, base_url)
        result = store.compact_session(
            session, card, chosen, CompactionPolicy(keep_recent=keep_recent)
        )
    if as_json:
        emit_json(json_record(result))
    elif result.previous_head is None:
        out.print(f"{escape(session)} is empty: nothing to condense")
    elif not result.changed:
        out.print(
            f"{escape(session)}: nothing to condense: all {result.kept_turns} turns of the "
            f"head's path are kept (--keep-recent {keep_recent})"
        )
    else:
        out.print(
            f"{escape(session)}: condensed {result.condensed_turns} turns "
            f"(~{result.tokens_before} -> ~{result.tokens_after} tokens), kept "
            f"{result.kept_turns}; new head {result.new_head} (previous head "
            f"{result.previous_head} is still there)"
        )
    if result.changed and result.tokens_after > window:
        err.print(
            f"[yellow]warning:[/yellow] the new branch still holds ~{result.tokens_after} "
            f"tokens, more than the window of {window}: keep fewer turns (--keep-recent)",
            soft_wrap=True,
        )


@app.command()
@friendly_errors
def demo(
    ctx: typer.Context,
    workdir: Annotated[
        Path, typer.Option(help="Where to write the demo's legacy JSONL files and export.")
    ] = Path("memstore-demo"),
) -> None:
    """Build a realistic example in the database (API sessions with branches and tool calls,
    legacy JSONL files imported) and show a tree, a search, a SQL query and an export."""
    from memstore.demo import run_demo

    try:
        workdir.mkdir(parents=True, exist_ok=True)  # before anything is written
    except OSError as exc:
        raise OutputFileError(f"--workdir {workdir}: {exc.strerror or exc}") from exc
    with open_store(ctx) as store:
        run_demo(store, out, workdir)


def main() -> None:
    """Entry point of the `memstore` console script."""
    # A turn may hold lone surrogates (JavaScript strings can): write them as `\udXXX` escapes,
    # which is also how JSON spells them, rather than fail half-way through the output.
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
    app()


if __name__ == "__main__":
    main()
