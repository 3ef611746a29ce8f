"""`memstore expiry`: a session's own expiry and the store's and tags' defaults, from the
command line, on SQLite and PostgreSQL; `prune --expired` honours what it sets."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import pytest

from memstore import ExpiryDefaults, SessionStore

from .test_cli import invoke
from .test_prune import DAY, say


def test_memstore_expiry_sets_and_clears_a_sessions_own_expiry(database_url: str) -> None:
    with SessionStore(database_url) as store:
        store.append("a", say("hello"))
        store.append("b", say("hello"))
    code, stdout, _ = invoke(database_url, "expiry", "set", "a", "b", "--at", "2027-01-01")
    assert code == 0
    assert "a expires at 2027-01-01 00:00:00 UTC" in stdout
    new_year = int(datetime(2027, 1, 1, tzinfo=UTC).timestamp() * 1000)
    with SessionStore(database_url) as store:
        assert store.session_info("a").expires_at == new_year
        assert store.session_info("b").expires_at == new_year
        assert [s.id for s in store.prune(expired=True, now=new_year).sessions] == ["a", "b"]
        assert store.prune(expired=True, now=new_year - 1).sessions == ()

    before = int(time.time() * 1000)
    code, stdout, _ = invoke(database_url, "expiry", "set", "a", "--in", "30d", "--json")
    after = int(time.time() * 1000)
    assert code == 0
    [shown] = json.loads(stdout)
    assert shown["sessionId"] == "a"
    assert before + 30 * DAY <= shown["expiresAt"] <= after + 30 * DAY
    code, stdout, _ = invoke(database_url, "sessions", "--json")
    assert {s["sessionId"]: s["expiresAt"] for s in json.loads(stdout)} == {
        "a": shown["expiresAt"],
        "b": new_year,
    }

    code, stdout, _ = invoke(database_url, "expiry", "clear", "a", "--json")
    assert code == 0
    assert json.loads(stdout) == [{"sessionId": "a", "expiresAt": None}]
    with SessionStore(database_url) as store:
        assert store.session_info("a").expires_at is None
        assert store.session_info("b").expires_at == new_year


def test_memstore_expiry_default_sets_lists_and_removes_defaults(database_url: str) -> None:
    with SessionStore(database_url) as store:
        store.append("chat", say("hello"))
        store.append("scratch", say("hello"))
        store.update_session("scratch", tags=["scratch"])
    assert invoke(database_url, "expiry", "default", "365d")[0] == 0
    code, stdout, _ = invoke(database_url, "expiry", "default", "2w", "--tag", "scratch")
    assert code == 0
    assert "tag scratch: sessions expire 2w after their last update" in stdout
    with SessionStore(database_url) as store:
        assert store.expiry_defaults() == ExpiryDefaults(365 * DAY, {"scratch": 14 * DAY})
        updated = store.session_info("scratch").updated_at
        expired = store.prune(expired=True, now=updated + 14 * DAY)
        assert [s.id for s in expired.sessions] == ["scratch"]

    code, stdout, _ = invoke(database_url, "expiry", "defaults")
    assert code == 0
    assert stdout.splitlines() == ["the store: 365d", "tag scratch: 2w"]
    code, stdout, _ = invoke(database_url, "expiry", "defaults", "--json")
    assert code == 0
    assert json.loads(stdout) == {
        "store": {"afterMs": 365 * DAY, "after": "365d"},
        "tags": [{"tag": "scratch", "afterMs": 14 * DAY, "after": "2w"}],
    }

    assert invoke(database_url, "expiry", "default", "--remove")[0] == 0
    assert invoke(database_url, "expiry", "default", "--remove", "--tag", "scratch")[0] == 0
    with SessionStore(database_url) as store:
        assert store.expiry_defaults() == ExpiryDefaults()
    code, stdout, _ = invoke(database_url, "expiry", "defaults", "--json")
    assert json.loads(stdout) == {"store": None, "tags": []}
    assert invoke(database_url, "expiry", "defaults")[1].splitlines() == ["the store: no default"]


def test_a_default_of_no_time_is_listed_as_0s(database_url: str) -> None:
    """`expiry default 0s` (sessions expire at their last update) lists as `0s`, as it was set
    (it read `0w`, the largest unit that divides 0)."""
    assert invoke(database_url, "expiry", "default", "0s")[0] == 0
    code, stdout, _ = invoke(database_url, "expiry", "defaults")
    assert (code, stdout.splitlines()) == (0, ["the store: 0s"])
    code, stdout, _ = invoke(database_url, "expiry", "defaults", "--json")
    assert json.loads(stdout)["store"] == {"afterMs": 0, "after": "0s"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("set", "s"), "give exactly one of --at (a time) and --in (a duration)"),
        (("set", "s", "--in", "1d", "--at", "2027-01-01"), "give exactly one of --at"),
        (("set", "s", "--in", "30"), "--in: '30' is no duration"),
        (("set", "s", "--in", "99999999999999w"), "longer than memstore can hold"),
        (("set", "s", "--at", "next tuesday"), "--at is epoch milliseconds or an ISO date"),
        (("set", "s", "--at", "-5"), "--at: '-5' is out of range (epoch milliseconds from 0 to"),
        (("set", "s", "missing", "--in", "1d"), "no session 'missing'"),
        (("clear", "s", "missing"), "no session 'missing'"),
        (("default",), "give a duration (90d) or --remove"),
        (("default", "90d", "--remove"), "give a duration (90d) or --remove"),
        (("default", "90"), "AFTER: '90' is no duration"),
        (("default", "90d", "--tag", ""), "--tag: a tag is a non-empty string, not ''"),
    ],
)
def test_memstore_expiry_refuses_bad_arguments_and_changes_nothing(
    sqlite_url: str, args: tuple[str, ...], message: str
) -> None:
    with SessionStore(sqlite_url) as store:
        store.append("s", say("hello"))
        store.update_session("s", expires_at=123)
    code, _, stderr = invoke(sqlite_url, "expiry", *args)
    assert code != 0
    assert message in " ".join(stderr.split())
    with SessionStore(sqlite_url) as store:
        assert store.session_info("s").expires_at == 123
        assert store.expiry_defaults() == ExpiryDefaults()


@pytest.mark.parametrize("verb", [("set", "--in", "1d"), ("clear",)])
def test_memstore_expiry_with_an_unknown_session_among_others_changes_none(
    database_url: str, verb: tuple[str, ...]
) -> None:
    """One transaction (`store.set_expiry`): a bad id after good ones leaves them as they
    were, and creates no session."""
    with SessionStore(database_url) as store:
        for session in ("a", "b"):
            store.append(session, say("hello"))
            store.update_session(session, expires_at=123)
    code, _, stderr = invoke(database_url, "expiry", verb[0], "a", "b", "missing", *verb[1:])
    assert code != 0
    assert "no session 'missing'" in stderr
    with SessionStore(database_url) as store:
        assert store.list_sessions() == ["a", "b"]
        assert [info.expires_at for info in store.sessions(order="id")] == [123, 123]
