"""Deleting what is no longer wanted: `delete`, `prune` and `memstore expiry`."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any

import typer
from rich.markup import escape

from memstore.cli._common import (
    TenantOption,
    app,
    confirm,
    counted,
    emit_json,
    existing_session,
    friendly_errors,
    json_record,
    listed_short_ids,
    open_store,
    out,
    time_option,
)
from memstore.errors import InvalidArgumentError


@app.command("delete")
@friendly_errors
def delete(
    ctx: typer.Context,
    sessions: Annotated[
        list[str], typer.Argument(help="The sessions to delete.", show_default=False)
    ],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Delete without asking.")] = False,
    tenant: TenantOption = None,
) -> None:
    """Delete sessions, every branch and record of them (after asking, unless `--yes`).

    Every session named must exist; nothing is deleted otherwise.
    """
    with open_store(ctx, tenant=tenant) as store:
        for session in sessions:
            existing_session(store, session)
        if not yes:
            confirm(f"Delete {len(sessions)} session(s): {', '.join(sessions)}?", "deleted")
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
    tenant: TenantOption = None,
) -> None:
    """Delete whole sessions, or the branches no head reaches; by default only say what would go.

    The sessions matching every session filter given (`--older-than`, `--tag`, `--expired`) go
    whole; `--unreachable` deletes the nodes no head reaches from every other session (each
    head's ancestors stay). Each session and node is listed with the bytes of its stored turns;
    `--yes` deletes exactly that, in one transaction. SQLite's file shrinks after `VACUUM`.
    """
    from memstore.store.plans.paging import tag_filter

    older = _duration(older_than, "--older-than")
    tag = tag_filter(tag, "--tag")
    if older is None and tag is None and not expired and not unreachable:
        raise InvalidArgumentError(
            "prune needs a filter: --older-than, --tag, --expired or --unreachable (none would "
            "delete every session)"
        )
    with open_store(ctx, tenant=tenant, read_only=dry_run) as store:
        report = store.prune(
            older_than=older, tag=tag, expired=expired, unreachable=unreachable, dry_run=dry_run
        )
        branches = {branch.session_id: branch.node_ids for branch in report.branches}
        listed = {} if as_json else listed_short_ids(store, branches)
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
                "rolledUp": json_record(report.rolled_up),
            }
        )
        return
    verb = "deleted" if report.deleted else "would delete"
    lines = [
        f"{verb} session {escape(session.id)}: {counted(session.node_count, 'node', '0 nodes')}, "
        f"{session.bytes:,} bytes"
        for session in report.sessions
    ]
    lines += [
        f"{verb} {counted(len(branch.node_ids), 'node', '0 nodes')} no head reaches in session "
        f"{escape(branch.session_id)} ({branch.bytes:,} bytes): {listed[branch.session_id]}"
        for branch in report.branches
    ]
    total = (
        f"{counted(len(report.sessions), 'session', '0 sessions')} and "
        f"{counted(report.node_count, 'node', '0 nodes')}, {report.bytes:,} bytes of stored turns"
    )
    rolled = report.rolled_up
    if rolled.calls:
        lines.append(
            f"{'kept' if report.deleted else 'would keep'} the usage of the pruned branches' "
            f"{counted(rolled.calls, 'model call', '0 model calls')} in their sessions' totals: "
            f"${rolled.cost_usd:,.6f}, {rolled.input_tokens:,} input and "
            f"{rolled.output_tokens:,} output tokens"
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
    """A duration in ms as `_duration` reads it, in the largest unit that divides it (none:
    `0s`)."""
    if ms == 0:
        return "0s"
    for unit, seconds in sorted(_DURATION_UNITS.items(), key=lambda item: -item[1]):
        if ms % (seconds * 1000) == 0:
            return f"{ms // (seconds * 1000)}{unit}"
    return f"{ms}ms"


def _expiry_json(session_id: str, expires_at: int | None) -> dict[str, Any]:
    return {"sessionId": session_id, "expiresAt": expires_at}


def _set_expiries(
    ctx: typer.Context,
    sessions: list[str],
    expires_at: int | None,
    as_json: bool,
    tenant: str | None,
) -> None:
    """Give every session in `sessions` (all of which must exist) the expiry `expires_at`,
    all or none."""
    with open_store(ctx, tenant=tenant) as store:
        store.set_expiry(sessions, expires_at)
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
    tenant: TenantOption = None,
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
        expires_at = time_option(at, "--at", minimum=0)
    else:
        expires_at = now_ms() + later // timedelta(milliseconds=1)
    _set_expiries(ctx, sessions, expires_at, as_json, tenant)


@expiry_app.command("clear")
@friendly_errors
def expiry_clear(
    ctx: typer.Context,
    sessions: Annotated[list[str], typer.Argument(help="The sessions.", show_default=False)],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    tenant: TenantOption = None,
) -> None:
    """Remove sessions' own expiry, back to their tags' or the store's default.

    Every session named must exist; nothing is changed otherwise.
    """
    _set_expiries(ctx, sessions, None, as_json, tenant)


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
    tenant: TenantOption = None,
) -> None:
    """Set (or `--remove`) the store's default expiry, or a tag's with `--tag`.

    A session without an expiry of its own expires that long after its last update: by the
    longest default among its tags that have one, else by the store's.
    """
    if (after is None) != remove:
        raise InvalidArgumentError("give a duration (90d) or --remove, not both or neither")
    from memstore.store.plans.paging import tag_filter

    tag = tag_filter(tag, "--tag")
    scope = "the store" if tag is None else f"tag {escape(tag)}"
    with open_store(ctx, tenant=tenant) as store:
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
    tenant: TenantOption = None,
) -> None:
    """List the store's default expiry and each tag's."""
    with open_store(ctx, tenant=tenant, read_only=True) as store:
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
