"""The usage a prune deletes stays in the totals (`pruned_usage`): on SQLite and PostgreSQL, sync
and async. A session's totals, `usage_stats` by session, model and day, and the `usage` view's
sums are the same before and after a prune of a compacted session's old branch; a session
deleted whole or erased takes its rolled-up usage with it; tenants keep their own."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any

from memstore import CompactionPolicy, ModelCard, SessionStore, UsageRollup
from memstore.invokers import extractive

from .test_cli import invoke

CARD = ModelCard(id="summarizer", context_window=4000, max_output_tokens=500)
DAY = 86_400_000
START = 1_767_225_600_000  # 2026-01-01 UTC


def usage_of(n: int) -> dict[str, Any]:
    """A model call's usage, varied by `n`: two models, cache tokens now and then."""
    return {
        "inputTokens": 100 + n,
        "outputTokens": 10 + n % 7,
        "cacheReadTokens": n * 3 if n % 3 == 0 else None,
        "costUsd": 0.001 * (n % 5 + 1),
        "model": "big" if n % 2 else "small",
        "provider": "acme-ai",
    }


def seed(store: SessionStore, session_id: str, turns: int) -> None:
    """`turns` long turns over three days, every answer with its usage."""
    clock = itertools.count(START, DAY // 10)
    turns_and_usage = [
        (
            {"role": role, "blocks": [{"kind": "text", "text": f"turn {n} " + "words " * 120}]},
            usage_of(n) if role == "assistant" else None,
        )
        for n in range(turns)
        for role in ["user" if n % 2 == 0 else "assistant"]
    ]
    for turn, usage in turns_and_usage:
        store.append(session_id, turn, created_at=next(clock), usage=usage)


def totals(store: SessionStore) -> dict[str, Any]:
    """Every total of usage memstore gives: per session, by session, model and day, and the
    `usage` view's sums by session, model and day."""
    fields = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
    view = {
        by: store.read_only_query(
            f"SELECT {by}, sum(calls), sum(input_tokens), sum(output_tokens), "
            f"sum(cache_read_tokens), round(sum(cost_usd) * 1000000000) FROM usage GROUP BY {by} "
            f"ORDER BY {by}"
        ).rows
        for by in ("session_id", "day")
    }
    return {
        "sessions": {
            info.id: (*(getattr(info, name) for name in fields), info.cost_usd)
            for info in store.sessions()
        },
        "stats": {by: store.usage_stats(by) for by in ("session", "model", "day")},
        "view": view,
    }


def compacted(store: SessionStore) -> None:
    """`s`, compacted; `fork`, forked from its old branch (a copy of some of its calls)."""
    seed(store, "s", 60)
    store.fork_session("s", store.load_path_nodes("s")[20].id, "fork")
    store.compact_session("s", CARD, extractive(), CompactionPolicy(keep_recent=6))
    store.append("s", {"role": "user", "blocks": [{"kind": "text", "text": "after"}]})


def test_totals_are_the_same_before_and_after_a_prune_of_a_compacted_sessions_old_branch(
    store: SessionStore,
) -> None:
    compacted(store)
    before = totals(store)
    dry = store.prune(unreachable=True)
    pruned = {branch.session_id: set(branch.node_ids) for branch in dry.branches}
    assert set(pruned) == {"s"}
    calls = store.read_only_query(
        "SELECT node_id, input_tokens, output_tokens, cost_usd FROM usage WHERE session_id = 's'"
    ).rows
    gone = [row for row in calls if row[0] in pruned["s"]]
    assert gone  # the old branch carried usage
    expected = UsageRollup(
        calls=len(gone),
        input_tokens=sum(row[1] for row in gone),
        output_tokens=sum(row[2] for row in gone),
        cache_read_tokens=dry.rolled_up.cache_read_tokens,
        cost_usd=round(sum(row[3] for row in gone), 9),
    )
    assert dry.rolled_up == expected
    assert expected.cache_read_tokens > 0
    report = store.prune(unreachable=True, dry_run=False)
    assert report.rolled_up == dry.rolled_up
    assert totals(store) == before
    assert store.read_only_query("SELECT count(*) FROM usage WHERE node_id IS NULL").rows[0][0] > 0
    # The fork's copies of the pruned calls count once by model and day (there): not counted
    # in the rolled-up rows.
    assert store.read_only_query("SELECT count(*) FROM pruned_usage WHERE counted = 0").rows[0][0]


def test_a_second_prune_adds_to_the_rolled_up_rows(store: SessionStore) -> None:
    compacted(store)
    store.prune(unreachable=True, dry_run=False)
    rows = store.read_only_query("SELECT count(*) FROM pruned_usage").rows[0][0]
    store.compact_session("s", CARD, extractive(), CompactionPolicy(keep_recent=2))
    before = totals(store)
    report = store.prune(unreachable=True, dry_run=False)
    assert report.node_count > 0
    assert totals(store) == before
    # the summary's own usage is the extractive summarizer's (none), the rest fits the rows
    assert store.read_only_query("SELECT count(*) FROM pruned_usage").rows[0][0] <= rows + 2


def test_a_session_deleted_or_erased_whole_takes_its_rolled_up_usage(store: SessionStore) -> None:
    compacted(store)
    store.prune(unreachable=True, dry_run=False)
    store.fork_session("s", None, "copy")
    store.update_session("s", tags=["old"])
    assert store.read_only_query("SELECT DISTINCT session_id FROM pruned_usage").rows == [("s",)]
    store.prune(tag="old", dry_run=False)
    assert store.read_only_query("SELECT count(*) FROM pruned_usage").rows == [(0,)]
    assert {row.key for row in store.usage_stats("session")} == {"fork", "copy"}
    compacted_again = "t"
    seed(store, compacted_again, 20)
    store.compact_session(compacted_again, CARD, extractive(), CompactionPolicy(keep_recent=2))
    store.prune(unreachable=True, dry_run=False)
    assert store.read_only_query("SELECT count(*) FROM pruned_usage").rows[0][0] > 0
    store.erase(session_id=compacted_again, reason="asked", dry_run=False)
    assert store.read_only_query("SELECT count(*) FROM pruned_usage").rows == [(0,)]
    assert store.session_info("copy").input_tokens > 0  # a fork keeps its own


def test_tenants_keep_their_own_rolled_up_usage(open_store: Callable[..., SessionStore]) -> None:
    acme, globex = open_store(tenant="acme"), open_store(tenant="globex")
    compacted(acme)
    compacted(globex)
    globex_before = totals(globex)
    acme_before = totals(acme)
    acme.prune(unreachable=True, dry_run=False)
    assert totals(acme) == acme_before
    assert totals(globex) == globex_before
    assert globex.read_only_query("SELECT count(*) FROM pruned_usage").rows == [(0,)]
    assert acme.read_only_query("SELECT count(*) FROM pruned_usage").rows[0][0] > 0
    globex.prune(unreachable=True, dry_run=False)
    assert totals(globex) == globex_before
    assert totals(acme) == acme_before


def test_memstore_prune_says_what_usage_it_keeps(database_url: str) -> None:
    with SessionStore(database_url) as store:
        compacted(store)
        rolled = store.prune(unreachable=True).rolled_up
    text = invoke(database_url, "prune", "--unreachable")[1]
    assert f"would keep the usage of the pruned branches' {rolled.calls} model calls" in text
    done = json.loads(invoke(database_url, "prune", "--unreachable", "--yes", "--json")[1])
    assert done["rolledUp"] == {
        "calls": rolled.calls,
        "inputTokens": rolled.input_tokens,
        "outputTokens": rolled.output_tokens,
        "cacheReadTokens": rolled.cache_read_tokens,
        "cacheWriteTokens": 0,
        "costUsd": rolled.cost_usd,
    }
    text = invoke(database_url, "prune", "--unreachable", "--yes")[1]
    assert "usage" not in text  # nothing left to prune
