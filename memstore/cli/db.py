"""`memstore db`: create, upgrade, downgrade and inspect the schema; clean abandoned imports."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from memstore.cli._common import (
    TenantOption,
    confirm,
    db_app,
    emit_json,
    friendly_errors,
    json_record,
    open_store,
    out,
)

if TYPE_CHECKING:
    from memstore.store import SessionStore


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
    confirm(f"Drop memstore's tables and the {count} session(s) they hold?", "dropped")


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
    tenant: TenantOption = None,
) -> None:
    """Delete the partial imports (SQLite) whose process no longer runs, which stay hidden
    until deleted; opening the database for writing does it too."""
    with open_store(ctx, tenant=tenant, read_only=True):
        pass  # a database that is not ready: one line saying what to run, nothing created
    # Opening cleans nothing: this reports all.
    with open_store(ctx, tenant=tenant, auto_migrate=False) as store:
        cleaned = store.clean_abandoned_imports(force=force or [])
    for session_id in cleaned:
        out.print(f"deleted the partial import of session {escape(repr(session_id))}")
    if not cleaned:
        out.print("no abandoned imports")


@db_app.command("search-role")
@friendly_errors
def db_search_role(
    ctx: typer.Context,
    role: Annotated[
        str, typer.Option("--role", help="The role to hand the search to.")
    ] = "memstore_search",
    print_only: Annotated[
        bool, typer.Option("--print", help="Print the SQL for an operator instead of running it.")
    ] = False,
) -> None:
    """Hand PostgreSQL's search to a role with BYPASSRLS (made if missing), so that a search
    reads the full-text indexes for logins that row-level security binds; an operator's
    command, run as a superuser (docs/tenants.md). `--print` only prints the SQL."""
    with open_store(ctx, auto_migrate=False, read_only=print_only) as store:
        statements = store.hand_search_to_role(role, run=not print_only)
    if print_only:
        for statement in statements:
            out.print(escape(statement) + ";", soft_wrap=True, highlight=False)
    else:
        out.print(f"search handed to the role {escape(repr(role))}", highlight=False)
