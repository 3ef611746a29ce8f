"""Reading the store: `sessions`, `tree`, `show`, `search`, `sql` and `stats`."""

from __future__ import annotations

import enum
import shlex
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from memstore.cli._common import (
    TenantOption,
    app,
    emit_json,
    err,
    existing_session,
    friendly_errors,
    global_options_given,
    json_record,
    open_store,
    out,
    short_ids,
    shown_id,
    time_option,
)
from memstore.errors import InvalidArgumentError

if TYPE_CHECKING:
    from memstore.store import SessionInfo


COPYABLE_TEXT = 64


class SessionOrderChoice(enum.StrEnum):
    """How `memstore sessions` orders sessions."""

    updated = "updated"
    id = "id"


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
    tenant: TenantOption = None,
) -> None:
    """List sessions, most recently updated first, with their usage totals in `--json`.

    On a narrow terminal the branch count, then the agent, are left out so ids and times stay
    whole; `--json` has every field. With `--page-size` or `--cursor` it lists one page and
    prints the command for the next, this command's options kept (keyset paging: as fast at
    any depth).
    """
    from memstore.store.plans.paging import decode_cursor, tag_filter
    from memstore.terminal import data_table, format_time

    paged = page_size is not None or cursor is not None
    if paged and limit is not None:
        raise InvalidArgumentError("--limit lists the first sessions; page with --page-size alone")
    if cursor is not None:
        decode_cursor(cursor, order.value, "--cursor")  # refused naming the options
    window: dict[str, Any] = {
        "tag": tag_filter(tag, "--tag"),
        "updated_before": time_option(updated_before, "--updated-before"),
        "updated_after": time_option(updated_after, "--updated-after"),
        "order": order.value,
    }
    next_cursor = None
    with open_store(ctx, tenant=tenant, read_only=True) as store:
        if paged:
            page = store.session_page(limit=page_size or 100, cursor=cursor, **window)
            infos, next_cursor = page.sessions, page.next_cursor
        else:
            infos = store.sessions(limit=limit, **window)
        short = {} if as_json else short_ids(store, [(info.id, info.head) for info in infos])
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
            shown_id(short, info.id, info.head),
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
        given = {
            "--tag": tag,
            "--updated-before": updated_before,
            "--updated-after": updated_after,
            "--order": None if order is SessionOrderChoice.updated else order.value,
            "--page-size": None if page_size is None else str(page_size),
            "--tenant": tenant,
            "--cursor": next_cursor,
        }
        command = shlex.join(
            ["memstore", *global_options_given(ctx), "sessions"]
            + [
                part
                for option, value in given.items()
                if value is not None
                for part in (option, value)
            ]
        )
        err.print(f"next page: {escape(command)}", soft_wrap=True, highlight=False)


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
    tenant: TenantOption = None,
) -> None:
    """Draw a session's DAG: its branches, the head marked, each turn on one line; a long run
    without a fork shows its first and last turns and the head, folding the rest into a count."""
    from memstore.terminal import render_tree

    with open_store(ctx, tenant=tenant, read_only=True) as store:
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
    tenant: TenantOption = None,
) -> None:
    """Print the transcript of one path of a session (root to the head, or to --leaf)."""
    from memstore.terminal import render_transcript

    with open_store(ctx, tenant=tenant, read_only=True) as store:
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
    tenant: TenantOption = None,
) -> None:
    """Full-text search over text, thinking, tool calls and results, on every branch."""
    from memstore.terminal import data_table, format_time

    with open_store(ctx, tenant=tenant, read_only=True) as store:
        if session is not None:
            existing_session(store, session)
        hits = store.search(query, session_id=session, limit=limit, timeout=timeout)
        short = {} if as_json else short_ids(store, [(hit.session_id, hit.node_id) for hit in hits])
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
            shown_id(short, hit.session_id, hit.node_id),
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
    tenant: TenantOption = None,
) -> None:
    """Run one read-only SQL query (the views turns, blocks, tool_calls, session_stats help)."""
    from memstore.terminal import data_table

    shown = limit if as_json else min(limit, SQL_TABLE_ROWS)  # a table is read, JSON is piped
    with open_store(ctx, tenant=tenant, read_only=True) as store:
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
    tenant: TenantOption = None,
) -> None:
    """Totals over the store: sessions, nodes, tool calls, failures, most used tools; or, with
    `--by`, what the model calls cost, the most expensive first."""
    from memstore.terminal import data_table

    if by is not None:
        with open_store(ctx, tenant=tenant, read_only=True) as store:
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
    with open_store(ctx, tenant=tenant, read_only=True) as store:
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
