"""`memstore tenants`: the tenants of a database and their sessions, for an operator."""

from __future__ import annotations

from typing import Annotated

import typer

from memstore.cli._common import app, emit_json, friendly_errors, json_record, open_store, out


@app.command("tenants")
@friendly_errors
def tenants(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List every tenant that holds sessions, with how many and when one was last updated.

    An operator's command: it lists every tenant, whatever `--tenant` says ('' is the default
    tenant). On PostgreSQL it needs a login the row-level security policies do not bind (a
    superuser or a `BYPASSRLS` role, the operator's): an ordinary login sees only its own
    tenant (docs/tenants.md).
    """
    from memstore.terminal import data_table, format_time

    with open_store(ctx, read_only=True) as store:
        found = store.tenants()
    if as_json:
        emit_json([json_record(totals) for totals in found])
        return
    rows = [
        (totals.tenant or "''", str(totals.sessions), format_time(totals.updated_at))
        for totals in found
    ]
    headers = ("tenant", "sessions", "updated (UTC)")
    out.print(data_table(headers, rows, copyable=(True, True, True), width=out.width))
