"""Listing sessions page by page (issue 30): keyset cursors, the updated_before/after window, and
paging while other writers write. SQLite and PostgreSQL, sync and async."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime
from typing import Any

import pytest

from memstore import InvalidArgumentError
from memstore.store import SessionStore


def turn(text: str) -> dict[str, Any]:
    return {"role": "user", "blocks": [{"kind": "text", "text": text}]}


def all_pages(store: SessionStore, **filters: Any) -> list[list[str]]:
    pages: list[list[str]] = []
    cursor = None
    while True:
        page = store.session_page(cursor=cursor, **filters)
        pages.append([info.id for info in page.sessions])
        if page.next_cursor is None:
            return pages
        cursor = page.next_cursor


def make_sessions(store: SessionStore, count: int) -> None:
    for number in range(count):
        store.append(f"s{number:03}", turn(str(number)))
        if number % 4 == 0:
            store.update_session(f"s{number:03}", tags=["even"])


@pytest.mark.parametrize("order", ["updated", "id"])
def test_pages_are_the_listing_cut_in_pieces(store: SessionStore, order: Any) -> None:
    make_sessions(store, 23)
    listing = [info.id for info in store.sessions(order=order)]
    if order == "id":
        assert listing == sorted(listing)
    for size in (1, 5, 23, 100):
        pages = all_pages(store, limit=size, order=order)
        assert [sid for page in pages for sid in page] == listing
        assert all(len(page) == size for page in pages[:-1])
        assert 0 < len(pages[-1]) <= size
    tagged = all_pages(store, limit=2, order=order, tag="even")
    assert [sid for page in tagged for sid in page] == [
        info.id for info in store.sessions(order=order, tag="even")
    ]
    assert len([sid for page in tagged for sid in page]) == 6


def test_a_cursor_continues_sessions_too(store: SessionStore) -> None:
    make_sessions(store, 9)
    first = store.session_page(limit=4)
    rest = store.sessions(cursor=first.next_cursor)
    assert [i.id for i in first.sessions + rest] == [i.id for i in store.sessions()]


def test_the_time_window_bounds_updated_at_exclusively(store: SessionStore) -> None:
    make_sessions(store, 12)
    infos = store.sessions()
    times = sorted({info.updated_at for info in infos})
    middle = times[len(times) // 2]
    before = store.sessions(updated_before=middle)
    after = store.sessions(updated_after=middle)
    assert {i.id for i in before} == {i.id for i in infos if i.updated_at < middle}
    assert {i.id for i in after} == {i.id for i in infos if i.updated_at > middle}
    as_datetime = datetime.fromtimestamp(middle / 1000, UTC)
    assert store.sessions(updated_before=as_datetime) == before
    paged = all_pages(store, limit=3, updated_after=middle)
    assert [sid for page in paged for sid in page] == [i.id for i in after]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"cursor": "not a cursor"}, "not a session cursor"),
        ({"cursor": "WyJ1IiwxXQ"}, "not a session cursor"),  # ["u",1]
        ({"order": "title"}, "'updated' or 'id'"),
        ({"updated_before": "yesterday"}, "updated_before"),
        ({"updated_after": datetime(2026, 1, 1)}, "time zone"),
        ({"limit": 0}, "whole number >= 1"),
        ({"updated_after": 2**70}, "updated_after is epoch milliseconds"),
        ({"updated_before": -(2**63) - 1}, "updated_before is epoch milliseconds"),
    ],
)
def test_bad_paging_arguments_are_refused_clearly(
    store: SessionStore, arguments: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        store.session_page(**arguments)


def test_a_cursor_of_one_order_is_refused_in_the_other(store: SessionStore) -> None:
    make_sessions(store, 3)
    cursor = store.session_page(limit=1, order="id").next_cursor
    with pytest.raises(InvalidArgumentError, match="pages in 'id' order"):
        store.sessions(cursor=cursor)


@pytest.mark.parametrize("order", ["updated", "id"])
def test_paging_while_sessions_are_written(store: SessionStore, order: Any) -> None:
    """Between pages, another writer appends to random sessions (seen and not yet seen) and
    creates new ones. In id order every session that existed at the start is listed exactly
    once; in updated order none is listed twice, and every session not written meanwhile is
    listed (one written before it was reached has moved ahead of the cursor)."""
    make_sessions(store, 40)
    existing = {info.id for info in store.sessions()}
    rng = random.Random(30)
    seen: list[str] = []
    written: set[str] = set()
    cursor = None
    new = 0
    while True:
        page = store.session_page(cursor=cursor, limit=3, order=order)
        seen.extend(info.id for info in page.sessions)
        for _ in range(2):
            target = rng.choice(sorted(existing))
            store.append(target, turn("more"))
            written.add(target)
        store.append(f"n{new:03}", turn("new"))
        store.append(f"a{new:03}", turn("new"))  # sorts before every s... id
        new += 1
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert len(seen) == len(set(seen)), "a session was listed twice"
    if order == "id":
        assert existing <= set(seen)
    else:
        assert existing - written <= set(seen)


def test_the_command_line_pages_with_the_cursor_its_json_gives(database_url: str) -> None:
    from typer.testing import CliRunner

    from memstore.cli import app

    with SessionStore(database_url) as store:
        make_sessions(store, 7)
        listing = [info.id for info in store.sessions()]
    runner = CliRunner()
    seen: list[str] = []
    arguments = ["--db", database_url, "sessions", "--json", "--page-size", "3"]
    while True:
        result = runner.invoke(app, arguments)
        assert result.exit_code == 0, result.output
        page = json.loads(result.stdout)
        seen.extend(item["sessionId"] for item in page["sessions"])
        if page["nextCursor"] is None:
            break
        cursor = page["nextCursor"]
        arguments = [*arguments[:5], "3", "--cursor", cursor]
    assert seen == listing
    table = runner.invoke(app, ["--db", database_url, "sessions", "--page-size", "2"])
    assert table.exit_code == 0
    assert f"next page: memstore --db {database_url} sessions --page-size 2 --cursor " in (
        table.stderr.replace("'", "")
    )
    from_environment = runner.invoke(
        app, ["sessions", "--page-size", "2"], env={"MEMSTORE_DB": database_url}
    )
    assert "next page: memstore sessions --page-size 2 --cursor " in from_environment.stderr
    bad = runner.invoke(app, ["--db", database_url, "sessions", "--updated-before", "soon"])
    assert bad.exit_code == 2
    assert "--updated-before is epoch milliseconds" in bad.stderr
    refusals = {  # each naming the option given, not the library's argument
        ("--updated-after", str(2**64)): f"--updated-after: '{2**64}' is out of range",
        ("--cursor", "abc"): "--cursor: 'abc' is not a session cursor (a page's nextCursor)",
        ("--cursor", cursor, "--order", "id"): "--cursor pages in 'updated' order, not --order id",
    }
    for given, message in refusals.items():
        refused = runner.invoke(app, ["--db", database_url, "sessions", *given])
        assert refused.exit_code == 2
        assert message in " ".join(refused.stderr.split())
    for paging in ([], ["--page-size", "2"]):
        empty = runner.invoke(app, ["--db", database_url, "sessions", "--tag", "", *paging])
        assert empty.exit_code == 2
        assert "--tag: a tag is a non-empty string, not ''" in empty.stderr
    later = runner.invoke(
        app, ["--db", database_url, "sessions", "--json", "--updated-after", "2100-01-01"]
    )
    assert json.loads(later.stdout) == []


def test_the_command_lines_next_page_hint_keeps_the_order_filters_and_page_size(
    database_url: str,
) -> None:
    """The hint a table prints is the whole next command, the database given before it
    included: following it lists the next page (it said `--cursor X` alone, which an
    `--order id` cursor refuses without `--order id`)."""
    import shlex

    from typer.testing import CliRunner

    from memstore.cli import app

    with SessionStore(database_url) as store:
        make_sessions(store, 9)
        wanted = [info.id for info in store.sessions(tag="even", order="id")]
    runner = CliRunner()
    arguments = ["--db", database_url, "sessions", "--tag", "even", "--order", "id"]
    arguments += ["--page-size", "2"]
    seen: list[str] = []
    while True:
        result = runner.invoke(app, [*arguments, "--json"])
        assert result.exit_code == 0, result.output
        seen.extend(item["sessionId"] for item in json.loads(result.stdout)["sessions"])
        table = runner.invoke(app, arguments)
        assert table.exit_code == 0, table.output
        if "next page:" not in table.stderr:
            break
        hint = table.stderr.split("next page:", 1)[1].strip()
        program, *arguments = shlex.split(hint)
        assert program == "memstore"
    assert seen == wanted
