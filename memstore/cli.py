"""The `memstore` command line: a thin skin over the library.

Each command opens the store, makes one library call and renders the result; a memstore error
becomes one clear line on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ParamSpec, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import DownloadColumn, Progress, TaskID, TextColumn
from rich.table import Table

from memstore.errors import MemstoreError
from memstore.jsonl import session_file
from memstore.store import DEFAULT_URL, SessionStore
from memstore.store.migrate import head_revision
from memstore.store.transfer import FileImport, import_targets

__all__ = ["app", "main"]

P = ParamSpec("P")
R = TypeVar("R")

app = typer.Typer(
    name="memstore",
    help="A memory LLM agents can trust: branchable sessions in SQLite or PostgreSQL.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
db_app = typer.Typer(help="Create, upgrade or inspect the database schema.", no_args_is_help=True)
app.add_typer(db_app, name="db")

out = Console()
err = Console(stderr=True)


@dataclass
class Settings:
    """Options shared by every command."""

    db: str


def friendly_errors(command: Callable[P, R]) -> Callable[P, R]:
    """Turn a MemstoreError into one red line on stderr and exit status 1."""

    @functools.wraps(command)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except MemstoreError as exc:
            err.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False, soft_wrap=True)
            raise typer.Exit(1) from exc

    return run


def open_store(ctx: typer.Context, *, auto_migrate: bool = True) -> SessionStore:
    """The store named by `--db` / MEMSTORE_DB."""
    settings: Settings = ctx.obj
    return SessionStore(settings.db, auto_migrate=auto_migrate)


@contextmanager
def friendly_store(ctx: typer.Context) -> Iterator[SessionStore]:
    """`open_store`, closed afterwards, with memstore errors turned into one line and exit 1."""
    try:
        with open_store(ctx) as store:
            yield store
    except (MemstoreError, ValueError) as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False, soft_wrap=True)
        raise typer.Exit(1) from exc


def emit_json(value: Any) -> None:
    """Print a value as JSON for scripts (no colour, no wrapping)."""
    print(json.dumps(value, ensure_ascii=False, indent=2))


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
) -> None:
    """A memory LLM agents can trust: branchable sessions in SQLite or PostgreSQL."""
    ctx.obj = Settings(db=db)


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


@db_app.command("downgrade")
@friendly_errors
def db_downgrade(
    ctx: typer.Context,
    revision: Annotated[str, typer.Argument(help="Target revision; 'base' drops every table.")],
) -> None:
    """Take the schema down to REVISION ('base' removes memstore's tables and their data)."""
    with open_store(ctx, auto_migrate=False) as store:
        store.downgrade_schema(revision)
        out.print(f"database at revision {store.schema_revision() or 'base'}")


@db_app.command("current")
@friendly_errors
def db_current(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Show the schema revision of the database and the newest one memstore knows."""
    with open_store(ctx, auto_migrate=False) as store:
        current, head = store.schema_revision(), head_revision()
    if as_json:
        emit_json({"current": current, "head": head, "up_to_date": current == head})
    else:
        state = "up to date" if current == head else f"behind (newest is {head})"
        out.print(f"revision {current or 'none (empty database)'}: {state}")


@app.command("import")
def import_files(
    ctx: typer.Context,
    paths: Annotated[list[Path], typer.Argument(help="JSONL files or directories of them.")],
    session: Annotated[
        str | None, typer.Option(help="Session id for a single file (default: its name).")
    ] = None,
    verify: Annotated[
        bool, typer.Option(help="Check that every node id is its content hash.")
    ] = True,
    keep_mismatched: Annotated[
        bool, typer.Option(help="Import nodes whose id is not their hash, with a warning.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Import legacy JSONL session files (each file is one session, all or nothing).

    Importing a file again adds only what it gained since; a file whose imported part changed
    is refused. A bad file is reported and skipped; the exit status is 1 if any was.
    """
    with friendly_store(ctx) as store:
        targets = [target for path in paths for target in import_targets(path, session)]
        reports, failures = _import_with_progress(store, targets, verify, keep_mismatched)
    if as_json:
        emit_json({"files": [_import_json(item) for item in reports], "errors": failures})
    else:
        _print_import_table(reports)
        for failure in failures:
            err.print(f"[red]error:[/red] {escape(failure)}", soft_wrap=True)
    if failures:
        raise typer.Exit(1)


def _import_with_progress(
    store: SessionStore, targets: list[tuple[Path, str]], verify: bool, keep_mismatched: bool
) -> tuple[list[FileImport], list[str]]:
    reports: list[FileImport] = []
    failures: list[str] = []
    columns = (*Progress.get_default_columns(), DownloadColumn(), TextColumn("{task.fields[n]}"))
    with Progress(*columns, console=err, transient=True) as progress:
        for file, session_id in targets:
            task = progress.add_task(file.name, total=file.stat().st_size, n="")

            def advance(done: int, records: int, task: TaskID = task) -> None:
                progress.update(task, completed=done, n=f"{records} records")

            try:
                report = store.import_jsonl(
                    file,
                    session_id=session_id,
                    verify=verify,
                    keep_mismatched=keep_mismatched,
                    progress=advance,
                )
            except MemstoreError as exc:
                failures.append(str(exc))
            else:
                reports.extend(report.files)
            progress.remove_task(task)
    return reports, failures


def _import_json(item: FileImport) -> dict[str, Any]:
    return {
        "path": str(item.path),
        "session": item.session_id,
        "records": item.records,
        "nodes": item.nodes,
        "leaf": item.leaf,
        "unchanged": item.unchanged,
        "warnings": item.warnings,
    }


def _print_import_table(reports: list[FileImport]) -> None:
    table = Table("session", "records", "nodes", "leaf", "note", title="imported")
    for item in reports:
        note = "unchanged" if item.unchanged else "; ".join(item.warnings)
        leaf = (item.leaf or "")[:12]
        table.add_row(item.session_id, str(item.records), str(item.nodes), leaf, note)
    out.print(table)


@app.command()
def export(
    ctx: typer.Context,
    session: Annotated[str | None, typer.Argument(help="The session to export.")] = None,
    output: Annotated[
        Path, typer.Option("--output", "-o", help="The file (or, with --all, the directory).")
    ] = Path("."),
    all_sessions: Annotated[
        bool, typer.Option("--all", help="Export every session into the -o directory.")
    ] = False,
) -> None:
    """Write sessions back as legacy JSONL files, byte for byte as they were imported."""
    if all_sessions == (session is not None):
        raise typer.BadParameter("name one SESSION, or pass --all")
    with friendly_store(ctx) as store:
        if session is not None:
            lines = store.export_jsonl(session, output)
            out.print(f"{session}: {lines} lines -> {output}")
            return
        for session_id in store.list_sessions():
            target = session_file(output, session_id)
            out.print(f"{session_id}: {store.export_jsonl(session_id, target)} lines -> {target}")


@app.command()
@friendly_errors
def demo(ctx: typer.Context) -> None:
    """Build a small example in the database and show what memstore keeps."""
    from memstore.demo import run_demo

    with open_store(ctx) as store:
        run_demo(store, out)


def main() -> None:
    """Entry point of the `memstore` console script."""
    app()


if __name__ == "__main__":
    main()
