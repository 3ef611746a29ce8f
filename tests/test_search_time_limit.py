"""A search has a time limit (`timeout`, default 10 s): past it, one clear error and the store
goes on (`memstore.store.time_limits`)."""

from __future__ import annotations

import itertools
import subprocess
import sys
from typing import Any

import pytest
import sqlalchemy

from memstore import SessionStore, TimeLimitError
from memstore.errors import InvalidArgumentError, QueryError
from memstore.store import time_limits
from tests.conftest import postgres_server_url

TURNS = 5000  # enough that the search runs past a millisecond, and past 1,000 SQLite VM steps
TOO_SHORT = 1e-9  # PostgreSQL: 1 ms, its shortest


def say(text: str) -> dict[str, Any]:
    return {"role": "user", "blocks": [{"kind": "text", "text": text}]}


@pytest.fixture
def many(store: SessionStore) -> SessionStore:
    store.append_many("s", [say(f"common word number {n}") for n in range(TURNS)], created_at=1)
    return store


def test_a_search_past_its_time_limit_is_stopped_and_the_store_goes_on(
    many: SessionStore,
) -> None:
    with pytest.raises(TimeLimitError) as stopped:
        many.search("common word", timeout=TOO_SHORT)
    assert isinstance(stopped.value, QueryError)
    assert str(stopped.value) == (
        "the search ran longer than 1e-09 s and was stopped (a longer timeout allows more: "
        "memstore search --timeout SECONDS, or search(..., timeout=SECONDS))"
    )
    assert len(many.search("common word", limit=50)) == 50
    assert len(many.search("common word", limit=50, timeout=None)) == 50
    assert many.head("s") is not None


def test_the_limit_ends_with_the_search(
    many: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A search that ended in time leaves nothing on its connection that stops a later one:
    SQLite's progress handler is taken off, PostgreSQL's limit ends with the transaction."""
    now = [0.0]
    monkeypatch.setattr(time_limits, "now", lambda: now[0])
    assert len(many.search("number", timeout=1.0)) == 20
    now[0] = 1000.0  # long past the deadline of the search that ended
    assert len(many.search("common word number", limit=TURNS, timeout=None)) == TURNS
    if many.engine.dialect.name == "postgresql" and isinstance(many.engine, sqlalchemy.Engine):
        with many.engine.connect() as connection:
            assert connection.execute(sqlalchemy.text("SHOW statement_timeout")).scalar() == "0"


def test_a_stopped_search_leaves_no_limit_behind(
    many: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    ticks = itertools.count()  # a second passes at each look at the clock
    monkeypatch.setattr(time_limits, "now", lambda: float(next(ticks)))
    with pytest.raises(TimeLimitError):
        many.search("common word", timeout=TOO_SHORT)
    assert len(many.search("common word number", limit=TURNS, timeout=None)) == TURNS


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), True, "5"])
def test_a_search_time_limit_is_seconds_or_none(store: SessionStore, timeout: Any) -> None:
    with pytest.raises(InvalidArgumentError, match=r"a search time limit is seconds > 0"):
        store.search("anything", timeout=timeout)


def test_a_read_only_query_past_its_time_limit_is_a_time_limit_error(store: SessionStore) -> None:
    endless = (
        "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r) SELECT count(*) FROM r"
    )
    with pytest.raises(TimeLimitError, match=r"ran longer than 0\.2 s"):
        store.read_only_query(endless, timeout=0.2)


def test_the_cli_stops_a_search_past_its_timeout_in_one_line(sqlite_url: str) -> None:
    with SessionStore(sqlite_url) as store:
        store.append_many("s", [say(f"common word number {n}") for n in range(TURNS)])
    base = [sys.executable, "-m", "memstore.cli", "--db", sqlite_url, "search", "common"]
    done = subprocess.run([*base, "--timeout", "0.001"], capture_output=True, text=True)
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith("error: the search ran longer than 0.001 s and was stopped")
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    done = subprocess.run([*base, "--timeout", "60", "--json"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_a_cancellation_is_the_time_limit_only_once_the_limit_has_passed() -> None:
    """PostgreSQL has reported a statement stopped by `statement_timeout` as cancelled "due to
    user request" (SQLSTATE 57014, seen once in CI): past the limit, that counts as the limit;
    before it, it is some other cancel. Both errors here are the server's own."""
    import threading

    import psycopg

    with psycopg.connect(postgres_server_url(), autocommit=True) as connection:
        pid = connection.info.backend_pid
        canceller = threading.Timer(0.3, _cancel_backend, (pid,))
        canceller.start()
        with pytest.raises(psycopg.errors.QueryCanceled) as cancelled:
            connection.execute("SELECT pg_sleep(30)")
        canceller.join()
        connection.execute("SET statement_timeout = 1")
        with pytest.raises(psycopg.errors.QueryCanceled) as timed_out:
            connection.execute("SELECT pg_sleep(30)")
    assert "user request" in str(cancelled.value)
    assert time_limits.stopped_by_time_limit(cancelled.value, elapsed=0.3, seconds=0.2)
    assert not time_limits.stopped_by_time_limit(cancelled.value, elapsed=0.3, seconds=10.0)
    assert time_limits.stopped_by_time_limit(timed_out.value, elapsed=0.001, seconds=10.0)
    assert not time_limits.stopped_by_time_limit(ValueError("canceling"), elapsed=1, seconds=0.1)


def _cancel_backend(pid: int) -> None:
    import psycopg

    with psycopg.connect(postgres_server_url(), autocommit=True) as connection:
        connection.execute("SELECT pg_cancel_backend(%s)", (pid,))
