"""Erasing a person's data with every copy of it: `erase`, `erasures` (the receipts) and
`vacuum` (SQLite: no erased byte left in the file). See docs/erasure.md."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from memstore.cli._common import (
    TenantOption,
    app,
    counted,
    emit_json,
    friendly_errors,
    listed_short_ids,
    open_store,
    out,
)
from memstore.errors import InvalidArgumentError

if TYPE_CHECKING:
    from memstore.store.plans.erasure import ErasureReport
    from memstore.store.plans.erasure_receipts import ErasureReceipt


def _subject(text: str | None) -> tuple[str, str] | None:
    """`KEY=VALUE` as the pair `erase(subject=)` takes (split at the first `=`).

    Raises:
        InvalidArgumentError: naming --subject, when there is no `=`.
    """
    if text is None:
        return None
    key, equals, value = text.partition("=")
    if not equals:
        raise InvalidArgumentError(
            f"--subject: {text!r} is not KEY=VALUE (a metadata key and its value: user_id=u-42)"
        )
    return key, value


_OPTIONS = {"reason": "--reason", "session": "--session", "node": "--node", "subject": "--subject"}
"""How `erase`'s refusals name what was given: by the options."""


def _target_json(scope: str, target: str) -> dict[str, Any]:
    """A receipt's `target` (the session id, `session/node` or `key=value`) as JSON: a session
    (and node) by `sessionId` and `nodeId`, as every command names them, or a subject."""
    if scope == "subject":
        key, _, value = target.partition("=")
        return {"key": key, "value": value}
    if scope == "node":
        session_id, _, node_id = target.rpartition("/")  # a node id is hex: the last / ends it
        return {"sessionId": session_id, "nodeId": node_id}
    return {"sessionId": target}


def _reached_json(
    sessions: Iterable[str],
    nodes: Mapping[str, Iterable[str]],
    held: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """The sessions deleted whole (with the nodes each `held`, when known: `erase` reports
    them, a receipt does not keep them) and the nodes tombstoned, as both commands' `--json`
    lists them."""
    return {
        "sessions": [
            {"sessionId": session_id}
            if held is None
            else {"sessionId": session_id, "nodeCount": held.get(session_id, 0)}
            for session_id in sessions
        ],
        "nodes": [
            {"sessionId": session_id, "nodeIds": list(ids)}
            for session_id, ids in sorted(nodes.items())
        ],
    }


def _report_lines(report: ErasureReport, listed: Mapping[str, str]) -> list[str]:
    """The report as `prune` words its own: what goes (each session's nodes as `listed`
    names them), then the totals and what to do next."""
    verb = "erased" if report.erased else "would erase"
    held = {session: report.session_nodes.get(session, 0) for session in report.sessions}
    lines = [
        f"{verb} session {escape(session)} whole (deleted): {counted(count, 'node', '0 nodes')}"
        for session, count in held.items()
    ]
    lines += [
        f"{verb} {counted(len(ids), 'node', '0 nodes')} in session {escape(session)} "
        f"(tombstones): {listed[session]}"
        for session, ids in sorted(report.nodes.items())
    ]
    summaries = f", {report.summaries} of them summaries" if report.summaries else ""
    total = (
        f"{counted(len(report.sessions), 'session', '0 sessions')} and "
        f"{counted(sum(held.values()) + report.node_count, 'node', '0 nodes')}{summaries}"
    )
    if report.erased:
        lines.append(f"erased {total}; receipt {report.receipt}")
    else:
        lines.append(f"would erase {total}; nothing was erased: pass --yes to erase")
    return lines


@app.command("erase")
@friendly_errors
def erase(
    ctx: typer.Context,
    reason: Annotated[
        str,
        typer.Option(
            help="Why (kept in the receipt, never the content): a request's reference.",
            show_default=False,
        ),
    ],
    session: Annotated[
        str | None,
        typer.Option(help="The session to erase whole, or (with --node) the node's session."),
    ] = None,
    node: Annotated[
        str | None, typer.Option(help="The node to erase (its id, or a unique prefix of it).")
    ] = None,
    subject: Annotated[
        str | None,
        typer.Option(
            help="KEY=VALUE: the sessions whose metadata, and the turns whose top-level key, "
            "has that string value (user_id=u-42)."
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run/--yes", help="Only report (the default), or erase.")
    ] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    tenant: TenantOption = None,
) -> None:
    """Erase a session, a node or a subject with every copy memstore made of it; by default
    only say what would go.

    A session goes whole. A node's turn, its copies (compaction's re-appended tail, forks) and
    the summaries made from it become tombstones (`[erased]`), so every path still loads.
    `--yes` erases exactly what the report lists, in one transaction, and writes a receipt
    (`memstore erasures`). On SQLite, `memstore vacuum` then leaves none of the erased bytes in
    the file.
    """
    from memstore.store.plans.erasure import target_of

    pair = _subject(subject)
    if node is not None and session is None:
        raise InvalidArgumentError("--node needs --session, the session that holds the node")
    target_of(session, node, pair, reason, names=_OPTIONS)  # refusals naming the options
    with open_store(ctx, tenant=tenant, read_only=dry_run) as store:
        if node is not None and session is not None:
            node = store.resolve_node_id(session, node)  # a short id, as the tables show them
        report = store.erase(
            reason=reason, session_id=session, node_id=node, subject=pair, dry_run=dry_run
        )
        vacuum_needed = store.backend.secure_delete
        listed = {} if as_json else listed_short_ids(store, report.nodes)
    if as_json:
        emit_json(
            {
                "erased": report.erased,
                "receipt": report.receipt,
                "scope": report.scope,
                "target": _target_json(report.scope, report.target),
                "reason": report.reason,
                **_reached_json(report.sessions, report.nodes, report.session_nodes),
                "nodeCount": report.node_count,
                "summaries": report.summaries,
            }
        )
        return
    lines = _report_lines(report, listed)
    if report.erased and vacuum_needed:
        lines.append("run `memstore vacuum` to leave none of the erased bytes in the file")
    for line in lines:
        out.print(line, soft_wrap=True, highlight=False)


def _receipt_json(receipt: ErasureReceipt) -> dict[str, Any]:
    """A receipt as `--json` prints it: camelCase keys, its target and what it reached as
    `erase --json` prints them."""
    return {
        "id": receipt.id,
        "erasedAt": receipt.erased_at,
        "scope": receipt.scope,
        "target": _target_json(receipt.scope, receipt.target),
        "reason": receipt.reason,
        "sessionsDeleted": receipt.sessions_deleted,
        "nodesErased": receipt.nodes_erased,
        "summariesErased": receipt.summaries_erased,
        **_reached_json(receipt.sessions, receipt.nodes),
    }


@app.command("erasures")
@friendly_errors
def erasures(
    ctx: typer.Context,
    limit: Annotated[int | None, typer.Option(min=0, help="At most this many.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    tenant: TenantOption = None,
) -> None:
    """List the erasure receipts, newest first: when, what, why, and how much went.

    `--json` adds each receipt's targets: the sessions deleted and the nodes tombstoned.
    """
    from memstore.terminal import data_table, format_time

    with open_store(ctx, tenant=tenant, read_only=True) as store:
        receipts = store.erasures(limit=limit)
    if as_json:
        emit_json([_receipt_json(receipt) for receipt in receipts])
        return
    table = data_table(
        ("receipt", "erased (UTC)", "scope", "sessions", "nodes", "summaries", "target", "reason"),
        [
            (
                str(receipt.id),
                format_time(receipt.erased_at),
                receipt.scope,
                str(receipt.sessions_deleted),
                str(receipt.nodes_erased),
                str(receipt.summaries_erased),
                receipt.target,
                receipt.reason,
            )
            for receipt in receipts
        ],
        copyable=(True, True, True, True, True, True, True, False),
        width=out.width,
        spare=("summaries", "scope"),
    )
    out.print(table)


@app.command("vacuum")
@friendly_errors
def vacuum(ctx: typer.Context) -> None:
    """SQLite: rebuild the file so that no byte of deleted or erased content stays in it.

    It merges the full-text indexes, runs `VACUUM` and empties the write-ahead log; it
    rewrites the whole file, so run it after a batch of erasures or prunes. PostgreSQL: nothing
    to do (no SQL finds erased rows; its own VACUUM, autovacuum, reclaims their space).
    """
    with open_store(ctx) as store:
        if not store.backend.secure_delete:
            label = store.backend.label
            out.print(f"nothing to do on {label}: autovacuum reclaims the space", soft_wrap=True)
            return
        path = Path(store.engine.url.database or "")
        before = _file_size(path)
        store.vacuum()
    after = _file_size(path)
    out.print(
        f"vacuumed {escape(str(path))}: {before:,} bytes before, {after:,} after",
        soft_wrap=True,
        highlight=False,
    )


def _file_size(path: Path) -> int:
    """The bytes of a SQLite database: its file and its write-ahead log."""
    wal = path.with_name(path.name + "-wal")
    return sum(part.stat().st_size for part in (path, wal) if part.exists())
